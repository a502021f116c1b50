"""fp8q's operations as PyTorch custom operators (torch.ops.fp8q.*), the one
place fp8q.torch calls fp8q: torch.compile and torch.export see opaque ops
with fake (meta) implementations for shapes and dtypes, and eager, compiled
and exported models run the same code, so they agree bit for bit.

Each op has one implementation, registered for CPU and CUDA tensors, that
hands the tensors to fp8q through DLPack (fp8q.torch._convert) and runs on
PyTorch's current stream. None of them has a backward: fp8q.torch is for
inference, and differentiating through an op raises a RuntimeError that
says so.
"""
import math

import torch

import fp8q
from fp8q.torch._convert import current_stream, from_torch, to_torch

# Weight granularity name -> fp8q.quantize granularity.
WEIGHT_GRANULARITIES = {"row": "row", "tensor": "tensor",
                        "block": (128, 128)}
BLOCK = 128
DEVICES = ("cpu", "cuda")
INFERENCE_ONLY = (
    "fp8q.torch.Linear is inference-only: it has no backward pass (run the "
    "model under torch.no_grad() or torch.inference_mode(), or train the "
    "float model and quantize it afterwards)")


def weight_scale_shape(out_features, in_features, granularity):
    """The shape of the float32 weight scales of an (out, in) weight."""
    return {"row": (out_features, 1), "tensor": (),
            "block": (-(-out_features // BLOCK),
                      -(-in_features // BLOCK))}[granularity]


def _dtype_name(dtype):
    return str(dtype).split(".")[-1]


def _weight(weight, weight_scale, granularity):
    return fp8q.QTensor(from_torch(weight), from_torch(weight_scale),
                        WEIGHT_GRANULARITIES[granularity])


def _raise_inference_only(ctx, grad_output):
    raise RuntimeError(INFERENCE_ONLY)


# ---------------------------------------------------------------------------
# quantize_weight


@torch.library.custom_op("fp8q::quantize_weight", mutates_args=(),
                         device_types=DEVICES)
def quantize_weight(weight: torch.Tensor, dtype: torch.dtype,
                    granularity: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes, scale) of a 2-D float weight: exactly fp8q.quantize(weight,
    dtype, granularity=...) with granularity "row" (scale (out, 1)),
    "tensor" (scale ()) or "block" (128x128, scale (ceil(out/128),
    ceil(in/128))); scale = float32(amax) / finfo(dtype).max per group.
    ValueError for NaN or infinity in the weight."""
    q = fp8q.quantize(from_torch(weight.contiguous()), _dtype_name(dtype),
                      granularity=WEIGHT_GRANULARITIES[granularity],
                      stream=current_stream(weight))
    return to_torch(q.data).clone(), to_torch(q.scale).clone()


@quantize_weight.register_fake
def _(weight, dtype, granularity):
    return (weight.new_empty(weight.shape, dtype=dtype),
            weight.new_empty(weight_scale_shape(*weight.shape, granularity),
                             dtype=torch.float32))


# ---------------------------------------------------------------------------
# linear_weight_only (W8A16)


@torch.library.custom_op("fp8q::linear_weight_only", mutates_args=(),
                         device_types=DEVICES)
def linear_weight_only(x: torch.Tensor, weight: torch.Tensor,
                       weight_scale: torch.Tensor, bias: torch.Tensor | None,
                       granularity: str) -> torch.Tensor:
    """torch.nn.functional.linear(x, W, bias) with W = weight (FP8 codes,
    (out, in)) dequantized by fp8q into x's dtype with weight_scale at
    `granularity` ("row", "tensor" or "block"); bias is cast to x's dtype.
    Non-finite values in x behave as in torch's float path."""
    dequantized = to_torch(_weight(weight, weight_scale, granularity)
                           .dequantize(_dtype_name(x.dtype),
                                       stream=current_stream(x)))
    return torch.nn.functional.linear(
        x, dequantized, None if bias is None else bias.to(x.dtype))


@linear_weight_only.register_fake
def _(x, weight, weight_scale, bias, granularity):
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


# ---------------------------------------------------------------------------
# linear_fp8 (W8A8)


def _fp8_product(x2d, weight, weight_scale, bias, input_scale, granularity,
                 out_dtype):
    """fp8q.linear of finite rows x2d (m, in): x quantized to e4m3fn with
    input_scale (static, per tensor) or per row (1x128 blocks for block
    weights) when input_scale is None."""
    stream = current_stream(x2d)
    source = from_torch(x2d)
    if input_scale is not None:
        source = fp8q.quantize(source, "float8_e4m3fn",
                               scale=from_torch(input_scale), stream=stream)
    y = fp8q.linear(source, _weight(weight, weight_scale, granularity),
                    bias=None if bias is None else from_torch(bias),
                    out_dtype=_dtype_name(out_dtype), stream=stream)
    return to_torch(y)


@torch.library.custom_op("fp8q::linear_fp8", mutates_args=(),
                         device_types=DEVICES)
def linear_fp8(x: torch.Tensor, weight: torch.Tensor,
               weight_scale: torch.Tensor, bias: torch.Tensor | None,
               input_scale: torch.Tensor | None,
               granularity: str) -> torch.Tensor:
    """y = x @ W.T + bias with FP8 operands (fp8q.linear): x (..., in) in
    float32, float16 or bfloat16 is quantized to float8_e4m3fn with the
    float32 () input_scale when given (static), else per token (1x128
    blocks for "block" weights); weight holds the FP8 codes (out, in) with
    weight_scale at `granularity`. The result has x's dtype and shape
    (..., out). A token (row of x) holding NaN or infinity gives a row of
    NaN; the other rows are computed as if it were absent. An empty x, or
    in = 0, gives bias (or zeros) in every row, as torch does."""
    out_features, in_features = weight.shape
    out_shape = (*x.shape[:-1], out_features)
    rows = x.reshape(math.prod(x.shape[:-1]), in_features)
    if rows.shape[0] == 0 or in_features == 0:
        result = x.new_zeros((rows.shape[0], out_features))
        if bias is not None:
            result += bias.to(x.dtype)
        return result.reshape(out_shape)
    if rows.is_cuda:
        # The GPU never refuses a non-finite token, and reading a flag on the
        # host would wait for the GPU at every layer. Quantized per token (or
        # in 1x128 blocks), such a token's scale becomes NaN or infinite and
        # its codes hold a NaN (fp8q.quantize's GPU contract), so its row of
        # the product is NaN by itself. A static input_scale saturates an
        # infinity to a finite code instead: mask those rows afterwards.
        product = _fp8_product(rows.contiguous(), weight, weight_scale, bias,
                               input_scale, granularity, x.dtype)
        if input_scale is not None:
            product = torch.where(torch.isfinite(rows).all(dim=1, keepdim=True),
                                  product, product.new_full((), float("nan")))
        return product.reshape(out_shape)
    finite = torch.isfinite(rows).all(dim=1)
    if bool(finite.all()):
        return _fp8_product(rows.contiguous(), weight, weight_scale, bias,
                            input_scale, granularity, x.dtype
                            ).reshape(out_shape)
    result = x.new_full((rows.shape[0], out_features), float("nan"))
    kept = finite.nonzero().squeeze(1)
    if kept.numel():
        result[kept] = _fp8_product(rows[kept].contiguous(), weight,
                                    weight_scale, bias, input_scale,
                                    granularity, x.dtype)
    return result.reshape(out_shape)


@linear_fp8.register_fake
def _(x, weight, weight_scale, bias, input_scale, granularity):
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


for _op in (quantize_weight, linear_weight_only, linear_fp8):
    _op.register_autograd(_raise_inference_only)
