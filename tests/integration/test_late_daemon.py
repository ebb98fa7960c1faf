"""The daemon comes up after the job began: everything recorded before the first connection is
delivered; with no daemon at all, the job is untouched and the loss is said once."""

import time

from harness import DaemonTestCase, calls_by_path, report, run_job, start_job, test_program


class LateDaemonTest(DaemonTestCase):

    def test_records_before_first_connect_are_delivered(self):
        go = self.root / "go"
        job = start_job(self.daemon.socket, "late", [
            test_program("nvtx_phases"), "--before", "50", "--wait-file", str(go), "--after", "7"])
        time.sleep(1.0)  # the job has pushed its "before" ranges with nobody listening
        self.assertIsNone(job.poll(), "job ended before the daemon started")
        self.daemon.start()
        go.touch()
        out, err = job.communicate(timeout=60)
        self.assertEqual(job.returncode, 0, err)
        self.assertEqual(out, "nvtx_phases done\n")
        rep = report(self.daemon.socket, "late")
        self.assertEqual(calls_by_path(rep),
                         {"before": 50, "before/work": 50, "after": 7, "after/work": 7})
        self.assertEqual(sum(rep["losses"].values()), 0, rep["losses"])

    def test_no_daemon_leaves_the_job_alone_and_says_what_was_lost(self):
        started = time.monotonic()
        result = run_job(self.daemon.socket, "nobody", [test_program("nvtx_phases"), "--before", "4"])
        elapsed = time.monotonic() - started
        self.assertEqual(result.returncode, 0)
        self.assertEqual(result.stdout, "nvtx_phases done\n")
        # Nothing is lost: it waits in the spool (test_spool.py delivers it later).
        self.assertNotIn("not delivered", result.stderr)
        self.assertIn("records spooled to", result.stderr)
        self.assertLess(elapsed, 30)
