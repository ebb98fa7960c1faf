"""The marks the package announces: the whole module tree of a root model, and the batch size."""

import unittest

import torch
from torch import nn

from flopscope_torch.metadata_announcer import decode_mark_value
from flopscope_torch.profiler import Profiler
from models import Containers
from recording_backend import Recorder


def marks_by_key(marks, prefix):
    """{path: value} of the `<prefix> <path>=<value>` marks (the last one of a path wins)."""
    found = {}
    for text in marks:
        if text.startswith(prefix + " "):
            key, _, value = text.rpartition("=")
            found[key[len(prefix) + 1:]] = value
    return found


class MarksTestCase(unittest.TestCase):
    environ = {}

    def setUp(self):
        torch.manual_seed(0)
        self.recorder = Recorder()
        self.profiler = Profiler()
        self.assertTrue(self.profiler.enable(backend=self.recorder.backend(),
                                             environ=self.environ))

    def tearDown(self):
        self.profiler.disable()


class TreeMarksTest(MarksTestCase):
    def test_every_module_once_in_model_order_with_containers_and_unused(self):
        model = Containers()
        model(torch.randn(4, 8)).sum().backward()
        model(torch.randn(4, 8))
        marks = self.recorder.marks()

        names = [name for name, _ in model.named_modules()]
        modules = dict(model.named_modules())
        expected_paths = {
            "": "Containers", "blocks": "Containers/blocks", "heads": "Containers/heads",
            "unused": "Containers/unused"}
        # Children of a container (no forward of its own) hang under the container's path.
        for name in names:
            if name.startswith(("blocks.", "heads.")):
                container, _, key = name.partition(".")
                expected_paths[name] = f"Containers/{container}.{key}"
        tree = [text for text in marks if text.startswith("module ")]
        self.assertEqual(len(tree), len(names))  # once each, though forward ran twice
        announced = marks_by_key(marks, "module")
        self.assertEqual(set(announced), set(expected_paths.values()))
        for index, name in enumerate(names):
            path = expected_paths[name]
            position, _, parent = announced[path].partition(" ")
            self.assertEqual(int(position), index, path)
            parent_name = name.rpartition(".")[0]
            self.assertEqual(parent, "" if name == "" else expected_paths[parent_name], path)

        classes = marks_by_key(marks, "class")
        params = marks_by_key(marks, "params")
        extra = marks_by_key(marks, "extra_repr")
        for name, path in expected_paths.items():
            module = modules[name]
            self.assertEqual(classes[path], type(module).__name__)
            self.assertEqual(int(params[path]), sum(p.numel() for p in module.parameters()))
            if module.extra_repr():
                self.assertEqual(decode_mark_value(extra[path]), module.extra_repr())
                self.assertNotIn("=", extra[path])  # the injector splits at the last '='
            else:
                self.assertNotIn(path, extra)

    def test_a_module_run_under_an_unexpected_path_is_linked_to_its_model_path(self):
        outer = nn.Sequential(nn.Linear(4, 4))
        stray = outer[0]

        class Caller(nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = outer

            def forward(self, x):
                return stray(x)  # runs inside Caller, not inside `inner`

        Caller()(torch.randn(2, 4))
        links = marks_by_key(self.recorder.marks(), "range_module")
        self.assertEqual(links, {"Caller/inner.0": "Caller/inner/0"})


class BatchSizeTest(MarksTestCase):
    def batch_marks(self):
        return [text for text in self.recorder.marks() if text.startswith("batch_size")]

    def test_first_dimension_of_the_models_first_input_once(self):
        model = Containers()
        loss = nn.MSELoss()  # a root without parameters: never the batch size's source
        for batch in (6, 3):
            target = torch.randn(batch, 3)
            loss(model(torch.randn(batch, 8)), target).backward()
        sizes = [text for text in self.batch_marks() if text.startswith("batch_size=")]
        self.assertEqual(sizes, ["batch_size=6"])

    def test_announce_batch_size_replaces_the_automatic_one(self):
        model = Containers()
        model(torch.randn(5, 8))
        self.profiler.announce_batch_size(32)
        sizes = [text for text in self.batch_marks() if text.startswith("batch_size=")]
        self.assertEqual(sizes, ["batch_size=5", "batch_size=32"])  # the last one wins


class BatchSizeFromEnvironmentTest(MarksTestCase):
    environ = {"FLOPSCOPE_BATCH_SIZE": "48"}

    def test_the_environment_wins_over_the_input(self):
        Containers()(torch.randn(5, 8))
        marks = [text for text in self.recorder.marks() if text.startswith("batch_size")]
        self.assertEqual(marks, ["batch_size=48", "batch_size_source=FLOPSCOPE_BATCH_SIZE"])


if __name__ == "__main__":
    unittest.main()
