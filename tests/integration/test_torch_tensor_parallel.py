"""A synthetic tensor-parallel layout (tp=2 x dp=2 on 4 ranks) that the job sets up through
Megatron's parallel state, as Megatron-LM jobs do. A small stand-in for
`megatron.core.parallel_state` (written by the test) plays Megatron; the training script holds
1/tp of the head per tensor-parallel rank and runs DDP over its data-parallel group.
flopscope_torch reads the layout from Megatron and announces it through the `flopscope` domain;
the parameters each rank announces are its own shard's."""

import textwrap
import unittest

from harness import DaemonTestCase, report
from test_torch_support import HAVE_TORCH, NO_TORCH, grpc_report, launch_ranks, wait_ranks

WORLD = 4
TP = 2
STEPS = 2

PARALLEL_STATE = textwrap.dedent('''
    """Stand-in for megatron.core.parallel_state: the functions flopscope_torch reads."""
    import torch.distributed as dist

    _TP = None
    _GROUP = None

    def initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1):
        global _TP, _GROUP
        assert pipeline_model_parallel_size == 1
        _TP = tensor_model_parallel_size
        world = dist.get_world_size()
        for tp_rank in range(_TP):  # every rank creates every group, as torch requires
            group = dist.new_group(list(range(tp_rank, world, _TP)))
            if dist.get_rank() % _TP == tp_rank:
                _GROUP = group

    def model_parallel_is_initialized():
        return _TP is not None

    def get_tensor_model_parallel_world_size():
        return _TP

    def get_tensor_model_parallel_rank():
        return dist.get_rank() % _TP

    def get_pipeline_model_parallel_world_size():
        return 1

    def get_pipeline_model_parallel_rank():
        return 0

    def get_data_parallel_world_size():
        return dist.get_world_size() // _TP

    def get_data_parallel_rank():
        return dist.get_rank() // _TP

    def get_data_parallel_group():
        return _GROUP
''')


@unittest.skipUnless(HAVE_TORCH, NO_TORCH)
class TorchTensorParallelTest(DaemonTestCase):
    def write_megatron(self):
        package = self.root / "fake_megatron" / "megatron"
        (package / "core").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "core" / "__init__.py").write_text("")
        (package / "core" / "parallel_state.py").write_text(PARALLEL_STATE)
        return package.parent

    def test_layout_from_megatron_is_announced_per_rank(self):
        from test_torch_job import build_model  # pylint: disable=import-outside-toplevel
        self.daemon.start()
        megatron_dir = self.write_megatron()
        wait_ranks(self, launch_ranks(self.daemon.socket, "tp2", WORLD,
                                      ["--steps", str(STEPS), "--tp", str(TP)],
                                      extra_env={"PYTHONPATH": str(megatron_dir)}))
        shard = build_model(tp=TP)
        head_shard = sum(p.numel() for p in shard.head.parameters())
        model_shard = sum(p.numel() for p in shard.parameters())
        for rank in range(WORLD):
            one = grpc_report(self.daemon.socket, "tp2", ranks=[rank])
            announced = [m.value for m in one.metadata if m.key == "parallel"]
            self.assertEqual(announced, [f"tp={TP} pp=1 dp={WORLD // TP} tp_rank={rank % TP} "
                                         f"pp_rank=0 dp_rank={rank // TP}"])
            rows = {m["path"]: m for m in report(self.daemon.socket, "tp2", rank=rank)["modules"]}
            self.assertEqual(rows["TinyLM/head"]["params"], head_shard)
            self.assertEqual(rows["TinyLM"]["params"], model_shard)
            self.assertEqual(rows["TinyLM/head"]["calls"], 2 * STEPS)
        phases = {p["name"]: p["calls"]
                  for p in report(self.daemon.socket, "tp2", steps="0:")["phases"]}  # every step
        self.assertEqual(phases["step"], WORLD * STEPS)


if __name__ == "__main__":
    unittest.main()
