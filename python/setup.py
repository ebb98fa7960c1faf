"""Builds flopscope_torch's native parts for `pip install` (pyproject.toml has everything else).

    flopscope_torch/_native.<soabi>.so           native/fast_hooks.cc: the hooks' hot paths
    flopscope_torch/libflopscope_torch_nvtx.so   nvtx_shim/: the `flopscope` domain, via ctypes

Each needs a C++20 compiler and NVTX v3's headers (nvtx3/nvToolsExt.h, header-only), the first
also Python's headers. Either one that cannot be built is left out, not an error: the package then
runs its pure-Python hooks (module_hooks.py), and without the shim module ranges go through
torch.cuda.nvtx, on CUDA builds of torch. Why a part was left out is printed (`pip install -v`)
and written to flopscope_torch/build_notes.txt, which `python -m flopscope_torch` shows.

NVTX's headers are looked for in $FLOPSCOPE_NVTX_INCLUDE_DIR, $CUDA_HOME/include,
$CUDA_PATH/include, /usr/local/cuda/include, then in the `nvidia` wheels PyTorch's CUDA builds
install (site-packages/nvidia/*/include).
"""

import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError

HERE = Path(__file__).resolve().parent
PACKAGE = "flopscope_torch"
SHIM = "libflopscope_torch_nvtx"
NOTES = "build_notes.txt"
NVTX_HEADER = Path("nvtx3") / "nvToolsExt.h"
# What CMake gives both targets (CMakeLists.txt, python/CMakeLists.txt): C++20, and only what is
# meant to be exported visible, so this NVTX instance never interposes on another library's.
CXX_FLAGS = ["-std=c++20", "-fvisibility=hidden", "-fvisibility-inlines-hidden", "-O2"]


def nvtx_include_dirs():
    """Folders holding nvtx3/nvToolsExt.h, in the order tried (see the module docstring)."""
    roots = [os.environ.get("FLOPSCOPE_NVTX_INCLUDE_DIR")]
    roots += [os.path.join(os.environ[name], "include") for name in ("CUDA_HOME", "CUDA_PATH")
              if os.environ.get(name)]
    roots.append("/usr/local/cuda/include")
    for entry in sys.path:
        nvidia = Path(entry or os.curdir) / "nvidia"
        if nvidia.is_dir():
            roots += sorted(str(include) for include in nvidia.glob("*/include"))
    return [root for root in roots if root and (Path(root) / NVTX_HEADER).is_file()]


class OptionalBuildExt(build_ext):
    """build_ext that leaves out, saying why, each native part it cannot build."""

    def run(self):
        self.notes = {}
        super().run()
        notes = Path(self.build_lib) / PACKAGE / NOTES
        notes.parent.mkdir(parents=True, exist_ok=True)
        notes.write_text("".join(f"{name}: {note}\n" for name, note in self.notes.items()))
        if self.inplace:  # `pip install -e`: the notes belong beside the package itself
            (HERE / PACKAGE / NOTES).write_text(notes.read_text())

    def build_extension(self, ext):
        name = self.get_ext_filename(ext.name).rsplit("/", 1)[-1]
        include_dirs = nvtx_include_dirs()
        if not include_dirs:
            self._left_out(name, f"no NVTX headers ({NVTX_HEADER}): set CUDA_HOME or "
                                 "FLOPSCOPE_NVTX_INCLUDE_DIR")
            return
        ext.include_dirs = include_dirs[:1] + ext.include_dirs
        try:
            super().build_extension(ext)
        except (CCompilerError, ExecError, PlatformError, OSError) as error:
            self._left_out(name, f"could not be compiled ({type(error).__name__}: {error})")
            return
        self.notes[name] = f"built with NVTX headers from {include_dirs[0]}"

    def get_ext_filename(self, fullname):
        # The shim is a plain shared library loaded by ctypes: no Python tag in its name.
        # (setuptools asks with the full name, distutils' get_ext_fullpath with the last part.)
        *package, last = fullname.split(".")
        if last == SHIM:
            return os.path.join(*package, f"{SHIM}.so")
        return super().get_ext_filename(fullname)

    def _left_out(self, name, why):
        self.notes[name] = f"not built: {why}"
        without = ("the pure-Python hooks run (module_hooks.py)" if name.startswith("_native")
                   else "module ranges go through torch.cuda.nvtx on CUDA builds of torch, and "
                        "steps, phases and marks are off unless FLOPSCOPE_TORCH_NVTX_LIB names "
                        "a copy")
        print(f"flopscope_torch: {name} not built, {why}; installed without it: {without}",
              file=sys.stderr)


setup(
    ext_modules=[
        Extension(f"{PACKAGE}._native", ["native/fast_hooks.cc"], language="c++",
                  extra_compile_args=CXX_FLAGS, libraries=["dl"]),
        Extension(f"{PACKAGE}.{SHIM}", ["nvtx_shim/torch_nvtx_shim.cc"], language="c++",
                  extra_compile_args=CXX_FLAGS, libraries=["dl"]),
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
