"""One model, one input, two profilers (tests/integration/test_deepspeed_parity.py).

    deepspeed_parity_job.py MODEL[,MODEL...] deepspeed DIR
        DeepSpeed's get_model_profile of each model, its text to DIR/MODEL.deepspeed.txt (imports
        once, then a fork per model: importing DeepSpeed takes longer than a profile)
    deepspeed_parity_job.py MODEL flopscope
        the same forward, for `flopscope run --torch`

Both build MODEL from its configuration with seeded random weights (no download), in eval mode,
with gradients on, as get_model_profile runs it (a TRAINING model: in training mode). DeepSpeed
profiles one forward after WARM_UP; the flopscope side runs that one forward alone (a report with
no step marked totals the run), with no flopscope code: `--torch` adds the hooks.

Beside each text OUT the DeepSpeed side also writes OUT.flops.json: its total fwd flops, and per
module of a class in MISSED_BY_DEEPSPEED its own count and the FLOPs it misses there (watched on
the profiled forward), with their sum formatted by its number_to_string: the fwd flops
flopscope's report must print. And OUT.json: every module's params and MACs as DeepSpeed counted
them in that run, formatted by its own params_to_string and macs_to_string, read just before
get_model_profile ends its profile. Its text leaves them out for modules whose class defines
__repr__ (torch 2's ModuleList, transformers' Conv1D), so the test compares those from here.
"""

import sys

import torch
from torch import nn

WARM_UP = 1
BATCH = 2
SEQ = 16
# Modules whose FLOPs DeepSpeed misses and flopscope counts, by class, and why. The DeepSpeed side
# counts what these modules compute on the profiled forward, one FLOP per input element (as
# DeepSpeed counts gelu wherever it sees the call), beside DeepSpeed's own count of them.
MISSED_BY_DEEPSPEED = {
    "GELUActivation": "transformers' GELUActivation keeps nn.functional.gelu from before DeepSpeed "
                      "patches it, so DeepSpeed counts 0 for it; flopscope's wrappers, on from "
                      "`import torch`, count one FLOP per input element, as DeepSpeed counts gelu",
}


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel  # pylint: disable=import-outside-toplevel
    config = GPT2Config(vocab_size=512, n_positions=64, n_embd=64, n_layer=2, n_head=4)
    return GPT2LMHeadModel(config), (torch.randint(0, 512, (BATCH, SEQ)),)


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM  # pylint: disable=import-outside-toplevel
    config = LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(config), (torch.randint(0, 512, (BATCH, SEQ)),)


def bert():
    from transformers import BertConfig, BertModel  # pylint: disable=import-outside-toplevel
    config = BertConfig(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=64)
    return BertModel(config), (torch.randint(0, 512, (BATCH, SEQ)),)


def t5():
    from transformers import T5Config, T5Model  # pylint: disable=import-outside-toplevel
    config = T5Config(vocab_size=512, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4)
    ids = torch.randint(0, 512, (BATCH, SEQ))
    return T5Model(config), (ids, None, ids)  # input_ids, attention_mask, decoder_input_ids


def resnet18():
    from torchvision.models import resnet18 as build  # pylint: disable=import-outside-toplevel
    return build(num_classes=10), (torch.randn(BATCH, 3, 64, 64),)


def vit_b_16():
    from torchvision.models import vit_b_16 as build  # pylint: disable=import-outside-toplevel
    return build(image_size=32, num_classes=10), (torch.randn(1, 3, 32, 32),)


class Tagger(nn.Module):
    """An LSTM/GRU sequence tagger: embedding, a bidirectional LSTM, a GRU, a linear head."""

    def __init__(self, vocab=512, dim=32, tags=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(2 * dim, dim, batch_first=True)
        self.head = nn.Linear(dim, tags)

    def forward(self, ids):
        out, _ = self.lstm(self.embed(ids))
        out, _ = self.gru(out)
        return self.head(out)


def tagger():
    return Tagger(), (torch.randint(0, 512, (BATCH, SEQ)),)


class Attention(nn.Module):
    """Self-attention through F.scaled_dot_product_attention."""

    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        batch, seq, dim = x.shape
        q, k, v = (t.view(batch, seq, self.heads, dim // self.heads).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(batch, seq, dim))


class SdpaBlock(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.attn = Attention(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm(x))
        return x + self.mlp(x)


def sdpa():
    return SdpaBlock(), (torch.randn(BATCH, SEQ, 64),)


MODELS = {"gpt2": gpt2, "llama": llama, "bert": bert, "t5": t5, "resnet18": resnet18,
          "vit_b_16": vit_b_16, "tagger": tagger, "sdpa": sdpa}
# Profiled in training mode, as DeepSpeed's engine profiles a training step: its batch norms count
# 5 FLOPs per element where eval mode counts 2. get_model_profile has no option for it (it calls
# model.eval() first), so the DeepSpeed side keeps that call from switching the mode.
TRAINING = {"resnet18_train": resnet18}


def build(name):
    """MODEL and its input, seeded, in the mode the profile runs it in."""
    torch.manual_seed(0)
    model, args = {**MODELS, **TRAINING}[name]()
    if name in TRAINING:
        model.train()
        model.eval = lambda: model  # get_model_profile's model.eval(): stays in training mode
    else:
        model.eval()
    return model, args


def profile_with_deepspeed(model, args, out_path):
    """DeepSpeed's get_model_profile of one forward: its text to OUT_PATH, beside it OUT_PATH.json
    and OUT_PATH.flops.json (the module docstring)."""
    # pylint: disable=import-outside-toplevel
    import json
    from deepspeed.profiling.flops_profiler import get_model_profile
    from deepspeed.profiling.flops_profiler import profiler
    figures = {}
    missed, watching = {}, []
    start_profile = profiler.FlopsProfiler.start_profile
    end_profile = profiler.FlopsProfiler.end_profile

    def start_then_watch(self, *args, **kwargs):
        # After the warm-up: only the profiled forward is watched.
        start_profile(self, *args, **kwargs)
        for path, module in model.named_modules():
            if type(module).__name__ in MISSED_BY_DEEPSPEED:
                def watch(_, inputs, output, path=path):  # pylint: disable=unused-argument
                    missed[path] = missed.get(path, 0) + inputs[0].numel()
                watching.append(module.register_forward_hook(watch))

    def record_then_end(self):
        # As DeepSpeed's flops_repr writes a module's first two items.
        def share(part, whole):
            return round(100 * part / whole, profiler.DEFAULT_PRECISION) if whole else 0

        total_params = model.__params__ + model.__expert_params__
        total_macs = profiler.get_module_macs(model)
        for name, module in model.named_modules():
            params = module.__params__ + module.__expert_params__
            macs = profiler.get_module_macs(module)
            figures[name] = [
                type(module).__name__,
                f"{profiler.params_to_string(params)} = {share(params, total_params):g}% Params",
                f"{profiler.macs_to_string(macs)} = {share(macs, total_macs):g}% MACs"]
        for handle in watching:
            handle.remove()
        modules = dict(model.named_modules())
        total = self.get_total_flops()
        flops["total"] = total
        flops["missed"] = {
            path: {"class": type(modules[path]).__name__,
                   "deepspeed": profiler.get_module_flops(modules[path]), "flops": count,
                   "why": MISSED_BY_DEEPSPEED[type(modules[path]).__name__]}
            for path, count in missed.items()}
        flops["with_missed"] = profiler.number_to_string(total + sum(missed.values())).strip()
        end_profile(self)

    flops = {}
    profiler.FlopsProfiler.start_profile = start_then_watch
    profiler.FlopsProfiler.end_profile = record_then_end
    try:
        get_model_profile(model, args=list(args), print_profile=True, detailed=True,
                          warm_up=WARM_UP, as_string=True, output_file=out_path)
    finally:
        profiler.FlopsProfiler.start_profile = start_profile
        profiler.FlopsProfiler.end_profile = end_profile
    with open(out_path + ".json", "w", encoding="utf-8") as out:
        json.dump(figures, out, indent=1)
    with open(out_path + ".flops.json", "w", encoding="utf-8") as out:
        json.dump(flops, out, indent=1)


def profile_each_in_a_fork(names, folder):
    """profile_with_deepspeed for each model, each in a child forked after the imports, so that
    every profile starts from the state before any: in one process, DeepSpeed 0.18.6 on torch 1.13
    counted Llama's rotary embedding twice (256 MACs, 128 alone) when GPT-2 was profiled first."""
    import os  # pylint: disable=import-outside-toplevel
    import traceback  # pylint: disable=import-outside-toplevel
    # Fork after the slow imports, and with one thread: OpenMP's pool is not fork-safe.
    torch.set_num_threads(1)
    from deepspeed.profiling.flops_profiler import profiler  # noqa: F401 pylint: disable=W0611,C0415
    failed = []
    for name in names:
        model, args = build(name)
        pid = os.fork()
        if pid == 0:
            status = 0
            try:
                profile_with_deepspeed(model, args, f"{folder}/{name}.deepspeed.txt")
            except BaseException:  # pylint: disable=broad-except
                traceback.print_exc()
                status = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)  # pylint: disable=protected-access
        _, status = os.waitpid(pid, 0)
        if status != 0:
            failed.append(name)
    if failed:
        print(f"DeepSpeed's profile failed for {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def main(argv):
    names, side = argv[1].split(","), argv[2]
    if side == "deepspeed":
        return profile_each_in_a_fork(names, argv[3])
    model, args = build(names[0])
    model(*args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
