"""The training script of integration_torch_training: PyTorch training as people run it, with no
flopscope code in it, run on every rank (DDP over gloo on the CPU) under `flopscope run --torch`.
Each scenario trains its own model, whose class names it, for STEPS optimizer steps, one
scenario after the other in one process:

- `accumulate`: gradient accumulation, ACCUMULATE micro-batches per optimizer step, the first
  ACCUMULATE-1 under DDP's `no_sync()`;
- `checkpoint` / `reentrant`: every block under torch.utils.checkpoint, use_reentrant=False / True,
  so that backward recomputes the blocks' forward;
- `compiled`: `torch.compile` of the model, then DDP around it (torch 2 only; backend aot_eager,
  see below). The
  script prints what Dynamo counted (`dynamo: graphs=N breaks=M`) for the test to check.

Also imported by the test (the models, the sizes) to compute what the report must say.
"""

import argparse
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.checkpoint import checkpoint

WIDTH = 16
HIDDEN = 32
BATCH = 4
BLOCKS = 2
STEPS = 3
ACCUMULATE = 3
# Inductor compiles C++ with g++ at the first call: about 30 s per rank on the 2 shared cores of
# the test machines, for this tiny model. aot_eager runs the same Dynamo trace and AOTAutograd's
# forward and backward graphs (what the hooks meet), without the code generation.
COMPILE_BACKEND = "aot_eager"


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(WIDTH, HIDDEN)
        self.act = nn.GELU()
        self.down = nn.Linear(HIDDEN, WIDTH)

    def forward(self, x):
        return x + self.down(self.act(self.up(x)))


class Net(nn.Module):
    """An input layer, BLOCKS blocks and a head; `checkpointing` None, "non_reentrant" or
    "reentrant" (the blocks' input then needs a gradient: reentrant checkpointing gives the
    parameters of a block none where no input of it requires one)."""

    checkpointing = None

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(WIDTH, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.head = nn.Linear(WIDTH, 1)

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            if self.checkpointing is None:
                x = block(x)
            else:
                x = checkpoint(block, x, use_reentrant=self.checkpointing == "reentrant")
        return self.head(x)


class AccumulateNet(Net):
    pass


class CheckpointNet(Net):
    checkpointing = "non_reentrant"


class ReentrantNet(Net):
    checkpointing = "reentrant"


class CompiledNet(Net):
    pass


MODELS = {"accumulate": AccumulateNet, "checkpoint": CheckpointNet, "reentrant": ReentrantNet,
          "compiled": CompiledNet}


def build_model(scenario):
    torch.manual_seed(0)
    return MODELS[scenario]()


def batch(generator):
    return torch.randn(BATCH, WIDTH, generator=generator), torch.randn(BATCH, 1,
                                                                      generator=generator)


def train(scenario, generator):
    model = build_model(scenario)
    if scenario == "compiled":  # compiled, then wrapped: Dynamo sees the model alone
        model = torch.compile(model, backend=COMPILE_BACKEND)
    model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.MSELoss()
    micro = ACCUMULATE if scenario == "accumulate" else 1
    for _ in range(STEPS):
        for index in range(micro):
            inputs, target = batch(generator)
            if index < micro - 1:
                with model.no_sync():
                    loss_fn(model(inputs), target).backward()
            else:
                loss_fn(model(inputs), target).backward()
        optimizer.step()
        optimizer.zero_grad()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scenarios", nargs="+", choices=sorted(MODELS))
    args = parser.parse_args()
    dist.init_process_group("gloo")
    generator = torch.Generator().manual_seed(dist.get_rank())
    for scenario in args.scenarios:
        if scenario == "compiled":
            from torch._dynamo.utils import counters  # pylint: disable=import-outside-toplevel
            counters.clear()
        train(scenario, generator)
        if scenario == "compiled":
            breaks = sum(counters["graph_break"].values())
            graphs = counters["stats"]["unique_graphs"]
            print(f"dynamo: graphs={graphs} breaks={breaks}", flush=True)
            for reason in counters["graph_break"]:
                print("dynamo break: " + " | ".join(reason.splitlines()), file=sys.stderr,
                      flush=True)
        dist.barrier()
    print(f"rank {dist.get_rank()}: {' '.join(args.scenarios)} done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
