"""Module ranges from the global hooks, checked against a recording NVTX backend."""

import collections
import contextlib
import io
import threading
import unittest

import torch
from torch import nn

from flopscope_torch.profiler import Profiler
from models import Stack, TinyLM, called_module_names, expected_paths
from recording_backend import Recorder


class ModuleRangesTestCase(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.recorder = Recorder()
        self.profiler = Profiler()
        self.assertTrue(self.profiler.enable(backend=self.recorder.backend()))

    def tearDown(self):
        self.profiler.disable()

    def counts(self, since=0, until=None):
        return collections.Counter(c.path for c in self.recorder.closed(since=since, until=until))

    def assert_nothing_open(self):
        """No module range is left open on any thread (a step stays open until its optimizer
        step, which most of these tests do not take)."""
        _, still_open = self.recorder.replay()
        self.assertEqual({key: names for key, names in still_open.items() if key[1] == ""}, {})


class ForwardAndBackwardTest(ModuleRangesTestCase):
    def test_paths_mirror_named_modules_in_forward_and_backward(self):
        model = TinyLM()
        tokens = torch.randint(0, 32, (2, 5))
        paths = expected_paths(model, "TinyLM", called_module_names(model, tokens))
        before = self.recorder.mark_index()
        loss = model(tokens).logsumexp(-1).mean()
        middle = self.recorder.mark_index()
        loss.backward()
        end = self.recorder.mark_index()

        expected = {path: 1 for path in paths.values()}
        self.assertEqual(dict(self.counts(before, middle)), expected)
        self.assertEqual(dict(self.counts(middle, end)), expected)
        threads = {c.thread for c in self.recorder.closed()}
        self.assertEqual(threads, {threading.get_ident()})  # CPU autograd runs on the caller
        self.assert_nothing_open()

    def test_siblings_reading_one_input_do_not_nest_in_backward(self):
        model = Stack()  # q, k, v read the same tensor; ReLU(inplace=True) follows a module
        x = torch.randn(3, 8, requires_grad=True)
        middle_before = self.recorder.mark_index()
        out = model(x).sum()
        middle = self.recorder.mark_index()
        out.backward()
        backward = self.recorder.closed(since=middle)
        forward_counts = self.counts(middle_before, middle)
        self.assertEqual(collections.Counter(c.path for c in backward), forward_counts)
        self.assertIn("Stack/blocks.0/attn/q", forward_counts)
        for block in ("blocks.0", "blocks.1"):
            spans = {c.path.rsplit("/", 1)[1]: (c.start, c.end) for c in backward
                     if c.path.startswith(f"Stack/{block}/attn/")}
            self.assertEqual(set(spans), {"q", "k", "v", "o"})
            ordered = sorted(spans.values())
            for (_, first_end), (second_start, _) in zip(ordered, ordered[1:]):
                self.assertLess(first_end, second_start, spans)  # disjoint, none inside another
        self.assertIsNotNone(x.grad)
        self.assert_nothing_open()

    def test_backward_on_another_thread_stays_on_that_thread(self):
        model = TinyLM()
        loss = model(torch.randint(0, 32, (2, 5))).sum()
        middle = self.recorder.mark_index()
        worker = threading.Thread(target=loss.backward)
        worker.start()
        worker.join()
        backward = self.recorder.closed(since=middle)
        self.assertEqual({c.thread for c in backward}, {worker.ident})
        self.assertEqual(len(backward), len(self.recorder.closed(until=middle)))
        phases = self.recorder.closed(domain="flopscope", since=middle)
        self.assertIn(("step/backward", worker.ident), {(p.path, p.thread) for p in phases})
        self.assert_nothing_open()

    def test_autograd_grad_closes_its_ranges_when_the_pass_ends(self):
        # torch.autograd.grad is not wrapped: the engine's end-of-pass callback closes the root's
        # range (its token input has no gradient hook to close it).
        model = TinyLM()
        loss = model(torch.randint(0, 32, (2, 5))).sum()
        middle = self.recorder.mark_index()
        torch.autograd.grad(loss, list(model.parameters()))
        self.assertIn("TinyLM", self.counts(since=middle))
        self.assert_nothing_open()

    def test_no_grad_forward_has_no_backward_machinery(self):
        model = TinyLM()  # in training mode: eval would take the fused encoder fast path
        with torch.no_grad():
            model(torch.randint(0, 32, (2, 5)))
        phases = [c.path for c in self.recorder.closed(domain="flopscope")]
        self.assertEqual(phases, ["forward"])  # closes with the root; no step without training
        self.assertIn("TinyLM/encoder/layers.1/norm2", self.counts())
        self.assert_nothing_open()

    def test_gradients_are_unchanged(self):
        torch.manual_seed(1)
        plain = Stack()
        hooked = Stack()
        hooked.load_state_dict(plain.state_dict())
        x = torch.randn(4, 8)
        self.profiler.disable()
        plain(x).square().sum().backward()
        self.assertTrue(self.profiler.enable(backend=self.recorder.backend()))
        hooked(x).square().sum().backward()
        for (name, a), (_, b) in zip(plain.named_parameters(), hooked.named_parameters()):
            self.assertTrue(torch.equal(a.grad, b.grad), name)


class FailureAndLifecycleTest(ModuleRangesTestCase):
    def test_forward_that_raises_is_closed_when_the_step_ends(self):
        class Faulty(nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = nn.Linear(4, 4)

            def forward(self, x):
                self.inner(x)
                raise RuntimeError("boom")

        faulty = Faulty()
        with self.assertRaises(RuntimeError):
            faulty(torch.randn(2, 4))
        model = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.randn(2, 4)).sum().backward()
        optimizer.step()
        self.assert_nothing_open()

    def test_internal_error_turns_hooks_off_and_training_goes_on(self):
        recorder = Recorder()
        backend = recorder.backend()

        def broken_push(name):
            raise ValueError("broken backend")

        backend.push = broken_push
        self.profiler.disable()
        self.assertTrue(self.profiler.enable(backend=backend))
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            out = TinyLM()(torch.randint(0, 32, (2, 5))).sum()
            out.backward()
        self.assertFalse(self.profiler.enabled)
        self.assertIn("internal error, PyTorch hooks turned off", stderr.getvalue())
        self.assertIn("broken backend", stderr.getvalue())

    def test_disable_removes_every_hook(self):
        backward_wrapper = torch.autograd.backward
        step_wrapper = torch.optim.SGD.step
        self.profiler.disable()
        self.assertIsNot(torch.autograd.backward, backward_wrapper)
        self.assertIsNot(torch.optim.SGD.step, step_wrapper)
        before = self.recorder.mark_index()
        model = nn.Linear(2, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model(torch.randn(1, 2)).sum().backward()
        optimizer.step()
        self.assertEqual(self.recorder.mark_index(), before)


class NamesAndMetadataTest(ModuleRangesTestCase):
    def test_data_parallel_wrapper_is_seen_through(self):
        recorder = self.recorder
        wrapper_started = []

        class DistributedDataParallel(nn.Module):  # named like torch's, as the registry matches
            def __init__(self, module):
                super().__init__()
                self.module = module

            def forward(self, *args):
                wrapper_started.append(recorder.mark_index())  # DDP syncs buffers here
                return self.module(*args)

        model = TinyLM()
        DistributedDataParallel(model)(torch.randint(0, 32, (2, 5))).sum().backward()
        roots = {c.path.split("/")[0] for c in self.recorder.closed()}
        self.assertEqual(roots, {"TinyLM"})
        forward = self.recorder.closed(domain="flopscope")[0]
        self.assertEqual(forward.path, "step/forward")
        self.assertLess(forward.start, wrapper_started[0])  # the wrapper's work is forward too

    def test_params_and_class_announced_once_per_path(self):
        model = TinyLM()
        tokens = torch.randint(0, 32, (2, 5))
        paths = expected_paths(model, "TinyLM", called_module_names(model, tokens))
        for _ in range(2):
            model(tokens).sum().backward()
        marks = self.recorder.marks()
        self.assertEqual(len(marks), len(set(marks)))
        modules = dict(model.named_modules())
        for name, path in paths.items():
            count = sum(p.numel() for p in modules[name].parameters())
            self.assertIn(f"params {path}={count}", marks)
            self.assertIn(f"class {path}={type(modules[name]).__name__}", marks)
        self.assertIn("params TinyLM/encoder/layers.0/self_attn=1088", marks)  # with out_proj


if __name__ == "__main__":
    unittest.main()
