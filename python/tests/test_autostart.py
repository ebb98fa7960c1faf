"""sitecustomize + autostart in a fresh interpreter, as `flopscope run --torch` sets it up."""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

import flopscope_torch

PYTHON_DIR = Path(flopscope_torch.__file__).resolve().parent.parent
AUTOSTART_DIR = PYTHON_DIR / "autostart"

SCRIPT = textwrap.dedent("""
    import sys
    import flopscope_torch
    print("before", "torch" in sys.modules, flopscope_torch.is_enabled())
    if sys.argv[1] == "torch":
        import torch
        print("after", flopscope_torch.is_enabled(), type(torch.__spec__.loader).__name__)
    print("end", "torch" in sys.modules)
""")


class AutostartTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="flopscope-autostart-")
        self.root = Path(self._tmp.name)
        shadowed = self.root / "shadowed"
        shadowed.mkdir()
        # Another sitecustomize later on the path: Python would have run it; ours must too.
        (shadowed / "sitecustomize.py").write_text("print('shadowed sitecustomize ran')\n")
        self.script = self.root / "job.py"
        self.script.write_text(SCRIPT)
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = os.pathsep.join([str(AUTOSTART_DIR), str(PYTHON_DIR),
                                                  str(shadowed)])
        # A tool "attached" that cannot load: NVTX stays a no-op, the hooks still turn on.
        self.env["NVTX_INJECTION64_PATH"] = str(self.root / "no-such-tool.so")

    def tearDown(self):
        self._tmp.cleanup()

    def run_job(self, *args, **env):
        result = subprocess.run([sys.executable, str(self.script), *args], capture_output=True,
                                text=True, env={**self.env, **env}, timeout=120, check=False)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout.splitlines()

    @unittest.skipUnless(os.environ.get("FLOPSCOPE_TORCH_NVTX_LIB"), "needs the built shim")
    def test_hooks_turn_on_when_torch_is_imported(self):
        self.assertEqual(self.run_job("torch"), [
            "shadowed sitecustomize ran", "before False False", "after True SourceFileLoader",
            "end True"])

    def test_a_process_without_torch_never_imports_it(self):
        self.assertEqual(self.run_job("plain"), [
            "shadowed sitecustomize ran", "before False False", "end False"])

    def test_flopscope_torch_0_turns_autostart_off(self):
        self.assertEqual(self.run_job("torch", FLOPSCOPE_TORCH="0")[2],
                         "after False SourceFileLoader")


if __name__ == "__main__":
    unittest.main()
