"""One command, no daemon (issue 32 items 1 and 3): `flopscope run` with no daemon reachable
starts a private one for the job, prints the job's report, writes its HTML report, leaves no
daemon behind and keeps the data for `flopscope report JOB`; a job that recorded no module range
is told so, with the fix."""

import os
import signal
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

from harness import BUILD_DIR, test_program, tool

LAUNCHER_SIZES = ("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")


class OneCommandTest(unittest.TestCase):

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="flopscope-one-")
        self.root = Path(self._tmp.name)
        runtime = self.root / "run"
        runtime.mkdir(mode=0o700)
        (self.root / "tmp").mkdir()
        self.env = {k: v for k, v in os.environ.items()
                    if k not in LAUNCHER_SIZES and not k.startswith("FLOPSCOPE_")}
        # Nothing of the real user's: home, data, runtime and spool directories are the test's,
        # and the socket named is one where nobody serves.
        self.env.update(HOME=str(self.root / "home"), XDG_DATA_HOME=str(self.root / "data"),
                        XDG_RUNTIME_DIR=str(runtime), TMPDIR=str(self.root / "tmp"),
                        FLOPSCOPE_SOCKET=str(self.root / "nobody.sock"),
                        FLOPSCOPE_SPOOL_DIR=str(self.root / "spool"))
        self.runs = self.root / "data" / "flopscope" / "runs"

    def tearDown(self):
        try:
            self.assertEqual(self.daemons_left(), [])
        finally:
            self._tmp.cleanup()

    def flopscope(self, args, timeout=120):
        return subprocess.run([tool("flopscope"), *args], capture_output=True, text=True,
                              env=self.env, timeout=timeout)

    def daemons_left(self):
        """Processes whose command line names this test's directory (a private daemon's does)."""
        left = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "flopscoped" in cmdline and str(self.root) in cmdline:
                left.append(cmdline)
        return left

    def test_run_with_no_daemon_prints_the_report_and_keeps_the_data(self):
        result = self.flopscope(["run", "--job", "j", "--", test_program("nvtx_phases"),
                                 "--before", "3", "--after", "2"])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(result.stdout.startswith("nvtx_phases done\n"), result.stdout)
        # The same text `flopscope report j` prints, after the job's own output.
        self.assertIn("DeepSpeed Flops Profiler", result.stdout)
        self.assertIn("(work): work(", result.stdout)
        self.assertIn("a private one records this job in " + str(self.runs / "j"), result.stderr)
        html = self.runs / "j" / "j.html"
        self.assertIn(f"HTML report: {html}", result.stderr)
        self.assertTrue(html.read_text().lstrip().lower().startswith("<!doctype html"))
        self.assertIn("flopscope report j", result.stderr)
        self.assertEqual(self.daemons_left(), [])

        again = self.flopscope(["report", "j"])
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertEqual(again.stdout, result.stdout[len("nvtx_phases done\n"):])
        self.assertIn("reading the run kept in " + str(self.runs / "j"), again.stderr)
        self.assertEqual(self.daemons_left(), [])

        # A second run under the same id is kept apart in the same directory, as a daemon would.
        second = self.flopscope(["run", "--job", "j", "--", test_program("nvtx_phases"),
                                 "--before", "1"])
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertIn("j.run2", second.stderr)
        self.assertTrue((self.runs / "j" / "j.run2.html").exists())
        self.assertEqual(self.flopscope(["report", "j.run2"]).returncode, 0)

    def test_exit_status_and_a_job_that_recorded_nothing(self):
        result = self.flopscope(["run", "--job", "k", "--", "sh", "-c", "echo hi; exit 7"])
        self.assertEqual(result.returncode, 7, result.stderr)
        self.assertEqual(result.stdout, "hi\n")
        self.assertIn("flopscope: job k recorded no module range (no --torch? the program never "
                      "imported torch? no NVTX ranges?); try: flopscope run --torch -- sh -c",
                      result.stderr)
        self.assertFalse((self.runs / "k" / "k.html").exists())

        killed = self.flopscope(["run", "--job", "k2", "--", "sh", "-c", "kill -TERM $$"])
        self.assertEqual(killed.returncode, -15, killed.stderr)

    def test_ctrl_c_ends_the_job_and_leaves_no_daemon(self):
        go = self.root / "go"
        run = subprocess.Popen(
            [tool("flopscope"), "run", "--job", "intr", "--", test_program("nvtx_phases"),
             "--before", "3", "--wait-file", str(go)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env,
            start_new_session=True)
        deadline = time.monotonic() + 30
        while not self.daemons_left() and time.monotonic() < deadline:
            time.sleep(0.05)
        # The job's session has started (its spool, or its made-counts file, exists) and its
        # drain is installed a moment later; then it waits for `go`.
        spool = Path(self.env["FLOPSCOPE_SPOOL_DIR"])
        while (not any(spool.rglob("*.spool")) and not any(spool.rglob("*.made"))
               and time.monotonic() < deadline):
            time.sleep(0.05)
        time.sleep(0.5)
        os.killpg(run.pid, signal.SIGINT)  # a Ctrl-C: the terminal's whole foreground group
        out, err = run.communicate(timeout=60)
        self.assertEqual(run.returncode, -signal.SIGINT, err)
        # The report run prints at the end says how the job ended.
        self.assertIn("DeepSpeed Flops Profiler", out)
        self.assertRegex(out, r"\nended by: +SIGINT \(Ctrl-C\) 1 session; drained first")
        self.assertIn("a private one records this job", err)
        self.assertEqual(self.daemons_left(), [])

    @unittest.skipUnless((BUILD_DIR / "lib" / "libflopscope_torch_nvtx.so").exists(),
                         "the PyTorch support is not built")
    def test_python_program_gets_torch_by_itself(self):
        result = self.flopscope(["run", "--job", "py", "--", "/usr/bin/python3", "-c", "pass"])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("--torch chosen: /usr/bin/python3 is a Python program (--no-torch to opt "
                      "out)", result.stderr)
        self.assertIn("job py recorded no module range (--torch was on", result.stderr)

        opted_out = self.flopscope(["run", "--job", "py2", "--no-torch", "--",
                                    "/usr/bin/python3", "-c", "pass"])
        self.assertEqual(opted_out.returncode, 0, opted_out.stderr)
        self.assertNotIn("--torch chosen", opted_out.stderr)
        self.assertIn("try: flopscope run --torch -- /usr/bin/python3 -c pass", opted_out.stderr)

    def test_no_keep_data_deletes_the_records_but_not_the_html(self):
        result = self.flopscope(["run", "--job", "gone", "--no-keep-data", "--",
                                 test_program("nvtx_phases"), "--before", "2"])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(sorted(p.name for p in (self.runs / "gone").iterdir()), ["gone.html"])
        self.assertIn("deleted (--no-keep-data)", result.stderr)

    def test_a_named_socket_keeps_the_old_way(self):
        result = self.flopscope(["run", "--job", "named", "--socket", str(self.root / "x.sock"),
                                 "--", "true"])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("records will be buffered", result.stderr)
        self.assertFalse((self.runs / "named").exists())


if __name__ == "__main__":
    unittest.main()
