"""One process, one daemon: the exact tree, the rank file, the job left untouched, clear errors."""

import os
import sqlite3
import stat
import subprocess

from harness import (DaemonTestCase, calls_by_path, client, report, run_job, test_program, tool,
                     INJECTOR)


class PipelineTest(DaemonTestCase):

    def test_exact_tree_and_rank_file(self):
        self.daemon.start()
        result = run_job(self.daemon.socket, "tree", [test_program("nvtx_phases"), "--before", "3",
                                                      "--after", "2", "--threads", "2"])
        self.assertEqual(result.returncode, 0, result.stderr)
        rep = report(self.daemon.socket, "tree")
        self.assertEqual(rep["job"], "tree")
        self.assertEqual(calls_by_path(rep),
                         {"before": 6, "before/work": 6, "after": 4, "after/work": 4})
        modules = {m["path"]: m for m in rep["modules"]}
        for path in ("before", "after"):
            self.assertGreater(modules[path]["cpu_time_s"], 0)
            self.assertGreaterEqual(modules[path]["cpu_time_s"], modules[path + "/work"]["cpu_time_s"])
        for module in rep["modules"]:  # no GPU here: GPU figures unknown, not zero
            self.assertIsNone(module["gpu_time_s"])
            self.assertIsNone(module["flops"])
            self.assertIsNone(module["params"])
            self.assertEqual(module["kernels"], 0)
        rank_file = self.daemon.rank_file("tree", 0)
        self.assertTrue(rank_file.exists(), list(self.daemon.data_dir.rglob("*")))
        with sqlite3.connect(rank_file) as db:
            self.assertEqual(db.execute("PRAGMA journal_mode").fetchone()[0], "wal")

    def test_example_transformer_tree(self):
        self.daemon.start()
        steps, layers = 3, 2
        result = run_job(self.daemon.socket, "lm", [tool("transformer_nvtx"), "--steps", str(steps),
                                                    "--layers", str(layers)])
        self.assertEqual(result.returncode, 0, result.stderr)
        rep = report(self.daemon.socket, "lm", steps="0:")  # every step, warm-up included
        expected = {"TransformerLM": 2 * steps, "TransformerLM/embedding": 2 * steps,
                    "TransformerLM/head": 2 * steps, "AdamW": steps, "DataLoader": steps,
                    "DataLoader/next_batch": steps}
        for i in range(layers):
            for suffix in ("", "/self_attn", "/mlp"):
                expected[f"TransformerLM/layers.{i}{suffix}"] = 2 * steps
        self.assertEqual(calls_by_path(rep), expected)
        phases = {p["name"]: p["calls"] for p in rep["phases"]}
        self.assertEqual(phases, {"step": steps, "forward": steps, "backward": steps,
                                  "optimizer": steps})
        params = {m["path"]: m["params"] for m in rep["modules"]}
        for i in range(layers):
            layer = f"TransformerLM/layers.{i}"
            self.assertGreater(params[layer + "/self_attn"], 0)
            self.assertEqual(params[layer], params[layer + "/self_attn"] + params[layer + "/mlp"])
        children = ["TransformerLM/embedding", "TransformerLM/head"] + [
            f"TransformerLM/layers.{i}" for i in range(layers)]
        self.assertEqual(params["TransformerLM"], sum(params[c] for c in children))

    def test_job_output_and_exit_code_unchanged(self):
        self.daemon.start()
        program = [test_program("nvtx_phases"), "--before", "2"]
        plain = subprocess.run(program, capture_output=True, text=True)
        profiled = run_job(self.daemon.socket, "same", program)
        self.assertEqual(profiled.returncode, plain.returncode)
        self.assertEqual(profiled.stdout, plain.stdout)
        failing = run_job(self.daemon.socket, "rc", ["sh", "-c", "echo out; exit 7"])
        self.assertEqual(failing.returncode, 7)
        self.assertEqual(failing.stdout, "out\n")

    def test_socket_mode_and_clean_sigterm(self):
        self.daemon.start()
        mode = stat.S_IMODE(os.stat(self.daemon.socket).st_mode)
        # Every user's job reaches it; the daemon authorises each call by the peer's uid.
        self.assertEqual(mode, 0o666, oct(mode))
        self.assertEqual(self.daemon.stop(), 0, self.daemon.log())
        self.assertFalse(self.daemon.socket.exists(), "socket left behind after SIGTERM")

    def test_clear_client_errors(self):
        missing = client(["jobs", "--socket", str(self.root / "nobody.sock")])
        self.assertEqual(missing.returncode, 1)
        self.assertIn("cannot reach flopscoped", missing.stderr)
        self.daemon.start()
        unknown = client(["report", "no-such-job", "--socket", str(self.daemon.socket)])
        self.assertEqual(unknown.returncode, 1)
        self.assertIn("not found", unknown.stderr)

    def test_injector_exports_only_entry_points(self):
        nm = subprocess.run(["nm", "-D", "--defined-only", str(INJECTOR)], capture_output=True,
                            text=True, check=True)
        exported = {line.split()[-1] for line in nm.stdout.splitlines() if line.strip()}
        exported = {name for name in exported if not name.startswith("flopscope_")}
        # Plus the wrappers of the exits that skip atexit (injector/entry_points.cc).
        self.assertEqual(exported, {"InitializeInjection", "InitializeInjectionNvtx2", "_exit",
                                    "_Exit", "execve", "execv", "execvp", "execvpe", "kill"})
