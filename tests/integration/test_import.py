"""`flopscope import` end to end: third-party traces from ../shared/data into a real flopscoped,
read back with `flopscope report --format json`. Expected values are computed here from the raw
files (Python's json / gzip / sqlite3), never typed in. Skips when the shared data is absent."""

import gzip
import json
import os
import sqlite3
import unittest
from pathlib import Path

from harness import DaemonTestCase, client, report

DATA = Path(os.environ.get("FLOPSCOPE_SHARED_DATA_DIR",
                           Path(__file__).resolve().parents[3] / "shared" / "data"))
HTA = DATA / "HolisticTraceAnalysis" / "tests" / "data"
RANK0 = HTA / "trace_filter" / "sampled_rank-0.json.gz"
RANK1 = HTA / "trace_filter" / "sampled_rank-1.json.gz"
COUNTERS = HTA / "cupti_profiler" / "benchmark_result_924719_1679055439_trace.json.gz"
QWEN = DATA / "TraceLens" / "tests" / "traces" / "h100" / "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
NSYS = DATA / "pipit" / "pipit" / "tests" / "data" / "cloverleaf-nsys" / \
    "perlmutter-cloverleaf-cuda.sqlite"


def load(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)


def complete_events(trace, *categories):
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") in categories]


def top_level_kernels(rep):
    # Kernels, memcpys and memsets: the report counts them apart.
    return sum(m["kernels"] + m["memcpy"]["count"] + m["memset"]["count"]
               for m in rep["modules"] if "/" not in m["path"])


def module_paths_by_parent_ids(trace):
    """Module path of every nn.Module event, walking Python parent ids."""
    by_id = {e["args"]["Python id"]: e for e in complete_events(trace, "python_function")}
    paths = {}
    for event in by_id.values():
        if not event["name"].startswith("nn.Module: "):
            continue
        names, current = [], event
        while current is not None:
            if current["name"].startswith("nn.Module: "):
                names.append(current["name"][len("nn.Module: "):])
            current = by_id.get(current["args"].get("Python parent id"))
        path = "/".join(reversed(names))
        paths[path] = paths.get(path, 0) + 1
    return paths


@unittest.skipUnless(RANK0.exists(), f"shared data not found under {DATA}")
class ImportTest(DaemonTestCase):

    def run_import(self, *files, job):
        return client(["import", *map(str, files), "--job", job, "--socket",
                       str(self.daemon.socket)], timeout=120)

    def test_two_rank_files_become_one_job(self):
        self.daemon.start()
        result = self.run_import(RANK0, RANK1, job="tworank")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(len(result.stdout.strip().splitlines()), 2, result.stdout)
        rep = report(self.daemon.socket, "tworank", steps="0:")  # every step, warm-up included
        traces = [load(RANK0), load(RANK1)]
        self.assertEqual(sorted(r["rank"] for r in rep["ranks"]),
                         sorted(t["distributedInfo"]["rank"] for t in traces))
        expected = sum(len(complete_events(t, "kernel", "gpu_memcpy", "gpu_memset"))
                       for t in traces)
        self.assertEqual(top_level_kernels(rep), expected)
        steps = sum(1 for t in traces for e in complete_events(t, "user_annotation")
                    if e["name"].startswith("ProfilerStep#"))
        self.assertEqual({p["name"]: p["calls"] for p in rep["phases"]}.get("step"), steps)
        rank1 = report(self.daemon.socket, "tworank", rank=1)
        self.assertEqual([r["rank"] for r in rank1["ranks"]], [1])
        listed = client(["ranks", "tworank", "--socket", str(self.daemon.socket), "--format",
                         "json"])
        self.assertEqual(listed.returncode, 0, listed.stderr)
        by_rank = {r["rank"]: r for r in json.loads(listed.stdout)["ranks"]}
        self.assertEqual(sorted(by_rank), sorted(t["distributedInfo"]["rank"] for t in traces))
        for trace in traces:
            info = trace["distributedInfo"]
            row = by_rank[info["rank"]]
            self.assertEqual(row["world_size"], info["world_size"])
            # Kernels alone, as in every view: memory copies and sets are counted apart.
            self.assertEqual(row["kernels"], len(complete_events(trace, "kernel")))
        text = client(["ranks", "tworank", "--socket", str(self.daemon.socket)])
        self.assertEqual(text.returncode, 0, text.stderr)
        # The steps line (which steps the figures cover), the header, its rule, one row a rank.
        self.assertEqual(len(text.stdout.strip().splitlines()), 3 + len(traces), text.stdout)

    def test_module_tree_of_a_transformer(self):
        self.daemon.start()
        result = self.run_import(QWEN, job="qwen")
        self.assertEqual(result.returncode, 0, result.stderr)
        rep = report(self.daemon.socket, "qwen")
        calls = {m["path"]: m["calls"] for m in rep["modules"]}
        for path, count in module_paths_by_parent_ids(load(QWEN)).items():
            self.assertEqual(calls.get(path), count, path)

    def test_counter_fixture_flops(self):
        self.daemon.start()
        result = self.run_import(COUNTERS, job="counters")
        self.assertEqual(result.returncode, 0, result.stderr)
        expected = 0.0
        for event in complete_events(load(COUNTERS), "cuda_profiler_range"):
            c = {k.split("_op_")[1].split("_")[0]: v for k, v in event["args"].items()}
            expected += (c["dadd"] + c["dmul"] + 2 * c["dfma"] + c["fadd"] + c["fmul"] +
                         2 * c["ffma"] + 2 * c["hadd"] + 2 * c["hmul"] + 4 * c["hfma"])
        rep = report(self.daemon.socket, "counters")
        reported = sum(m["flops"] or 0 for m in rep["modules"] if "/" not in m["path"])
        self.assertAlmostEqual(reported, expected, delta=expected * 1e-12)

    def test_importing_again_stores_nothing_twice(self):
        self.daemon.start()
        self.assertEqual(self.run_import(RANK0, job="again").returncode, 0)
        before = top_level_kernels(report(self.daemon.socket, "again"))
        second = self.run_import(RANK0, job="again")
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertIn("already imported", second.stdout)
        self.assertEqual(top_level_kernels(report(self.daemon.socket, "again")), before)

    def test_nsight_export(self):
        self.daemon.start()
        result = self.run_import(NSYS, job="nsys")
        self.assertEqual(result.returncode, 0, result.stderr)
        db = sqlite3.connect(f"file:{NSYS}?mode=ro", uri=True)
        expected = sum(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                       for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"))
        db.close()
        self.assertEqual(top_level_kernels(report(self.daemon.socket, "nsys")), expected)

    def test_malformed_files_store_nothing(self):
        self.daemon.start()
        truncated = self.root / "cut.json.gz"
        truncated.write_bytes(RANK1.read_bytes()[:50000])
        invalid = self.root / "invalid.json"
        invalid.write_text('{"traceEvents": [{"ph": "X", "ts": 1,}]}')
        not_nsys = self.root / "other.sqlite"
        db = sqlite3.connect(not_nsys)
        db.execute("CREATE TABLE t(x)")
        db.commit()
        db.close()
        for bad, problem in ((truncated, "truncated"), (invalid, "offset"),
                             (not_nsys, "not an Nsight Systems export")):
            result = self.run_import(RANK0, bad, job="bad")
            self.assertNotEqual(result.returncode, 0)
            self.assertIn(str(bad), result.stderr)
            self.assertIn(problem, result.stderr)
        listed = client(["report", "bad", "--socket", str(self.daemon.socket)])
        self.assertNotEqual(listed.returncode, 0, "nothing of a refused import may be stored")


if __name__ == "__main__":
    unittest.main()
