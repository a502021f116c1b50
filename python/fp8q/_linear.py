"""fp8q.linear: the nn.Linear convention y = x @ w.T + bias over
fp8q.scaled_mm, with x quantized on the fly when it is not FP8 already, or,
weight-only, x kept in its float dtype against the FP8 weight.

Only the arguments are checked and laid out here; the computation is one
call of fp8q._C.linear, which runs the forward of fp8q.torch.Linear
(csrc/python/linear_layer.c: quantize + scaled_mm's product, or the
weight-only product), so fp8q.linear and the torch layer agree by
construction.
"""
import math

from fp8q import _C
from fp8q._qtensor import QTensor

# Block granularity of weights and of the activations that go with them.
_WEIGHT_BLOCK = (128, 128)
_ACTIVATION_BLOCK = (1, 128)
_FLOAT_DTYPES = ("float32", "float16", "bfloat16")


def _weight_scaling(w):
    """"tensor", "row" or "block" for a weight QTensor; ValueError for a
    granularity scaled_mm has no mode for."""
    if w.granularity in ("tensor", "row"):
        return w.granularity
    if w.granularity == _WEIGHT_BLOCK:
        return "block"
    raise ValueError(
        "linear: w must be quantized with granularity \"tensor\", \"row\" "
        "(one scale per output feature) or (128, 128), got "
        f"{w.granularity!r}")


def _x_scale(x, w, scaling, k):
    """The scales of a QTensor x laid out as scaled_mm's scale_a for x's
    (M, k) rows: () for tensor scales (repeated over rows if need be),
    (M, 1) per row, (M, k/128 rounded up) for 1x128 blocks; ValueError for
    x of another width or scales that do not pair with w's."""
    if x.shape[-1:] != (k,):
        raise ValueError(f"linear: x has shape {x.shape}, but w expects "
                         f"{k} input features (the last axis)")
    m = math.prod(x.shape[:-1])
    if x.granularity == "tensor" and scaling != "block":
        return x.scale.reshape(())
    if x.granularity == "row" and scaling != "block":
        return x.scale.reshape((m, 1))
    if x.granularity == _ACTIVATION_BLOCK and scaling == "block":
        return x.scale.reshape(m, x.scale.shape[-1])
    raise ValueError(
        f"linear: x quantized with granularity {x.granularity!r} "
        f"does not combine with a weight of {w.granularity!r} scales; "
        "pass x unquantized to have it quantized to match")


def _is_dtype(dtype, name):
    """Whether dtype, as anything fp8q.dtype accepts (e.g. np.float32,
    "f4", torch.bfloat16), is the dtype called name; False for a value
    fp8q.dtype refuses."""
    try:
        return _C.dtype(dtype).name == name
    except TypeError:
        return False


def _check_x(x, k, weight_only, out_dtype):
    """linear's refusals of a float x (an fp8q.Tensor): weight_only's dtype
    rules, not (..., k), FP8 without scales."""
    if weight_only and x.dtype.name not in _FLOAT_DTYPES:
        raise TypeError(
            "linear: weight_only=True multiplies a float x (float32, "
            f"float16 or bfloat16) by the FP8 weight; got x of dtype "
            f"{x.dtype}")
    if weight_only and out_dtype is not None and \
            not _is_dtype(out_dtype, x.dtype.name):
        raise ValueError(
            "linear: weight_only=True gives the result in x's dtype "
            f"({x.dtype}); out_dtype={out_dtype!r} differs (cast x, or the "
            "result, with fp8q.cast)")
    if x.ndim == 0 or x.shape[-1] != k:
        raise ValueError(f"linear: x has shape {x.shape}, but w expects {k} "
                         "input features (the last axis)")
    if x.dtype.is_fp8:
        raise TypeError(
            "linear: x is FP8 data without scales; pass a QTensor "
            "(fp8q.quantize) or the unquantized float tensor")


def _check_pairing(x_data, x, w, bias, n):
    """linear's own refusals of what scaled_mm would refuse under its names
    (a, b): x and w on different devices, two float8_e5m2 operands, a bias
    that is not N values or is on another device than x's (a CPU bias is
    copied to x's device, as scaled_mm takes it). Returns bias as an
    fp8q.Tensor on x's device (or None)."""
    if x_data.device != w.data.device:
        raise ValueError(
            f"linear: x is on {x_data.device} but w is on {w.data.device}; "
            "move one of them (.to(device)) so both are on the same device")
    if isinstance(x, QTensor) and x.dtype.name == w.dtype.name == "float8_e5m2":
        raise TypeError(
            "linear: x and w are both float8_e5m2, but an FP8 product needs "
            "one float8_e4m3fn operand; quantize x to float8_e4m3fn, or pass "
            "it unquantized to have it quantized to match")
    if bias is None:
        return None
    bias = _C._tensor_argument(bias, "bias")
    if bias.shape != (n,):
        raise ValueError(f"linear: bias must hold N = {n} values (one per "
                         f"output feature of w), got shape {bias.shape}")
    if bias.device != x_data.device:
        if bias.device != "cpu":
            raise ValueError(
                f"linear: bias is on {bias.device}, but x is on "
                f"{x_data.device}; bias must be on {x_data.device} or the "
                "CPU (tensor.to(...))")
        bias = _C.asarray(bias, device=x_data.device)
    return bias


def _empty_sums(x_data, w, bias, out_dtype, stream):
    """x @ w.T + bias for K = 0 input features: every row is the bias (or
    zeros), rounded into out_dtype, as torch's linear gives it. One
    scaled_mm of empty operands (its K = 0 product is the bias, on either
    device; the C entry's product divides by K), whose refusals (out_dtype,
    stream) are linear's: they name linear."""
    rows = math.prod(x_data.shape[:-1])
    empty = _C.empty((rows, 0), "float8_e4m3fn", device=x_data.device)
    try:
        y = _C.scaled_mm(empty, w.data.T, scale_a=1.0, scale_b=1.0,
                         bias=bias, out_dtype=out_dtype, stream=stream)
    except (TypeError, ValueError) as error:
        raise type(error)(str(error).replace("scaled_mm:", "linear:", 1)) \
            from None
    return y.reshape(x_data.shape[:-1] + (w.shape[0],))


def linear(x, w, *, bias=None, out_dtype=None, weight_only=False,
           stream=None):
    """y = x @ w.T + bias with FP8 operands, the nn.Linear convention.

    w: an fp8q.QTensor of shape (N, K) (output features, input features)
    with "tensor", "row" (one scale per output feature) or (128, 128) block
    scales. x: (..., K), either a QTensor or any float tensor fp8q accepts,
    which is then quantized dynamically to w's dtype (float8_e4m3fn when w
    is float8_e5m2, as an FP8 product needs one e4m3fn operand) per row (per
    token), or in 1x128 blocks when w is block-scaled. A QTensor x must have scales that
    pair with w's: tensor or row with tensor or row weights, (1, 128) blocks
    with block weights.

    bias: None or N values. out_dtype: the result's dtype; default x's float
    dtype, or bfloat16 when x is a QTensor. Returns an fp8q.Tensor of shape
    x.shape[:-1] + (N,), computed by fp8q.scaled_mm (the product of the
    dequantized operands, accumulated in float32, bias added, rounded once)
    on the device of x and w (on a GPU: cuBLASLt, on `stream`, as every
    fp8q operation takes it).
    K = 0 gives the bias (or zeros) in every row, as torch's linear does.
    A float x's token (row) holding NaN or infinity gives a row of NaN
    and leaves the other rows as without it (as fp8q.torch.Linear: both
    are one C call, fp8q._C.linear).

    weight_only=True (W8A16): x is not quantized. It must be a float32,
    float16 or bfloat16 tensor, and y = x @ (decode(w) * scale).T + bias is
    computed from the exact FP8 decodes with float32 sums, rounded once
    into x's dtype (the result's dtype; out_dtype, if given, must be it).
    Within docs/numerics.md's float32 accumulation bound of the exact
    product. On a GPU (K a multiple of 16) the FP8 codes are read in place,
    with no float copy of w (kernels/gemv.cuh: up to 8 rows of x a launch
    on the CUDA cores, up to 64 on the tensor cores for float16 / bfloat16
    x; every launch reads all of w, so it is built for few tokens: for
    large batches quantize x instead). On the CPU, w is decoded to float32
    (w * scale rounded once per value) and multiplied by NumPy's float32
    product.
    """
    if not isinstance(w, QTensor):
        raise TypeError(
            "linear: w must be an fp8q.QTensor (fp8q.quantize(weight, ...)), "
            f"got {type(w).__name__}")
    if len(w.shape) != 2:
        raise ValueError(f"linear: w must be 2-D (N, K), got shape {w.shape}")
    n, k = w.shape
    scaling = _weight_scaling(w)
    if isinstance(x, QTensor):
        if weight_only:
            raise TypeError(
                "linear: weight_only=True multiplies a float x (float32, "
                "float16 or bfloat16) by the FP8 weight; got a QTensor")
        x_scale = _x_scale(x, w, scaling, k)
        x_data = x.data
    else:
        x_data = _C._tensor_argument(x, "x")
        x_scale = None
        _check_x(x_data, k, weight_only, out_dtype)
        if weight_only:
            out_dtype = None
    bias = _check_pairing(x_data, x, w, bias, n)
    if k == 0:
        if not isinstance(x, QTensor) and \
                x_data.dtype.name not in _FLOAT_DTYPES:
            raise TypeError("linear: x must be float32, float16 or "
                            f"bfloat16, got {x_data.dtype}")
        if out_dtype is None:
            out_dtype = "bfloat16" if isinstance(x, QTensor) else x_data.dtype
        return _empty_sums(x_data, w, bias, out_dtype, stream)
    return _C.linear(x_data, w.data, w.scale, scaling, bias, out_dtype,
                     weight_only, stream, x_scale)
