"""A real PyTorch training job on the GPU for the acceptance (tests/gpu/acceptance.sh).

torch's own nn.TransformerEncoder (no model code of ours) trains on random tokens with AdamW
under bf16 autocast for --steps steps. Each step ends with the optimizer step after the loss was
read (so its GPU work is inside it); the wall time of every step is written as JSON to --out
together with the device and the torch version, so the acceptance can compare a run without
the injector, one with timing-only tracing and one with a counter window.

--device cpu runs the same loop on the CPU (fp32), for the acceptance's CPU-only path. Exit 77 when
the device is cuda and torch sees no CUDA device, 0 otherwise."""

import argparse
import json
import sys
import time

SKIP = 77


def build_model(torch, args):
    layer = torch.nn.TransformerEncoderLayer(d_model=args.width, nhead=8,
                                             dim_feedforward=4 * args.width, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=args.layers)
    return torch.nn.Sequential(torch.nn.Embedding(args.vocab, args.width), encoder,
                               torch.nn.Linear(args.width, args.vocab))


def analytic_fwd_flops(args):
    """Forward FLOPs per step of the Linear layers, 2 * tokens * in * out (bias adds left out),
    by the module path flopscope gives them: every layer's linear1/linear2 and the head."""
    tokens = args.batch * args.seq
    feed_forward = 2 * tokens * args.width * 4 * args.width
    return {"linear1": feed_forward, "linear2": feed_forward,
            "Sequential/2": 2 * tokens * args.width * args.vocab}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()

    import torch
    on_gpu = args.device == "cuda"
    if on_gpu and not torch.cuda.is_available():
        print("torch_model_job: torch sees no CUDA device, skipping")
        return SKIP
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = build_model(torch, args).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    tokens = torch.randint(0, args.vocab, (args.batch, args.seq), device=device)
    targets = torch.randint(0, args.vocab, (args.batch, args.seq), device=device)

    step_ms = []
    for _ in range(args.steps):
        begin = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(args.device, dtype=torch.bfloat16, enabled=on_gpu):
            logits = model(tokens)
            loss = loss_fn(logits.float().view(-1, args.vocab), targets.view(-1))
        loss.backward()
        loss_value = loss.item()  # waits for the GPU: the step's work ends inside the step
        optimizer.step()
        if on_gpu:
            torch.cuda.synchronize()
        step_ms.append((time.perf_counter() - begin) * 1e3)

    with open(args.out, "w") as out:
        name = torch.cuda.get_device_name(0) if on_gpu else "cpu"
        json.dump({"device": name, "torch": torch.__version__,
                   "steps": args.steps, "step_ms": step_ms, "last_loss": loss_value,
                   "analytic_fwd_flops": analytic_fwd_flops(args)}, out)
    print(f"torch_model_job: {args.steps} steps, last loss {loss_value:.3f}, "
          f"median step {sorted(step_ms)[len(step_ms) // 2]:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
