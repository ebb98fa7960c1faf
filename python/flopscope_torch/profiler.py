"""The process-wide switch: builds the pieces, installs and removes every hook."""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import Any, Dict, Mapping, Optional

from .metadata_announcer import BatchSize, MetadataAnnouncer
from .module_registry import ModuleRegistry
from .nvtx_backend import NvtxBackend, NvtxUnavailable, load_backend, tool_attached
from .parallel_layout import ParallelLayout


def _warn(message: str) -> None:
    print(f"flopscope_torch: {message}", file=sys.stderr, flush=True)


class Profiler:
    """One per process (see flopscope_torch.enable). Not thread-safe to enable/disable from two
    threads at once; the hooks themselves run on any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # enable/disable/fail may race (training vs autograd thread)
        self.backend: Optional[NvtxBackend] = None
        # The pieces enable() builds (their modules import torch, so they stay untyped here).
        self.announcer: Any = None
        self.batch: Any = None
        self.phases: Any = None
        self.module_hooks: Any = None
        self.training_hooks: Any = None
        self.memory: Any = None
        self.failed = False
        self._layout_sources: Dict[str, ParallelLayout] = {}
        self._atexit_registered = False

    @property
    def enabled(self) -> bool:
        return self.module_hooks is not None and self.module_hooks.active

    def enable(self, force: bool = False, backend: Optional[NvtxBackend] = None,
               environ: Mapping[str, str] = os.environ) -> bool:
        """Installs the hooks; returns whether they are on. Without an NVTX tool listening
        (flopscope's injector, Nsight Systems) nothing would be recorded, so nothing is installed
        unless `force`."""
        with self._lock:
            if self.enabled:
                return True
            if not force and backend is None and not tool_attached(environ):
                return False
            if backend is None:
                try:
                    backend = load_backend(environ)
                except NvtxUnavailable as error:
                    _warn(f"PyTorch hooks off: {error}")
                    return False
            self._build(backend, environ)
            if self.batch.problem:
                _warn(self.batch.problem)
            self.module_hooks.install()
            self.training_hooks.install()
            self.failed = False
            if not self._atexit_registered:
                atexit.register(self._at_exit)
                self._atexit_registered = True
            return True

    def disable(self) -> None:
        """Removes the hooks and closes what is open on the calling thread."""
        with self._lock:
            self._teardown()

    def fail(self, error: BaseException) -> None:
        """An internal error inside a hook: say it once, turn everything off, let the job go on."""
        with self._lock:
            if self.failed:
                return
            self.failed = True
            _warn(f"internal error, PyTorch hooks turned off: {type(error).__name__}: {error}")
            self._teardown()

    def set_parallel_layout(self, layout: ParallelLayout) -> None:
        self._layout_sources["explicit"] = layout
        if self.enabled:
            self.announcer.check_layout()

    def announce_batch_size(self, batch_size: int) -> None:
        if self.enabled:
            self.batch.explicit(batch_size, "announce_batch_size")

    def _build(self, backend: NvtxBackend, environ: Mapping[str, str]) -> None:
        # Imported here: importing flopscope_torch must not import torch (sitecustomize runs it in
        # every Python process of the job, most of which never touch torch).
        from . import flop_estimate  # pylint: disable=import-outside-toplevel
        from . import memory_ledger  # pylint: disable=import-outside-toplevel
        from .module_hooks import ModuleHooks  # pylint: disable=import-outside-toplevel
        from .phase_tracker import PhaseTracker  # pylint: disable=import-outside-toplevel
        from .training_hooks import TrainingHooks  # pylint: disable=import-outside-toplevel

        self.backend = backend
        self.announcer = MetadataAnnouncer(backend, self._layout_sources)
        self.batch = BatchSize(self.announcer, environ)
        registry = ModuleRegistry()
        self.phases = PhaseTracker(backend, on_new_step=self.announcer.check_layout,
                                   on_step_end=self._close_thread_ranges,
                                   on_step_closing=self._flush_estimate)
        self.module_hooks = ModuleHooks(backend, registry, self.phases, self.announcer, self.fail,
                                        batch=self.batch)
        if flop_estimate.estimate_enabled(environ):
            self.module_hooks.estimate = flop_estimate.FlopEstimate(self.module_hooks.ranges,
                                                                    backend.mark)
        self.training_hooks = TrainingHooks(self.phases, self.module_hooks, self.fail)
        if memory_ledger.enabled(environ):
            self.memory = memory_ledger.MemoryLedger(backend.mark, environ)
            self.module_hooks.memory = self.training_hooks.memory = self.memory
            self.phases.memory = self.memory

    def _flush_estimate(self) -> None:
        estimate = self.module_hooks.estimate if self.module_hooks is not None else None
        if estimate is not None:
            try:
                estimate.flush()
            except Exception as error:  # pylint: disable=broad-except
                self.fail(error)

    def _close_thread_ranges(self) -> None:
        # At a step's end no module range of this thread should be open; any still open belongs
        # to a forward that raised (its post hook never ran).
        self.module_hooks.ranges.close_all()
        if self.memory is not None:
            try:
                self.memory.step_ended()
            except Exception as error:  # pylint: disable=broad-except
                self.memory.close()
                self.memory = self.module_hooks.memory = self.training_hooks.memory = None
                self.phases.memory = None
                self.announcer.problem_once("memory ledger off", error)

    def _teardown(self) -> None:
        if self.module_hooks is None:
            return
        self.module_hooks.uninstall()
        self.training_hooks.uninstall()
        if self.memory is not None:
            self.memory.close()  # its per-module hooks, when a measured forward is running
        try:
            self.module_hooks.ranges.close_all()
            self.phases.close_all()
        except Exception:  # pylint: disable=broad-except
            pass  # closing is best effort; the injector counts what stays open

    def _at_exit(self) -> None:
        # The main thread's ranges close before the injector's exit flush counts them unclosed.
        if self.enabled:
            self.disable()


def make_layout(tp: int, pp: int, dp: Optional[int], tp_rank: Optional[int],
                pp_rank: Optional[int], dp_rank: Optional[int], world_size: int,
                rank: int) -> ParallelLayout:
    """A ParallelLayout from what set_parallel_layout was given (see there)."""
    if dp is not None and tp_rank is not None and pp_rank is not None and dp_rank is not None:
        layout = ParallelLayout(tp, pp, dp, tp_rank, pp_rank, dp_rank, "explicit")
    else:
        layout = ParallelLayout.from_sizes(tp, pp, world_size, rank, "explicit")
    if not layout.is_consistent():
        raise ValueError(f"inconsistent parallel layout: {layout.mark_text()}")
    return layout
