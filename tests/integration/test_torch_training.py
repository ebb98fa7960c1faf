"""PyTorch training as people run it (issue 29 item 3): 2 ranks of DDP over gloo on the CPU, each
under `flopscope run --torch`, one launch running every scenario of test_torch_training_job.py in
turn (gradient accumulation under no_sync, activation checkpointing non-reentrant and reentrant,
and on torch 2 a torch.compile'd model), each scenario's model named by its class. Everything is
read back from the rank stores: the range events (steps, phases, module ranges) and the marks;
and, for gradient accumulation, the report of its steps (figures per micro-batch, k said).

Expected figures come from the models themselves: the module paths from named_modules(), the
MACs of each Linear from its weight's shape and the batch."""

import collections
import re
import sqlite3
import unittest

from harness import DaemonTestCase, client, report
from test_torch_support import HAVE_TORCH, NO_TORCH, launch_ranks, range_events, wait_ranks

if HAVE_TORCH:
    import torch
    import test_torch_training_job as job

WORLD = 2
HAVE_COMPILE = HAVE_TORCH and hasattr(torch, "compile")
NO_COMPILE = (f"torch {torch.__version__ if HAVE_TORCH else '-'} has no torch.compile (torch 2 "
              "and later): the compiled scenario runs in integration_torch_training_torch2")


def module_paths(model):
    """Range path of every module that runs: the class name, then each qualified name cut at
    the ModuleList (a container that adds no component)."""
    root = type(model).__name__
    return {name: root if not name else f"{root}/{re.sub(r'[.](?![0-9])', '/', name)}"
            for name, module in model.named_modules()
            if not isinstance(module, torch.nn.ModuleList)}


def linear_macs(model):
    """path -> MACs of one forward, for each Linear: batch x in x out, from its weight."""
    paths = module_paths(model)
    return {paths[name]: job.BATCH * module.weight.shape[1] * module.weight.shape[0]
            for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}


def last_marks(store, prefix, until=None):
    """key suffix -> value of the last mark (the last one wins) whose key starts with `prefix`,
    of those made by time `until` (ns; the estimate is announced just before a step closes)."""
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT key, value FROM metadata WHERE key LIKE ? AND time_ns <= ? "
                          "ORDER BY time_ns, rowid",
                          (prefix + "%", 2 ** 63 - 1 if until is None else until)).fetchall()
    return {key[len(prefix):]: value for key, value in rows}


@unittest.skipUnless(HAVE_TORCH, NO_TORCH)
class TorchTrainingTest(DaemonTestCase):
    def test_training_as_people_run_it(self):
        scenarios = ["accumulate", "checkpoint", "reentrant"] + (["compiled"] if HAVE_COMPILE
                                                                 else [])
        self.daemon.start()
        outputs = wait_ranks(self, launch_ranks(self.daemon.socket, "train", WORLD, scenarios,
                                                script=job.__file__), timeout=240)
        for rank, (out, err) in enumerate(outputs):
            self.assertIn(f"rank {rank}: {' '.join(scenarios)} done", out)
            self.assertNotIn("internal error", err)  # the hooks never turned themselves off
        self.stores = [self.daemon.rank_file("train", rank) for rank in range(WORLD)]
        self.events = [sorted(range_events(store), key=lambda e: e[3]) for store in self.stores]
        self.steps = self.scenario_steps(scenarios)
        with self.subTest("accumulate"):
            self.check_accumulation()
        with self.subTest("accumulate report"):
            self.check_accumulation_report()
        for scenario in ("checkpoint", "reentrant"):
            with self.subTest(scenario):
                self.check_checkpointing(scenario)
        if HAVE_COMPILE:
            with self.subTest("compiled"):
                self.check_compiled(outputs)
        else:
            print(f"compiled scenario skipped: {NO_COMPILE}")

    def scenario_steps(self, scenarios):
        """rank -> scenario -> [(start, end) of each of its steps], from the `step` ranges and the
        root module ranges inside them; every step belongs to one scenario."""
        steps = []
        for events in self.events:
            windows = [(s, e) for domain, path, _, s, e in events
                       if domain == "flopscope" and path == "step"]
            self.assertEqual(len(windows), job.STEPS * len(scenarios))
            by_scenario = collections.defaultdict(list)
            for start, end in windows:
                roots = {path.split("/")[0] for domain, path, _, s, e in events
                         if domain != "flopscope" and start <= s and e <= end
                         and path.endswith("Net")}
                self.assertEqual(len(roots), 1, roots)
                by_scenario[roots.pop()].append((start, end))
            steps.append(by_scenario)
        return steps

    def inside(self, rank, window, kind):
        """Module ranges of `rank` inside the `kind` phase ranges ('forward', 'backward') within
        the step `window`: Counter of paths, and the number of those phase ranges."""
        events = self.events[rank]
        start, end = window
        phases = [(s, e) for domain, path, _, s, e in events if domain == "flopscope"
                  and path == f"step/{kind}" and start <= s and e <= end]
        paths = collections.Counter(path for domain, path, _, s, e in events
                                    if domain != "flopscope"
                                    and any(ps <= s and e <= pe for ps, pe in phases))
        return paths, len(phases)

    def check_accumulation(self):
        """ACCUMULATE micro-batches per optimizer step: one step each, with ACCUMULATE forward
        and backward phases and every module's range ACCUMULATE times in each; the estimate is
        per step, so ACCUMULATE forwards' MACs."""
        model = job.build_model("accumulate")
        paths = set(module_paths(model).values())
        for rank in range(WORLD):
            windows = self.steps[rank]["AccumulateNet"]
            self.assertEqual(len(windows), job.STEPS)  # steps are optimizer steps
            for window in windows:
                for kind in ("forward", "backward"):
                    modules, phases = self.inside(rank, window, kind)
                    self.assertEqual(phases, job.ACCUMULATE, kind)
                    self.assertEqual({p: modules[p] for p in paths},
                                     {p: job.ACCUMULATE for p in paths}, kind)
            macs = last_marks(self.stores[rank], "estimated_macs ", until=windows[-1][1])
            self.assertEqual({p: int(macs[p]) for p in linear_macs(model)},
                             {p: job.ACCUMULATE * m for p, m in linear_macs(model).items()})

    def daemon_median(self, samples):
        """The daemon's median of integer nanoseconds (Summarize: the two middle ones halved
        first where the count is even)."""
        ordered = sorted(samples)
        middle = len(ordered) // 2
        if len(ordered) % 2:
            return ordered[middle]
        lower, upper = ordered[middle - 1], ordered[middle]
        return lower // 2 + upper // 2 + (lower % 2 + upper % 2) // 2

    def phase_medians(self, steps):
        """phase -> the daemon's median per step of the phase's time in the step (its
        occurrences summed), over `steps` (indices into each rank's accumulate steps)."""
        medians = {}
        for kind in ("forward", "backward", "optimizer"):
            samples = []
            for rank in range(WORLD):
                for index in steps:
                    start, end = self.steps[rank]["AccumulateNet"][index]
                    samples.append(sum(e - s for domain, path, _, s, e in self.events[rank]
                                       if domain == "flopscope" and path == f"step/{kind}"
                                       and start <= s and e <= end))
            medians[kind] = self.daemon_median(samples)
        return medians

    def check_accumulation_report(self):
        """The report of the accumulate scenario's steps after warm-up (steps 1 to STEPS-1 of the
        job: the scenario ran first) is DeepSpeed's for one micro-batch: fwd MACs per GPU are
        one forward's (from the model's Linear weights), fwd and bwd latency the phases'
        median per step / ACCUMULATE, iter latency the whole step's, and the additions and the
        JSON say ACCUMULATE micro-batches per step."""
        steps = f"1:{job.STEPS - 1}"
        model = job.build_model("accumulate")
        document = report(self.daemon.socket, "train", steps=steps)["profile"]
        self.assertEqual(document["modules"][0]["model_path"], "AccumulateNet")
        self.assertEqual(document["micro_batches_per_step"], job.ACCUMULATE)
        summary = {key: figure["value"] for key, figure in document["summary"].items()}
        self.assertEqual(summary["fwd_macs_per_gpu"], sum(linear_macs(model).values()))
        medians = self.phase_medians(range(1, job.STEPS))
        self.assertAlmostEqual(summary["fwd_latency_s"],
                               medians["forward"] / 1e9 / job.ACCUMULATE, delta=1e-12)
        self.assertAlmostEqual(summary["bwd_latency_s"],
                               medians["backward"] / 1e9 / job.ACCUMULATE, delta=1e-12)
        self.assertAlmostEqual(summary["iter_latency_s"], sum(medians.values()) / 1e9,
                               delta=1e-12)
        text = client(["report", "train", "--socket", str(self.daemon.socket), "--steps", steps])
        self.assertEqual(text.returncode, 0, text.stderr)
        line = next((entry for entry in text.stdout.splitlines()
                     if entry.startswith("gradient accumulation:")), "")
        self.assertIn(f"{job.ACCUMULATE} micro-batches per optimizer step", line, text.stdout)
        self.assertIn(f"per optimizer step: x{job.ACCUMULATE}", line)
        # The checkpoint scenario's steps have one forward each: nothing is divided or said.
        single = f"{job.STEPS + 1}:{2 * job.STEPS - 1}"
        self.assertNotIn("micro_batches_per_step",
                         report(self.daemon.socket, "train", steps=single)["profile"])

    def check_checkpointing(self, scenario):
        """Backward recomputes each checkpointed block's forward: no range opens for it (its time
        is the block's backward range's), so every module has one forward range in the forward
        phase and one range in the backward phase per step, and the estimate counts each
        forward once: the MACs of one forward."""
        model = job.build_model(scenario)
        root = type(model).__name__
        paths = set(module_paths(model).values())
        for rank in range(WORLD):
            windows = self.steps[rank][root]
            self.assertEqual(len(windows), job.STEPS)
            for window in windows:
                for kind in ("forward", "backward"):
                    modules, phases = self.inside(rank, window, kind)
                    self.assertEqual(phases, 1, kind)
                    self.assertEqual({p: n for p, n in modules.items() if p.startswith(root)},
                                     {p: 1 for p in paths}, kind)
            macs = last_marks(self.stores[rank], "estimated_macs ", until=windows[-1][1])
            self.assertEqual({p: int(macs[p]) for p in linear_macs(model)}, linear_macs(model))

    def check_compiled(self, outputs):
        """torch.compile of the model DDP wraps: Dynamo compiles it in one graph with no break
        (before, the hooks broke the graph at every module), the compiled model has its forward
        and backward range per step, and a `compiled` mark says its modules ran inside the
        graph, without ranges of their own."""
        for out, _ in outputs:
            counted = re.search(r"dynamo: graphs=(\d+) breaks=(\d+)", out)
            self.assertIsNotNone(counted, out)
            self.assertEqual((int(counted.group(1)), int(counted.group(2))), (1, 0), out)
        for rank in range(WORLD):
            windows = self.steps[rank]["CompiledNet"]
            self.assertEqual(len(windows), job.STEPS)
            for window in windows:
                for kind in ("forward", "backward"):
                    modules, phases = self.inside(rank, window, kind)
                    self.assertEqual(phases, 1, kind)
                    self.assertEqual({p: n for p, n in modules.items()
                                      if p.startswith("CompiledNet")}, {"CompiledNet": 1}, kind)
            self.assertEqual(last_marks(self.stores[rank], "compiled "),
                             {"CompiledNet": "torch.compile"})


if __name__ == "__main__":
    unittest.main()
