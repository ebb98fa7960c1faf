"""Runs Python unittest tests for ctest and turns the result into its exit code (the one place).

    unittest_runner.py TEST [ARG...]

TEST is a test_*.py file or a folder of them; the file's folder comes first on sys.path, and the
file sees sys.argv as [TEST, ARG...]. Registered by flopscope_python_test
(cmake/FlopscopeTargets.cmake) with SKIP_RETURN_CODE 77. Scripts that also run on their own
(tests/gpu, tests/dist) end with `sys.exit(unittest_runner.run_module(__name__))`.

The exit code:
  1   a test failed or errored (setUpModule and setUpClass included), or none was found;
  77  every test skipped (skipTest, a skip decorator, SkipTest raised at import or in
      setUpModule/setUpClass): ctest shows the test as skipped;
  0   at least one test passed and none failed; the skipped ones are listed with their reasons.
"""

import sys
import unittest
from pathlib import Path

SKIP = 77


class _CountingResult(unittest.TextTestResult):
    """TextTestResult that also counts the tests that passed (3.11's keeps no list of them)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.passed = 0

    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed += 1

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.passed += 1


def exit_code(result):
    """0, 1 or 77 for a finished _CountingResult (the rule in this module's docstring)."""
    if not result.wasSuccessful():
        return 1
    if result.passed == 0 and result.skipped:
        print(f"every test skipped ({len(result.skipped)}):", file=sys.stderr)
        code = SKIP
    elif result.passed == 0:
        print("no test found", file=sys.stderr)
        return 1
    else:
        if result.skipped:
            print(f"{result.passed} passed, {len(result.skipped)} skipped:", file=sys.stderr)
        code = 0
    for test, reason in result.skipped:
        print(f"  skipped {test.id()}: {reason}", file=sys.stderr)
    return code


def run(suite):
    """Runs a TestSuite verbosely; the exit code."""
    runner = unittest.TextTestRunner(verbosity=2, resultclass=_CountingResult)
    return exit_code(runner.run(suite))


def run_module(name):
    """Runs the tests of an imported module (a script's `__main__`); the exit code."""
    return run(unittest.defaultTestLoader.loadTestsFromModule(sys.modules[name]))


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    target = Path(argv[0]).resolve()
    folder, pattern = (target, "test_*.py") if target.is_dir() else (target.parent, target.name)
    sys.argv = [str(target)] + argv[1:]
    return run(unittest.defaultTestLoader.discover(str(folder), pattern=pattern,
                                                   top_level_dir=str(folder)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
