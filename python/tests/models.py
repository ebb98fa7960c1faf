"""Small models for the tests, built from torch.nn only."""

import torch
from torch import nn


class TinyLM(nn.Module):
    """Embedding, nn.TransformerEncoder layers and a Linear head."""

    def __init__(self, vocab=32, width=16, heads=2, layers=2, ffn=32):
        super().__init__()
        self.embedding = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, heads, ffn, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        return self.head(self.encoder(self.embedding(tokens)))


class Attention(nn.Module):
    """q, k and v read the same input; the attention math runs in this module itself."""

    def __init__(self, width=8):
        super().__init__()
        self.q = nn.Linear(width, width)
        self.k = nn.Linear(width, width)
        self.v = nn.Linear(width, width)
        self.o = nn.Linear(width, width)

    def forward(self, x):
        scores = torch.softmax(self.q(x) @ self.k(x).transpose(-1, -2), dim=-1)
        return self.o(scores @ self.v(x))


class Block(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.attn = Attention(width)
        self.mlp = nn.Sequential(nn.Linear(width, width), nn.ReLU(inplace=True),
                                 nn.Linear(width, width))

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.mlp(x)


class Stack(nn.Module):
    def __init__(self, width=8, depth=2):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))

    def forward(self, x):
        x = torch.relu(self.proj(x))
        for block in self.blocks:
            x = block(x)
        return x


def called_module_names(model, *inputs):
    """Qualified names of the modules whose forward runs, found with plain per-module hooks
    (independently of flopscope_torch)."""
    called = []
    handles = [module.register_forward_pre_hook(
        lambda module, args, name=name: called.append(name))
        for name, module in model.named_modules()]
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for handle in handles:
            handle.remove()
    return called


def expected_paths(model, root_label, called):
    """The range path of each called module: the root label, then the qualified name cut at
    every called ancestor (a container that never runs, like ModuleList, adds no component)."""
    called_set = set(called)
    paths = {}
    for name in called:
        if name == "":
            paths[name] = root_label
            continue
        parts = name.split(".")
        parent = ""
        for cut in range(len(parts) - 1, 0, -1):
            candidate = ".".join(parts[:cut])
            if candidate in called_set:
                parent = candidate
                break
        relative = name[len(parent) + 1:] if parent else name
        paths[name] = f"{paths[parent]}/{relative}"
    return paths


class LeNet5(nn.Module):
    """The LeNet5 of DeepSpeed's flops-profiler test: convolutions, tanh and average pooling,
    two Linear layers, and a softmax in the model's own forward."""

    def __init__(self, classes=10):
        super().__init__()
        self.feature_extractor = nn.Sequential(
            nn.Conv2d(1, 6, kernel_size=5), nn.Tanh(), nn.AvgPool2d(kernel_size=2),
            nn.Conv2d(6, 16, kernel_size=5), nn.Tanh(), nn.AvgPool2d(kernel_size=2),
            nn.Conv2d(16, 120, kernel_size=5), nn.Tanh())
        self.classifier = nn.Sequential(nn.Linear(120, 84), nn.Tanh(), nn.Linear(84, classes))

    def forward(self, x):
        logits = self.classifier(torch.flatten(self.feature_extractor(x), 1))
        return torch.nn.functional.softmax(logits, dim=1)


class Containers(nn.Module):
    """A ModuleList, a ModuleDict, and a module that never runs."""

    def __init__(self, width=8):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(width, width) for _ in range(2))
        self.heads = nn.ModuleDict({"main": nn.Linear(width, 3), "aux": nn.Linear(width, 2)})
        self.unused = nn.Linear(width, width)

    def forward(self, x):
        for block in self.blocks:
            x = torch.relu(block(x))
        return self.heads["main"](x)
