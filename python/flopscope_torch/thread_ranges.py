"""Each thread's open module ranges, kept in step with that thread's NVTX stack.

NVTX push/pop ranges belong to the thread that pushed them. Forward ranges are pushed and popped
by the module hooks on the thread that runs forward. Backward ranges are pushed and popped on the
thread that runs the autograd engine for them (the caller's thread on CPU, one engine thread per
GPU), from gradient hooks. Every push and pop below goes through `ThreadRanges` of the calling
thread, so a pop always closes a range this very thread opened; a request to close a range that
lives on another thread is never turned into an NVTX pop here.

Backward ranges follow the forward call they mirror: pushing one first reopens the ancestors of
that forward call that are not open (so a backward path equals its forward path) and closes open
backward ranges that are not its ancestors (a sibling whose end was never observed).
"""

import threading


class Entry:
    """One open range: the module, its range path, the encoded name pushed, the entry that was
    open around it (forward ancestry) and whether it is a backward range. A forward Entry is
    made once per module and parent and reused by every later call (ModuleInfo.site), and so is
    its backward Entry under a given parent (`back`, made by the gradient hooks); `flops` and
    `macs` collect the estimate of its calls until the step's flush (flop_estimate)."""

    __slots__ = ("info", "path", "encoded", "parent", "backward", "source", "announced", "flops",
                 "macs", "back", "compiled")

    def __init__(self, info, path, encoded, parent, backward=False, source=None):
        self.info = info
        self.path = path
        self.encoded = encoded
        self.parent = parent
        self.backward = backward
        self.source = source  # a backward range's forward Entry
        self.announced = False  # the announcer has seen this forward site
        self.flops = 0
        self.macs = 0
        self.back = None  # the backward Entry last made for this forward one (module_hooks)
        self.compiled = False  # the range of a module torch.compile compiled (module_hooks)


def backward_entry(forward_entry, parent):
    """The backward Entry of `forward_entry` under `parent`: the one made last time when it was
    made under the same parent (the usual case, every step), else a new one, kept for next time."""
    back = forward_entry.back
    if back is None or back.parent is not parent:
        back = forward_entry.back = Entry(forward_entry.info, forward_entry.path,
                                          forward_entry.encoded, parent, True, forward_entry)
    return back


class ThreadState:
    """One thread's bookkeeping (a plain object, so another thread can flag it): `entries`
    mirrors the thread's NVTX default-domain stack as far as the package pushed it; `end_queued`
    says an end-of-backward callback is pending for it; `stale` says a finished backward pass
    left ranges here that the thread which finished it could not pop."""

    __slots__ = ("thread_id", "entries", "end_queued", "stale", "touched", "counted", "estimates",
                 "recompute")

    def __init__(self):
        self.thread_id = threading.get_ident()
        self.entries = []
        self.end_queued = False
        self.stale = False
        self.touched = []  # forward entries holding estimate figures not yet announced
        self.counted = []  # (entry, flops, macs) of each touched entry at the last flush
        self.estimates = {}  # range path -> (flops, macs) last announced from this thread
        # (info, forward site) of each forward recomputed in backward and still running
        # (activation checkpointing; module_hooks: no range opens for them)
        self.recompute = []


class ThreadRanges:
    """Push/pop of module ranges on the calling thread (see the module docstring)."""

    def __init__(self, backend):
        self._backend = backend
        self.local = threading.local()  # .state: the thread's ThreadState, once it has one

    def state(self):
        """The calling thread's ThreadState."""
        try:
            return self.local.state
        except AttributeError:
            self.local.state = ThreadState()
            return self.local.state

    def top(self):
        entries = self.state().entries
        return entries[-1] if entries else None

    # ---- forward ----

    def push_forward(self, info, path, encoded, parent):
        """Opens a forward range with a new Entry (the hooks reuse entries: push_entry)."""
        return self.push_entry(Entry(info, path, encoded, parent))

    def push_entry(self, entry):
        self._backend.push(entry.encoded)
        self.state().entries.append(entry)
        return entry

    def pop_forward(self, info):
        """Closes the innermost forward range of `info` and any range left open above it (a
        forward that raised skips its post hook); returns its entry, or None when it is not
        open on this thread."""
        entries = self.state().entries
        if entries:
            entry = entries[-1]
            if entry.info is info and not entry.backward:  # the usual case
                self._backend.pop()
                entries.pop()
                return entry
        for index in range(len(entries) - 1, -1, -1):
            if entries[index].info is info and not entries[index].backward:
                entry = entries[index]
                self._pop_to(entries, index)
                return entry
        return None

    # ---- backward ----

    def push_backward(self, forward_entry):
        """Opens the backward range of the forward call `forward_entry`."""
        state = self.state()
        if state.stale:
            self.close_backward()
        entries = state.entries
        if entries:
            top = entries[-1]
            # The usual case: the parent's backward range is the innermost one.
            if top.backward and forward_entry.parent is not None and (
                    top.source is forward_entry.parent):
                self._push_backward_entry(entries, forward_entry)
                return
        chain = []
        ancestor = forward_entry.parent
        while ancestor is not None and not ancestor.backward:
            chain.append(ancestor)
            ancestor = ancestor.parent
        chain.reverse()
        base = len(entries)
        while base > 0 and entries[base - 1].backward:
            base -= 1  # forward ranges below (a recomputing forward) are never touched
        kept = 0
        while (kept < len(chain) and base + kept < len(entries)
               and entries[base + kept].path == chain[kept].path):
            kept += 1
        self._pop_to(entries, base + kept)
        for ancestor in chain[kept:]:
            self._push_backward_entry(entries, ancestor)
        self._push_backward_entry(entries, forward_entry)

    def pop_backward(self, forward_entry):
        """Closes the backward range of `forward_entry`'s module and those opened inside it, when
        it is open on this thread; otherwise does nothing (already closed, or another thread's)."""
        entries = self.state().entries
        if entries and entries[-1].source is forward_entry:  # the usual case
            self._backend.pop()
            entries.pop()
            return
        path = forward_entry.path
        for index in range(len(entries) - 1, -1, -1):
            entry = entries[index]
            if not entry.backward:
                return
            if entry.path == path:
                self._pop_to(entries, index)
                return

    def close_backward(self):
        """Closes every backward range open on this thread (the end of a backward pass)."""
        state = self.state()
        entries = state.entries
        index = len(entries)
        while index > 0 and entries[index - 1].backward:
            index -= 1
        self._pop_to(entries, index)
        state.stale = False

    def close_all(self):
        """Closes every range the package opened on this thread."""
        state = self.state()
        self._pop_to(state.entries, 0)
        state.stale = False
        state.recompute.clear()

    # ---- internals ----

    def _push_backward_entry(self, entries, forward_entry):
        parent = entries[-1] if entries else None
        self._backend.push(forward_entry.encoded)
        entries.append(backward_entry(forward_entry, parent))

    def _pop_to(self, entries, size):
        pop = self._backend.pop
        while len(entries) > size:
            pop()
            entries.pop()
