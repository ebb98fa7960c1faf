"""Facts announced through `key=value` marks in the `flopscope` NVTX domain (the metadata channel
of docs/architecture.md), each once per process unless it changes:

- `params <range path>=<n>`: sum(p.numel()) of the module and its submodules;
- `class <range path>=<ClassName>`: the module's class, as DeepSpeed's tree shows it;
- `parallel tp=.. pp=.. dp=.. tp_rank=.. pp_rank=.. dp_rank=..`: the layout (parallel_layout);
- `batch_size=<n>`: only when the job says so (announce_batch_size).
"""

import threading

from .parallel_layout import discover_layout


class MetadataAnnouncer:
    def __init__(self, backend, layout_sources=None):
        self._backend = backend
        self._seen_paths = set()
        self._layout_text = None
        self._lock = threading.Lock()  # the layout check may run on several training threads
        self.layout_sources = layout_sources if layout_sources is not None else {}

    def module_seen(self, path, info, module):
        """After a module's forward: announce its parameters and class the first time its range
        path is seen (after forward, so lazily built parameters exist)."""
        if path in self._seen_paths:
            return
        self._seen_paths.add(path)
        count = info.parameter_count(module)
        if count is not None:
            self._backend.mark(f"params {path}={count}")
        self._backend.mark(f"class {path}={info.class_name}")

    def check_layout(self):
        """Announces the parallel layout when it is known and differs from the last one."""
        layout = discover_layout(self.layout_sources)
        if layout is None:
            return
        text = layout.mark_text()
        with self._lock:
            if text == self._layout_text:
                return
            self._layout_text = text
        self._backend.mark(text)

    def announce(self, key, value):
        self._backend.mark(f"{key}={value}")
