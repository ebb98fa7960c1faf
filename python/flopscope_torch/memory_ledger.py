"""The memory ledger of a rank (docs/design/memory-ledger.md): the bytes its tensors hold, by
part, read from the tensors themselves, and its allocator's peaks on a GPU.

Parts, each storage counted once (by its device and data pointer), in this order, a storage
belonging to the first part that reaches it:
- params: the model's parameters: a DTensor's local shard (FSDP2, tensor parallelism), DeepSpeed
  ZeRO-3's partition (`ds_tensor`) beside the parameter's own (empty) data;
- grads: the parameters' `.grad` (a DTensor's local shard), and DeepSpeed's gradient partitions
  (the ZeRO optimizer's attributes whose name says `grad`);
- optimizer: the tensors of `optimizer.state`, and the optimizer's own parameters that are not
  the model's (DeepSpeed's fp32 master partitions, held by the inner optimizer it wraps);
- buckets: DeepSpeed's reduce buckets (`ipg`/`bucket` attributes); DDP's reducer keeps its buckets
  in C++ where Python cannot reach them: with `gradient_as_bucket_view` the grads are views of
  them (counted under grads, buckets 0), without it "not measured" (`-`).

When: at the end of the first step whose optimizer stepped (its states exist from then), then
every FLOPSCOPE_TORCH_MEMORY_EVERY steps (default 100), announced when a figure changed. On a GPU
(CUDA), each step's peak allocated and reserved memory, each phase's peak allocated
(torch.cuda.max_memory_* since the last phase boundary, then reset_peak_memory_stats) and what
the forward phase left allocated (activations kept for backward) are announced when they moved
by more than 1 % from the last announced; on the CPU the process's RSS
high-water mark is announced with the ledger, labelled as such (not tensor memory).

Marks (docs/marks.md): `memory_ledger <rank>=<word:value ...>` and `memory_peak <rank>=...`.
A failure while measuring turns the ledger off, said once on stderr (Profiler); the job goes on.
"""

import os
import sys
import time
import weakref

EVERY_ENV = "FLOPSCOPE_TORCH_MEMORY_EVERY"
SWITCH_ENV = "FLOPSCOPE_TORCH_MEMORY"
DEFAULT_EVERY = 100
PEAK_CHANGE = 0.01  # a peak is announced again when it moved by more than this fraction
_PHASES = ("forward", "backward", "optimizer")  # the phases whose peaks are kept
MAX_ROOTS = 64  # root modules with parameters kept (weakly) for the measurement

# Optimizer state tensors per parameter element that the formulas count (fp32 each), by class.
# DeepSpeed's own Adams keep Adam's two.
_STATES_PER_ELEMENT = {"Adam": 2, "AdamW": 2, "FusedAdam": 2, "DeepSpeedCPUAdam": 2,
                       "NAdam": 2, "RAdam": 2, "Adamax": 2, "Lamb": 2, "FusedLamb": 2,
                       "Adagrad": 1, "Adadelta": 2, "RMSprop": 1, "SGD": 1, "Rprop": 2}

_DTYPE_NAMES = {"torch.float32": "fp32", "torch.float16": "fp16", "torch.bfloat16": "bf16",
                "torch.float64": "fp64"}


def enabled(environ=os.environ):
    return environ.get(SWITCH_ENV, "1") != "0"


def _every(environ):
    text = environ.get(EVERY_ENV, "")
    return int(text) if text.isdigit() and int(text) > 0 else DEFAULT_EVERY


def _storage_key(tensor):
    """(key, bytes) of the storage under `tensor`: what it holds, views and padding included."""
    try:
        storage = tensor.untyped_storage()  # torch >= 2.0
    except AttributeError:
        storage = tensor._storage()  # torch 1.13 (storage() would build a TypedStorage)
    return (tensor.get_device(), storage.data_ptr()), storage.nbytes()


class _Counter:
    """Bytes per part, each storage once."""

    def __init__(self):
        import torch  # pylint: disable=import-outside-toplevel
        self.tensor = torch.Tensor
        self.seen = {}
        self.parts = {"params": 0, "grads": 0, "optimizer": 0, "buckets": 0}

    def add(self, part, tensor):
        if not isinstance(tensor, self.tensor):
            return
        local = getattr(tensor, "_local_tensor", None)  # a DTensor: its local shard
        if local is not None:
            tensor = local
        if tensor.device.type == "meta":
            return
        try:
            key, size = _storage_key(tensor)
        except RuntimeError:  # a wrapper subclass with no storage of its own, a freed storage
            return
        if key[1] == 0 or key in self.seen:
            return
        self.seen[key] = part
        self.parts[part] += size

    def add_all(self, part, value, depth=0):
        """Every tensor in `value` (a tensor, or lists, tuples and dicts of them, 3 deep)."""
        if isinstance(value, self.tensor):
            self.add(part, value)
        elif depth < 3 and isinstance(value, (list, tuple)):
            for item in value:
                self.add_all(part, item, depth + 1)
        elif depth < 3 and isinstance(value, dict):
            for item in value.values():
                self.add_all(part, item, depth + 1)


class Setup:
    """What the formulas need (docs/design/memory-ledger.md): how the rank shards, over how many
    data-parallel ranks, and the precision."""

    def __init__(self):
        self.name = "single"  # single, ddp, fsdp2, zero0..zero3
        self.dp = 1
        self.bucket_view = False  # DDP's gradient_as_bucket_view: the grads are its buckets


def _dp_of_group(group):
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    try:
        return dist.get_world_size(group)
    except Exception:  # pylint: disable=broad-except
        return dist.get_world_size() if dist.is_initialized() else 1


def detect_setup(root):
    """The Setup of a root module (the outermost one the hooks saw called)."""
    setup = Setup()
    if type(root).__name__ == "OptimizedModule":  # torch.compile's wrapper: what it compiled
        root = getattr(root, "_orig_mod", root)
    name = type(root).__name__
    if hasattr(root, "zero_optimization_stage") and hasattr(root, "dp_world_size"):
        setup.name = f"zero{int(root.zero_optimization_stage())}"
        setup.dp = int(root.dp_world_size)
        return setup
    if name == "DistributedDataParallel":
        setup.name = "ddp"
        setup.dp = _dp_of_group(getattr(root, "process_group", None))
        setup.bucket_view = bool(getattr(root, "gradient_as_bucket_view", False))
        return setup
    from . import sharded_params  # pylint: disable=import-outside-toplevel
    sharding = sharded_params.scan(root)  # FSDP2 on the root or on some of its modules
    if sharding is not None and sharding.dp_mesh is not None and sharding.dp_mesh.ndim == 1:
        setup.name = "fsdp2"
        setup.dp = int(sharding.dp_mesh.size())
    return setup


def _param_elements(parameter, fsdp):
    """Ψ's share of one parameter: ZeRO-3's full size (`ds_numel`), an FSDP2 DTensor's global
    size, any other DTensor's local shard (tensor parallelism), else numel()."""
    full = getattr(parameter, "ds_numel", None)
    if full is not None:
        return int(full)
    local = getattr(parameter, "_local_tensor", None)
    if local is not None and not fsdp:
        return local.numel()
    return parameter.numel()


def _param_dtype(parameter):
    partition = getattr(parameter, "ds_tensor", None)
    dtype = partition.dtype if partition is not None else parameter.dtype
    return _DTYPE_NAMES.get(str(dtype), str(dtype).replace("torch.", ""))


def _states_per_element(optimizer):
    """The formula's optimizer states per element (fp32 tensors): the class's, with SGD's
    momentum and RMSprop's momentum and centering read from its groups; None when unknown."""
    name = type(optimizer).__name__
    count = _STATES_PER_ELEMENT.get(name)
    groups = getattr(optimizer, "param_groups", None) or [{}]
    if name == "SGD":
        count = 1 if groups[0].get("momentum", 0) else 0
    elif name == "RMSprop":
        count = 1 + bool(groups[0].get("momentum", 0)) + bool(groups[0].get("centered", False))
    return count


class MemoryLedger:
    """Measures and announces the ledger (see the module's text); `mark` sends one mark."""

    def __init__(self, mark, environ=os.environ):
        self._mark = mark
        self._every = _every(environ)
        self._roots = []  # weakrefs of the modules called with no module open
        self._optimizers = weakref.WeakSet()
        self._steps_since = None  # steps since the last measurement; None: none yet
        self._last_text = None
        self._last_peak = None
        self._amp = False
        self._cuda = None  # torch.cuda once CUDA is initialised; False: no CUDA in this torch
        self._step = -1  # the step that ended last (0-based, as the report numbers steps)
        self.last_cost_s = 0.0

    # ---- what the hooks tell it ----

    def root_seen(self, module):
        """A module called with no module open: a model, or the wrapper around one. Modules
        with no parameters (a loss built in every step) are not kept."""
        if next(iter(module.parameters()), None) is None:
            return
        self._roots = [ref for ref in self._roots if ref() is not None]
        if len(self._roots) < MAX_ROOTS:
            self._roots.append(weakref.ref(module))

    def optimizer_stepped(self, optimizer):
        self._optimizers.add(optimizer)

    def forward_began(self):
        """At a root forward: whether autocast is on (mixed precision's formula)."""
        if not self._amp:
            import torch  # pylint: disable=import-outside-toplevel
            try:
                on = torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda")
            except TypeError:  # torch < 2.4 takes no device
                on = torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled()
            self._amp = bool(on)

    def phase_boundary(self, name, opening):
        """A phase range opens or closes: on a GPU, the peak since the last boundary belongs to
        the phase that was open (closing) and the stats are reset; what a `forward` phase left
        allocated (its end less its start) is the activations it keeps for backward."""
        try:
            if opening and name == "forward":
                self.forward_began()
            cuda = self._device()
            if cuda is None:
                return
            peaks = self._peaks
            if name in _PHASES and not opening:
                peaks[name] = max(peaks.get(name, 0), cuda.max_memory_allocated())
            if name == "forward":
                allocated = cuda.memory_allocated()
                if opening:
                    self._forward_start = allocated
                elif self._forward_start is not None:
                    left = max(allocated - self._forward_start, 0)
                    peaks["activations"] = max(peaks.get("activations", 0), left)
                    self._forward_start = None
            self._note_step_peak(cuda)
            cuda.reset_peak_memory_stats()
        except Exception:  # pylint: disable=broad-except
            self._cuda = False  # no peaks from here on; the ledger of tensors goes on

    def step_ended(self):
        """At a step's end: the step's peaks (GPU), and the ledger when it is due."""
        self._step += 1
        step = self._step
        cuda = self._device()
        if cuda is not None:
            self._note_step_peak(cuda)
            self._announce_peaks(step)
        if not self._optimizers:
            return  # no optimizer stepped yet: no states to count
        if self._steps_since is not None:
            self._steps_since += 1
            if self._steps_since < self._every:
                return
        self._steps_since = 0
        started = time.perf_counter()
        text = self.measure_text(step)
        self.last_cost_s = time.perf_counter() - started
        if text is not None and text != self._last_text:
            self._last_text = text
            cost_us = round(self.last_cost_s * 1e6)
            self._mark(f"memory_ledger {self._rank()}={text} cost_us:{cost_us}")

    # ---- measuring ----

    def measure(self):
        """(Setup, elements Ψ, param dtype, states per element, parts) of this rank, or None."""
        roots = [root for root in (ref() for ref in self._roots) if root is not None]
        if not roots:
            return None
        setups = [detect_setup(root) for root in roots]
        found = [index for index, each in enumerate(setups) if each.name != "single"]
        first = found[0] if found else 0  # a wrapper called after its bare model was
        setup = setups[first]
        roots.insert(0, roots.pop(first))
        counter = _Counter()
        elements, dtype = 0, None
        parameters = []
        seen = set()
        for root in roots:
            for parameter in root.parameters():
                if id(parameter) not in seen:
                    seen.add(id(parameter))
                    parameters.append(parameter)
        for parameter in parameters:
            elements += _param_elements(parameter, setup.name == "fsdp2")
            dtype = dtype or _param_dtype(parameter)
            counter.add("params", parameter)
            counter.add("params", getattr(parameter, "ds_tensor", None))
        for parameter in parameters:
            counter.add("grads", parameter.grad)
        optimizers = list(self._optimizers)
        engine = roots[0] if setup.name.startswith("zero") else None
        zero = getattr(engine, "optimizer", None) if engine is not None else None
        for optimizer in optimizers:
            self._count_optimizer(counter, optimizer)
        if zero is not None and zero not in optimizers:
            self._count_deepspeed(counter, zero)
        states = None
        for optimizer in optimizers:
            states = _states_per_element(optimizer)
            if states is not None:
                break
        return setup, elements, dtype, states, counter.parts

    @staticmethod
    def _count_optimizer(counter, optimizer):
        for state in getattr(optimizer, "state", {}).values():
            counter.add_all("optimizer", state)
        for group in getattr(optimizer, "param_groups", []):
            for parameter in group.get("params", []):
                # A parameter of the optimizer that is no model parameter (DeepSpeed's fp32
                # master partition): its grad is a gradient partition.
                counter.add("grads", parameter.grad)
                counter.add("optimizer", parameter)

    def _count_deepspeed(self, counter, zero):
        """DeepSpeed's ZeRO optimizer: its inner optimizer (states, master partitions), then its
        attributes by name (gradient partitions, reduce buckets, flat parameter buffers)."""
        inner = getattr(zero, "optimizer", None)
        if inner is not None:
            self._count_optimizer(counter, inner)
        for name, value in list(vars(zero).items()):
            lowered = name.lower()
            if "ipg" in lowered or "bucket" in lowered:
                counter.add_all("buckets", value)
            elif "grad" in lowered:
                counter.add_all("grads", value)
            elif "fp32" in lowered or "master" in lowered:
                counter.add_all("optimizer", value)
            elif "bit16" in lowered or "fp16" in lowered or "lp_param" in lowered:
                counter.add_all("params", value)

    def measure_text(self, step):
        """The `memory_ledger` mark's value, or None when no model was seen."""
        measured = self.measure()
        if measured is None:
            return None
        setup, elements, dtype, states, parts = measured
        if setup.name == "ddp" and not setup.bucket_view:
            buckets = "-"  # in DDP's C++ reducer, out of Python's reach
        else:
            buckets = str(parts["buckets"])
        words = [f"step:{step}", f"setup:{setup.name}", f"dp:{setup.dp}",
                 f"elements:{elements}", f"dtype:{dtype or '-'}", f"amp:{int(self._amp)}",
                 f"states:{'-' if states is None else states}",
                 f"bucket_view:{int(setup.bucket_view)}",
                 f"params:{parts['params']}", f"grads:{parts['grads']}",
                 f"optimizer:{parts['optimizer']}", f"buckets:{buckets}"]
        rss = _rss_high_water()
        if rss is not None and self._device() is None:
            words.append(f"rss_high_water:{rss}")
        return " ".join(words)

    # ---- GPU peaks ----

    # This step's figures on a GPU: "allocated", "reserved" (the step's peaks), the peak allocated
    # of each phase, "activations" (what a forward left allocated, the most of the step's).
    _peaks = None
    _forward_start = None  # memory_allocated() when the open forward phase began

    def _device(self):
        """torch.cuda once this process initialised CUDA, else None (asked again later)."""
        if self._cuda is None:
            cuda = getattr(sys.modules.get("torch"), "cuda", None)
            try:
                if cuda is None or not cuda.is_available():
                    self._cuda = False  # a CPU-only torch or machine: never
                    return None
                if not cuda.is_initialized():
                    return None
            except Exception:  # pylint: disable=broad-except
                self._cuda = False
                return None
            self._cuda = cuda
            self._peaks = {}
        return self._cuda or None

    def _note_step_peak(self, cuda):
        peaks = self._peaks
        peaks["allocated"] = max(peaks.get("allocated", 0), cuda.max_memory_allocated())
        peaks["reserved"] = max(peaks.get("reserved", 0), cuda.max_memory_reserved())

    def _announce_peaks(self, step):
        peaks, self._peaks = self._peaks, {}
        figures = {key: peaks[key] for key in ("allocated", "reserved", *_PHASES, "activations")
                   if key in peaks}
        last = self._last_peak
        if last is not None and last.keys() == figures.keys() and all(
                abs(figures[key] - last[key]) <= PEAK_CHANGE * max(last[key], 1)
                for key in figures):
            return
        self._last_peak = figures
        words = " ".join(f"{key}:{value}" for key, value in figures.items())
        self._mark(f"memory_peak {self._rank()}=step:{step} {words}")

    @staticmethod
    def _rank():
        distributed = sys.modules.get("torch.distributed")
        if distributed is not None and distributed.is_available() and \
                distributed.is_initialized():
            return distributed.get_rank()
        rank = os.environ.get("RANK", "")
        return int(rank) if rank.isdigit() else 0


def _rss_high_water():
    """The process's resident-set high-water mark in bytes (Linux: VmHWM), None elsewhere."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None
