"""flopscoped collects orphaned spool files (issue 15 item 2): what an ended process left in its
spool reaches the store at the daemon's start and on its periodic pass, without waiting for the
same user's next injected process; once, whatever copy of the file it finds; only when the
session was aimed at that daemon, or at one its operator names with --collect-spools-for (issue
32: records aimed at a daemon that was down reached another one); and a file in a directory
others may write is left alone."""

import os
import re
import shutil
import time
import unittest

from harness import TEST_BIN_DIR, DaemonTestCase, client, report, run_job

# Records `ranges` push/pop pairs through the injector (ctypes -> NVTX) and exits normally.
PROGRAM = r"""
import ctypes, sys
helper = ctypes.CDLL(sys.argv[1])
for _ in range(int(sys.argv[2])):
    helper.flopscope_test_push(b"work")
    helper.flopscope_test_pop()
"""


class OrphanSpoolTest(DaemonTestCase):

    def spool_dir(self):
        return self.root / "spool"

    def spool_files(self):
        spool = self.spool_dir()
        # One folder per daemon the sessions were aimed at (common/spool_dir.h).
        return sorted(spool.glob("*/*.spool")) if spool.exists() else []

    def away(self):
        """The socket of a daemon that is not running."""
        return self.root / "nobody.sock"

    def collect_args(self, *extra):
        """The daemon collects this test's spool directory, and what was aimed at away()."""
        return ["--collect-spools", str(self.spool_dir()), "--collect-spools-for",
                str(self.away()), *extra]

    def leave_orphan(self, job, ranges, daemon_socket=None):
        """Runs a job whose daemon is away: its records end in a spool file, which stays."""
        command = ["/usr/bin/python3", "-c", PROGRAM, str(TEST_BIN_DIR / "libnvtx_pyhelper.so"),
                   str(ranges)]
        before = set(self.spool_files())
        result = run_job(daemon_socket or self.away(), job, command,
                         env={"FLOPSCOPE_SPOOL_DIR": str(self.spool_dir())}, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("spooled", result.stderr)
        files = sorted(set(self.spool_files()) - before)
        self.assertEqual(len(files), 1, result.stderr)
        return files[0]

    def wait_until_collected(self, timeout=20.0):
        deadline = time.monotonic() + timeout
        while self.spool_files() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.spool_files(), [], self.daemon.log())

    def work_calls(self, job):
        rep = report(self.daemon.socket, job)
        return {m["path"]: m["calls"] for m in rep["modules"]}, rep

    def test_start_and_periodic_passes_deliver_orphans_once(self):
        first = self.leave_orphan("orphan-a", 400)
        kept = self.root / "copy-of-a.spool"
        shutil.copy(first, kept)
        self.daemon.start(extra_args=self.collect_args("--collect-spools-period-s", "0.2"))
        self.wait_until_collected()  # the pass at start
        calls, rep = self.work_calls("orphan-a")
        self.assertEqual(calls, {"work": 400})
        self.assertEqual(rep["sessions_without_final"], 0)  # its final batch was spooled too

        # A second orphan while the daemon runs: the periodic pass takes it.
        self.leave_orphan("orphan-b", 250)
        self.wait_until_collected()
        self.assertEqual(self.work_calls("orphan-b")[0], {"work": 250})

        # The same file again (a copy restored): deduplicated by (session, seq), removed.
        shutil.copy(kept, first.parent / kept.name)
        self.wait_until_collected()
        self.assertEqual(self.work_calls("orphan-a")[0], {"work": 400})

    def test_what_a_full_spool_could_not_take_reaches_the_store_as_a_loss(self):
        command = ["/usr/bin/python3", "-c", PROGRAM, str(TEST_BIN_DIR / "libnvtx_pyhelper.so"),
                   "150000"]
        result = run_job(self.root / "nobody.sock", "full-spool", command, timeout=120,
                         env={"FLOPSCOPE_SPOOL_DIR": str(self.spool_dir()),
                              "FLOPSCOPE_SPOOL_MB": "1"})
        self.assertEqual(result.returncode, 0, result.stderr)
        found = re.findall(r"flopscope: (\d+) records not delivered", result.stderr)
        self.assertTrue(found, result.stderr)
        lost = int(found[0])
        self.daemon.start(extra_args=self.collect_args())
        self.wait_until_collected()
        calls, rep = self.work_calls("full-spool")
        # The exit line, the store's loss counters and what the store lacks all agree.
        self.assertEqual(sum(rep["losses"].values()), lost, rep["losses"])
        self.assertEqual(calls.get("work", 0) + lost, 150000, (rep["losses"], self.daemon.log()))
        # The spooled batches still find the paths defined in batches the spool could not take.
        self.assertEqual(rep["rejected"]["batches"], 0, self.daemon.log())
        self.assertGreater(rep["losses"].get("exit_undelivered", 0), 0, rep["losses"])
        self.assertEqual(rep["sessions_without_final"], 0)

    def test_a_spool_reaches_only_the_daemon_it_was_aimed_at(self):
        # Two runs while their daemons were down: one aimed at this daemon, one at another.
        mine = self.leave_orphan("aimed-here", 120, daemon_socket=self.daemon.socket)
        theirs = self.leave_orphan("aimed-elsewhere", 80)
        self.assertNotEqual(mine.parent, theirs.parent)
        self.daemon.start(extra_args=["--collect-spools", str(self.spool_dir()),
                                      "--collect-spools-period-s", "0.2"])
        deadline = time.monotonic() + 20
        while mine.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse(mine.exists(), self.daemon.log())
        self.assertEqual(self.work_calls("aimed-here")[0], {"work": 120})
        time.sleep(1.0)  # several more passes
        self.assertTrue(theirs.exists(), self.daemon.log())
        jobs = client(["jobs", "--socket", str(self.daemon.socket)]).stdout
        self.assertIn("aimed-here", jobs)
        self.assertNotIn("aimed-elsewhere", jobs)  # a daemon lists no session it was not given

    def test_a_directory_others_may_write_is_left_alone(self):
        orphan = self.leave_orphan("shared-dir", 100)
        os.chmod(self.spool_dir(), 0o770)
        try:
            self.daemon.start(extra_args=self.collect_args())
            deadline = time.monotonic() + 10
            while "left in place" not in self.daemon.log() and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertIn("that only it may write", self.daemon.log())
            self.assertTrue(orphan.exists())
        finally:
            os.chmod(self.spool_dir(), 0o700)


if __name__ == "__main__":
    unittest.main()
