"""An unchanged PyTorch training script, 4 ranks of DDP over gloo on the CPU, each under
`flopscope run --torch`: every rank's store holds the model's module tree, forward and backward,
parameters, steps and its data-parallel layout.

How a report tells forward from backward: a module's row counts both (calls = 2 per step); the
`forward` and `backward` phase ranges say when each pass ran, and each module range lies inside
one of them on its thread (checked here from the rank stores)."""

import collections
import csv
import io
import unittest

from harness import DaemonTestCase, calls_by_path, client, detailed_tree_rows, report
from test_torch_support import (HAVE_TORCH, NO_TORCH, expected_module_paths, grpc_report,
                                launch_ranks, range_events, wait_ranks)

WORLD = 4
STEPS = 3
PHASES = {"step", "forward", "backward", "optimizer"}


@unittest.skipUnless(HAVE_TORCH, NO_TORCH)
class TorchDataParallelTest(DaemonTestCase):
    @classmethod
    def setUpClass(cls):
        from test_torch_job import build_model  # pylint: disable=import-outside-toplevel
        model = build_model()
        cls.paths = expected_module_paths(model, "TinyLM")
        modules = dict(model.named_modules())
        cls.params = {path: sum(p.numel() for p in modules[name].parameters())
                      for name, path in cls.paths.items()}
        cls.classes = {path: type(modules[name]).__name__ for name, path in cls.paths.items()}
        # Modules that never run (the ModuleList of TransformerEncoder) are announced too, under
        # the path of the nearest module that runs.
        cls.model_paths = []  # every module's model path, in model order (named_modules())
        for name, module in modules.items():
            if name in cls.paths:
                cls.model_paths.append(cls.paths[name])
                continue
            parent = name.rpartition(".")[0]
            while parent not in cls.paths:
                parent = parent.rpartition(".")[0]
            relative = name[len(parent) + 1:] if parent else name
            cls.classes[f"{cls.paths[parent]}/{relative}"] = type(module).__name__
            cls.model_paths.append(f"{cls.paths[parent]}/{relative}")
        # Containers: never run, modules under them (TransformerEncoder's `layers` ModuleList).
        cls.containers = {path for name, path in zip(modules, cls.model_paths)
                          if name not in cls.paths and any(modules[name].children())}

    def test_unchanged_script_on_four_ranks(self):
        self.daemon.start()
        outputs = wait_ranks(self, launch_ranks(self.daemon.socket, "ddp4", WORLD,
                                                ["--steps", str(STEPS)]))
        self.assertEqual([out for out, _ in outputs],
                         [f"rank {rank}: {STEPS} steps\n" for rank in range(WORLD)])
        self.check_module_tree_forward_and_backward()
        self.check_every_view_has_the_text_tree()
        self.check_phases_separate_forward_from_backward_and_steps_are_exact()
        self.check_params_classes_and_data_parallel_layout()

    def check_module_tree_forward_and_backward(self):
        for rank in range(WORLD):
            self.assertTrue(self.daemon.rank_file("ddp4", rank).exists())
        combined = report(self.daemon.socket, "ddp4")
        self.assertEqual(sorted(r["rank"] for r in combined["ranks"]), list(range(WORLD)))
        self.assertEqual(combined["losses"], {})

        # Names and nesting: exactly named_modules() (the modules that run), plus the loss
        # module, a root of its own; parents come before their children.
        rows = [m["path"] for m in combined["modules"]]
        self.assertEqual(set(rows), set(self.paths.values()) | {"CrossEntropyLoss"})
        for index, path in enumerate(rows):
            if "/" in path:
                self.assertLess(rows.index(path.rsplit("/", 1)[0]), index, path)
        self.assertEqual(self.paths["encoder.layers.1.self_attn"],
                         "TinyLM/encoder/layers.1/self_attn")

        # Forward and backward: one range each per step, on every rank.
        expected_calls = {path: 2 * STEPS for path in rows}
        for rank in range(WORLD):
            self.assertEqual(calls_by_path(report(self.daemon.socket, "ddp4", rank=rank)),
                             expected_calls)
        self.assertEqual(calls_by_path(combined), {p: WORLD * c for p, c in expected_calls.items()})

    def check_every_view_has_the_text_tree(self):
        """Issue 29 item 4: the JSON's and the CSV's profile modules are the text tree's rows, in
        model order, containers and modules that never ran included and flagged."""
        base = ["report", "ddp4", "--socket", str(self.daemon.socket)]
        text = client(base)
        self.assertEqual(text.returncode, 0, text.stderr)
        tree = detailed_tree_rows(text.stdout)
        profile = report(self.daemon.socket, "ddp4")["profile"]
        model = profile["modules"][:profile["model_modules"]]
        self.assertEqual([(m["depth"], m["name"] if m["depth"] else "", m["class"])
                          for m in model], tree)
        self.assertEqual([m["model_path"] for m in model], self.model_paths)
        self.assertIn("TinyLM/encoder/layers", self.containers)
        for module in model:
            path = module["model_path"]
            ran = path in self.paths.values()
            self.assertEqual((module["ran"], module["container"]),
                             (ran, path in self.containers), path)
            if path in self.containers:
                # Its blocks ran: its latency is theirs summed, said as what it is.
                self.assertTrue(module["figures_from_children"], path)
                self.assertGreater(module["latency_s"], 0, path)
                self.assertNotIn("never ran", module["note"], path)
            elif not ran:
                self.assertIn("never ran", module["note"], path)
        self.assertEqual([m["model_path"] for m in profile["modules"][len(model):]],
                         ["CrossEntropyLoss"])
        result = client([*base, "--format", "csv"])
        self.assertEqual(result.returncode, 0, result.stderr)
        rows = list(csv.DictReader(io.StringIO(result.stdout)))
        self.assertEqual([(r["model_path"], r["ran"], r["container"]) for r in rows],
                         [(m["model_path"], "true" if m["ran"] else "false",
                           "true" if m["container"] else "false") for m in profile["modules"]])
        # No row of the additions' table says both a latency and "never ran".
        table = text.stdout[text.stdout.index("Module latency per step"):]
        for line in table.splitlines():
            if "never ran" in line:
                self.assertNotRegex(line, r"\b\d+(\.\d+)? (s|ms|us)\b")

    def check_phases_separate_forward_from_backward_and_steps_are_exact(self):
        combined = report(self.daemon.socket, "ddp4", steps="0:")  # every step
        self.assertEqual({p["name"]: p["calls"] for p in combined["phases"]},
                         {name: WORLD * STEPS for name in PHASES})
        for rank in range(WORLD):
            events = range_events(self.daemon.rank_file("ddp4", rank))
            windows = collections.defaultdict(list)
            for domain, path, thread, start, end in events:
                if domain == "flopscope":
                    windows[path.rsplit("/", 1)[-1]].append((thread, start, end))
            self.assertEqual({name: len(spans) for name, spans in windows.items()},
                             {name: STEPS for name in PHASES})
            inside = collections.Counter()
            for domain, path, thread, start, end in events:
                if domain == "flopscope":
                    continue
                for phase in ("forward", "backward"):
                    if any(t == thread and s <= start and end <= e for t, s, e in windows[phase]):
                        inside[(path, phase)] += 1
            for path in self.paths.values():
                self.assertEqual(inside[(path, "forward")], STEPS, (rank, path))
                self.assertEqual(inside[(path, "backward")], STEPS, (rank, path))

    def check_params_classes_and_data_parallel_layout(self):
        combined = report(self.daemon.socket, "ddp4")
        params = {m["path"]: m["params"] for m in combined["modules"]}
        # One replica's parameters (the ranks hold copies): sum(p.numel()) per module.
        self.assertEqual({path: params[path] for path in self.paths.values()}, self.params)

        full = grpc_report(self.daemon.socket, "ddp4")
        self.assertEqual(sorted((r.rank, r.world_size, r.layout.dp_size, r.layout.dp_rank)
                                for r in full.ranks),
                         [(rank, WORLD, WORLD, rank) for rank in range(WORLD)])
        for rank in range(WORLD):
            one = grpc_report(self.daemon.socket, "ddp4", ranks=[rank])
            announced = [m.value for m in one.metadata if m.key == "parallel"]
            self.assertEqual(announced,
                             [f"tp=1 pp=1 dp={WORLD} tp_rank=0 pp_rank=0 dp_rank={rank}"])
            classes = {m.key[len("class "):]: m.value for m in one.metadata
                       if m.key.startswith("class ")}
            self.assertEqual(classes, {**self.classes, "CrossEntropyLoss": "CrossEntropyLoss"})


if __name__ == "__main__":
    unittest.main()
