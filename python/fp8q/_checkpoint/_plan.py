"""What a checkpoint's tensors become: one LayerPlan per FP8 linear weight
(its codes, scales and activation scheme, by checkpoint key) and the float
tensors loaded as they are; the checks every layout reader shares, each
failure a CheckpointError naming the key."""
import json
import math
from dataclasses import dataclass, field

import numpy as np

from fp8q._safetensors import DTYPES

# safetensors dtype codes of FP8 codes -> fp8q format names.
FP8_CODES = {"F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}
# Scale dtypes that become float32 exactly.
SCALE_CODES = ("F32", "F16", "BF16")
BLOCK = 128
GRANULARITIES = ("tensor", "row", "block")


class CheckpointError(ValueError):
    """A checkpoint that fp8q cannot load as it is: an unknown or
    inconsistent layout, a missing or unexpected key. The message names the
    key (or config field) and the problem."""


@dataclass(frozen=True)
class LayerPlan:
    """One FP8 linear layer of a checkpoint.

    name: the module's qualified name (the weight key without ".weight").
    weight_key: the key of the FP8 codes, (out, in), in `format`
    ("float8_e4m3fn" or "float8_e5m2"), stored as that FP8 dtype or as
    bytes (U8) holding it.
    scale_key: the key of the dequantization scale (weight ~= codes x
    scale), or None for a scale of 1; its values become float32 exactly and
    take the shape fp8q's granularity has: () "tensor", (out, 1) "row",
    (ceil(out/128), ceil(in/128)) "block".
    input_scale_key: the static activation scale's key, or None.
    activations: None (weight-only, W8A16), "dynamic" (W8A8, per token or
    1x128 blocks) or "static" (W8A8 with input_scale_key).
    keys: every checkpoint key the layer consumes (markers and scales the
    layer does not use included); a bias stays a float key.
    """
    name: str
    weight_key: str
    format: str
    shape: tuple
    scale_key: object
    granularity: str
    input_scale_key: object
    activations: object
    keys: tuple

    @property
    def scheme(self):
        """"W8A16", "W8A8 dynamic" or "W8A8 static"."""
        return ("W8A16" if self.activations is None
                else f"W8A8 {self.activations}")


@dataclass
class Plan:
    """A checkpoint's layout (a name from LAYOUTS in _detect), its FP8
    layers by module name, the float tensors (keys loaded as they are, or
    cast exactly when FP8 without a layer), the keys the layout reads but
    nothing loads (format markers, optimum-quanto's output scales), and
    notes for the report."""
    layout: str
    layers: dict
    float_keys: list
    ignored_keys: list = field(default_factory=list)
    notes: list = field(default_factory=list)


def _json_kind(value):
    """What a parsed JSON value is, for messages."""
    kinds = ((bool, "a boolean"), ((int, float), "a number"),
             (str, "a string"), (list, "an array"), (dict, "an object"))
    return next((f"{kind} {json.dumps(value)[:40]}"
                 for types, kind in kinds if isinstance(value, types)),
                "null")


def json_object(value, where):
    """`value` if it is a JSON object (a dict); CheckpointError naming
    `where` (the file and field: "config.json: quantization_config") for
    anything else."""
    if not isinstance(value, dict):
        raise CheckpointError(f"{where} is {_json_kind(value)}; expected "
                              "a JSON object")
    return value


def json_field(mapping, key, where):
    """mapping[key] when it is a JSON object, {} when it is absent or null;
    CheckpointError naming `where` for any other value."""
    value = mapping.get(key)
    return {} if value is None else json_object(value, where)


def granularity_of(key, scale_shape, weight_shape, declared=None):
    """The granularity of the scale `key` of shape scale_shape for a weight
    of weight_shape (out, in): "tensor" for one value, "row" for (out,) or
    (out, 1), "block" for (ceil(out/128), ceil(in/128)); `declared` (the
    layout's or config's) wins where a shape fits several. CheckpointError
    naming the key when the shape fits none (or not the declared one)."""
    out_features, in_features = weight_shape
    fits = []
    if len(scale_shape) <= 2 and all(extent == 1 for extent in scale_shape):
        fits.append("tensor")
    if tuple(scale_shape) in ((out_features,), (out_features, 1)):
        fits.append("row")
    if tuple(scale_shape) == (-(-out_features // BLOCK),
                              -(-in_features // BLOCK)):
        fits.append("block")
    if declared is not None:
        if declared in fits:
            return declared
        raise CheckpointError(
            f"{key}: shape {tuple(scale_shape)} is not a {declared} scale of "
            f"the {tuple(weight_shape)} weight (the layout declares "
            f"{declared} scales)")
    if not fits:
        raise CheckpointError(
            f"{key}: shape {tuple(scale_shape)} fits no scale granularity of "
            f"the {tuple(weight_shape)} weight (expected (), (1,), "
            f"({out_features}, 1) or ({-(-out_features // BLOCK)}, "
            f"{-(-in_features // BLOCK)}) for 128x128 blocks)")
    return fits[0]


def fp8_weight_format(entries, key, expected=None):
    """The FP8 format of the 2-D weight `key`; `expected` (a format named
    by the layout's marker or metadata) also admits U8 storage of it.
    CheckpointError naming the key for a missing, non-FP8, non-2-D weight
    or one whose dtype contradicts `expected`."""
    if key not in entries:
        raise CheckpointError(f"{key}: missing (its scale is in the "
                              "checkpoint, the weight is not)")
    code, shape = entries[key]
    if len(shape) != 2:
        raise CheckpointError(f"{key}: an FP8 linear weight must be 2-D, "
                              f"this one has shape {tuple(shape)}")
    if code == "U8" and expected is not None:
        return expected
    if code not in FP8_CODES:
        raise CheckpointError(
            f"{key}: dtype {code}, expected FP8 (F8_E4M3 or F8_E5M2) beside "
            "its scale; fp8q loads FP8 checkpoints only")
    if expected is not None and FP8_CODES[code] != expected:
        raise CheckpointError(
            f"{key}: stored as {FP8_CODES[code]} but the checkpoint's format "
            f"marker says {expected}")
    return FP8_CODES[code]


def check_scale(entries, key, role="scale"):
    """CheckpointError naming `key` unless it is a float16/bfloat16/float32
    tensor (which becomes float32 exactly)."""
    code, _ = entries[key]
    if code not in SCALE_CODES:
        raise CheckpointError(f"{key}: a {role} must be F32, F16 or BF16, "
                              f"this one is {code}")


def check_input_scale(entries, key, granularity):
    """CheckpointError naming `key` unless it is one float value paired
    with row or tensor weight scales (fp8q's static activation scale)."""
    check_scale(entries, key, "input scale")
    _, shape = entries[key]
    if len(shape) > 2 or any(extent != 1 for extent in shape):
        raise CheckpointError(f"{key}: a static input scale must hold one "
                              f"value, this one has shape {tuple(shape)}")
    if granularity == "block":
        raise CheckpointError(
            f"{key}: a static per-tensor input scale with 128x128 block "
            "weight scales; fp8q quantizes the activations of block layers "
            "dynamically (1x128 blocks) and has no such pairing")


def layer(entries, name, weight_key, scale_key, *, input_scale_key=None,
          activations=None, declared=None, expected_format=None,
          extra_keys=()):
    """A checked LayerPlan (see LayerPlan; `declared` the granularity the
    layout declares, `expected_format` the format its marker names);
    CheckpointError naming the offending key otherwise."""
    weight_format = fp8_weight_format(entries, weight_key, expected_format)
    shape = tuple(entries[weight_key][1])
    if scale_key is None:
        granularity = "tensor"
    else:
        check_scale(entries, scale_key)
        granularity = granularity_of(scale_key, entries[scale_key][1], shape,
                                     declared)
    if activations == "static":
        if input_scale_key is None:
            raise CheckpointError(
                f"{name}.input_scale: missing; the checkpoint's config "
                "declares static activation scales")
        check_input_scale(entries, input_scale_key, granularity)
    keys = tuple(dict.fromkeys(
        key for key in (weight_key, scale_key, input_scale_key, *extra_keys)
        if key is not None))
    return LayerPlan(name, weight_key, weight_format, shape, scale_key,
                     granularity, input_scale_key, activations, keys)


def finish(layout, entries, layers, ignored=(), notes=()):
    """The Plan: `layers` (LayerPlans) by name; every other key a float
    key, except `ignored`. CheckpointError naming the key for an FP8
    tensor no layer holds when the layout gives FP8 weights scales."""
    consumed = {key for plan in layers for key in plan.keys}
    consumed.update(ignored)
    float_keys = [key for key in entries if key not in consumed]
    if layout != "plain-fp8":
        for key in float_keys:
            if entries[key][0] in FP8_CODES:
                raise CheckpointError(
                    f"{key}: an FP8 tensor without a scale in a {layout} "
                    "checkpoint, whose FP8 weights all carry one")
    return Plan(layout, {plan.name: plan for plan in layers}, float_keys,
                [key for key in entries if key in set(ignored)], list(notes))


def prefixes(entries, suffix):
    """{prefix: key} for the keys ending in `suffix` (prefix = the key
    without it)."""
    return {key[:-len(suffix)]: key for key in entries
            if key.endswith(suffix)}


def nbytes(entries, key):
    """The bytes tensor `key` holds."""
    code, shape = entries[key]
    return math.prod(shape) * np.dtype(DTYPES[code][0]).itemsize


def layer_counts(layers):
    """{(format, granularity, scheme): number of layers} of LayerPlans."""
    counts = {}
    for plan in layers:
        group = (plan.format, plan.granularity, plan.scheme)
        counts[group] = counts.get(group, 0) + 1
    return dict(sorted(counts.items()))
