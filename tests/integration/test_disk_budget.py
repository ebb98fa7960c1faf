"""Storage that lasts (issue 17 item 6): `flopscoped --max-disk` deletes the oldest finished jobs,
whole, until the rest fit, never a running one; `flopscope prune` deletes by name or by age
(--dry-run lists). The daemon deletes, the client never touches a file. Every figure asserted
comes from the sizes of the job directories measured here."""

import json
import os
import pwd
import re
import shutil
import subprocess
import time
import unittest

from harness import (DaemonTestCase, client, mount_tmpfs, rank_env, report, run_job, start_job,
                     test_program, tool)

FLOODER = "flopscope-it-flood"  # a second user, created and removed by ShareTest

# Small and quick, with enough range events (a few hundred KB a job) that a job is much larger
# than what a read connection adds beside it (READER_FILES_SLACK).
JOB_COMMAND = [tool("transformer_nvtx"), "--steps", "100", "--layers", "6", "--hidden", "32",
               "--batch", "1", "--seq", "8", "--vocab", "64"]
# What SQLite adds beside a closed rank file when a read connection opens it (a -shm index of
# 32 KiB and an empty -wal; a page of slack): the daemon opens readers for reports at any time,
# so a size measured here and one it measures may differ by that much per rank file.
READER_FILES_SLACK = 32768 + 4096


class BudgetTestCase(DaemonTestCase):
    """What the budget's tests share: sizes, listings, waiting (no tests of its own)."""

    def jobs_dir(self):
        return self.daemon.data_dir / "jobs"

    def size(self, job):
        total = 0
        for dirpath, _, files in os.walk(self.jobs_dir() / job):
            for name in files:
                try:
                    total += os.path.getsize(os.path.join(dirpath, name))
                except FileNotFoundError:
                    pass
        return total

    def on_disk(self):
        """Job directories (a prune's tombstone, .pruning-<job>, is none)."""
        if not self.jobs_dir().exists():
            return set()
        return {p.name for p in self.jobs_dir().iterdir() if not p.name.startswith(".")}

    def listed(self):
        result = client(["jobs", "--socket", str(self.daemon.socket), "--format", "json"])
        self.assertEqual(result.returncode, 0, result.stderr)
        return {job["job"]: job for job in json.loads(result.stdout)["jobs"]}

    def prune(self, *args):
        return client(["prune", *args, "--socket", str(self.daemon.socket)])

    def run_finished(self, job):
        result = run_job(self.daemon.socket, job, JOB_COMMAND)
        self.assertEqual(result.returncode, 0, result.stderr)
        time.sleep(0.05)  # distinct last-seen times, so "oldest" is well defined

    def start_running(self, job):
        go = self.root / f"go-{job}"
        process = start_job(self.daemon.socket, job, [
            test_program("nvtx_phases"), "--before", "200", "--wait-file", str(go),
            "--timeout-ms", "60000", "--after", "3"])
        # A test that failed half-way leaves no process behind (its directory is gone by then).
        self.addCleanup(lambda: process.poll() is None and (process.kill(), process.wait()))
        self.wait_for(lambda: self.listed().get(job, {}).get("connected", 0) > 0,
                      f"job {job} connected")
        return go, process

    def wait_for(self, condition, what, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(0.1)
        self.fail(f"timed out waiting for {what}:\n{self.daemon.log()}")

    def pruned_bytes_logged(self, job):
        found = re.findall(rf"pruned job '{re.escape(job)}': \d+ rank\(s\), (\d+) bytes",
                           self.daemon.log())
        return [int(b) for b in found]

    def pruned_in_log(self):
        return re.findall(r"pruned job '([^']+)'", self.daemon.log())



class DiskBudgetTest(BudgetTestCase):

    def test_budget_deletes_the_oldest_finished_jobs_and_never_a_running_one(self):
        jobs = ("j1", "j2", "j3", "j4")
        self.daemon.start()
        for job in jobs:
            self.run_finished(job)
        self.daemon.stop()
        sizes = {job: self.size(job) for job in jobs}
        # Room for j3, j4 and half of j2: the first pass, at start, deletes j1 and j2 (oldest
        # first) and keeps the newest two.
        budget = sizes["j4"] + sizes["j3"] + sizes["j2"] // 2
        self.assertGreater(sizes["j2"] // 2, 2 * READER_FILES_SLACK, "jobs too small to tell")
        self.daemon.start(extra_args=["--max-disk", str(budget), "--disk-check-period-s", "0.2",
                                      "--prune-grace-s", "0"])
        self.wait_for(lambda: self.on_disk() == {"j3", "j4"}, "j1 and j2 pruned")
        time.sleep(0.6)  # three more passes: nothing else goes once the rest fit
        self.assertEqual(self.on_disk(), {"j3", "j4"})
        self.assertEqual(set(self.listed()), {"j3", "j4"})
        self.assertEqual(self.pruned_in_log(), ["j1", "j2"])
        for job in ("j1", "j2"):
            logged = self.pruned_bytes_logged(job)
            self.assertEqual(len(logged), 1, self.daemon.log())
            self.assertGreaterEqual(logged[0], sizes[job])
            self.assertLessEqual(logged[0], sizes[job] + READER_FILES_SLACK)
        self.assertNotIn("disk budget: the jobs take", self.daemon.log())  # the rest fit
        self.daemon.stop()

        # Over a budget nothing finished can meet, with a job running: every finished job goes,
        # the running one never, and each pass says so.
        self.daemon.start(extra_args=["--max-disk", "1", "--disk-check-period-s", "0.2",
                                      "--prune-grace-s", "0"])
        go, live = self.start_running("live")
        self.wait_for(lambda: self.on_disk() == {"live"}, "every finished job pruned")
        self.wait_for(lambda: "every job left is running" in self.daemon.log(),
                      "the over-budget warning")
        self.assertEqual(set(self.listed()), {"live"})
        self.assertEqual(self.pruned_in_log(), ["j3", "j4"])
        go.touch()
        out, err = live.communicate(timeout=60)
        self.assertEqual(live.returncode, 0, err)
        self.assertEqual(out, "nvtx_phases done\n")

        # A restart afterwards (no budget): the catalog and the files agree, the kept job's
        # report has everything it ran, and no tombstone is left.
        self.daemon.stop()
        self.daemon.start()
        self.assertEqual(set(self.listed()), {"live"})
        self.assertEqual(self.on_disk(), {"live"})
        self.assertEqual(report(self.daemon.socket, "live")["job"], "live")
        self.assertFalse([p for p in self.jobs_dir().iterdir() if p.name.startswith(".")])

    def test_prune_by_name_by_age_and_dry_run(self):
        self.daemon.start()
        for job in ("p1", "p2", "p3"):
            self.run_finished(job)
        size_p1 = self.size("p1")

        dry = self.prune("p1", "--dry-run")
        self.assertEqual(dry.returncode, 0, dry.stderr)
        self.assertIn("would prune 1 job(s), freeing", dry.stdout)
        self.assertIn(f"({size_p1} bytes)", dry.stdout)
        self.assertIn("p1", self.on_disk())

        done = self.prune("p1")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("pruned 1 job(s), freed", done.stdout)
        freed = int(re.search(r"\((\d+) bytes\)", done.stdout).group(1))
        self.assertGreaterEqual(freed, size_p1)
        self.assertLessEqual(freed, size_p1 + READER_FILES_SLACK)
        self.assertEqual(self.on_disk(), {"p2", "p3"})
        self.assertEqual(set(self.listed()), {"p2", "p3"})

        missing = self.prune("p1")
        self.assertEqual(missing.returncode, 1)
        self.assertIn("job 'p1' not found", missing.stderr)
        both = self.prune("p2", "--older-than", "1d")
        self.assertEqual(both.returncode, 2, both.stderr)
        bad_age = self.prune("--older-than", "7y")
        self.assertEqual(bad_age.returncode, 2)
        self.assertIn("such as 7d", bad_age.stderr)

        go, live = self.start_running("live")
        refused = self.prune("live")
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("is running", refused.stderr)
        self.assertIn("live", self.on_disk())

        none = self.prune("--older-than", "1h", "--dry-run")
        self.assertEqual(none.returncode, 0, none.stderr)
        self.assertIn("nothing would be pruned", none.stdout)
        time.sleep(1.2)
        sizes = {job: self.size(job) for job in ("p2", "p3")}
        aged = self.prune("--older-than", "1s")
        self.assertEqual(aged.returncode, 0, aged.stderr)
        self.assertIn("pruned 2 job(s)", aged.stdout)
        freed = int(re.search(r"\((\d+) bytes\)", aged.stdout).group(1))
        self.assertGreaterEqual(freed, sum(sizes.values()))
        self.assertLessEqual(freed, sum(sizes.values()) + 2 * READER_FILES_SLACK)
        if self.listed()["live"]["last_seen_ns"] < time.time_ns() - 1_000_000_000:
            self.assertIn("kept, still running: live", aged.stdout)
        self.assertEqual(self.on_disk(), {"live"})
        self.assertEqual(set(self.listed()), {"live"})
        go.touch()
        live.communicate(timeout=60)


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("useradd") and shutil.which("runuser"),
                     "needs root with useradd and runuser: the test creates a throw-away user")
class ShareTest(BudgetTestCase):
    """Campaign row 5d (issue 34): one user's flood never deletes another user's job; the budget
    takes the flooder's own oldest jobs, and a quota refuses the flooder's new records rather than
    delete anything. On a small tmpfs of its own, as a node's data disk."""

    @classmethod
    def setUpClass(cls):
        subprocess.run(["userdel", FLOODER], capture_output=True)  # left by an aborted run
        subprocess.run(["useradd", "-M", "-N", "-s", "/usr/sbin/nologin", FLOODER], check=True,
                       capture_output=True)
        cls.addClassCleanup(subprocess.run, ["userdel", FLOODER], capture_output=True)

    def setUp(self):
        super().setUp()
        os.chmod(self.root, 0o755)  # the flooder reaches the socket (0666) through it
        self.daemon.data_dir = mount_tmpfs(self, self.root / "disk", "64m") / "data"

    def run_as_flooder(self, job):
        spool = self.root / "spool-flood"
        spool.mkdir(mode=0o700, exist_ok=True)
        shutil.chown(spool, FLOODER)
        env = {"FLOPSCOPE_SPOOL_DIR": str(spool), "FLOPSCOPE_EXIT_TIMEOUT_MS": "1000",
               **rank_env(0, 1)}
        command = ["runuser", "-u", FLOODER, "--", "env", *[f"{k}={v}" for k, v in env.items()],
                   tool("flopscope"), "run", "--job", job, "--socket", str(self.daemon.socket),
                   "--", *JOB_COMMAND]
        return subprocess.run(command, capture_output=True, text=True, timeout=120)

    def test_a_flood_deletes_only_the_flooders_jobs_and_a_quota_refuses_it(self):
        self.daemon.start()
        self.run_finished("alice")  # root's job, the oldest of all: least-recently-seen's first
        floods = [f"flood-{i}" for i in range(4)]
        for job in floods:
            result = self.run_as_flooder(job)
            self.assertEqual(result.returncode, 0, result.stderr)
        self.daemon.stop()
        sizes = {job: self.size(job) for job in ["alice", *floods]}
        flood = max(sizes[job] for job in floods)
        self.assertGreater(flood, 4 * READER_FILES_SLACK, "jobs too small to tell")
        # Room for alice's job and two of the flood: two users hold data, shares of half the
        # budget; only the flooder is over its share.
        budget = sizes["alice"] + 2 * flood + flood // 2
        self.daemon.start(extra_args=["--max-disk", str(budget), "--disk-check-period-s", "0.2",
                                      "--prune-grace-s", "0"])
        self.wait_for(lambda: self.on_disk() == {"alice", "flood-2", "flood-3"},
                      "the two oldest flood jobs pruned")
        time.sleep(0.6)  # three more passes: nothing else goes once the rest fit
        self.assertEqual(self.on_disk(), {"alice", "flood-2", "flood-3"})
        self.assertEqual(self.pruned_in_log(), ["flood-0", "flood-1"])
        self.daemon.stop()

        # A quota under what the flooder holds (two jobs), over what alice will hold (one job:
        # she prunes her old one first, so that her next job alone stays under the quota while
        # it is written): the flooder's next job is refused, nothing is deleted, and alice's
        # next job is stored as before.
        uid = pwd.getpwnam(FLOODER).pw_uid
        self.daemon.start(extra_args=["--max-disk-per-user", str(flood + flood // 2),
                                      "--disk-check-period-s", "0.2"])
        pruned = client(["prune", "alice", "--socket", str(self.daemon.socket)])
        self.assertEqual(pruned.returncode, 0, pruned.stderr)
        self.wait_for(lambda: f"refusing new records of uid {uid}" in self.daemon.log(),
                      "the flooder refused")
        refused = self.run_as_flooder("flood-4")
        self.assertIn("the daemon refused them: daemon disk full", refused.stderr)
        self.assertRegex(self.daemon.log(), rf"daemon disk full for uid {uid}: .*--max-disk-per-user")
        self.assertNotIn("flood-4", {job for job, info in self.listed().items()
                                     if info.get("ranges", 0) > 0})
        self.run_finished("alice-2")
        self.assertGreater(self.listed()["alice-2"]["ranges"], 0)
        self.assertEqual(self.on_disk(), {"flood-2", "flood-3", "alice-2"})
        self.assertEqual(self.pruned_in_log(), ["alice"], "the budget itself deleted nothing")
