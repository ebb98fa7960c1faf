"""The training script of integration_memory_ledger, with no flopscope code in it: a small
language model trained on CPU ranks over gloo, in one of these setups (`--setup`):

- `ddp`: DistributedDataParallel with Adam (both torches);
- `fsdp2`: FSDP2, `fully_shard` on each block and the root (torch 2), Adam;
- `fsdp2_partial`: FSDP2 on the blocks only, the root's own parameters (embedding, head) left
  whole on every rank: the params that do not shrink (torch 2);
- `zero1`, `zero2`, `zero3`: a DeepSpeed engine at that ZeRO stage, DeepSpeed's Adam config
  with torch's Adam (`torch_adam`), DS_ACCELERATOR=cpu (torch 2's environment).

At the end of the last optimizer step (an optimizer step post-hook where torch has one, torch
2; on torch 1.13 after step(), before zero_grad()) each rank sums what its own tensors hold, each
storage once (`storage_bytes`), per part, and writes `<out>/rank-<r>.json`:
params (p.numel() * element_size() of each parameter, a DTensor's local shard, ZeRO-3's
`ds_tensor`), grads, optimizer states (optimizer.state), the model's elements and the
data-parallel size. The test compares the report's ledger with these.
"""

import argparse
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

VOCAB = 63
WIDTH = 16
FFN = 32
BLOCKS = 2
BATCH = 4
SEQ = 8


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(WIDTH, FFN)
        self.down = nn.Linear(FFN, WIDTH)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))


class LedgerLM(nn.Module):
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


def local(tensor):
    """A DTensor's local shard, else the tensor."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def storage_bytes(tensors):
    """Bytes of the storages under `tensors`, each once (a view counts its whole storage)."""
    seen = {}
    for tensor in tensors:
        if tensor is None or tensor.numel() == 0:
            continue
        tensor = local(tensor)
        storage = tensor.untyped_storage() if hasattr(tensor, "untyped_storage") else \
            tensor.storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def state_tensors(optimizer):
    return [value for state in optimizer.state.values() for value in state.values()
            if isinstance(value, torch.Tensor)]


def plain_figures(model, optimizer):
    """DDP and FSDP2: the model's parameters, their grads and the optimizer's states."""
    params = [local(p) for p in model.parameters()]
    return {"params": storage_bytes(params),
            "param_bytes": sum(p.numel() * p.element_size() for p in params),
            "grads": storage_bytes(local(p.grad) for p in model.parameters()),
            "optimizer": storage_bytes(state_tensors(optimizer)),
            "elements": sum(p.numel() for p in model.parameters())}


def deepspeed_figures(engine):
    """A DeepSpeed engine: its model's parameters (ZeRO-3: their partitions), the ZeRO
    optimizer's gradient partitions, and its inner optimizer's states and fp32 partitions."""
    zero = engine.optimizer
    inner = zero.optimizer
    model_params = list(engine.module.parameters())
    flat = getattr(zero, "bit16_groups_flat", None) or getattr(
        zero, "fp16_partitioned_groups_flat", [])
    masters = [p for group in inner.param_groups for p in group["params"]]
    grads = [p.grad for p in model_params] + [p.grad for p in masters]
    for name in ("averaged_gradients", "grads_in_partition", "grad_partitions_flat_buffer"):
        value = getattr(zero, name, None)
        if isinstance(value, torch.Tensor):
            grads.append(value)
        elif isinstance(value, dict):
            grads.extend(t for t in value.values() if isinstance(t, torch.Tensor))
        elif isinstance(value, list):
            grads.extend(t for t in value if isinstance(t, torch.Tensor))
    partitions = [getattr(p, "ds_tensor", None) for p in model_params]
    params = storage_bytes([p.data for p in model_params] + partitions + list(flat))
    param_storages = {t.untyped_storage().data_ptr()
                      for t in [p.data for p in model_params] + partitions + list(flat)
                      if t is not None and t.numel()}
    own_masters = [p for p in masters if p.untyped_storage().data_ptr() not in param_storages]
    return {"params": params,
            "grads": storage_bytes(grads),
            "optimizer": storage_bytes(state_tensors(inner) + own_masters),
            "elements": sum(getattr(p, "ds_numel", p.numel()) for p in model_params)}


def build(setup, world):
    torch.manual_seed(0)
    model = LedgerLM()
    if setup == "ddp":
        model = nn.parallel.DistributedDataParallel(model)
        return model, torch.optim.Adam(model.parameters(), lr=1e-3), None
    if setup.startswith("fsdp2"):
        from torch.distributed.device_mesh import init_device_mesh  # pylint: disable=import-outside-toplevel
        from torch.distributed.fsdp import fully_shard  # pylint: disable=import-outside-toplevel
        mesh = init_device_mesh("cpu", (world,))
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        if setup == "fsdp2":
            fully_shard(model, mesh=mesh)
        return model, torch.optim.Adam(model.parameters(), lr=1e-3), None
    import importlib  # pylint: disable=import-outside-toplevel
    import deepspeed  # pylint: disable=import-outside-toplevel
    # DeepSpeed's shared-memory all-reduce for CPU ranks is compiled at its first use (about
    # 30 s in a fresh environment); the job's gloo collectives do not need it. (The module, not
    # `deepspeed.comm.torch`: that attribute is the torch package deepspeed.comm imports.)
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    config = {"train_micro_batch_size_per_gpu": BATCH, "gradient_accumulation_steps": 1,
              "zero_optimization": {"stage": int(setup[-1])},
              "optimizer": {"type": "Adam", "params": {"lr": 1e-3, "torch_adam": True}}}
    engine, optimizer, _, _ = deepspeed.initialize(model=model,
                                                   model_parameters=model.parameters(),
                                                   config=config)
    return engine, optimizer, engine


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--setup", required=True,
                        choices=("ddp", "fsdp2", "fsdp2_partial", "zero1", "zero2", "zero3"))
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    if args.setup.startswith("zero"):
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    dist.init_process_group("gloo")
    world, rank = dist.get_world_size(), dist.get_rank()
    model, optimizer, engine = build(args.setup, world)
    seen = {}

    def measure():
        seen.update(deepspeed_figures(engine) if engine is not None else
                    plain_figures(model, optimizer))

    inner = engine.optimizer.optimizer if engine is not None else optimizer
    post_hook = getattr(inner, "register_step_post_hook", None)
    if post_hook is not None:
        post_hook(lambda *_: measure())
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(rank)
    for _ in range(args.steps):
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=generator)
        if engine is not None:
            loss = loss_fn(engine(tokens).reshape(-1, VOCAB), tokens.reshape(-1))
            engine.backward(loss)
            engine.step()
            continue
        optimizer.zero_grad()
        loss = loss_fn(model(tokens).reshape(-1, VOCAB), tokens.reshape(-1))
        loss.backward()
        optimizer.step()
        if post_hook is None:
            measure()
    seen.update({"rank": rank, "dp": world, "setup": args.setup,
                 "param_dtype_bytes": next(LedgerLM().parameters()).element_size()})
    Path(args.out, f"rank-{rank}.json").write_text(json.dumps(seen))
    dist.barrier()
    print(f"rank {rank}: {args.steps} steps")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
