"""The `make dist` bundle is self-contained (ctest label `dist`).

Builds the bundle with scripts/make_dist.sh into a temporary folder, checks it is under 64 MiB
compressed and laid out as the README says, with RPATHs that point only inside it and no library
of the C/C++ runtime in it; then unpacks it into a fresh folder and, in a mount namespace where
Debian's libraries are hidden (isolated_run.py), runs the daemon, the client and an NVTX job under
`flopscope run`. The loader's own trace (LD_DEBUG=libs) of every process and the daemon's memory
map must name nothing outside the bundle, the runtime files and the test program's own; the job's
records must reach the daemon and show in `flopscope jobs` and `report`.

Skipped when this machine refuses the mount namespace (unshare or mount not permitted), with the
reason (tests/unittest_runner.py: exit 77 when every test skipped)."""

import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import unittest
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parents[2]
BUILD_DIR = Path(os.environ.get("FLOPSCOPE_BUILD_DIR", SOURCE_DIR / "build"))
MAX_BYTES = 64 * 1024 * 1024
SKIP = 77
# The C/C++ runtime: glibc's libraries, libstdc++ and libgcc_s. Never bundled, always visible.
RUNTIME_SONAMES = ["ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libmvec.so.1",
                   "libpthread.so.0", "libdl.so.2", "librt.so.1", "libresolv.so.2", "libutil.so.1",
                   "libanl.so.1", "libnss_files.so.2", "libnss_dns.so.2", "libstdc++.so.6",
                   "libgcc_s.so.1"]
APP = BUILD_DIR / "tests" / "nvtx_phases"
APP_ARGS = ["--before", "3", "--after", "2", "--threads", "2"]
ELF_MAGIC = b"\x7fELF"


def make_bundle(out_dir):
    """scripts/make_dist.sh into out_dir; (tarball path, the script's output)."""
    result = subprocess.run(["bash", str(SOURCE_DIR / "scripts" / "make_dist.sh"), str(BUILD_DIR),
                             str(out_dir)], capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise AssertionError(f"make_dist.sh failed:\n{result.stdout}\n{result.stderr}")
    tarballs = list(Path(out_dir).glob("flopscope-*-linux-x86_64.tar.gz"))
    if len(tarballs) != 1:
        raise AssertionError(f"expected one tarball in {out_dir}: {tarballs}")
    return tarballs[0], result.stdout


def unpack(tarball, into):
    with tarfile.open(tarball) as archive:
        archive.extractall(into)
    (root,) = [p for p in Path(into).iterdir() if p.is_dir()]
    return root


def elf_files(root):
    return [p for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()
            and p.read_bytes()[:4] == ELF_MAGIC]


def dynamic_section(path):
    """(needed sonames, rpath, runpath) from readelf -d."""
    text = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True,
                          check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", text)
    rpath = re.findall(r"\(RPATH\)\s+Library rpath: \[([^\]]*)\]", text)
    runpath = re.findall(r"\(RUNPATH\)\s+Library runpath: \[([^\]]*)\]", text)
    return needed, rpath, runpath


def loaded_objects(trace_dir):
    """{trace file name: [paths the loader ran initialisers of]} from LD_DEBUG=libs traces."""
    objects = {}
    for trace in sorted(Path(trace_dir).iterdir()):
        paths = []
        for line in trace.read_text(errors="replace").splitlines():
            match = re.search(r"calling init: (\S+)", line)
            if match:
                paths.append(match.group(1))
        objects[trace.name] = paths
    return objects


def unshare_refusal():
    """Why this machine cannot run the isolated scenario, or None when it can."""
    try:
        probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                               capture_output=True, text=True, timeout=30)
    except OSError as error:
        return f"unshare cannot run: {error}"
    if probe.returncode != 0:
        return f"unshare -m is not permitted here: {probe.stderr.strip()}"
    return None


class DistBundleTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="flopscope-dist-")
        cls.root = Path(cls._tmp.name)
        cls.tarball, cls.make_output = make_bundle(cls.root / "out")
        cls.bundle = unpack(cls.tarball, cls.root / "unpacked")

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def test_tarball_is_under_64_mib(self):
        size = self.tarball.stat().st_size
        print(f"\n{self.tarball.name}: {size / 2**20:.1f} MiB compressed")
        self.assertLess(size, MAX_BYTES)
        self.assertIn("KiB compressed", self.make_output)

    def test_layout(self):
        for path in ["bin/flopscoped", "bin/flopscope", "lib/libflopscope_inject.so",
                     "lib/libflopscope_transport.so", "lib/libflopscope_torch_nvtx.so",
                     "python/flopscope_torch/__init__.py", "python/autostart/sitecustomize.py",
                     "share/flopscope/deploy/README.md", "share/flopscope/README.md",
                     "share/flopscope/tests/gpu/acceptance.sh",
                     "share/flopscope/tests/gpu/flop_workload.cu",
                     "share/flopscope/tests/gpu/cuda_device_probe.h",
                     "share/flopscope/tests/integration/harness.py",
                     "share/flopscope/tests/unittest_runner.py",
                     "share/flopscope/BUNDLED_LIBRARIES"]:
            self.assertTrue((self.bundle / path).is_file(), path)
        self.assertTrue(os.access(self.bundle / "share/flopscope/tests/gpu/acceptance.sh", os.X_OK))

    def test_every_library_resolves_inside_the_bundle(self):
        lib = self.bundle / "lib"
        bundled = {p.name for p in lib.iterdir()}
        self.assertFalse(bundled & set(RUNTIME_SONAMES), "the C/C++ runtime must not be bundled")
        self.assertFalse([n for n in bundled if n.startswith("libcupti")], "libcupti is the node's")
        for path in elf_files(self.bundle):
            needed, rpath, runpath = dynamic_section(path)
            expected = "$ORIGIN/../lib" if path.parent.name == "bin" else "$ORIGIN"
            self.assertEqual(rpath, [expected], path)
            self.assertEqual(runpath, [], f"{path}: RUNPATH would yield to LD_LIBRARY_PATH")
            outside = [n for n in needed if n not in bundled and n not in RUNTIME_SONAMES]
            self.assertEqual(outside, [], f"{path.name} needs libraries the bundle lacks")

    def test_runs_where_the_system_libraries_are_hidden(self):
        refusal = unshare_refusal()
        if refusal:
            self.skipTest(refusal)
        result = self.run_isolated()
        if "skip" in result:
            self.skipTest(result["skip"])
        control = result["control"]
        self.assertNotEqual(control["returncode"], 0, "Debian's libraries are still visible")
        self.assertIn("cannot open shared object file", control["stderr"])
        steps = result["steps"]
        self.assertIsNotNone(steps.get("first_jobs"), f"daemon did not serve:\n{result['daemon_log']}")
        job = steps["job"]
        self.assertEqual(job["returncode"], 0, job)
        self.assertIn("nvtx_phases done", job["stdout"])
        self.assertEqual(steps["jobs"]["returncode"], 0, steps["jobs"])
        self.assertIn("dist-job", steps["jobs"]["stdout"])
        self.assertEqual(steps["report"]["returncode"], 0, steps["report"])
        report = json.loads(steps["report"]["stdout"])
        calls = {m["path"]: m["calls"] for m in report["modules"]}
        self.assertEqual(calls.get("before"), 3 * 2, calls)
        self.assertEqual(calls.get("after/work"), 2 * 2, calls)
        self.assertEqual(result["daemon_exit"], 0, result["daemon_log"])
        self.check_only_allowed_objects(result)

    def run_isolated(self):
        work = self.root / "isolated"
        traces = work / "traces"
        traces.mkdir(parents=True)
        spec = {"bundle": str(self.bundle), "work_dir": str(work), "trace_dir": str(traces),
                "result": str(work / "result.json"), "job": "dist-job",
                "app": [str(APP), *APP_ARGS], "runtime_sonames": RUNTIME_SONAMES,
                "app_sonames": [], "outer_mount_namespace": os.readlink("/proc/self/ns/mnt"),
                "control": str(BUILD_DIR / "bin" / "flopscope")}
        (work / "spec.json").write_text(json.dumps(spec))
        run = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable,
                              str(Path(__file__).with_name("isolated_run.py")),
                              str(work / "spec.json")],
                             capture_output=True, text=True, timeout=300)
        self.assertIn(run.returncode, (0, SKIP), f"isolated_run.py:\n{run.stdout}\n{run.stderr}")
        self.traces = traces
        return json.loads((work / "result.json").read_text())

    def check_only_allowed_objects(self, result):
        bundle = str(self.bundle.resolve()) + "/"
        allowed = {os.path.realpath(p) for p in result["visible_libraries"]}
        allowed.add(os.path.realpath(APP))

        def outside(paths):
            return sorted({p for p in paths if not os.path.realpath(p).startswith(bundle)
                           and os.path.realpath(p) not in allowed})

        objects = loaded_objects(self.traces)
        self.assertTrue(any(n.startswith("daemon") for n in objects), sorted(objects))
        for name, paths in objects.items():
            if not name.startswith("control"):
                self.assertEqual(outside(paths), [], f"{name} loaded these from outside the bundle")
        job_objects = [p for n, paths in objects.items() if n.startswith("job") for p in paths]
        for library in ("libflopscope_inject.so", "libflopscope_transport.so", "libgrpc"):
            self.assertTrue([p for p in job_objects if library in p and p.startswith(bundle)],
                            f"the job did not load {library} from the bundle: {job_objects}")
        daemon_objects = [p for n, paths in objects.items() if n.startswith("daemon") for p in paths]
        self.assertTrue([p for p in daemon_objects if "libgrpc" in p and p.startswith(bundle)],
                        daemon_objects)
        mapped = [p for p in result["daemon_maps"] if ".so" in p]
        self.assertEqual(outside(mapped), [], "the daemon maps files from outside the bundle")


def setUpModule():
    if not (BUILD_DIR / "bin" / "flopscoped").exists() or not APP.exists():
        raise RuntimeError(f"{BUILD_DIR} is not built (flopscoped, tests/nvtx_phases)")


if __name__ == "__main__":
    sys.path.insert(0, str(SOURCE_DIR / "tests"))
    import unittest_runner  # noqa: E402
    sys.exit(unittest_runner.run_module(__name__))
