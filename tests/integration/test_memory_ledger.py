"""The memory ledger per rank (issue 31 item 1, docs/design/memory-ledger.md): 2 CPU ranks over
gloo, each under `flopscope run --torch`, the script unchanged (test_memory_ledger_job.py), in
DDP (both torches), FSDP2 sharded whole and with its root left unsharded (torch 2), and DeepSpeed
ZeRO-1, -2 and -3 engines (the torch 2 environment, which has DeepSpeed).

What the report's ledger says each rank held is compared with what the job's own tensors held
(the job sums them at the end of an optimizer step and writes them), and its expected figures
with the formulas computed here from the model's element count: DDP fp32 with Adam 4 + 4 + 8 + 4
(buckets) bytes per element; ZeRO-1/2/3 dividing the optimizer's 12 (Adam's 8, DeepSpeed's fp32
master 4), then the gradients' 4, then the parameters' 4 by dp; FSDP2 all three. A rank above
its formula by more than 10 % is flagged with the part: the FSDP2 root left unsharded holds its
parameters whole on every rank. The report's additions, its JSON, its HTML page and
`flopscope ranks` (text and JSON) each show it.
"""

import importlib.util
import json
import shutil
import sys
import unittest

from harness import DaemonTestCase, client, report
from test_torch_support import HAVE_TORCH, HERE, NO_TORCH, launch_ranks, wait_ranks

WORLD = 2
STEPS = 2
JOB = HERE / "test_memory_ledger_job.py"
SCHEMA = HERE.parents[1] / "docs" / "report.schema.json"
MARGIN = 0.10  # client/model/memory_ledger.h kMemoryMargin


def torch_major():
    import torch  # pylint: disable=import-outside-toplevel
    return int(torch.__version__.split(".")[0])


def fsdp2_missing():
    """"" where this torch has FSDP2, else why not."""
    if not HAVE_TORCH:
        return NO_TORCH
    import torch  # pylint: disable=import-outside-toplevel
    if torch_major() < 2:
        return (f"torch {torch.__version__} has no FSDP2 (torch.distributed.fsdp.fully_shard): "
                "the *_torch2 twin runs it")
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except Exception as error:  # pylint: disable=broad-except
        return f"torch {torch.__version__} has no FSDP2 ({error})"
    return ""


def deepspeed_missing():
    """"" where DeepSpeed is installed for this Python, else why not."""
    if not HAVE_TORCH:
        return NO_TORCH
    if importlib.util.find_spec("deepspeed") is None:
        import torch  # pylint: disable=import-outside-toplevel
        return (f"DeepSpeed is not installed for {sys.executable} (torch {torch.__version__}): "
                "the *_torch2 twin runs the ZeRO engines in the torch 2 environment")
    return ""


FSDP2_MISSING = fsdp2_missing()
DEEPSPEED_MISSING = deepspeed_missing()


def formula(setup, elements, dp):
    """The expected bytes per part (docs/design/memory-ledger.md), fp32 parameters and Adam."""
    params, grads, optimizer = 4.0, 4.0, 8.0
    buckets = None
    if setup == "ddp":
        buckets = 4.0 * elements
    if setup.startswith("zero"):
        optimizer += 4  # DeepSpeed's fp32 master partition
    stage = {"zero1": 1, "zero2": 2, "zero3": 3, "fsdp2": 3}.get(setup, 0)
    return {"params": params * elements / (dp if stage >= 3 else 1),
            "grads": grads * elements / (dp if stage >= 2 else 1),
            "optimizer": optimizer * elements / (dp if stage >= 1 else 1),
            "buckets": buckets}


@unittest.skipUnless(HAVE_TORCH, NO_TORCH)
class MemoryLedgerTest(DaemonTestCase):
    def launch(self, setup, job):
        out = self.root / job
        out.mkdir()
        return out, launch_ranks(self.daemon.socket, job, WORLD,
                                 ["--setup", setup, "--steps", str(STEPS), "--out", str(out)],
                                 script=JOB)

    def finish(self, out, processes):
        outputs = wait_ranks(self, processes, timeout=200)
        for rank, (printed, err) in enumerate(outputs):
            self.assertEqual(printed, f"rank {rank}: {STEPS} steps\n", err)
            self.assertNotIn("flopscope_torch:", err, f"rank {rank}")  # no hook failed
        return [json.loads((out / f"rank-{rank}.json").read_text()) for rank in range(WORLD)]

    def run_setups(self, setups):
        """Launches every setup at once (each its own job, WORLD ranks) and waits for all:
        setup -> each rank's own figures."""
        self.daemon.start()
        started = {setup: self.launch(setup, setup) for setup in setups}
        return {setup: self.finish(*started[setup]) for setup in setups}

    def ledger(self, job):
        """rank -> the report's memory ledger (its JSON's profile.memory); the document is
        checked against docs/report.schema.json where python3-jsonschema is installed."""
        document = report(self.daemon.socket, job)
        try:
            import jsonschema  # pylint: disable=import-outside-toplevel
        except ImportError:
            jsonschema = None
        if jsonschema is not None:
            jsonschema.validate(document, json.loads(SCHEMA.read_text()))
        return {entry["rank"]: entry for entry in document["profile"]["memory"]}

    def check_setup(self, job, setup, seen, exact=True):
        """The ledger of every rank against the job's own tensors and the formulas."""
        ledger = self.ledger(job)
        self.assertEqual(sorted(ledger), list(range(WORLD)))
        for rank, own in enumerate(seen):
            entry = ledger[rank]
            self.assertEqual((entry["setup"], entry["dp"], entry["step"]), (setup, WORLD, 0))
            self.assertEqual(entry["elements"], own["elements"])
            self.assertEqual((entry["dtype"], entry["optimizer_states"]), ("fp32", 2))
            expected = formula(setup, own["elements"], WORLD)
            for part in ("params", "grads", "optimizer"):
                held = entry["parts"][part]["held"]
                if exact:
                    self.assertEqual(held, own[part], (job, rank, part))
                else:  # DeepSpeed: a few bytes of scalars the job does not name
                    self.assertGreaterEqual(held, own[part], (job, rank, part))
                    self.assertLessEqual(held, own[part] + 64, (job, rank, part))
                self.assertAlmostEqual(entry["parts"][part]["expected"], expected[part],
                                       places=3, msg=(job, rank, part))
                flagged = held > expected[part] * (1 + MARGIN)
                self.assertEqual(entry["parts"][part]["flagged"], flagged, (job, rank, part))
            self.assertEqual(entry["parts"]["buckets"]["expected"], expected["buckets"])
            self.assertIsNone(entry["peak_allocated"])  # not measured on the CPU
            self.assertIsNone(entry["module_activations"])  # per module: GPUs only
            self.assertGreater(entry["rss_high_water"], 0)
            self.assertLess(entry["cost_s"], 1.0)
        return ledger

    def test_ddp(self):
        seen = self.run_setups(["ddp"])["ddp"]
        ledger = self.check_setup("ddp", "ddp", seen)
        for rank in range(WORLD):
            # DDP's reducer keeps its buckets in C++: not measured, said, in the formula.
            self.assertIsNone(ledger[rank]["parts"]["buckets"]["held"])
            self.assertFalse(ledger[rank]["flagged"])
            self.assertEqual(ledger[rank]["expected"], 20 * seen[rank]["elements"])
        text = client(["report", "ddp", "--socket", str(self.daemon.socket)])
        self.assertEqual(text.returncode, 0, text.stderr)
        section = text.stdout[text.stdout.index("Memory per rank"):]
        self.assertIn("buckets -: DDP's reducer keeps its gradient buckets in C++", section)
        self.assertIn("peaks: not measured on the CPU", section)
        self.assertIn("\n  per-module activation memory: measured on GPUs only (the CPU allocator "
                      "keeps no statistics)\n", section)
        rows = [line.split() for line in section.splitlines()[3:3 + WORLD]]
        self.assertEqual([row[:2] for row in rows], [[str(rank), "DDP"] for rank in range(WORLD)])
        self.check_ranks("ddp", ledger)
        self.check_html("ddp", ledger)

    @unittest.skipIf(FSDP2_MISSING, FSDP2_MISSING)
    def test_fsdp2_whole_and_with_the_root_left_unsharded(self):
        seen = self.run_setups(["fsdp2", "fsdp2_partial"])
        # FSDP2 pads a shard to a whole row: its storage, the figure compared, holds the padding.
        whole = self.check_setup("fsdp2", "fsdp2", seen["fsdp2"])
        partial = self.check_setup("fsdp2_partial", "fsdp2", seen["fsdp2_partial"])
        for rank in range(WORLD):
            self.assertFalse(whole[rank]["flagged"], whole[rank])
            # The root's embedding and head stay whole on every rank: params do not shrink.
            entry = partial[rank]
            self.assertTrue(entry["parts"]["params"]["flagged"], entry)
            self.assertTrue(any(flag.startswith("params: ") and "the FSDP2 formula expects" in flag
                                for flag in entry["flags"]), entry["flags"])
        ranks = client(["ranks", "fsdp2_partial", "--socket", str(self.daemon.socket)])
        self.assertEqual(ranks.returncode, 0, ranks.stderr)
        # Both ranks hold the same: one line for the two.
        self.assertIn("Memory above its formula: ranks 0-1 params: ", ranks.stdout)
        self.check_ranks("fsdp2_partial", partial)

    @unittest.skipIf(DEEPSPEED_MISSING, DEEPSPEED_MISSING)
    def test_deepspeed_zero_stages(self):
        seen = self.run_setups(["zero1", "zero2", "zero3"])
        for setup in ("zero1", "zero2", "zero3"):
            ledger = self.check_setup(setup, setup, seen[setup], exact=False)
            for rank in range(WORLD):
                entry = ledger[rank]
                # What shrinks with the stage: the parameters at stage 3 alone.
                self.assertEqual(entry["parts"]["params"]["flagged"], False, (setup, entry))
                self.assertEqual(entry["parts"]["optimizer"]["flagged"], False, (setup, entry))
                self.assertIsNone(entry["parts"]["buckets"]["expected"])  # not in the formula

    def check_ranks(self, job, ledger):
        """`flopscope ranks`: the memory column (held / expected) and its JSON."""
        listing = client(["ranks", job, "--socket", str(self.daemon.socket), "--format", "json"])
        self.assertEqual(listing.returncode, 0, listing.stderr)
        for entry in json.loads(listing.stdout)["ranks"]:
            self.assertEqual(entry["memory"]["parts"], ledger[entry["rank"]]["parts"])
        text = client(["ranks", job, "--socket", str(self.daemon.socket)])
        self.assertEqual(text.returncode, 0, text.stderr)
        header = next(line for line in text.stdout.splitlines() if line.startswith("rank "))
        self.assertIn(" memory ", header)

    def check_html(self, job, ledger):
        """The HTML page embeds the same ledger and, where chromium runs, draws its table."""
        page = self.root / f"{job}.html"
        result = client(["report", job, "--socket", str(self.daemon.socket), "--format", "html",
                         "--output", str(page)])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn('id="memory-section"', page.read_text())
        chromium = shutil.which("chromium")
        if chromium is None:
            return
        from test_html_report import chromium as run_chromium, chromium_runs  # pylint: disable=import-outside-toplevel
        if not chromium_runs():
            return
        dom, _ = run_chromium(page, "--dump-dom", profile_dir=self.root / "chromium")
        table = dom[dom.index('id="memory"'):dom.index('id="memory-flags"')]
        self.assertEqual(table.count("<tr"), 1 + WORLD, table[:2000])
        self.assertIn("DDP dp=2", table)
        self.assertIn("Per-module activation memory: measured on GPUs only", dom)
        self.assertIn('data-ok="true"', dom)


if __name__ == "__main__":
    unittest.main()
