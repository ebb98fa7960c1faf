"""Runs Python unittest tests for ctest and turns the result into its exit code (the one place).

    unittest_runner.py TEST [ARG...]

TEST is a test_*.py file or a folder of them; the file's folder comes first on sys.path, and the
file sees sys.argv as [TEST, ARG...]. Registered by flopscope_python_test
(cmake/FlopscopeTargets.cmake) with SKIP_RETURN_CODE 77. Scripts that also run on their own
(tests/gpu, tests/dist) end with `sys.exit(unittest_runner.run_module(__name__))`.

With FLOPSCOPE_TEST_INTERPRETER=PYTHON in the environment, the runner first runs itself again
under that Python (the *_torch2 tests and integration_deepspeed_parity: the environments
scripts/setup_torch_env.sh makes, docs/testing.md), or exits 77 saying why where that Python is
not there.

The exit code:
  1   a test failed or errored (setUpModule and setUpClass included), or none was found;
  77  every test skipped (skipTest, a skip decorator, SkipTest raised at import or in
      setUpModule/setUpClass): ctest shows the test as skipped;
  0   at least one test passed and none failed; the skipped ones are listed with their reasons.
"""

import os
import sys
import unittest
from pathlib import Path

SKIP = 77
INTERPRETER_ENV = "FLOPSCOPE_TEST_INTERPRETER"


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


def run_under_interpreter(script, argv):
    """Runs `script argv...` again under $FLOPSCOPE_TEST_INTERPRETER where that names another
    Python (this process is replaced, the variable left out of its environment); exits 77 with
    the reason where that Python is not there; returns where the variable is unset."""
    wanted = os.environ.pop(INTERPRETER_ENV, "")
    if not wanted or os.path.abspath(sys.executable) == os.path.abspath(wanted):
        return
    if not os.path.exists(wanted):
        name = Path(wanted).parent.parent.name  # .venv/NAME/bin/python
        print(f"every test skipped: no Python at {wanted} ({INTERPRETER_ENV}): the {name} "
              f"environment, which scripts/setup_torch_env.sh {name} makes (make test runs it)",
              file=sys.stderr)
        sys.exit(SKIP)
    print(f"running under {wanted}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(wanted, [wanted, str(script), *argv])


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    run_under_interpreter(Path(__file__).resolve(), argv)
    target = Path(argv[0]).resolve()
    folder, pattern = (target, "test_*.py") if target.is_dir() else (target.parent, target.name)
    sys.argv = [str(target)] + argv[1:]
    return run(unittest.defaultTestLoader.discover(str(folder), pattern=pattern,
                                                   top_level_dir=str(folder)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
