"""GPU test (ctest label `gpu`): kernel_workload under the injector with a real daemon.

Every kernel the program launched is recorded exactly once, attributed to the range that was
open at its launch (graph kernels: the range that captured them), with start <= end inside the
run; memcpy and memset are stored apart; cuBLAS's kernels land in the range around the GEMM; the
report and `--kernels` show them. Exits 77 (skipped) when the machine has no CUDA device; a device
that is there but unusable fails (gpu_main.py)."""

import json
import os
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from harness import DaemonTestCase, client, report, run_job, test_program  # noqa: E402
from gpu_main import require_device, run_main  # noqa: E402

# CUPTI interpolates GPU timestamps onto CLOCK_REALTIME; allow that conversion a little slack.
SLACK_NS = 20_000_000


def workload():
    return test_program("gpu_kernel_workload")


def kernel_rows(rank_file):
    """(name, path, kind, start_ns, end_ns, correlation_id) of every stored GPU activity."""
    with sqlite3.connect(rank_file) as db:
        paths = {row[0]: (row[1], row[2]) for row in
                 db.execute("SELECT id, parent_id, name FROM range_paths")}
        names = dict(db.execute("SELECT id, value FROM strings"))
        rows = db.execute("SELECT name_id, path_id, kind, start_ns, end_ns, correlation_id "
                          "FROM kernels").fetchall()

    def full_path(path_id):
        parts = []
        while path_id:
            parent, name = paths[path_id]
            parts.append(name)
            path_id = parent
        return "/".join(reversed(parts))

    return [(names.get(name_id, ""), full_path(path_id), kind, start, end, correlation)
            for name_id, path_id, kind, start, end, correlation in rows]


class GpuKernelsTest(DaemonTestCase):

    def test_every_kernel_recorded_once_in_its_range(self):
        self.daemon.start()
        expectations_file = self.root / "expect.json"
        result = run_job(self.daemon.socket, "gpu", [workload(), str(expectations_file)])
        self.assertEqual(result.returncode, 0, result.stderr)
        expected = json.loads(expectations_file.read_text())
        rows = kernel_rows(self.daemon.rank_file("gpu", 0))
        kernels = [r for r in rows if r[2] == 1]

        ours = {e["kernel"] for e in expected["expect"]}
        for e in expected["expect"]:
            matching = [r for r in kernels if e["kernel"] in r[0] and r[1] == e["path"]]
            self.assertEqual(len(matching), e["count"], (e, sorted({(r[0], r[1]) for r in kernels})))
        for name, path, _, _, _, _ in kernels:
            if any(k in name for k in ours):
                continue
            self.assertEqual(path, expected["cublas_path"], f"unexpected kernel {name} in {path!r}")
        self.assertGreaterEqual(
            len([r for r in kernels if r[1] == expected["cublas_path"]]), 2, "cuBLAS kernels")
        memory = [r for r in rows if r[2] in (2, 3)]
        self.assertEqual({r[2] for r in memory if r[1] == expected["memory_path"]}, {2, 3})

        for name, _, _, start, end, _ in rows:
            self.assertLessEqual(start, end, name)
            self.assertGreaterEqual(start, expected["start_ns"] - SLACK_NS, name)
            self.assertLessEqual(end, expected["end_ns"] + SLACK_NS, name)
        # A kernel replayed from a graph shares its launch's correlation id; nothing else does.
        singles = [r for r in kernels if "graph_kernel" not in r[0]]
        self.assertEqual(len({r[5] for r in singles}), len(singles))

        rep = report(self.daemon.socket, "gpu")
        self.assertTrue(rep["ranks"][0]["gpu_status"].startswith("tracing kernels"), rep["ranks"])
        self.assertTrue(rep["ranks"][0]["devices"], "device facts missing")
        modules = {m["path"]: m for m in rep["modules"]}
        encoder = modules["Workload/encoder"]
        self.assertEqual(encoder["kernels"], 8)
        self.assertGreater(encoder["gpu_span_s"], 0)
        self.assertLessEqual(encoder["gpu_busy_s"], encoder["gpu_span_s"])
        self.assertEqual(encoder["memcpy"]["count"], 1)
        self.assertEqual(encoder["memset"]["count"], 1)

        top = client(["report", "gpu", "--socket", str(self.daemon.socket),
                      "--kernels", "Workload/encoder"])
        self.assertEqual(top.returncode, 0, top.stderr)
        self.assertIn("encoder_kernel(float*, int)", top.stdout)


def setUpModule():
    os.environ.setdefault("FLOPSCOPE_EXIT_TIMEOUT_MS", "10000")
    require_device(workload())


if __name__ == "__main__":
    sys.exit(run_main(__name__))
