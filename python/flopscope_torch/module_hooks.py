"""Global module hooks: a range per module forward, and one per module backward.

Forward: PyTorch's global forward pre/post hooks (every nn.Module, no per-model setup) push and
pop the module's range on the thread running forward.

Backward: PyTorch 1.13 has no global backward *pre* hook, and full backward hooks wrap inputs and
outputs in an autograd Function, which breaks modules that later modify those tensors in place
(`ReLU(inplace=True)` after a hooked module raises). So the package hooks gradients instead, which
changes no tensor: a module's backward range opens when the gradient of its output is computed
(hook on each output tensor) and closes when the gradient of its input is complete (hook on each
input tensor). A tensor carries one `GradEvents` hook however many modules produce or consume it;
it closes ranges before opening new ones, innermost first. Where no input gradient exists (token
ids into an embedding) or the input is shared with other consumers, the range closes when the next
module outside it starts its backward, or at the end of the backward pass.

A GradEvents goes straight into the tensor's hook dict (`_backward_hooks`, registered with its
grad_fn once), as Tensor.register_hook does it but without its handle object, which costs several
times more. The dict is an OrderedDict, as Tensor.register_hook makes it: a later
Tensor.register_hook on the same tensor (FSDP2's pre-backward hook on a module's output) takes a
weak reference to it, which a plain dict refuses (TypeError: the job's forward would raise).
Torch versions without `_register_hook_dict` get Tensor.register_hook.

The hooks run twice per module call, and their usual path costs more than PyTorch's own hook
dispatch; flopscope_torch._native (native/fast_hooks.cc) runs that path (the pre and post hooks'
usual case and the gradient hook) in C++ and hands every other case to the Python methods here.
Without it (not built for this Python, FLOPSCOPE_TORCH_NATIVE=0) _fast_hooks and on_gradient do
the same in Python. A backward Entry is made once per forward Entry and parent and reused
(Entry.back), as forward entries are.

Gradient hooks run on the autograd engine's thread for the tensor's device; ThreadRanges keeps
each range on the thread that opened it. Hooks never raise into PyTorch: an internal error turns
the package off with one message (see Profiler.fail).
"""

import sys
import threading
from collections import OrderedDict

import torch

from .module_registry import ModuleInfo, wrapped_attribute
from .nvtx_backend import load_native
from .thread_ranges import Entry, ThreadRanges, ThreadState, backward_entry

_MAX_TENSORS = 16  # looked at per input / output structure: bounds the cost of huge tuples
# Looked up once: these run twice per module call.
# Whether the JIT is tracing: _is_tracing where torch has it (half the cost of the state).
# pylint: disable-next=protected-access
_tracing = getattr(torch._C, "_is_tracing", None) or torch._C._get_tracing_state
_grad_enabled = torch.is_grad_enabled


def _fx_tracing():
    """Whether torch.fx is tracing (symbolic_trace calls submodules with Proxy inputs, and a hook
    that read their attributes would add nodes to the graph). Checked on the slow paths only:
    under symbolic_trace no range is open, so every hook call takes them."""
    fx = sys.modules.get("torch.fx._symbolic_trace")
    # torch 2's is_fx_tracing warns that it also answers for torch.export; the symbolic one not
    is_tracing = getattr(fx, "is_fx_symbolic_tracing", None) or getattr(fx, "is_fx_tracing", None)
    return is_tracing is not None and is_tracing()


def _compiled_module(module):
    """The module torch.compile's OptimizedModule compiled, wrappers inside it (DDP) seen
    through, or None when `module` is no OptimizedModule."""
    if type(module).__name__ != "OptimizedModule":
        return None
    inner = module
    attribute = wrapped_attribute(inner)
    while attribute is not None:
        inner = getattr(inner, attribute)
        attribute = wrapped_attribute(inner)
    return inner


def _graph_module():
    return torch.fx.GraphModule


def _collect_grad_tensors(value, out, depth=0):
    """Non-leaf tensors that require grad in `value` (tensor, tuple/list, dict), two levels deep.
    Leaves (parameters, inputs the user made) are skipped: a hook there would outlive the step."""
    if isinstance(value, torch.Tensor):
        if value.requires_grad and value.grad_fn is not None:
            out.append(value)
        return
    if depth >= 2 or len(out) >= _MAX_TENSORS:
        return
    if isinstance(value, (tuple, list)):
        items = value[:_MAX_TENSORS]
    elif isinstance(value, dict):
        items = list(value.values())[:_MAX_TENSORS]
    else:
        return
    for item in items:
        _collect_grad_tensors(item, out, depth + 1)


class GradEvents:
    """The package's one gradient hook on a tensor: backward ranges to close (modules that took
    the tensor as input) and to open (modules that produced it), in registration order."""

    __slots__ = ("hooks", "closes", "opens")

    def __init__(self, hooks):
        self.hooks = hooks
        self.closes = []
        self.opens = []

    def __call__(self, grad):
        hooks = self.hooks
        if hooks.active:
            hooks.on_gradient(self)
        # Returns None: the gradient is left as it is.


class ModuleHooks:
    """Installs the global hooks; `profiler` supplies the registry, phases, announcer, batch
    size detection, the estimate (or None), and the failure switch.

    The hooks run twice per module call, so they are written for speed: a module's forward
    Entry is made once and reused (ModuleInfo.site), the registry's dict and the thread's state
    are read directly, and a tensor's gradient hook goes straight into its hook dict."""

    def __init__(self, backend, registry, phases, announcer, fail, batch=None, estimate=None,
                 native=True):
        self._backend = backend
        self._registry = registry
        self._infos = registry.infos  # read directly on every call
        self._phases = phases
        self._announcer = announcer
        self._fail = fail
        self._batch = batch
        self.estimate = estimate
        self.memory = None  # the memory ledger (memory_ledger.MemoryLedger) when on
        self.ranges = ThreadRanges(backend)
        self._handles = []
        self._hook_key = f"flopscope_torch:{id(self)}"
        self.active = False
        self._use_native = native  # False: the pure-Python paths even where _native exists
        self.native = None  # the _native.Hooks object while installed with it
        self._events_type = GradEvents  # what _add_events registers, and its owner
        self._events_owner = self
        self._hooks = ()  # the forward pre and post hooks registered with torch
        self._dynamo_hidden = False  # whether they are wrapped for Dynamo (hide_from_dynamo)
        self._compiled_paths = set()  # model paths announced `compiled`

    def install(self):
        module_api = torch.nn.modules.module
        if self.estimate is not None:
            self.estimate.install()
        native = load_native() if self._use_native else None
        if native is not None:
            pre, post = self._native_hooks(native)
        else:
            pre, post = self._fast_hooks()
        self._handles = [module_api.register_module_forward_pre_hook(pre),
                         module_api.register_module_forward_hook(post)]
        self._hooks = (pre, post)
        self.active = True
        if self.native is not None:
            self.native.active = True

    def _native_hooks(self, native):
        """The C++ hooks (fast_hooks.cc), given what their fast paths read and the Python
        methods they hand the other cases to."""
        self.native = native.Hooks({
            "local": self.ranges.local, "infos": self._infos,
            "key": self._hook_key, "push": self._backend.push, "pop": self._backend.pop,
            "tracing": _tracing, "grad_enabled": _grad_enabled, "tensor_type": torch.Tensor,
            "containers": (torch.Tensor, tuple, list, dict),
            "hook_dict": OrderedDict, "entry_type": Entry,
            "info_type": ModuleInfo, "state_type": ThreadState,
            "slow_pre": self._forward_pre, "slow_post": self._forward_post,
            "close_on": self._close_on, "open_on": self._open_on, "events_of": self._events,
            "queue_end": self._queue_end_of_backward,
            "push_backward": self.ranges.push_backward,
            "pop_backward": self.ranges.pop_backward, "fail": self._fail})
        self._events_type, self._events_owner = native.GradEvents, self.native
        return self.native.pre, self.native.post

    def _fast_hooks(self):
        """The hooks PyTorch calls: closures over what they read (cheaper than attributes of
        self) that handle the usual call, a module running inside its parent with its site
        known, and leave everything else to _forward_pre / _forward_post before doing
        anything."""
        hooks = self
        local = self.ranges.local
        infos_get = self._infos.get
        push, pop = self._backend.push, self._backend.pop
        events_of, close_on, open_on = self._events, self._close_on, self._open_on
        key = self._hook_key
        slow_pre, slow_post, fail = self._forward_pre, self._forward_post, self._fail
        tensor_type = torch.Tensor

        def pre(module, inputs):
            if not hooks.active:
                return None
            try:
                entries = local.state.entries
            except AttributeError:  # no state on this thread yet
                return slow_pre(module, inputs)
            try:
                if not entries or _tracing():
                    return slow_pre(module, inputs)
                parent = entries[-1]
                info = infos_get(id(module))
                if info is None or info.transparent or info.ref() is not module:
                    return slow_pre(module, inputs)
                site = info._sites.get(parent)  # pylint: disable=protected-access
                if site is None:
                    return slow_pre(module, inputs)
                push(site.encoded)
                entries.append(site)
                if _grad_enabled():
                    for value in inputs:
                        if type(value) is tensor_type:
                            events = events_of(value)
                            if events is not None:
                                closes = events.closes
                                if not closes or closes[-1] is not site:
                                    closes.append(site)
                        elif isinstance(value, (tensor_type, tuple, list, dict)):
                            close_on(value, site)
            except Exception as error:  # pylint: disable=broad-except
                fail(error)
            return None

        def post(module, inputs, output):
            if not hooks.active:
                return None
            try:
                entries = local.state.entries
            except AttributeError:  # no state on this thread yet
                return slow_post(module, inputs, output)
            try:
                entry = entries[-1] if entries else None
                if (entry is None or entry.backward or entry.parent is None
                        or not entry.announced or entry.info.ref() is not module):
                    return slow_post(module, inputs, output)
                pop()
                entries.pop()
                if not _grad_enabled():
                    return None
                if type(output) is not tensor_type:
                    open_on(output, entry)
                    return None
                # pylint: disable-next=protected-access
                if output._backward_hooks is None and output.requires_grad:
                    grad_fn = output.grad_fn
                    if grad_fn is not None:
                        register = getattr(grad_fn, "_register_hook_dict", None)
                        if register is None:  # not in this torch: Tensor.register_hook
                            events_of(output).opens.append(entry)
                            return None
                        events = GradEvents(hooks)
                        table = OrderedDict()
                        output._backward_hooks = table  # pylint: disable=protected-access
                        register(output)
                        table[key] = events
                        events.opens.append(entry)
                    return None
                events = events_of(output)
                if events is not None:
                    events.opens.append(entry)
            except Exception as error:  # pylint: disable=broad-except
                fail(error)
            return None

        return pre, post

    def uninstall(self):
        self.active = False
        if self.native is not None:
            self.native.active = False
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._dynamo_hidden = False
        if self.estimate is not None:
            self.estimate.uninstall()

    # ---- forward ----

    def _forward_pre(self, module, inputs):
        if not self.active:
            return None
        try:
            if _tracing() or _fx_tracing():
                return
            ranges = self.ranges
            try:
                state = ranges.local.state
            except AttributeError:
                state = ranges.state()
            entries = state.entries
            parent = entries[-1] if entries else None
            if parent is not None and parent.compiled and isinstance(module, _graph_module()):
                return  # the compiled graph itself (aot_eager runs it as a torch.fx GraphModule)
            info = self._infos.get(id(module))
            if info is None or info.ref() is not module:
                info = self._register(module, parent)
            if info.transparent:
                if parent is None:  # DDP's own work before the model's forward is forward too
                    self._phases.root_forward_begin(_grad_enabled())
                compiled = _compiled_module(module)
                if compiled is not None:  # its modules' own hooks run inside Dynamo's graph
                    self._compiled_pre(compiled, inputs)
                return
            if parent is not None and parent.backward:
                self._recompute_pre(state, info, inputs)
                return
            site = info._sites.get(parent)  # pylint: disable=protected-access
            if site is None:
                site = info.site(parent, self._backend.encode, Entry)
            training = _grad_enabled()
            if parent is None:
                self._phases.root_forward_begin(training)
                if self._batch is not None and self._batch.pending:
                    self._batch.observe_root(info, module, inputs)
            self._backend.push(site.encoded)
            entries.append(site)
            memory = self.memory
            if parent is None and training and memory is not None and memory.activations_due:
                memory.root_forward(module, site.path, self.ranges)  # per module, on a GPU
            if training:
                events_of = self._events
                for value in inputs:
                    if type(value) is torch.Tensor:  # the usual input
                        events = events_of(value)
                        if events is not None:
                            closes = events.closes
                            if not closes or closes[-1] is not site:  # the same tensor twice
                                closes.append(site)
                    elif isinstance(value, (torch.Tensor, tuple, list, dict)):
                        self._close_on(value, site)
        except Exception as error:  # pylint: disable=broad-except
            self._fail(error)
        return None

    def _compiled_pre(self, compiled, inputs):
        """torch.compile's wrapper (OptimizedModule) runs eagerly, the module it compiled
        (`compiled`, wrappers such as DDP seen through) inside Dynamo's graph, where the hooks
        are left out (hide_from_dynamo): its range opens here, once per call, and its modules
        get none of their own; the first time, a `compiled <model path>` mark says so."""
        self.hide_from_dynamo()
        self._forward_pre(compiled, inputs)
        entries = self.ranges.state().entries
        if entries and entries[-1].info.ref() is compiled:
            entries[-1].compiled = True
        info = self._registry.get(compiled)
        if info is not None and info.model_path is not None and (
                info.model_path not in self._compiled_paths):
            self._compiled_paths.add(info.model_path)
            self._announcer.announce(f"compiled {info.model_path}", "torch.compile")

    def hide_from_dynamo(self):
        """From the job's first compile on (torch.compile, an OptimizedModule's first call), the
        forward hooks are called through functions that return at once while Dynamo traces: it
        folds torch.compiler.is_compiling() to True, so the compiled graph holds no hook, neither
        a call nor a graph break. Dynamo cannot trace into the native hooks (a method of a C
        object) and breaks the graph at every module where the Python ones touch their state."""
        if self._dynamo_hidden or not self._hooks:
            return
        self._dynamo_hidden = True
        compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
        if compiling is None:  # torch 1.13: no Dynamo
            return
        inner_pre, inner_post = self._hooks

        def pre(module, inputs):
            if compiling():
                return None
            return inner_pre(module, inputs)

        def post(module, inputs, output):
            if compiling():
                return None
            return inner_post(module, inputs, output)

        module_api = torch.nn.modules.module
        # pylint: disable=protected-access
        module_api._global_forward_pre_hooks[self._handles[0].id] = pre
        module_api._global_forward_hooks[self._handles[1].id] = post
        self._hooks = (pre, post)

    def _recompute_pre(self, state, info, inputs):
        """A forward called while a backward range is the innermost (activation checkpointing
        recomputing it in backward): no range opens, so its time stays in the backward range
        around it and the estimate counts nothing (its forward was counted when it ran). It
        takes the forward site of the call it repeats, so that gradients computed through the
        recomputed graph (use_reentrant=True) open and close the same backward ranges."""
        recompute = state.recompute
        if recompute:
            parent = recompute[-1][1]
            site = None if parent is None else (
                info._sites.get(parent)  # pylint: disable=protected-access
                or info.site(parent, self._backend.encode, Entry))
        else:  # the outermost recomputed module: the site its forward ran at
            site = next((each for key, each in info._sites.items()  # pylint: disable=protected-access
                         if key is None or not key.backward), None)
        recompute.append((info, site))
        if site is None or not _grad_enabled():
            return
        for tensor in self._grad_tensors(inputs):
            closes = self._events(tensor).closes
            if site not in closes:  # a non-reentrant recompute passes the same inputs again
                closes.append(site)

    def _recompute_post(self, site, output):
        if site is not None and _grad_enabled():
            self._open_on(output, site)

    def _register(self, module, parent):
        info = self._registry.info_for(module, inside_module=parent is not None)
        if parent is None and self.memory is not None:  # a root or the wrapper around one
            self.memory.root_seen(module)
        for tree in self._registry.take_new_trees():
            modules = [each.ref() for each in tree.infos]
            self._announcer.announce_tree(tree, modules)
            if self.estimate is not None:
                self._announcer.announce_deepspeed_differences(
                    tree, modules, self.estimate.functional_wrappers())
        return info

    def _forward_post(self, module, inputs, output):
        if not self.active:
            return None
        try:
            ranges = self.ranges
            try:
                entries = ranges.local.state.entries
            except AttributeError:
                entries = None
            entry = entries[-1] if entries else None
            if entry is not None and not entry.backward and entry.info.ref() is module:
                self._backend.pop()  # the usual case: this module's range is the innermost
                entries.pop()
            else:
                if _tracing() or _fx_tracing():
                    return
                info = self._registry.get(module)
                if info is None:
                    return
                if info.transparent:
                    compiled = _compiled_module(module)
                    if compiled is not None:
                        self._forward_post(compiled, inputs, output)
                    elif ranges.top() is None:
                        self._phases.root_forward_end()
                    return
                recompute = ranges.state().recompute
                if recompute and recompute[-1][0] is info:
                    self._recompute_post(recompute.pop()[1], output)
                    return
                entry = ranges.pop_forward(info)
                if entry is None:
                    return
            info = entry.info
            if not entry.announced:
                entry.announced = True
                self._announcer.module_seen(entry.path, info, module)
            if _grad_enabled():
                if type(output) is torch.Tensor:
                    events = self._events(output)
                    if events is not None:
                        events.opens.append(entry)
                else:
                    self._open_on(output, entry)
            if entry.parent is None:
                self._phases.root_forward_end()
        except Exception as error:  # pylint: disable=broad-except
            self._fail(error)
        return None

    def _close_on(self, value, site):
        """The gradient hooks of the tensors in `value` (a forward's input other than a plain
        tensor) close `site`'s backward range."""
        for tensor in self._grad_tensors(value):
            closes = self._events(tensor).closes
            if not closes or closes[-1] is not site:  # the same tensor twice
                closes.append(site)

    def _open_on(self, value, entry):
        """The gradient hooks of the tensors in `value` (a forward's output other than a plain
        tensor) open `entry`'s backward range."""
        for tensor in self._grad_tensors(value):
            self._events(tensor).opens.append(entry)

    @staticmethod
    def _grad_tensors(value):
        # The common shapes first: one tensor, or a tuple of tensors (a module's inputs).
        if type(value) is torch.Tensor:
            return (value,) if value.requires_grad and value.grad_fn is not None else ()
        tensors = []
        _collect_grad_tensors(value, tensors)
        return tensors

    def _events(self, tensor):
        """The tensor's GradEvents, registered on first use, or None for a tensor that gets no
        gradient of its own (a leaf, or no requires_grad). Tensor attributes cost a lot here
        (grad_fn most), so a tensor that has its hook answers from its hook dict alone."""
        hooks = tensor._backward_hooks  # pylint: disable=protected-access
        if hooks is not None:
            events = hooks.get(self._hook_key)
            if events is not None:
                return events
        if not tensor.requires_grad:
            return None
        grad_fn = tensor.grad_fn
        if grad_fn is None:
            return None
        return self._add_events(tensor, hooks, grad_fn)

    def _add_events(self, tensor, hooks, grad_fn):
        """Registers a GradEvents straight into the tensor's hook dict, as Tensor.register_hook
        does, without its handle (the hook is never removed: it dies with the tensor); through
        Tensor.register_hook where torch lacks _register_hook_dict."""
        if hooks is not None:
            for hook in hooks.values():  # registered through Tensor.register_hook before
                if type(hook) is self._events_type and hook.hooks is self._events_owner:
                    return hook
        events = self._events_type(self._events_owner)
        if hooks is None:
            register = getattr(grad_fn, "_register_hook_dict", None)
            if register is None:
                tensor.register_hook(events)
                return events
            hooks = OrderedDict()
            tensor._backward_hooks = hooks  # pylint: disable=protected-access
            register(tensor)
        hooks[self._hook_key] = events
        return events

    # ---- backward (autograd thread) ----

    def on_gradient(self, events):
        try:
            ranges = self.ranges
            try:
                queued = ranges.local.state.end_queued
            except AttributeError:
                queued = False
            if not queued:
                self._queue_end_of_backward()
            state = ranges.local.state
            entries = state.entries
            backend = self._backend
            for entry in reversed(events.closes):
                if entries and entries[-1].source is entry:  # the usual case, inline
                    backend.pop()
                    entries.pop()
                else:
                    ranges.pop_backward(entry)
            for entry in reversed(events.opens):
                top = entries[-1] if entries else None
                if (top is not None and top.backward and entry.parent is not None
                        and top.source is entry.parent and not state.stale):
                    backend.push(entry.encoded)  # the usual case, inline (push_backward)
                    entries.append(backward_entry(entry, top))
                else:
                    ranges.push_backward(entry)
        except Exception as error:  # pylint: disable=broad-except
            self._fail(error)

    def _queue_end_of_backward(self):
        """Asks the engine to call back when this backward pass is complete, once per pass and
        thread, so the ranges this thread still has open close then (the root model's, whose
        input needs no gradient)."""
        state = self.ranges.state()
        if state.end_queued:
            return
        state.end_queued = True

        def end_of_backward():
            state.end_queued = False
            if state.thread_id != threading.get_ident():
                # The engine finished the pass on another thread, which may not pop this
                # thread's ranges: they close at this thread's next backward event.
                state.stale = True
                return
            try:
                self.ranges.close_backward()
            except Exception as error:  # pylint: disable=broad-except
                self._fail(error)

        engine = torch.autograd.Variable._execution_engine  # pylint: disable=protected-access
        engine.queue_callback(end_of_backward)

    def end_backward_on_this_thread(self):
        """Called when backward() returns on the thread that called it."""
        state = self.ranges.state()
        state.end_queued = False
        self.ranges.close_backward()
