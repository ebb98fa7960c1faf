"""Facts announced through `key=value` marks in the `flopscope` NVTX domain (the metadata channel
of docs/architecture.md; every key is listed in docs/marks.md):

- the module tree of each root model, once, when its root first runs, in model order:
  `module <path>=<index> <parent path>`, `class <path>=<ClassName>`, `params <path>=<n>` and
  `extra_repr <path>=<text>`, containers and modules that never run included;
- `class`/`params` of a range path outside any announced tree, once, after its first forward,
  and `range_module <range path>=<model path>` where a module ran under another path;
- `params_shard <path>=<n> <rank>` beside `params` where the rank holds less of a module than
  its params (FSDP2's shards: sharded_params);
- `parallel tp=.. pp=.. dp=.. tp_rank=.. pp_rank=.. dp_rank=..`: the layout (parallel_layout);
- `batch_size=<n>` with `batch_size_source=<where from>` (see BatchSize);
- `estimated_flops <path>=<n>` / `estimated_macs <path>=<n>` (flop_estimate);
- `deepspeed_differs <path>=<why>`: where DeepSpeed's profiler prints other FLOPs for a module
  than the estimate, and why (deepspeed_differences), with the tree.
"""

import os
import sys
import threading

from . import deepspeed_differences
from . import sharded_params
from .parallel_layout import discover_layout

BATCH_SIZE_ENV = "FLOPSCOPE_BATCH_SIZE"


class MetadataAnnouncer:
    """Sends the marks through `backend.mark`; remembers what was said, so that each fact is
    said once."""

    def __init__(self, backend, layout_sources=None):
        self._backend = backend
        self._announced_paths = set()
        self._layout_text = None
        self._problems = set()  # what problem_once already said
        self._lock = threading.Lock()  # the layout check may run on several training threads
        self.layout_sources = layout_sources if layout_sources is not None else {}

    def announce_tree(self, tree, modules):
        """The whole tree of a root model (`modules`: the module objects, in `tree.infos`'
        order). Parameters are counted here, before the first forward: a lazy module's count
        follows after its forward (module_seen)."""
        mark = self._backend.mark
        rank = self._read_sharding(tree, modules[0] if modules else None)
        for index, (info, module) in enumerate(zip(tree.infos, modules)):
            path = info.model_path
            parent = info.parent_model_path
            mark(f"module {path}={index}" if parent is None else
                 f"module {path}={index} {parent}")
            mark(f"class {path}={info.class_name}")
            count, held = self._count(info, module)
            if count is not None:
                mark(f"params {path}={count}")
                self._announced_paths.add(path)
                if held is not None and held != count:  # an FSDP2 shard (sharded_params)
                    mark(f"params_shard {path}={held}" + ("" if rank is None else f" {rank}"))
            extra = _extra_repr(module)
            if extra:
                mark(f"extra_repr {path}={extra}")

    def _read_sharding(self, tree, root):
        """Sets tree.sharding from the root's DTensor parameters and the layout source "dtensor"
        from their meshes (sharded_params); returns this rank (None when unknown) where there
        are some. A failure is said once and leaves the plain counts (numel())."""
        try:
            tree.sharding = sharded_params.scan(root) if root is not None else None
            if tree.sharding is None:
                return None
            rank, world_size = _rank_and_world_size()
            layout = tree.sharding.layout(rank or 0, world_size or 1)
            if layout is not None and layout.is_consistent():
                self.layout_sources["dtensor"] = layout
            return rank
        except Exception as error:  # pylint: disable=broad-except
            tree.sharding = None
            self.problem_once("sharded (DTensor) parameters not read", error)
            return None

    def _count(self, info, module):
        """(params, held) of one module; where counting a sharded parameter fails, said once,
        the module's plain count (numel())."""
        try:
            return info.parameter_count(module), info.held_count(module)
        except Exception as error:  # pylint: disable=broad-except
            self.problem_once("sharded (DTensor) parameters not counted", error)
        try:
            info.forget_counts()
            from .module_registry import count_parameters  # pylint: disable=import-outside-toplevel
            return count_parameters(module), None
        except Exception as error:  # pylint: disable=broad-except
            self.problem_once("parameters not counted", error)
            return None, None

    def problem_once(self, what, error):
        """A failure of the hooks' reading of the job, said once on stderr; the job runs on."""
        with self._lock:
            if what in self._problems:
                return
            self._problems.add(what)
        print(f"flopscope_torch: {what} ({type(error).__name__}: {error}); the job runs on",
              file=sys.stderr, flush=True)

    def announce_deepspeed_differences(self, tree, modules, counted):
        """`deepspeed_differs <path>=<why>` for each module of the tree where DeepSpeed's
        profiler prints other FLOPs than the estimate, and why (deepspeed_differences)."""
        for info, module in zip(tree.infos, modules):
            if module is None:
                continue
            reasons = deepspeed_differences.reasons(module, counted)
            if reasons:  # one mark per path: the last one of a path is the one kept
                why = encode_mark_value("; ".join(reasons))
                self._backend.mark(f"deepspeed_differs {info.model_path}={why}")

    def module_seen(self, path, info, module):
        """After the first forward of each range path: the facts the tree did not already give
        (a module outside any tree, lazy parameters, a module run under an unexpected path)."""
        if path in self._announced_paths:
            return
        self._announced_paths.add(path)
        if info.model_path is not None and info.model_path != path and not any(
                alias.model_path == path for alias in info.aliases):  # ran as an alias row
            self._backend.mark(f"range_module {path}={info.model_path}")
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


def _rank_and_world_size():
    """torch.distributed's rank and world size once initialised, else $RANK and $WORLD_SIZE
    (None where neither says)."""
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        return distributed.get_rank(), distributed.get_world_size()
    rank, world_size = os.environ.get("RANK", ""), os.environ.get("WORLD_SIZE", "")
    return (int(rank) if rank.isdigit() else None,
            int(world_size) if world_size.isdigit() else None)


def _extra_repr(module):
    """`module.extra_repr()` (DeepSpeed prints it after the figures) on one line, with `%` and
    `=` percent-encoded (`%25`, `%3D`): a mark is split at its last `=`. "" when it fails."""
    try:
        text = module.extra_repr()
    except Exception:  # pylint: disable=broad-except
        return ""
    return encode_mark_value(" ".join(str(text).split("\n")).strip())


def encode_mark_value(text):
    return text.replace("%", "%25").replace("=", "%3D")


def decode_mark_value(text):
    return text.replace("%3D", "=").replace("%25", "%")


class BatchSize:
    """Samples per step of this rank, announced once as `batch_size=<n>`: from
    $FLOPSCOPE_BATCH_SIZE when set, else from announce_batch_size(), else the first dimension of
    the first tensor given to the first root model that has parameters (a loss module has none).
    An explicit value announced after the automatic one replaces it (the last mark wins)."""

    def __init__(self, announcer, environ=os.environ):
        self._announcer = announcer
        self.pending = True  # the automatic detection still has to look
        self.problem = None
        text = environ.get(BATCH_SIZE_ENV)
        if text is not None:
            value = _positive_int(text)
            if value is None:
                self.problem = f"{BATCH_SIZE_ENV}={text!r} is not a positive integer: ignored"
            else:
                self.explicit(value, BATCH_SIZE_ENV)

    def explicit(self, value, source):
        self.pending = False
        self._announcer.announce("batch_size", value)
        self._announcer.announce("batch_size_source", source)

    def observe_root(self, info, module, inputs):
        """Called at a root model's forward while `pending`."""
        count = info.parameter_count(module)
        if not count:
            return
        self.pending = False
        tensor = _first_tensor(inputs)
        if tensor is not None and tensor.dim() >= 1 and tensor.shape[0] > 0:
            self._announcer.announce("batch_size", int(tensor.shape[0]))
            self._announcer.announce("batch_size_source",
                                     f"first dimension of {info.model_path}'s first input")


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value > 0 else None


def _first_tensor(value, depth=0):
    import torch  # pylint: disable=import-outside-toplevel
    if isinstance(value, torch.Tensor):
        return value
    if depth >= 2:
        return None
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        for item in value[:16]:
            found = _first_tensor(item, depth + 1)
            if found is not None:
                return found
    return None
