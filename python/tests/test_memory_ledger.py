"""The memory ledger's measurement (flopscope_torch/memory_ledger.py): its marks after optimizer
steps, each storage counted once, against the model's own tensors; when it measures; the switch.
Multi-rank setups (DDP, FSDP2, DeepSpeed ZeRO) are tests/integration/test_memory_ledger.py."""

import unittest

import torch
from torch import nn

from flopscope_torch.memory_ledger import MemoryLedger, activations_text
from flopscope_torch.profiler import Profiler
from recording_backend import Recorder


def ledger_marks(marks):
    """The values of the `memory_ledger <rank>=...` marks, in order, as {word: value} dicts."""
    found = []
    for text in marks:
        if text.startswith("memory_ledger "):
            value = text.rpartition("=")[2]
            found.append(dict(word.split(":", 1) for word in value.split()))
    return found


class TiedLM(nn.Module):
    """The head shares the embedding's weight: one storage, two parameters' places."""

    def __init__(self, vocab=50, width=12):
        super().__init__()
        self.embedding = nn.Embedding(vocab, width)
        self.block = nn.Linear(width, width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embedding.weight

    def forward(self, tokens):
        return self.head(torch.relu(self.block(self.embedding(tokens))))


def nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


class MemoryLedgerTest(unittest.TestCase):
    environ = {}

    def setUp(self):
        torch.manual_seed(0)
        self.recorder = Recorder()
        self.profiler = Profiler()
        self.assertTrue(self.profiler.enable(backend=self.recorder.backend(),
                                             environ=self.environ))

    def tearDown(self):
        self.profiler.disable()

    def train(self, model, optimizer, steps):
        for _ in range(steps):
            optimizer.zero_grad()
            model(torch.randint(0, 50, (4, 6))).sum().backward()
            optimizer.step()


class MeasuredTest(MemoryLedgerTest):
    def test_after_the_first_optimizer_step_from_the_tensors_each_storage_once(self):
        model = TiedLM()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        self.train(model, optimizer, 1)
        marks = ledger_marks(self.recorder.marks())
        self.assertEqual(len(marks), 1)
        ledger = marks[0]
        unique = list(model.parameters())  # parameters() lists the tied weight once
        self.assertEqual(len(unique), 3)
        states = [t for s in optimizer.state.values() for t in s.values()
                  if isinstance(t, torch.Tensor)]
        self.assertEqual(int(ledger["params"]), nbytes(unique))
        self.assertEqual(int(ledger["grads"]), nbytes(p.grad for p in unique))
        self.assertEqual(int(ledger["optimizer"]), nbytes(states))
        self.assertEqual(int(ledger["elements"]), sum(p.numel() for p in unique))
        self.assertEqual((ledger["setup"], ledger["dp"], ledger["step"]), ("single", "1", "0"))
        self.assertEqual((ledger["dtype"], ledger["states"], ledger["amp"]), ("fp32", "2", "0"))
        self.assertEqual(ledger["buckets"], "0")
        self.assertGreater(int(ledger["rss_high_water"]), 0)  # the CPU: no allocator peaks
        self.assertNotIn("memory_peak", " ".join(self.recorder.marks()))

    def test_a_view_counts_its_whole_storage_once(self):
        flat = torch.zeros(100)
        model = nn.Module()
        model.a = nn.Parameter(flat[:40].view(4, 10))
        model.b = nn.Parameter(flat[40:].view(6, 10))
        model.forward = lambda x: (x * model.a.sum() + model.b.sum()).sum()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.ones(2)).backward()
        optimizer.step()
        ledger = ledger_marks(self.recorder.marks())[-1]
        self.assertEqual(int(ledger["params"]), flat.numel() * flat.element_size())
        self.assertEqual(ledger["states"], "0")  # plain SGD keeps none

    def test_autocast_in_a_forward_is_mixed_precision(self):
        model = TiedLM()
        optimizer = torch.optim.Adam(model.parameters())
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(torch.randint(0, 50, (4, 6))).float().sum()
        loss.backward()
        optimizer.step()
        self.assertEqual(ledger_marks(self.recorder.marks())[-1]["amp"], "1")

    def test_no_optimizer_step_no_ledger(self):
        model = TiedLM()
        with self.profiler.phases.step():
            model(torch.randint(0, 50, (2, 3))).sum().backward()
        self.assertEqual(ledger_marks(self.recorder.marks()), [])


class EveryNStepsTest(MemoryLedgerTest):
    environ = {"FLOPSCOPE_TORCH_MEMORY_EVERY": "3"}

    def test_the_first_step_then_every_n_when_it_changed(self):
        model = TiedLM()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        self.train(model, optimizer, 7)
        steps = [int(mark["step"]) for mark in ledger_marks(self.recorder.marks())]
        # Steps 0, 3 and 6 were measured; a figure that did not move is not announced again
        # (the RSS high-water mark may move).
        self.assertEqual(steps[0], 0)
        self.assertTrue(set(steps) <= {0, 3, 6}, steps)
        self.assertEqual(ledger_marks(self.recorder.marks())[0]["states"], "1")  # momentum


class RootsTest(MemoryLedgerTest):
    def test_a_model_called_every_step_is_kept_once(self):
        # Each step's forward finds it a root again; kept once, the measurement walks it once.
        model = TiedLM()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.train(model, optimizer, 5)
        held = [ref() for ref in self.profiler.memory._roots]  # pylint: disable=protected-access
        self.assertEqual(held, [model])


class SwitchedOffTest(MemoryLedgerTest):
    environ = {"FLOPSCOPE_TORCH_MEMORY": "0"}

    def test_off(self):
        model = TiedLM()
        self.train(model, torch.optim.Adam(model.parameters()), 2)
        self.assertIsNone(self.profiler.memory)
        self.assertEqual(ledger_marks(self.recorder.marks()), [])

class FakeCuda:
    """torch.cuda's allocator statistics as the ledger reads them, with no GPU: bytes allocated
    now, the peak since the last reset, and what the caching allocator reserved."""

    def __init__(self, allocated=0):
        self.allocated = self.peak = allocated
        self.reserved = 1 << 20

    def alloc(self, size):
        self.allocated += size
        self.peak = max(self.peak, self.allocated)

    def memory_allocated(self):
        return self.allocated

    def max_memory_allocated(self):
        return self.peak

    def max_memory_reserved(self):
        return self.reserved

    def reset_peak_memory_stats(self):
        self.peak = self.allocated


class GpuPeaksTest(unittest.TestCase):
    """The GPU path of the ledger (peaks per step and phase, activations) against a fake
    allocator: the sequence of phase boundaries the hooks make, and the bytes in between."""

    def test_peaks_per_phase_and_what_the_forward_left(self):
        marks = []
        ledger = MemoryLedger(marks.append, environ={})
        cuda = FakeCuda(allocated=10_000)  # the parameters and states
        ledger._cuda, ledger._peaks = cuda, {}  # pylint: disable=protected-access
        for _ in range(2):  # two identical steps: the second announces nothing new
            ledger.phase_boundary("step", opening=True)
            ledger.phase_boundary("forward", opening=True)
            cuda.alloc(5_000)   # activations and a temporary
            cuda.alloc(-1_000)  # the temporary freed: 4 000 kept for backward
            ledger.phase_boundary("forward", opening=False)
            ledger.phase_boundary("backward", opening=True)
            cuda.alloc(3_000)   # gradients
            cuda.alloc(-4_000)  # the activations freed
            ledger.phase_boundary("backward", opening=False)
            ledger.phase_boundary("optimizer", opening=True)
            cuda.alloc(500)
            cuda.alloc(-500)
            ledger.phase_boundary("optimizer", opening=False)
            ledger.phase_boundary("step", opening=False)
            ledger.step_ended()
            cuda.alloc(-3_000)  # zero_grad
        peaks = [text for text in marks if text.startswith("memory_peak ")]
        self.assertEqual(peaks, ["memory_peak 0=step:0 allocated:17000 reserved:1048576 "
                                 "forward:15000 backward:17000 optimizer:13500 activations:4000"])


def activation_marks(marks):
    """The `memory_activations <rank>=...` marks' values, in order, as lists of (name, value)
    words (a module path may hold `:`: the value is after the last)."""
    return [[tuple(word.rsplit(":", 1)) for word in text.rpartition("=")[2].split()]
            for text in marks if text.startswith("memory_activations ")]


def global_forward_hooks():
    """How many global forward hooks torch holds now."""
    return len(torch.nn.modules.module._global_forward_hooks)  # pylint: disable=protected-access


class Bump(nn.Module):
    """Allocates `size` bytes on the fake GPU (and frees `freed` of them) at each forward, then
    calls its children in order: the bytes its forward leaves are known exactly."""

    def __init__(self, cuda, size, *children, freed=0, calls=1):
        super().__init__()
        self.cuda, self.size, self.freed, self.calls = cuda, size, freed, calls
        self.parts = nn.ModuleList(children)
        self.hooks_seen = []  # torch's global forward hooks while this forward ran

    def forward(self, x):
        self.hooks_seen.append(global_forward_hooks())
        self.cuda.alloc(self.size)
        self.cuda.alloc(-self.freed)
        for part in self.parts:
            for _ in range(self.calls):
                x = part(x)
        return x


class CountingCuda(FakeCuda):
    def __init__(self, allocated=0):
        super().__init__(allocated)
        self.reads = 0

    def memory_allocated(self):
        self.reads += 1
        return super().memory_allocated()


class Net(nn.Module):
    """root (100) -> a (1500, 500 freed), b called twice (10 each) -> c called twice per b call
    (5 each), head (a Linear: nothing on the fake GPU)."""

    def __init__(self, cuda):
        super().__init__()
        self.cuda = cuda
        self.a = Bump(cuda, 1500, freed=500)
        self.b = Bump(cuda, 10, Bump(cuda, 5), calls=2)
        self.head = nn.Linear(3, 1)

    def forward(self, x):
        self.cuda.alloc(100)
        x = self.b(self.b(self.a(x)))
        return self.head(x)


class PerModuleActivationsTest(MemoryLedgerTest):
    """Per-module activations on a GPU, driven by a fake allocator (no GPU here): the modules'
    forwards bump memory_allocated() by known amounts."""
    environ = {"FLOPSCOPE_TORCH_MEMORY_EVERY": "3"}

    def test_what_each_forward_left_on_the_measured_steps_only(self):
        cuda = CountingCuda(allocated=10_000)
        ledger = self.profiler.memory
        ledger._cuda, ledger._peaks = cuda, {}  # pylint: disable=protected-access
        model = Net(cuda)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        reads, hooks = [], []
        for step in range(7):
            model.a.size = 1500 + step  # the figures move: every measured step is announced
            before, calls_before = cuda.reads, len(model.a.hooks_seen)
            optimizer.zero_grad()
            for _ in range(2 if step == 3 else 1):  # step 3 accumulates two micro-batches
                model(torch.ones(2, 3)).sum().backward()
                cuda.alloc(-cuda.allocated + 10_000)  # backward freed the activations
            optimizer.step()
            reads.append(cuda.reads - before)
            hooks.append(model.a.hooks_seen[calls_before:])
        marks = activation_marks(self.recorder.marks())
        # Steps 0, 3 and 6 are the ledger's; per path, the bytes its calls left, summed.
        expected = []
        for step, batches in ((0, 1), (3, 2), (6, 1)):
            a = 1000 + step
            figures = {"Net": batches * (100 + a + 2 * 20), "Net/a": batches * a,
                       "Net/b": batches * 2 * 20, "Net/b/parts.0": batches * 4 * 5,
                       "Net/head": 0}
            ordered = sorted(figures.items(), key=lambda item: (-item[1], item[0]))
            expected.append([("step", str(step)), ("modules", "5"), ("rest", "0")]
                            + [(path, str(size)) for path, size in ordered])
        self.assertEqual(marks, expected)
        # The root's figure is the forward phase's own (memory_peak's activations).
        peak = next(text for text in self.recorder.marks() if text.startswith("memory_peak "))
        self.assertIn(f"activations:{expected[0][3][1]}", peak.split())
        # The hooks run only on those steps: 9 module calls (Net, a, b twice, c four times,
        # head) read the allocator twice each, the root's first read at its own pre hook.
        # Every step's forward phase reads it twice (memory_peak's activations).
        self.assertEqual(reads, [2 + 18, 2, 2, 2 * (2 + 18), 2, 2, 2 + 18])
        baseline = hooks[1][0]
        self.assertEqual(hooks, [[baseline + 1], [baseline], [baseline],
                                 [baseline + 1, baseline + 1], [baseline], [baseline],
                                 [baseline + 1]])

    @unittest.skipIf(torch.cuda.is_available(), "CUDA is available: not the CPU's case")
    def test_cpu_says_nothing_and_adds_no_hook(self):
        model = TiedLM()
        seen = []
        model.block.register_forward_pre_hook(lambda *_: seen.append(global_forward_hooks()))
        ledger = self.profiler.memory
        asked = []
        ledger.root_forward = lambda *args: asked.append(args)  # what ModuleHooks calls
        model(torch.randint(0, 50, (4, 6)))  # a forward before any step: asked
        self.assertEqual(len(asked), 1)
        del ledger.root_forward
        model(torch.randint(0, 50, (4, 6)))  # the real one learns there is no CUDA
        self.assertFalse(ledger.activations_due)
        self.train(model, torch.optim.SGD(model.parameters(), lr=0.1), 4)
        self.assertEqual(activation_marks(self.recorder.marks()), [])
        self.assertEqual(len(set(seen)), 1)
        self.assertFalse(self.profiler.memory.activations_due)


class ActivationsTextTest(unittest.TestCase):
    def test_bounded_to_the_most_with_the_rest_summed(self):
        sums = {f"M/l{index}": index for index in range(60)}
        words = activations_text(sums, shown=50).split()
        self.assertEqual(words[:2], ["modules:60", "rest:45"])  # 0 + 1 + ... + 9
        self.assertEqual(words[2:4], ["M/l59:59", "M/l58:58"])
        self.assertEqual(len(words), 52)

    def test_a_path_is_one_word_without_equals(self):
        self.assertEqual(activations_text({"M/my block=1%": -8}),
                         "modules:1 rest:0 M/my%20block%3D1%25:-8")


if __name__ == "__main__":
    unittest.main()
