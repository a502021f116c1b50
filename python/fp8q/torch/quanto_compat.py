"""fp8q.torch.quanto_compat: optimum-quanto's FP8 API over fp8q.torch, so a
quanto script switches by changing its import:

    from fp8q.torch.quanto_compat import Calibration, freeze, qfloat8, quantize

    quantize(model, weights=qfloat8, activations=qfloat8)
    with Calibration(momentum=0.9):
        model(samples)
    freeze(model)

Semantics follow quanto's FP8 path: weights get one absmax scale per output
channel (fp8q's "row" granularity: scale = amax / finfo.max), activations a
static per-tensor scale from a moving average of their amax (momentum 0.9).
Differences, on purpose: activations of a layer that was never calibrated
are scaled per token on the fly (quanto uses a scale of 1), and only FP8
qtypes exist here (others raise ValueError). docs/torch.md.
"""
import fnmatch
import glob
import weakref

import torch

from fp8q.torch._calibrate import calibrate, freeze as _freeze
from fp8q.torch._linear import Linear
from fp8q.torch._quantize import quantize as _quantize


class qtype:  # noqa: N801 (quanto's spelling)
    """An FP8 quantization type, as quanto's qtypes name them."""

    def __init__(self, name, fp8q_format):
        self.name = name
        self.fp8q_format = fp8q_format

    def __repr__(self):
        return f"qtype({self.name})"


qfloat8_e4m3fn = qtype("qfloat8_e4m3fn", "e4m3")
qfloat8_e5m2 = qtype("qfloat8_e5m2", "e5m2")
qfloat8 = qfloat8_e4m3fn

_QTYPES = {"qfloat8": qfloat8, "qfloat8_e4m3fn": qfloat8_e4m3fn,
           "qfloat8_e5m2": qfloat8_e5m2}

# Models quantized here, for Calibration() (which, as in quanto, takes no
# model argument).
_models = weakref.WeakSet()


def _parse_qtype(value, argument):
    if value is None:
        return None
    if isinstance(value, str):
        value = _QTYPES.get(value, value)
    if not isinstance(value, qtype):
        raise ValueError(
            f"{argument}: fp8q supports the FP8 qtypes qfloat8 "
            f"(qfloat8_e4m3fn) and qfloat8_e5m2, got {value!r}")
    return value


def quantize(model, weights=None, activations=None, include=None,
             exclude=None, optimizer=None):
    """Quantizes the model's nn.Linear modules in place, as
    optimum.quanto.quantize: include / exclude are shell-style patterns on
    module names (patterns that match nothing are ignored, as in quanto).
    weights: qfloat8 / qfloat8_e4m3fn / qfloat8_e5m2 (or their names);
    activations: None or qfloat8 / qfloat8_e4m3fn (e4m3fn activations).
    optimizer is accepted for compatibility and must be None."""
    if optimizer is not None:
        raise ValueError("optimizer: fp8q's weight scales are absmax scales; "
                         "pass optimizer=None")
    weights = _parse_qtype(weights, "weights")
    activations = _parse_qtype(activations, "activations")
    if weights is None:
        raise ValueError("weights: fp8q quantizes weights to FP8; pass "
                         "weights=qfloat8")
    if activations is not None and activations is not qfloat8_e4m3fn:
        raise ValueError("activations: fp8q's FP8 activations are "
                         "qfloat8_e4m3fn")
    include = [include] if isinstance(include, str) else include
    exclude = [exclude] if isinstance(exclude, str) else exclude or []
    names = [name for name, module in model.named_modules()
             if name and isinstance(module, torch.nn.Linear)
             and (include is None or any(fnmatch.fnmatch(name, pattern)
                                         for pattern in include))
             and not any(fnmatch.fnmatch(name, pattern)
                         for pattern in exclude)]
    if names:
        _quantize(model, weights=weights.fp8q_format,
                  activations=None if activations is None else "e4m3",
                  granularity="row",
                  include=[glob.escape(name) for name in names])
    _models.add(model)
    return model


class Calibration:
    """Context manager recording activation amax for every model quantized
    by this module's quantize() with FP8 activations: a moving average,
    amax = momentum * amax + (1 - momentum) * batch amax (the first batch
    as is). streamline and debug are accepted and ignored."""

    def __init__(self, momentum=0.9, streamline=True, debug=False):
        self.momentum = momentum
        self._contexts = []

    def __enter__(self):
        for model in list(_models):
            if any(isinstance(module, Linear) and
                   module.activations is not None
                   for module in model.modules()):
                context = calibrate(model, "max", momentum=self.momentum)
                context.__enter__()
                self._contexts.append(context)
        return self

    def __exit__(self, *exc_info):
        while self._contexts:
            self._contexts.pop().__exit__(*exc_info)
        return False


def freeze(model):
    """As quanto's freeze: finishes the quantization. Weights are FP8
    already; layers calibrated by Calibration get their static
    input_scale. Returns None, as quanto's does."""
    if any(getattr(module, "_calibration", None) is not None
           for module in model.modules()):
        _freeze(model)
