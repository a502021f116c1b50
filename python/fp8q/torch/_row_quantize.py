"""fp8q's per-token (row) activation quantize written in plain torch ops:
the decomposition that torch.compile traces in place of fp8q's opaque
quantize, so Inductor fuses it into the kernel that produces the
activations (a norm, a residual add) instead of reading them back.

torch.ops.fp8q.quantize_rows is registered with this decomposition as its
only (CompositeImplicitAutograd) kernel: traced, it dissolves into aten
ops Inductor generates code for; called eagerly, it runs those ops. Its
bits are those of csrc/core: the scale of scale_formula.h (float32(amax)
/ 448, correctly rounded; 1 for a zero row; the smallest positive
float32 where the quotient underflows), float32(x) / scale correctly
rounded, then one nearest-even rounding to float8_e4m3fn, saturating
(fp8q.quantize(x, "float8_e4m3fn", granularity="row") for every finite
row). A row holding NaN or infinity gets a NaN scale (NaN codes), as
torch.ops.fp8q.norm_quantize and the GPU quantize give it: the layers'
product then makes that row NaN.

Both divisions are written as torch.addcdiv(-0.0, a, b), not a / b:
Inductor lowers float32 `/` on CUDA to Triton's approximate division
(div.full.f32, up to 2 ulp) unless TORCHINDUCTOR_EMULATE_DIVISION_ROUNDING
is set, while its addcdiv lowering divides with div_rn (correctly
rounded); -0.0 + q is q for every q (signed zeros and NaN included), and
eager and CPU Inductor compute the same quotient either way."""
import torch

# float8_e4m3fn's largest finite value (csrc/core/float_codec.h).
E4M3_MAX = 448.0
# The smallest positive float32 (a subnormal): scale_formula.h's scale when
# amax / 448 underflows to 0.
SMALLEST_SCALE = 2.0 ** -149
# The compute capability from which Triton (Inductor's GPU code) converts
# to float8_e4m3fn ("fp8e4nv"); below it Triton refuses the conversion.
TRITON_FP8_CAPABILITY = (8, 9)

LIBRARY = torch.library.Library("fp8q", "FRAGMENT")
LIBRARY.define("quantize_rows(Tensor x, Tensor? input_scale=None) "
               "-> (Tensor, Tensor)")


def _divide(numerator, denominator):
    """numerator / denominator, float32, correctly rounded also in Triton
    code Inductor generates (see the module's comment)."""
    return torch.addcdiv(numerator.new_full((), -0.0), numerator,
                         denominator)


def quantize_rows(x, input_scale=None):
    """(codes, scale) of x (..., K), float32 / float16 / bfloat16, K >= 1,
    quantized to float8_e4m3fn per row of its last axis, in torch ops
    (torch.ops.fp8q.quantize_rows's decomposition, what torch.compile
    fuses). codes: x's shape, float8_e4m3fn; scale: x.shape[:-1] + (1,),
    float32, contiguous.

    input_scale None (dynamic): scale = float32(amax of the row) / 448
    (correctly rounded), 1.0 where amax is 0, 2**-149 where the quotient
    underflows to 0; codes = float32(x) / scale (correctly rounded) rounded
    to nearest even, saturating at +-448 — exactly fp8q.quantize(x,
    "float8_e4m3fn", granularity="row") for each finite row. input_scale
    a float32 () tensor (static, finite > 0): the same codes with that
    scale (fp8q.quantize(x, scale=input_scale)), and scale holds
    input_scale in every finite row. Either way a row holding NaN or
    infinity gets scale NaN and NaN codes. No gradient is recorded (x is
    read detached)."""
    values = x.detach().float()
    amax = values.abs().amax(dim=-1, keepdim=True)
    if input_scale is None:
        quotient = _divide(amax, amax.new_full((), E4M3_MAX))
        scale = torch.where(
            amax == 0, 1.0, torch.where(quotient == 0, SMALLEST_SCALE,
                                        quotient))
    else:
        scale = input_scale.detach().to(torch.float32).expand_as(amax)
    # amax is NaN (NaN wins the max) or infinite exactly for such a row.
    scale = torch.where(torch.isfinite(amax), scale, float("nan"))
    codes = _divide(values, scale).clamp(-E4M3_MAX, E4M3_MAX).to(
        torch.float8_e4m3fn)
    return codes, scale.contiguous()


@torch.compiler.assume_constant_result
def decomposition_compiles(device_type, index):
    """Whether torch.compile may trace quantize_rows's decomposition for
    tensors on the device (device_type, index), e.g. ("cuda", 0): True off
    CUDA; on CUDA, whether the device's compute capability is at least
    8.9, since Triton (in which Inductor writes GPU code) refuses
    conversions to float8_e4m3fn below that ("fp8e4nv data type is not
    supported on CUDA arch < 89") while fp8q's W8A8 layers run there
    (sm_75 to sm_87). Where False the compiled layers keep the opaque
    torch.ops.fp8q.linear_fp8 (the same bits). A constant while tracing:
    evaluated once, not traced."""
    if device_type != "cuda":
        return True
    return tuple(torch.cuda.get_device_capability(index)) >= (
        TRITON_FP8_CAPABILITY)


def _kernel(x, input_scale=None):
    return quantize_rows(x, input_scale)


LIBRARY.impl("quantize_rows", _kernel, "CompositeImplicitAutograd")
# What the layers call: the registered op, so a traced graph names it
# before AOTAutograd decomposes it.
quantize_rows_op = torch.ops.fp8q.quantize_rows.default
