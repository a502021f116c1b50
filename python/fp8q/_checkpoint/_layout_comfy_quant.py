"""ComfyUI's per-layer quantization metadata: `<layer>.comfy_quant`, a U8
tensor holding JSON such as {"format": "float8_e4m3fn"} (or the same per
layer in the safetensors metadata entry "_quantization_metadata": {"layers":
{name: {...}}}), with `<layer>.weight` (FP8, or U8 bytes holding it),
`<layer>.weight_scale` (float32, one value) and optionally
`<layer>.input_scale`. Only the FP8 formats load; others are refused."""
import json

from fp8q._checkpoint._plan import (CheckpointError, finish, json_object,
                                    layer, prefixes)

MARKER_SUFFIX = ".comfy_quant"
METADATA_KEY = "_quantization_metadata"
FORMATS = ("float8_e4m3fn", "float8_e5m2")
# Scales of formats fp8q does not have (double scaling, smoothing).
UNSUPPORTED_SCALES = (".weight_scale_2", ".pre_quant_scale")


def _layer_configs(checkpoint):
    """{layer name: (its config dict, the key or field it came from)}."""
    configs = {}
    for name, key in prefixes(checkpoint.entries, MARKER_SUFFIX).items():
        raw = bytes(checkpoint.array(key).reshape(-1).tobytes())
        try:
            configs[name] = (json.loads(raw), key)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise CheckpointError(f"{key}: does not hold JSON (the "
                                  "per-layer quantization config)") from None
    metadata = getattr(checkpoint, "metadata", {}).get(METADATA_KEY)
    if metadata:
        try:
            listed = json.loads(metadata)["layers"]
        except (TypeError, KeyError, json.JSONDecodeError):
            raise CheckpointError(f"metadata {METADATA_KEY}: not JSON with "
                                  "a \"layers\" object") from None
        listed = json_object(listed, f"metadata {METADATA_KEY}: layers")
        for name, config in listed.items():
            configs.setdefault(name, (config, f"metadata {METADATA_KEY}"
                                              f".layers.{name}"))
    return configs


def plan(checkpoint):
    entries = checkpoint.entries
    unsupported = [key for key in entries if key.endswith(UNSUPPORTED_SCALES)]
    if unsupported:
        raise CheckpointError(f"{unsupported[0]}: a second-level scale "
                              "(NVFP4 or smoothing); fp8q loads FP8 formats "
                              "only")
    configs = _layer_configs(checkpoint)
    inputs = prefixes(entries, ".input_scale")
    layers = []
    for name, (config, where) in configs.items():
        format_name = config.get("format") if isinstance(config, dict) \
            else None
        if format_name not in FORMATS:
            raise CheckpointError(f"{where}: format {format_name!r}; fp8q "
                                  f"loads {' and '.join(FORMATS)} only")
        marker = name + MARKER_SUFFIX
        scale_key = name + ".weight_scale"
        if scale_key not in entries:
            raise CheckpointError(f"{scale_key}: missing ({where} names an "
                                  "FP8 layer, which carries a scale)")
        layers.append(layer(
            entries, name, name + ".weight", scale_key,
            input_scale_key=inputs.get(name),
            activations="static" if name in inputs else None,
            expected_format=format_name,
            extra_keys=(marker,) if marker in entries else ()))
    known = {plan.name for plan in layers}
    stray = [key for suffix in (".weight_scale", ".input_scale")
             for name, key in prefixes(entries, suffix).items()
             if name not in known]
    if stray:
        raise CheckpointError(f"{stray[0]}: a scale of a layer with no "
                              "comfy_quant config")
    return finish("comfyui-quant", entries, layers)
