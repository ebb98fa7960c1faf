"""The training script the PyTorch integration tests run on every rank, with no flopscope code in
it: `flopscope run --torch` is what adds the module ranges.

A model from torch.nn (Embedding, nn.TransformerEncoder layers, a Linear head), CrossEntropyLoss,
SGD, DistributedDataParallel over gloo, ranks from the environment (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT). With --tp 2 it initialises Megatron's parallel state (the tests put a
stand-in `megatron` package on PYTHONPATH), keeps 1/tp of the head's outputs per tensor-parallel
rank, and runs DDP over its data-parallel group.

Also imported by the tests (build_model, the sizes) to compute what the report must say.
"""

import argparse

import torch
import torch.distributed as dist
from torch import nn

VOCAB = 64
WIDTH = 16
HEADS = 2
LAYERS = 2
FFN = 32
BATCH = 4
SEQ = 8


class TinyLM(nn.Module):
    def __init__(self, head_outputs=VOCAB):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, WIDTH)
        layer = nn.TransformerEncoderLayer(WIDTH, HEADS, FFN, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
        self.head = nn.Linear(WIDTH, head_outputs)

    def forward(self, tokens):
        return self.head(self.encoder(self.embedding(tokens)))


def build_model(tp=1):
    return TinyLM(head_outputs=VOCAB // tp)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--tp", type=int, default=1)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    group = None
    if args.tp > 1:
        from megatron.core import parallel_state  # pylint: disable=import-outside-toplevel
        parallel_state.initialize_model_parallel(tensor_model_parallel_size=args.tp)
        group = parallel_state.get_data_parallel_group()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(build_model(args.tp), process_group=group)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(dist.get_rank())
    for _ in range(args.steps):
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=generator)
        logits = model(tokens)
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tokens.reshape(-1) % logits.shape[-1])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    dist.barrier()
    print(f"rank {dist.get_rank()}: {args.steps} steps")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
