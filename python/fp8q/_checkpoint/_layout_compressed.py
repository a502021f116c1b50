"""compressed-tensors / vLLM / ModelOpt FP8 (and fp8q's own convert and
save_pretrained output): `<layer>.weight` FP8, `<layer>.weight_scale` per
tensor, per output channel or per 128x128 block, optional static
`<layer>.input_scale`; the scheme from config.json's quantization_config
(quant_method "compressed-tensors", "fp8" or "fp8q"), hf_quant_config.json
(ModelOpt), or, for a file alone, the fp8q quantization_config that fp8q's
save_pretrained writes into the safetensors metadata."""
import json

from fp8q._checkpoint._plan import (GRANULARITIES, CheckpointError, finish,
                                    json_field, json_object, layer,
                                    prefixes)

STRATEGIES = {"tensor": "tensor", "channel": "row", "block": "block"}
# The safetensors metadata entry where fp8q's save_pretrained writes its
# quantization_config (JSON), the same as config.json's.
FP8Q_METADATA_KEY = "fp8q_quantization_config"


def _compressed_tensors_scheme(config):
    """(declared granularity or None, activations) of a compressed-tensors
    quantization_config; its config groups must agree."""
    schemes = set()
    groups = json_field(config, "config_groups",
                        "config.json: quantization_config.config_groups")
    for group_name, group in groups.items():
        where = f"quantization_config.config_groups.{group_name}"
        group = json_object(group, f"config.json: {where}")
        weights = json_field(group, "weights", f"config.json: {where}.weights")
        if weights.get("type") != "float" or weights.get("num_bits") != 8:
            raise CheckpointError(
                f"config.json: {where}.weights is {weights.get('num_bits')}"
                f"-bit {weights.get('type')}; fp8q loads 8-bit float (FP8) "
                "weights only")
        strategy = weights.get("strategy")
        if not isinstance(strategy, str) or strategy not in STRATEGIES:
            raise CheckpointError(f"config.json: {where}.weights.strategy "
                                  f"{strategy!r} is not tensor, channel or "
                                  "block")
        block = weights.get("block_structure")
        if strategy == "block" and block != [128, 128]:
            raise CheckpointError(
                f"config.json: {where}.weights.block_structure {block}; "
                "fp8q's block scales are 128x128")
        inputs = json_field(group, "input_activations",
                            f"config.json: {where}.input_activations")
        activations = (None if not inputs else
                       "dynamic" if inputs.get("dynamic") else "static")
        schemes.add((STRATEGIES[strategy], activations))
    if len(schemes) > 1:
        raise CheckpointError(
            "config.json: quantization_config.config_groups declare "
            f"different schemes {sorted(schemes, key=str)}; fp8q reads one "
            "scheme per checkpoint")
    return schemes.pop() if schemes else (None, None)


def _metadata_config(checkpoint):
    """The fp8q quantization_config in the safetensors metadata."""
    text = checkpoint.metadata[FP8Q_METADATA_KEY]
    try:
        config = json.loads(text)
    except (TypeError, json.JSONDecodeError):
        config = None
    if not isinstance(config, dict) or config.get("quant_method") != "fp8q":
        raise CheckpointError(
            f"safetensors metadata {FP8Q_METADATA_KEY}: not an fp8q "
            f"quantization_config ({str(text)[:60]!r})")
    return config


def _fp8q_scheme(config, where):
    """(declared granularity, activations) of an fp8q quantization_config
    (fp8q.torch.Fp8qConfig's: granularity "row" / "tensor" / "block",
    activations None or "e4m3", dynamic until a layer has input_scale)."""
    granularity = config.get("granularity", "row")
    if granularity not in GRANULARITIES:
        raise CheckpointError(f"{where}: quantization_config.granularity "
                              f"{granularity!r} is not row, tensor or block")
    activations = config.get("activations")
    if activations not in (None, "e4m3", "float8_e4m3fn"):
        raise CheckpointError(f"{where}: quantization_config.activations "
                              f"{activations!r} is not null or \"e4m3\"")
    return granularity, None if activations is None else "dynamic"


def scheme(checkpoint):
    """(declared granularity or None, activations or None, description of
    where the scheme came from) from the checkpoint's configs."""
    configs = getattr(checkpoint, "configs", {})
    modelopt = configs.get("hf_quant_config.json")
    if modelopt is not None:
        algorithm = json_field(
            json_object(modelopt, "hf_quant_config.json"), "quantization",
            "hf_quant_config.json: quantization").get("quant_algo")
        if algorithm != "FP8":
            raise CheckpointError(
                f"hf_quant_config.json: quantization.quant_algo is "
                f"{algorithm!r}; fp8q loads ModelOpt's \"FP8\" only")
        return "tensor", "static", "ModelOpt hf_quant_config.json"
    config = json_field(
        json_field(configs, "config.json", "config.json"),
        "quantization_config", "config.json: quantization_config")
    where = "config.json"
    if not config and FP8Q_METADATA_KEY in getattr(checkpoint, "metadata",
                                                   {}):
        config, where = _metadata_config(checkpoint), "safetensors metadata"
    if not config:
        return None, None, None
    method = config.get("quant_method")
    if method == "fp8q":
        declared, activations = _fp8q_scheme(config, where)
        return declared, activations, f"fp8q quantization_config ({where})"
    if method == "compressed-tensors":
        declared, activations = _compressed_tensors_scheme(config)
        return declared, activations, "compressed-tensors config"
    if method == "fp8":
        activation_scheme = config.get("activation_scheme", "dynamic")
        if activation_scheme not in ("dynamic", "static"):
            raise CheckpointError(
                "config.json: quantization_config.activation_scheme "
                f"{activation_scheme!r} is not dynamic or static")
        declared = "block" if config.get("weight_block_size") else None
        return declared, activation_scheme, "fp8 config"
    raise CheckpointError(
        f"config.json: quantization_config.quant_method {method!r}; fp8q "
        "reads compressed-tensors, fp8, fp8q and ModelOpt FP8 checkpoints")


def plan(checkpoint):
    """The Plan of a compressed-tensors / vLLM / ModelOpt checkpoint: the
    scheme from its configs, `<layer>.weight_scale` scales."""
    declared, activations, source = scheme(checkpoint)
    notes = [f"scheme from the {source}"] if source else [
        "no quantization config: static activations where input_scale is "
        "present, weight-only elsewhere"]
    return plan_scaled_layers(checkpoint, ".weight_scale",
                              "compressed-tensors", declared, activations,
                              notes)


def plan_scaled_layers(checkpoint, scale_suffix, layout, declared,
                       activations, notes):
    """The Plan of a checkpoint whose layers are `<layer>.weight` (FP8)
    with the scale `<layer>{scale_suffix}` of the `declared` granularity
    (None: from its shape) and optional `<layer>.input_scale` (static
    activations; elsewhere `activations`). FineGrainedFP8 shares it."""
    entries = checkpoint.entries
    inputs = prefixes(entries, ".input_scale")
    layers = []
    for name, scale_key in prefixes(entries, scale_suffix).items():
        input_key = inputs.pop(name, None)
        layers.append(layer(entries, name, name + ".weight", scale_key,
                            input_scale_key=input_key,
                            activations="static" if input_key
                            else activations,
                            declared=declared))
    if inputs:
        name, key = next(iter(inputs.items()))
        raise CheckpointError(f"{key}: an input scale without an FP8 weight "
                              f"and scale ({name}.weight, {name}"
                              f"{scale_suffix})")
    return finish(layout, entries, layers, notes=notes)
