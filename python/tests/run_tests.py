"""Runs the flopscope_torch unit tests; exits 77 (skipped) when torch is not installed, otherwise
with tests/unittest_runner.py's exit code (77 when every test skipped too). Under
FLOPSCOPE_TEST_INTERPRETER's Python where it is set (the torch 2 tests)."""

import sys
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here.parents[1] / "tests"))
import unittest_runner  # noqa: E402  pylint: disable=wrong-import-position

# Under $FLOPSCOPE_TEST_INTERPRETER (the torch 2 environment) where the test names one.
unittest_runner.run_under_interpreter(Path(__file__).resolve(), sys.argv[1:])
try:
    import torch  # noqa: E402  pylint: disable=wrong-import-position
except ImportError:
    print(f"flopscope_torch tests skipped: torch is not installed for {sys.executable} "
          "(apt-get install python3-torch)")
    sys.exit(77)

print(f"torch {torch.__version__} ({sys.executable})", file=sys.stderr)
sys.exit(unittest_runner.main([str(here)]))
