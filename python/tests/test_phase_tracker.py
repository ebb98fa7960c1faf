"""Automatic and hand-made steps and phases (flopscope domain)."""

import unittest

from flopscope_torch.phase_tracker import PhaseTracker
from recording_backend import Recorder


class PhaseTrackerTest(unittest.TestCase):
    def setUp(self):
        self.recorder = Recorder()
        self.new_steps = 0
        self.ended_steps = 0
        self.phases = PhaseTracker(self.recorder.backend(), on_new_step=self._new_step,
                                   on_step_end=self._step_end)

    def _new_step(self):
        self.new_steps += 1

    def _step_end(self):
        self.ended_steps += 1

    def closed(self):
        return [c.path for c in self.recorder.closed(domain="flopscope")]

    def train_step(self, micro_batches=1, loss_module=True):
        for _ in range(micro_batches):
            self.phases.root_forward_begin(training=True)
            self.phases.root_forward_end()
            if loss_module:  # a second root (nn.CrossEntropyLoss) inside the forward phase
                self.phases.root_forward_begin(training=True)
                self.phases.root_forward_end()
            opened = self.phases.backward_begin()
            self.phases.backward_end(opened)
        opened = self.phases.optimizer_begin()
        self.phases.optimizer_end(opened)

    def test_forward_backward_optimizer_make_one_step(self):
        self.train_step()
        self.train_step()
        self.assertEqual(self.closed(), ["step/forward", "step/backward", "step/optimizer",
                                         "step"] * 2)
        self.assertEqual((self.new_steps, self.ended_steps), (2, 2))
        self.assertEqual(self.phases.open_names(), [])

    def test_a_second_optimizer_opens_no_step_of_its_own(self):
        for _ in range(2):
            self.train_step()
            opened = self.phases.optimizer_begin()  # a second optimizer, after the first
            self.phases.optimizer_end(opened)
        self.assertEqual(self.closed(), ["step/forward", "step/backward", "step/optimizer",
                                         "step", "optimizer"] * 2)
        self.assertEqual((self.new_steps, self.ended_steps), (2, 2))
        self.assertEqual(self.phases.open_names(), [])

    def test_gradient_accumulation_is_one_step(self):
        self.train_step(micro_batches=3)
        self.assertEqual(self.closed().count("step"), 1)
        self.assertEqual(self.closed().count("step/forward"), 3)
        self.assertEqual(self.closed().count("step/backward"), 3)

    def test_evaluation_between_steps_is_a_forward_without_step(self):
        self.train_step()
        self.phases.root_forward_begin(training=False)
        self.phases.root_forward_end()
        self.assertEqual(self.closed()[-1], "forward")
        self.assertEqual(self.phases.open_names(), [])

    def test_forward_inside_backward_is_not_a_new_phase(self):
        self.phases.root_forward_begin(training=True)
        opened = self.phases.backward_begin()
        self.phases.root_forward_begin(training=True)  # activation checkpointing recomputes
        self.phases.root_forward_end()
        self.assertEqual(self.phases.open_names(), ["step", "backward"])
        self.phases.backward_end(opened)

    def test_step_by_hand_turns_automatic_steps_off(self):
        for _ in range(2):
            with self.phases.step():
                self.train_step(loss_module=False)
        self.train_step(loss_module=False)  # outside step(): phases only, no automatic step
        self.assertEqual(self.closed(), ["step/forward", "step/backward", "step/optimizer",
                                         "step"] * 2 + ["forward", "backward", "optimizer"])

    def test_phase_by_hand_suspends_automatic_phases_and_ends_the_step_after(self):
        with self.phases.phase("forward"):
            self.phases.root_forward_begin(training=True)
            self.phases.root_forward_end()
        with self.phases.phase("optimizer"):
            opened = self.phases.optimizer_begin()
            self.phases.optimizer_end(opened)
            self.assertEqual(self.phases.open_names(), ["step", "optimizer"])
        self.assertEqual(self.closed(), ["step/forward", "step/optimizer", "step"])

    def test_close_all_pops_everything_on_this_thread(self):
        self.phases.root_forward_begin(training=True)
        self.phases.close_all()
        self.assertEqual(self.phases.open_names(), [])
        self.assertEqual(self.closed(), ["step/forward", "step"])


if __name__ == "__main__":
    unittest.main()
