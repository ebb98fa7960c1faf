"""GPU test (ctest label `gpu`): FLOP counters calibrated against kernels of known work.

flop_workload runs 5 steps of FFMA, SGEMM, HGEMM, BF16 and TF32 GEMMs under the injector with a
counter window on steps 1-2 (full metric set). Each module's measured FLOPs per counted step must
be within 2 % of the analytic count and fall mostly under the expected precision; counted steps
must stay out of latencies. Prints the calibration table and the replay cost per counted step.
Exits 77 (skipped) when the machine has no CUDA device, or when the driver restricts performance
counters to administrators (the window's status says so; tracing still works then). A device
that is there but unusable, or a window that measured nothing, fails (gpu_main.py)."""

import json
import os
import sqlite3
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from harness import DaemonTestCase, report, run_job, test_program  # noqa: E402
from gpu_main import require_device, run_main  # noqa: E402

TOLERANCE = 0.02
WINDOW = "steps=1:2,set=full"


def workload():
    return test_program("gpu_flop_workload")


# The window status the injector gives when the driver keeps the counters to administrators
# (injector/cupti/counter_windows/context_profiler.cc, DescribeCounterFailure).
RESTRICTED = "GPU profiling is restricted"


def precisions(module):
    """{precision: flops} of a report module, whichever shape the JSON gives them."""
    value = module.get("flops_by_precision") or {}
    if isinstance(value, list):
        return {entry["precision"]: entry["flops"] for entry in value}
    return dict(value)


def step_times(rank_file):
    """(counted, uncounted) durations in ns of the `step` ranges of the flopscope domain."""
    with sqlite3.connect(rank_file) as db:
        rows = db.execute(
            "SELECT e.end_ns - e.start_ns, e.counted FROM range_events e JOIN range_paths p "
            "ON p.sid = e.sid AND p.id = e.path_id "
            "WHERE p.domain = 'flopscope' AND p.name = 'step'").fetchall()
    return [d for d, c in rows if c], [d for d, c in rows if not c]


class GpuFlopsTest(DaemonTestCase):

    def test_counted_flops_match_analytic_counts(self):
        self.daemon.start()
        expectations_file = self.root / "expect.json"
        result = run_job(self.daemon.socket, "flops", [workload(), str(expectations_file)],
                         env={"FLOPSCOPE_COUNTERS": WINDOW}, timeout=500)
        self.assertEqual(result.returncode, 0, result.stderr)
        expected = json.loads(expectations_file.read_text())
        rep = report(self.daemon.socket, "flops")
        windows = rep.get("counter_windows", [])
        self.assertTrue(windows, f"no counter window recorded: {rep['ranks']}")
        restricted = [w["status"] for w in windows if w.get("status", "").startswith(RESTRICTED)]
        if restricted:
            self.skipTest(f"{restricted[0]} (see NVIDIA's ERR_NVGPUCTRPERM page; in a container, "
                          "start it with --cap-add=SYS_ADMIN)")
        for window in windows:
            self.assertEqual(window.get("status", ""), "", window)
            self.assertEqual(int(window.get("ranges_unmatched", 0)), 0, window)

        modules = {m["path"]: m for m in rep["modules"]}
        print(f"\n{'module':<16} {'analytic':>14} {'measured':>14} {'error':>8}  precision")
        failures = []
        for entry in expected["modules"]:
            module = modules.get(entry["path"])
            self.assertIsNotNone(module, f"{entry['path']} missing: {sorted(modules)}")
            measured = float(module.get("flops") or 0.0)
            error = (measured - entry["flops"]) / entry["flops"]
            split = precisions(module)
            dominant = max(split, key=split.get) if split else "-"
            print(f"{entry['path']:<16} {entry['flops']:>14.4g} {measured:>14.4g} {error:>+8.2%}  "
                  f"{dominant} {json.dumps(split)}")
            if abs(error) > TOLERANCE:
                failures.append(f"{entry['path']}: {measured:.4g} vs {entry['flops']:.4g}")
            if not dominant.startswith(entry["precision"]):
                failures.append(f"{entry['path']}: counted as {dominant}, "
                                f"expected {entry['precision']}*")
        counted, uncounted = step_times(self.daemon.rank_file("flops", 0))
        self.assertEqual(len(counted), 2, "steps 1-2 counted")
        self.assertEqual(len(uncounted), expected["steps"] - 2)
        ratio = statistics.median(counted) / statistics.median(uncounted)
        print(f"replay cost: counted step {statistics.median(counted) / 1e6:.1f} ms, "
              f"uncounted {statistics.median(uncounted) / 1e6:.1f} ms, ratio {ratio:.1f}x")
        self.assertFalse(failures, "\n".join(failures))


def setUpModule():
    os.environ.setdefault("FLOPSCOPE_EXIT_TIMEOUT_MS", "10000")
    require_device(workload())


if __name__ == "__main__":
    sys.exit(run_main(__name__))
