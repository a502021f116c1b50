"""fp8q.linear: the nn.Linear convention y = x @ w.T + bias over
fp8q.scaled_mm, with x quantized on the fly when it is not FP8 already, or,
weight-only, x kept in its float dtype against the FP8 weight.

Only shapes and scale layouts are arranged here (as fp8q.Tensor views, so
that CUDA tensors stay on their GPU); every number is computed by fp8q._C
(quantize, scaled_mm, the weight-only product) or, weight-only on the CPU,
by NumPy's float32 matrix product of fp8q's exact decodes.
"""
import numpy as np

from fp8q import _C
from fp8q._qtensor import QTensor

# Block granularity of weights and of the activations that go with them.
_WEIGHT_BLOCK = (128, 128)
_ACTIVATION_BLOCK = (1, 128)


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


def _as_matrix(tensor, k):
    """A 2-D (M, k) view (or contiguous copy) of tensor (..., k)."""
    return tensor.reshape(-1, k)


def _activation(x, w, scaling, k, stream):
    """x (a QTensor, or an fp8q.Tensor from linear's fp8q.asarray) as
    (data (M, K), scale) for scaled_mm: a QTensor's own data and
    scale, or x quantized per row (1x128 blocks for block weights) to w's
    dtype. Returns (data, scale, leading shape, float dtype of x or None)."""
    if isinstance(x, QTensor):
        if x.shape[-1:] != (k,):
            raise ValueError(f"linear: x has shape {x.shape}, but w expects "
                             f"{k} input features (the last axis)")
        leading = x.shape[:-1]
        data = _as_matrix(x.data, k)
        m = data.shape[0]
        if x.granularity == "tensor" and scaling != "block":
            scale = x.scale.reshape(())  # repeated over rows if need be
        elif x.granularity == "row" and scaling != "block":
            scale = x.scale.reshape((m, 1))
        elif x.granularity == _ACTIVATION_BLOCK and scaling == "block":
            scale = x.scale.reshape(m, x.scale.shape[-1])
        else:
            raise ValueError(
                f"linear: x quantized with granularity {x.granularity!r} "
                f"does not combine with a weight of {w.granularity!r} scales; "
                "pass x unquantized to have it quantized to match")
        return data, scale, leading, None
    if x.ndim == 0 or x.shape[-1] != k:
        raise ValueError(f"linear: x has shape {x.shape}, but w expects {k} "
                         "input features (the last axis)")
    if x.dtype.is_fp8:
        raise TypeError(
            "linear: x is FP8 data without scales; pass a QTensor "
            "(fp8q.quantize) or the unquantized float tensor")
    leading = x.shape[:-1]
    granularity = _ACTIVATION_BLOCK if scaling == "block" else "row"
    # FP8 GEMMs need one e4m3fn operand: e5m2 weights get e4m3fn inputs.
    dtype = ("float8_e4m3fn" if w.dtype.name == "float8_e5m2"
             else w.dtype)
    data, scale, _ = _C._quantize(_as_matrix(x, k), dtype,
                                  granularity=granularity, stream=stream)
    return data, scale, leading, x.dtype


def _check_pairing(x, w, bias, n):
    """linear's own refusals of what scaled_mm would refuse under its names
    (a, b): x and w on different devices, two float8_e5m2 operands, a bias
    that is not N values. Returns bias as an fp8q.Tensor (or None)."""
    x_data = x.data if isinstance(x, QTensor) else x
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
    bias = _C.asarray(bias)
    if bias.shape != (n,):
        raise ValueError(f"linear: bias must hold N = {n} values (one per "
                         f"output feature of w), got shape {bias.shape}")
    return bias


_FLOAT_DTYPES = ("float32", "float16", "bfloat16")


def _weight_only(x, w, scaling, bias, out_dtype, stream):
    """linear(..., weight_only=True): y = x @ (decode(w) * scale).T + bias
    with x in its float dtype (see linear's docstring)."""
    if isinstance(x, QTensor) or x.dtype.name not in _FLOAT_DTYPES:
        raise TypeError(
            "linear: weight_only=True multiplies a float x (float32, "
            "float16 or bfloat16) by the FP8 weight; got "
            + ("a QTensor" if isinstance(x, QTensor) else
               f"x of dtype {x.dtype}"))
    if out_dtype is not None and str(out_dtype) != x.dtype.name:
        raise ValueError(
            "linear: weight_only=True gives the result in x's dtype "
            f"({x.dtype}); out_dtype={out_dtype!r} differs (cast x, or the "
            "result, with fp8q.cast)")
    n, k = w.shape
    if x.ndim == 0 or x.shape[-1] != k:
        raise ValueError(f"linear: x has shape {x.shape}, but w expects {k} "
                         "input features (the last axis)")
    leading = x.shape[:-1]
    rows = _as_matrix(x, k)
    if x.device != "cpu":
        y = _C.weight_only_gemv(rows, w.data, w.scale, bias, scaling, stream)
        if y is None:
            raise ValueError(
                f"linear: weight_only=True on a GPU needs in_features (K = "
                f"{k}) a multiple of 16 and 16-byte aligned x and w; use "
                "weight_only=False (x quantized) for this shape")
        return y.reshape(tuple(leading) + (n,))
    # The CPU: exact float32 decodes, NumPy's float32 product.
    x32 = np.asarray(_C.cast(rows, "float32"))
    w32 = np.asarray(w.dequantize("float32"))
    y32 = np.matmul(x32, w32.T)
    if bias is not None:
        y32 += np.asarray(_C.cast(bias, "float32"))
    return _C.cast(_C.asarray(y32), x.dtype.name).reshape(
        tuple(leading) + (n,))


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
    if not isinstance(x, QTensor):
        x = _C.asarray(x)
    bias = _check_pairing(x, w, bias, n)
    if weight_only:
        return _weight_only(x, w, scaling, bias, out_dtype, stream)
    data, scale_a, leading, x_dtype = _activation(x, w, scaling, k, stream)
    # One value (repeated against row scales), (1, N) rows, or the
    # (K/128, N/128) blocks.
    scale_b = w.scale.reshape(()) if scaling == "tensor" else w.scale.T
    if out_dtype is None:
        out_dtype = x_dtype if x_dtype is not None else "bfloat16"
    result = _C.scaled_mm(data, w.data.T, scale_a, scale_b, bias=bias,
                          out_dtype=out_dtype, stream=stream)
    return result.reshape(tuple(leading) + (n,))
