"""diffusers on an fp8q-quantized FLUX-shaped transformer (tiny, from a
config, random weights, no download): load_lora_adapter gives the float
model's LoRA output, fuse_lora re-quantizes the fused FP8 weights exactly as
fp8q.torch.merge_lora does, and layerwise casting keeps the FP8 weights."""
import copy

import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: pip install torch to run the "
                    "fp8q.torch tests")
diffusers = pytest.importorskip(
    "diffusers", reason="diffusers is not installed: pip install diffusers "
                        "(.ci/run installs it) to run the diffusers tests")

import fp8q.torch as fpt  # noqa: E402

CONFIG = dict(patch_size=1, in_channels=8, num_layers=1, num_single_layers=1,
              attention_head_dim=16, num_attention_heads=2,
              joint_attention_dim=32, pooled_projection_dim=32,
              axes_dims_rope=[4, 4, 8])
ACTIVATIONS = [None, "e4m3"]
ACTIVATION_IDS = ["W8A16", "W8A8"]


def cosine(a, b):
    return float(torch.nn.functional.cosine_similarity(
        a.flatten().double(), b.flatten().double(), dim=0))


def transformers(seed, activations):
    """(float FLUX-shaped transformer, its fp8q-quantized copy), and the
    inputs of one call."""
    torch.manual_seed(seed % (2 ** 31))
    float_model = diffusers.FluxTransformer2DModel(**CONFIG)
    quantized = fpt.quantize(copy.deepcopy(float_model),
                             activations=activations)
    tokens, text = 16, 8
    inputs = dict(hidden_states=torch.randn(1, tokens, 8),
                  encoder_hidden_states=torch.randn(1, text, 32),
                  pooled_projections=torch.randn(1, 32),
                  timestep=torch.tensor([0.5]),
                  img_ids=torch.randn(tokens, 3),
                  txt_ids=torch.randn(text, 3), return_dict=False)
    return float_model, quantized, inputs


def lora_state_dict(model, seed, factor_std):
    """A LoRA of rank 4 on every attention projection, in the format
    diffusers' LoRA files have (prefix "transformer."), with N(0,
    factor_std**2) factors."""
    generator = torch.Generator().manual_seed(seed % (2 ** 31))
    lora = {}
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and ".attn." in name:
            lora[f"transformer.{name}.lora_A.weight"] = torch.randn(
                4, module.in_features, generator=generator) * factor_std
            lora[f"transformer.{name}.lora_B.weight"] = torch.randn(
                module.out_features, 4, generator=generator) * factor_std
    return lora


def run(model, inputs):
    with torch.no_grad():
        return model(**inputs)[0]


@pytest.mark.parametrize("activations", ACTIVATIONS, ids=ACTIVATION_IDS)
def test_load_lora_adapter_gives_the_float_lora_output(activations, seed):
    float_model, quantized, inputs = transformers(seed, activations)
    assert quantized.dtype == torch.float32  # not the FP8 weights' dtype
    float_base, quantized_base = run(float_model, inputs), run(quantized,
                                                               inputs)
    # Factors large enough that the LoRA moves the output by 20-200% (300
    # seeds), far beyond the FP8 quantization error, so the checks below
    # tell an applied adapter from a dropped one on every seed.
    lora = lora_state_dict(float_model, seed + 1, factor_std=0.5)
    float_model.load_lora_adapter(dict(lora), adapter_name="style",
                                  prefix="transformer")
    quantized.load_lora_adapter(dict(lora), adapter_name="style",
                                prefix="transformer")
    adapted = [name for name, module in quantized.named_modules()
               if isinstance(getattr(module, "base_layer", None),
                             fpt.Linear)]
    assert len(adapted) == len(lora) // 2
    float_lora, quantized_lora = run(float_model, inputs), run(quantized,
                                                               inputs)
    # Bounds from 300 seeds (worst seen in brackets): output cosine 0.99
    # (0.995), LoRA change 0.1 (0.22), distance ratio 0.5 (0.22), cosine of
    # the changes 0.98 weight-only (0.994) and 0.95 W8A8 (0.985).
    assert cosine(quantized_lora, float_lora) >= 0.99, f"seed={seed}"
    # The adapter is applied, not dropped: the quantized model moves to the
    # float LoRA output, well beyond its quantization error, and by the same
    # change as the float model.
    change = (float_lora - float_base).norm() / float_base.norm()
    assert change > 0.1, f"the LoRA changes little: {change}"
    assert ((quantized_lora - float_lora).norm()
            < 0.5 * (quantized_base - float_lora).norm()), f"seed={seed}"
    same_change = 0.98 if activations is None else 0.95
    assert cosine(quantized_lora - quantized_base,
                  float_lora - float_base) >= same_change, f"seed={seed}"


def test_fuse_lora_requantizes_as_merge_lora(seed):
    _, quantized, inputs = transformers(seed, None)
    twin = copy.deepcopy(quantized)
    # Factors small enough that merged weights stay near the base weights'
    # range: re-quantizing them to FP8 keeps the output cosine above 0.9999
    # (150 seeds).
    lora = lora_state_dict(quantized, seed + 1, factor_std=0.3)
    for model in (quantized, twin):
        model.load_lora_adapter(dict(lora), adapter_name="style",
                                prefix="transformer")
    unfused = run(quantized, inputs)
    # diffusers' fuse_lora goes through peft's merge: fp8q layers are
    # re-quantized, bit for bit as fp8q.torch.merge_lora does.
    quantized.fuse_lora()
    assert len(fpt.merge_lora(twin)) == len(lora) // 2
    twin.fuse_lora()  # the merged layers are left as they are
    fused = run(quantized, inputs)
    assert torch.equal(fused, run(twin, inputs)), f"seed={seed}"
    states = quantized.state_dict(), twin.state_dict()
    for name, tensor in states[0].items():
        if tensor.dtype == torch.float8_e4m3fn or name.endswith("_scale"):
            assert torch.equal(tensor.view(torch.uint8),
                               states[1][name].view(torch.uint8)), name
    assert cosine(fused, unfused) >= 0.999, f"seed={seed}"


def test_layerwise_casting_keeps_the_fp8_weights(seed):
    _, quantized, inputs = transformers(seed, None)
    codes = {name: tensor.clone() for name, tensor in
             quantized.state_dict().items() if tensor.dtype in (
                 torch.float8_e4m3fn,) or name.endswith("_scale")}
    bf16 = {name: (value.bfloat16() if name in (
        "hidden_states", "encoder_hidden_states", "pooled_projections")
        else value) for name, value in inputs.items()}
    reference = run(copy.deepcopy(quantized).bfloat16(), bf16)
    quantized.enable_layerwise_casting(storage_dtype=torch.float8_e4m3fn,
                                       compute_dtype=torch.bfloat16)
    got = run(quantized, bf16)
    assert got.dtype == torch.bfloat16
    assert cosine(got, reference) >= 0.99, f"seed={seed}"
    for name, tensor in quantized.state_dict().items():
        if name in codes:
            assert tensor.dtype == codes[name].dtype and torch.equal(
                tensor.reshape(-1).view(torch.uint8),
                codes[name].reshape(-1).view(torch.uint8)), name
