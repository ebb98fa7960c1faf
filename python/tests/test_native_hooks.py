"""flopscope_torch._native (native/fast_hooks.cc) against the pure-Python hooks it speeds up: the
same NVTX calls in the same order, backward entries reused, errors handed to Profiler.fail.
The whole suite also runs with FLOPSCOPE_TORCH_NATIVE=0 (ctest flopscope_torch_unittest_python)."""

import contextlib
import io
import os
import unittest
from unittest import mock

import torch
from torch import nn

from flopscope_torch import nvtx_backend
from flopscope_torch.profiler import Profiler
from models import Stack, TinyLM
from recording_backend import Recorder

NATIVE = nvtx_backend.load_native()
SKIP_REASON = ("flopscope_torch._native is not built for this Python (python3-dev) or "
               "FLOPSCOPE_TORCH_NATIVE=0")


class Switch(nn.Module):
    """Calls its children in a different order and a different number of times per step, with
    a tuple output, a dict input and a module called outside its parent."""

    def __init__(self, shared):
        super().__init__()
        self.a = nn.Linear(6, 6)
        self.b = nn.Linear(6, 6)
        self.shared = shared

    def forward(self, x, extra):
        if extra["flip"]:
            x = self.b(self.a(x))
        else:
            x = self.a(self.b(self.a(x)))
        return self.shared(x), x


class Tamper(nn.Module):
    """Puts a foreign object under the package's key in a tensor's hook dict when `tamper`."""

    def __init__(self, key):
        super().__init__()
        self.key = key
        self.tamper = False
        self.inner = nn.Linear(4, 4)
        self.after = nn.Linear(4, 4)

    def forward(self, x):
        y = self.inner(x)
        if self.tamper:
            # Callable (PyTorch calls it), without the GradEvents lists the hooks append to.
            y._backward_hooks[self.key] = lambda grad: None  # pylint: disable=protected-access
        return self.after(y)


def training_steps(model_factory, steps=3):
    """Records `steps` forward + backward passes of a fresh model (same seed) with the hooks on;
    returns the recorded NVTX events without thread ids."""
    torch.manual_seed(0)
    recorder = Recorder()
    profiler = Profiler()
    if not profiler.enable(backend=recorder.backend()):
        raise AssertionError("hooks did not turn on")
    try:
        run = model_factory()
        for step in range(steps):
            run(step)
        native = profiler.module_hooks.native is not None
    finally:
        profiler.disable()
    return [(op, domain, text) for _, op, domain, text in recorder.events], native


def tiny_lm():
    model = TinyLM()
    return lambda _step: model(torch.randint(0, 32, (2, 5))).logsumexp(-1).mean().backward()


def stack():
    model = Stack()
    return lambda _step: model(torch.randn(3, 8, requires_grad=True)).sum().backward()


def switch():
    shared = nn.Linear(6, 6)
    model = Switch(shared)

    def run(step):
        out, x = model(torch.randn(2, 6), {"flip": step % 2 == 1})
        (out.sum() + x.sum() + shared(x).sum()).backward()
    return run


@unittest.skipUnless(NATIVE, SKIP_REASON)
class NativeHooksTest(unittest.TestCase):
    def test_native_and_python_hooks_make_the_same_calls(self):
        for factory in (tiny_lm, stack, switch):
            with self.subTest(model=factory.__name__):
                native_events, native = training_steps(factory)
                with mock.patch.dict(os.environ, {nvtx_backend.NATIVE_ENV: "0"}):
                    python_events, python_native = training_steps(factory)
                self.assertTrue(native)
                self.assertFalse(python_native)
                self.assertGreater(len(native_events), 20)
                self.assertEqual(native_events, python_events)

    def test_backward_entries_are_made_once_and_reused(self):
        recorder = Recorder()
        profiler = Profiler()
        self.assertTrue(profiler.enable(backend=recorder.backend()))
        try:
            model = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))
            model(torch.randn(2, 4)).sum().backward()
            registry = profiler.module_hooks._registry  # pylint: disable=protected-access
            sites = [site for module in model for site in
                     registry.get(module)._sites.values()]  # pylint: disable=protected-access
            first = [site.back for site in sites]
            model(torch.randn(2, 4)).sum().backward()
            self.assertTrue(all(back is not None and back.backward for back in first), first)
            self.assertEqual([id(site.back) for site in sites], [id(back) for back in first])
        finally:
            profiler.disable()

    def test_an_internal_error_turns_the_hooks_off_and_the_job_goes_on(self):
        recorder = Recorder()
        profiler = Profiler()
        self.assertTrue(profiler.enable(backend=recorder.backend()))
        model = Tamper(profiler.module_hooks._hook_key)  # pylint: disable=protected-access
        model(torch.randn(2, 4)).sum().backward()  # the first call takes the Python path
        model.tamper = True  # the second reaches `after` on the fast path: a foreign hook
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            model(torch.randn(2, 4)).sum().backward()
        self.assertTrue(profiler.failed)
        self.assertFalse(profiler.enabled)
        self.assertIn("internal error, PyTorch hooks turned off: AttributeError", stderr.getvalue())
        _, still_open = recorder.replay()
        self.assertEqual({key: names for key, names in still_open.items() if key[1] == ""}, {})

    def test_nvtx_push_takes_bytes(self):
        NATIVE.nvtx_push(b"flopscope-test")
        NATIVE.nvtx_pop()  # no tool listens here: both are NVTX no-ops
        with self.assertRaises(TypeError):
            NATIVE.nvtx_push("text")

    def test_grad_events_belong_to_hooks(self):
        with self.assertRaises(TypeError):
            NATIVE.GradEvents(object())


if __name__ == "__main__":
    unittest.main()
