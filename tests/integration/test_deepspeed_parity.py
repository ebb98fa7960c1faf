"""DeepSpeed's own flops profiler is the reference (issue 29, deliver item 2): on the same model and
input, `flopscope run --torch`'s report must print what DeepSpeed's get_model_profile prints:
the summary's params, fwd MACs and fwd flops, and every row of the detailed profile (the same
tree, names and classes in the same order, each row's params and MACs with their percentages),
equal as printed. Every expected figure is read from DeepSpeed's run on this machine
(deepspeed_parity_job.py); none is typed in here.

Where DeepSpeed's text leaves a row's figures out (a class whose __repr__ skips extra_repr:
torch 2's ModuleList, transformers' Conv1D), the row's figures are DeepSpeed's own numbers of that
run, formatted by its own functions (the job's OUT.json). The models: transformers' GPT-2, Llama,
BERT and T5 built from small configurations with random weights, torchvision's ResNet-18 and
ViT-B/16, an LSTM/GRU tagger and a block calling scaled_dot_product_attention.

Where DeepSpeed misses FLOPs that flopscope counts (deepspeed_parity_job.MISSED_BY_DEEPSPEED:
transformers' GELUActivation, in BERT), the DeepSpeed side counts what it missed on the same
forward, and flopscope's fwd flops must equal DeepSpeed's total plus that, formatted by DeepSpeed;
the test prints where and why they differ.

It runs on both torches, in the environments that hold DeepSpeed, transformers and torchvision
(docs/testing.md): integration_deepspeed_parity in torch1 (Debian's torch 1.13, DeepSpeed 0.18.6,
transformers 4.47.1), integration_deepspeed_parity_torch2 in torch2; it skips, saying so,
elsewhere. A model this torch cannot build (scaled_dot_product_attention before torch 2.0) skips
its own test, saying why."""

import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from deepspeed_profile_text import SUMMARY, detailed_rows, summary
from harness import DaemonTestCase, client, tool

HERE = Path(__file__).resolve().parent
JOB = HERE / "deepspeed_parity_job.py"

try:
    import deepspeed  # noqa: F401  pylint: disable=unused-import
    import torchvision  # noqa: F401  pylint: disable=unused-import
    import transformers  # noqa: F401  pylint: disable=unused-import
    MISSING = None
except ImportError as error:
    MISSING = (f"{error.name} is not installed for {sys.executable}: DeepSpeed, transformers and "
               "torchvision are in the torch1 and torch2 environments (scripts/setup_torch_env.sh)")

def differences_section(report):
    """{why: (module count, [model paths shown])} from the report's "Where DeepSpeed's flops
    profiler prints other flops, and why:" additions."""
    lines = report.splitlines()
    title = "Where DeepSpeed's flops profiler prints other flops, and why:"
    if title not in lines:
        return {}
    found = {}
    body = lines[lines.index(title) + 1:]
    for why, modules in zip(body[0::2], body[1::2]):
        if not why.startswith("  ") or why.startswith("    "):
            break
        count, _, listed = modules.strip().partition(": ")
        shown = [entry.rpartition(" (")[0] for entry in listed.split(", ")
                 if not entry.startswith("and ")]
        found[why.strip()] = (int(count.split()[0]), shown)
    return found


def this_torch_can_build(model):
    """None, or why this torch cannot build `model`."""
    import torch  # pylint: disable=import-outside-toplevel
    if model == "sdpa" and not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        return (f"torch {torch.__version__} has no torch.nn.functional."
                "scaled_dot_product_attention (torch 2.0 on)")
    return None


# What the tests below check, each with DeepSpeed's profile of it.
MODELS = ["gpt2", "llama", "bert", "t5", "resnet18", "resnet18_train", "vit_b_16", "tagger", "sdpa"]
JOB_ENV = {"OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}


@unittest.skipIf(MISSING, MISSING)
class DeepSpeedParityTest(DaemonTestCase):
    @classmethod
    def setUpClass(cls):
        """DeepSpeed's profiles of every model this torch builds, in one process."""
        super().setUpClass()
        cls.references = tempfile.TemporaryDirectory(prefix="flopscope-deepspeed-")
        models = [model for model in MODELS if this_torch_can_build(model) is None]
        env = {**os.environ, **JOB_ENV}
        cls.reference = subprocess.run(
            [sys.executable, str(JOB), ",".join(models), "deepspeed", cls.references.name],
            capture_output=True, text=True, env=env, timeout=600, check=False)

    @classmethod
    def tearDownClass(cls):
        cls.references.cleanup()
        super().tearDownClass()

    def profiles(self, model):
        """(DeepSpeed's text, its per-module figures, flopscope's report text) for `model`."""
        self.assertEqual(self.reference.returncode, 0, self.reference.stderr)
        out = Path(self.references.name) / f"{model}.deepspeed.txt"
        env = {**os.environ, **JOB_ENV}
        env.pop("FLOPSCOPE_TORCH_ESTIMATE", None)  # the defaults: the estimate on
        self.daemon.start()
        job = subprocess.run(
            [tool("flopscope"), "run", "--torch", "--job", model, "--socket",
             str(self.daemon.socket), "--", sys.executable, str(JOB), model, "flopscope"],
            capture_output=True, text=True, env=env, timeout=150, check=False)
        self.assertEqual(job.returncode, 0, job.stderr)
        report = client(["report", model, "--socket", str(self.daemon.socket)])
        self.assertEqual(report.returncode, 0, report.stderr)
        figures = json.loads(Path(f"{out}.json").read_text(encoding="utf-8"))
        self.flops = json.loads(Path(f"{out}.flops.json").read_text(encoding="utf-8"))
        return out.read_text(encoding="utf-8"), figures, report.stdout

    def check(self, model):
        self.training = model.endswith("_train")
        theirs, figures, ours = self.profiles(model)
        expected_rows = detailed_rows(theirs)
        rows = detailed_rows(ours)
        self.assertGreater(len(expected_rows), 3, theirs)
        self.assertEqual([row[:2] for row in rows], [row[:2] for row in expected_rows],
                         "the detailed profile's tree (paths and classes, in order)")
        for (path, cls, params, macs), row in zip(expected_rows, rows):
            if params is None:  # DeepSpeed's text has none: its numbers of the same run
                self.assertEqual(figures[path][0], cls, path)
                params, macs = figures[path][1:]
            self.assertEqual(row[2:], (params, macs), f"row {path or '<model>'} ({cls})")
        expected, found = summary(theirs), summary(ours)
        self.assertEqual(sorted(expected), sorted(SUMMARY), theirs)
        missed = self.flops["missed"]
        self.check_differences_are_said(ours, figures, missed)
        if missed:
            # Where DeepSpeed misses FLOPs (deepspeed_parity_job.MISSED_BY_DEEPSPEED), flopscope
            # prints DeepSpeed's total plus what it missed, and the test says where and why.
            for path, miss in missed.items():
                self.assertEqual(miss["deepspeed"], 0, f"{path}: DeepSpeed counts it after all")
                self.assertGreater(miss["flops"], 0, path)
            expected["fwd flops per GPU"] = self.flops["with_missed"]
            by_class = {}
            for path, miss in missed.items():
                by_class.setdefault(miss["class"], (miss["why"], []))[1].append(
                    f"{miss['flops']} in {path or '<model>'}")
            print(f"\n{model}: fwd flops {found['fwd flops per GPU']} here, "
                  f"{summary(theirs)['fwd flops per GPU']} by DeepSpeed, which misses "
                  f"{sum(miss['flops'] for miss in missed.values())}: "
                  + "; ".join(f"{', '.join(where)} ({cls}: {why})"
                              for cls, (why, where) in by_class.items()), file=sys.stderr)
        for label in SUMMARY:
            with self.subTest(summary=label):
                self.assertEqual(found[label], expected[label])

    def check_differences_are_said(self, ours, figures, missed):
        """The report's additions say where DeepSpeed prints other FLOPs, and why: each module
        where DeepSpeed's run counted 0 (`missed`), and in training mode each batch norm (by
        DeepSpeed's own per-module classes); nothing where neither holds."""
        differences = differences_section(ours)
        expected = {}  # a phrase of the reason: the modules' qualified names, in model order
        if missed:
            expected["through its attribute"] = [name for name in figures if name in missed]
        norms = [name for name, (cls, *_) in figures.items() if cls.startswith("BatchNorm")]
        if self.training and norms:
            expected["ran in training mode"] = norms
        self.assertEqual(sorted(expected), sorted(
            key for key in ("through its attribute", "ran in training mode")
            if any(key in why for why in differences)), ours)
        for key, names in expected.items():
            why, (count, shown) = next((why, modules) for why, modules in differences.items()
                                       if key in why)
            self.assertEqual(count, len(names), why)
            # Shown by model path (the root's label, then the tree's components), as DeepSpeed's
            # qualified names with "/" for ".": at most 4, then "and N more".
            self.assertEqual([path.partition("/")[2].replace("/", ".") for path in shown],
                             names[:len(shown)], why)
            self.assertEqual(len(shown), min(count, 4), why)

    def test_gpt2(self):
        self.check("gpt2")

    def test_llama(self):
        self.check("llama")

    def test_bert(self):
        self.check("bert")

    def test_t5(self):
        self.check("t5")

    def test_resnet18(self):
        self.check("resnet18")

    def test_resnet18_in_training_mode(self):
        # DeepSpeed's own profiler in training mode (its batch norms count 5 FLOPs per element,
        # not eval's 2): the report equals it, and says why get_model_profile prints less.
        self.check("resnet18_train")

    def test_vit_b_16(self):
        self.check("vit_b_16")

    def test_lstm_gru_tagger(self):
        self.check("tagger")

    def test_scaled_dot_product_attention(self):
        if why := this_torch_can_build("sdpa"):
            self.skipTest(why)
        self.check("sdpa")


if __name__ == "__main__":
    unittest.main()
