"""Spools nobody else can switch off (issue 34, row 9 of the reliability campaign), with real
users: another user's /var/tmp/flopscope-spool-<victim uid>, made first, is refused by the
victim's injector loudly (the directory and its owner named) and a private fallback of the
victim's own is used, so its records are spooled and the daemon delivers them as the victim's;
the squatter's own spool in the squatted directory is never delivered (the directory names
another uid), nor a spool whose user was deleted.

Creates throw-away users and removes them afterwards, so it needs root (as in CI); otherwise it
is skipped."""

import glob
import json
import os
import pwd
import re
import shutil
import subprocess
import unittest
from pathlib import Path

from harness import INJECTOR, DaemonTestCase, client, test_program
from test_access import as_user

VICTIM = "flopscope-it-victim"
SQUATTER = "flopscope-it-squatter"
GONE = "flopscope-it-gone"  # deleted after it leaves a spool
CALLS = 50  # nvtx_phases --before 50: two range events each


def leave_spool(user, job, env):
    """`user` runs a job whose daemon is not there: its records stay in its spool."""
    # Without XDG_RUNTIME_DIR (as under a batch scheduler), and without the tests' own spool
    # directory unless `env` names one.
    unset = ["-u", "XDG_RUNTIME_DIR", *([] if "FLOPSCOPE_SPOOL_DIR" in env
                                        else ["-u", "FLOPSCOPE_SPOOL_DIR"])]
    return as_user(user, ["env", *unset, test_program("nvtx_phases"), "--before", str(CALLS)], env={
        "LD_PRELOAD": str(INJECTOR), "FLOPSCOPE_SOCKET": "/nonexistent/flopscope.sock",
        "FLOPSCOPE_JOB_ID": job, "FLOPSCOPE_EXIT_TIMEOUT_MS": "200", "RANK": "0",
        "WORLD_SIZE": "1", **env})


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("useradd") and shutil.which("runuser"),
                     "needs root with useradd and runuser: the test creates throw-away users")
class SpoolSquattingTest(DaemonTestCase):

    @classmethod
    def setUpClass(cls):
        for user in (VICTIM, SQUATTER, GONE):
            subprocess.run(["userdel", user], capture_output=True)  # left by an aborted run
            subprocess.run(["useradd", "-M", "-N", "-s", "/usr/sbin/nologin", user], check=True,
                           capture_output=True)
            cls.addClassCleanup(subprocess.run, ["userdel", user], capture_output=True)
        cls.victim = pwd.getpwnam(VICTIM).pw_uid
        cls.squatter = pwd.getpwnam(SQUATTER).pw_uid

    def setUp(self):
        super().setUp()
        os.chmod(self.root, 0o755)  # the users reach their directories through it
        self.squatted = Path(f"/var/tmp/flopscope-spool-{self.victim}")
        self.remove_victims_spools()
        self.addCleanup(self.remove_victims_spools)

    def remove_victims_spools(self):
        for path in glob.glob(f"/var/tmp/flopscope-spool-{self.victim}*"):
            shutil.rmtree(path, ignore_errors=True)

    def collect(self, *patterns):
        """A daemon that delivers the orphans of `patterns` at start; its log once it has."""
        self.daemon.args = ["--collect-spools", ",".join(patterns),
                            "--collect-spools-for", "/nonexistent/flopscope.sock"]
        self.daemon.start()

    def stored(self):
        result = client(["jobs", "--socket", str(self.daemon.socket), "--format", "json"])
        self.assertEqual(result.returncode, 0, result.stderr)
        return {j["job"]: j["ranges"] for j in json.loads(result.stdout)["jobs"]}

    def test_a_squatted_spool_directory_falls_back_to_a_private_one_that_is_delivered(self):
        # The squatter makes the victim's default spool directory first, and spools into it.
        as_user(SQUATTER, ["mkdir", "-m", "0700", str(self.squatted)])
        self.assertEqual(self.squatted.stat().st_uid, self.squatter)
        planted = leave_spool(SQUATTER, "squat-job", {"FLOPSCOPE_SPOOL_DIR": str(self.squatted)})
        self.assertIn(f"records spooled to {self.squatted}/", planted.stderr)

        # The victim, without XDG_RUNTIME_DIR (as under a batch scheduler): refused loudly,
        # and spooled all the same, in a fallback of its own.
        ran = leave_spool(VICTIM, "victim-job", {})
        self.assertEqual(ran.returncode, 0, ran.stderr)
        self.assertIn(f"spool directory refused: {self.squatted} is not a private directory "
                      f"of uid {self.victim} (it is a directory of uid {self.squatter}", ran.stderr)
        fallback = re.search(rf"spooling to (/var/tmp/flopscope-spool-{self.victim}-\S+) instead",
                             ran.stderr)
        self.assertIsNotNone(fallback, ran.stderr)
        fallback = Path(fallback.group(1))
        self.assertEqual((fallback.stat().st_uid, fallback.stat().st_mode & 0o777),
                         (self.victim, 0o700))
        self.assertIn(f"records spooled to {fallback}/", ran.stderr)
        self.assertNotIn("full or off", ran.stderr)
        # The victim's next process finds the same fallback (no new directory per process).
        again = leave_spool(VICTIM, "victim-job2", {})
        self.assertIn(f"records spooled to {fallback}/", again.stderr)

        # The daemon's default pattern finds the fallback and delivers it as the victim's; the
        # squatter's file in the directory named for the victim is left alone.
        self.collect(f"/var/tmp/flopscope-spool-{self.victim}*")
        self.wait_for(lambda: not list(fallback.glob("*/*.spool")), self.daemon.log)
        stored = self.stored()
        self.assertEqual((stored.get("victim-job"), stored.get("victim-job2")),
                         (2 * CALLS, 2 * CALLS))
        self.assertNotIn("squat-job", stored)
        self.assertEqual(len(list(self.squatted.glob("*/*.spool"))), 1)
        self.assertIn(f"{self.squatted} names uid {self.victim} but belongs to uid "
                      f"{self.squatter}", self.daemon.log())

    def test_the_spool_of_a_deleted_user_is_never_delivered(self):
        spool = self.root / "spool-gone"
        spool.mkdir(mode=0o700)
        shutil.chown(spool, GONE)
        left = leave_spool(GONE, "gone-job", {"FLOPSCOPE_SPOOL_DIR": str(spool)})
        self.assertIn(f"records spooled to {spool}/", left.stderr)
        gone_uid = pwd.getpwnam(GONE).pw_uid
        subprocess.run(["userdel", GONE], check=True, capture_output=True)
        self.collect(str(spool))
        self.wait_for(lambda: "no passwd entry" in self.daemon.log(), self.daemon.log)
        self.assertIn(f"uid {gone_uid}, the owner of {spool}, has no passwd entry",
                      self.daemon.log())
        self.assertNotIn("gone-job", self.stored())
        self.assertEqual(len(list(spool.glob("*/*.spool"))), 1)  # left where it is

    def wait_for(self, condition, log, timeout=20.0):
        import time
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                self.fail(f"timed out:\n{log()}")
            time.sleep(0.1)
