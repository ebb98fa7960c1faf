#!/usr/bin/env python3
"""Every environment variable the code reads is documented in docs/environment.md (issue 14 item 7).

The code names its variables as string literals ("FLOPSCOPE_BUFFER_MB"): every such literal in a
production file of the programs (not tests, fuzzers or testing/ helpers) must appear in
docs/environment.md (the tables README.md links to) as `FLOPSCOPE_...`. Exit 0 when all are
there; 1 with the missing names and where each is read.

Usage: check_env_documented.py --root SOURCE_DIR
"""

import argparse
import pathlib
import re
import sys

FOLDERS = ("injector", "client", "daemon", "common", "counters", "importer", "python")
SUFFIXES = {".cc", ".h", ".py"}
PAGE = "docs/environment.md"
LITERAL = re.compile(r"[\"'](FLOPSCOPE_[A-Z0-9_]+)[\"']")


def is_production(path):
    name = path.name
    parts = set(path.parts)
    return (path.suffix in SUFFIXES and "testing" not in parts and "tests" not in parts
            and not name.endswith(("_unittest.cc", "_fuzzer.cc", "_benchmark.cc"))
            and not name.startswith("test_"))


def variables_read(root):
    found = {}
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if not path.is_file() or not is_production(path.relative_to(root)):
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                for name in LITERAL.findall(line):
                    found.setdefault(name, f"{path.relative_to(root)}:{number}")
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True, type=pathlib.Path)
    args = parser.parse_args()
    page = (args.root / PAGE).read_text()
    found = variables_read(args.root)
    missing = {name: where for name, where in found.items() if f"`{name}`" not in page}
    for name, where in sorted(missing.items()):
        print(f"{where}: {name} is read here but {PAGE} does not document it", file=sys.stderr)
    print(f"{len(found)} variables read, {len(missing)} undocumented")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
