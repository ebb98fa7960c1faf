"""Runs the flopscope_torch unit tests; exits 77 (skipped) when torch is not installed."""

import sys
import unittest
from pathlib import Path

try:
    import torch  # noqa: F401  pylint: disable=unused-import
except ImportError:
    print("flopscope_torch tests skipped: torch is not installed (apt-get install python3-torch)")
    sys.exit(77)

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here))
suite = unittest.defaultTestLoader.discover(str(here), pattern="test_*.py", top_level_dir=str(here))
result = unittest.TextTestRunner(verbosity=2).run(suite)
sys.exit(0 if result.wasSuccessful() else 1)
