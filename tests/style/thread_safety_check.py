#!/usr/bin/env python3
"""Runs clang's thread-safety analysis over the lock-annotated production code.

The tree builds with GCC, which ignores ABSL_GUARDED_BY and the FS_* annotations of
common/mutex.h. This pass replays each production .cc of daemon/, injector/ and client/ that uses
them (in the file or its header) from the build's compile_commands.json with
`clang++ -fsyntax-only -Wthread-safety -Werror=thread-safety`, so a lock rule broken in the code
fails `make test`. Only thread-safety diagnostics fail it; clang's other warnings are off.

Usage: thread_safety_check.py BUILD_DIR [--jobs N] [--clang clang++]. Exit 0 clean, 1 on a
finding (clang's diagnostics are printed), 77 (ctest: skipped) when clang++ is missing.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

FOLDERS = ("daemon/", "injector/", "client/")
USES_LOCKS = re.compile(r"\b(ABSL_GUARDED_BY|ABSL_EXCLUSIVE_LOCKS_REQUIRED|ABSL_LOCKS_EXCLUDED|"
                        r"absl::Mutex|absl::MutexLock|FS_GUARDED_BY|FS_REQUIRES|FS_EXCLUDES|"
                        r"flopscope::Mutex|MutexLock|Mutex)\b")
# GCC flags clang rejects or warns about (it has no TLS-descriptor switch of that name).
GCC_ONLY = re.compile(r"^-mtls-dialect=")
SKIP_WITH_VALUE = {"-o", "-MF", "-MT", "-MQ"}


def is_production(rel):
    name = os.path.basename(rel)
    return (rel.startswith(FOLDERS) and name.endswith(".cc") and "/testing/" not in rel
            and not name.endswith(("_unittest.cc", "_fuzzer.cc", "_benchmark.cc")))


def uses_locks(path):
    texts = [path, os.path.splitext(path)[0] + ".h"]
    for candidate in texts:
        if os.path.exists(candidate):
            with open(candidate, encoding="utf-8", errors="replace") as f:
                if USES_LOCKS.search(f.read()):
                    return True
    return False


def clang_command(entry, clang):
    """The entry's compile command rewritten for a clang syntax-only thread-safety pass."""
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out = [clang]
    skip = False
    for arg in args[1:]:
        if skip:
            skip = False
            continue
        if arg in SKIP_WITH_VALUE:
            skip = True
            continue
        if (arg == "-c" or arg == entry["file"] or arg.endswith(".cxx") or GCC_ONLY.match(arg)
                or arg.startswith("-W")):
            continue
        out.append(arg)
    return out + ["-fsyntax-only", "-Wno-everything", "-Wthread-safety",
                  "-Werror=thread-safety", entry["file"]]


def run_one(command, directory):
    done = subprocess.run(command, cwd=directory, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    return done.returncode, done.stdout


UNITY_INCLUDE = re.compile(r'^#include "([^"]+)"$', re.MULTILINE)


def sources_of(path):
    """The sources an entry compiles: itself, or, for a unity build's batch (CMake's
    Unity/unity_N_cxx.cxx), the files it includes."""
    if "/Unity/unity_" not in path or not path.endswith(".cxx"):
        return [path]
    with open(path, encoding="utf-8", errors="replace") as f:
        return [os.path.normpath(p) for p in UNITY_INCLUDE.findall(f.read())]


def select(entries, source_dir):
    chosen = {}
    for entry in entries:
        for path in sources_of(os.path.normpath(os.path.join(entry["directory"], entry["file"]))):
            rel = os.path.relpath(path, source_dir).replace(os.sep, "/")
            if is_production(rel) and rel not in chosen and uses_locks(path):
                chosen[rel] = dict(entry, file=path)
    return chosen


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("build_dir")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--clang", default="clang++")
    parser.add_argument("--source-dir",
                        default=os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
    args = parser.parse_args(argv)
    clang = shutil.which(args.clang)
    if not clang:
        print("thread_safety_check: SKIPPED: %s not found (install Debian's clang; "
              "scripts/setup_deps.sh does)" % args.clang)
        return 77
    database = os.path.join(args.build_dir, "compile_commands.json")
    if not os.path.exists(database):
        print("thread_safety_check: no %s (configure with CMAKE_EXPORT_COMPILE_COMMANDS=ON)"
              % database)
        return 1
    with open(database, encoding="utf-8") as f:
        chosen = select(json.load(f), os.path.abspath(args.source_dir))
    if not chosen:  # a check over nothing would pass whatever the code does
        print("thread_safety_check: no lock-annotated production source in %s" % database)
        return 1
    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(run_one, clang_command(e, clang), e["directory"]): rel
                   for rel, e in sorted(chosen.items())}
        for future in concurrent.futures.as_completed(futures):
            code, output = future.result()
            if code != 0 or output.strip():
                failed.append((futures[future], code, output))
    for rel, code, output in sorted(failed):
        print("---- %s (clang exit %d)\n%s" % (rel, code, output.rstrip()))
    if any(code != 0 for _, code, _ in failed):
        print("thread_safety_check: %d of %d files break a lock rule (or clang could not parse "
              "them); see above" % (sum(1 for f in failed if f[1] != 0), len(chosen)))
        return 1
    print("thread_safety_check: %d files pass clang -Werror=thread-safety" % len(chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
