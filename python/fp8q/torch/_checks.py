"""What fp8q.torch.Linear refuses from outside, with messages that name the
layer: a state dict whose weight is not in the layer's FP8 format, and an
input whose last axis is not in_features.

Neither check is on the eager hot path: the weight format is checked when a
state dict loads, and the input's shape only after a forward call failed
(the layer then explains the failure) or when a tool traces the layer.
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
