"""What the PyTorch hooks announce reaches the daemon: an unchanged script under
`flopscope run --torch` (one rank, CPU) stores the whole module tree (containers and modules
that never run included), the batch size from the model's input, and, by default (no
FLOPSCOPE_TORCH_ESTIMATE), estimated FLOPs per module. Every expected figure is worked out here
from the model itself."""

import json
import os
import subprocess
import unittest

from harness import DaemonTestCase, client, tool
from test_torch_support import HAVE_TORCH, NO_TORCH, PYTHON, grpc_report

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 3


def metadata(report_message, prefix):
    """{path: value} of the `<prefix> <path>` keys (the last one wins)."""
    found = {}
    for entry in report_message.metadata:
        if entry.key.startswith(prefix + " "):
            found[entry.key[len(prefix) + 1:]] = entry.value
    return found


@unittest.skipUnless(HAVE_TORCH, NO_TORCH)
class TorchMarksTest(DaemonTestCase):
    def run_script(self, job, extra_env):
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", **extra_env}
        if "FLOPSCOPE_TORCH_ESTIMATE" not in extra_env:
            env.pop("FLOPSCOPE_TORCH_ESTIMATE", None)  # the default settings
        result = subprocess.run(
            [tool("flopscope"), "run", "--torch", "--job", job, "--socket",
             str(self.daemon.socket), "--", PYTHON,
             os.path.join(HERE, "test_torch_marks_job.py"), "--steps", str(STEPS)],
            capture_output=True, text=True, env=env, timeout=150, check=False)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, f"{STEPS} steps\n")
        return grpc_report(self.daemon.socket, job)

    def test_tree_batch_size_and_estimate_reach_the_daemon(self):
        # pylint: disable-next=import-outside-toplevel
        from test_torch_marks_job import BATCH, build_model
        self.daemon.start()
        stored = self.run_script("marks", {})
        model = build_model()
        names = [name for name, _ in model.named_modules()]
        modules = dict(model.named_modules())

        tree = {path: value for path, value in metadata(stored, "module").items()
                if path.split("/", 1)[0] == "Marked"}
        self.assertEqual(len(tree), len(names))
        by_index = {int(value.split(" ", 1)[0]): path for path, value in tree.items()}
        self.assertEqual(sorted(by_index), list(range(len(names))))
        ordered = [by_index[i] for i in range(len(names))]
        self.assertEqual(ordered[0], "Marked")
        # A container's children hang under it: `blocks` (ModuleList) then `blocks.0`.
        self.assertIn("Marked/blocks", ordered)
        self.assertEqual(tree["Marked/blocks.0"].split(" ", 1)[1], "Marked/blocks")
        self.assertEqual(tree["Marked/heads.spare"].split(" ", 1)[1], "Marked/heads")
        self.assertIn("Marked/unused", ordered)

        classes = metadata(stored, "class")
        params = metadata(stored, "params")
        for name, path in zip(names, ordered):
            self.assertEqual(classes[path], type(modules[name]).__name__, path)
            self.assertEqual(int(params[path]), sum(p.numel() for p in modules[name].parameters()))
        self.assertEqual(classes["CrossEntropyLoss"], "CrossEntropyLoss")  # a root of its own

        sizes = [m.value for m in stored.metadata if m.key == "batch_size"]
        self.assertEqual(sizes, [str(BATCH)])

        flops = metadata(stored, "estimated_flops")
        stem = model.stem
        self.assertEqual(int(flops["Marked/stem"]),
                         2 * BATCH * stem.in_features * stem.out_features)
        head = model.heads["main"]
        self.assertEqual(int(flops["Marked/heads.main"]),
                         2 * BATCH * head.in_features * head.out_features)
        self.assertNotIn("Marked/unused", flops)  # never ran
        # Inclusive: the root's own code adds with `+`, which DeepSpeed does not count.
        self.assertEqual(int(flops["Marked"]),
                         sum(int(flops[p]) for p in flops if p.count("/") == 1))

        # The report shows these figures, labelled estimated (no counters ran on this machine).
        result = client(["report", "marks", "--socket", str(self.daemon.socket), "--format",
                         "json"])
        self.assertEqual(result.returncode, 0, result.stderr)
        rows = {row["path"]: row for row in json.loads(result.stdout)["profile"]["modules"]}
        for path in ("Marked/stem", "Marked/heads.main"):
            self.assertEqual((rows[path]["flops"], rows[path]["flops_source"]),
                             (int(flops[path]), "estimated"), path)

    def test_batch_size_from_the_environment_and_no_estimate_when_switched_off(self):
        self.daemon.start()
        stored = self.run_script("marks-env", {"FLOPSCOPE_BATCH_SIZE": "64",
                                               "FLOPSCOPE_TORCH_ESTIMATE": "0"})
        sizes = [m.value for m in stored.metadata if m.key == "batch_size"]
        self.assertEqual(sizes, ["64"])
        self.assertEqual(metadata(stored, "estimated_flops"), {})


if __name__ == "__main__":
    unittest.main()
