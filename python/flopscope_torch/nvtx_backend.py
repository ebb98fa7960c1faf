"""Where flopscope_torch's NVTX calls go.

Module ranges go to NVTX's default domain: through the package's native module
(flopscope_torch._native, which also runs the hooks' hot paths; the cheapest call from Python)
when it was built for this Python, else PyTorch's own NVTX binding on CUDA builds
(torch.cuda.nvtx), otherwise through libflopscope_torch_nvtx.so, a tiny library the project
builds on NVTX's headers. Steps, phases and metadata marks go to the `flopscope` domain, which
only that library offers (torch.cuda.nvtx has no domains). All are NVTX instances that read
NVTX_INJECTION64_PATH on their first call, so the injector (or Nsight Systems) sees every call;
without a tool each call is an NVTX no-op.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, List, Mapping, Optional, Tuple

SHIM_ENV = "FLOPSCOPE_TORCH_NVTX_LIB"
SHIM_NAME = "libflopscope_torch_nvtx.so"
SHIM_ABI_VERSION = 1
NATIVE_ENV = "FLOPSCOPE_TORCH_NATIVE"
NATIVE_ABI_VERSION = 2
# Set by the injector's constructor under LD_PRELOAD (and by Nsight Systems): an NVTX tool is
# listening. Without one, recording ranges would only cost time.
TOOL_ENV = "NVTX_INJECTION64_PATH"


class NvtxUnavailable(Exception):
    """Neither PyTorch's NVTX nor the shim library can be used; the message says why."""


def tool_attached(environ: Mapping[str, str] = os.environ) -> bool:
    return bool(environ.get(TOOL_ENV))


def shim_candidates(environ: Mapping[str, str] = os.environ) -> List[Path]:
    """The paths tried for the shim, in order: $FLOPSCOPE_TORCH_NVTX_LIB (set by
    `flopscope run --torch`) alone when set, else beside this package, else the build tree's lib/
    (<build>/python/flopscope_torch -> <build>/lib)."""
    explicit = environ.get(SHIM_ENV)
    if explicit:
        return [Path(explicit)]
    here = Path(__file__).resolve().parent
    return [here / SHIM_NAME, here.parent.parent / "lib" / SHIM_NAME]


class NvtxBackend:
    """The five NVTX calls the package makes.

    `push(encode(name))` / `pop()`: a module range in the default domain; callers cache
    `encode(name)` since module names repeat every step. `phase_push(name)` / `phase_pop()`: a
    step or phase range in the `flopscope` domain. `mark(text)`: a `key=value` metadata mark
    there. Push and pop act on the calling thread's NVTX stack: callers pair them per thread.
    """

    def __init__(self, push: Callable[[Any], object], pop: Callable[[], object],
                 encode: Callable[[str], Any], phase_push: Callable[[str], object],
                 phase_pop: Callable[[], object], mark: Callable[[str], object],
                 description: str) -> None:
        self.push = push
        self.pop = pop
        self.encode = encode
        self.phase_push = phase_push
        self.phase_pop = phase_pop
        self.mark = mark
        self.description = description


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "replace")


def _no_op(*_: object) -> None:
    return None


def load_shim(environ: Mapping[str, str] = os.environ) -> Tuple[ctypes.PyDLL, Path]:
    """The shim library (ctypes), or raises NvtxUnavailable naming the paths tried."""
    problems = []
    for path in shim_candidates(environ):
        if not path.is_file():
            problems.append(f"{path}: not found")
            continue
        try:
            # PyDLL keeps the GIL across the call: each NVTX call is far shorter than releasing
            # and taking back the GIL, and it never blocks (the injector only appends to a
            # per-thread buffer).
            library = ctypes.PyDLL(str(path))
        except OSError as error:
            problems.append(f"{path}: {error}")
            continue
        version = library.flopscope_torch_abi_version()
        if version != SHIM_ABI_VERSION:
            problems.append(f"{path}: ABI version {version}, this package needs {SHIM_ABI_VERSION}")
            continue
        for name in ("flopscope_torch_push", "flopscope_torch_phase_push", "flopscope_torch_mark"):
            function = getattr(library, name)
            function.argtypes = [ctypes.c_char_p]
            function.restype = None
        for name in ("flopscope_torch_pop", "flopscope_torch_phase_pop"):
            function = getattr(library, name)
            function.argtypes = []
            function.restype = None
        return library, path
    raise NvtxUnavailable(f"no usable {SHIM_NAME} ({'; '.join(problems)}); set {SHIM_ENV}")


def load_native(environ: Mapping[str, str] = os.environ) -> Optional[ModuleType]:
    """flopscope_torch._native (native/fast_hooks.cc), or None: not built for this Python, another
    ABI version, or switched off with FLOPSCOPE_TORCH_NATIVE=0 (the pure-Python paths then run)."""
    if environ.get(NATIVE_ENV, "1") == "0":
        return None
    try:
        from . import _native  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    return _native if getattr(_native, "ABI_VERSION", None) == NATIVE_ABI_VERSION else None


def torch_nvtx() -> Optional[Any]:
    """PyTorch's NVTX binding on CUDA builds, else None (CPU builds have none)."""
    try:
        from torch._C import _nvtx  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    needed = ("rangePushA", "rangePop")
    return _nvtx if all(hasattr(_nvtx, name) for name in needed) else None


def load_backend(environ: Mapping[str, str] = os.environ,
                 prefer_torch: bool = True) -> NvtxBackend:
    """The backend for this process. Module ranges use the native module when there is one,
    else PyTorch's NVTX when `prefer_torch` and PyTorch was built with CUDA, else the shim; the
    `flopscope` domain always needs the shim and becomes a no-op (described in `description`)
    when there is none. Raises NvtxUnavailable when no module-range path exists."""
    try:
        shim, shim_path = load_shim(environ)
        shim_problem = None
    except NvtxUnavailable as error:
        shim, shim_path, shim_problem = None, None, str(error)
    own = load_native(environ)
    native = torch_nvtx() if prefer_torch and own is None else None
    if own is None and native is None and shim is None:
        raise NvtxUnavailable(f"PyTorch has no NVTX (CPU build) and {shim_problem}")

    encode: Callable[[str], Any]
    if own is not None:
        push, pop, encode = own.nvtx_push, own.nvtx_pop, _utf8
        modules = "flopscope_torch._native"
    elif native is not None:
        push, pop, encode, modules = native.rangePushA, native.rangePop, str, "torch.cuda.nvtx"
    else:
        assert shim is not None  # one of the three, checked above
        push, pop, encode = shim.flopscope_torch_push, shim.flopscope_torch_pop, _utf8
        modules = str(shim_path)
    if shim is None:
        return NvtxBackend(push, pop, encode, _no_op, _no_op, _no_op,
                           f"module ranges via {modules}; steps, phases and metadata off: "
                           f"{shim_problem}")
    phase_push, phase_pop, mark = (shim.flopscope_torch_phase_push,
                                   shim.flopscope_torch_phase_pop, shim.flopscope_torch_mark)
    return NvtxBackend(push, pop, encode,
                       lambda name: phase_push(_utf8(name)), phase_pop,
                       lambda text: mark(_utf8(text)),
                       f"module ranges via {modules}; flopscope domain via {shim_path}")
