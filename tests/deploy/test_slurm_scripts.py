"""deploy/slurm's scripts on their own (tests/integration/test_slurm.py runs them in a real
Slurm): they parse, shellcheck finds nothing, and the TaskProlog prints exactly the two exports
for a node whose daemon serves, and nothing where the Prolog could not start one."""

import os
import shutil
import socket
import subprocess
import tempfile
import unittest
from pathlib import Path

SLURM_SCRIPTS = Path(__file__).resolve().parents[2] / "deploy" / "slurm"
SCRIPTS = ("prolog.sh", "epilog.sh", "task_prolog.sh")


class SlurmScriptsTest(unittest.TestCase):

    def test_scripts_parse_and_are_executable(self):
        for name in SCRIPTS:
            path = SLURM_SCRIPTS / name
            self.assertTrue(os.access(path, os.X_OK), f"{name} must be executable for slurmd")
            result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, f"{name}: {result.stderr}")

    def test_shellcheck(self):
        shellcheck = shutil.which("shellcheck")
        if shellcheck is None:
            self.skipTest("shellcheck is not installed (scripts/setup_deps.sh test set)")
        result = subprocess.run([shellcheck, "-x", *SCRIPTS], cwd=SLURM_SCRIPTS,
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def task_prolog(self, root, env):
        scripts = root / "scripts"
        scripts.mkdir(exist_ok=True)
        shutil.copy2(SLURM_SCRIPTS / "task_prolog.sh", scripts)
        (scripts / "flopscope-slurm.conf").write_text(
            f"prefix=/nonexistent\nrun_root={root}/run\ndata_root={root}/data\n")
        base = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": "77", "SLURMD_NODENAME": "gpu03"}
        result = subprocess.run([str(scripts / "task_prolog.sh")], env={**base, **env},
                                capture_output=True, text=True, timeout=30)
        self.assertEqual((result.returncode, result.stderr), (0, ""))
        return result.stdout

    def test_task_prolog_points_the_task_at_its_nodes_daemon(self):
        with tempfile.TemporaryDirectory(prefix="fs-tp-") as tmp:
            root = Path(tmp)
            # Before the Prolog's daemon exists: the task's environment is left alone.
            self.assertEqual(self.task_prolog(root, {"SLURM_STEP_ID": "3"}), "")
            run_dir = root / "run" / "gpu03" / "job-77"
            run_dir.mkdir(parents=True)
            listener = socket.socket(socket.AF_UNIX)
            listener.bind(str(run_dir / "flopscope.sock"))
            try:
                out = self.task_prolog(root, {"SLURM_STEP_ID": "3"})
            finally:
                listener.close()
            self.assertEqual(out.splitlines(),
                             [f"export FLOPSCOPE_SOCKET={run_dir}/flopscope.sock",
                              "export FLOPSCOPE_JOB_ID=77.3"])


if __name__ == "__main__":
    unittest.main()
