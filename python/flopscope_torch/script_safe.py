"""Wrappers of torch functions that TorchScript still compiles as the function they wrap.

The FLOPs estimate (flop_estimate) replaces `torch.nn.functional.linear`, `torch.matmul` and the
like with Python wrappers. Code that `torch.jit.script` compiles afterwards looks those names up
and finds the wrapper, which it cannot compile (`*args`). `make()` gives every wrapper what the
scripting frontend (torch/jit: `_find_builtin`, `_try_get_dispatched_fn`, `_get_overloads`,
`script`) checks before it compiles, so it resolves the wrapper exactly as the original:

- a builtin original (`F.linear` is `torch._C._nn.linear`, `torch.matmul`): the wrapper is
  registered as the same builtin operator (`aten::linear`), so scripted code calls the operator;
- a boolean-dispatched original (`F.max_pool2d`, whose `return_indices` picks the function): the
  wrapper gets the same dispatch entry;
- a Python-function original (`F.relu`, `F.layer_norm`): the wrapper carries the marks of
  torch.jit's own script-if-tracing wrappers (`__original_fn`), so `torch.jit.script` compiles
  the original; it has the original's name, module and globals, and `__wrapped__` for its
  source and signature, so an overloaded original (`F.interpolate`) compiles its overloads
  through the wrapper too; compiled overloads are shared both ways (`share_overloads`).

Tracing (`torch.jit.trace`) and torch.fx run the wrapper as Python, which calls the original.
`forget()` undoes the registrations when the wrapper is removed (the builtin table is keyed by
`id`, which a later object may reuse). These are torch's private tables (checked against torch
1.13); where they are missing, originals are left unwrapped (`make` returns None).
"""

import functools
import types

from torch import _jit_internal
from torch.jit import _builtins

try:
    from torch.jit import _state as _jit_state
except ImportError:  # pragma: no cover - older torch
    _jit_state = None


# torch's own tables (see the module docstring):
# pylint: disable=protected-access


def _kind(original):
    """'builtin', 'dispatched', 'function', or None (a kind this module cannot make safe, or a
    torch without the tables read here)."""
    try:
        if _builtins._find_builtin(original) is not None:
            return "builtin"
        if _jit_internal._try_get_dispatched_fn(original) is not None:
            return "dispatched"
    except AttributeError:
        return None
    if isinstance(original, types.FunctionType):
        return "function"
    return None


def make(original, body):
    """A wrapper that runs `body` (a plain function taking (*args, **kwargs) that uses no global
    name of its own module: it is re-made with the original's globals) and that TorchScript
    resolves as `original`; None when `original` is of a kind TorchScript would not accept."""
    kind = _kind(original)
    if kind is None:
        return None
    if kind == "builtin":
        wrapper = types.FunctionType(body.__code__, body.__globals__, body.__name__,
                                     body.__defaults__, body.__closure__)
        functools.update_wrapper(wrapper, original)
        _builtins._register_builtin(wrapper, _builtins._find_builtin(original))
        return wrapper
    # The original's globals: TorchScript resolves the names of the source it compiles (the
    # original's, through __wrapped__) in the wrapper's globals and closure.
    wrapper = types.FunctionType(body.__code__, original.__globals__, original.__name__,
                                 body.__defaults__, body.__closure__)
    functools.update_wrapper(wrapper, original)
    if kind == "dispatched":
        _jit_internal.boolean_dispatched[wrapper] = _jit_internal._try_get_dispatched_fn(original)
    else:
        setattr(wrapper, "__original_fn", original)  # what torch.jit.script compiles instead
        setattr(wrapper, "__script_if_tracing_wrapper", True)
        share_overloads(original, wrapper)
    return wrapper


def share_overloads(source, target):
    """Compiled overloads of `source` serve `target` too, when `target` has none yet (compiling
    an overloaded function's overloads once clears their declarations)."""
    caching = getattr(_jit_state, "_jit_function_overload_caching", None)
    if caching is None:
        return
    compiled = caching.get(source)
    if compiled and target not in caching:
        caching[target] = compiled


def forget(wrapper, original):
    """Undoes make()'s registrations of `wrapper`, before the wrapper goes."""
    _builtins._get_builtin_table().pop(id(wrapper), None)
    _jit_internal.boolean_dispatched.pop(wrapper, None)
    share_overloads(wrapper, original)
