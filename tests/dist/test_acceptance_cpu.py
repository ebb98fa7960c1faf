"""Rehearses tests/gpu/acceptance.sh on its CPU-only path (ctest label `dist`).

Builds the bundle with scripts/make_dist.sh, runs the bundle's own acceptance.sh on the tarball
with OUT in a temporary folder, as on a GPU node but without a GPU (on a machine that has one,
the script gets a PATH without nvidia-smi, so it takes the CPU path all the same). It must exit 0, write
summary.txt, summary.tsv and acceptance.tar.gz, and its table must be well formed: every row
PASS, FAIL or SKIPPED, every non-PASS row with a reason; the CPU rows (bundle, daemon, client,
counters-GH100, and torch-cpu-job where this python has torch) PASS, and every GPU row is
SKIPPED with the reason that there is no GPU."""

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_dist_bundle import make_bundle  # noqa: E402

SOURCE_DIR = Path(__file__).resolve().parents[2]
CPU_ROWS = ["bundle", "daemon", "client", "counters-GH100"]
GPU_ROWS = ["nvcc-build", "gpu-tests-kernels", "gpu-tests-flops", "ncu-compare", "torch-gpu-job",
            "torch-after-window", "overhead", "recording"]
STATUSES = ("PASS", "FAIL", "SKIPPED")
# The torch the job runs on: Debian's python3-torch, or the torch 2 environment's for
# acceptance_cpu_torch2 (tests/dist/CMakeLists.txt).
TORCH_PYTHON = os.environ.get("FLOPSCOPE_TORCH_TEST_PYTHON", "/usr/bin/python3")


def python_has_torch(python):
    return subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0


def path_without_nvidia_smi():
    """A PATH whose folders hold no nvidia-smi (a folder that has one is left out)."""
    folders = [d for d in os.environ.get("PATH", "/usr/bin:/bin").split(":")
               if d and not (Path(d) / "nvidia-smi").exists()]
    return ":".join(folders)


class AcceptanceCpuPathTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="flopscope-acceptance-")
        cls.root = Path(cls._tmp.name)
        tarball, _ = make_bundle(cls.root / "dist")
        cls.out = cls.root / "out"
        env = dict(os.environ, OUT=str(cls.out), PYTHON=TORCH_PYTHON,
                   PATH=path_without_nvidia_smi(), FLOPSCOPE_ACCEPTANCE_BUDGET_S="300")
        with tarfile.open(tarball) as archive:
            script = next(m.name for m in archive.getmembers()
                          if m.name.endswith("share/flopscope/tests/gpu/acceptance.sh"))
            archive.extract(script, cls.root / "script", set_attrs=False)
        cls.script = subprocess.run(["bash", str(cls.root / "script" / script), str(tarball)],
                                 capture_output=True, text=True, env=env, timeout=600,
                                 cwd=cls.root)
        cls.rows = {}
        tsv = cls.out / "summary.tsv"
        if tsv.exists():
            for line in tsv.read_text().splitlines():
                fields = line.split("\t")
                cls.rows[fields[0]] = fields

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def explain(self):
        log_dir = self.out / "logs"
        logs = sorted(p.name for p in log_dir.iterdir()) if log_dir.exists() else []
        return f"exit {self.script.returncode}\n{self.script.stdout}\n{self.script.stderr}\nlogs: {logs}"

    def test_exits_0_and_writes_its_files(self):
        self.assertEqual(self.script.returncode, 0, self.explain())
        for name in ("summary.txt", "summary.tsv", "acceptance.tar.gz"):
            self.assertTrue((self.out / name).is_file(), name)
        with tarfile.open(self.out / "acceptance.tar.gz") as archive:
            names = archive.getnames()
        self.assertIn("./summary.tsv", names)
        self.assertTrue([n for n in names if n.startswith("./logs/")], names)

    def test_table_is_well_formed(self):
        lines = (self.out / "summary.tsv").read_text().splitlines()
        self.assertTrue(lines, self.explain())
        for line in lines:
            fields = line.split("\t")
            self.assertEqual(len(fields), 3, line)
            self.assertIn(fields[1], STATUSES, line)
            if fields[1] != "PASS":
                self.assertTrue(fields[2].strip(), f"{fields[0]} {fields[1]} without a reason")
        text = (self.out / "summary.txt").read_text()
        self.assertIn("CHECK", text.splitlines()[0])
        for name, status, _ in (line.split("\t") for line in lines):
            self.assertRegex(text, rf"(?m)^{name}\s+{status}\b")

    def test_cpu_rows_pass(self):
        expected = CPU_ROWS + (["torch-cpu-job"] if python_has_torch(TORCH_PYTHON) else [])
        for name in expected:
            self.assertIn(name, self.rows, self.explain())
            self.assertEqual(self.rows[name][1], "PASS", self.rows[name])

    def test_gpu_rows_are_skipped_with_the_reason(self):
        for name in GPU_ROWS:
            self.assertIn(name, self.rows, self.explain())
            self.assertEqual(self.rows[name][1], "SKIPPED", self.rows[name])
            self.assertRegex(self.rows[name][2], "nvidia-smi|no GPU")


def setUpModule():
    if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                                                     text=True).stdout.startswith("GPU "):
        print("note: this machine has a GPU; the rehearsal hides nvidia-smi from the script")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import unittest_runner  # noqa: E402
    sys.exit(unittest_runner.run_module(__name__))
