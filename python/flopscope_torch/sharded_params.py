"""Parameters held as DTensors (`torch.distributed.tensor`, torch 2.x): FSDP2's shards
(`torch.distributed.fsdp.fully_shard`) and DTensor tensor parallelism (`parallelize_module`).

A DTensor's numel() is its global size, whatever each rank holds. The report counts:
- a parameter FSDP2 manages (a parameter of a module that is, or sits under, an `FSDPModule`) at
  its full size, as DeepSpeed counts ZeRO-3's partitioned parameters (`ds_numel`): sharding over
  data-parallel ranks does not make the model smaller. What the rank holds, its local shard
  (`to_local().numel()`), is announced beside it (`params_shard`), for the report's additions;
- any other DTensor parameter (tensor parallelism) at its local shard, as Megatron's layers hold
  1/tp of a matrix: params per rank are the shard's, the model's are tp times that.

The meshes give the layout: the tensor-parallel mesh's size is tp, FSDP's one-dimensional mesh is
the data-parallel group (docs/pytorch.md). Read once per root model when its tree is announced;
nothing here imports torch.distributed: a job that never imported DTensor has none to read.
"""

import sys
from dataclasses import dataclass, field

from .parallel_layout import ParallelLayout


@dataclass
class Sharding:
    """One root model's DTensor parameters: which FSDP2 manages, and the meshes seen."""
    dtensor: type
    fsdp_ids: set = field(default_factory=set)  # id() of the parameters FSDP2 manages
    dp_mesh: object = None  # FSDP2's mesh (of its first parameter)
    tp_mesh: object = None  # the mesh of the first DTensor parameter FSDP2 does not manage

    def counts(self, parameter):
        """(counted, held) for one parameter: what the report counts and what the rank holds."""
        if not isinstance(parameter, self.dtensor):
            return None
        held = parameter.to_local().numel()
        if id(parameter) in self.fsdp_ids:
            return parameter.numel(), held
        return held, held

    def layout(self, rank, world_size):
        """The layout the meshes give, or None: tp from the tensor-parallel mesh, dp from FSDP's
        one-dimensional mesh (else world size / tp); pp is 1 (DTensor has no pipeline stage).
        FSDP2 on a mesh of more dimensions (HSDP, FSDP with TP) is not read here."""
        tp, tp_rank = 1, 0
        if self.tp_mesh is not None:
            if self.tp_mesh.ndim != 1:
                return None
            tp, tp_rank = self.tp_mesh.size(), self.tp_mesh.get_local_rank()
        if self.dp_mesh is not None:
            if self.dp_mesh.ndim != 1:
                return None
            dp, dp_rank = self.dp_mesh.size(), self.dp_mesh.get_local_rank()
        elif tp > 1 and world_size % tp == 0:
            dp, dp_rank = world_size // tp, rank // tp  # tp fastest, as Megatron orders ranks
        else:
            return None
        if tp == 1 and self.dp_mesh is None:
            return None
        return ParallelLayout(tp, 1, dp, tp_rank, 0, dp_rank, "dtensor")


def scan(root, modules=None):
    """The Sharding of `root`'s parameters, or None when none is a DTensor."""
    modules = sys.modules if modules is None else modules
    dtensor = getattr(modules.get("torch.distributed.tensor"), "DTensor", None)
    if dtensor is None:
        return None
    fsdp_module = getattr(modules.get("torch.distributed.fsdp"), "FSDPModule", None)
    sharding = Sharding(dtensor)
    if fsdp_module is not None:
        for module in root.modules():
            if isinstance(module, fsdp_module):
                sharding.fsdp_ids.update(id(p) for p in module.parameters())
    found = False
    for parameter in root.parameters():
        if not isinstance(parameter, dtensor):
            continue
        found = True
        if id(parameter) in sharding.fsdp_ids:
            sharding.dp_mesh = sharding.dp_mesh or parameter.device_mesh
        else:
            sharding.tp_mesh = sharding.tp_mesh or parameter.device_mesh
    return sharding if found else None


def original_class_name(module):
    """The class name the user wrote: FSDP2 gives a sharded module a class of its own,
    `FSDP<Name>` with bases (FSDPModule, <Name>), which the report should not show."""
    cls = type(module)
    bases = cls.__bases__
    if (len(bases) == 2 and bases[0].__name__ == "FSDPModule"
            and cls.__name__ == f"FSDP{bases[1].__name__}"):
        return bases[1].__name__
    return cls.__name__
