"""quanto_compat's stand-ins for optimum-quanto's weight optimizers, its
absmax_scale, and its tensor internals (QTensor and its subclasses,
quantize_weight, quantize_activation). The optimizers and absmax_scale do
what quanto's do for FP8; the tensor internals import (so isinstance
checks and quanto's test helpers load) and raise, naming fp8q's
alternative, when used."""
from fp8q.torch.quanto_compat import _qtypes

# fp8q's alternative to quanto's quantized tensor classes and functions.
_TENSORS_INSTEAD = (
    "fp8q keeps quantized weights as plain torch FP8 tensors with float32 "
    "scales: use QLinear(...).qweight (codes, scale, dequantize()), "
    "fp8q.torch.Linear's weight / weight_scale parameters, or "
    "fp8q.quantize for a tensor")


def absmax_scale(base, qtype=_qtypes.qint8, axis=None):
    """As optimum.quanto.absmax_scale for an FP8 qtype: max |base| (over
    every element, or with axis=a over every dimension but a, kept with
    size 1) divided by qtype.qmax, computed in base's dtype. ValueError for
    the integer qtypes (quanto's default qtype is qint8: pass an FP8
    qtype)."""
    _qtypes.fp8_format(qtype, "absmax_scale: qtype")
    magnitude = base.abs()
    if axis is None:
        return magnitude.max() / qtype.qmax
    axis = axis % base.dim()
    dims = [dim for dim in range(base.dim()) if dim != axis]
    return magnitude.amax(dim=dims, keepdim=True) / qtype.qmax


class Optimizer:
    """Base of quanto's weight-scale optimizers, for isinstance checks."""


class AbsmaxOptimizer(Optimizer):
    """The absmax weight scales quanto uses for 8-bit qtypes (its default
    for FP8), which are fp8q's: optimizer=AbsmaxOptimizer() is accepted
    wherever quanto takes an optimizer. Calling it,
    AbsmaxOptimizer()(base, qtype, axis), returns
    absmax_scale(base, qtype, axis)."""

    def __call__(self, base, qtype, axis=None):
        return absmax_scale(base, qtype, axis)


class MaxOptimizer(Optimizer):
    """quanto's affine (scale and shift) optimizer for integer qtypes.
    It constructs, so scripts that build one import; fp8q's FP8 weights
    have symmetric absmax scales, so passing it as optimizer= or calling it
    raises a ValueError naming AbsmaxOptimizer."""

    def __call__(self, *args, **kwargs):
        raise ValueError(refuse_optimizer(self))


def refuse_optimizer(optimizer):
    """The message for an optimizer fp8q does not apply."""
    return (f"optimizer: fp8q's FP8 weight scales are absmax scales, one "
            f"per output channel (AbsmaxOptimizer, or None for it); got "
            f"{type(optimizer).__name__}, which quanto uses for integer "
            "qtypes")


def check_optimizer(optimizer):
    """ValueError unless optimizer is None or an AbsmaxOptimizer."""
    if optimizer is not None and not isinstance(optimizer, AbsmaxOptimizer):
        raise ValueError(refuse_optimizer(optimizer))


class QTensor:
    """quanto's quantized tensor base. fp8q has no tensor subclass:
    isinstance(x, QTensor) is False for everything, and constructing one
    raises a TypeError naming fp8q's alternative."""

    def __new__(cls, *args, **kwargs):
        raise TypeError(f"{cls.__name__}: {_TENSORS_INSTEAD}")


class ActivationQBytesTensor(QTensor):
    """quanto's quantized activation; see QTensor. fp8q layers return
    float tensors (outputs are not quantized)."""


class WeightQBytesTensor(QTensor):
    """quanto's 8-bit quantized weight; see QTensor."""


def quantize_weight(*args, **kwargs):
    """quanto's weight quantization into a QTensor; raises
    NotImplementedError naming fp8q's alternative."""
    raise NotImplementedError(f"quantize_weight: {_TENSORS_INSTEAD}")


def quantize_activation(*args, **kwargs):
    """quanto's activation quantization into a QTensor; raises
    NotImplementedError: fp8q layers quantize their input themselves
    (QLinear with activations=qfloat8)."""
    raise NotImplementedError(
        "quantize_activation: fp8q layers quantize their own input: pass "
        "float tensors to a QLinear built with activations=qfloat8")
