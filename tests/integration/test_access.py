"""Who may do what (docs/architecture.md, "Access model"), with real users: a job belongs to the
uid the kernel reports for the stream that created it; only that uid, root and members of the
admin group may read it, write to it or open counter windows in it; `jobs` lists only what the
caller may read; a session is resumed only with its token.

Creates two throw-away users (and an admin group) for the test and removes them afterwards, so it
needs root (as in CI); otherwise it is skipped."""

import json
import os
import pwd
import shutil
import subprocess
import unittest

import grpc

from harness import DaemonTestCase, client, rank_env, run_job, test_program, tool
from test_bad_batch import Producer, good_batch, hello

OWNER = "flopscope-it-owner"  # runs a job of its own
ADMIN = "flopscope-it-admin"  # a member of ADMINS
ADMINS = "flopscope-it-admins"


def as_user(user, args, env=None, timeout=120):
    """`args` run as `user` (runuser: no password, a clean environment plus `env`)."""
    command = ["runuser", "-u", user, "--", "env", *[f"{k}={v}" for k, v in (env or {}).items()],
               *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def listed_jobs(result):
    assert result.returncode == 0, result.stderr
    return sorted(job["job"] for job in json.loads(result.stdout)["jobs"])


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("useradd") and shutil.which("runuser"),
                     "needs root with useradd and runuser: the test creates two throw-away users")
class AccessTest(DaemonTestCase):

    @classmethod
    def setUpClass(cls):
        subprocess.run(["groupadd", "-f", ADMINS], check=True, capture_output=True)
        for user, extra in ((OWNER, []), (ADMIN, ["-G", ADMINS])):
            subprocess.run(["userdel", user], capture_output=True)  # left by an aborted run
            subprocess.run(["useradd", "-M", "-N", "-s", "/usr/sbin/nologin", *extra, user],
                           check=True, capture_output=True)
            cls.addClassCleanup(subprocess.run, ["userdel", user], capture_output=True)
        cls.addClassCleanup(subprocess.run, ["groupdel", ADMINS], capture_output=True)

    def setUp(self):
        super().setUp()
        os.chmod(self.root, 0o755)  # the other users reach the socket (0666) through it
        self.daemon.args = ["--admin-group", ADMINS, *self.daemon.args]
        self.daemon.start()
        self.socket = str(self.daemon.socket)
        # Root's own job, and one the owner user creates: the kernel says who wrote which.
        result = run_job(self.socket, "root-job", [test_program("nvtx_phases"), "--before", "20"],
                         env=rank_env(0, 1))
        self.assertEqual(result.returncode, 0, result.stderr)
        result = self.run_as(OWNER, "owner-job")
        self.assertEqual(result.returncode, 0, result.stderr)

    def run_as(self, user, job, exit_timeout_ms=5000):
        spool = self.root / f"spool-{user}"
        spool.mkdir(mode=0o700, exist_ok=True)
        shutil.chown(spool, user)
        env = {"FLOPSCOPE_SPOOL_DIR": str(spool), "FLOPSCOPE_EXIT_TIMEOUT_MS": exit_timeout_ms,
               **rank_env(0, 1)}
        return as_user(user, [tool("flopscope"), "run", "--job", job, "--socket", self.socket,
                              "--", test_program("nvtx_phases"), "--before", "20"], env=env)

    def ranges(self, job):
        result = client(["jobs", "--socket", self.socket, "--format", "json"])
        self.assertEqual(result.returncode, 0, result.stderr)
        return {j["job"]: j["ranges"] for j in json.loads(result.stdout)["jobs"]}[job]

    def test_another_user_may_not_read_write_or_profile_a_job(self):
        flopscope = tool("flopscope")
        listing = as_user(OWNER, [flopscope, "jobs", "--socket", self.socket, "--format", "json"])
        self.assertEqual(listed_jobs(listing), ["owner-job"])  # root-job is not listed
        for args, verb in ((["report", "root-job"], "read"), (["ranks", "root-job"], "read"),
                           (["profile", "root-job", "--count", "1"], "open counter windows in")):
            denied = as_user(OWNER, [flopscope, *args, "--socket", self.socket])
            self.assertNotEqual(denied.returncode, 0, denied.stdout)
            self.assertIn(f"may not {verb} job root-job", denied.stderr)
            self.assertIn("belongs to uid 0", denied.stderr)

        # Writing (reliability campaign row 4j): not one record lands in root's job, and the
        # owner's run is not refused either: it is kept apart under an id that is the owner's,
        # and both are told.
        before = self.ranges("root-job")
        self.assertGreater(before, 0)
        apart = f"root-job@{OWNER}"
        kept = self.run_as(OWNER, "root-job")
        self.assertEqual(kept.returncode, 0, kept.stderr)
        self.assertEqual(self.ranges("root-job"), before)
        self.assertGreater(self.ranges(apart), 0)
        self.assertIn(f"this run was kept apart: its records are job {apart}", kept.stderr)
        self.assertNotIn("spooled", kept.stderr)
        listing = as_user(OWNER, [flopscope, "jobs", "--socket", self.socket, "--format", "json"])
        self.assertEqual(listed_jobs(listing), ["owner-job", apart])
        jobs = json.loads(client(["jobs", "--socket", self.socket, "--format", "json"]).stdout)
        self.assertEqual({j["job"]: j["kept_apart"] for j in jobs["jobs"]}["root-job"], [apart])
        self.assertIn(f"is kept apart as job {apart}", self.daemon.log())
        # Asking for root's job, the owner is pointed at its own run.
        denied = as_user(OWNER, [flopscope, "report", "root-job", "--socket", self.socket])
        self.assertIn(f"your own run of this job id was kept apart as job {apart}", denied.stderr)
        # Nobody else, root included, can take the owner's apart id first (the client and the
        # injector never send '@'; a hand-made stream can).
        producer = Producer(self.daemon.socket)
        producer.send(hello=hello("squat", job=f"x@{OWNER}"))
        with self.assertRaises(grpc.RpcError) as refused:
            producer.next()
        producer.close()
        self.assertEqual(refused.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        self.assertIn(f"holds the runs of user {OWNER}", refused.exception.details())

    def test_owner_admin_and_root_are_allowed(self):
        flopscope = tool("flopscope")
        own = as_user(OWNER, [flopscope, "report", "owner-job", "--socket", self.socket])
        self.assertEqual(own.returncode, 0, own.stderr)
        # The owner's job got its records, as the owner's uid.
        self.assertGreater(self.ranges("owner-job"), 0)
        listing = as_user(ADMIN, [flopscope, "jobs", "--socket", self.socket, "--format", "json"])
        self.assertEqual(listed_jobs(listing), ["owner-job", "root-job"])
        for job in ("owner-job", "root-job"):
            admin = as_user(ADMIN, [flopscope, "report", job, "--socket", self.socket])
            self.assertEqual(admin.returncode, 0, admin.stderr)
        self.assertEqual(listed_jobs(client(["jobs", "--socket", self.socket, "--format",
                                             "json"])), ["owner-job", "root-job"])
        root = client(["report", "owner-job", "--socket", self.socket])
        self.assertEqual(root.returncode, 0, root.stderr)

    def test_a_session_resumes_only_with_its_token(self):
        def connect(token):
            producer = Producer(self.daemon.socket)
            first = hello("resumable", job="root-job")
            first.resume_token = token
            producer.send(hello=first)
            try:
                welcome = producer.next().welcome
                producer.send(batch=good_batch(1))
                producer.next()
                return welcome.committed_seq, None
            except grpc.RpcError as error:
                return None, error
            finally:
                producer.close()

        self.assertEqual(connect("secret-1"), (0, None))
        for forged in ("", "secret-2"):
            seq, error = connect(forged)
            self.assertIsNone(seq)
            self.assertEqual(error.code(), grpc.StatusCode.PERMISSION_DENIED)
            self.assertIn("resume token", error.details())
        self.assertEqual(connect("secret-1"), (1, None))  # the holder resumes where it was
        self.assertNotIn("secret-1", self.daemon.log())

    def test_a_socket_the_user_may_not_open_is_not_called_not_running(self):
        # Reliability campaign, "EACCES on the socket is reported as 'not running?'": a daemon
        # whose socket sits in a directory the user cannot enter runs; the client says why.
        private = self.root / "private"
        private.mkdir(mode=0o700)
        os.symlink(self.socket, private / "fs.sock")
        denied = as_user(OWNER, [tool("flopscope"), "jobs", "--socket", str(private / "fs.sock")])
        self.assertEqual(denied.returncode, 1, denied.stderr)
        self.assertIn("permission denied", denied.stderr)
        self.assertNotIn("not running", denied.stderr)


if __name__ == "__main__":
    unittest.main()
