"""`python -m flopscope_torch`: which copy of the package this is and what it runs with: the
native hooks (flopscope_torch._native) or the pure-Python ones, and the NVTX shim
(libflopscope_torch_nvtx.so) or none, each with the reason where it is missing; for a pip-installed
copy the reason is the one its build wrote (build_notes.txt, setup.py). Does not import torch."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Dict, List, Mapping

from . import __version__, nvtx_backend

BUILD_NOTES = "build_notes.txt"  # written by setup.py's build: `<file>: built ...|not built: why`
NATIVE_FILE_PREFIX = "_native"


def build_notes(package: Path) -> Dict[str, str]:
    """The notes of a pip-installed copy, by file name; empty for the build tree's copy."""
    try:
        text = (package / BUILD_NOTES).read_text()
    except OSError:
        return {}
    return dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)


def describe(environ: Mapping[str, str] = os.environ) -> List[str]:
    """The lines `python -m flopscope_torch` prints."""
    package = Path(__file__).resolve().parent
    notes = build_notes(package)
    lines = [f"flopscope_torch {__version__} at {package}"]
    native = nvtx_backend.load_native(environ)
    if native is not None:
        lines.append(f"native hooks: {native.__file__}")
    else:
        if environ.get(nvtx_backend.NATIVE_ENV, "1") == "0":
            why = f"switched off ({nvtx_backend.NATIVE_ENV}=0)"
        else:
            why = next((note for name, note in notes.items()
                        if name.startswith(NATIVE_FILE_PREFIX)), "not built for this Python")
        lines.append(f"native hooks: none, the pure-Python hooks run: {why}")
    try:
        _, shim = nvtx_backend.load_shim(environ)
        lines.append(f"NVTX shim: {shim}")
    except nvtx_backend.NvtxUnavailable as error:
        note = notes.get(nvtx_backend.SHIM_NAME)
        lines.append(f"NVTX shim: none: {note + '; ' if note else ''}{error}")
    listening = "yes" if nvtx_backend.tool_attached(environ) else "no"
    lines.append(f"NVTX tool listening ({nvtx_backend.TOOL_ENV}): {listening}")
    return lines


def main() -> int:
    print("\n".join(describe()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
