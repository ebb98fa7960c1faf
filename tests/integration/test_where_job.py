"""The training script of integration_where, with no flopscope code in it, run on every rank (DDP
over gloo on the CPU) under `flopscope run --torch`. After WARMUP steps, the hung rank (--hang-rank)
stops inside the forward of the model's `slowed` module: it writes --hung-file and sleeps there
until --release-file appears (at most MAX_HANG seconds), while the other ranks finish their
forward and block in DDP's all-reduce of the backward, waiting for it. Then every rank finishes
its steps. Also imported by the test for the module's place and the step counts.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn

WIDTH = 16
BATCH = 4
WARMUP = 2  # steps before the hang; DDP rebuilds its buckets in step 1
STEPS = WARMUP + 2
MAX_HANG = 60.0  # seconds: a test that never releases the rank does not hang the suite
SLOWED = "slowed"  # the attribute of Net holding the module the rank hangs in


class Slowed(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(WIDTH, WIDTH)
        self.hang = None  # (hung file, release file) while the rank is to hang

    def forward(self, tensor):
        if self.hang:
            hung, release = self.hang
            with open(hung, "w", encoding="utf-8") as marker:
                marker.write(str(time.time()))
            deadline = time.monotonic() + MAX_HANG
            while not os.path.exists(release) and time.monotonic() < deadline:
                time.sleep(0.05)
        return torch.relu(self.linear(tensor))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(WIDTH, WIDTH)
        setattr(self, SLOWED, Slowed())
        self.last = nn.Linear(WIDTH, 1)

    def forward(self, tensor):
        return self.last(getattr(self, SLOWED)(torch.relu(self.first(tensor))))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hang-rank", type=int, required=True)
    parser.add_argument("--hung-file", required=True)
    parser.add_argument("--release-file", required=True)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = Net()
    slowed = getattr(net, SLOWED)
    model = nn.parallel.DistributedDataParallel(net)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(rank)
    for step in range(STEPS):
        hang = rank == args.hang_rank and step == WARMUP
        slowed.hang = (args.hung_file, args.release_file) if hang else None
        loss = model(torch.randn(BATCH, WIDTH, generator=generator)).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    dist.barrier()
    print(f"rank {rank}: {STEPS} steps")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
