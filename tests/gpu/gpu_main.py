"""What the GPU tests share (tests/gpu): skip only when the machine has no CUDA device.

The workload programs answer that themselves (cuda_device_probe.h): exit 77 without a driver or
without a device, 1 when a driver is there but the device cannot be used. Each test module's
setUpModule calls require_device: no device skips the module's tests, an unusable one fails them.
So `ctest -L gpu` on a GPU node either runs the tests or fails; it never passes by skipping
(gpu-review D5). A test that finds the device usable but the counters closed to it (D4) calls
skipTest with the reason. tests/unittest_runner.py turns the result into the exit code: 77 when
every test skipped, 0 when one passed and none failed, 1 otherwise."""

import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SKIP = 77


def probe_device(workload):
    """Runs the workload once without the injector; its CompletedProcess."""
    with tempfile.TemporaryDirectory() as tmp:
        return subprocess.run([workload, str(Path(tmp) / "probe.json")], capture_output=True,
                              text=True, timeout=300)


def require_device(workload):
    """Returns when `workload` finds a usable device; raises SkipTest when there is none."""
    probe = probe_device(workload)
    if probe.returncode == SKIP:
        raise unittest.SkipTest(f"GPU tests skipped: {probe.stdout.strip() or 'no CUDA device'}")
    if probe.returncode != 0:
        raise RuntimeError(f"{Path(workload).name} failed on its own (exit {probe.returncode}) "
                           f"although a CUDA driver is installed: not skipping.\n"
                           f"{probe.stdout}{probe.stderr}")


def run_main(module_name):
    """A test module run as a script (tests/gpu/acceptance.sh): the runner's exit code."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import unittest_runner  # pylint: disable=import-outside-toplevel
    return unittest_runner.run_module(module_name)
