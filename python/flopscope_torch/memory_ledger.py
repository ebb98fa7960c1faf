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

Per module, on a GPU only, on the steps the ledger measures (ModuleActivations): what each
module's forward left allocated (memory_allocated() after it less before it, its children's
included), summed over its calls in the step, through torch global module hooks registered for
those steps' training forwards only; the CPU's allocator keeps no statistics: nothing is said.

Marks (docs/marks.md): `memory_ledger <rank>=<word:value ...>`, `memory_peak <rank>=...` and
`memory_activations <rank>=...`.
A failure while measuring turns the ledger off, said once on stderr (Profiler); the job goes on.
"""

import os
import sys
import threading
import time
import weakref

EVERY_ENV = "FLOPSCOPE_TORCH_MEMORY_EVERY"
SWITCH_ENV = "FLOPSCOPE_TORCH_MEMORY"
DEFAULT_EVERY = 100
PEAK_CHANGE = 0.01  # a peak is announced again when it moved by more than this fraction
_PHASES = ("forward", "backward", "optimizer")  # the phases whose peaks are kept
MAX_ROOTS = 64  # root modules with parameters kept (weakly) for the measurement
ACTIVATION_MODULES = 50  # module paths named in a `memory_activations` mark; the rest summed
# Root training forwards measured per module before any optimizer stepped (which step the ledger
# measures first is known only when one steps): a job that never steps stops being measured.
MAX_UNSTEPPED_FORWARDS = 64

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
        # Per module (GPU): whether the coming step is one the ledger measures (ModuleHooks reads
        # it at each root training forward), the measurement once CUDA is seen, the root
        # forwards measured before any optimizer stepped, the last figures announced.
        self.activations_due = True
        self._activations = None
        self._unstepped_forwards = 0
        self._last_activations = None

    # ---- what the hooks tell it ----

    def root_seen(self, module):
        """A module called with no module open: a model, or the wrapper around one. Modules
        with no parameters (a loss built in every step) are not kept, nor one kept already (a
        model is a root at every step)."""
        if any(ref() is module for ref in self._roots):
            return
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

    def root_forward(self, module, path, ranges):
        """A root module's training forward began, its range open (ModuleHooks; called only while
        `activations_due`): on a GPU, on a step the ledger measures, what its modules' forwards
        leave allocated is measured (ModuleActivations)."""
        activations = self._activations
        if activations is None:
            cuda = self._device()
            if cuda is None:  # the CPU: nothing measured per module
                self.activations_due = self._cuda is not False  # no CUDA at all: never asked again
                return
            activations = self._activations = ModuleActivations(cuda, ranges)
        if activations.installed:
            return  # on already (another thread's root, a forward that raised): its pre frames it
        if self._steps_since is None:  # no optimizer stepped yet: maybe the ledger's first step
            if self._unstepped_forwards >= MAX_UNSTEPPED_FORWARDS:
                activations.take()
                return
            self._unstepped_forwards += 1
        activations.begin(module, path)

    def close(self):
        """The per-module hooks off (the package turning off)."""
        if self._activations is not None:
            self._activations.remove()

    def step_ended(self):
        """At a step's end: the step's peaks (GPU), the ledger when it is due, and the step's
        per-module activations (GPU) when the ledger measured it."""
        self._step += 1
        step = self._step
        cuda = self._device()
        if cuda is not None:
            self._note_step_peak(cuda)
            self._announce_peaks(step)
        measured = self._ledger_due()
        if measured:
            self._announce_ledger(step)
        self._end_activations(step, measured)

    def _ledger_due(self):
        """Whether the step that ended is one the ledger measures: the first whose optimizer
        stepped, then every `_every` steps."""
        if not self._optimizers:
            return False  # no optimizer stepped yet: no states to count
        if self._steps_since is not None:
            self._steps_since += 1
            if self._steps_since < self._every:
                return False
        self._steps_since = 0
        return True

    def _announce_ledger(self, step):
        started = time.perf_counter()
        text = self.measure_text(step)
        self.last_cost_s = time.perf_counter() - started
        if text is not None and text != self._last_text:
            self._last_text = text
            cost_us = round(self.last_cost_s * 1e6)
            self._mark(f"memory_ledger {self._rank()}={text} cost_us:{cost_us}")

    def _end_activations(self, step, measured):
        """The per-module hooks come off; the step's figures are announced when the ledger
        measured the step and they changed; whether the next step is one it will measure."""
        self.activations_due = self._cuda is not False and (
            self._steps_since is None or self._steps_since + 1 >= self._every)
        activations = self._activations
        if activations is None:
            return
        activations.remove()
        if activations.error is not None:
            error, activations.error = activations.error, None
            self.activations_due = False
            self._activations = None
            raise RuntimeError(f"per-module activations: {error!r}")
        sums = activations.take()
        if not measured or not sums:
            return
        text = activations_text(sums)
        if text != self._last_activations:
            self._last_activations = text
            self._mark(f"memory_activations {self._rank()}=step:{step} {text}")

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


def _encode_path(path):
    """A module path as one word of a mark's value: `%`, `=` and space written %25, %3D, %20."""
    return path.replace("%", "%25").replace("=", "%3D").replace(" ", "%20")


def activations_text(sums, shown=ACTIVATION_MODULES):
    """The `memory_activations` mark's value after its step: `modules:<n> rest:<bytes>` (the
    paths measured, the bytes of those not named), then `<path>:<bytes>` for the `shown` paths
    whose forwards left the most, most first."""
    ordered = sorted(sums.items(), key=lambda item: (-item[1], item[0]))
    rest = sum(size for _, size in ordered[shown:])
    words = [f"modules:{len(ordered)}", f"rest:{rest}"]
    words.extend(f"{_encode_path(path)}:{size}" for path, size in ordered[:shown])
    return " ".join(words)


class ModuleActivations:
    """Per module path, what its forward left allocated on a GPU: memory_allocated() after it
    less before it (its children's included; negative where it freed more than it kept), summed
    over its calls, for the training forwards of a step the ledger measures.

    Torch's global module hooks do it, registered at such a forward's root (`begin`, called by
    the package's own pre hook once the root's range is open: the root's frame is pushed there)
    and removed when the root's forward returns or at the step's end, so no other forward runs
    them. Registered after the package's hooks, the pre hook finds the module's range innermost
    (its path) and the post hook runs after the package's. Modules that open no range (wrappers
    such as DDP, a compiled model's modules inside Dynamo's graph) are not measured. The hooks
    never raise into torch: an error removes them and is kept in `error`."""

    def __init__(self, cuda, ranges):
        self._cuda = cuda
        self._ranges = ranges  # the package's ThreadRanges: the innermost open range per thread
        self._local = threading.local()  # frames: (module, path, bytes allocated before)
        self._handles = []
        self._root = None  # the root module whose forward registered the hooks
        self._sums = {}  # module path -> bytes
        self._compiling = None  # torch.compiler.is_compiling, or a stand-in (torch 1.13)
        self.error = None

    @property
    def installed(self):
        return bool(self._handles)

    def begin(self, module, path):
        """A measured root forward begins: the hooks on, the root's frame pushed."""
        import torch  # pylint: disable=import-outside-toplevel
        api = torch.nn.modules.module
        compiler = getattr(torch, "compiler", None)
        self._compiling = getattr(compiler, "is_compiling", None) or (lambda: False)
        self._handles = [api.register_module_forward_pre_hook(self._pre),
                         api.register_module_forward_hook(self._post)]
        self._root = module
        self._frames().append((module, path, self._cuda.memory_allocated()))

    def remove(self):
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._root = None
        self._local = threading.local()  # frames left by a forward that raised, every thread's

    def take(self):
        """The figures summed since the last take, by module path."""
        sums, self._sums = self._sums, {}
        return sums

    def _frames(self):
        try:
            return self._local.frames
        except AttributeError:
            self._local.frames = []
            return self._local.frames

    def _pre(self, module, inputs):  # pylint: disable=unused-argument
        try:
            if self._compiling():
                return None
            try:
                entries = self._ranges.local.state.entries
            except AttributeError:
                return None
            top = entries[-1] if entries else None
            if top is not None and not top.backward and top.info.ref() is module:
                self._frames().append((module, top.path, self._cuda.memory_allocated()))
        except Exception as error:  # pylint: disable=broad-except
            self._failed(error)
        return None

    def _post(self, module, inputs, output):  # pylint: disable=unused-argument
        try:
            if self._compiling():
                return None
            frames = self._frames()
            for index in range(len(frames) - 1, -1, -1):
                if frames[index][0] is module:
                    _, path, before = frames[index]
                    del frames[index:]  # frames above it: forwards that raised
                    left = self._cuda.memory_allocated() - before
                    self._sums[path] = self._sums.get(path, 0) + left
                    if not frames and module is self._root:  # the root's forward returned
                        self.remove()
                    break
        except Exception as error:  # pylint: disable=broad-except
            self._failed(error)
        return None

    def _failed(self, error):
        self.error = error
        self.remove()


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
