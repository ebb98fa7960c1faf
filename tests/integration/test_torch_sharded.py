"""PyTorch 2's sharded training on 2 CPU ranks over gloo, each rank under `flopscope run
--torch`, the script unchanged (test_torch_sharded_job.py; issue 29 item 3):

- FSDP2 (`fully_shard` on each block and the root, a one-dimensional DeviceMesh("cpu")): the
  report's params per module are the full (unsharded) sizes, as DeepSpeed shows ZeRO-3's; what
  each rank holds of them (its shards) is in the additions; the data-parallel size is the mesh's;
  the classes are the model's own (not FSDP2's `FSDP<Name>`).
- DTensor tensor parallelism (`parallelize_module`, ColwiseParallel and RowwiseParallel): the
  tensor-parallel size comes from the device mesh, announced as the Megatron path announces it,
  and params per rank are the rank's shard, as in integration_torch_tensor_parallel.

Every expected figure comes from the model's own tensors: the unsharded model built here, and
what each rank's DTensors said (to_local(), full_tensor()), written by the job.
On torch 1.13 neither API exists, and the test says so as it skips.
"""

import json
import re
import unittest

from harness import DaemonTestCase, client, report
from test_torch_support import HAVE_TORCH, NO_TORCH, HERE, grpc_report, launch_ranks, wait_ranks

WORLD = 2
STEPS = 2
JOB = HERE / "test_torch_sharded_job.py"


def sharding_apis():
    """"" where this torch has FSDP2 and DTensor tensor parallelism, else why not."""
    if not HAVE_TORCH:
        return NO_TORCH
    import torch  # pylint: disable=import-outside-toplevel
    if int(torch.__version__.split(".")[0]) < 2:
        return (f"torch {torch.__version__} has no FSDP2 (torch.distributed.fsdp.fully_shard) "
                "and no DTensor tensor parallelism (torch.distributed.tensor, public from torch "
                "2.6): the *_torch2 twin runs this test")
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
        from torch.distributed.tensor.parallel import parallelize_module  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except Exception as error:  # pylint: disable=broad-except  (1.13's fsdp raises others)
        return (f"torch {torch.__version__} has no FSDP2 / DTensor tensor parallelism "
                f"({error}; torch.distributed.fsdp.fully_shard and torch.distributed.tensor are "
                "public from torch 2.6): the *_torch2 twin runs this test")
    return ""


WHY_NOT = sharding_apis()


def model_paths(model):
    """qualified name -> model path (docs/marks.md): a module with a forward of its own adds a
    component for its children, a container (ModuleList) none."""
    import torch  # pylint: disable=import-outside-toplevel
    modules = dict(model.named_modules())
    paths = {"": type(model).__name__}
    for name in modules:
        if not name:
            continue
        parent = name.rpartition(".")[0]
        while parent and type(modules[parent]).forward is torch.nn.Module.forward:
            parent = parent.rpartition(".")[0]
        paths[name] = f"{paths[parent]}/{name[len(parent) + 1:] if parent else name}"
    return paths


@unittest.skipIf(WHY_NOT, WHY_NOT)
class TorchShardedTest(DaemonTestCase):
    @classmethod
    def setUpClass(cls):
        from test_torch_sharded_job import ShardedLM  # pylint: disable=import-outside-toplevel
        model = ShardedLM()  # unsharded: what one replica holds
        cls.paths = model_paths(model)
        cls.full = {name: sum(p.numel() for p in module.parameters())
                    for name, module in model.named_modules()}

    def run_job(self, job, mode):
        self.daemon.start()
        out = self.root / mode
        out.mkdir()
        outputs = wait_ranks(self, launch_ranks(
            self.daemon.socket, job, WORLD, ["--mode", mode, "--steps", str(STEPS),
                                             "--out", str(out)], script=JOB))
        self.assertEqual([o for o, _ in outputs],
                         [f"rank {rank}: {STEPS} steps\n" for rank in range(WORLD)])
        for rank, (_, err) in enumerate(outputs):
            self.assertNotIn("flopscope_torch:", err, f"rank {rank}")  # no hook failed
        return [json.loads((out / f"rank-{rank}.json").read_text()) for rank in range(WORLD)]

    def tree(self, job, rank):
        """model path -> (class, params) of one rank's report (the JSON's profile modules)."""
        modules = report(self.daemon.socket, job, rank=rank)["profile"]["modules"]
        return {m["model_path"]: (m["class"], m["params"]) for m in modules if m["model_path"]}

    def announced(self, job, rank, prefix):
        one = grpc_report(self.daemon.socket, job, ranks=[rank])
        return {m.key[len(prefix):]: m.value for m in one.metadata if m.key.startswith(prefix)}

    def layout(self, job, rank):
        one = grpc_report(self.daemon.socket, job, ranks=[rank])
        return [m.value for m in one.metadata if m.key == "parallel"]

    def test_fsdp2_params_at_full_size_and_each_ranks_shards(self):
        seen = self.run_job("fsdp2", "fsdp")
        for rank, own in enumerate(seen):
            self.assertEqual((own["mesh_size"], own["mesh_rank"]), (WORLD, rank))
            self.assertEqual(own["full"], self.full)  # full_tensor() is the unsharded model
            self.assertEqual(own["classes"][""], "FSDPShardedLM")  # FSDP2's class, not shown
            tree = self.tree("fsdp2", rank)
            for name, path in self.paths.items():
                self.assertEqual(tree[path][1], self.full[name], (rank, path))
            self.assertEqual(tree["ShardedLM"][0], "ShardedLM")
            self.assertEqual(tree["ShardedLM/blocks.0"][0], "Block")
            # What the rank holds, beside: every module with parameters, its own shard's size.
            shards = self.announced("fsdp2", rank, "params_shard ")
            expected = {self.paths[name]: f"{own['held'][name]} {rank}"
                        for name in self.paths if own["held"][name] != self.full[name]}
            self.assertEqual(shards, expected)
            self.assertEqual(self.layout("fsdp2", rank),
                             [f"tp=1 pp=1 dp={WORLD} tp_rank=0 pp_rank=0 dp_rank={rank}"])
        # The ranks' shards differ (63 rows of the embedding: 32 and 31) and add up to the model.
        held = [own["held"][""] for own in seen]
        self.assertNotEqual(held[0], held[1])
        self.assertEqual(sum(held), self.full[""])

        text = client(["report", "fsdp2", "--socket", str(self.daemon.socket)])
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertRegex(text.stdout, r"data parallel size:\s+2\n")
        table = text.stdout[text.stdout.index("Parameters held per rank"):]
        rows = {}
        for line in table.splitlines()[3:]:
            if not line.startswith("  "):
                break
            cells = re.split(r"\s{2,}", line.strip())
            rows[cells[0]] = cells[1:]
        # Formatted as the tree's params are, by DeepSpeed's own formatter (torch 2's environment).
        from deepspeed.profiling.flops_profiler.profiler import (  # pylint: disable=import-outside-toplevel
            params_to_string)
        self.assertEqual(rows["ShardedLM"], [params_to_string(self.full[""])] +
                         [params_to_string(own["held"][""]) for own in seen])
        self.assertEqual(set(rows), {self.paths[name] for name in self.paths
                                     if seen[0]["held"][name] != self.full[name]})

    def test_dtensor_tensor_parallel_size_from_the_mesh_and_params_per_shard(self):
        seen = self.run_job("dtensor_tp", "tp")
        for rank, own in enumerate(seen):
            self.assertEqual((own["mesh_size"], own["mesh_rank"]), (WORLD, rank))
            self.assertEqual(own["full"], self.full)
            self.assertLess(own["held"][""], self.full[""])  # the blocks' matrices are halved
            self.assertEqual(self.layout("dtensor_tp", rank),
                             [f"tp={WORLD} pp=1 dp=1 tp_rank={rank} pp_rank=0 dp_rank=0"])
            tree = self.tree("dtensor_tp", rank)
            for name, path in self.paths.items():
                self.assertEqual(tree[path][1], own["held"][name], (rank, path))
            self.assertEqual(self.announced("dtensor_tp", rank, "params_shard "), {})
        text = client(["report", "dtensor_tp", "--socket", str(self.daemon.socket)])
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertRegex(text.stdout, r"model parallel size:\s+2\n")
        self.assertNotIn("Parameters held per rank", text.stdout)


if __name__ == "__main__":
    unittest.main()
