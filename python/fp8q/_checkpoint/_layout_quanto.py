"""optimum-quanto's serialization of qfloat8 models: `<layer>.weight._data`
(the FP8 codes), `<layer>.weight._scale` (one dequantization scale per
output channel, (out, 1), in the model's dtype), `<layer>.input_scale` and
`<layer>.output_scale` (one value each; 1 for layers without activation
quantization), and the quantization map (quanto_qmap.json beside the
weights, or given to the loader): {layer: {"weights": "qfloat8" |
"qfloat8_e4m3fn" | "qfloat8_e5m2", "activations": "none" | qtype}}."""
from fp8q._checkpoint._plan import (CheckpointError, finish, json_object,
                                    layer, prefixes)

DATA_SUFFIX = ".weight._data"
SCALE_SUFFIX = ".weight._scale"
WEIGHT_QTYPES = {"qfloat8": "float8_e4m3fn", "qfloat8_e4m3fn": "float8_e4m3fn",
                 "qfloat8_e5m2": "float8_e5m2"}
ACTIVATION_QTYPES = ("qfloat8", "qfloat8_e4m3fn")


def _map_entry(qmap, name):
    """(weights format or None, activations) for `name` from the map."""
    if qmap is None:
        return None, None
    if name not in qmap:
        raise CheckpointError(f"{name}{DATA_SUFFIX}: the quantization map "
                              f"has no entry {name!r}")
    entry = json_object(qmap[name], f"quantization map [{name!r}]")
    weights = entry.get("weights")
    if not isinstance(weights, str) or weights not in WEIGHT_QTYPES:
        raise CheckpointError(
            f"quantization map [{name!r}]: weights {weights!r}; fp8q loads "
            f"the qtypes {', '.join(WEIGHT_QTYPES)}")
    activations = entry.get("activations", "none")
    if activations not in ("none", *ACTIVATION_QTYPES):
        raise CheckpointError(
            f"quantization map [{name!r}]: activations {activations!r}; fp8q "
            "quantizes activations to qfloat8_e4m3fn or keeps them float")
    return WEIGHT_QTYPES[weights], (None if activations == "none"
                                    else "static")


def plan(checkpoint, quantization_map=None):
    """The Plan; `quantization_map` (else the folder's quanto_qmap.json)
    says which layers have static FP8 activations. Without a map every
    layer loads weight-only and the activation scales are ignored."""
    entries = checkpoint.entries
    qmap = quantization_map
    if qmap is None:
        qmap = getattr(checkpoint, "configs", {}).get("quanto_qmap.json")
    if qmap is not None:
        json_object(qmap, "quantization map")
    data = prefixes(entries, DATA_SUFFIX)
    scales = prefixes(entries, SCALE_SUFFIX)
    unpaired = sorted(set(data) ^ set(scales))
    if unpaired:
        name = unpaired[0]
        present, absent = ((DATA_SUFFIX, SCALE_SUFFIX) if name in data
                           else (SCALE_SUFFIX, DATA_SUFFIX))
        raise CheckpointError(f"{name}{absent}: missing beside "
                              f"{name}{present}")
    layers = []
    for name, data_key in data.items():
        weight_format, activations = _map_entry(qmap, name)
        extras = tuple(key for key in (name + ".input_scale",
                                       name + ".output_scale")
                       if key in entries)
        input_key = name + ".input_scale"
        layers.append(layer(
            entries, name, data_key, scales[name],
            input_scale_key=input_key if activations else None,
            activations=activations, declared="row",
            expected_format=weight_format,
            extra_keys=extras))
    notes = ["output_scale is not used (fp8q does not quantize outputs)"]
    if qmap is None:
        notes.append("no quantization map: every layer loads weight-only")
    # Activation scales of quanto's other modules (QLayerNorm quantizes its
    # output): fp8q keeps those modules float and does not use them.
    ignored = [key for suffix in (".input_scale", ".output_scale")
               for name, key in prefixes(entries, suffix).items()
               if name not in data]
    if ignored:
        notes.append(f"{len(ignored)} activation scales of modules that are "
                     "not linear (e.g. QLayerNorm) are not used")
    return finish("optimum-quanto", entries, layers, ignored=ignored,
                  notes=notes)
