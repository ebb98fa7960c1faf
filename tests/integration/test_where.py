"""`flopscope where JOB` finds a hang (issue 31 item 2): 3 ranks of DDP over gloo on the CPU, each
under `flopscope run --torch`, one launch of test_where_job.py. Rank 1 stops inside the forward of
the model's `slowed` module while ranks 0 and 2 block in DDP's all-reduce waiting for it. While
they hang, `flopscope where` must flag rank 1, in that module, open at least as long as the test
has seen it hang and longer at a second look, and name ranks 0 and 2 as the others, together in
their backward; the daemon's
/metrics must age rank 1's oldest open range past the hang so far. Once the ranks are released
and end, `where` says nothing is open.

The module's path comes from the job's own model (its class and attribute names); ages are
checked against the test's own clock from the moment the hung rank said it hung."""

import json
import re
import time
import unittest
import urllib.request

from harness import DaemonTestCase, client
from test_torch_support import HAVE_TORCH, NO_TORCH, HERE, launch_ranks, wait_ranks

if HAVE_TORCH:
    import test_where_job as job

WORLD = 3
HUNG_RANK = 1
JOB = "where"
# How much younger than the test's own count of the hang an age may read: the clocks are one
# machine's, so this only covers the hung rank's file write and the test's poll (50 ms).
AGE_SLACK = 0.5
# How long the ranks' snapshots may take to arrive: at most one a second per process, plus a
# loaded machine's delays.
SNAPSHOT_WAIT = 20


@unittest.skipUnless(HAVE_TORCH, NO_TORCH)
class WhereTest(DaemonTestCase):
    def where(self, output_format="json", job_listed=True):
        result = client(["where", JOB, "--socket", str(self.daemon.socket), "--format",
                         output_format])
        if not job_listed and "not found" in result.stderr:
            return None  # no rank has connected yet
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout) if output_format == "json" else result.stdout

    def metrics(self):
        found = re.search(r"metrics on http://([0-9.]+:[0-9]+)/metrics", self.daemon.log())
        self.assertIsNotNone(found, self.daemon.log())
        with urllib.request.urlopen(f"http://{found.group(1)}/metrics", timeout=10) as answer:
            return answer.read().decode()

    def oldest_open_gauge(self, rank):
        pattern = (r'^flopscope_rank_oldest_open_range_seconds\{[^}]*job="' + JOB +
                   r'"[^}]*rank="' + str(rank) + r'"[^}]*\} (\S+)$')
        found = re.search(pattern, self.metrics(), re.MULTILINE)
        return float(found.group(1)) if found else None

    def wait_until_flagged(self):
        """The `where` answer once every rank's snapshot shows the hang, and the time it was
        asked (before the daemon's answer, so no later than the time its ages are taken at)."""
        deadline = time.monotonic() + SNAPSHOT_WAIT
        while True:
            asked = time.time()
            answer = self.where(job_listed=False)
            if answer and answer["flagged"] == [HUNG_RANK] and all(
                    rank["state"] == "open" for rank in answer["ranks"]):
                return answer, asked
            if time.monotonic() > deadline:
                self.fail(f"rank {HUNG_RANK} never flagged: {json.dumps(answer, indent=1)}\n"
                          f"{self.daemon.log()}")
            time.sleep(0.3)

    def test_where_names_the_hung_rank_and_the_metrics_age_it(self):
        self.daemon.start(extra_args=["--metrics", "127.0.0.1:0"])
        hung_file = self.root / "hung"
        release_file = self.root / "release"
        processes = launch_ranks(
            self.daemon.socket, JOB, WORLD,
            ["--hang-rank", str(HUNG_RANK), "--hung-file", str(hung_file),
             "--release-file", str(release_file)],
            script=HERE / "test_where_job.py")
        try:
            deadline = time.monotonic() + 120
            while not hung_file.exists() and time.monotonic() < deadline:
                self.assertTrue(all(p.poll() is None for p in processes), "a rank ended early")
                time.sleep(0.05)
            self.assertTrue(hung_file.exists(), "the rank never reached its hang")
            hung_since = time.time()  # no later than the rank wrote the file
            self.check_hang(hung_since)
        finally:
            release_file.touch()
        outputs = wait_ranks(self, processes)
        self.assertEqual([out for out, _ in outputs],
                         [f"rank {rank}: {job.STEPS} steps\n" for rank in range(WORLD)])
        self.check_ended()

    def check_hang(self, hung_since):
        module = f"{job.Net.__name__}/{job.SLOWED}"
        first, asked = self.wait_until_flagged()
        hung = first["ranks"][HUNG_RANK]
        self.assertEqual((hung["module"], hung["phase"]), (module, "forward"), hung)
        self.assertGreaterEqual(hung["open_for_s"], asked - hung_since - AGE_SLACK)
        # The others are together (in their backward: DDP's all-reduce waits there, with or
        # without the first layer's backward range still open), not in the hung rank's module;
        # the hung rank is alone in its place.
        others = [rank for rank in range(WORLD) if rank != HUNG_RANK]
        self.assertEqual(first["majority"]["ranks"], others, first["majority"])
        self.assertEqual(first["majority"]["phase"], "backward", first["majority"])
        self.assertNotEqual(first["majority"]["module"], module)
        self.assertIn([HUNG_RANK], [group["ranks"] for group in first["groups"]], first["groups"])

        # The hang goes on: a second look sees the same range, older.
        time.sleep(1.0)
        text = self.where("text")
        asked = time.time()
        second = self.where()
        again = second["ranks"][HUNG_RANK]
        self.assertEqual(again["module"], module)
        self.assertGreater(again["open_for_s"], hung["open_for_s"] + 0.5)
        self.assertGreaterEqual(again["open_for_s"], asked - hung_since - AGE_SLACK)
        line = next((line for line in text.splitlines()
                     if line.startswith(f"rank {HUNG_RANK} is not where the others are: ")), None)
        self.assertIsNotNone(line, text)
        self.assertIn(f"in {module} (forward) for ", line)
        self.assertIn(f"; ranks {','.join(map(str, others))} wait ", line)
        print(f"\n--- flopscope where {JOB} (while rank {HUNG_RANK} hangs) ---\n{text}")

        # /metrics ages the hung rank's oldest open range (its step) from the same snapshot.
        seen_for = time.time() - hung_since
        gauge = self.oldest_open_gauge(HUNG_RANK)  # scraped after seen_for was taken
        self.assertIsNotNone(gauge, self.metrics())
        self.assertGreaterEqual(gauge, seen_for - AGE_SLACK)
        self.assertGreaterEqual(gauge, again["oldest_open_s"])

    def check_ended(self):
        deadline = time.monotonic() + SNAPSHOT_WAIT
        while True:
            answer = self.where()
            if all(rank["state"] == "ended" for rank in answer["ranks"]):
                break
            if time.monotonic() > deadline:
                self.fail(f"the ranks never ended: {json.dumps(answer, indent=1)}")
            time.sleep(0.3)
        self.assertEqual(answer["flagged"], [])
        self.assertEqual(answer["groups"], [])
        text = self.where("text")
        self.assertIn("No rank is running: nothing is open.", text)
        print(f"--- flopscope where {JOB} (after the job) ---\n{text}")
        # An ended rank has no gauge: an alert on it would fire forever.
        self.assertIsNone(self.oldest_open_gauge(HUNG_RANK))


if __name__ == "__main__":
    unittest.main()
