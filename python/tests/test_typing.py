"""The package's public API is typed: every function flopscope_torch exports and every public
method of Profiler has annotations for all its parameters and its return (both torches), and mypy
finds no error in the package with pyproject.toml's settings (where mypy is installed: Debian's
python3-mypy, scripts/setup_deps.sh; the torch 2 environment has none)."""

import importlib.util
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import flopscope_torch
from flopscope_torch import nvtx_backend, profiler

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def public_callables():
    yield from ((f"flopscope_torch.{name}", getattr(flopscope_torch, name))
                for name in flopscope_torch.__all__)
    for owner in (profiler.Profiler, nvtx_backend.NvtxBackend):
        for name, member in vars(owner).items():
            if not name.startswith("_") or name == "__init__":
                member = member.fget if isinstance(member, property) else member
                if inspect.isfunction(member):
                    yield f"{owner.__name__}.{name}", member
    yield "make_layout", profiler.make_layout
    for name in ("load_backend", "load_shim", "load_native", "shim_candidates", "tool_attached"):
        yield f"nvtx_backend.{name}", getattr(nvtx_backend, name)


@pytest.mark.parametrize("name,function", list(public_callables()),
                         ids=[name for name, _ in public_callables()])
def test_public_function_is_annotated(name, function):
    signature = inspect.signature(function)
    missing = [parameter.name for parameter in signature.parameters.values()
               if parameter.name != "self" and parameter.annotation is inspect.Parameter.empty]
    assert missing == [], f"{name}: parameters without a type: {missing}"
    assert signature.return_annotation is not inspect.Signature.empty, f"{name}: no return type"


def test_the_package_says_it_is_typed():
    package = Path(flopscope_torch.__file__).resolve().parent
    assert (package / "py.typed").is_file()
    assert (package / "_native.pyi").is_file()


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason=f"mypy is not installed for {sys.executable} (python3-mypy)")
def test_mypy_finds_no_error():
    package = Path(flopscope_torch.__file__).resolve().parent
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(PYPROJECT), "--cache-dir", "/dev/null",
         str(package)], capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout
