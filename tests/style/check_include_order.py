#!/usr/bin/env python3
"""Checks each program's folder order (docs/architecture.md, "Rules the build checks").

The injector's production files may include only "down" the chain

    injector/ (root) -> export/ -> ranges/ -> records/

that is, a folder may include itself and the folders to its right, plus common/ and the two leaves
every folder may use: injector/transport/transport_abi.h (the C ABI) and injector/warn.h (the one
stderr line). injector/cupti/ may include records/, ranges/ and root's seam headers; its
counter_windows/ the same plus cupti/cupti_api.h. Only injector/transport/ may include gRPC,
protobuf (generated flopscope/v1/ headers included) or Abseil: the injector core is loaded into
training jobs that may hold other versions of them.

The daemon and the client are layered: each is a list of stage folders, lowest first (LAYERS),
and a production file in one folder may include only its own folder and the folders before it,
plus common/ and the generated contract (flopscope/v1/). Neither includes another program's code
(injector/, importer/, the other of the two), but for the named exceptions in LAYER_EXCEPTIONS.
A file directly under the program's folder (main.cc) may include any of its folders.

Tests (*_unittest.cc), fuzzers and test helpers (testing/) are not checked.

Usage: check_include_order.py [--root SOURCE_DIR]. Exit 0 when clean; 1 with one line per broken
rule, "path:line: includes X: rule", otherwise.
"""

import argparse
import os
import re
import sys

CHAIN = ["root", "export", "ranges", "records"]
# Leaves any injector folder may include.
SHARED_LEAVES = {"injector/transport/transport_abi.h", "injector/warn.h"}
# Root headers that injector/cupti/ implements or reads (its seam with the session).
ROOT_SEAMS = {
    "injector/kernel_api.h",
    "injector/kernel_tracing.h",
    "injector/injector_config.h",
    "injector/warn.h",
}
# Named exceptions to the folder rules: (including file or folder prefix, included header).
NAMED_EXCEPTIONS = [
    # counter_windows runs on the CUPTI table the tracer loaded.
    ("injector/cupti/counter_windows/", "injector/cupti/cupti_api.h"),
    # The tracer composes the counter collector; the factory builds both.
    ("injector/cupti/kernel_tracer.h", "injector/cupti/counter_windows/counter_collector.h"),
    ("injector/cupti/make_kernel_tracing.cc", "injector/cupti/counter_windows/counter_collector.h"),
    ("injector/cupti/make_kernel_tracing.cc", "injector/cupti/counter_windows/counter_settings.h"),
    # FLOPSCOPE_RECORD_DIR: the one call site that records decoded counter data images.
    ("injector/cupti/counter_windows/pass_evaluator.cc", "injector/cupti/recorder.h"),
]
# Libraries the job may hold in another version: transport/ only.
BANNED_OUTSIDE_TRANSPORT = ("absl/", "grpc/", "grpcpp/", "grpc++/", "google/protobuf/",
                            "flopscope/v1/")
# Top-level project folders by who may include them.
PROJECT_FOLDERS = {"common": None, "counters": {"cupti", "counter_windows"}}
OTHER_PROGRAMS = ("daemon/", "client/", "importer/", "proto/")

# The layered programs: their stage folders, lowest first. A folder not listed here is an error,
# so that a new folder gets its place in the order when it is made.
LAYERS = {
    "daemon": ["base", "validate", "store", "catalog", "report", "access", "retention", "metrics",
               "query", "ingest", "forwarding", "control", "server"],
    "client": ["connect", "model", "text", "documents", "run", "trace_export", "commands"],
}
# Code of another program a layered program may include: (including file, included header).
LAYER_EXCEPTIONS = [
    # `flopscope import` is the importer's command, registered beside the client's own.
    ("client/main.cc", "importer/import_command.h"),
]
# Top-level folders of the programs' own code; common/, proto/ and counters/ are shared.
PROGRAM_FOLDERS = ("injector", "daemon", "client", "importer")

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def folder_of(path):
    """The rule folder of an injector path ("root", "export", ..., "cupti", "counter_windows")."""
    parts = path.split("/")
    if len(parts) == 2:
        return "root"
    if parts[1] == "cupti":
        return "counter_windows" if len(parts) > 3 and parts[2] == "counter_windows" else "cupti"
    return parts[1]


def is_production(path):
    name = os.path.basename(path)
    return (name.endswith((".cc", ".h")) and not name.endswith("_unittest.cc")
            and not name.endswith("_fuzzer.cc") and "/testing/" not in path)


def named_exception(path, header):
    return any(path.startswith(src) and header == dst for src, dst in NAMED_EXCEPTIONS)


def injector_rule(path, src, header):
    """None when `path` (in folder `src`) may include injector header `header`, else the rule."""
    dst = folder_of(header)
    if dst == src or header in SHARED_LEAVES or named_exception(path, header):
        return None
    if src in CHAIN:
        allowed = CHAIN[CHAIN.index(src):]
        if dst in allowed:
            return None
        return ("%s/ may include only %s, common/ and the shared leaves (folder order "
                "root -> export -> ranges -> records)" % (
                    src, ", ".join(f + "/" for f in allowed)))
    if src in ("cupti", "counter_windows"):
        if dst in ("ranges", "records") or header in ROOT_SEAMS:
            return None
        extra = " and cupti/cupti_api.h" if src == "counter_windows" else ""
        return ("%s/ may include only itself, records/, ranges/, root's seam headers (%s)%s" % (
            "cupti/counter_windows" if src == "counter_windows" else "cupti",
            ", ".join(sorted(h.split("/")[-1] for h in ROOT_SEAMS)), extra))
    if src == "transport":
        return "transport/ may include only transport/ and common/ (it is built apart, for dlmopen)"
    return "unknown injector folder %s/" % src


def check_include(path, quote, header):
    """The broken rule for one include of production file `path`, or None."""
    src = folder_of(path)
    if header.startswith(BANNED_OUTSIDE_TRANSPORT) and src != "transport":
        return ("only injector/transport/ may include gRPC, protobuf or Abseil (the core is loaded "
                "into jobs that may hold other versions)")
    if quote != '"':
        return None
    top = header.split("/")[0]
    if top == "injector":
        return injector_rule(path, src, header)
    if top in PROJECT_FOLDERS:
        who = PROJECT_FOLDERS[top]
        if who is None or src in who:
            return None
        return "only injector/cupti/ may include %s/" % top
    if header.startswith(OTHER_PROGRAMS):
        return "the injector may not include another program's code (%s)" % header
    return None


def layer_rule(path, quote, header):
    """The broken rule for one include of layered program file `path`, or None."""
    if quote != '"':
        return None
    program, parts = path.split("/")[0], path.split("/")
    order = LAYERS[program]
    top = header.split("/")[0]
    if top not in PROGRAM_FOLDERS:
        return None
    if (path, header) in LAYER_EXCEPTIONS:
        return None
    if top != program:
        return "%s/ may not include another program's code (%s)" % (program, header)
    dst = header.split("/")[1] if header.count("/") >= 2 else None
    if dst not in order:
        return "%s is in no stage folder of %s/ (LAYERS in this checker)" % (header, program)
    if len(parts) == 2:  # the program's entry (main.cc) sits above every stage
        return None
    src = parts[1]
    if src not in order:
        return "%s/%s/ is no stage folder of %s/ (add it to LAYERS in this checker)" % (
            program, src, program)
    if order.index(dst) <= order.index(src):
        return None
    return "%s/%s/ may include only %s (folder order %s)" % (
        program, src, ", ".join(f + "/" for f in order[:order.index(src) + 1]),
        " -> ".join(order))


def check_file(root, path):
    """Yields "path:line: includes X: rule" for each broken rule in one file."""
    layered = path.split("/")[0] in LAYERS
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, start=1):
            match = INCLUDE_RE.match(line)
            if not match:
                continue
            quote, header = match.groups()
            if layered:
                rule = layer_rule(path, quote, header)
            else:
                rule = check_include(path, quote, header)
            if rule:
                shown = '"%s"' % header if quote == '"' else "<%s>" % header
                yield "%s:%d: includes %s: %s" % (path, number, shown, rule)


def production_files(root, program):
    for directory, _, names in os.walk(os.path.join(root, program)):
        for name in sorted(names):
            path = os.path.relpath(os.path.join(directory, name), root).replace(os.sep, "/")
            if is_production(path):
                yield path


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."),
                        help="the source tree (holds injector/)")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    programs = [p for p in ["injector"] + sorted(LAYERS) if os.path.isdir(os.path.join(root, p))]
    if not programs:
        print("check_include_order: no injector/ or %s under %s" % (
            ", ".join(p + "/" for p in sorted(LAYERS)), root), file=sys.stderr)
        return 2
    checked = 0
    problems = []
    for program in programs:
        for path in sorted(production_files(root, program)):
            checked += 1
            problems.extend(check_file(root, path))
    for problem in problems:
        print(problem)
    if problems:
        print("check_include_order: %d include(s) break a program's folder order "
              "(docs/architecture.md)" % len(problems))
        return 1
    print("check_include_order: %d production files follow the folder order" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
