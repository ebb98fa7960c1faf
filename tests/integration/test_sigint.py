"""Ctrl-C is drained like SIGTERM and named as such (issue 32, deliver item 3).

A job interrupted by SIGINT used to lose what it had recorded since its last delivery, and the
report blamed a kill: "ended without a final batch (killed, _exit or exec?)". Now
  - a process whose SIGINT has its default disposition (a C or C++ program, or Python with
    signal.SIG_DFL) is drained by the injector's SIGTERM path (injector/sigterm_drain.h) and
    still dies of SIGINT;
  - Python's own handler raises KeyboardInterrupt; unhandled, Python finalises and then kills
    itself with SIGINT (SIG_DFL) instead of calling exit(), so no atexit handler runs: the
    injector's kill() wrapper runs the exit path first (injector/entry_points.cc);
  - either way every record made before the signal is stored, the session has its final batch,
    and the report says "Ended by: SIGINT (Ctrl-C)" (the tree view) or "ended by: SIGINT
    (Ctrl-C)" (the DeepSpeed layout's additions); no view says 'killed, _exit or exec'.
The flush interval is a minute: nothing is delivered before the signal but by the drain."""

import json
import os
import select
import signal
import subprocess
import struct
import sys
import time
import unittest

from harness import TEST_BIN_DIR, DaemonTestCase, client, report, start_job

# Pushes COUNT ranges, says so, then waits to be interrupted. DISPOSITION: "default" (SIGINT's
# SIG_DFL, set before the first NVTX call, so before the injector's session) or "python"
# (Python's handler: KeyboardInterrupt, unhandled).
PROGRAM = r"""
import ctypes, os, signal, sys, time
count, disposition = int(sys.argv[1]), sys.argv[2]
if disposition == "default":
    signal.signal(signal.SIGINT, signal.SIG_DFL)
else:
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
lib = ctypes.CDLL(os.environ["NVTX_HELPER"])
for _ in range(count):
    lib.flopscope_test_push(b"work")
    lib.flopscope_test_pop()
print("recorded", count, flush=True)
for _ in range(1200):
    time.sleep(0.05)
"""

COUNT = 3000


class SigintTest(DaemonTestCase):

    def setUp(self):
        super().setUp()
        self.job = None
        self.env = {"NVTX_HELPER": str(TEST_BIN_DIR / "libnvtx_pyhelper.so"),
                    "FLOPSCOPE_FLUSH_MS": "60000"}

    def tearDown(self):
        if self.job is not None and self.job.poll() is None:
            self.job.kill()
            self.job.communicate()
        super().tearDown()

    def interrupt(self, job, disposition):
        # Started from Python, so SIGINT is not SIG_IGN as in a shell's background job.
        self.job = start_job(self.daemon.socket, job,
                             [sys.executable, "-c", PROGRAM, str(COUNT), disposition],
                             env=self.env)
        ready, _, _ = select.select([self.job.stdout], [], [], 60)
        self.assertTrue(ready, "the job never said it had recorded")
        self.assertEqual(self.job.stdout.readline(), f"recorded {COUNT}\n")
        self.job.send_signal(signal.SIGINT)
        _, err = self.job.communicate(timeout=30)
        # Still the death of SIGINT (a shell's 130), as without the injector.
        self.assertEqual(self.job.returncode, -signal.SIGINT, err)
        return err

    def check_stored_and_named(self, job):
        rep = report(self.daemon.socket, job)
        calls = {m["path"]: m["calls"] for m in rep["modules"]}
        self.assertEqual(calls.get("work"), COUNT, (rep["losses"], self.daemon.log()))
        self.assertEqual(sum(rep["losses"].values()), 0, rep["losses"])
        self.assertEqual(rep["sessions_without_final"], 0)  # the drain sent the final batch
        tree = client(["report", job, "--format", "tree", "--socket", str(self.daemon.socket)])
        self.assertEqual(tree.returncode, 0, tree.stderr)
        self.assertIn("Ended by: SIGINT (Ctrl-C) 1 session", tree.stdout)
        # The DeepSpeed layout (`report JOB`, and what `flopscope run` prints at the job's end)
        # says it too, in its additions.
        text = client(["report", job, "--socket", str(self.daemon.socket)])
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertRegex(text.stdout, r"\nended by: +SIGINT \(Ctrl-C\) 1 session; drained first")
        for listing in (["report", job], ["report", job, "--format", "tree"], ["jobs"],
                        ["ranks", job]):
            out = client([*listing, "--socket", str(self.daemon.socket)])
            self.assertNotIn("killed, _exit or exec", out.stdout + out.stderr)

    def test_sigint_with_its_default_disposition_is_drained_and_named(self):
        self.daemon.start()  # no spool collector: the drain itself must deliver
        self.interrupt("sigint-default", "default")
        self.check_stored_and_named("sigint-default")

    def test_keyboard_interrupt_left_unhandled_delivers_and_is_named(self):
        self.daemon.start()
        err = self.interrupt("sigint-python", "python")
        self.assertIn("KeyboardInterrupt", err)  # Python's own way out is unchanged
        self.check_stored_and_named("sigint-python")

    def leave_made_counts_file(self, job, signal_number):
        """Runs the waiting program with no transport (its library is missing): its only trace is
        its made-counts file, which names its session. Kills it with SIGKILL, so that no drain
        ever finishes, and writes `signal_number` (0: none) where a drain that began writes the
        signal it drains for (common/made_counts_page.h: the header's u32 at byte 16). A real
        drain cut short (its bound run out before the transport started, or a second Ctrl-C) is
        a race; what the injector writes there is tested apart (MadeCountsPageTest)."""
        self.env["FLOPSCOPE_TRANSPORT_PATH"] = str(self.root / "missing-transport.so")
        before = set(self.spool.glob("*/*.made"))
        self.job = start_job(self.daemon.socket, job,
                             [sys.executable, "-c", PROGRAM, str(COUNT), "default"], env=self.env)
        ready, _, _ = select.select([self.job.stdout], [], [], 60)
        self.assertTrue(ready, "the job never said it had recorded")
        self.assertEqual(self.job.stdout.readline(), f"recorded {COUNT}\n")
        made = sorted(set(self.spool.glob("*/*.made")) - before)
        self.assertEqual(len(made), 1, made)
        self.job.kill()
        self.job.communicate(timeout=30)
        with open(made[0], "r+b") as page:
            page.seek(16)
            page.write(struct.pack("<I", signal_number))

    def test_a_drain_cut_short_before_the_transport_started_is_named_not_guessed(self):
        # Two sessions whose processes never delivered anything: one began a SIGINT drain (its
        # made-counts file names SIGINT), one was SIGKILLed. The daemon's collector charges each
        # what it made; the first is named as ended by Ctrl-C, the second still guessed at.
        self.spool = self.root / "spool"
        self.leave_made_counts_file("cut-short", signal.SIGINT)
        self.leave_made_counts_file("killed", 0)
        self.daemon.start(extra_args=["--collect-spools", str(self.spool),
                                      "--collect-spools-period-s", "0.2"])
        deadline = time.monotonic() + 30
        while any(self.spool.glob("*/*.made")) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(list(self.spool.glob("*/*.made")), [], self.daemon.log())
        socket = ["--socket", str(self.daemon.socket)]
        for job in ("cut-short", "killed"):
            rep = report(self.daemon.socket, job)
            self.assertEqual(rep["sessions_without_final"], 1)
            self.assertGreaterEqual(rep["losses"].get("killed", 0), COUNT, rep["losses"])

        tree = client(["report", "cut-short", "--format", "tree", *socket])
        self.assertEqual(tree.returncode, 0, tree.stderr)
        self.assertIn("\nUnfinished: 1 session ended by SIGINT (Ctrl-C) before its final batch "
                      "was delivered (the drain was cut short", tree.stdout)
        self.assertIn("\nNo GPU records: unknown: the process was ended by SIGINT (Ctrl-C) "
                      "before its transport started\n", tree.stdout)
        self.assertIn("\nEnded by: SIGINT (Ctrl-C) 1 session whose drain was cut short",
                      tree.stdout)
        ranks = client(["ranks", "cut-short", *socket])
        self.assertIn("\nRank 0: 1 session ended by SIGINT (Ctrl-C) before its final batch",
                      ranks.stdout)
        text = client(["report", "cut-short", *socket])
        self.assertRegex(text.stdout, r"\nended by: +SIGINT \(Ctrl-C\) 1 session whose drain "
                                      r"was cut short")
        for out in (tree, ranks, text):
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertNotIn("killed, _exit or exec", out.stdout + out.stderr)

        # A real kill keeps the guess: nothing says otherwise.
        killed = client(["report", "killed", "--format", "tree", *socket])
        self.assertIn("\nUnfinished: 1 session ended without a final batch (killed, _exit or "
                      "exec?)", killed.stdout)
        self.assertIn("No GPU records: unknown: the process ended before its transport started",
                      killed.stdout)
        self.assertNotIn("Ended by", killed.stdout)

if __name__ == "__main__":
    unittest.main()
