"""The training script of test_torch_marks, with no flopscope code in it: a model holding a
ModuleList, a ModuleDict and a module that never runs, a loss module, and two optimizers (one
per parameter group), trained for a few steps on the CPU.

Also imported by the test (build_model, the sizes) to work out what the marks must say."""

import argparse

import torch
from torch import nn

WIDTH = 8
CLASSES = 3
BATCH = 6


class Marked(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(WIDTH, WIDTH)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.GELU())
                                    for _ in range(2))
        self.heads = nn.ModuleDict({"main": nn.Linear(WIDTH, CLASSES),
                                    "spare": nn.Linear(WIDTH, CLASSES)})
        self.unused = nn.LayerNorm(WIDTH)

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = x + block(x)
        return self.heads["main"](x)


def build_model():
    torch.manual_seed(0)
    return Marked()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    model = build_model()
    loss_fn = nn.CrossEntropyLoss()
    body = torch.optim.SGD(list(model.stem.parameters()) + list(model.blocks.parameters()),
                           lr=0.01)
    heads = torch.optim.Adam(model.heads.parameters(), lr=0.01)
    for _ in range(args.steps):
        x = torch.randn(BATCH, WIDTH)
        target = torch.randint(0, CLASSES, (BATCH,))
        loss_fn(model(x), target).backward()
        body.step()
        heads.step()
        body.zero_grad()
        heads.zero_grad()
    print(f"{args.steps} steps")


if __name__ == "__main__":
    main()
