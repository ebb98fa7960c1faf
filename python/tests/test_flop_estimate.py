"""The FLOPs estimate: each formula against figures worked out from the layer's shapes, and
DeepSpeed's LeNet5 reference values (../shared/data/DeepSpeed/REFERENCE_VALUES.md)."""

import math
import re
import unittest
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

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
        self.assertTrue(self.profiler.enable(backend=self.recorder.backend(),
                                             environ={flop_estimate.ESTIMATE_ENV: "1"}))

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
        profiler.enable(backend=recorder.backend(), environ={flop_estimate.ESTIMATE_ENV: "1"})
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


if __name__ == "__main__":
    unittest.main()
