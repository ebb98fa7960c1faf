"""Where a training step's phases are found: the backward call and the optimizer step.

- `torch.autograd.backward` (what `loss.backward()`, DeepSpeed and Megatron call) is replaced by a
  wrapper that brackets the outermost call on a thread with the `backward` phase and, when it
  returns, closes the module backward ranges left open on that thread.
- `torch.compile` is wrapped so that Dynamo leaves the module hooks out of its graphs (see
  ModuleHooks.hide_from_dynamo).
- Every torch.optim.Optimizer subclass gets its `step` wrapped at class level (the classes that
  exist now, and each new class when its first instance is built), so `optimizer.step()` is the
  `optimizer` phase and ends the step. Nested steps (an optimizer calling another's step) count
  once. The optimizer stepped is told to the memory ledger, when it is on (memory_ledger).

The wrappers call the original whatever happens and never raise on their own.
"""

import functools
import threading

import torch

_WRAPPED_MARK = "_flopscope_original"


class _Depth(threading.local):
    def __init__(self):
        super().__init__()
        self.backward = 0
        self.optimizer = 0


class TrainingHooks:
    def __init__(self, phases, module_hooks, fail):
        self._phases = phases
        self._module_hooks = module_hooks
        self._fail = fail
        self._depth = _Depth()
        self._original_backward = None
        self._original_optimizer_init = None
        self._original_compile = None
        self._wrapped_classes = []
        self.active = False
        # The memory ledger (memory_ledger.MemoryLedger) when on: told each optimizer stepped.
        self.memory = None

    def install(self):
        self._original_backward = torch.autograd.backward
        torch.autograd.backward = self._wrap_backward(self._original_backward)
        self._original_optimizer_init = torch.optim.Optimizer.__init__
        torch.optim.Optimizer.__init__ = self._wrap_optimizer_init(self._original_optimizer_init)
        for cls in self._optimizer_classes():
            self._wrap_step(cls)
        self._original_compile = getattr(torch, "compile", None)  # torch 2
        if self._original_compile is not None:
            torch.compile = self._wrap_compile(self._original_compile)
        self.active = True

    def uninstall(self):
        self.active = False
        if self._original_backward is not None:
            torch.autograd.backward = self._original_backward
            torch.optim.Optimizer.__init__ = self._original_optimizer_init
        if self._original_compile is not None:
            torch.compile = self._original_compile
            self._original_compile = None
        for cls in self._wrapped_classes:
            step = cls.__dict__.get("step")
            original = getattr(step, _WRAPPED_MARK, None)
            if original is not None:
                cls.step = original
        self._wrapped_classes = []

    @staticmethod
    def _optimizer_classes():
        pending, seen = [torch.optim.Optimizer], []
        while pending:
            cls = pending.pop()
            seen.append(cls)
            pending.extend(sub for sub in cls.__subclasses__() if sub not in seen)
        return seen

    # ---- backward ----

    def _wrap_backward(self, original):
        @functools.wraps(original)
        def backward(*args, **kwargs):
            if not self.active or self._depth.backward:
                return original(*args, **kwargs)
            opened = self._guarded(self._phases.backward_begin, default=False)
            self._depth.backward += 1
            try:
                return original(*args, **kwargs)
            finally:
                self._depth.backward -= 1
                self._guarded(self._module_hooks.end_backward_on_this_thread)
                self._guarded(lambda: self._phases.backward_end(opened))

        return backward

    # ---- torch.compile ----

    def _wrap_compile(self, original):
        """torch.compile (also what nn.Module.compile calls) first asks Dynamo to leave the
        module hooks out of what it traces (ModuleHooks.hide_from_dynamo)."""
        @functools.wraps(original)
        def compile_(*args, **kwargs):
            if self.active:
                self._guarded(self._module_hooks.hide_from_dynamo)
            return original(*args, **kwargs)

        return compile_

    # ---- optimizer ----

    def _wrap_optimizer_init(self, original):
        @functools.wraps(original)
        def init(optimizer, *args, **kwargs):
            original(optimizer, *args, **kwargs)
            if self.active:
                self._guarded(lambda: self._wrap_step(type(optimizer)))

        return init

    def _wrap_step(self, cls):
        step = cls.__dict__.get("step")
        if step is None or not callable(step) or getattr(step, _WRAPPED_MARK, None) is not None:
            return
        hooks = self

        @functools.wraps(step)
        def wrapped_step(optimizer, *args, **kwargs):
            if not hooks.active or hooks._depth.optimizer:
                return step(optimizer, *args, **kwargs)
            opened = hooks._guarded(hooks._phases.optimizer_begin, default=False)
            hooks._depth.optimizer += 1
            try:
                return step(optimizer, *args, **kwargs)
            finally:
                hooks._depth.optimizer -= 1
                if hooks.memory is not None:  # before the step ends, where the ledger measures
                    hooks._guarded(lambda: hooks.memory.optimizer_stepped(optimizer))
                hooks._guarded(lambda: hooks._phases.optimizer_end(opened))

        setattr(wrapped_step, _WRAPPED_MARK, step)
        cls.step = wrapped_step
        self._wrapped_classes.append(cls)

    def _guarded(self, action, default=None):
        try:
            return action()
        except Exception as error:  # pylint: disable=broad-except
            self._fail(error)
            return default
