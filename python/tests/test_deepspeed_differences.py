"""`deepspeed_differs <path>=<why>`: the modules whose FLOPs DeepSpeed's profiler prints otherwise
than the estimate, found from the model when its tree is announced."""

import unittest

import torch
from torch import nn

from flopscope_torch.metadata_announcer import decode_mark_value
from flopscope_torch.profiler import Profiler
from recording_backend import Recorder
from test_marks import marks_by_key


class HeldGelu(nn.Module):
    """As transformers' GELUActivation: the function is taken when the module is built."""

    def __init__(self):
        super().__init__()
        self.act = nn.functional.gelu

    def forward(self, x):
        return self.act(x)


class LooksUpGelu(nn.Module):
    """Looks the function up at each call, as DeepSpeed's patching expects."""

    def forward(self, x):  # pylint: disable=no-self-use
        return nn.functional.gelu(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.held = HeldGelu()
        self.looked_up = LooksUpGelu()
        self.norm = nn.BatchNorm1d(8)
        self.frozen_norm = nn.BatchNorm1d(8, affine=False)

    def forward(self, x):
        return self.frozen_norm(self.norm(self.looked_up(self.held(self.linear(x)))))


class DeepSpeedDifferencesTest(unittest.TestCase):
    def run_model(self, build, environ=None):
        """Builds the model once the hooks are on, as in a job (they are on from `import torch`),
        runs one forward, and returns the `deepspeed_differs` marks: {path: why}."""
        recorder = Recorder()
        profiler = Profiler()
        self.assertTrue(profiler.enable(backend=recorder.backend(), environ=environ or {}))
        try:
            build()(torch.randn(4, 8))
        finally:
            profiler.disable()
        return {path: decode_mark_value(why)
                for path, why in marks_by_key(recorder.marks(), "deepspeed_differs").items()}

    def test_a_held_function_and_a_training_batch_norm_are_named_with_their_reason(self):
        differs = self.run_model(Net)
        self.assertEqual(set(differs), {"Net/held", "Net/norm", "Net/frozen_norm"})
        self.assertIn("HeldGelu calls torch.nn.functional.gelu through its attribute 'act'",
                      differs["Net/held"])
        self.assertIn("counts 0 FLOPs", differs["Net/held"])
        self.assertIn("BatchNorm1d ran in training mode", differs["Net/norm"])
        self.assertIn("get_model_profile switches the model to eval mode", differs["Net/norm"])

    def test_a_model_in_eval_mode_with_running_statistics_differs_only_where_it_holds_one(self):
        differs = self.run_model(lambda: Net().eval())
        self.assertEqual(set(differs), {"Net/held"})

    def test_a_function_taken_before_the_hooks_were_on_is_counted_by_neither(self):
        model = Net()  # holds torch's own gelu: DeepSpeed and the estimate both count 0 there
        differs = self.run_model(lambda: model)
        self.assertNotIn("Net/held", differs)

    def test_nothing_is_said_without_the_estimate(self):
        self.assertEqual(self.run_model(Net, {"FLOPSCOPE_TORCH_ESTIMATE": "0"}), {})


if __name__ == "__main__":
    unittest.main()
