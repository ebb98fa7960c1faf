"""bench/torch_hooks: what flopscope_torch's hooks cost per module call, on the Python side.

A model of many small modules (blocks of Linear + LayerNorm + GELU, tiny tensors, so the
hooks' cost is not drowned by compute) runs training iterations (forward + backward) in these
modes:

  plain      no hooks: the baseline (measured in every worker process, against its own modes)
  floor      an empty global forward pre-hook and forward hook: what PyTorch's own hook
             dispatch costs, which no hook can go below
  floor_grad floor, plus an empty gradient hook on each module's output (registered the way
             the package registers its own): the floor of bracketing backward with gradients
  enable     flopscope_torch.enable() with no NVTX tool listening: installs nothing
  no_tool    hooks forced on, NVTX calls are no-ops (what a job pays with no profiler attached)
  python     as injector, with the pure-Python hooks (FLOPSCOPE_TORCH_NATIVE=0: what a Python
             without the package's native module gets)
  injector   hooks on under the real injector (LD_PRELOAD), records exported to a flopscoped,
             with the FLOPs estimate off (FLOPSCOPE_TORCH_ESTIMATE=0)
  estimate   as injector, with the estimate on: what `flopscope run --torch` starts by default
  baseline   with --baseline-python DIR only: as injector (estimate off), with the
             flopscope_torch package found in DIR (another revision's python/ folder, imported
             as flopscope_torch_baseline), alternated with the other modes for a before/after

Two worker processes (hooks and the injector are per process): one without a tool (plain,
enable, no_tool) and one under the injector (plain, floor, floor_grad, python, injector,
estimate, and baseline with --baseline-python). A worker turns its modes on and off in turn,
round after round (a warm-up iteration after each switch), and keeps each mode's fastest round: load on a shared machine then falls on every mode
alike, and only ever adds time. The clock is the training thread's CPU time (what the job's
thread pays), which on the CPU includes backward (the autograd engine runs on the caller); wall
time is printed beside it.

Per module call = (mode - the same worker's plain) / module calls per iteration, where one
iteration makes one forward and one backward range per module. The last line reads
`torch_hooks: per_module_call_us floor=F floor_grad=G enable=W no_tool=X python=P injector=Y
estimate=Z estimate_cost=E [baseline=B]` (on one line), E being estimate - injector.
"""

import argparse
import collections
import gc
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKERS = {  # worker -> its modes, plain first
    "no_tool": ("plain", "enable", "no_tool"),
    "injector": ("plain", "floor", "floor_grad", "python", "injector", "estimate"),
}
SHOWN = ("floor", "floor_grad", "enable", "no_tool", "python", "injector", "estimate",
         "baseline")


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


def _ignore_gradient(_grad):
    return None


def install_floor(with_gradients):
    """Empty global forward hooks; `with_gradients` adds an empty gradient hook on each
    module's output, through the tensor's hook dict as module_hooks registers its own. Returns
    what removes them."""
    from torch.nn.modules import module as module_api  # pylint: disable=import-outside-toplevel

    def pre(_module, _inputs):
        return None

    def post(_module, _inputs, output):
        # pylint: disable-next=protected-access
        if with_gradients and output.requires_grad and output._backward_hooks is None:
            table = {}  # as module_hooks makes it (Tensor.register_hook: an OrderedDict)
            output._backward_hooks = table  # pylint: disable=protected-access
            output.grad_fn._register_hook_dict(output)  # pylint: disable=protected-access
            table["floor"] = _ignore_gradient

    handles = [module_api.register_module_forward_pre_hook(pre),
               module_api.register_module_forward_hook(post)]
    return lambda: [handle.remove() for handle in handles]


def import_baseline(folder):
    """The flopscope_torch package in `folder`, imported as flopscope_torch_baseline (its own
    imports are relative), so both packages live in one worker."""
    package = Path(folder) / "flopscope_torch"
    spec = importlib.util.spec_from_file_location(
        "flopscope_torch_baseline", package / "__init__.py",
        submodule_search_locations=[str(package)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def enable_package(mode, baseline=None):
    """Turns flopscope_torch (`baseline` in mode baseline) on as `mode` wants it, checks it is so;
    returns what turns it off."""
    import flopscope_torch  # pylint: disable=import-outside-toplevel
    package = baseline if mode == "baseline" else flopscope_torch
    profiler = package._PROFILER  # pylint: disable=protected-access
    environ = dict(os.environ)
    environ["FLOPSCOPE_TORCH_ESTIMATE"] = "1" if mode == "estimate" else "0"
    saved = os.environ.get("FLOPSCOPE_TORCH_NATIVE")
    os.environ["FLOPSCOPE_TORCH_NATIVE"] = "0" if mode == "python" else "1"
    try:
        enabled = profiler.enable(force=mode == "no_tool", environ=environ)
    finally:
        if saved is None:
            del os.environ["FLOPSCOPE_TORCH_NATIVE"]
        else:
            os.environ["FLOPSCOPE_TORCH_NATIVE"] = saved
    if enabled != (mode != "enable"):
        raise SystemExit(f"torch_hooks: mode {mode}: hooks on = {enabled}")
    hooks = profiler.module_hooks
    if enabled and (getattr(hooks, "estimate", None) is not None) != (mode == "estimate"):
        raise SystemExit(f"torch_hooks: mode {mode}: the estimate is not as asked")
    native = enabled and getattr(hooks, "native", None) is not None
    if mode == "python" and native:
        raise SystemExit("torch_hooks: mode python: FLOPSCOPE_TORCH_NATIVE=0 was ignored")
    return profiler.disable, native


def switch_on(mode, baseline):
    """(what turns `mode` off, whether the native hooks run)."""
    if mode == "plain":
        return (lambda: None), False
    if mode in ("floor", "floor_grad"):
        return install_floor(mode == "floor_grad"), False
    return enable_package(mode, baseline)


def worker(modes, blocks, width, rounds, iterations, baseline_dir):
    import torch  # pylint: disable=import-outside-toplevel
    torch.set_num_threads(1)
    baseline = import_baseline(baseline_dir) if "baseline" in modes else None
    model = build_model(blocks, width)
    modules_per_forward = sum(1 for _ in model.modules())
    x = torch.randn(4, width)

    def iteration():
        model(x).sum().backward()

    for _ in range(3):
        iteration()
    cpu, wall = collections.defaultdict(list), collections.defaultdict(list)
    native = {}
    for index in range(rounds):
        for mode in modes[index % len(modes):] + modes[:index % len(modes)]:  # rotated
            switch_off, native[mode] = switch_on(mode, baseline)
            try:
                iteration()  # warm-up: first calls take the slow paths and announce the model
                gc.collect()  # the previous mode's garbage is not this one's to collect
                cpu_start, wall_start = time.thread_time_ns(), time.perf_counter_ns()
                for _ in range(iterations):
                    iteration()
                cpu[mode].append((time.thread_time_ns() - cpu_start) / iterations)
                wall[mode].append((time.perf_counter_ns() - wall_start) / iterations)
            finally:
                switch_off()
    print(json.dumps({mode: {"modules": modules_per_forward, "native": native[mode],
                             "cpu_ns": min(cpu[mode]), "wall_ns": min(wall[mode])}
                      for mode in modes}))


class Daemon:
    """A flopscoped on a private socket, so the injector modes really export."""

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


def run_worker(name, args, build_dir, daemon):
    env = dict(os.environ)
    package_dir = build_dir / "python"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package_dir), env.get("PYTHONPATH")]))
    env["FLOPSCOPE_TORCH_NVTX_LIB"] = str(build_dir / "lib" / "libflopscope_torch_nvtx.so")
    env["OMP_NUM_THREADS"] = "1"
    for variable in ("NVTX_INJECTION64_PATH", "CUDA_INJECTION64_PATH", "LD_PRELOAD",
                     "FLOPSCOPE_TORCH_ESTIMATE", "FLOPSCOPE_TORCH_NATIVE"):
        env.pop(variable, None)
    if name != "no_tool":
        env["LD_PRELOAD"] = str(build_dir / "lib" / "libflopscope_inject.so")
        env["FLOPSCOPE_SOCKET"] = str(daemon.socket)
        env["FLOPSCOPE_JOB_ID"] = "bench-torch-hooks"
    modes = WORKERS[name]
    command = [sys.executable, __file__, "--blocks", str(args.blocks), "--width",
               str(args.width), "--rounds", str(args.rounds), "--iterations", str(args.iterations)]
    if name == "injector" and args.baseline_python:
        modes = (*modes, "baseline")
        command += ["--baseline-python", str(args.baseline_python.resolve())]
    command += ["--worker", ",".join(modes)]
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        raise SystemExit(f"torch_hooks: worker {name} failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def report(workers, args):
    calls = workers["injector"]["plain"]["modules"]  # one forward + one backward range each
    print(f"torch_hooks: {calls} modules, forward + backward per iteration (training-thread CPU "
          f"time, fastest of {args.rounds} interleaved rounds x {args.iterations})")
    per_module = {}
    for name, results in workers.items():
        plain = results["plain"]
        for mode, result in results.items():
            if mode == "plain":
                print(f"  plain      {plain['cpu_ns'] / 1e6:8.3f} ms/iteration cpu "
                      f"({plain['wall_ns'] / 1e6:8.3f} wall)  [{name} worker]")
                continue
            per_module[mode] = (result["cpu_ns"] - plain["cpu_ns"]) / calls / 1000
            note = ("  [pure Python: flopscope_torch._native not built (python3-dev)]"
                    if mode in ("injector", "estimate", "baseline") and not result["native"]
                    else "")
            print(f"  {mode:10s} {result['cpu_ns'] / 1e6:8.3f} ms/iteration cpu "
                  f"({result['wall_ns'] / 1e6:8.3f} wall)  +{per_module[mode]:6.2f} us per "
                  f"module (forward + backward){note}")
    per_module["estimate_cost"] = per_module["estimate"] - per_module["injector"]
    print(f"  under the injector the hooks cost {per_module['injector']:.2f} us per module call "
          f"with the estimate off, {per_module['estimate']:.2f} with it on (the default): the "
          f"estimate adds {per_module['estimate_cost']:.2f} us; PyTorch's empty-hook floor is "
          f"{per_module['floor']:.2f}, {per_module['floor_grad']:.2f} with an empty gradient hook "
          "per module")
    print("torch_hooks: per_module_call_us " + " ".join(
        f"{mode}={per_module[mode]:.2f}" for mode in (*SHOWN, "estimate_cost")
        if mode in per_module))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path,
                        default=Path(__file__).resolve().parents[1] / "build")
    parser.add_argument("--blocks", type=int, default=100, help="blocks of 4 modules each")
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=100, help="rounds of every mode, in turn")
    parser.add_argument("--iterations", type=int, default=3, help="timed iterations a round")
    parser.add_argument("--baseline-python", type=Path,
                        help="a folder holding another flopscope_torch: adds mode baseline")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker.split(","), args.blocks, args.width, args.rounds, args.iterations,
               args.baseline_python)
        return

    names = list(WORKERS)
    with tempfile.TemporaryDirectory(prefix="flopscope-bench-") as tmp:
        daemon = Daemon(args.build_dir, Path(tmp))
        try:
            workers = {name: run_worker(name, args, args.build_dir, daemon) for name in names}
        finally:
            daemon.stop()
    report(workers, args)


if __name__ == "__main__":
    main()
