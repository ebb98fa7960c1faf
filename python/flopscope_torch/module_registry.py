"""What each nn.Module is called in flopscope's module tree.

A root model is the module whose forward runs while no module is open on the thread; its
submodules are named by their qualified names from `root.named_modules()`. A module's range name
is its qualified name relative to the enclosing open module, so the range path of
`encoder.layers.0.self_attn` under a root `TinyLM` reads `TinyLM/encoder/layers.0/self_attn`
(containers that never run, like ModuleList, leave no component of their own). Wrappers that only
call an inner module (DDP, FSDP, DeepSpeed's engine, torch.compile) get no range: the inner module
takes their place, so `DDP(model)` reports as `model`'s tree.

Each module of a root model also has a *model path*, the range path it gets when it runs inside
its parent's forward: containers whose class has no forward of its own (ModuleList, ModuleDict)
add no component, every other module does. The whole tree, containers and modules that never run
included, is announced with these paths when the root first runs (docs/marks.md).

A module registered under several names (transformers 4's T5 shares one Embedding as `shared`,
`encoder.embed_tokens` and `decoder.embed_tokens`) is a row of the tree at each of them, as
`print(model)` and DeepSpeed's profile show it; its first name is its own, the others are its
aliases, and it runs under the name its open parent knows it by (`encoder/embed_tokens`).

Modules are looked up by id() on every call; each entry holds a weak reference, so an id reused
after a module was freed is recognised and the entry is dropped when its module dies.
"""

import functools
import weakref

from .sharded_params import original_class_name

WRAPPER_CLASSES = frozenset({
    "DistributedDataParallel", "DataParallel", "FullyShardedDataParallel", "DeepSpeedEngine",
    "PipelineEngine", "Float16Module", "OptimizedModule",
})
WRAPPED_ATTRIBUTES = ("module", "_fsdp_wrapped_module", "_orig_mod")


def wrapped_attribute(module):
    """The attribute holding a wrapper's inner module, or None when `module` is no wrapper."""
    if type(module).__name__ not in WRAPPER_CLASSES:
        return None
    children = dict(module.named_children())
    return next((name for name in WRAPPED_ATTRIBUTES if name in children), None)


def count_parameters(module, sharding=None):
    """sum(p.numel()) over the module's parameters, submodules included (as DeepSpeed counts),
    or None while a lazy module's parameters are not materialised. DeepSpeed ZeRO-3 keeps the
    full size of a partitioned parameter in `ds_numel` (its numel() is then 0); DTensor
    parameters count as `sharding` (a sharded_params.Sharding) says."""
    counts = parameter_counts(module, sharding)
    return None if counts is None else counts[0]


def parameter_counts(module, sharding=None):
    """(counted, held): the count of count_parameters, and the elements this rank holds (FSDP2
    shards: their local part, sharded_params); None while a lazy module is not materialised."""
    total = held = 0
    try:
        for parameter in module.parameters():
            pair = sharding.counts(parameter) if sharding is not None else None
            if pair is None:
                full = getattr(parameter, "ds_numel", None)
                count = int(full) if full is not None else parameter.numel()
                pair = (count, count)
            total += pair[0]
            held += pair[1]
    except (ValueError, RuntimeError):  # torch.nn.parameter.UninitializedParameter
        return None
    return total, held


def has_own_forward(module):
    """Whether the module's class defines forward (containers such as ModuleList do not: calling
    them raises, so they never open a range)."""
    forward = getattr(type(module), "forward", None)
    base = getattr(_module_base(), "forward", None)
    return forward is not None and forward is not base


def _module_base():
    import torch  # pylint: disable=import-outside-toplevel
    return torch.nn.Module


class ModuleTree:
    """The qualified names of one root model, and its modules in model order (`print(model)`'s
    order) as ModuleInfo, for the announcement of the whole tree."""

    def __init__(self, root):
        self.label = original_class_name(root)
        self.infos = []  # model order; infos[0] is the root
        self.sharding = None  # its DTensor parameters (sharded_params.scan), set when announced


class ModuleInfo:
    """One module: where it sits (tree and qualified name) and its range names per parent."""

    __slots__ = ("ref", "tree", "qualified_name", "class_name", "transparent", "model_path",
                 "parent_model_path", "aliases", "_names", "_sites", "_parameters", "_held")

    def __init__(self, module, tree, qualified_name, transparent):
        self.ref = None  # set by the registry
        self.tree = tree
        self.qualified_name = qualified_name  # "" for a tree's root; None outside any tree
        self.class_name = original_class_name(module)
        self.transparent = transparent
        self.model_path = None  # set for modules of a tree (see the module docstring)
        self.parent_model_path = None
        self.aliases = ()  # ModuleInfo of each other name of the module in its tree
        self._names = {}  # parent path (None at the top) -> (path, encoded name)
        self._sites = {}  # parent entry (None at the top) -> its cached forward Entry
        self._parameters = None
        self._held = None

    def range_name(self, parent):
        """This module's range name when `parent` (a ModuleInfo or None) is the open module."""
        own = self.qualified_name
        if own == "":
            return self.tree.label
        if own is None:
            return self.class_name
        if parent is not None and parent.tree is self.tree:
            prefix = parent.qualified_name
            if prefix == "":
                return own
            for name in (own, *(alias.qualified_name for alias in self.aliases)):
                if prefix is not None and name.startswith(prefix) and \
                        name[len(prefix):][:1] == ".":
                    return name[len(prefix) + 1:]
        # Called outside its parent's forward: the full qualified name keeps it recognisable.
        return own

    def path_and_name(self, parent_entry, encode):
        """(range path, encoded range name) under the open range `parent_entry` (an object with
        `.info` and `.path`, or None). Cached: a module almost always runs under one parent."""
        key = None if parent_entry is None else parent_entry.path
        cached = self._names.get(key)
        if cached is None:
            name = self.range_name(None if parent_entry is None else parent_entry.info)
            path = name if parent_entry is None else f"{parent_entry.path}/{name}"
            cached = (path, encode(name))
            if len(self._names) < 64:  # bounded: a module called from ever new places
                self._names[key] = cached
        return cached

    def site(self, parent_entry, encode, make_entry):
        """The forward Entry of a call under the open range `parent_entry`, made by
        `make_entry(info, path, encoded, parent)` once per parent and reused on every later call
        (no allocation per call). A parent that is a backward range (a forward recomputed
        during backward) gets a fresh entry each time."""
        site = self._sites.get(parent_entry)
        if site is not None:
            return site
        path, encoded = self.path_and_name(parent_entry, encode)
        site = make_entry(self, path, encoded, parent_entry)
        if (parent_entry is None or not parent_entry.backward) and len(self._sites) < 64:
            self._sites[parent_entry] = site
        return site

    def parameter_count(self, module):
        if self._parameters is None:
            counts = parameter_counts(module, self.tree.sharding if self.tree else None)
            if counts is not None:
                self._parameters, self._held = counts
        return self._parameters

    def held_count(self, module):
        """The parameter elements this rank holds (differs from parameter_count for FSDP2's
        shards), or None while unknown."""
        self.parameter_count(module)
        return self._held

    def forget_counts(self):
        self._parameters = self._held = None


class ModuleRegistry:
    """id(module) -> ModuleInfo, filled a whole root model at a time."""

    def __init__(self):
        self._infos = {}
        self.infos = self._infos  # id(module) -> ModuleInfo; the hooks read it directly
        self.new_trees = []  # trees registered since the announcer last took them

    def take_new_trees(self):
        trees, self.new_trees = self.new_trees, []
        return trees

    def __len__(self):
        return len(self._infos)

    def get(self, module):
        info = self._infos.get(id(module))
        if info is not None and info.ref() is module:
            return info
        return None

    def info_for(self, module, inside_module):
        """The module's info, registering it on first sight: with no module open
        (`inside_module` false) as a wrapper or the root of a new tree, else as a module of no
        known tree (named by its class)."""
        info = self.get(module)
        if info is not None:
            return info
        if wrapped_attribute(module) is not None:
            return self._add(module, None, None, transparent=True)
        if not inside_module:
            self._add_tree(module)
            return self.get(module)
        return self._add(module, None, None, transparent=False)

    def _add_tree(self, root):
        tree = ModuleTree(root)
        self.new_trees.append(tree)
        # (original qualified prefix, shown prefix) for each wrapper's inner module, so that
        # `layers.0._fsdp_wrapped_module.attn` shows as `layers.0.attn`.
        renames = []
        model_paths = {}
        first = {}  # id(module) -> its info under its first name
        for original, module in root.named_modules(remove_duplicate=False):
            shown = original
            for prefix, replacement in reversed(renames):
                if original == prefix or original.startswith(prefix + "."):
                    shown = replacement + original[len(prefix):]
                    break
            attribute = wrapped_attribute(module)
            if attribute is not None and original != "":
                renames.append((f"{original}.{attribute}", shown))
            if id(module) in first:  # another name of a module met before: an alias row
                if attribute is None:
                    owner = first[id(module)]
                    alias = ModuleInfo(module, tree, shown, transparent=False)
                    alias.ref = owner.ref
                    owner.aliases = (*owner.aliases, alias)
                    self._place(alias, module, tree, model_paths)
                    tree.infos.append(alias)
                continue
            info = first[id(module)] = self._add(
                module, tree, shown, transparent=attribute is not None and original != "")
            if not info.transparent:
                self._place(info, module, tree, model_paths)
                tree.infos.append(info)

    @staticmethod
    def _place(info, module, tree, model_paths):
        """Sets the info's model path and its parent's. `model_paths` maps the qualified names
        placed so far to (model path, whether that module runs a forward of its own)."""
        name = info.qualified_name
        if name == "":
            info.model_path = tree.label
        else:
            parent_name = name.rpartition(".")[0]
            # The nearest placed ancestor that runs (transparent wrappers are never placed).
            cut = parent_name
            while cut and not (cut in model_paths and model_paths[cut][1]):
                cut = cut.rpartition(".")[0]
            base = model_paths[cut][0] if cut else tree.label
            relative = name[len(cut) + 1:] if cut else name
            info.model_path = f"{base}/{relative}"
            parent = parent_name
            while parent and parent not in model_paths:
                parent = parent.rpartition(".")[0]
            info.parent_model_path = model_paths[parent][0] if parent in model_paths else \
                tree.label
        model_paths[name] = (info.model_path, has_own_forward(module))

    def _add(self, module, tree, qualified_name, transparent):
        key = id(module)
        info = ModuleInfo(module, tree, qualified_name, transparent)
        info.ref = weakref.ref(module, functools.partial(self._forget, key))
        self._infos[key] = info
        return info

    def _forget(self, key, dead_ref):
        # A weakref callback: runs whenever the module is collected, on any thread.
        info = self._infos.get(key)
        if info is not None and info.ref is dead_ref:
            del self._infos[key]
