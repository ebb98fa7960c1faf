"""Runs the flopscope_torch unit tests; exits 77 (skipped) when torch is not installed, otherwise
with tests/unittest_runner.py's exit code (77 when every test skipped too)."""

import sys
from pathlib import Path

try:
    import torch  # noqa: F401  pylint: disable=unused-import
except ImportError:
    print("flopscope_torch tests skipped: torch is not installed (apt-get install python3-torch)")
    sys.exit(77)

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here.parents[1] / "tests"))
import unittest_runner  # noqa: E402  pylint: disable=wrong-import-position

sys.exit(unittest_runner.main([str(here)]))
