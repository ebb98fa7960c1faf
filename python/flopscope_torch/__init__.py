"""flopscope_torch: PyTorch modules as NVTX ranges for flopscope, without changing the script.

    flopscope run --torch -- python train.py        # nothing to change in train.py

or, from code (a no-op unless an NVTX tool such as flopscope's injector is listening):

    import flopscope_torch
    flopscope_torch.enable()

What it records, per process (thread by thread, as NVTX requires):
- a range per module forward and per module backward in NVTX's default domain, named by the
  module's qualified name from its root model (`TinyLM/encoder/layers.0/self_attn`);
- the module tree of each root model, once (`module`, `class`, `params`, `extra_repr` marks,
  docs/marks.md), and the batch size (`batch_size=N`) from the model's first input;
- estimated forward FLOPs and MACs per module and step (FLOPSCOPE_TORCH_ESTIMATE=0: off);
- `step`, `forward`, `backward`, `optimizer` ranges in the `flopscope` domain, found from the
  root model's forward, backward() and optimizer.step(), or given with `step()` / `phase()`;
- the parallel layout (`parallel tp=.. pp=.. dp=..`) from Megatron, DeepSpeed or
  torch.distributed, or `set_parallel_layout()`.

Importing this package does not import torch.
"""

from __future__ import annotations

import contextlib
import os
from typing import ContextManager, Optional, Tuple

from .profiler import Profiler, make_layout

__all__ = ["enable", "disable", "is_enabled", "step", "phase", "announce_batch_size",
           "set_parallel_layout"]

# The package's version, said here alone: pyproject.toml reads it (setuptools' attr:), and
# python/tests/install/test_pip_install.py checks it against the project's (CMake's project()).
__version__ = "0.1.0"

_PROFILER = Profiler()


def enable(force: bool = False) -> bool:
    """Turns the hooks on for every nn.Module of this process; returns whether they are on.
    Call it before building optimizers. Without an NVTX tool listening (NVTX_INJECTION64_PATH
    unset) it installs nothing and returns False, unless `force`."""
    return _PROFILER.enable(force=force)


def disable() -> None:
    """Removes every hook and closes the ranges open on the calling thread."""
    _PROFILER.disable()


def is_enabled() -> bool:
    return _PROFILER.enabled


def step() -> ContextManager[None]:
    """`with flopscope_torch.step():` marks one training step by hand; automatic steps are then
    off on this thread."""
    return _PROFILER.phases.step() if _PROFILER.enabled else contextlib.nullcontext()


def phase(name: str) -> ContextManager[None]:
    """`with flopscope_torch.phase("forward"):` a phase range by hand (any name)."""
    return _PROFILER.phases.phase(name) if _PROFILER.enabled else contextlib.nullcontext()


def announce_batch_size(batch_size: int) -> None:
    """Announces the samples per step of this rank (`batch_size=N`), replacing the automatic
    one (the first dimension of the model's first input); $FLOPSCOPE_BATCH_SIZE does the same
    without code."""
    if int(batch_size) < 1:
        raise ValueError(f"batch size must be positive, not {batch_size}")
    _PROFILER.announce_batch_size(int(batch_size))


def _world_and_rank() -> Tuple[int, int]:
    try:
        import torch.distributed as dist  # pylint: disable=import-outside-toplevel
        if dist.is_available() and dist.is_initialized():
            return dist.get_world_size(), dist.get_rank()
    except ImportError:
        pass
    return int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))


def set_parallel_layout(tp: int = 1, pp: int = 1, dp: Optional[int] = None,
                        tp_rank: Optional[int] = None, pp_rank: Optional[int] = None,
                        dp_rank: Optional[int] = None) -> None:
    """Announces the layout when the job knows better than Megatron/DeepSpeed/torch.distributed.
    Give sizes only (ranks follow from the global rank, tp fastest, then pp, then dp) or
    everything. Raises ValueError for a layout that does not fit the world size."""
    world_size, rank = _world_and_rank()
    layout = make_layout(int(tp), int(pp), dp, tp_rank, pp_rank, dp_rank, world_size, rank)
    _PROFILER.set_parallel_layout(layout)
