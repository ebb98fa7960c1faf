"""Steps and phases: ranges `step`, `forward`, `backward`, `optimizer` in the `flopscope` domain.

Found automatically on each thread:
- `forward` opens when a root model's forward starts (no module open) and, with gradients on,
  lasts until backward starts, so the loss computed after the model belongs to it; under
  no_grad it closes with that root's forward.
- `backward` spans the outermost backward() call; `optimizer` the outermost optimizer step().
- `step` opens with the first training forward (or backward, or optimizer step) after the last
  step ended, and ends when the optimizer step ends. Further optimizer steps right after it
  (a second optimizer, before any forward or backward) get their `optimizer` range outside any
  step, so that they open no step of their own. With gradient accumulation a step holds
  several forward/backward pairs. Forwards under no_grad open no step; a job that runs forward
  with gradients on but never steps an optimizer has one step, closed at exit.

`step()` and `phase(name)` are context managers for code that knows better. Once `step()` is
used on a thread, steps there are only the user's. While a user's `phase()` is open nothing is
opened automatically; a step end that falls inside it happens when it exits.

The NVTX stack of the `flopscope` domain is per thread: each thread has its own open list here
and pops only what it pushed, innermost first.
"""

import contextlib
import threading

STEP = "step"
FORWARD = "forward"
BACKWARD = "backward"
OPTIMIZER = "optimizer"


class _Open:
    __slots__ = ("name", "auto", "closes_with_root")

    def __init__(self, name, auto, closes_with_root=False):
        self.name = name
        self.auto = auto
        self.closes_with_root = closes_with_root


class _PhaseState:
    __slots__ = ("open", "manual_steps", "manual_phases", "step_end_pending", "after_optimizer")

    def __init__(self):
        self.open = []
        self.manual_steps = False
        self.manual_phases = 0
        self.step_end_pending = False
        self.after_optimizer = False  # an optimizer step ended the step; no forward since


class PhaseTracker:
    """Pushes and pops phase ranges through `backend`; `on_new_step` runs when a step opens
    (the announcer checks the parallel layout there), `on_step_closing` just before a step
    range closes and when a root forward ends with no step open (the estimate is announced
    there, inside the step), `on_step_end` after a step closed."""

    def __init__(self, backend, on_new_step=lambda: None, on_step_end=lambda: None,
                 on_step_closing=lambda: None):
        self._backend = backend
        self._on_new_step = on_new_step
        self._on_step_end = on_step_end
        self._on_step_closing = on_step_closing
        self._local = threading.local()
        # The memory ledger (memory_ledger.MemoryLedger) when on: told each phase boundary.
        self.memory = None

    def _state(self):
        try:
            return self._local.state
        except AttributeError:
            self._local.state = _PhaseState()
            return self._local.state

    def open_names(self):
        """The phase ranges open on this thread, outermost first."""
        return [entry.name for entry in self._state().open]

    # ---- automatic ----

    def root_forward_begin(self, training):
        state = self._state()
        if state.manual_phases:
            return
        top = self._top_auto_phase(state)
        if top is not None:
            return  # a forward inside forward (the loss), backward (recompute) or optimizer
        if training:
            state.after_optimizer = False
            self._ensure_step(state)
        self._push(state, _Open(FORWARD, auto=True, closes_with_root=not training))

    def root_forward_end(self):
        state = self._state()
        top = self._top_auto_phase(state)
        if not any(entry.name == STEP for entry in state.open):
            self._on_step_closing()
        if top is not None and top.name == FORWARD and top.closes_with_root:
            self._pop(state)

    def backward_begin(self):
        """Returns whether a `backward` range was opened (pass it to backward_end)."""
        state = self._state()
        if state.manual_phases:
            return False
        self._close_auto_phase(state)
        state.after_optimizer = False
        self._ensure_step(state)
        self._push(state, _Open(BACKWARD, auto=True))
        return True

    def backward_end(self, opened):
        state = self._state()
        top = self._top_auto_phase(state)
        if opened and top is not None and top.name == BACKWARD:
            self._pop(state)

    def optimizer_begin(self):
        """Returns whether an `optimizer` range was opened (pass it to optimizer_end)."""
        state = self._state()
        if state.manual_phases:
            return False
        self._close_auto_phase(state)
        if not state.after_optimizer:
            self._ensure_step(state)
        self._push(state, _Open(OPTIMIZER, auto=True))
        return True

    def optimizer_end(self, opened):
        state = self._state()
        top = self._top_auto_phase(state)
        if opened and top is not None and top.name == OPTIMIZER:
            self._pop(state)
        if state.manual_phases:
            state.step_end_pending = True
        else:
            self._end_auto_step(state)

    # ---- by hand ----

    @contextlib.contextmanager
    def step(self):
        state = self._state()
        state.manual_steps = True
        while state.open and state.open[-1].auto:
            self._pop(state)
        self._on_new_step()
        depth = self._push(state, _Open(STEP, auto=False))
        try:
            yield
        finally:
            self._on_step_closing()
            self._pop_to(state, depth)
            self._on_step_end()

    @contextlib.contextmanager
    def phase(self, name):
        state = self._state()
        self._close_auto_phase(state)
        if state.manual_phases == 0:
            self._ensure_step(state)
        state.manual_phases += 1
        depth = self._push(state, _Open(str(name), auto=False))
        try:
            yield
        finally:
            self._pop_to(state, depth)
            state.manual_phases -= 1
            if state.manual_phases == 0 and state.step_end_pending:
                state.step_end_pending = False
                self._end_auto_step(state)

    def close_all(self):
        """Closes every phase range open on this thread (exit, disable)."""
        state = self._state()
        if state.open:
            self._on_step_closing()
        self._pop_to(state, 0)

    # ---- internals ----

    @staticmethod
    def _top_auto_phase(state):
        if state.open and state.open[-1].auto and state.open[-1].name != STEP:
            return state.open[-1]
        return None

    def _close_auto_phase(self, state):
        if self._top_auto_phase(state) is not None:
            self._pop(state)

    def _ensure_step(self, state):
        if state.manual_steps or any(entry.name == STEP for entry in state.open):
            return
        self._on_new_step()
        self._push(state, _Open(STEP, auto=True))

    def _end_auto_step(self, state):
        if state.manual_steps:
            return
        if state.open and state.open[-1].auto and state.open[-1].name == STEP:
            self._on_step_closing()
            self._pop(state)
            state.after_optimizer = True
            self._on_step_end()

    def _push(self, state, entry):
        if self.memory is not None:
            self.memory.phase_boundary(entry.name, opening=True)
        self._backend.phase_push(entry.name)
        state.open.append(entry)
        return len(state.open) - 1

    def _pop(self, state):
        if self.memory is not None:
            self.memory.phase_boundary(state.open[-1].name, opening=False)
        self._backend.phase_pop()
        state.open.pop()

    def _pop_to(self, state, size):
        while len(state.open) > size:
            self._pop(state)
