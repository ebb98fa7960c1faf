"""The job's parallel layout, from whatever the job already uses, in this order:

1. what the job set with `flopscope_torch.set_parallel_layout(...)`;
2. Megatron's parallel state (`megatron.core.parallel_state`, or the older `megatron.mpu`), when
   the job imported it and initialised model parallelism;
3. DeepSpeed's `deepspeed.utils.groups.mpu` (the Megatron-style object a job hands to
   deepspeed.initialize), when the job imported DeepSpeed;
4. the device meshes of a model's DTensor parameters (torch 2.x): DTensor tensor parallelism's
   mesh gives tp, FSDP2's (`fully_shard`) dp; read when the model's tree is announced
   (sharded_params);
5. torch.distributed, when initialised: data parallel only (tp = pp = 1, dp = world size).

Frameworks are read only when the job imported them (sys.modules): the package never imports
Megatron or DeepSpeed itself. Rank order where only sizes are given is tp fastest, then pp,
then dp (Megatron's default, and the injector's).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class ParallelLayout:
    tp: int
    pp: int
    dp: int
    tp_rank: int
    pp_rank: int
    dp_rank: int
    source: str

    def mark_text(self) -> str:
        return (f"parallel tp={self.tp} pp={self.pp} dp={self.dp} tp_rank={self.tp_rank} "
                f"pp_rank={self.pp_rank} dp_rank={self.dp_rank}")

    def is_consistent(self) -> bool:
        sizes_ok = self.tp >= 1 and self.pp >= 1 and self.dp >= 1
        return sizes_ok and 0 <= self.tp_rank < self.tp and 0 <= self.pp_rank < self.pp and (
            0 <= self.dp_rank < self.dp)

    @staticmethod
    def from_sizes(tp: int, pp: int, world_size: int, rank: int, source: str) -> ParallelLayout:
        """The layout of global `rank` when tp x pp x dp = world_size, tp fastest."""
        model_parallel = tp * pp
        if tp < 1 or pp < 1 or world_size < model_parallel or world_size % model_parallel:
            raise ValueError(f"tp={tp} x pp={pp} does not divide the world size {world_size}")
        return ParallelLayout(tp, pp, world_size // model_parallel, rank % tp, (rank // tp) % pp,
                              rank // model_parallel, source)


def _call_first(obj, names, default=None):
    for name in names:
        function = getattr(obj, name, None)
        if callable(function):
            return int(function())
    return default


def from_megatron(modules=None):
    modules = sys.modules if modules is None else modules
    for name in ("megatron.core.parallel_state", "megatron.mpu", "megatron.core.mpu"):
        state = modules.get(name)
        if state is None:
            continue
        initialized = getattr(state, "model_parallel_is_initialized", None)
        if not callable(initialized) or not initialized():
            continue
        return ParallelLayout(
            tp=int(state.get_tensor_model_parallel_world_size()),
            pp=int(state.get_pipeline_model_parallel_world_size()),
            dp=int(state.get_data_parallel_world_size()),
            tp_rank=int(state.get_tensor_model_parallel_rank()),
            pp_rank=int(state.get_pipeline_model_parallel_rank()),
            dp_rank=int(state.get_data_parallel_rank()),
            source="megatron")
    return None


def from_deepspeed(modules=None):
    modules = sys.modules if modules is None else modules
    groups = modules.get("deepspeed.utils.groups")
    mpu = getattr(groups, "mpu", None) if groups is not None else None
    if mpu is None:
        return None
    return ParallelLayout(
        tp=_call_first(mpu, ("get_tensor_model_parallel_world_size",
                             "get_model_parallel_world_size"), 1),
        pp=_call_first(mpu, ("get_pipeline_model_parallel_world_size",
                             "get_pipe_parallel_world_size"), 1),
        dp=_call_first(mpu, ("get_data_parallel_world_size",), 1),
        tp_rank=_call_first(mpu, ("get_tensor_model_parallel_rank", "get_model_parallel_rank"), 0),
        pp_rank=_call_first(mpu, ("get_pipeline_model_parallel_rank", "get_stage_id"), 0),
        dp_rank=_call_first(mpu, ("get_data_parallel_rank",), 0),
        source="deepspeed")


def from_torch_distributed(modules=None):
    modules = sys.modules if modules is None else modules
    distributed = modules.get("torch.distributed")
    if distributed is None or not distributed.is_available() or not distributed.is_initialized():
        return None
    return ParallelLayout.from_sizes(1, 1, distributed.get_world_size(), distributed.get_rank(),
                                     "torch.distributed")


def discover_layout(sources, modules=None):
    """The first consistent layout of: sources["explicit"], Megatron, DeepSpeed,
    sources["dtensor"] (the meshes of a model's DTensor parameters, sharded_params),
    torch.distributed; None when none is known. A framework that fails to answer is skipped."""
    explicit = sources.get("explicit")
    if explicit is not None:
        return explicit
    dtensor = sources.get("dtensor")
    for reader in (from_megatron, from_deepspeed, lambda _: dtensor, from_torch_distributed):
        try:
            layout = reader(modules)
        except Exception:  # pylint: disable=broad-except
            continue  # a half-initialised framework: the next source may know
        if layout is not None and layout.is_consistent():
            return layout
    return None
