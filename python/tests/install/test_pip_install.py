"""flopscope_torch as people install it (python/pyproject.toml): `pip install` into a throwaway
virtual environment, offline (--no-index --no-build-isolation: the environment's own setuptools),
then a model trained with the installed copy under a recording NVTX tool (installed_job.py).

- With a compiler: both native parts are built into the package (build_notes.txt says so), the
  native hooks run, and every range and mark the installed native module and shim send to the
  NVTX tool is one the Recorder sees, the module paths those of the model.
- Without one (CC and CXX are `false`): the install still succeeds, as pure Python; the notes and
  `python -m flopscope_torch` say why, and the pure-Python hooks record the same ranges (the
  shim then comes from FLOPSCOPE_TORCH_NVTX_LIB, as `flopscope run --torch` gives it).

The environment sees the torch of the Python running this test: Debian's through
--system-site-packages, or, run from the torch 2 environment (the *_torch2 test), that
environment's site-packages through a .pth file. The source is copied first, so the checkout gets
no build/ or egg-info. Registered as ctest flopscope_torch_install (python/CMakeLists.txt), which
gives FLOPSCOPE_NVTX_RECORDER, FLOPSCOPE_TORCH_NVTX_LIB and FLOPSCOPE_VERSION (CMake's)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[2]  # python/: pyproject.toml, setup.py, the package
TESTS = SOURCE / "tests"
JOB = Path(__file__).resolve().parent / "installed_job.py"
SHIM = "libflopscope_torch_nvtx.so"
RECORDER = os.environ.get("FLOPSCOPE_NVTX_RECORDER", "")
BUILD_SHIM = os.environ.get("FLOPSCOPE_TORCH_NVTX_LIB", "")
TIMEOUT = 300
STEPS = 2  # installed_job.py's

pytestmark = pytest.mark.skipif(
    not (RECORDER and Path(RECORDER).is_file()),
    reason="FLOPSCOPE_NVTX_RECORDER (the build's libflopscope_nvtx_recorder.so) is not set; "
           "ctest sets it")


def copy_source(destination):
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "build_notes.txt", "build",
                                    "*.egg-info")
    destination.mkdir()
    for name in ("pyproject.toml", "setup.py"):
        shutil.copy2(SOURCE / name, destination / name)
    for name in ("flopscope_torch", "native", "nvtx_shim"):
        shutil.copytree(SOURCE / name, destination / name, ignore=ignore)
    return destination


def make_environment(path):
    """A virtual environment seeing this Python's torch; returns its python."""
    if sys.prefix == sys.base_prefix:  # a system Python: Debian's torch, pip, setuptools, wheel
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(path)],
                       check=True, timeout=TIMEOUT)
    else:  # a virtual environment itself (torch 2): its packages, pip and setuptools included
        subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(path)],
                       check=True, timeout=TIMEOUT)
        python = path / "bin" / "python"
        purelib = subprocess.run([str(python), "-c", "import sysconfig; "
                                  "print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        # Every folder of packages this Python sees: its own, and the system's where it was made
        # with --system-site-packages.
        seen = [entry for entry in sys.path if entry.endswith(("site-packages", "dist-packages"))]
        Path(purelib, "outer_environment.pth").write_text("\n".join(seen) + "\n")
    return path / "bin" / "python"


def child_environment(**extra):
    """The environment of every command run in the throwaway one: nothing of the build tree."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("PYTHONPATH", "FLOPSCOPE_TORCH_NVTX_LIB", "FLOPSCOPE_TORCH_NATIVE",
                                  "NVTX_INJECTION64_PATH", "PYTHONHOME")}
    environment.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", **extra)
    return environment


def pip_install(python, source, environment):
    result = subprocess.run(
        [str(python), "-m", "pip", "install", "-v", "--no-index", "--no-build-isolation",
         "--no-cache-dir", str(source)],
        capture_output=True, text=True, env=environment, check=False, timeout=TIMEOUT)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-6000:]
    return result.stdout + result.stderr


def installed_package(python):
    code = "import flopscope_torch, os; print(os.path.dirname(flopscope_torch.__file__))"
    return Path(subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                               env=child_environment(), check=True,
                               cwd=python.parent).stdout.strip())


def package_status(python):
    """What `python -m flopscope_torch` says, run outside the source tree."""
    return subprocess.run([str(python), "-m", "flopscope_torch"], capture_output=True, text=True,
                          env=child_environment(), check=True, cwd=python.parent).stdout


def build_notes(package):
    lines = (package / "build_notes.txt").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines)


def run_job(python, tmp_path, **extra):
    recorded = tmp_path / "nvtx_recorded.tsv"
    environment = child_environment(PYTHONPATH=str(TESTS), NVTX_INJECTION64_PATH=RECORDER,
                                    NVTX_RECORDER_OUT=str(recorded), OMP_NUM_THREADS="1", **extra)
    result = subprocess.run([str(python), str(JOB)], capture_output=True, text=True,
                            env=environment, cwd=tmp_path, check=False, timeout=TIMEOUT)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    return report, recorded.read_text().splitlines()


def tool_counts(lines, kind):
    """The recording tool's `kind` records as {"domain\\ttext": count}."""
    counts = {}
    for line in lines:
        fields = line.split("\t")
        if fields[0] == kind:
            counts["\t".join(fields[1:-1])] = int(fields[-1])
    return counts


# Fields of a mark that differ between the job's two trainings (the Recorder's and the tool's): the
# memory ledger's own cost and the process's RSS high-water mark, measured at the time.
VOLATILE_MARK_FIELDS = ("cost_us:", "rss_high_water:")


def stable(mark):
    """`mark` ("domain\tkey=value") without its VOLATILE_MARK_FIELDS."""
    return " ".join(word for word in mark.split(" ") if not word.startswith(VOLATILE_MARK_FIELDS))


def check_job(report, recorded, package):
    assert Path(report["package"]).parent == package
    assert report["version"] == report["metadata_version"] == os.environ["FLOPSCOPE_VERSION"]
    assert report["still_open"] == 0
    # The Recorder's ranges: one per called module and step in forward and one in backward. A
    # range's key is its path on its thread's stack (the names pushed, joined by '/'), so a module
    # range's key ends with the module's own path.
    module_ranges = {key[1:]: count for key, count in report["ranges"].items()
                     if key.startswith("\t")}
    for path in report["module_paths"]:
        calls = sum(count for key, count in module_ranges.items()
                    if key == path or key.endswith(f"/{path}"))
        assert calls == 2 * STEPS, (path, calls)
    assert report["ranges"]["flopscope\tstep"] == STEPS
    # What reached the NVTX tool is what the Recorder saw: the same ranges, as often, and marks.
    assert tool_counts(recorded, "unmatched_pop") == {}
    assert tool_counts(recorded, "range") == report["ranges"]
    assert ({stable(mark): count for mark, count in tool_counts(recorded, "mark").items()} ==
            {stable(f"flopscope\t{mark}"): count for mark, count in report["marks"].items()})


def test_with_a_compiler_the_native_parts_are_built_and_run(tmp_path):
    python = make_environment(tmp_path / "venv")
    pip_install(python, copy_source(tmp_path / "src"), child_environment())
    package = installed_package(python)
    assert package.is_relative_to(tmp_path / "venv")
    notes = build_notes(package)
    assert sorted(notes) == sorted([SHIM, next(p.name for p in package.glob("_native*.so"))])
    assert all(note.startswith("built with NVTX headers from ") for note in notes.values()), notes
    assert (package / "py.typed").is_file()

    status = package_status(python)
    assert f"native hooks: {package}/_native" in status
    assert f"NVTX shim: {package / SHIM}" in status

    report, recorded = run_job(python, tmp_path)
    assert report["native"] and report["enabled_native"]
    assert report["backend"] == (f"module ranges via flopscope_torch._native; flopscope domain "
                                 f"via {package / SHIM}")
    check_job(report, recorded, package)


def test_without_a_compiler_it_installs_as_pure_python(tmp_path):
    python = make_environment(tmp_path / "venv")
    output = pip_install(python, copy_source(tmp_path / "src"),
                         child_environment(CC="false", CXX="false"))
    assert "not built, could not be compiled" in output
    package = installed_package(python)
    assert list(package.glob("*.so")) == []
    notes = build_notes(package)
    assert len(notes) == 2 and all(note.startswith("not built: could not be compiled")
                                   for note in notes.values()), notes

    status = package_status(python)
    assert "native hooks: none, the pure-Python hooks run: not built: could not be compiled" \
        in status
    assert "NVTX shim: none: not built: could not be compiled" in status

    if not BUILD_SHIM:
        pytest.skip("FLOPSCOPE_TORCH_NVTX_LIB (the build's shim) is not set; ctest sets it")
    report, recorded = run_job(python, tmp_path, FLOPSCOPE_TORCH_NVTX_LIB=BUILD_SHIM)
    assert not report["native"] and not report["enabled_native"]
    assert f"flopscope domain via {BUILD_SHIM}" in report["backend"]
    check_job(report, recorded, package)
