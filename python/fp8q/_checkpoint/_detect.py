"""Which layout a checkpoint has, from its key names and dtypes, and its
Plan from that layout's reader. Two layouts' keys in one checkpoint are
refused, naming one key of each."""
from fp8q._checkpoint import (_layout_comfy_quant, _layout_comfy_scaled,
                              _layout_compressed, _layout_finegrained,
                              _layout_plain, _layout_quanto)
from fp8q._checkpoint._plan import FP8_CODES, CheckpointError

# Layout name -> (what it is, a test of a key for its signature). Checked in
# this order; comfy_quant layers name their scales weight_scale, so that
# layout is tried before compressed-tensors'.
LAYOUTS = {
    "optimum-quanto": (
        "optimum-quanto qfloat8 (weight._data / weight._scale)",
        lambda key: key.endswith((_layout_quanto.DATA_SUFFIX,
                                        _layout_quanto.SCALE_SUFFIX))),
    "comfyui-quant": (
        "ComfyUI per-layer quantization (comfy_quant)",
        lambda key: key.endswith(_layout_comfy_quant.MARKER_SUFFIX)),
    "comfyui-scaled-fp8": (
        "ComfyUI scaled fp8 (scaled_fp8 / scale_weight / scale_input)",
        lambda key: key.endswith(".scale_weight")
        or _layout_comfy_scaled.is_marker(key)),
    "finegrained-fp8": (
        "FineGrainedFP8 / DeepSeek-V3 128x128 blocks (weight_scale_inv)",
        lambda key: key.endswith(".weight_scale_inv")),
    "compressed-tensors": (
        "compressed-tensors / vLLM / ModelOpt / fp8q (weight_scale)",
        lambda key: key.endswith(".weight_scale")),
}
READERS = {
    "optimum-quanto": _layout_quanto.plan,
    "comfyui-quant": _layout_comfy_quant.plan,
    "comfyui-scaled-fp8": _layout_comfy_scaled.plan,
    "finegrained-fp8": _layout_finegrained.plan,
    "compressed-tensors": _layout_compressed.plan,
    "plain-fp8": _layout_plain.plan,
}
DESCRIPTIONS = {name: description
                for name, (description, _) in LAYOUTS.items()}
DESCRIPTIONS["plain-fp8"] = "plain FP8 weights, no scales (scale 1)"


def detect(checkpoint):
    """The layout name of `checkpoint` (an object with `entries`: {key:
    (dtype code, shape)}), or None for a float checkpoint (no FP8 tensor,
    no layout's keys). CheckpointError when two layouts' keys are there."""
    entries = checkpoint.entries
    signatures = {}
    for name, (_, test) in LAYOUTS.items():
        for key in entries:
            if test(key):
                signatures[name] = key
                break
    if _layout_comfy_quant.METADATA_KEY in getattr(checkpoint, "metadata",
                                                   {}):
        signatures.setdefault(
            "comfyui-quant", f"metadata {_layout_comfy_quant.METADATA_KEY}")
    if "comfyui-quant" in signatures:
        signatures.pop("compressed-tensors", None)  # its scales' spelling
    if len(signatures) > 1:
        (first, first_key), (second, second_key) = list(
            signatures.items())[:2]
        raise CheckpointError(
            f"{second_key}: a {second} key in a checkpoint that also has "
            f"{first} keys ({first_key}); fp8q reads one layout at a time")
    if signatures:
        return next(iter(signatures))
    if any(code in FP8_CODES for code, _ in entries.values()):
        return "plain-fp8"
    return None


def plan_checkpoint(checkpoint, quantization_map=None):
    """The Plan of `checkpoint` in its detected layout (quantization_map:
    optimum-quanto's, for its layout). CheckpointError naming the key for
    anything the layout's reader refuses."""
    layout = detect(checkpoint)
    if layout is None:
        raise CheckpointError(
            "no FP8 tensor and no FP8 layout's keys in the checkpoint: it is "
            "a float checkpoint (load it with load_state_dict, or quantize "
            "with fp8q.torch.quantize / python -m fp8q convert)")
    if layout == "optimum-quanto":
        return _layout_quanto.plan(checkpoint, quantization_map)
    return READERS[layout](checkpoint)
