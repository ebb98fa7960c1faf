"""Runs the flopscope_torch tests (this folder) with pytest, for ctest:

    run_tests.py [FOLDER|FILE] [PYTEST ARG...]

Without a folder or file, the unit tests: this folder but install/ (ctest
flopscope_torch_unittest); install/ is ctest flopscope_torch_install, which pip-installs the
package (a minute, so not part of every unit run).

Exits 77 (ctest: skipped) when torch or pytest is not installed for this Python, and when every
test skipped; otherwise with pytest's exit code (0 passed, 1 a test failed, ...). Under
FLOPSCOPE_TEST_INTERPRETER's Python where it is set (the torch 2 tests, tests/unittest_runner.py).
By hand, with the build tree's package: PYTHONPATH=build/python python3 python/tests/run_tests.py,
or python3 -m pytest python/tests with the same PYTHONPATH (or the package pip-installed)."""

import sys
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here.parents[1] / "tests"))
import unittest_runner  # noqa: E402  pylint: disable=wrong-import-position

SKIP = unittest_runner.SKIP


class SkipCount:
    """A pytest plugin that turns "nothing passed, something skipped" into exit code 77."""

    def __init__(self):
        self.passed = 0
        self.skipped = 0

    def pytest_collectreport(self, report):
        self.skipped += report.skipped  # a module skipped as a whole (pytest.skip, SkipTest)

    def pytest_runtest_logreport(self, report):
        self.passed += report.when == "call" and report.passed
        self.skipped += report.skipped

    def pytest_sessionfinish(self, session, exitstatus):
        # 5: no test collected, which is what a folder of skipped modules gives.
        if exitstatus in (0, 5) and self.passed == 0 and self.skipped:
            print(f"every test skipped ({self.skipped})", file=sys.stderr)
            session.exitstatus = SKIP


def main(argv):
    unittest_runner.run_under_interpreter(Path(__file__).resolve(), argv)
    try:
        import torch  # pylint: disable=import-outside-toplevel
    except ImportError:
        print(f"flopscope_torch tests skipped: torch is not installed for {sys.executable} "
              "(apt-get install python3-torch)")
        return SKIP
    try:
        import pytest  # pylint: disable=import-outside-toplevel
    except ImportError:
        print(f"flopscope_torch tests skipped: pytest is not installed for {sys.executable} "
              "(scripts/setup_deps.sh: python3-pytest; the torch 2 environment pins it)")
        return SKIP
    print(f"torch {torch.__version__}, pytest {pytest.__version__} ({sys.executable})",
          file=sys.stderr)
    if argv and not argv[0].startswith("-"):
        targets, argv = [str(Path(argv[0]).resolve())], argv[1:]
    else:
        targets = [str(here), f"--ignore={here / 'install'}"]
    # -rs: the reason of every skip; the rootdir is python/ (its pyproject.toml configures pytest).
    return int(pytest.main(["-v", "-rs", "--rootdir", str(here.parent), *targets, *argv],
                           plugins=[SkipCount()]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
