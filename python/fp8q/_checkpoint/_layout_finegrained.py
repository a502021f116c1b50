"""transformers' FineGrainedFP8 / DeepSeek-V3 layout: `<layer>.weight`
float8_e4m3fn and `<layer>.weight_scale_inv`, one float32 dequantization
scale per 128x128 block (ceil(out/128), ceil(in/128)), the last blocks
partial where 128 does not divide a dimension; config.json's
quantization_config: quant_method "fp8", weight_block_size [128, 128],
activation_scheme "dynamic" (activations quantized per 1x128 block)."""
from fp8q._checkpoint import _layout_compressed
from fp8q._checkpoint._plan import CheckpointError, json_field


def plan(checkpoint):
    config = json_field(
        json_field(getattr(checkpoint, "configs", {}), "config.json",
                   "config.json"),
        "quantization_config", "config.json: quantization_config")
    block = config.get("weight_block_size", [128, 128])
    if block != [128, 128]:
        raise CheckpointError(
            f"config.json: quantization_config.weight_block_size {block}; "
            "fp8q's block scales are 128x128")
    activations = config.get("activation_scheme", "dynamic")
    if activations != "dynamic":
        raise CheckpointError(
            "config.json: quantization_config.activation_scheme "
            f"{activations!r} with block weight scales; fp8q quantizes the "
            "activations of block layers dynamically only")
    return _layout_compressed.plan_scaled_layers(
        checkpoint, ".weight_scale_inv", "finegrained-fp8", "block",
        "dynamic",
        ["128x128 block scales, activations dynamic per 1x128 block"])
