"""What fp8q.torch.Linear refuses from outside, with messages that name the
layer: a state dict whose weight is not in the layer's FP8 format, scales
that are not finite and > 0, FP8 codes that are NaN (or infinite), and an
input whose last axis is not in_features; and the layer's name put into
the errors its forward raises.

None of these checks is on the eager hot path: the weight format and the
values are checked when tensors arrive (a state dict, from_fp8, a
checkpoint), and the input's shape only after a forward call failed (the
layer then explains the failure) or when a tool traces the layer.
"""
import torch


class InputShapeError(ValueError, RuntimeError):
    """x's shape does not fit the layer: a ValueError, as fp8q's argument
    checks are, and a RuntimeError, as torch.nn.Linear's shape errors
    are, so code written for either catches it."""


def describe(layer):
    """How messages name a layer: its qualified name in the model when
    fp8q.torch.quantize set one (layer.qualified_name), else its class
    and sizes."""
    name = getattr(layer, "qualified_name", None)
    where = f" {name!r}" if name else ""
    return (f"fp8q.torch.Linear{where} (in_features={layer.in_features}, "
            f"out_features={layer.out_features})")


def input_shape_error(layer, x):
    """An InputShapeError saying what nn.Linear would (expected
    in_features, got N) when x is 0-d or its last axis is not the layer's
    in_features; None when x's shape fits, and under torch.jit.trace (which
    records sizes as tensors: the operator's own checks report there)."""
    if torch.jit.is_tracing():
        return None
    shape = tuple(x.shape)
    if not shape:
        return InputShapeError(
            f"{describe(layer)}: x must have at least one axis (..., "
            f"{layer.in_features}), got a 0-d tensor")
    if shape[-1] != layer.in_features:
        return InputShapeError(
            f"{describe(layer)}: expected x's last axis to have "
            f"in_features={layer.in_features} elements, got {shape[-1]} "
            f"(x has shape {shape})")
    return None


# The layer's tensors a forward reads, in the order device_error names them.
LAYER_TENSORS = ("weight", "weight_scale", "bias", "input_scale")


def device_error(layer, x):
    """A RuntimeError naming the layer when x is a real tensor (not on the
    meta device) and one of the layer's tensors (weight, weight_scale,
    bias, input_scale) is on another device (as nn.Linear's "Tensor on
    device meta is not on the expected device cpu!"): the meta device
    above all, a model built under accelerate's init_empty_weights or
    torch.device("meta") whose weights were never loaded, where torch
    would run the custom operator's fake implementation and return an
    uninitialized tensor. None when the devices agree, and for x on the
    meta device (shape inference: the fake implementation gives the
    shape). Read from the module's dicts (a parametrized bias, which is
    not there, is read by the operator itself)."""
    if x.is_meta:
        return None
    device = x.device
    for tensors in (layer._parameters, layer._buffers):
        for name in LAYER_TENSORS:
            tensor = tensors.get(name)
            if tensor is None or tensor.device == device:
                continue
            if tensor.is_meta:
                why = ("on the meta device: its weights were never loaded "
                       "(a model built under accelerate's "
                       "init_empty_weights or torch.device(\"meta\") needs "
                       "them loaded first, e.g. load_state_dict(..., "
                       "assign=True), fp8q.torch.load_checkpoint or "
                       "accelerate's load_checkpoint_and_dispatch)")
            else:
                why = (f"on {tensor.device}: move x or the model so that "
                       "they are on one device")
            return RuntimeError(
                f"{describe(layer)}: x is on {device}, but the layer's "
                f"{name} is {why}")
    return None


def weight_format_error(layer, state_dict, prefix):
    """A message for the state dict's `prefix + "weight"` when its dtype is
    not the layer's weight dtype (an e5m2 checkpoint loading into an e4m3
    layer, or float weights into FP8 codes: torch's copy would convert the
    values and compute garbage), naming the key and both formats; None
    when the key is absent or the dtypes agree."""
    key = prefix + "weight"
    tensor = state_dict.get(key)
    expected = layer.weight.dtype
    if not isinstance(tensor, torch.Tensor) or tensor.dtype == expected:
        return None
    got = str(tensor.dtype).split(".")[-1]
    wanted = str(expected).split(".")[-1]
    if tensor.dtype.is_floating_point and tensor.element_size() == 1:
        advice = (f"quantize the model with weights=\"{got}\" to load this "
                  "checkpoint")
    else:
        advice = ("load float weights into the float model before "
                  "quantizing it, or convert the checkpoint first (python "
                  "-m fp8q convert)")
    return (f"{describe(layer)}: state_dict[{key!r}] holds {got}, but the "
            f"layer's weight is {wanted}; loading would convert the values "
            f"instead of the codes: {advice}")


# ---------------------------------------------------------------------------
# Values: scales and FP8 codes from outside (a checkpoint, a state dict,
# from_fp8's arguments), checked once when they arrive, never per call.

# The smallest magnitude byte (code & 0x7F) that is not a finite value:
# float8_e4m3fn has NaN at 0x7F (and 0xFF) and no infinity; float8_e5m2 has
# infinity at 0x7C and NaN at 0x7D-0x7F (and the same with the sign bit).
NON_FINITE_MAGNITUDE = {torch.float8_e4m3fn: 0x7F, torch.float8_e5m2: 0x7C}
SCALE_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
NON_FINITE_NAMES = {torch.float8_e4m3fn: "NaN (0x7F or 0xFF)",
                    torch.float8_e5m2: "NaN or infinite (0x7C-0x7F or "
                                       "0xFC-0xFF)"}


def scale_problem(scale):
    """None when every value of the float tensor `scale` is finite and > 0
    (or it is empty, or on the meta device); else what is wrong, in words:
    how many values are not, and the first one (its C-order index and
    value). One reduction and one host read on the success path."""
    values = scale.detach()
    if values.is_meta or values.numel() == 0:
        return None
    # NaN fails both comparisons, infinity the second.
    good = (values > 0) & (values <= torch.finfo(values.dtype).max)
    if bool(good.all()):
        return None
    bad = ~good.reshape(-1)
    first = int(bad.nonzero()[0])
    return (f"{int(bad.sum())} of its {values.numel()} values are not "
            "finite and > 0, as a dequantization scale (weight ~= codes x "
            f"scale) must be; the first, element {first} in C order, is "
            f"{float(values.reshape(-1)[first])}")


def code_problem(codes, dtype):
    """None when the 1-byte tensor `codes` (an FP8 dtype, or uint8 bytes
    holding codes of the FP8 dtype `dtype`) holds no code that is not a
    finite value: NaN in float8_e4m3fn (0x7F, 0xFF), NaN or infinity in
    float8_e5m2 (0x7C-0x7F, 0xFC-0xFF); also None when it is empty or on
    the meta device. Else how many there are and where the first is (its
    index). The success path is two max reductions over the bytes (viewed
    as uint8 and as int8: no temporary tensor) and one host read."""
    data = codes.detach()
    if data.is_meta or data.numel() == 0:
        return None
    magnitude = NON_FINITE_MAGNITUDE[dtype]
    unsigned = data.view(torch.uint8)
    # A non-negative code c (0x00-0x7F) is non-finite when c >= magnitude,
    # the int8 view's maximum sees it; a negative one when c >= 0x80 +
    # magnitude, the uint8 view's maximum sees it.
    highest = torch.stack((unsigned.amax().to(torch.int16),
                           data.view(torch.int8).amax().to(torch.int16)))
    high_unsigned, high_signed = highest.tolist()
    if high_unsigned < 0x80 + magnitude and high_signed < magnitude:
        return None
    bad = (unsigned & 0x7F) >= magnitude
    first = [int(index) for index in bad.nonzero()[0]]
    name = str(dtype).split(".")[-1]
    return (f"{int(bad.sum())} of its {data.numel()} {name} codes are "
            f"{NON_FINITE_NAMES[dtype]}, the first at index {first}; they "
            "would make the layer's outputs NaN")


def storage_problem(weight, weight_scale):
    """(name, problem) for the first of the FP8 `weight` (its codes,
    code_problem) and `weight_scale` (scale_problem) whose values a layer
    must not hold, or None; tensors that are None, not float, or (the
    weight) not FP8 are skipped: their dtype is checked elsewhere."""
    if (isinstance(weight, torch.Tensor)
            and weight.dtype in NON_FINITE_MAGNITUDE):
        problem = code_problem(weight, weight.dtype)
        if problem is not None:
            return "weight", problem
    if (isinstance(weight_scale, torch.Tensor)
            and weight_scale.dtype in SCALE_DTYPES):
        problem = scale_problem(weight_scale)
        if problem is not None:
            return "weight_scale", problem
    return None


def name_error(layer, error):
    """Prefixes the message of `error` (raised by the layer's forward) with
    describe(layer) when the layer has a qualified name, in place: the same
    exception object, of the same type and with its traceback, so whoever
    catches it sees which layer failed. A leading "fp8q.torch.Linear: "
    (fp8q's own messages) gives way to the description; a message that
    names the layer already, or that is not text, is left as it is."""
    if (not getattr(layer, "qualified_name", None) or not error.args
            or not isinstance(error.args[0], str)):
        return
    label = describe(layer)
    message = error.args[0]
    if message.startswith(label):
        return
    message = message.removeprefix("fp8q.torch.Linear: ")
    error.args = (f"{label}: {message}",) + error.args[1:]
