"""fp8q.torch.quanto_compat: optimum-quanto's FP8 API over fp8q.torch, so a
quanto script switches by changing its import:

    from fp8q.torch.quanto_compat import Calibration, freeze, qfloat8, quantize

    quantize(model, weights=qfloat8, activations=qfloat8)
    with Calibration(momentum=0.9):
        model(samples)
    freeze(model)

Saving and reloading as quanto users do: safetensors' save_file(
model.state_dict(), path) plus quantization_map(model) (JSON), then
requantize(float_model, load_file(path), quantization_map). The state dict
is fp8q's (weight, weight_scale, bias, input_scale per layer), not quanto's
weight._data / weight._scale: files written by optimum-quanto do not load.

Semantics follow quanto's FP8 path: weights get one absmax scale per output
channel (fp8q's "row" granularity: scale = amax / finfo.max), activations a
static per-tensor scale from a moving average of their amax (momentum 0.9).
Differences, on purpose: activations of a layer that was never calibrated
are scaled per token on the fly (quanto uses a scale of 1), and only FP8
qtypes exist here: other qtype names raise ValueError, and importing one
(qint8, qint4, qint2, qfloat8_e4m3fnuz) raises an ImportError that lists
what fp8q supports. docs/torch.md.
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
# quanto qtypes fp8q does not have.
_UNSUPPORTED_QTYPES = ("qint2", "qint4", "qint8", "qfloat8_e4m3fnuz")
_SUPPORTED = ("fp8q supports the FP8 qtypes qfloat8 (= qfloat8_e4m3fn) and "
              "qfloat8_e5m2")
# fp8q.torch.Linear weight dtype -> qtype name.
_WEIGHT_QTYPE_NAMES = {torch.float8_e4m3fn: "qfloat8_e4m3fn",
                       torch.float8_e5m2: "qfloat8_e5m2"}


def __getattr__(name):
    """ImportError naming what fp8q supports for quanto's other qtypes."""
    if name in _UNSUPPORTED_QTYPES:
        raise ImportError(
            f"fp8q.torch.quanto_compat has no {name}: {_SUPPORTED}; integer "
            "qtypes need optimum-quanto itself")
    raise AttributeError(
        f"module 'fp8q.torch.quanto_compat' has no attribute {name!r}")

# Models quantized here, for Calibration() (which, as in quanto, takes no
# model argument).
_models = weakref.WeakSet()


def _parse_qtype(value, argument):
    if value is None:
        return None
    if isinstance(value, str):
        value = _QTYPES.get(value, value)
    if not isinstance(value, qtype):
        raise ValueError(f"{argument}: {_SUPPORTED}, got {value!r}")
    return value


def _parse_qtypes(weights, activations, where):
    """fp8q's weight and activation formats ("e4m3" / "e5m2", and None or
    "e4m3") for quanto qtypes or their names; ValueError naming the
    argument (prefixed by `where`) otherwise."""
    weights = _parse_qtype(weights, f"{where}weights")
    activations = _parse_qtype(activations, f"{where}activations")
    if weights is None:
        raise ValueError(f"{where}weights: fp8q quantizes weights to FP8; "
                         "pass qfloat8")
    if activations is not None and activations is not qfloat8_e4m3fn:
        raise ValueError(f"{where}activations: fp8q's FP8 activations are "
                         "qfloat8_e4m3fn (or None)")
    return (weights.fp8q_format,
            None if activations is None else activations.fp8q_format)


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
    weights, activations = _parse_qtypes(weights, activations, "")
    include = [include] if isinstance(include, str) else include
    exclude = [exclude] if isinstance(exclude, str) else exclude or []
    names = [name for name, module in model.named_modules()
             if name and isinstance(module, torch.nn.Linear)
             and (include is None or any(fnmatch.fnmatch(name, pattern)
                                         for pattern in include))
             and not any(fnmatch.fnmatch(name, pattern)
                         for pattern in exclude)]
    if names:
        _quantize(model, weights=weights, activations=activations,
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


def quantization_map(model):
    """As quanto's quantization_map: {module name: {"weights": qtype name,
    "activations": qtype name or "none"}} for every fp8q.torch.Linear of
    the model, what requantize needs besides the state dict (save it as
    JSON beside the weights). ValueError for a layer with "tensor" or
    "block" weight scales, which quanto's per-channel format does not
    describe (save such models with fp8q.torch.quantize's granularity and
    reload them with it)."""
    layers = {}
    for name, module in model.named_modules():
        if not isinstance(module, Linear):
            continue
        if module.granularity != "row":
            raise ValueError(
                f"quantization_map: layer {name!r} has granularity="
                f"{module.granularity!r}; quanto's map describes per-channel "
                "(\"row\") weight scales only: reload this model with "
                f"fp8q.torch.quantize(model, granularity="
                f"{module.granularity!r}) and load_state_dict")
        layers[name] = {
            "weights": _WEIGHT_QTYPE_NAMES[module.weight.dtype],
            "activations": ("none" if module.activations is None
                            else "qfloat8_e4m3fn")}
    return layers


def requantize(model, state_dict, quantization_map, device=None):
    """As quanto's requantize: replaces each nn.Linear of the float `model`
    named in `quantization_map` (from quantization_map() of the quantized
    model) by an fp8q.torch.Linear of the map's qtypes, loads `state_dict`
    (the quantized model's state_dict(), e.g. from safetensors' load_file;
    strict, so a missing or unexpected key raises) and moves the model to
    `device` when given. A frozen layer's input_scale comes back with it.
    ValueError naming the entry for a map that names no nn.Linear or a
    qtype fp8q does not have. Returns None, as quanto's does."""
    for name, qtypes in quantization_map.items():
        module = model.get_submodule(name) if name else None
        if not isinstance(module, torch.nn.Linear):
            raise ValueError(
                f"quantization_map[{name!r}]: expected an nn.Linear inside "
                f"the float model there, found {type(module).__name__}")
        activations = qtypes.get("activations", "none")
        weights, activations = _parse_qtypes(
            qtypes.get("weights"),
            None if activations == "none" else activations,
            f"quantization_map[{name!r}]: ")
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, Linear(
            module.in_features, module.out_features,
            bias=module.bias is not None, weights=weights,
            activations=activations))
    model.load_state_dict(state_dict)
    if device is not None:
        model.to(device)
    _models.add(model)
