"""Bounded per peer, with real users (reliability campaign row 5a′): one user opens hundreds of
collector streams and sends nothing on them (a slowloris); another user's job is stored and
their queries answered meanwhile, the first user's streams beyond --max-streams-per-uid are
refused at once, the admitted ones are ended after --hello-timeout-s, and SIGTERM stops the
daemon within its drain time while the streams are held. The daemon runs with a thread cap
(--max-threads 64) in place of a cgroup pids limit, which this machine may not offer.

Creates two throw-away users for the test and removes them afterwards, so it needs root (as in
CI); otherwise it is skipped."""

import json
import os
import shutil
import subprocess
import time
import unittest

from harness import DaemonTestCase, rank_env, test_program, tool
from test_access import as_user

STALLER = "flopscope-it-staller"  # holds silent streams
WORKER = "flopscope-it-worker"    # runs a job and asks for reports meanwhile
STREAMS = 200

# Opens STREAMS collector streams on the socket as the calling user, sends nothing on any, and
# prints one line per stream's end: its status code. Debian's python3 with its grpc: the test
# users cannot read the project's own Python environment. Raw bytes: no generated code needed.
SLOWLORIS = r"""
import sys, threading, time, grpc
socket, count, hold = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
channel = grpc.insecure_channel("unix:" + socket)
stream = channel.stream_stream("/flopscope.v1.Collector/Stream")
lock = threading.Lock()
def nothing():  # the requests: none for `hold` seconds, then the half-close
    time.sleep(hold)
    yield from ()
def hold_one():
    try:
        for _ in stream(nothing(), timeout=hold + 30):
            pass
        code = "OK"
    except grpc.RpcError as error:
        code = error.code().name
    with lock:
        print(code, flush=True)
threads = [threading.Thread(target=hold_one) for _ in range(count)]
for t in threads: t.start()
for t in threads: t.join()
"""


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("useradd") and shutil.which("runuser")
                     and os.path.exists("/usr/bin/python3"),
                     "needs root with useradd and runuser, and Debian's python3 with grpc: the "
                     "test creates two throw-away users")
class PeerBoundsTest(DaemonTestCase):

    @classmethod
    def setUpClass(cls):
        for user in (STALLER, WORKER):
            subprocess.run(["userdel", user], capture_output=True)  # left by an aborted run
            subprocess.run(["useradd", "-M", "-N", "-s", "/usr/sbin/nologin", user],
                           check=True, capture_output=True)
            cls.addClassCleanup(subprocess.run, ["userdel", user], capture_output=True)

    def setUp(self):
        super().setUp()
        os.chmod(self.root, 0o755)  # the users reach the socket through it
        self.script = self.root / "slowloris.py"
        self.script.write_text(SLOWLORIS)
        self.script.chmod(0o644)

    def start_daemon(self, hello_timeout_s):
        self.daemon.start(extra_args=["--max-threads", "64", "--max-streams-per-uid", "8",
                                      "--hello-timeout-s", str(hello_timeout_s)])

    def slowloris(self, hold_s):
        return subprocess.Popen(
            ["runuser", "-u", STALLER, "--", "/usr/bin/python3", str(self.script),
             str(self.daemon.socket), str(STREAMS), str(hold_s)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def work(self, job):
        """WORKER's job and queries: what another user must still get."""
        spool = self.root / "spool-worker"
        spool.mkdir(mode=0o700, exist_ok=True)
        shutil.chown(spool, WORKER)
        env = {"FLOPSCOPE_SPOOL_DIR": str(spool), **rank_env(0, 1)}
        run = as_user(WORKER, [tool("flopscope"), "run", "--job", job, "--socket",
                               str(self.daemon.socket), "--", test_program("nvtx_phases"),
                               "--before", "20"], env=env)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertNotIn("spooled", run.stderr)
        listing = as_user(WORKER, [tool("flopscope"), "jobs", "--socket", str(self.daemon.socket),
                                   "--format", "json"])
        self.assertEqual(listing.returncode, 0, listing.stderr)
        jobs = {j["job"]: j for j in json.loads(listing.stdout)["jobs"]}
        self.assertGreater(jobs[job]["ranges"], 0)

    def test_one_users_silent_streams_starve_nobody(self):
        self.start_daemon(hello_timeout_s=3)
        staller = self.slowloris(hold_s=15)
        time.sleep(1.5)  # the streams are open (or refused) by now
        self.work("worker-job")
        out, err = staller.communicate(timeout=90)
        codes = out.split()
        self.assertEqual(len(codes), STREAMS, err)
        # Beyond its share, refused at once; the admitted ones ended for want of a hello.
        self.assertGreaterEqual(codes.count("RESOURCE_EXHAUSTED"), STREAMS - 8, codes)
        self.assertEqual(codes.count("CANCELLED") + codes.count("RESOURCE_EXHAUSTED"), STREAMS,
                         codes)
        self.assertIn("no hello within 3s", self.daemon.log())
        self.assertIn("--max-streams-per-uid", self.daemon.log())

    def test_sigterm_stops_within_the_drain_time_while_streams_are_held(self):
        self.start_daemon(hello_timeout_s=600)
        staller = self.slowloris(hold_s=60)
        time.sleep(1.5)
        start = time.monotonic()
        self.assertEqual(self.daemon.stop(timeout=30), 0, self.daemon.log())
        self.assertLess(time.monotonic() - start, 10, "SIGTERM took too long")
        staller.kill()
        staller.communicate()


if __name__ == "__main__":
    unittest.main()
