"""bench/torch_hooks: what flopscope_torch's hooks cost per module call, on the Python side.

A model of many small modules (blocks of Linear + LayerNorm + GELU, tiny tensors, so the
hooks' cost is not drowned by compute) runs training iterations (forward + backward) in a fresh
process per mode:

  plain      no hooks: the baseline
  enable     flopscope_torch.enable() with no NVTX tool listening: installs nothing
  no_tool    hooks forced on, NVTX calls are no-ops (what a job pays with no profiler attached)
  injector   hooks on under the real injector (LD_PRELOAD), records exported to a flopscoped
  estimate   as injector, with the FLOPs estimate switched on (FLOPSCOPE_TORCH_ESTIMATE=1)
  baseline   with --baseline-python DIR only: as injector, with the flopscope_torch package
             found in DIR (another revision's python/ folder), for a before/after in one run

Each mode runs in its own process (hooks and the injector are per process); there, rounds are
timed after a warm-up and the fastest kept. The modes run in turn, --passes times over, and each
mode keeps its fastest pass: on a shared machine, load only ever adds time. The clock is the
training thread's CPU time (what the job's thread pays; other processes sharing a small machine
inflate it less than wall time), which on the CPU includes backward (the autograd engine runs on
the caller); wall time is printed beside it.

Per module call = (mode - plain) / module calls per iteration, where one iteration makes one
forward and one backward range per module. The last line reads
`torch_hooks: per_module_call_us enable=W no_tool=X injector=Y estimate=Z [baseline=B]`.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = ("plain", "enable", "no_tool", "injector", "estimate", "baseline")


def build_model(blocks, width):
    import torch  # pylint: disable=import-outside-toplevel
    from torch import nn  # pylint: disable=import-outside-toplevel

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(width, width)
            self.norm = nn.LayerNorm(width)
            self.act = nn.GELU()

        def forward(self, x):
            return x + self.act(self.norm(self.linear(x)))

    torch.manual_seed(0)
    return nn.Sequential(*(Block() for _ in range(blocks)))


def worker(mode, blocks, width, rounds, iterations):
    import torch  # pylint: disable=import-outside-toplevel
    torch.set_num_threads(1)
    if mode != "plain":
        import flopscope_torch  # pylint: disable=import-outside-toplevel
        enabled = flopscope_torch.enable(force=mode == "no_tool")
        if enabled != (mode != "enable"):
            raise SystemExit(f"torch_hooks: mode {mode}: hooks on = {enabled}")
        hooks = flopscope_torch._PROFILER.module_hooks  # pylint: disable=protected-access
        estimating = enabled and getattr(hooks, "estimate", None) is not None
        if estimating != (mode == "estimate"):
            raise SystemExit(f"torch_hooks: mode {mode}: estimate on = {estimating}")
    model = build_model(blocks, width)
    modules_per_forward = sum(1 for _ in model.modules())
    x = torch.randn(4, width)

    def iteration():
        model(x).sum().backward()

    for _ in range(3):
        iteration()
    cpu, wall = [], []
    for _ in range(rounds):
        cpu_start, wall_start = time.thread_time_ns(), time.perf_counter_ns()
        for _ in range(iterations):
            iteration()
        cpu.append((time.thread_time_ns() - cpu_start) / iterations)
        wall.append((time.perf_counter_ns() - wall_start) / iterations)
    print(json.dumps({"mode": mode, "modules": modules_per_forward,
                      "cpu_ns": min(cpu), "wall_ns": min(wall)}))


class Daemon:
    """A flopscoped on a private socket, so the injector mode really exports."""

    def __init__(self, build_dir, root):
        self.socket = root / "fs.sock"
        self.process = subprocess.Popen(
            [str(build_dir / "bin" / "flopscoped"), "--socket", str(self.socket), "--data-dir",
             str(root / "data")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not self.socket.exists():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit("torch_hooks: flopscoped did not start")
            time.sleep(0.05)

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)


def run_mode(mode, args, build_dir, daemon):
    env = dict(os.environ)
    package_dir = args.baseline_python if mode == "baseline" else build_dir / "python"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package_dir), env.get("PYTHONPATH")]))
    env["FLOPSCOPE_TORCH_NVTX_LIB"] = str(build_dir / "lib" / "libflopscope_torch_nvtx.so")
    env["OMP_NUM_THREADS"] = "1"
    for name in ("NVTX_INJECTION64_PATH", "CUDA_INJECTION64_PATH", "LD_PRELOAD"):
        env.pop(name, None)
    if mode == "estimate":
        env["FLOPSCOPE_TORCH_ESTIMATE"] = "1"
    if mode in ("injector", "estimate", "baseline"):
        env["LD_PRELOAD"] = str(build_dir / "lib" / "libflopscope_inject.so")
        env["FLOPSCOPE_SOCKET"] = str(daemon.socket)
        env["FLOPSCOPE_JOB_ID"] = "bench-torch-hooks"
    command = [sys.executable, __file__, "--worker", mode, "--blocks", str(args.blocks),
               "--width", str(args.width), "--rounds", str(args.rounds),
               "--iterations", str(args.iterations)]
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        raise SystemExit(f"torch_hooks: mode {mode} failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path,
                        default=Path(__file__).resolve().parents[1] / "build")
    parser.add_argument("--blocks", type=int, default=100, help="blocks of 4 modules each")
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--passes", type=int, default=2, help="runs of every mode, in turn")
    parser.add_argument("--baseline-python", type=Path,
                        help="a folder holding another flopscope_torch: adds mode baseline")
    parser.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.blocks, args.width, args.rounds, args.iterations)
        return

    with tempfile.TemporaryDirectory(prefix="flopscope-bench-") as tmp:
        daemon = Daemon(args.build_dir, Path(tmp))
        try:
            results = {}
            modes = [mode for mode in MODES if mode != "baseline" or args.baseline_python]
            for _ in range(args.passes):
                for mode in modes:
                    result = run_mode(mode, args, args.build_dir, daemon)
                    if mode not in results or result["cpu_ns"] < results[mode]["cpu_ns"]:
                        results[mode] = result
        finally:
            daemon.stop()
    plain = results["plain"]
    calls = plain["modules"]  # per iteration: one forward and one backward range per module
    print(f"torch_hooks: {calls} modules, forward + backward per iteration "
          f"(training-thread CPU time, fastest of {args.passes} passes x {args.rounds} rounds x "
          f"{args.iterations})")
    per_module = {}
    for mode in modes:
        result = results[mode]
        per_module[mode] = (result["cpu_ns"] - plain["cpu_ns"]) / calls / 1000
        print(f"  {mode:9s} {result['cpu_ns'] / 1e6:8.3f} ms/iteration cpu "
              f"({result['wall_ns'] / 1e6:8.3f} wall)  "
              f"+{per_module[mode]:6.2f} us per module (forward + backward)")
    print(f"torch_hooks: per_module_call_us enable={per_module['enable']:.2f} "
          f"no_tool={per_module['no_tool']:.2f} injector={per_module['injector']:.2f} "
          f"estimate={per_module['estimate']:.2f}" +
          (f" baseline={per_module['baseline']:.2f}" if "baseline" in per_module else ""))


if __name__ == "__main__":
    main()
