"""The FLOPs estimate: each formula against figures worked out from the layer's shapes,
DeepSpeed's LeNet5 reference values (../shared/data/DeepSpeed/REFERENCE_VALUES.md), and code
that TorchScript compiles or torch.fx traces while it is on (its default)."""

import math
import pickle
import re
import unittest
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import torch.fx
from flopscope_torch import flop_estimate
from flopscope_torch.profiler import Profiler
from models import LeNet5
from recording_backend import Recorder
from test_marks import marks_by_key

REFERENCE = (Path(__file__).resolve().parents[2].parent / "shared" / "data" / "DeepSpeed" /
             "REFERENCE_VALUES.md")


class FormulaTest(unittest.TestCase):
    def test_linear_counts_one_mac_per_input_element_and_output_feature(self):
        layer = nn.Linear(12, 5)
        x = torch.randn(3, 7, 12)
        batch, sequence, inputs = x.shape
        macs = batch * sequence * inputs * layer.out_features
        self.assertEqual(flop_estimate.linear(x, layer.weight, layer.bias), (2 * macs, macs))

    def test_convolutions_count_kernel_times_channels_per_output_position(self):
        cases = [(nn.Conv1d(3, 4, 3, stride=2, padding=1), torch.randn(2, 3, 17)),
                 (nn.Conv2d(4, 6, (3, 5), padding=(1, 0), groups=2), torch.randn(2, 4, 9, 11)),
                 (nn.Conv3d(2, 3, 2, bias=False, dilation=2), torch.randn(1, 2, 6, 7, 8))]
        for conv, x in cases:
            out = conv(x)  # the output's shape gives the positions
            positions = out.shape[0] * math.prod(out.shape[2:])
            per_position = (math.prod(conv.kernel_size) * conv.in_channels *
                            (conv.out_channels // conv.groups))
            macs = per_position * positions
            bias = out.numel() if conv.bias is not None else 0
            self.assertEqual(
                flop_estimate.convolution(x, conv.weight, conv.bias, conv.stride, conv.padding,
                                          conv.dilation, conv.groups),
                (2 * macs + bias, macs), conv)

    def test_transposed_convolution_counts_per_input_position(self):
        conv = nn.ConvTranspose2d(3, 4, 3, stride=2)
        x = torch.randn(2, 3, 5, 6)
        out = conv(x)
        macs = math.prod(conv.kernel_size) * conv.in_channels * conv.out_channels * \
            x.shape[0] * math.prod(x.shape[2:])
        self.assertEqual(flop_estimate.convolution_transpose(x, conv.weight, conv.bias,
                                                             conv.stride, conv.padding),
                         (2 * macs + out.numel(), macs))

    def test_matrix_products(self):
        a, b = torch.randn(4, 3, 5), torch.randn(4, 5, 6)
        macs = a.numel() * b.shape[-1]
        self.assertEqual(flop_estimate.matmul(a, b), (2 * macs, macs))
        bias, m1, m2 = torch.randn(3, 6), torch.randn(3, 5), torch.randn(5, 6)
        macs = m1.numel() * m2.shape[-1]
        self.assertEqual(flop_estimate.addmm(bias, m1, m2), (2 * macs + bias.numel(), macs))
        macs = a.numel() * b.shape[-1]
        added = torch.randn(4, 3, 6)
        self.assertEqual(flop_estimate.addmm(added, a, b), (2 * macs + added.numel(), macs))

    def test_the_matmul_operator_counts_as_matmul_in_its_module(self):
        # DeepSpeed patches Tensor.__matmul__ too: `a @ b` (transformers 4's Llama rotary
        # embedding) counts as torch.matmul, once.
        class Product(nn.Module):
            def forward(self, a, b):  # pylint: disable=no-self-use
                return a @ b, torch.matmul(a, b)

        a, b = torch.randn(4, 3, 5), torch.randn(4, 5, 6)
        recorder = Recorder()
        profiler = Profiler()
        profiler.enable(backend=recorder.backend(), environ={})
        try:
            with torch.no_grad():
                by_operator, by_function = Product()(a, b)
        finally:
            profiler.disable()
        self.assertTrue(torch.equal(by_operator, by_function))
        macs = a.numel() * b.shape[-1]
        self.assertEqual(marks_by_key(recorder.marks(), "estimated_macs"), {"Product": str(2 * macs)})
        self.assertNotIn("__matmul__", vars(torch.Tensor))  # uninstalled: TensorBase's again

    def test_attention_is_two_products(self):
        q, k, v = torch.randn(2, 4, 7, 8), torch.randn(2, 4, 9, 8), torch.randn(2, 4, 9, 5)
        batch, heads, queries, depth = q.shape
        keys, values = k.shape[-2], v.shape[-1]
        macs = batch * heads * queries * keys * depth + batch * heads * queries * keys * values
        self.assertEqual(flop_estimate.attention(q, k, v), (2 * macs, macs))

    def test_norms_elementwise_and_per_element_functions(self):
        x = torch.randn(3, 4, 5, 6)
        weight = torch.ones(4)
        n = x.numel()
        self.assertEqual(flop_estimate.norm(x, (6,), torch.ones(6)), (5 * n, 0))
        self.assertEqual(flop_estimate.norm(x, (6,)), (4 * n, 0))
        self.assertEqual(flop_estimate.norm(x, 2, weight), (5 * n, 0))  # group_norm
        stats = torch.zeros(4), torch.ones(4)
        self.assertEqual(flop_estimate.batch_norm(x, *stats, weight, None, True), (5 * n, 0))
        self.assertEqual(flop_estimate.batch_norm(x, *stats, None, None, False), (n, 0))
        self.assertEqual(flop_estimate.per_input_element(x), (n, 0))
        row = torch.randn(6)
        self.assertEqual(flop_estimate.elementwise(x, row), (torch.broadcast_tensors(x, row)[0]
                                                             .numel(), 0))
        self.assertEqual(flop_estimate.interpolate(x, scale_factor=2),
                         (F.interpolate(x, scale_factor=2).numel(), 0))


def reference_rows(text):
    """{module name: (params, MACs, FLOPs)} from section 2's table, TOTAL included."""
    rows = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not re.fullmatch(r"\d+", cells[0] and cells[1]):
            continue
        numbers = [int(re.match(r"\d+", cell).group()) for cell in cells[1:]]
        rows[cells[0].split()[0]] = tuple(numbers)
    return rows


@unittest.skipUnless(REFERENCE.is_file(), f"{REFERENCE} is absent (the shared data directory "
                     "beside the repository holds DeepSpeed's reference values)")
class LeNet5ReferenceTest(unittest.TestCase):
    def setUp(self):
        self.recorder = Recorder()
        self.profiler = Profiler()
        # The default settings: no FLOPSCOPE_TORCH_ESTIMATE.
        self.assertTrue(self.profiler.enable(backend=self.recorder.backend(), environ={}))

    def tearDown(self):
        self.profiler.disable()

    def test_params_macs_and_flops_equal_deepspeeds(self):
        rows = reference_rows(REFERENCE.read_text())
        self.assertIn("TOTAL", rows)
        batch = int(re.search(r"input \((\d+),1,32,32\)", REFERENCE.read_text()).group(1))
        model = LeNet5()
        with torch.no_grad():  # DeepSpeed's get_model_profile: one forward
            model(torch.randn(batch, 1, 32, 32))
        marks = self.recorder.marks()
        flops = {path: int(value) for path, value in marks_by_key(marks, "estimated_flops").items()}
        macs = {path: int(value) for path, value in marks_by_key(marks, "estimated_macs").items()}
        params = {path: int(value) for path, value in marks_by_key(marks, "params").items()}

        total_params, total_macs, total_flops = rows.pop("TOTAL")
        self.assertEqual((params["LeNet5"], macs["LeNet5"], flops["LeNet5"]),
                         (total_params, total_macs, total_flops))
        compared = 0
        for name, expected in rows.items():
            if not re.fullmatch(r"[\w.]+\.\d+", name):
                continue  # the softmax row: counted on the model itself
            container, index = name.rsplit(".", 1)
            path = f"LeNet5/{container}/{index}"
            self.assertEqual((params[path], macs.get(path, 0), flops.get(path, 0)), expected,
                             path)
            compared += 1
        self.assertEqual(compared, sum(len(child) for child in model.children()))


class PerStepTest(unittest.TestCase):
    def test_announced_inside_the_step_and_again_only_when_changed(self):
        recorder = Recorder()
        profiler = Profiler()
        profiler.enable(backend=recorder.backend(), environ={})
        try:
            model = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2))
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            starts = []
            for batch in (3, 3, 5):
                starts.append(recorder.mark_index())
                model(torch.randn(batch, 6)).sum().backward()
                optimizer.step()
            starts.append(recorder.mark_index())
        finally:
            profiler.disable()

        def step_marks(step):
            return [text for _, op, _, text in recorder.events[starts[step]:starts[step + 1]]
                    if op == "mark" and text.startswith("estimated_")]

        def expected(batch):
            first, second = 2 * batch * 6 * 4, 2 * batch * 4 * 2
            relu = batch * 4
            return {"Sequential": first + relu + second, "Sequential/0": first,
                    "Sequential/1": relu, "Sequential/2": second}

        self.assertEqual(marks_by_key(step_marks(0), "estimated_flops"),
                         {k: str(v) for k, v in expected(3).items()})
        self.assertEqual(step_marks(1), [])  # nothing changed
        self.assertEqual(marks_by_key(step_marks(2), "estimated_flops"),
                         {k: str(v) for k, v in expected(5).items()})
        # Each step's marks lie inside its step range.
        closed = recorder.closed(domain="flopscope")
        steps = [c for c in closed if c.path == "step"]
        for step, (start, end) in enumerate(zip(starts, starts[1:])):
            marks = [i for i in range(start, end) if recorder.events[i][1] == "mark"
                     and recorder.events[i][3].startswith("estimated_")]
            for index in marks:
                self.assertTrue(steps[step].start < index < steps[step].end)

    def test_the_precision_of_the_estimate_is_announced_once_per_change(self):
        # Issue 32: MFU took "assumed bf16" for an fp32 model; the estimate says its dtype.
        for dtype, name in ((torch.float32, "fp32"), (torch.float64, "fp64")):
            recorder = Recorder()
            profiler = Profiler()
            profiler.enable(backend=recorder.backend(), environ={})
            try:
                model = nn.Sequential(nn.Linear(6, 4), nn.Linear(4, 2)).to(dtype)
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                for _ in range(3):
                    model(torch.randn(3, 6, dtype=dtype)).sum().backward()
                    optimizer.step()
            finally:
                profiler.disable()
            marks = [text for _, op, _, text in recorder.events
                     if op == "mark" and text.startswith("estimated_precision")]
            self.assertEqual(marks, [f"estimated_precision={name}"])

    def test_autocast_precision_without_deprecated_calls(self):
        # torch 2.4 deprecated is_autocast_cpu_enabled and get_autocast_{cpu,gpu}_dtype (issue 29):
        # the estimate reads autocast's dtype on both torches and warns about nothing.
        recorder = Recorder()
        profiler = Profiler()
        profiler.enable(backend=recorder.backend(), environ={})
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model = nn.Sequential(nn.Linear(6, 4), nn.Linear(4, 2))
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    model(torch.randn(3, 6))
        finally:
            profiler.disable()
        marks = [text for _, op, _, text in recorder.events
                 if op == "mark" and text.startswith("estimated_precision")]
        self.assertEqual(marks, ["estimated_precision=bf16"])
        ours = [str(w.message) for w in caught if "flopscope_torch" in w.filename]
        self.assertEqual(ours, [])


class SwitchTest(unittest.TestCase):
    def test_on_by_default_and_off_with_zero(self):
        self.assertTrue(flop_estimate.estimate_enabled({}))
        self.assertTrue(flop_estimate.estimate_enabled({flop_estimate.ESTIMATE_ENV: "1"}))
        self.assertFalse(flop_estimate.estimate_enabled({flop_estimate.ESTIMATE_ENV: "0"}))

    def test_off_wraps_nothing(self):
        originals = (F.linear, F.relu, torch.matmul, torch.Tensor.mul)
        profiler = Profiler()
        profiler.enable(backend=Recorder().backend(), environ={flop_estimate.ESTIMATE_ENV: "0"})
        try:
            self.assertIsNone(profiler.module_hooks.estimate)
            self.assertEqual((F.linear, F.relu, torch.matmul, torch.Tensor.mul), originals)
        finally:
            profiler.disable()


def scripted_body(x, weight, bias):
    """Calls one wrapped function of each kind TorchScript resolves differently."""
    y = F.linear(x, weight, bias)  # a builtin (aten::linear)
    y = F.relu(F.layer_norm(y, [y.shape[-1]]))  # Python functions
    y = F.softmax(F.gelu(y), dim=-1)
    y = torch.add(torch.matmul(y, y.t()), 1.0)  # torch's builtins
    y = F.max_pool1d(y.unsqueeze(0), 2)  # boolean-dispatched (return_indices)
    return F.interpolate(y, scale_factor=2.0)  # overloaded


def scripted_model(width):
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.LayerNorm(width), nn.GELU(),
                         nn.Softmax(dim=-1), nn.Upsample(scale_factor=2), nn.MaxPool1d(2),
                         nn.Conv1d(3, 2, 3))


class TorchScriptTest(unittest.TestCase):
    """torch.jit.script of functions and modules that call wrapped functions compiles, before,
    while and after the estimate is on, and computes what the uninstrumented code computes."""

    def setUp(self):
        torch.manual_seed(1)
        self.args = (torch.randn(3, 6), torch.randn(5, 6), torch.randn(5))
        self.input = torch.randn(1, 3, 6)
        self.originals = (F.linear, F.relu, F.interpolate, F.max_pool1d, torch.matmul)
        self.expected = scripted_body(*self.args)
        self.expected_model = scripted_model(6)(self.input)
        self.profiler = Profiler()
        self.assertTrue(self.profiler.enable(backend=Recorder().backend(), environ={}))
        wrapped = (F.linear, F.relu, F.interpolate, F.max_pool1d, torch.matmul)
        for original, wrapper in zip(self.originals, wrapped):
            self.assertIsNot(original, wrapper)  # the estimate is on: these are its wrappers

    def tearDown(self):
        self.profiler.disable()

    def test_functions_and_modules_compile_and_compute_the_same(self):
        function = torch.jit.script(scripted_body)
        self.assertTrue(torch.equal(function(*self.args), self.expected))
        model = torch.jit.script(scripted_model(6))
        self.assertTrue(torch.equal(model(self.input), self.expected_model))
        self.profiler.disable()  # compiled while wrapped, run and compiled again unwrapped
        self.assertEqual((F.linear, F.relu, F.interpolate, F.max_pool1d, torch.matmul),
                         self.originals)
        self.assertTrue(torch.equal(function(*self.args), self.expected))
        again = torch.jit.script(scripted_model(6))
        self.assertTrue(torch.equal(again(self.input), self.expected_model))

    def test_decorated_function_defined_while_on(self):
        @torch.jit.script
        def block(x, weight, bias):
            return F.softmax(F.relu(F.linear(x, weight, bias)), dim=-1)

        expected = torch.softmax(torch.relu(self.args[0] @ self.args[1].t() + self.args[2]), -1)
        self.assertTrue(torch.allclose(block(*self.args), expected))

    def test_tracing_records_no_formula(self):
        model = scripted_model(6)
        traced = torch.jit.trace(model, self.input)
        self.assertTrue(torch.equal(traced(self.input), self.expected_model))
        kinds = {node.kind() for node in traced.inlined_graph.nodes()}
        self.assertNotIn("aten::numel", kinds)

    def test_wrapped_module_function_pickles(self):
        self.assertIs(pickle.loads(pickle.dumps(F.relu)), F.relu)


def deepspeed_flops_profiler():
    """DeepSpeed's FlopsProfiler class where DeepSpeed is installed (the torch 2 environment),
    else None."""
    try:
        # pylint: disable-next=import-outside-toplevel
        from deepspeed.profiling.flops_profiler import FlopsProfiler
    except ImportError:
        return None
    return FlopsProfiler


def deepspeed_count(module, *args):
    """(FLOPs, MACs) DeepSpeed's profiler counts for one forward of `module`, run alone."""
    profiler = deepspeed_flops_profiler()(module)
    profiler.start_profile()
    try:
        with torch.no_grad():
            module(*args)
        return profiler.get_total_flops(), profiler.get_total_macs()
    finally:
        profiler.end_profile()


def estimated(module, *args):
    """(FLOPs, MACs) flopscope announces for one forward of `module`, run as a root model."""
    recorder = Recorder()
    profiler = Profiler()
    profiler.enable(backend=recorder.backend(), environ={})
    try:
        with torch.no_grad():
            module(*args)
    finally:
        profiler.disable()
    marks = recorder.marks()
    root = type(module).__name__
    return tuple(int(marks_by_key(marks, key).get(root, 0))
                 for key in ("estimated_flops", "estimated_macs"))


GATES = {nn.RNN: 1, nn.RNNCell: 1, nn.GRU: 3, nn.GRUCell: 3, nn.LSTM: 4, nn.LSTMCell: 4}


def derived_flops(module, steps):
    """Forward FLOPs of a recurrent module over `steps` sequence elements (batch rows x time
    steps), worked out from its hyperparameters rather than from the weights or the kernel's
    arguments. Per element, layer and direction, each of the G gates (1 RNN, 3 GRU, 4 LSTM) takes
    hidden_size dot products with the layer's input and with the recurrent state (n multiplies
    and n - 1 adds each), adds both biases, and then per hidden unit: RNN sums the two
    products (1); GRU adds the two states' parts of its three gates (3), multiplies by r (1), and
    mixes with 1 - z, two products and an add (3); LSTM adds the parts of its four gates (4),
    updates the cell state (3) and the output (3): DeepSpeed's rules. An LSTM's projection
    (proj_size) adds its own dot products, which DeepSpeed leaves out."""
    gates = GATES[type(module)]
    hidden = module.hidden_size
    state = getattr(module, "proj_size", 0) or hidden
    gate_work = {1: 1, 3: 3 + 1 + 3, 4: 4 + 3 + 3}[gates]
    layers = getattr(module, "num_layers", 1)
    directions = 2 if getattr(module, "bidirectional", False) else 1
    total = 0
    for layer in range(layers):
        width = module.input_size if layer == 0 else state * directions
        per_direction = gates * hidden * ((width + width - 1) + (state + state - 1))
        per_direction += gates * hidden * 2 if module.bias else 0
        per_direction += gate_work * hidden
        if state != hidden:
            per_direction += state * (hidden + hidden - 1)
        total += directions * per_direction
    return steps * total


def recurrent_cases():
    """(label, module, input, sequence elements) covering the classes and their options."""
    torch.manual_seed(5)
    return [
        ("RNN tanh", nn.RNN(5, 7), torch.randn(4, 3, 5), 12),
        ("RNN relu, 2 layers, bidirectional, batch_first",
         nn.RNN(5, 7, num_layers=2, nonlinearity="relu", bidirectional=True, batch_first=True),
         torch.randn(3, 4, 5), 12),
        ("GRU, 3 layers, no bias", nn.GRU(5, 6, num_layers=3, bias=False),
         torch.randn(4, 2, 5), 8),
        ("GRU bidirectional, batch_first", nn.GRU(6, 4, bidirectional=True, batch_first=True),
         torch.randn(2, 9, 6), 18),
        ("LSTM", nn.LSTM(5, 6), torch.randn(3, 2, 5), 6),
        ("LSTM, 2 layers, bidirectional, batch_first",
         nn.LSTM(5, 6, num_layers=2, bidirectional=True, batch_first=True),
         torch.randn(2, 4, 5), 8),
        ("RNNCell", nn.RNNCell(5, 7), torch.randn(3, 5), 3),
        ("RNNCell relu, no bias", nn.RNNCell(5, 7, bias=False, nonlinearity="relu"),
         torch.randn(2, 5), 2),
        ("GRUCell", nn.GRUCell(5, 7), torch.randn(3, 5), 3),
        ("LSTMCell", nn.LSTMCell(5, 7), torch.randn(4, 5), 4),
    ]


class RecurrentTest(unittest.TestCase):
    """nn.RNN, nn.GRU, nn.LSTM and their cells: FLOPs as DeepSpeed counts them and no MACs.
    Where DeepSpeed is installed (the torch 2 environment) the expected figures are its own
    count of the same module and input; elsewhere the derivation above (which is checked
    against DeepSpeed where it can be)."""

    def setUp(self):
        self.deepspeed = deepspeed_flops_profiler() is not None

    def test_each_class_and_option_counts_as_deepspeed(self):
        for label, module, x, steps in recurrent_cases():
            with self.subTest(label):
                if self.deepspeed:
                    expected = deepspeed_count(module, x)
                    self.assertEqual(expected, (derived_flops(module, steps), 0), "derivation")
                else:
                    expected = (derived_flops(module, steps), 0)
                self.assertGreater(expected[0], 0)
                self.assertEqual(estimated(module, x), expected)

    def test_lstm_projection_counts_its_product_beside_deepspeeds(self):
        torch.manual_seed(6)
        module, x = nn.LSTM(5, 6, num_layers=2, proj_size=3), torch.randn(4, 2, 5)
        projection = 8 * 2 * 3 * (6 + 6 - 1)  # elements x layers x proj_size dot products
        flops, macs = estimated(module, x)
        self.assertEqual((flops, macs), (derived_flops(module, 8), 0))
        if self.deepspeed:
            self.assertEqual(deepspeed_count(module, x), (flops - projection, 0))

    def test_packed_sequence_counts_the_elements_it_holds(self):
        torch.manual_seed(7)
        module = nn.GRU(5, 6, batch_first=True, bidirectional=True)
        lengths = [4, 2, 1]
        packed = nn.utils.rnn.pack_padded_sequence(torch.randn(3, 4, 5), lengths,
                                                   batch_first=True)
        # DeepSpeed's hook reads input.shape, which a PackedSequence lacks: it raises there.
        self.assertEqual(estimated(module, packed), (derived_flops(module, sum(lengths)), 0))

    def test_unbatched_input_is_one_sequence(self):
        # DeepSpeed takes an unbatched (length, features) input's two dimensions for batch and
        # length; flopscope counts the length alone, as for a batch of one.
        torch.manual_seed(8)
        lstm, cell = nn.LSTM(5, 6, num_layers=2), nn.GRUCell(5, 6)
        self.assertEqual(estimated(lstm, torch.randn(7, 5)), (derived_flops(lstm, 7), 0))
        self.assertEqual(estimated(cell, torch.randn(5)), (derived_flops(cell, 1), 0))

    def test_counted_on_the_recurrent_module_inside_a_model(self):
        torch.manual_seed(9)
        tagger = Tagger()
        x = torch.randint(0, 20, (2, 6))
        recorder = Recorder()
        profiler = Profiler()
        profiler.enable(backend=recorder.backend(), environ={})
        try:
            with torch.no_grad():
                tagger(x)
        finally:
            profiler.disable()
        flops = {path: int(value) for path, value in
                 marks_by_key(recorder.marks(), "estimated_flops").items()}
        lstm, gru = derived_flops(tagger.lstm, 12), derived_flops(tagger.gru, 12)
        head = 2 * 12 * tagger.head.in_features * tagger.head.out_features
        self.assertEqual(flops, {"Tagger": lstm + gru + head, "Tagger/lstm": lstm,
                                 "Tagger/gru": gru, "Tagger/head": head})

    def test_scripted_recurrent_modules_compile_and_compute_the_same(self):
        torch.manual_seed(10)
        model, x = Tagger(), torch.randint(0, 20, (2, 6))
        expected = model(x)
        originals = {name: getattr(torch._VF, name)  # pylint: disable=protected-access
                     for name in flop_estimate.RECURRENT}
        profiler = Profiler()
        self.assertTrue(profiler.enable(backend=Recorder().backend(), environ={}))
        try:
            self.assertIsNot(torch._VF.lstm, originals["lstm"])  # pylint: disable=protected-access
            scripted = torch.jit.script(model)
            self.assertTrue(torch.equal(scripted(x), expected))
        finally:
            profiler.disable()
        self.assertEqual({name: getattr(torch._VF, name)  # pylint: disable=protected-access
                          for name in originals}, originals)
        self.assertTrue(torch.equal(scripted(x), expected))


class Tagger(nn.Module):
    """Embedding, a bidirectional LSTM, a GRU cell stepped over time, a linear head."""

    def __init__(self, vocab=20, dim=4, tags=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(2 * dim, dim, num_layers=1)
        self.head = nn.Linear(dim, tags)

    def forward(self, ids):
        out, _ = self.lstm(self.embed(ids))
        out, _ = self.gru(out.transpose(0, 1))
        return self.head(out)


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x):
        return F.softmax(F.relu(self.linear(x)), dim=-1) * 2


class Stack(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(2))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return torch.matmul(x, x.t())


class FxTest(unittest.TestCase):
    def test_symbolic_trace_gives_the_graph_it_gives_without_the_hooks(self):
        model, x = Stack(4), torch.randn(3, 4)
        expected_graph = str(torch.fx.symbolic_trace(model).graph)
        recorder = Recorder()
        profiler = Profiler()
        self.assertTrue(profiler.enable(backend=recorder.backend(), environ={}))
        try:
            self.assertIsNotNone(profiler.module_hooks.estimate)
            traced = torch.fx.symbolic_trace(model)
            self.assertEqual(str(traced.graph), expected_graph)
            self.assertTrue(torch.equal(traced(x), model(x)))
        finally:
            profiler.disable()


if __name__ == "__main__":
    unittest.main()
