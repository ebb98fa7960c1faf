"""tests/gpu/acceptance_checks.py on inputs made here (ctest label `dist`).

The acceptance's GPU rows cannot run without a GPU, but what they compute can: flopscope's
per-kernel FLOPs from a rank file made with the real schema (schema/rank.sql), ncu's raw CSV as
`ncu --csv --page raw --print-units base --print-kernel-base mangled` writes it, their comparison
kernel by kernel, the step durations and overheads, and the summary table's checks."""

import json
import sqlite3
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SOURCE_DIR / "tests" / "gpu"))
import acceptance_checks as checks  # noqa: E402

FFMA = "_Z11ffma_kernelPfff"
GEMM = "_ZN7cutlass6KernelI14gemm_bf16_tileEEvNT_6ParamsE"
COUNTERS = {"chip": "GH100", "passes": 6, "metrics": [
    {"name": "sm__sass_thread_inst_executed_op_ffma_pred_on.sum", "flops_per_count": 2.0},
    {"name": "sm__sass_thread_inst_executed_op_fadd_pred_on.sum", "flops_per_count": 1.0},
    {"name": "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "flops_per_count": 1.0},
    {"name": "gpu__time_duration.sum", "flops_per_count": 0.0}]}


def make_rank_file(path, launches, timed=True):
    """A rank file with `launches`: (correlation, name, grid, block, fp32, tensor, step).
    timed=False: no kernel rows, as for kernels CUPTI timed nothing of in kernel replay."""
    with sqlite3.connect(path) as db:
        db.executescript((SOURCE_DIR / "schema" / "rank.sql").read_text())
        names = sorted({launch[1] for launch in launches})
        db.executemany("INSERT INTO strings(sid, id, value) VALUES (1, ?, ?)",
                       [(i + 1, name) for i, name in enumerate(names)])
        for correlation, name, grid, block, fp32, tensor, step in launches:
            name_id = names.index(name) + 1
            if timed:
                db.execute("INSERT INTO kernels(sid, correlation_id, path_id, range_instance_id, "
                           "name_id, device_id, context_id, stream_id, start_ns, end_ns, grid_x, "
                           "grid_y, grid_z, block_x, block_y, block_z, kind, bytes, graph_id, "
                           "graph_node_id, counted) VALUES (1, ?, 1, 1, ?, 0, 1, 7, 0, 1, ?, ?, "
                           "?, ?, ?, ?, 1, 0, 0, 0, 1)", (correlation, name_id, *grid, *block))
            db.execute("INSERT INTO kernel_flops(sid, correlation_id, fp64, fp32, fp16, tensor, "
                       "raw, counted_step, name_id) VALUES (1, ?, 0, ?, 0, ?, x'', ?, ?)",
                       (correlation, fp32, json.dumps(tensor), step, name_id))


def ncu_csv(rows):
    """ncu's raw page: a header, a units row, then one row per profiled launch."""
    metrics = [m["name"] for m in COUNTERS["metrics"]]
    header = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
              "Block Size", "Grid Size", "Device", "CC", *metrics]
    units = ["", "", "", "", "", "", "", "", "", "", "", "inst", "inst", "", "ns"]
    lines = ["==PROF== Connected to process 4242 (flop_workload)", ",".join(f'"{h}"' for h in header),
             ",".join(f'"{u}"' for u in units)]
    for number, (name, grid, block, ffma, fadd, tensor) in enumerate(rows):
        values = [str(number), "4242", "flop_workload", "node", name, "1", "7",
                  "({}, {}, {})".format(*block), "({}, {}, {})".format(*grid), "0", "9.0",
                  f"{ffma:,}", f"{fadd:,}", f"{tensor:,}", "1,234"]
        lines.append(",".join(f'"{v}"' for v in values))
    return "\n".join(lines + ["==PROF== Disconnected from process 4242"]) + "\n"


class AcceptanceChecksTest(unittest.TestCase):

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.root = Path(self._tmp.name)
        (self.root / "counters.json").write_text(json.dumps(COUNTERS))

    def tearDown(self):
        self._tmp.cleanup()

    def run_checks(self, *args):
        return subprocess.run([sys.executable, str(SOURCE_DIR / "tests/gpu/acceptance_checks.py"),
                               *map(str, args)], capture_output=True, text=True, timeout=60)

    def compare(self, ours, theirs, timed=True):
        make_rank_file(self.root / "rank.sqlite", ours, timed)
        (self.root / "ncu.csv").write_text(ncu_csv(theirs))
        kernels = self.run_checks("flopscope-kernels", self.root / "rank.sqlite")
        self.assertEqual(kernels.returncode, 0, kernels.stderr)
        (self.root / "fs.json").write_text(kernels.stdout)
        return self.run_checks("ncu-compare", self.root / "counters.json", self.root / "ncu.csv",
                               self.root / "fs.json")

    def test_kernel_keys_join_mangled_and_demangled_names(self):
        make_rank_file(self.root / "rank.sqlite",
                       [(1, FFMA, (1024, 1, 1), (256, 1, 1), 5.0e8, {}, 1),
                        (2, GEMM, (8, 8, 1), (128, 1, 1), 0.0, {"bf16_dst_fp32": 2.0e9}, 1)])
        flops = checks.kernel_flops(self.root / "rank.sqlite")
        self.assertEqual(flops, {"ffma_kernel grid(1024, 1, 1) block(256, 1, 1)": [5.0e8],
                                 "Kernel grid(8, 8, 1) block(128, 1, 1)": [2.0e9]})

    def test_matching_counts_pass_kernel_by_kernel(self):
        ffma_flops = 2 * 1024 * 256 * 4096
        ours = [(c, FFMA, (1024, 1, 1), (256, 1, 1), float(ffma_flops), {}, c) for c in (1, 2)]
        ours += [(3, GEMM, (8, 8, 1), (128, 1, 1), 0.0, {"bf16_dst_fp32": 2.0 * 1024**3}, 1)]
        theirs = [(FFMA, (1024, 1, 1), (256, 1, 1), ffma_flops // 2, 0, 0)] * 5
        theirs += [(GEMM, (8, 8, 1), (128, 1, 1), 0, 0, 2 * 1024**3)] * 5
        result = self.compare(ours, theirs)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("2 kernels compared", result.stdout)
        self.assertIn("0 off by more", result.stdout)

    def test_counted_kernels_without_kernel_rows_match_by_name(self):
        # The H200 (2026-11-26): kernel replay's activity records come without timestamps, so
        # counted launches have FLOPs but no kernel row (no launch shape).
        ffma_flops = 2 * 1024 * 256 * 4096
        ours = [(c, FFMA, (1024, 1, 1), (256, 1, 1), float(ffma_flops), {}, c) for c in (1, 2)]
        theirs = [(FFMA, (1024, 1, 1), (256, 1, 1), ffma_flops // 2, 0, 0)] * 5
        result = self.compare(ours, theirs, timed=False)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("ffma_kernel ", result.stdout)
        self.assertIn("1 kernels compared", result.stdout)

    def test_a_kernel_off_by_more_than_2_percent_fails(self):
        ours = [(1, FFMA, (1024, 1, 1), (256, 1, 1), 1.05e6, {}, 1)]
        theirs = [(FFMA, (1024, 1, 1), (256, 1, 1), 500_000, 0, 0)]
        result = self.compare(ours, theirs)
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("+5.00%", result.stdout)
        self.assertIn("1 off by more than 2%", result.stdout)

    def test_no_kernel_in_common_fails(self):
        result = self.compare([(1, FFMA, (1024, 1, 1), (256, 1, 1), 1.0e6, {}, 1)],
                              [(FFMA, (512, 1, 1), (256, 1, 1), 500_000, 0, 0)])
        self.assertEqual(result.returncode, 1)
        self.assertIn("no kernel in common", result.stdout)

    def torch_report(self, modules, analytic):
        report = {"counter_windows": [{"status": ""}], "modules": modules}
        (self.root / "report.json").write_text(json.dumps(report))
        (self.root / "job.json").write_text(json.dumps({"analytic_fwd_flops": analytic}))
        return self.run_checks("torch-report", self.root / "report.json", self.root / "job.json")

    def test_torch_linears_forward_flops_against_analytic(self):
        # The H200's torch job (2026-11-26): a Linear's counted FLOPs were forward + backward, 3x
        # its forward ones; the report's fwd_flops must now come within 5 % of 2 * tokens * in * out.
        analytic = {"linear1": 8.59e9, "Sequential/2": 3.436e10}
        modules = [{"path": "Sequential", "flops": 1.5e11, "fwd_flops": 5e10},
                   {"path": "Sequential/1/layers.0/linear1", "flops": 2.58e10, "fwd_flops": 8.6e9},
                   {"path": "Sequential/1/layers.1/linear1", "flops": 2.58e10, "fwd_flops": 8.62e9},
                   {"path": "Sequential/2", "flops": 1.031e11, "fwd_flops": 3.44e10}]
        result = self.torch_report(modules, analytic)
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertIn("3 Linear forward FLOPs against analytic, worst +0.3%", result.stdout)
        # Every pass's FLOPs under the module (no split): off by 3x, and said so.
        for module in modules:
            module["fwd_flops"] = None
        result = self.torch_report(modules, analytic)
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("3 off by more than 5%: Sequential/1/layers.0/linear1 None", result.stdout)
        # A job that announced nothing to check against is no pass either.
        result = self.torch_report(modules, {})
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("no Linear module to check", result.stdout)

    def test_summary_accepts_reasons_and_rejects_malformed_rows(self):
        good = self.root / "good.tsv"
        good.write_text("bundle\tPASS\t\nnvcc-build\tSKIPPED\tno nvidia-smi on this machine\n")
        result = self.run_checks("summary", good)
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertRegex(result.stdout, r"(?m)^nvcc-build\s+SKIPPED\s+no nvidia-smi")
        self.assertIn("1 passed, 0 failed, 1 skipped", result.stdout)
        for bad in ("bundle\tOK\tfine\n", "bundle\tFAIL\t\n", "bundle PASS\n"):
            (self.root / "bad.tsv").write_text(bad)
            self.assertEqual(self.run_checks("summary", self.root / "bad.tsv").returncode, 1, bad)

    def test_overhead_reads_both_jobs_and_the_counted_steps(self):
        for name, step in (("base", 10.0), ("timing", 10.5)):
            (self.root / f"{name}.json").write_text(json.dumps({"step_ms": [50.0] * 5 + [step] * 9}))
        with sqlite3.connect(self.root / "steps.sqlite") as db:
            db.executescript((SOURCE_DIR / "schema" / "rank.sql").read_text())
            db.execute("INSERT INTO range_paths VALUES (1, 1, 0, 'flopscope', 'step')")
            for number, (duration_ms, counted) in enumerate([(10, 0), (10, 0), (80, 1), (10, 0)]):
                db.execute("INSERT INTO range_events(sid, path_id, instance_id, parent_instance_id, "
                           "thread_id, start_ns, end_ns, kind, counted) "
                           "VALUES (1, 1, ?, 0, 1, 0, ?, 0, ?)",
                           (number + 1, duration_ms * 1_000_000, counted))
        result = self.run_checks("overhead", self.root / "base.json", self.root / "timing.json",
                                 self.root / "steps.sqlite")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("(+5.0%)", result.stdout)
        self.assertIn("8.0x an uncounted one", result.stdout)

    def make_steps_with_kernels(self, path, kernels_per_step):
        """Steps 0..n-1 of 100 ns each, step 2 counted; each step's module range launched
        kernels_per_step[i] kernels."""
        with sqlite3.connect(path) as db:
            db.executescript((SOURCE_DIR / "schema" / "rank.sql").read_text())
            db.execute("INSERT INTO range_paths VALUES (1, 1, 0, 'flopscope', 'step')")
            db.execute("INSERT INTO range_paths VALUES (1, 2, 0, 'torch', 'model')")
            correlation = 0
            for number, kernels in enumerate(kernels_per_step):
                start, counted = number * 100, int(number == 2)
                for path, instance, begin, end in ((1, 2 * number + 1, start, start + 90),
                                                   (2, 2 * number + 2, start + 10, start + 80)):
                    db.execute("INSERT INTO range_events(sid, path_id, instance_id, "
                               "parent_instance_id, thread_id, start_ns, end_ns, kind, counted) "
                               "VALUES (1, ?, ?, 0, 1, ?, ?, 0, ?)",
                               (path, instance, begin, end, counted))
                for _ in range(kernels):
                    correlation += 1
                    db.execute("INSERT INTO kernels(sid, correlation_id, path_id, "
                               "range_instance_id, name_id, device_id, context_id, stream_id, "
                               "start_ns, end_ns, grid_x, grid_y, grid_z, block_x, block_y, "
                               "block_z, kind, bytes, graph_id, graph_node_id, counted) VALUES "
                               "(1, ?, 2, ?, 1, 0, 1, 7, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, ?)",
                               (correlation, 2 * number + 2, counted))

    def test_kernels_after_the_window_pass_in_every_step(self):
        self.make_steps_with_kernels(self.root / "after.sqlite", [3, 3, 5, 3, 4, 3])
        result = self.run_checks("post-window", self.root / "after.sqlite")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("3 steps after the window (step 2): kernels a step 3-4 (median 3)",
                      result.stdout)

    def test_steps_after_the_window_without_kernels_fail_with_the_tracers_lines(self):
        # The H200's counted torch job: kernels before the window, none after.
        self.make_steps_with_kernels(self.root / "lost.sqlite", [3, 3, 5, 0, 0, 0])
        log = self.root / "job.log"
        log.write_text("step 12\nflopscope: kernel tracing lost 1556 GPU activities "
                       "(CUPTI_DROPPED): CUPTI's own drop count 1556\n")
        result = self.run_checks("post-window", self.root / "lost.sqlite", log)
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("none in steps 3-5 (3)", result.stdout)
        self.assertIn("CUPTI's own drop count 1556", result.stdout)
        self.make_steps_with_kernels(self.root / "uncounted.sqlite", [3])
        self.assertEqual(self.run_checks("post-window", self.root / "uncounted.sqlite").returncode, 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
