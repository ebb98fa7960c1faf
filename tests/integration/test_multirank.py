"""Several ranks into one daemon: one rank file each, per-rank and combined reports."""

import json

from harness import (DaemonTestCase, calls_by_path, client, rank_env, report, start_job,
                     test_program, tool)


class MultiRankTest(DaemonTestCase):

    def run_ranks(self, job, world_size, command):
        jobs = [start_job(self.daemon.socket, job, command, env=rank_env(r, world_size))
                for r in range(world_size)]
        for rank, process in enumerate(jobs):
            out, err = process.communicate(timeout=120)
            self.assertEqual(process.returncode, 0, f"rank {rank}: {err}")

    def test_two_ranks_of_the_example(self):
        self.daemon.start()
        self.run_ranks("demo2", 2, [tool("transformer_nvtx"), "--steps", "2", "--layers", "1"])
        combined = report(self.daemon.socket, "demo2")
        self.assertEqual(sorted(r["rank"] for r in combined["ranks"]), [0, 1])
        rank1 = report(self.daemon.socket, "demo2", rank=1)
        self.assertEqual([r["rank"] for r in rank1["ranks"]], [1])
        per_rank = calls_by_path(rank1)
        self.assertEqual(per_rank["TransformerLM"], 4)
        self.assertEqual(calls_by_path(combined)["TransformerLM"], 8)
        for rank in (0, 1):
            self.assertTrue(self.daemon.rank_file("demo2", rank).exists())

    def test_four_ranks_one_daemon(self):
        self.daemon.start()
        self.run_ranks("four", 4, [test_program("nvtx_phases"), "--before", "5", "--threads", "2"])
        rep = report(self.daemon.socket, "four")
        self.assertEqual(sorted(r["rank"] for r in rep["ranks"]), [0, 1, 2, 3])
        self.assertEqual(calls_by_path(rep), {"before": 40, "before/work": 40})
        for rank in range(4):
            self.assertEqual(calls_by_path(report(self.daemon.socket, "four", rank=rank)),
                             {"before": 10, "before/work": 10})
            self.assertTrue(self.daemon.rank_file("four", rank).exists())
        jobs = json.loads(client(["jobs", "--socket", str(self.daemon.socket), "--format",
                                  "json"]).stdout)
        four = [j for j in jobs["jobs"] if j["job"] == "four"]
        self.assertEqual(len(four), 1, jobs)
        self.assertEqual(four[0]["ranks"], 4)

    def test_unknown_rank_is_a_clear_error(self):
        self.daemon.start()
        self.run_ranks("one", 1, [test_program("nvtx_phases"), "--before", "1"])
        result = client(["report", "one", "--rank", "7", "--socket", str(self.daemon.socket)])
        self.assertEqual(result.returncode, 1)
        self.assertIn("rank", result.stderr)
