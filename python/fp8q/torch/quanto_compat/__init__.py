"""fp8q.torch.quanto_compat: optimum-quanto 0.2.7's FP8 API over
fp8q.torch, so a quanto script switches by changing its import:

    from fp8q.torch import quanto_compat as quanto   # for optimum.quanto

    quanto.quantize(model, weights=quanto.qfloat8, activations=quanto.qfloat8)
    with quanto.Calibration(momentum=0.9):
        model(samples)
    quanto.freeze(model)

Names follow quanto's: quantize / freeze / quantization_map / requantize
(_quantize.py), Calibration and absmax_scale (_calibration.py,
_internals.py), QLinear / QModuleMixin (_qlinear.py, also in
quanto_compat.nn as optimum.quanto.nn has them), the qtypes and the
`qtypes` dict (_qtypes.py), AbsmaxOptimizer / MaxOptimizer and stand-ins
for quanto's tensor internals (_internals.py), and, with transformers
installed, QuantizedTransformersModel / QuantizedModelForCausalLM
(_transformers_models.py).

Semantics follow quanto's FP8 path: one absmax weight scale per output
channel (fp8q's "row" granularity), a static per-tensor activation scale
that is 1 until Calibration sets it. On purpose different: outputs are not
quantized (output_scale is recorded only), e5m2 activations are rounded
by torch and multiplied in float (fp8q's FP8 product takes e4m3fn
activations), the state dict is fp8q's (weight codes + weight_scale, not
quanto's weight._data / weight._scale, which requantize reads as well),
and the integer qtypes,
qfloat8_e4m3fnuz and quanto's tensor classes import but raise, naming what
fp8q supports, when used. Any other optimum-quanto name raises an
AttributeError listing what this module offers. docs/torch.md has the
table, name by name.
"""
import importlib.util

from fp8q.torch.quanto_compat import nn
from fp8q.torch.quanto_compat._calibration import Calibration
from fp8q.torch.quanto_compat._internals import (
    AbsmaxOptimizer, ActivationQBytesTensor, MaxOptimizer, Optimizer,
    QTensor, WeightQBytesTensor, absmax_scale, quantize_activation,
    quantize_weight)
from fp8q.torch.quanto_compat._qlinear import QLinear, QModuleMixin
from fp8q.torch.quanto_compat._qtypes import (
    qfloat8, qfloat8_e4m3fn, qfloat8_e4m3fnuz, qfloat8_e5m2, qint2, qint4,
    qint8, qtype, qtypes)
from fp8q.torch.quanto_compat._quantize import (
    freeze, quantization_map, quantize, requantize)

# Offered only when transformers is installed, as in quanto.
_TRANSFORMERS_NAMES = ("QuantizedModelForCausalLM",
                       "QuantizedTransformersModel")

__all__ = sorted([
    "AbsmaxOptimizer", "ActivationQBytesTensor", "Calibration",
    "MaxOptimizer", "Optimizer", "QLinear", "QModuleMixin", "QTensor",
    "WeightQBytesTensor", "absmax_scale", "freeze", "is_diffusers_available",
    "is_transformers_available", "nn", "qfloat8", "qfloat8_e4m3fn",
    "qfloat8_e4m3fnuz", "qfloat8_e5m2", "qint2", "qint4", "qint8", "qtype",
    "qtypes", "quantization_map", "quantize", "quantize_activation",
    "quantize_weight", "requantize", *_TRANSFORMERS_NAMES])

# optimum-quanto 0.2.7's other public names: none has an FP8 meaning here.
QUANTO_ONLY = (
    "AffineOptimizer", "HqqOptimizer", "QBitsTensor", "QBytesTensor",
    "QConv2d", "QLayerNorm", "QuantizedDiffusersModel",
    "QuantizedPixArtTransformer2DModel", "SymmetricOptimizer",
    "WeightQBitsTensor", "axis_to_dim", "dtype_info", "get_extension",
    "group", "grouped_shape", "is_extension_available", "qfallback",
    "quantize_affine", "quantize_module", "quantize_symmetric",
    "register_qmodule", "ungroup", "unpack")


def is_transformers_available():
    """Whether transformers can be imported (as quanto's)."""
    return importlib.util.find_spec("transformers") is not None


def is_diffusers_available():
    """Whether diffusers can be imported (as quanto's)."""
    return importlib.util.find_spec("diffusers") is not None


def __getattr__(name):
    """The transformers wrappers, imported on first use; AttributeError
    naming what fp8q offers for any other name (optimum-quanto's integer
    and non-linear machinery included)."""
    if name in _TRANSFORMERS_NAMES:
        if not is_transformers_available():
            raise AttributeError(
                f"fp8q.torch.quanto_compat.{name} needs transformers: pip "
                "install transformers")
        from fp8q.torch.quanto_compat import _transformers_models
        return getattr(_transformers_models, name)
    why = (f" (optimum-quanto's {name} has no FP8 counterpart in fp8q)"
           if name in QUANTO_ONLY else "")
    raise AttributeError(
        f"module 'fp8q.torch.quanto_compat' has no attribute {name!r}{why}; "
        "it offers "
        f"{', '.join(__all__)} (quantized linear layers with FP8 weights "
        "and activations; other modules stay float)")
