"""Estimated forward FLOPs and MACs per module and step, by DeepSpeed's flops profiler's rules.

Unless switched off (FLOPSCOPE_TORCH_ESTIMATE=0, see docs/marks.md) the package wraps the functions
DeepSpeed counts (torch.nn.functional's linear, convolutions, activations, pooling, softmax,
norms, interpolation and scaled_dot_product_attention; torch's and Tensor's matmul, mm, bmm,
addmm, baddbmm, mul and add; the `@` operator). Each wrapped call made while a module's forward
range is the innermost open range on the thread adds its figures to that range; torch.tanh,
torch.sigmoid and the like are not wrapped, so they count 0, as in DeepSpeed. A module's figure is inclusive (its
own calls and its submodules'), summed over its forward calls in the step, and announced as
`estimated_flops <range path>=<n>` / `estimated_macs <range path>=<n>` just before the step range
closes (or, with no step open, when a root model's forward ends), only when it differs from the
last figure announced for that path on the thread (0 when the path did not run in a step
that counted something). The wrappers are made by script_safe, so that torch.jit.script still
compiles code calling them as it would the originals; a wrapper counts nothing under
torch.jit.trace, nor when its first argument is neither a tensor nor a number (a torch.fx Proxy).

torch.utils.flop_counter (torch >= 2.1) is not used: it counts aten operators with other rules
(no bias, pooling, softmax or norm FLOPs), so its figures would not match DeepSpeed's.

The torch._VF kernels of nn.RNN, nn.GRU, nn.LSTM and their cells (rnn_tanh, rnn_relu, gru,
lstm and their *_cell kernels) are wrapped too: DeepSpeed counts those modules by module hooks,
FLOPs from the weights' shapes and the sequence elements and no MACs, and so does their formula
here, from the kernel's arguments (so any module that runs them counts).
"""

import functools
import math

import torch
import torch.nn.functional as F
from torch import _VF

from . import script_safe

ESTIMATE_ENV = "FLOPSCOPE_TORCH_ESTIMATE"
# Whether the JIT is tracing (torch.jit.trace records no formula's calls).
# pylint: disable-next=protected-access
_TRACING = getattr(torch._C, "_is_tracing", None) or torch._C._get_tracing_state
# Whether Dynamo (torch.compile, torch.export) is tracing: a constant True to Dynamo, which then
# traces the original function alone; torch 1.13 has no Dynamo.
_COMPILING = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (lambda: False)


def _numel(shape):
    return int(math.prod(shape))


# ---- formulas: (flops, macs) of one call, from the call's own arguments ----

def linear(input, weight, bias=None):  # pylint: disable=redefined-builtin,unused-argument
    macs = input.numel() * weight.shape[0]
    return 2 * macs, macs


def _as_tuple(value, count):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * count


def convolution(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    # pylint: disable=redefined-builtin
    """conv1d/2d/3d: MACs = kernel size x input channels x (output channels / groups) per output
    position; FLOPs = 2 x MACs, plus one per output element for the bias."""
    spatial = weight.dim() - 2
    kernel = tuple(weight.shape[2:])
    inputs = tuple(input.shape[-spatial:])
    stride, dilation = _as_tuple(stride, spatial), _as_tuple(dilation, spatial)
    if padding == "same":
        outputs = inputs
    else:
        padding = (0,) * spatial if padding == "valid" else _as_tuple(padding, spatial)
        outputs = tuple((size + 2 * pad - dil * (k - 1) - 1) // st + 1 for size, pad, dil, k, st
                        in zip(inputs, padding, dilation, kernel, stride))
    batch = input.shape[0] if input.dim() == spatial + 2 else 1
    in_channels = input.shape[-spatial - 1]
    out_channels = weight.shape[0]
    positions = batch * _numel(outputs)
    macs = _numel(kernel) * in_channels * (out_channels // groups) * positions
    bias_flops = out_channels * positions if bias is not None else 0
    return 2 * macs + bias_flops, macs


def convolution_transpose(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                          groups=1, dilation=1):  # pylint: disable=redefined-builtin
    """conv_transpose1d/2d/3d: MACs per input position (weight is in x out/groups x kernel)."""
    spatial = weight.dim() - 2
    kernel = tuple(weight.shape[2:])
    inputs = tuple(input.shape[-spatial:])
    stride, padding = _as_tuple(stride, spatial), _as_tuple(padding, spatial)
    output_padding, dilation = _as_tuple(output_padding, spatial), _as_tuple(dilation, spatial)
    outputs = tuple((size - 1) * st - 2 * pad + dil * (k - 1) + extra + 1 for size, st, pad, dil, k,
                    extra in zip(inputs, stride, padding, dilation, kernel, output_padding))
    batch = input.shape[0] if input.dim() == spatial + 2 else 1
    in_channels = input.shape[-spatial - 1]
    out_channels = weight.shape[1] * groups
    macs = _numel(kernel) * in_channels * (out_channels // groups) * batch * _numel(inputs)
    bias_flops = out_channels * batch * _numel(outputs) if bias is not None else 0
    return 2 * macs + bias_flops, macs


def per_input_element(input, *args, **kwargs):  # pylint: disable=redefined-builtin,unused-argument
    """Activations, pooling, softmax: one FLOP per input element, no MACs."""
    return input.numel(), 0


def interpolate(input, size=None, scale_factor=None, *args, **kwargs):
    # pylint: disable=redefined-builtin,unused-argument,keyword-arg-before-vararg
    """One FLOP per output element."""
    spatial = input.dim() - 2
    leading = input.shape[0] * input.shape[1]
    if size is not None:
        return leading * _numel(_as_tuple(size, spatial)), 0
    scales = _as_tuple(scale_factor, spatial)
    return leading * _numel(int(math.floor(s * f)) for s, f in zip(input.shape[2:], scales)), 0


def batch_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
               training=False, *args, **kwargs):
    # pylint: disable=redefined-builtin,unused-argument,keyword-arg-before-vararg
    """Per element: 4 in training (+1 with an affine weight), 1 in eval (+1 affine)."""
    affine = weight is not None
    if training:
        return input.numel() * (5 if affine else 4), 0
    return input.numel() * (2 if affine else 1), 0


def norm(input, shape_or_groups=None, weight=None, *args, **kwargs):
    # pylint: disable=redefined-builtin,unused-argument,keyword-arg-before-vararg
    """layer_norm / group_norm: 4 per element, 5 with an affine weight."""
    return input.numel() * (5 if weight is not None else 4), 0


def instance_norm(input, running_mean=None, running_var=None, weight=None, *args, **kwargs):
    # pylint: disable=redefined-builtin,unused-argument,keyword-arg-before-vararg
    return input.numel() * (5 if weight is not None else 4), 0


def matmul(input, other, *args, **kwargs):  # pylint: disable=redefined-builtin,unused-argument
    """matmul/mm/bmm: MACs = elements of the first operand x the second's last dimension."""
    macs = input.numel() * (other.shape[-1] if other.dim() > 1 else 1)
    return 2 * macs, macs


def addmm(input, first, second, *args, **kwargs):
    # pylint: disable=redefined-builtin,unused-argument
    """addmm/baddbmm: the product, plus one FLOP per element of the added tensor."""
    macs = first.numel() * second.shape[-1]
    return 2 * macs + input.numel(), macs


def elementwise(input, other, *args, **kwargs):  # pylint: disable=redefined-builtin,unused-argument
    """mul/add: one FLOP per element of the broadcast result."""
    shapes = [tuple(value.shape) for value in (input, other) if isinstance(value, torch.Tensor)]
    if not shapes:
        return 1, 0
    return _numel(torch.broadcast_shapes(*shapes)), 0


def attention(query, key, value, *args, **kwargs):  # pylint: disable=unused-argument
    """scaled_dot_product_attention: query x key^T, then the weights x value."""
    lq_heads = query.numel() // query.shape[-1]
    macs = query.numel() * key.shape[-2] + lq_heads * key.shape[-2] * value.shape[-1]
    return 2 * macs, macs


# ---- recurrent layers: the torch._VF kernels nn.RNN, nn.GRU, nn.LSTM and their cells call ----
#
# DeepSpeed counts these modules from their weights' shapes, per sequence element, layer and
# direction: each gate's two matrix-vector products (an n-long dot product is n multiplies and
# n - 1 adds), both biases (one add per gate unit each), and the element-wise gate arithmetic per
# hidden unit below; and no MACs. The same figures here come from the kernel's own arguments, so
# every module or function that runs the kernel counts, whatever its class.

_GATES = {"rnn_tanh": 1, "rnn_relu": 1, "gru": 3, "lstm": 4}
# Gate arithmetic per hidden unit and step, beyond the products and the biases, by DeepSpeed's
# count: RNN 1 (the two products' sum); GRU 7 (r's Hadamard product, three adds of the two
# states' parts, the last two products and the add); LSTM 10 (four adds of the two states'
# parts, three for the cell state, three for the output).
_GATE_WORK = {"rnn_tanh": 1, "rnn_relu": 1, "gru": 7, "lstm": 10}


def _dot_products(weight):
    """FLOPs of weight @ vector: per output row, as many multiplies as columns, one add fewer."""
    return weight.shape[0] * (2 * weight.shape[1] - 1)


def _recurrent_step(kind, w_ih, w_hh, biased, w_hr=None):
    """FLOPs of one layer in one direction for one sequence element (one batch row).
    `w_hr`, an LSTM's projection (proj_size), adds its own product, which DeepSpeed leaves out."""
    gate_rows = w_ih.shape[0]  # gates x hidden_size
    flops = _dot_products(w_ih) + _dot_products(w_hh)
    flops += _GATE_WORK[kind] * (gate_rows // _GATES[kind])
    if biased:
        flops += 2 * gate_rows
    if w_hr is not None:
        flops += _dot_products(w_hr)
    return flops


def recurrent(kind):
    """The formula of _VF.<kind> (nn.RNN's rnn_tanh/rnn_relu, nn.GRU's gru, nn.LSTM's lstm):
    the step's FLOPs of every layer and direction, times the sequence elements of the input (batch
    x length of a padded input, batch_first or not; the packed data's rows of a PackedSequence)."""

    def formula(input, *args, **kwargs):  # pylint: disable=redefined-builtin,unused-argument
        # (input, hx, weights, has_biases, num_layers, dropout, train, bidirectional, ...) or,
        # packed, (data, batch_sizes, hx, weights, ...): batch_sizes is the one 1-d tensor there
        packed = isinstance(args[0], torch.Tensor) and args[0].dim() == 1
        weights, biased, layers, _, _, bidirectional = args[2:8] if packed else args[1:7]
        elements = input.shape[0] if packed else input.shape[0] * input.shape[1]
        groups = layers * (2 if bidirectional else 1)
        stride = len(weights) // groups  # w_ih, w_hh[, b_ih, b_hh][, w_hr] of each group
        projected = stride == 3 + 2 * bool(biased)
        step = 0
        for group in range(groups):
            own = weights[group * stride:(group + 1) * stride]
            step += _recurrent_step(kind, own[0], own[1], biased, own[-1] if projected else None)
        return elements * step, 0

    return formula


def recurrent_cell(kind):
    """The formula of _VF.<kind>_cell (nn.RNNCell, nn.GRUCell, nn.LSTMCell): one step per batch
    row (an unbatched input is one row)."""

    def formula(input, hx, w_ih, w_hh, b_ih=None, *args, **kwargs):
        # pylint: disable=redefined-builtin,unused-argument,keyword-arg-before-vararg
        rows = input.shape[0] if input.dim() > 1 else 1
        return rows * _recurrent_step(kind, w_ih, w_hh, b_ih is not None), 0

    return formula


FUNCTIONAL = {
    "linear": linear,
    "conv1d": convolution, "conv2d": convolution, "conv3d": convolution,
    "conv_transpose1d": convolution_transpose, "conv_transpose2d": convolution_transpose,
    "conv_transpose3d": convolution_transpose,
    "relu": per_input_element, "prelu": per_input_element, "elu": per_input_element,
    "leaky_relu": per_input_element, "relu6": per_input_element, "silu": per_input_element,
    "gelu": per_input_element, "softmax": per_input_element,
    "avg_pool1d": per_input_element, "avg_pool2d": per_input_element,
    "avg_pool3d": per_input_element, "max_pool1d": per_input_element,
    "max_pool2d": per_input_element, "max_pool3d": per_input_element,
    "adaptive_avg_pool1d": per_input_element, "adaptive_avg_pool2d": per_input_element,
    "adaptive_avg_pool3d": per_input_element, "adaptive_max_pool1d": per_input_element,
    "adaptive_max_pool2d": per_input_element, "adaptive_max_pool3d": per_input_element,
    "upsample": interpolate, "interpolate": interpolate,
    "batch_norm": batch_norm, "layer_norm": norm, "group_norm": norm,
    "instance_norm": instance_norm,
    "scaled_dot_product_attention": attention,
}
TENSOR_OPS = {
    "matmul": matmul, "mm": matmul, "bmm": matmul, "addmm": addmm, "baddbmm": addmm,
    "mul": elementwise, "add": elementwise,
    # The `@` operator, as DeepSpeed patches Tensor.__matmul__ (torch has no such function).
    "__matmul__": matmul,
}
RECURRENT = {**{kind: recurrent(kind) for kind in _GATES},
             **{f"{kind}_cell": recurrent_cell(kind) for kind in _GATES}}


def estimate_enabled(environ):
    """Whether the estimate is switched on: on unless FLOPSCOPE_TORCH_ESTIMATE=0."""
    return environ.get(ESTIMATE_ENV, "1") != "0"


_PRECISION_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16",
                    torch.float64: "fp64"}


if hasattr(torch, "get_autocast_dtype"):
    def _compute_dtype(tensor):
        """The dtype a call on `tensor` computes in: autocast's where it is on, else the
        tensor's. torch 2.4 on asks by device type (is_autocast_cpu_enabled and
        get_autocast_{cpu,gpu}_dtype are deprecated there)."""
        device = "cuda" if tensor.is_cuda else "cpu"
        if torch.is_autocast_enabled(device):
            return torch.get_autocast_dtype(device)
        return tensor.dtype
else:
    def _compute_dtype(tensor):
        """The dtype a call on `tensor` computes in (torch before 2.4: one function a device)."""
        if tensor.is_cuda and torch.is_autocast_enabled():
            return torch.get_autocast_gpu_dtype()
        if not tensor.is_cuda and torch.is_autocast_cpu_enabled():
            return torch.get_autocast_cpu_dtype()
        return tensor.dtype


def _counting_body(original, formula, local, dtypes):
    """The wrapper's code: counts a call made inside a forward range, then calls the original.
    It reads closure variables only (script_safe re-makes it with the original's globals), and
    counts calls on tensors and numbers only (a torch.fx Proxy would record the formula's own
    calls). `dtypes` sums the FLOPs by the dtype they compute in (estimated_precision)."""
    _fs_original, _fs_formula, _fs_local, _fs_dtypes = original, formula, local, dtypes
    _fs_dtype_of = _compute_dtype
    _fs_counted_types, _fs_tracing = (torch.Tensor, int, float), _TRACING
    _fs_compiling = _COMPILING

    def counted(*args, **kwargs):
        if _fs_compiling():  # Dynamo traces the original alone (no state, no graph break)
            return _fs_original(*args, **kwargs)
        state = getattr(_fs_local, "state", None)
        if state is not None and state.entries:
            entry = state.entries[-1]
            first = args[0] if args else next(iter(kwargs.values()), None)
            if not entry.backward and isinstance(first, _fs_counted_types) and not _fs_tracing():
                try:
                    flops, macs = _fs_formula(*args, **kwargs)
                except Exception:  # pylint: disable=broad-except
                    flops = macs = 0  # an unusual call: the original says what is wrong
                if flops or macs:
                    if not (entry.flops or entry.macs):
                        state.touched.append(entry)
                    entry.flops += flops
                    entry.macs += macs
                    if isinstance(first, torch.Tensor):
                        dtype = _fs_dtype_of(first)
                        _fs_dtypes[dtype] = _fs_dtypes.get(dtype, 0) + flops
        return _fs_original(*args, **kwargs)

    return counted


class FlopEstimate:
    """Wraps the counted functions while installed; `ranges` (ThreadRanges) says which range
    is open on the calling thread, `mark` announces. Counts go to the forward Entry on top of
    the thread's stack; `flush()` announces the thread's figures of the step."""

    def __init__(self, ranges, mark):
        self._ranges = ranges
        self._mark = mark
        self._saved = []  # (owner, name, original, wrapper, whether owner's own __dict__ held it)
        self._dtypes = {}  # FLOPs by the dtype they compute in, every thread's
        self._precision = None  # the last `estimated_precision` announced

    def install(self):
        for name, formula in FUNCTIONAL.items():
            self._wrap(F, name, formula)
        for name, formula in TENSOR_OPS.items():
            self._wrap(torch, name, formula)
            self._wrap(torch.Tensor, name, formula)
        for name, formula in RECURRENT.items():
            self._wrap(_VF, name, formula)

    def uninstall(self):
        for owner, name, original, wrapper, own in reversed(self._saved):
            if own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)
            if owner is not torch.Tensor:
                script_safe.forget(wrapper, original)
        self._saved = []

    def functional_wrappers(self):
        """wrapper -> name of each torch.nn.functional function counted while installed (a
        module holding one in an attribute is where DeepSpeed counts less: deepspeed_differences)."""
        return {wrapper: name for owner, name, _, wrapper, _ in self._saved if owner is F}

    def _announce_precision(self):
        if not self._dtypes:
            return
        dominant = max(list(self._dtypes.items()), key=lambda item: item[1])[0]
        name = _PRECISION_NAMES.get(dominant)
        if name is not None and name != self._precision:
            self._precision = name
            self._mark(f"estimated_precision={name}")

    def _wrap(self, owner, name, formula):
        original = getattr(owner, name, None)
        if original is None:
            return
        body = _counting_body(original, formula, self._ranges.local, self._dtypes)
        if owner is torch.Tensor:  # a method: TorchScript never looks it up in Python
            wrapper = functools.update_wrapper(body, original)
        else:
            wrapper = script_safe.make(original, body)
            if wrapper is None:
                return  # a kind TorchScript would not take as the original: left uncounted
        own = name in vars(owner)
        self._saved.append((owner, name, original, wrapper, own))
        setattr(owner, name, wrapper)

    def flush(self):
        """Announces this thread's inclusive figures per range path since the last flush, and
        `estimated_precision=<p>` (the dtype most estimated FLOPs compute in: MFU's peak) when it
        changed."""
        state = self._ranges.state()
        if not state.touched:
            return  # no forward counted (an optimizer-only step, exit): nothing to say
        self._announce_precision()
        own = [(entry, entry.flops, entry.macs) for entry in state.touched]
        for entry in state.touched:
            entry.flops = entry.macs = 0
        state.touched = []
        if own == state.counted:
            return  # the same ranges counted the same figures: the totals announced still hold
        state.counted = own
        totals = {}
        for entry, flops, macs in own:
            while entry is not None and not entry.backward:
                previous = totals.get(entry.path, (0, 0))
                totals[entry.path] = (previous[0] + flops, previous[1] + macs)
                entry = entry.parent
        last = state.estimates
        for path in [path for path in last if path not in totals]:
            totals[path] = (0, 0)
        for path, (flops, macs) in totals.items():
            old_flops, old_macs = last.get(path, (None, None))
            if flops != old_flops:
                self._mark(f"estimated_flops {path}={flops}")
            if macs != old_macs:
                self._mark(f"estimated_macs {path}={macs}")
            if flops or macs:
                last[path] = (flops, macs)
            else:
                last.pop(path, None)
