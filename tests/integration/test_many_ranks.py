"""64 ranks on one node (issue 15): every rank streams as fast as transformer_nvtx can into one
daemon, every record arrives (spooled ones delivered within a minute), and `ranks` and `report`
answer in under a second during the load: sampled over and over while the ranks run, the median
of each must be under 1 s.

The job is started the way a launcher starts one (tests/integration/rank_launcher.py: all 64
ranks children of one process in a session of its own, as under torchrun or srun), not as 64
children of this test: the kernel's autogroup scheduler shares the CPU between sessions first,
and 64 ranks inside the test's own session would leave each `flopscope` command 1/66 of it, a
test artefact that measured 0.2-3 s for a command needing 10 ms of CPU. Each query's daemon-side
phases (daemon/query/query_spans.h) are printed beside the client's wall time."""

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import DaemonTestCase, client, rank_env, start_job, tool

WORLD = 64
# Small enough that 64 ranks finish in seconds on two cores; every step still records the whole
# module tree (embedding, 2 layers of attention and MLP, head) and its phases.
COMMAND = ["--steps", "12", "--layers", "2", "--hidden", "8", "--batch", "1", "--seq", "4",
           "--vocab", "16", "--no-loader-thread", "--cpu"]
LAUNCHER = Path(__file__).resolve().parent / "rank_launcher.py"
# The target (issue 15 item 2), for the median of each command's samples.
TARGET_MEDIAN_S = 1.0
# The worst single sample, looser: one sample can land on a burst (64 processes starting at once
# on two cores shared with whatever else runs). In development, under load averages of 28-52 from
# other builds, the worst of ~130 samples was 0.2-1.9 s; before the daemon's queries stopped
# waiting for the streams' catalog lock, that lock alone held one for 1.2 s, and ranks started in
# the test's session made single queries take 4-16 s.
WORST_S = 5.0
# Samples needed for the median to mean something.
MIN_SAMPLES = 5


class ManyRanksTest(DaemonTestCase):

    def query(self, *args):
        result = client([*args, "--socket", str(self.daemon.socket), "--format", "json"])
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout)

    def launch(self, job, world):
        """The job's ranks under one launcher in a session of its own; killed if the test fails."""
        launcher = subprocess.Popen(
            [sys.executable, str(LAUNCHER), str(self.daemon.socket), job, str(world),
             tool("flopscope"), "--", tool("transformer_nvtx"), *COMMAND],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)

        def kill_leftovers():
            if launcher.poll() is None:
                os.killpg(launcher.pid, signal.SIGKILL)  # the launcher leads the job's group
                launcher.wait()
        self.addCleanup(kill_leftovers)
        return launcher

    def sample_queries(self, job, launcher):
        """Runs `ranks` and `report` in turn until the job ends; their wall times in seconds."""
        latencies = {"ranks": [], "report": []}
        while launcher.poll() is None:
            for command in latencies:
                started = time.monotonic()
                result = client([command, job, "--socket", str(self.daemon.socket), "--format",
                                 "json"])
                if result.returncode == 0:  # else no rank has connected yet
                    latencies[command].append(time.monotonic() - started)
        return latencies

    def check_ranks_ended(self, launcher):
        out, err = launcher.communicate(timeout=120)
        self.assertEqual(launcher.returncode, 0, err)
        ended = json.loads(out)
        self.assertEqual(len(ended), WORLD)
        for rank, result in enumerate(ended):
            self.assertEqual(result["returncode"], 0, f"rank {rank}: {result['stderr']}")
            self.assertNotIn("not delivered", result["stderr"], f"rank {rank}")
        return sum("spooled" in result["stderr"] for result in ended)

    def wait_for_spools(self, timeout=60.0):
        spool = self.root / "spool"
        deadline = time.monotonic() + timeout
        while list(spool.glob("*/*.spool")) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(list(spool.glob("*/*.spool")), [], "spooled records not delivered")

    def daemon_spans(self, job):
        """Total daemon-side time of each query RPC on `job`, from its debug lines, and the
        slowest line (its phases say where the time went)."""
        totals, slowest = {}, (0.0, "")
        unit = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
        for line in self.daemon.log().splitlines():
            found = re.search(rf"debug: (\w+) '{job}':.*\(total ([\d.]+)(us|ms|s)\)", line)
            if found:
                total = float(found[2]) * unit[found[3]]
                totals.setdefault(found[1], []).append(total)
                slowest = max(slowest, (total, line))
        return totals, slowest[1]

    def test_64_ranks_deliver_everything_while_queries_answer(self):
        self.daemon.start(extra_args=["--collect-spools", str(self.root / "spool"),
                                      "--collect-spools-period-s", "1", "--log-level", "debug"])
        solo_job = start_job(self.daemon.socket, "solo", [tool("transformer_nvtx"), *COMMAND],
                             env=rank_env(0, 1))
        _, err = solo_job.communicate(timeout=60)
        self.assertEqual(solo_job.returncode, 0, err)
        solo = self.query("ranks", "solo")["ranks"][0]
        self.assertGreater(solo["ranges"], 0)
        self.assertEqual(solo["lost"], 0)

        load_before = os.getloadavg()[0]
        started = time.monotonic()
        launcher = self.launch("many", WORLD)
        latencies = self.sample_queries("many", launcher)
        produced_s = time.monotonic() - started
        spooled_ranks = self.check_ranks_ended(launcher)
        self.wait_for_spools()
        ranks = self.query("ranks", "many")["ranks"]
        self.assertEqual(sorted(r["rank"] for r in ranks), list(range(WORLD)))
        for rank in ranks:  # the same program, so the same records as the solo rank: all of them
            self.assertEqual((rank["rank"], rank["ranges"], rank["lost"],
                              rank["sessions_without_final"]),
                             (rank["rank"], solo["ranges"], 0, 0))
        jobs = {j["job"]: j for j in self.query("jobs")["jobs"]}
        self.assertEqual(jobs["many"]["ranges"], WORLD * solo["ranges"])

        print(f"{WORLD} ranks x {solo['ranges']} range events each, all stored; "
              f"{spooled_ranks} ranks spooled at exit (delivered by the daemon's collector); "
              f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")
        totals, slowest = self.daemon_spans("many")
        for rpc, values in sorted(totals.items()):
            print(f"  daemon {rpc}: {len(values)} calls, median "
                  f"{statistics.median(values) * 1e3:.1f} ms, max {max(values) * 1e3:.1f} ms")
        print(f"  slowest: {slowest}")
        for name, values in latencies.items():
            print(f"{name} during {WORLD} ranks ({produced_s:.1f} s): {len(values)} calls, "
                  f"median {statistics.median(values):.3f} s, max {max(values):.3f} s"
                  if values else f"{name}: no answer during the load")
        for name, values in latencies.items():
            self.assertGreaterEqual(len(values), MIN_SAMPLES, f"{name}: too few samples")
            self.assertLess(statistics.median(values), TARGET_MEDIAN_S, name)
            self.assertLess(max(values), WORST_S, name)


if __name__ == "__main__":
    import unittest
    unittest.main()
