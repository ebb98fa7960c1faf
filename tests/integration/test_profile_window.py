"""`flopscope profile`: a counter-window request travels client -> daemon -> the running rank's
injector and its answer comes back, naming the rank. Without a GPU the injector refuses; the test
asserts the structure of the answer, not the injector's wording."""

import json
import re
import time

from harness import DaemonTestCase, client, rank_env, start_job, test_program

JOB = "window"
SUMMARY = re.compile(r"^(\d+) of (\d+) ranks? accepted$")
ANSWER = re.compile(r"^rank (\d+)\s+(accepted|refused)(?:\s+(.*))?$")


def parse_profile_answers(test, result):
    """`flopscope profile`'s answer lines as (rank, verdict, message), and its summary's two
    figures (accepted, asked); fails `test` on any line of another shape."""
    lines = result.stdout.splitlines()
    test.assertGreaterEqual(len(lines), 2, result.stdout + result.stderr)
    summary = SUMMARY.match(lines[-1])
    test.assertIsNotNone(summary, lines[-1])
    answers = []
    for line in lines[:-1]:
        match = ANSWER.match(line)
        test.assertIsNotNone(match, f"not an answer line: {line!r}")
        answers.append((int(match.group(1)), match.group(2), match.group(3) or ""))
    return answers, int(summary.group(1)), int(summary.group(2))


class ProfileWindowTest(DaemonTestCase):

    def setUp(self):
        super().setUp()
        self.daemon.start()
        self.go = self.root / "go"
        # Pushes its first ranges, then waits for `go`: a rank that stays connected meanwhile.
        self.job = start_job(self.daemon.socket, JOB, [
            test_program("nvtx_phases"), "--before", "3", "--wait-file", str(self.go),
            "--after", "2", "--timeout-ms", "120000"], env=rank_env(0, 1))
        try:
            self._wait_until_connected()
        except BaseException:
            self.job.kill()
            self.job.communicate()
            super().tearDown()
            raise

    def tearDown(self):
        # Before the base class removes the directory `go` lives in.
        try:
            self.go.touch()
            try:
                out, err = self.job.communicate(timeout=60)
            except Exception:
                self.job.kill()
                self.job.communicate()
                raise
            self.assertEqual(self.job.returncode, 0, err)
            self.assertEqual(out, "nvtx_phases done\n")
        finally:
            super().tearDown()

    def _wait_until_connected(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.assertIsNone(self.job.poll(), "the job ended before it connected")
            listed = client(["jobs", "--socket", str(self.daemon.socket), "--format", "json"])
            jobs = {j["job"]: j for j in json.loads(listed.stdout)["jobs"]} if listed.returncode == 0 else {}
            if jobs.get(JOB, {}).get("connected", 0) >= 1:
                return
            time.sleep(0.05)
        self.fail(f"job {JOB} never connected:\n{self.daemon.log()}")

    def profile(self, *args):
        """`flopscope profile`, retried briefly: the catalog lists a rank as connected just before
        the daemon welcomes it and opens its stream to controls."""
        command = ["profile", JOB, "--count", "2", "--socket", str(self.daemon.socket), *args]
        deadline = time.monotonic() + 10
        while True:
            result = client(command)
            not_yet = "is connected" in result.stderr or "rank 0 is not connected" in result.stdout
            if not not_yet or time.monotonic() > deadline:
                return result
            time.sleep(0.05)

    def test_the_running_rank_answers(self):
        result = self.profile()
        answers, accepted, asked = parse_profile_answers(self, result)
        self.assertEqual([rank for rank, _, _ in answers], [0], result.stdout)
        self.assertEqual(asked, 1)
        rank, verdict, message = answers[0]
        self.assertEqual(accepted, 1 if verdict == "accepted" else 0)
        self.assertEqual(result.returncode, 0 if accepted else 1, result.stderr)
        if verdict == "refused":
            # The process said why (no GPU here): a reason, not a timeout of the daemon's.
            self.assertTrue(message, result.stdout)
            self.assertNotIn("no reply within", message)
        log = self.daemon.log()
        self.assertIn(f"counter window requested: job {JOB} all ranks, 2 steps", log)
        self.assertIn(f"counter window for job {JOB}: {accepted} of 1 ranks accepted", log)

    def test_a_listed_rank_that_is_not_there_is_named(self):
        result = self.profile("--rank", "0", "--rank", "3", "--set", "cheap")
        answers, _, asked = parse_profile_answers(self, result)
        self.assertEqual([rank for rank, _, _ in answers], [0, 3], result.stdout)
        self.assertEqual(asked, 2)
        self.assertEqual(answers[1][1], "refused")
        self.assertIn("has no rank 3", answers[1][2])

        only_missing = self.profile("--rank", "3")
        self.assertEqual(only_missing.returncode, 1)
        self.assertEqual(only_missing.stdout, "")
        self.assertIn("has no rank 3", only_missing.stderr)

    def test_errors_are_clear(self):
        unknown = client(["profile", "no-such-job", "--count", "2", "--socket",
                          str(self.daemon.socket)])
        self.assertEqual(unknown.returncode, 1)
        self.assertIn("job 'no-such-job' not found", unknown.stderr)
        too_many = client(["profile", JOB, "--count", "100000", "--socket",
                           str(self.daemon.socket)])
        self.assertEqual(too_many.returncode, 2, too_many.stderr)
        nobody = client(["profile", JOB, "--count", "2", "--socket", str(self.root / "none.sock")])
        self.assertEqual(nobody.returncode, 1)
        self.assertIn("cannot reach flopscoped", nobody.stderr)
