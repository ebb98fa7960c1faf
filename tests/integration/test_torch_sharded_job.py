"""The training script of integration_torch_sharded, with no flopscope code in it: a small
language model trained on 2 CPU ranks over gloo, its parameters DTensors (torch 2.x):

- `--mode fsdp`: FSDP2, `fully_shard` on each block and on the root, over a one-dimensional
  DeviceMesh("cpu") of every rank;
- `--mode tp`: DTensor tensor parallelism, `parallelize_module` with ColwiseParallel (each
  block's `up`) and RowwiseParallel (its `down`) on a DeviceMesh("cpu") of every rank.

Each rank writes what its own tensors say to `<out>/rank-<r>.json`, for the test to compare with
the report: per module, the elements the rank holds (`to_local()`), the full ones
(`full_tensor()`), and the mesh's size and this rank's place in it.
"""

import argparse
import json
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

VOCAB = 63  # odd: FSDP2's shards of the embedding and the head differ between the 2 ranks
WIDTH = 16
FFN = 32
BLOCKS = 2
BATCH = 4
SEQ = 8


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(WIDTH, FFN)
        self.act = nn.ReLU()
        self.down = nn.Linear(FFN, WIDTH)

    def forward(self, x):
        return x + self.down(self.act(self.up(x)))


class ShardedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens):
        x = self.embedding(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def shard(model, mode, mesh):
    if mode == "fsdp":
        from torch.distributed.fsdp import fully_shard  # pylint: disable=import-outside-toplevel
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
    else:
        from torch.distributed.tensor.parallel import (  # pylint: disable=import-outside-toplevel
            ColwiseParallel, RowwiseParallel, parallelize_module)
        plan = {}
        for index in range(BLOCKS):
            plan[f"blocks.{index}.up"] = ColwiseParallel()
            plan[f"blocks.{index}.down"] = RowwiseParallel()
        parallelize_module(model, mesh, plan)


def own_tensors(model, mesh):
    """What the rank's DTensors say, per qualified module name ("" the root)."""
    from torch.distributed.tensor import DTensor  # pylint: disable=import-outside-toplevel
    held, full = {}, {}
    for name, module in model.named_modules():
        held[name] = full[name] = 0
        for parameter in module.parameters():
            local = parameter.to_local() if isinstance(parameter, DTensor) else parameter
            # full_tensor() all-gathers: every rank visits the parameters in the same order.
            whole = parameter.full_tensor() if isinstance(parameter, DTensor) else parameter
            held[name] += local.numel()
            full[name] += whole.numel()
    return {"rank": dist.get_rank(), "mesh_size": mesh.size(),
            "mesh_rank": mesh.get_local_rank(), "held": held, "full": full,
            "classes": {name: type(module).__name__ for name, module in model.named_modules()}}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("fsdp", "tp"), required=True)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    from torch.distributed.device_mesh import init_device_mesh  # pylint: disable=import-outside-toplevel
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    torch.manual_seed(0)  # every rank builds the same model (tensor parallelism needs it)
    model = ShardedLM()
    shard(model, args.mode, mesh)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(0 if args.mode == "tp" else dist.get_rank())
    for _ in range(args.steps):
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=generator)
        logits = model(tokens)
        loss = loss_fn(logits.reshape(-1, VOCAB), tokens.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    seen = own_tensors(model, mesh)
    Path(args.out, f"rank-{dist.get_rank()}.json").write_text(json.dumps(seen))
    dist.barrier()
    print(f"rank {dist.get_rank()}: {args.steps} steps")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
