"""ComfyUI's "scaled fp8" layout (FLUX, SD3, T5, Wan checkpoints): a
`scaled_fp8` marker tensor (empty; its dtype names the FP8 format of the
weights), `<layer>.weight` in that format, `<layer>.scale_weight` (one
float32 dequantization scale per tensor, or per output channel) and
optionally `<layer>.scale_input`, a static activation scale."""
from fp8q._checkpoint._plan import (FP8_CODES, CheckpointError, finish,
                                    layer, prefixes)

MARKER = "scaled_fp8"


def is_marker(key):
    """Whether `key` is the marker: `scaled_fp8`, or it under a prefix
    (`model.diffusion_model.scaled_fp8`)."""
    return key == MARKER or key.endswith("." + MARKER)


def markers(entries):
    """The marker keys of the checkpoint."""
    return [key for key in entries if is_marker(key)]


def plan(checkpoint):
    entries = checkpoint.entries
    found = markers(entries)
    formats = set()
    for key in found:
        code = entries[key][0]
        if code not in FP8_CODES:
            raise CheckpointError(f"{key}: the scaled-fp8 marker's dtype "
                                  f"names the weights' format; {code} is "
                                  "not FP8")
        formats.add(FP8_CODES[code])
    if len(formats) > 1:
        raise CheckpointError(f"{found[0]}: the scaled-fp8 markers name "
                              f"different formats {sorted(formats)}")
    expected = formats.pop() if formats else None
    inputs = prefixes(entries, ".scale_input")
    layers = [layer(entries, name, name + ".weight", scale_key,
                    input_scale_key=inputs.get(name),
                    activations="static" if name in inputs else None,
                    expected_format=expected)
              for name, scale_key
              in prefixes(entries, ".scale_weight").items()]
    stray = sorted(set(inputs) - {plan.name for plan in layers})
    if stray:
        raise CheckpointError(f"{inputs[stray[0]]}: an input scale without "
                              f"its weight scale ({stray[0]}.scale_weight)")
    notes = ([] if found else
             ["no scaled_fp8 marker: the weights' dtype gives the format"])
    return finish("comfyui-scaled-fp8", entries, layers, ignored=found,
                  notes=notes)
