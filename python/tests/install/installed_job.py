"""Run by test_pip_install.py with the Python of a throwaway environment flopscope_torch was
pip-installed into (python/tests on PYTHONPATH for the models, nothing of the build tree), under
the recording NVTX tool (NVTX_INJECTION64_PATH, examples/testing/nvtx_recorder.cc).

Trains TinyLM for two steps twice with the installed hooks: first with a fresh Profiler on
recording_backend's Recorder (what the unit tests check), then through flopscope_torch.enable(),
whose NVTX calls reach the tool through the installed package's own native module and shim.
Prints one JSON object: where the package was imported from, its versions, whether the native
hooks ran, the backend, the module paths expected from the model, and the Recorder's counts of
ranges per domain and path and of marks, for the test to compare with the tool's file."""

import collections
import importlib.metadata
import json
import sys

import torch

import flopscope_torch
from flopscope_torch.profiler import Profiler
from models import TinyLM, called_module_names, expected_paths
from recording_backend import Recorder

STEPS = 2


def train(model, tokens):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(STEPS):
        optimizer.zero_grad()
        model(tokens).logsumexp(-1).mean().backward()
        optimizer.step()


def main():
    torch.manual_seed(0)
    model = TinyLM()
    tokens = torch.randint(0, 32, (2, 5))
    paths = expected_paths(model, "TinyLM", called_module_names(model, tokens))

    recorder = Recorder()
    profiler = Profiler()
    if not profiler.enable(backend=recorder.backend()):
        raise AssertionError("the hooks did not turn on with the Recorder")
    train(model, tokens)
    native = profiler.module_hooks.native is not None
    profiler.disable()
    closed, still_open = recorder.replay()
    ranges = collections.Counter(f"{c.domain}\t{c.path}" for c in closed)

    if not flopscope_torch.enable():  # the recording tool is listening
        raise AssertionError("flopscope_torch.enable() did not turn on under an NVTX tool")
    train(model, tokens)
    enabled = flopscope_torch._PROFILER  # pylint: disable=protected-access
    backend, enabled_native = enabled.backend.description, enabled.module_hooks.native is not None
    flopscope_torch.disable()

    print(json.dumps({
        "package": flopscope_torch.__file__,
        "version": flopscope_torch.__version__,
        "metadata_version": importlib.metadata.version("flopscope-torch"),
        "torch": torch.__version__,
        "native": native,
        "enabled_native": enabled_native,
        "backend": backend,
        "module_paths": sorted(set(paths.values())),
        "ranges": dict(ranges),
        "still_open": len(still_open),
        "marks": dict(collections.Counter(recorder.marks())),
        "sys_path": sys.path,
    }))


if __name__ == "__main__":
    main()
