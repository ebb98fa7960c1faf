"""The training script of integration_torch_stragglers, with no flopscope code in it, run on every
rank (DDP over gloo on the CPU) under `flopscope run --torch`. One rank (--slow-rank) sleeps
--sleep seconds once per step, in a different place in each window of steps:

- FORWARD: in the forward of the model's `slowed` module, before its Linear;
- BACKWARD: in the backward of the same module (a custom autograd Function inside its forward,
  whose backward sleeps);
- BETWEEN: after the optimizer step (the end of the `step` range), before the next step.

The steps between the windows run as usual, so that no window's median takes a step of another
one: a sleep after step N makes the other ranks wait inside their step N + 1. Also imported by
the test for the windows, the module's place and the sizes.
"""

import argparse
import time

import torch
import torch.distributed as dist
from torch import nn

WIDTH = 32
BATCH = 8
# (first, last) step of each window, counted from 0. Steps 0 and 1 are warm-up: DDP rebuilds its
# buckets in step 1, a broadcast in the forward.
FORWARD = (2, 6)
BACKWARD = (8, 12)
BETWEEN = (14, 18)
# The last sleep (after step 18) delays step 19; step 20 gives step 19 its period too.
STEPS = BETWEEN[1] + 3
SLOWED = "slowed"  # the attribute of Net holding the module that sleeps


class SleepInBackward(torch.autograd.Function):
    """The identity whose backward sleeps."""

    @staticmethod
    def forward(ctx, tensor, seconds):  # pylint: disable=arguments-differ
        ctx.seconds = seconds
        return tensor.clone()

    @staticmethod
    def backward(ctx, grad):  # pylint: disable=arguments-differ
        time.sleep(ctx.seconds)
        return grad, None


class Slowed(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(WIDTH, WIDTH)
        self.forward_sleep = 0.0
        self.backward_sleep = 0.0

    def forward(self, tensor):
        if self.forward_sleep:
            time.sleep(self.forward_sleep)
        tensor = self.linear(tensor)
        if self.backward_sleep:
            tensor = SleepInBackward.apply(tensor, self.backward_sleep)
        return torch.relu(tensor)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(WIDTH, WIDTH)
        setattr(self, SLOWED, Slowed())
        self.last = nn.Linear(WIDTH, 1)

    def forward(self, tensor):
        return self.last(getattr(self, SLOWED)(torch.relu(self.first(tensor))))


def within(step, window):
    return window[0] <= step <= window[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sleep", type=float, required=True)
    parser.add_argument("--slow-rank", type=int, required=True)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = Net()
    slowed = getattr(net, SLOWED)
    model = nn.parallel.DistributedDataParallel(net)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(rank)
    slow = rank == args.slow_rank
    for step in range(STEPS):
        slowed.forward_sleep = args.sleep if slow and within(step, FORWARD) else 0.0
        slowed.backward_sleep = args.sleep if slow and within(step, BACKWARD) else 0.0
        loss = model(torch.randn(BATCH, WIDTH, generator=generator)).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if slow and within(step, BETWEEN):
            time.sleep(args.sleep)
    dist.barrier()
    print(f"rank {rank}: {STEPS} steps")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
