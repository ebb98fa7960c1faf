"""Reads DeepSpeed's flops-profiler text, and flopscope's report in DeepSpeed's layout, into what
the parity test compares (tests/integration/test_deepspeed_parity.py): the summary's figures and
the detailed profile's rows."""

import re

SUMMARY = ("params per GPU", "fwd MACs per GPU", "fwd flops per GPU")
# `(name): Class(` or the root `Class(`; after the parenthesis, the figures or nothing.
ROW = re.compile(r"^(?P<indent> *)(?:\((?P<name>[^)]*)\): )?(?P<cls>[A-Za-z_]\w*)\((?P<rest>.*)$")
FIGURES = re.compile(r"^\s*(?P<params>[^,()]+ = [-\d.e+]+% Params), "
                     r"(?P<macs>[^,()]+ = [-\d.e+]+% MACs),")


def summary(text):
    """{figure: value as printed} of SUMMARY, flopscope's `(estimated)`-style tags left off."""
    found = {}
    for line in text.splitlines():
        label, sep, value = line.partition(":")
        if sep and label in SUMMARY and label not in found:
            found[label] = re.sub(r"\s+\(.*\)$", "", value.strip())
    return found


def detailed_rows(text):
    """[(path, class, params, MACs)] of the detailed profile, in the order printed: the path is
    the module's qualified name ('' for the model), params and MACs their items as printed
    ('544 = 67.33% Params', '2.05 KMACs = 66.67% MACs'), or None where the row has none (a class
    whose __repr__ leaves out extra_repr). A row the pattern does not read raises ValueError."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "Detailed Profile per GPU" in line)
    root = next(i for i in range(start, len(lines)) if re.match(r"^[A-Za-z_]\w*\($", lines[i]))
    rows, stack = [], []  # stack: (indent, path) of the open containers
    for index in range(root, len(lines)):
        line = lines[index]
        if line.startswith("---"):
            break
        if not line.strip() or line.strip() == ")" or (rows and FIGURES.match(line)
                                                        and not ROW.match(line)):
            continue
        match = ROW.match(line)
        if not match:
            raise ValueError(f"unread row {index + 1}: {line!r}")
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else None
        name = match["name"] or ""
        path = name if not parent else f"{parent}.{name}"
        figures = FIGURES.match(match["rest"])
        if not match["rest"]:  # a container: its figures, if any, on the next line
            figures = FIGURES.match(lines[index + 1]) if index + 1 < len(lines) else None
            stack.append((indent, path))
        rows.append((path, match["cls"], figures["params"] if figures else None,
                     figures["macs"] if figures else None))
    return rows
