"""Parallel layout from the job's own frameworks (fakes standing in for them)."""

import types
import unittest

from flopscope_torch.parallel_layout import ParallelLayout, discover_layout


def fake_megatron(tp, pp, rank, world, initialized=True):
    dp = world // (tp * pp)
    return types.SimpleNamespace(
        model_parallel_is_initialized=lambda: initialized,
        get_tensor_model_parallel_world_size=lambda: tp,
        get_pipeline_model_parallel_world_size=lambda: pp,
        get_data_parallel_world_size=lambda: dp,
        get_tensor_model_parallel_rank=lambda: rank % tp,
        get_pipeline_model_parallel_rank=lambda: (rank // tp) % pp,
        get_data_parallel_rank=lambda: rank // (tp * pp))


def fake_distributed(world, rank, initialized=True):
    return types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: initialized,
                                 get_world_size=lambda: world, get_rank=lambda: rank)


class ParallelLayoutTest(unittest.TestCase):
    def test_sizes_give_ranks_tp_fastest(self):
        layout = ParallelLayout.from_sizes(2, 2, 8, rank=5, source="t")
        self.assertEqual((layout.dp, layout.tp_rank, layout.pp_rank, layout.dp_rank), (2, 1, 0, 1))
        self.assertEqual(layout.mark_text(),
                         "parallel tp=2 pp=2 dp=2 tp_rank=1 pp_rank=0 dp_rank=1")
        with self.assertRaises(ValueError):
            ParallelLayout.from_sizes(3, 1, 8, rank=0, source="t")

    def test_megatron_wins_over_torch_distributed(self):
        modules = {"megatron.core.parallel_state": fake_megatron(2, 1, rank=3, world=4),
                   "torch.distributed": fake_distributed(4, 3)}
        layout = discover_layout({}, modules)
        self.assertEqual(layout, ParallelLayout(2, 1, 2, 1, 0, 1, "megatron"))

    def test_uninitialised_megatron_falls_back_to_torch_distributed(self):
        modules = {"megatron.mpu": fake_megatron(2, 1, 0, 4, initialized=False),
                   "torch.distributed": fake_distributed(4, 2)}
        self.assertEqual(discover_layout({}, modules),
                         ParallelLayout(1, 1, 4, 0, 0, 2, "torch.distributed"))

    def test_deepspeed_mpu_object(self):
        mpu = types.SimpleNamespace(get_model_parallel_world_size=lambda: 4,
                                    get_model_parallel_rank=lambda: 3,
                                    get_data_parallel_world_size=lambda: 2,
                                    get_data_parallel_rank=lambda: 1)
        modules = {"deepspeed.utils.groups": types.SimpleNamespace(mpu=mpu)}
        self.assertEqual(discover_layout({}, modules),
                         ParallelLayout(4, 1, 2, 3, 0, 1, "deepspeed"))

    def test_explicit_layout_wins_and_nothing_known_is_none(self):
        explicit = ParallelLayout(1, 2, 1, 0, 1, 0, "explicit")
        self.assertIs(discover_layout({"explicit": explicit},
                                      {"torch.distributed": fake_distributed(2, 1)}), explicit)
        self.assertIsNone(discover_layout({}, {}))
        self.assertIsNone(discover_layout({}, {"torch.distributed": fake_distributed(1, 0, False)}))

    def test_a_framework_that_fails_or_lies_is_skipped(self):
        broken = types.SimpleNamespace(model_parallel_is_initialized=lambda: 1 / 0)
        lying = fake_megatron(2, 1, rank=0, world=4)
        lying.get_tensor_model_parallel_rank = lambda: 7
        for megatron in (broken, lying):
            modules = {"megatron.core.parallel_state": megatron,
                       "torch.distributed": fake_distributed(4, 0)}
            self.assertEqual(discover_layout({}, modules).source, "torch.distributed")


if __name__ == "__main__":
    unittest.main()
