"""fp8q's operations as PyTorch custom operators (torch.ops.fp8q.*), and the
eager forward passes of fp8q.torch.Linear that those operators run.

A layer's forward is one call into fp8q._C (linear_layer for FP8
activations, layer_weight for weight-only), given the torch tensors
themselves: fp8q views them through DLPack's C exchange API, reads torch's
current stream and allocates the result with torch's allocator, in C.
Eager layers call fp8_forward / weight_only_forward directly; torch.compile
and torch.export see the custom operators, whose implementations are those
same functions, so eager, compiled and exported models agree bit for bit.
The fake (meta) implementations give shapes and dtypes for tracing.

The linear operators have a backward for their input and bias (the FP8
weight and the scales never require grad): grad_x = grad_y @ W with W the
weight dequantized into grad_y's dtype (torch.ops.fp8q.dequantize_weight),
straight through the activation quantization of W8A8, as optimum-quanto
and torchao train adapters on FP8 base weights. quantize_weight has none.
"""
import torch
from torch._subclasses.fake_tensor import is_fake

import fp8q
from fp8q import _C
from fp8q.torch._convert import (HAS_C_EXCHANGE, current_stream, from_torch,
                                 to_torch)

# Weight granularity name -> fp8q.quantize granularity.
WEIGHT_GRANULARITIES = {"row": "row", "tensor": "tensor",
                        "block": (128, 128)}
BLOCK = 128
DEVICES = ("cpu", "cuda")
NOT_DIFFERENTIABLE = (
    "torch.ops.fp8q.quantize_weight has no backward: quantizing a weight "
    "gives FP8 codes, which do not train (quantize the float weight after "
    "training it)")


def weight_scale_shape(out_features, in_features, granularity):
    """The shape of the float32 weight scales of an (out, in) weight."""
    return {"row": (out_features, 1), "tensor": (),
            "block": (-(-out_features // BLOCK),
                      -(-in_features // BLOCK))}[granularity]


def _dtype_name(dtype):
    return str(dtype).split(".")[-1]


def _raise_not_differentiable(ctx, *grad_outputs):
    raise RuntimeError(NOT_DIFFERENTIABLE)


def _shape_only(operator, x):
    """x, checked for a fake (meta) implementation: a fake tensor
    (torch.compile, torch.export, FakeTensorMode) or a meta tensor. A
    real x gets there only when another operand is on the meta device
    (weights never loaded: accelerate's init_empty_weights): torch then
    dispatches to the fake implementation, whose x.new_empty would be an
    uninitialized result on x's device, so that is refused, as torch's own
    operators refuse mixing devices."""
    if not x.is_meta and not is_fake(x):
        raise RuntimeError(
            f"torch.ops.fp8q.{operator}: an operand is on the meta device "
            f"(a weight never loaded?) or a fake tensor outside its "
            f"FakeTensorMode while x is a real tensor on {x.device}; load "
            "the weights (or move every operand to x's device) first")
    return x


# ---------------------------------------------------------------------------
# The forward passes (one fp8q._C call each)


def _through_fp8q_tensors(function, x, *arguments):
    """function(x, *arguments, stream) in fp8q._C for a torch without
    DLPack's C exchange API (torch < 2.10): the tensors cross as fp8q.Tensor
    views (from_torch) and back (to_torch), the same computation with
    slower glue."""
    converted = [from_torch(a) if isinstance(a, torch.Tensor) else a
                 for a in arguments]
    return to_torch(function(from_torch(x), *converted, current_stream(x)))


def _weight_like(like, weight, weight_scale, granularity):
    """The weight dequantized into like's dtype on like's device (one
    fp8q._C.layer_weight call): what W8A16 and the backward multiply by."""
    if HAS_C_EXCHANGE:
        return _C.layer_weight(like, weight, weight_scale, granularity, None)
    return _through_fp8q_tensors(_C.layer_weight, like, weight, weight_scale,
                                 granularity)


def _zero_features(x, out_features, bias):
    """x @ W.T + bias for in_features == 0: bias (or zeros) in every row,
    as torch computes it."""
    if x.shape[-1:] != (0,):
        raise ValueError(f"fp8q.torch.Linear: x has shape {tuple(x.shape)}, "
                         "but the layer has 0 input features (x's last axis)")
    result = x.new_zeros((*x.shape[:-1], out_features))
    if bias is not None:
        result += bias.to(x.dtype)
    return result


def fp8_forward(x, weight, weight_scale, bias, input_scale, granularity,
                quantized=None):
    """y = x @ W.T + bias with FP8 operands: torch.ops.fp8q.linear_fp8's
    computation (see there), run eagerly. quantized: None, or (codes,
    scale), x's per-token float8_e4m3fn codes and float32 row scales as
    norm_quantize writes them (exactly fp8q.quantize(x, granularity="row")),
    used instead of quantizing x again (dynamic "row" / "tensor" layers
    only). A float64 bias (model.double(), or a layer built with
    dtype=torch.float64) is added as float32, the precision the product
    adds any bias in (fp8q._C takes no float64; the weight-only product
    casts its bias to x's dtype likewise); the cast happens only after
    fp8q._C refused it, off the common path."""
    if weight.shape[1] == 0:
        return _zero_features(x, weight.shape[0], bias)
    try:
        if quantized is None:
            if HAS_C_EXCHANGE:
                return _C.linear_layer(x, weight, weight_scale, bias,
                                       input_scale, granularity, None)
            return _through_fp8q_tensors(_C.linear_layer, x, weight,
                                         weight_scale, bias, input_scale,
                                         granularity)
        if HAS_C_EXCHANGE:
            return _C.linear_layer(x, weight, weight_scale, bias,
                                   input_scale, granularity, None, None,
                                   quantized)
        return to_torch(_C.linear_layer(
            from_torch(x), from_torch(weight), from_torch(weight_scale),
            None if bias is None else from_torch(bias),
            None if input_scale is None else from_torch(input_scale),
            granularity, current_stream(x), None,
            tuple(from_torch(t) for t in quantized)))
    except TypeError:
        if bias is None or bias.dtype != torch.float64:
            raise
    return fp8_forward(x, weight, weight_scale, bias.to(torch.float32),
                       input_scale, granularity, quantized)


def weight_only_forward(x, weight, weight_scale, bias, granularity):
    """torch.nn.functional.linear(x, W, bias) with W = weight dequantized
    into x's dtype by fp8q: torch.ops.fp8q.linear_weight_only's computation,
    run eagerly. On a GPU, few tokens are computed from the FP8 codes in
    place (fp8q._C.layer_gemv: float32 sums of x times each code times its
    scale, one rounding into x's dtype, no float copy of the weight): 8 to
    64 float16 / bfloat16 tokens on the tensor cores (16 with block scales),
    fewer (or float32 x up to 8) on the CUDA cores; more tokens dequantize W
    and run torch's GEMM."""
    if HAS_C_EXCHANGE and x.is_cuda:
        y = _C.layer_gemv(x, weight, weight_scale, bias, granularity, None)
        if y is not None:
            return y
    dequantized = _weight_like(x, weight, weight_scale, granularity)
    if bias is not None and bias.dtype != x.dtype:
        bias = bias.to(x.dtype)
    return torch.nn.functional.linear(x, dequantized, bias)


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
    return weight_only_forward(x, weight, weight_scale, bias, granularity)


@linear_weight_only.register_fake
def _(x, weight, weight_scale, bias, granularity):
    x = _shape_only("linear_weight_only", x)
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


# ---------------------------------------------------------------------------
# linear_fp8 (W8A8)


@torch.library.custom_op("fp8q::linear_fp8", mutates_args=(),
                         device_types=DEVICES)
def linear_fp8(x: torch.Tensor, weight: torch.Tensor,
               weight_scale: torch.Tensor, bias: torch.Tensor | None,
               input_scale: torch.Tensor | None,
               granularity: str) -> torch.Tensor:
    """y = x @ W.T + bias with FP8 operands: x (..., in) in float32,
    float16 or bfloat16 is quantized to float8_e4m3fn with the float32 ()
    input_scale when given (static), else per token (1x128 blocks for
    "block" weights), exactly as fp8q.quantize; weight holds the FP8 codes
    (out, in) with weight_scale at `granularity`; the product is
    fp8q.scaled_mm's (float32 accumulation, scales and bias applied, rounded
    once). On a GPU, up to a crossover token count (csrc/cuda/layer_path.h)
    the weight-only product computes it from x unquantized instead
    (docs/torch.md, "Which product runs"). The result has x's dtype and
    shape (..., out). A token (row of x) holding NaN or infinity gives a row
    of NaN (through the weight-only product: NaN or +-inf, as the float
    product gives); the other rows are computed as if it were absent. An
    empty x, or in = 0, gives bias (or zeros) in every row, as torch
    does."""
    return fp8_forward(x.resolve_neg(), weight, weight_scale, bias,
                       input_scale, granularity)


@linear_fp8.register_fake
def _(x, weight, weight_scale, bias, input_scale, granularity):
    x = _shape_only("linear_fp8", x)
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


# ---------------------------------------------------------------------------
# linear_fp8_quantized (W8A8 whose activations torch ops quantized:
# torch.compile's path, fp8q.torch._row_quantize)


@torch.library.custom_op("fp8q::linear_fp8_quantized", mutates_args=(),
                         device_types=DEVICES)
def linear_fp8_quantized(x: torch.Tensor, codes: torch.Tensor,
                         scale: torch.Tensor, weight: torch.Tensor,
                         weight_scale: torch.Tensor,
                         bias: torch.Tensor | None,
                         granularity: str) -> torch.Tensor:
    """linear_fp8's product for x whose per-token quantization is given:
    codes (x's shape, float8_e4m3fn, C-contiguous) and scale (x.shape[:-1]
    + (1,), float32), as torch.ops.fp8q.quantize_rows computes them (with
    or without a static input_scale); weight / weight_scale at
    `granularity` "row" or "tensor". The same bits as linear_fp8 on x
    (input_scale None), and as linear_fp8 with input_scale s when scale
    holds s in every row (the CPU product applies a per-tensor and a
    per-row activation scale alike): the same FP8 GEMM, on a GPU the same
    weight-only product from x up to the crossover token count; a row
    whose scale is not finite gives a row of NaN. x is read for its
    shape and dtype, and on a GPU for that weight-only product."""
    x = x.resolve_neg()
    if weight.shape[1] == 0:
        return _zero_features(x, weight.shape[0], bias)
    return fp8_forward(x, weight, weight_scale, bias, None, granularity,
                       (codes.contiguous(), scale.contiguous()))


@linear_fp8_quantized.register_fake
def _(x, codes, scale, weight, weight_scale, bias, granularity):
    x = _shape_only("linear_fp8_quantized", x)
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


# ---------------------------------------------------------------------------
# norm_quantize (a norm fused with the per-token quantize of its output)


def norm_quantize_forward(x, weight, bias, epsilon, layer_norm):
    """torch.ops.fp8q.norm_quantize's computation (see there), run eagerly:
    one fp8q._C.norm_quantize call on x's device and torch's current
    stream, into tensors from torch's allocator (made in C through DLPack's
    C exchange API where torch has it)."""
    x = x.contiguous()
    if HAS_C_EXCHANGE and x.numel() > 0:
        return _C.norm_quantize(x, weight.contiguous(),
                                None if bias is None else bias.contiguous(),
                                epsilon, layer_norm)
    normed = torch.empty_like(x)
    codes = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((*x.shape[:-1], 1), dtype=torch.float32,
                        device=x.device)
    if x.numel() > 0:
        _C.norm_quantize(
            from_torch(x), from_torch(weight.contiguous()),
            None if bias is None else from_torch(bias.contiguous()),
            from_torch(normed), from_torch(codes), from_torch(scale),
            float(epsilon), bool(layer_norm), current_stream(x))
    return normed, codes, scale


@torch.library.custom_op("fp8q::norm_quantize", mutates_args=(),
                         device_types=DEVICES)
def norm_quantize(x: torch.Tensor, weight: torch.Tensor,
                  bias: torch.Tensor | None, epsilon: float,
                  layer_norm: bool
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(normed, codes, scale): the RMSNorm (layer_norm False) or LayerNorm
    (True) of x's last axis with weight and bias (None, or K values of
    weight's dtype; x, weight and bias float32, float16 or bfloat16),
    rounded once into x's dtype (normed, x's shape), and its per-token
    float8_e4m3fn quantization: codes (x's shape) and float32 scale
    (x.shape[:-1] + (1,)), exactly fp8q.quantize(normed, "float8_e4m3fn",
    granularity="row") — what fp8q.torch's W8A8 layers compute for normed
    themselves, so they can take codes and scale instead
    (csrc/core/norm_quantize.h gives the arithmetic: float32 elementwise,
    the row's sums in float64 on the CPU and float32 on a GPU). A row
    holding NaN or infinity gets a NaN scale: the layers' rows for it are
    NaN."""
    return norm_quantize_forward(x, weight, bias, epsilon, layer_norm)


@norm_quantize.register_fake
def _(x, weight, bias, epsilon, layer_norm):
    _shape_only("norm_quantize", x)
    return (torch.empty_like(x, memory_format=torch.contiguous_format),
            x.new_empty(x.shape, dtype=torch.float8_e4m3fn),
            x.new_empty((*x.shape[:-1], 1), dtype=torch.float32))


# ---------------------------------------------------------------------------
# dequantize_weight, and the linear operators' backward


@torch.library.custom_op("fp8q::dequantize_weight", mutates_args=(),
                         device_types=DEVICES)
def dequantize_weight(like: torch.Tensor, weight: torch.Tensor,
                      weight_scale: torch.Tensor,
                      granularity: str) -> torch.Tensor:
    """weight (FP8 codes, (out, in)) times weight_scale at `granularity`,
    rounded once into like's dtype, on like's device: a new (out, in)
    tensor (fp8q's dequantize; what the W8A16 forward multiplies by)."""
    return _weight_like(like, weight, weight_scale, granularity)


@dequantize_weight.register_fake
def _(like, weight, weight_scale, granularity):
    return _shape_only("dequantize_weight", like).new_empty(weight.shape)


def _save_weight(ctx, inputs, output):
    """What the backward needs: the weight, its scales and granularity, and
    the bias's dtype (inputs: x, weight, weight_scale, bias, ...,
    granularity)."""
    bias = inputs[3]
    ctx.save_for_backward(inputs[1], inputs[2])
    ctx.granularity = inputs[-1]
    ctx.bias_dtype = None if bias is None else bias.dtype


def _input_gradients(ctx, grad_output, bias_index=3):
    """(grad_x, grad_bias) of y = x @ W.T + bias: grad_y @ W with W
    dequantized into grad_y's dtype, and grad_y summed over the tokens in
    the bias's dtype; None where no gradient is asked for (x is the
    operator's input 0, the bias its input bias_index)."""
    weight, weight_scale = ctx.saved_tensors
    grad_x = grad_bias = None
    if ctx.needs_input_grad[0]:
        # grad_y gives the dtype and device only: W is a constant, so a
        # second-order gradient (create_graph=True) is exact.
        grad_x = grad_output @ dequantize_weight(grad_output.detach(), weight,
                                                 weight_scale,
                                                 ctx.granularity)
    if ctx.bias_dtype is not None and ctx.needs_input_grad[bias_index]:
        grad_bias = grad_output.reshape(-1, weight.shape[0]).sum(0).to(
            ctx.bias_dtype)
    return grad_x, grad_bias


def _weight_only_backward(ctx, grad_output):
    grad_x, grad_bias = _input_gradients(ctx, grad_output)
    return grad_x, None, None, grad_bias, None


def _fp8_backward(ctx, grad_output):
    grad_x, grad_bias = _input_gradients(ctx, grad_output)
    return grad_x, None, None, grad_bias, None, None


def _save_quantized_weight(ctx, inputs, output):
    """_save_weight for linear_fp8_quantized (inputs: x, codes, scale,
    weight, weight_scale, bias, granularity)."""
    x, _, _, weight, weight_scale, bias, granularity = inputs
    _save_weight(ctx, (x, weight, weight_scale, bias, granularity), output)


def _quantized_backward(ctx, grad_output):
    grad_x, grad_bias = _input_gradients(ctx, grad_output, bias_index=5)
    return grad_x, None, None, None, None, grad_bias, None


linear_weight_only.register_autograd(_weight_only_backward,
                                     setup_context=_save_weight)
linear_fp8.register_autograd(_fp8_backward, setup_context=_save_weight)
linear_fp8_quantized.register_autograd(
    _quantized_backward, setup_context=_save_quantized_weight)
quantize_weight.register_autograd(_raise_not_differentiable)
