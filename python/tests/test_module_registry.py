"""Names of modules: roots, qualified names, wrappers seen through, parameters."""

import gc
import unittest
import warnings

import torch
from torch import nn

from flopscope_torch.module_registry import ModuleRegistry, count_parameters
from flopscope_torch.profiler import Profiler
from models import TinyLM
from recording_backend import Recorder
from test_marks import marks_by_key


class FullyShardedDataParallel(nn.Module):  # named like torch's FSDP wrapper
    def __init__(self, module):
        super().__init__()
        self._fsdp_wrapped_module = module

    def forward(self, x):
        return self._fsdp_wrapped_module(x)


class _Stack(nn.Module):
    def __init__(self, embed):
        super().__init__()
        self.embed_tokens = embed
        self.norm = nn.LayerNorm(4)

    def forward(self, ids):
        return self.norm(self.embed_tokens(ids))


class SharedEmbedding(nn.Module):
    """One Embedding registered under three names, as transformers 4's T5Model."""

    def __init__(self):
        super().__init__()
        self.shared = nn.Embedding(10, 4)
        self.encoder = _Stack(self.shared)
        self.decoder = _Stack(self.shared)

    def forward(self, ids):
        return self.decoder(ids) + self.encoder(ids)


class _Parent:
    """What ModuleInfo.path_and_name needs of an open range."""

    def __init__(self, info, path):
        self.info = info
        self.path = path


class ModuleRegistryTest(unittest.TestCase):
    def setUp(self):
        self.registry = ModuleRegistry()

    def path_of(self, module, parent=None):
        info = self.registry.info_for(module, inside_module=parent is not None)
        path, _ = info.path_and_name(parent, str)
        return info, path

    def test_root_names_submodules_relative_to_the_open_module(self):
        model = TinyLM()
        root, root_path = self.path_of(model)
        self.assertEqual(root_path, "TinyLM")
        encoder, encoder_path = self.path_of(model.encoder, _Parent(root, root_path))
        self.assertEqual(encoder_path, "TinyLM/encoder")
        layer = model.encoder.layers[1]
        layer_info, layer_path = self.path_of(layer, _Parent(encoder, encoder_path))
        self.assertEqual(layer_path, "TinyLM/encoder/layers.1")  # ModuleList adds nothing
        self.assertEqual(layer_info.qualified_name, "encoder.layers.1")
        self.assertEqual(layer_info.class_name, "TransformerEncoderLayer")
        # Called from outside its parent's forward: the full qualified name.
        _, odd = self.path_of(model.head, _Parent(layer_info, layer_path))
        self.assertEqual(odd, "TinyLM/encoder/layers.1/head")
        _, alone = self.path_of(model.encoder.layers[0].norm1)
        self.assertEqual(alone, "encoder.layers.0.norm1")

    def test_module_outside_every_tree_is_named_by_its_class(self):
        model = TinyLM()
        root, root_path = self.path_of(model)
        _, path = self.path_of(nn.GELU(), _Parent(root, root_path))
        self.assertEqual(path, "TinyLM/GELU")

    def test_wrappers_are_transparent_and_their_inner_names_close_up(self):
        inner = nn.Sequential(nn.Linear(2, 2), FullyShardedDataParallel(nn.Linear(2, 2)))
        outer = FullyShardedDataParallel(inner)
        self.assertTrue(self.registry.info_for(outer, inside_module=False).transparent)
        root = self.registry.info_for(inner, inside_module=False)
        self.assertEqual(root.qualified_name, "")
        wrapper = self.registry.get(inner[1])
        wrapped = self.registry.get(inner[1]._fsdp_wrapped_module)
        self.assertTrue(wrapper.transparent)
        self.assertEqual(wrapped.qualified_name, "1")
        self.assertEqual(wrapped.range_name(root), "1")

    def test_a_module_of_several_names_is_a_row_at_each_and_runs_under_its_parents_name(self):
        # transformers 4's T5: one Embedding as shared, encoder.embed_tokens, decoder.embed_tokens.
        model = SharedEmbedding()
        root, root_path = self.path_of(model)
        names = [name for name, _ in model.named_modules(remove_duplicate=False)]
        self.assertEqual([info.qualified_name for info in root.tree.infos], names)  # print(model)'s
        self.assertEqual([info.model_path for info in root.tree.infos],
                         ["SharedEmbedding"] + [f"SharedEmbedding/{name.replace('.', '/')}"
                                                for name in names[1:]])
        encoder, encoder_path = self.path_of(model.encoder, _Parent(root, root_path))
        _, path = self.path_of(model.shared, _Parent(encoder, encoder_path))
        self.assertEqual(path, "SharedEmbedding/encoder/embed_tokens")
        _, path = self.path_of(model.shared, _Parent(root, root_path))
        self.assertEqual(path, "SharedEmbedding/shared")

        recorder = Recorder()
        profiler = Profiler()
        profiler.enable(backend=recorder.backend(), environ={})
        try:
            model(torch.randint(0, 10, (2, 3)))
        finally:
            profiler.disable()
        marks = recorder.marks()
        self.assertEqual(list(marks_by_key(marks, "module")),
                         [info.model_path for info in root.tree.infos])
        ran = {c.path for c in recorder.closed()}
        self.assertLessEqual({"SharedEmbedding/encoder/embed_tokens",
                              "SharedEmbedding/decoder/embed_tokens"}, ran)
        self.assertNotIn("SharedEmbedding/encoder/shared", ran)
        self.assertEqual(marks_by_key(marks, "range_module"), {})  # each ran as a row of its own

    def test_entries_die_with_their_modules(self):
        model = TinyLM()
        self.registry.info_for(model, inside_module=False)
        self.assertEqual(len(self.registry), len(list(model.modules())))
        del model
        gc.collect()
        self.assertEqual(len(self.registry), 0)

    def test_parameter_counts_include_submodules_and_zero3_sizes(self):
        model = TinyLM()
        self.assertEqual(count_parameters(model), sum(p.numel() for p in model.parameters()))
        linear = nn.Linear(4, 3)
        linear.weight.ds_numel = 12  # DeepSpeed ZeRO-3: numel() of a partitioned weight is 0
        linear.weight.data = torch.empty(0)
        self.assertEqual(count_parameters(linear), 15)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Lazy modules are a new feature"
            self.assertIsNone(count_parameters(nn.LazyLinear(3)))


if __name__ == "__main__":
    unittest.main()
