"""The shim library and backend selection."""

import os
import subprocess
import sys
import unittest
from pathlib import Path

from flopscope_torch import nvtx_backend

SHIM = os.environ.get(nvtx_backend.SHIM_ENV)


class NvtxBackendTest(unittest.TestCase):
    @unittest.skipUnless(SHIM, "FLOPSCOPE_TORCH_NVTX_LIB not set (ctest sets it)")
    def test_shim_calls_are_no_ops_without_a_tool(self):
        backend = nvtx_backend.load_backend({nvtx_backend.SHIM_ENV: SHIM})
        self.assertIn(SHIM, backend.description)
        backend.push(backend.encode("module"))
        backend.phase_push("step")
        backend.mark("batch_size=4")
        backend.phase_pop()
        backend.pop()

    @unittest.skipUnless(SHIM, "FLOPSCOPE_TORCH_NVTX_LIB not set (ctest sets it)")
    def test_shim_exports_only_its_own_functions(self):
        symbols = subprocess.run(["nm", "-D", "--defined-only", SHIM], capture_output=True,
                                 text=True, check=True).stdout.split()
        exported = sorted(s for s in symbols if s.startswith("flopscope_") or s.startswith("nvtx"))
        self.assertEqual(exported, sorted([
            "flopscope_torch_abi_version", "flopscope_torch_mark", "flopscope_torch_phase_pop",
            "flopscope_torch_phase_push", "flopscope_torch_pop", "flopscope_torch_push"]))

    def test_missing_shim_names_the_path_and_the_variable(self):
        with self.assertRaises(nvtx_backend.NvtxUnavailable) as raised:
            nvtx_backend.load_shim({nvtx_backend.SHIM_ENV: "/nonexistent/lib.so"})
        self.assertIn("/nonexistent/lib.so: not found", str(raised.exception))
        self.assertIn(nvtx_backend.SHIM_ENV, str(raised.exception))

    def test_candidates_are_the_variable_alone_or_beside_the_package(self):
        self.assertEqual(nvtx_backend.shim_candidates({nvtx_backend.SHIM_ENV: "/x/y.so"}),
                         [Path("/x/y.so")])
        package = Path(nvtx_backend.__file__).resolve().parent
        self.assertEqual(nvtx_backend.shim_candidates({}),
                         [package / nvtx_backend.SHIM_NAME,
                          package.parent.parent / "lib" / nvtx_backend.SHIM_NAME])

    def test_no_tool_means_no_hooks_unless_forced(self):
        code = ("import flopscope_torch, torch; "
                "print(flopscope_torch.enable(), flopscope_torch.enable(force=True))")
        env = {k: v for k, v in os.environ.items() if k != nvtx_backend.TOOL_ENV}
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                env=env, check=False)
        self.assertEqual(result.returncode, 0, result.stderr)
        usable = SHIM or nvtx_backend.load_native()  # either carries the module ranges
        self.assertEqual(result.stdout.split(), ["False", "True" if usable else "False"])


if __name__ == "__main__":
    unittest.main()
