"""An NvtxBackend that records every call with its thread, and replays them the way NVTX would
(one push/pop stack per thread and domain), so tests can check pairing and nesting."""

import threading

from flopscope_torch.nvtx_backend import NvtxBackend

MODULES = ""
PHASES = "flopscope"


class Closed:
    """A range that was pushed and popped: its path on its thread's stack and event indices."""

    def __init__(self, thread, domain, path, start, end):
        self.thread = thread
        self.domain = domain
        self.path = path
        self.start = start
        self.end = end

    def __repr__(self):
        domain = self.domain or "default"
        return f"Closed({domain}:{self.path} on {self.thread}, {self.start}-{self.end})"


class Recorder:
    def __init__(self):
        self.events = []  # (thread, op, domain, text)
        self._lock = threading.Lock()

    def _record(self, op, domain, text=None):
        with self._lock:
            self.events.append((threading.get_ident(), op, domain, text))

    def backend(self):
        return NvtxBackend(
            push=lambda name: self._record("push", MODULES, name),
            pop=lambda: self._record("pop", MODULES),
            encode=lambda name: name,
            phase_push=lambda name: self._record("push", PHASES, name),
            phase_pop=lambda: self._record("pop", PHASES),
            mark=lambda text: self._record("mark", PHASES, text),
            description="recorder")

    def mark_index(self):
        """The index the next event will get: use it to split events into before/after."""
        with self._lock:
            return len(self.events)

    def replay(self):
        """(closed ranges, ranges still open) per NVTX's rules; raises AssertionError on a pop
        with nothing open on that thread and domain."""
        stacks = {}
        closed = []
        for index, (thread, op, domain, text) in enumerate(self.events):
            stack = stacks.setdefault((thread, domain), [])
            if op == "push":
                stack.append((text, index))
            elif op == "pop":
                if not stack:
                    raise AssertionError(f"pop with nothing open on thread {thread} "
                                         f"domain {domain!r} at event {index}")
                path = "/".join(name for name, _ in stack)
                closed.append(Closed(thread, domain, path, stack[-1][1], index))
                stack.pop()
        still_open = {key: [name for name, _ in stack] for key, stack in stacks.items() if stack}
        return closed, still_open

    def closed(self, domain=MODULES, since=0, until=None):
        closed, _ = self.replay()
        until = len(self.events) if until is None else until
        return [c for c in closed if c.domain == domain and since <= c.start and c.end < until]

    def marks(self):
        return [text for _, op, _, text in self.events if op == "mark"]
