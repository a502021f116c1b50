"""The libraries people load FP8 checkpoints into: a diffusers
FLUX-shaped transformer saved in ComfyUI's scaled-fp8 layout, and a
transformers Llama-shaped causal LM saved in the FineGrainedFP8 layout with
dimensions 128 does not divide; both built from configs with random
weights (no download), loaded with fp8q.torch.load_checkpoint and run.
Each FP8 layer equals its float64 reference (checkpoint_layouts.check_layers)
and the whole output the float64 model with the dequantized weights."""
import copy
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

import fp8q.torch as fpt  # noqa: E402
from checkpoint_layouts import check_layers, dequantized, save  # noqa: E402
from fp8q.torch import _ops  # noqa: E402


def _quantized_state(model, granularity, include):
    """The model's state dict with the weights of its nn.Linear modules
    whose names contain one of `include` as FP8 codes; {name: (codes,
    scale)} of those."""
    state = {key: value.detach().clone()
             for key, value in model.state_dict().items()}
    layers = {}
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and any(
                part in name for part in include):
            layers[name] = _ops.quantize_weight(
                module.weight.detach(), torch.float8_e4m3fn, granularity)
            state[name + ".weight"] = layers[name][0]
    return state, layers


def _float64_reference(model, layers, granularity):
    """A float64 copy of `model` whose quantized layers hold codes x
    scale."""
    reference = copy.deepcopy(model).double()
    with torch.no_grad():
        for name, (codes, scale) in layers.items():
            reference.get_submodule(name).weight.copy_(
                dequantized(codes, scale, granularity))
    return reference


def test_diffusers_flux_comfyui_scaled_fp8(tmp_path):
    diffusers = pytest.importorskip(
        "diffusers", reason="needs diffusers (CI installs it)")
    config = dict(patch_size=1, in_channels=8, num_layers=1,
                  num_single_layers=2, attention_head_dim=24,
                  num_attention_heads=3, joint_attention_dim=40,
                  pooled_projection_dim=36, axes_dims_rope=(4, 8, 12))
    torch.manual_seed(0)
    source = diffusers.FluxTransformer2DModel(**config).eval()
    state, layers = _quantized_state(source, "tensor", ("blocks.",))
    for name, (_, scale) in layers.items():
        state[name + ".scale_weight"] = scale
    state["scaled_fp8"] = torch.empty(0, dtype=torch.float8_e4m3fn)
    path = save(str(tmp_path), state) + "/model.safetensors"

    torch.manual_seed(1)
    model = diffusers.FluxTransformer2DModel(**config).eval()
    report = fpt.load_checkpoint(model, path)
    assert report.layout == "comfyui-scaled-fp8"
    assert report.counts() == {("float8_e4m3fn", "tensor", "W8A16"):
                               len(layers)}
    assert len(layers) >= 20
    for name, (codes, _) in layers.items():
        assert torch.equal(model.get_submodule(name).weight.view(torch.uint8),
                           codes.view(torch.uint8))

    torch.manual_seed(2)
    inputs = dict(hidden_states=torch.randn(1, 16, 8),
                  encoder_hidden_states=torch.randn(1, 5, 40),
                  pooled_projections=torch.randn(1, 36),
                  timestep=torch.tensor([0.5]),
                  img_ids=torch.randn(16, 3), txt_ids=torch.zeros(5, 3))

    got = check_layers(model, **inputs, return_dict=False)[0]
    with torch.no_grad():
        reference = _float64_reference(source, layers, "tensor")(
            **{key: value.double() for key, value in inputs.items()},
            return_dict=False)[0]
    error = float((got.double() - reference).abs().max())
    assert error <= 1e-4 * float(reference.abs().max()), error


def test_transformers_llama_finegrained_fp8_odd_dimensions(tmp_path):
    transformers = pytest.importorskip(
        "transformers", reason="needs transformers (CI installs it)")
    config = transformers.LlamaConfig(
        vocab_size=97, hidden_size=200, intermediate_size=300,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=64, tie_word_embeddings=False)
    torch.manual_seed(0)
    source = transformers.LlamaForCausalLM(config).eval()
    state, layers = _quantized_state(source, "block", ("layers.",))
    for name, (_, scale) in layers.items():
        state[name + ".weight_scale_inv"] = scale
    configs = {"config.json": {
        **config.to_dict(),
        "quantization_config": {"quant_method": "fp8",
                                "activation_scheme": "dynamic",
                                "weight_block_size": [128, 128]}}}
    folder = save(str(tmp_path), state, configs, shards=2)
    assert {tuple(scale.shape) for _, scale in layers.values()} == {
        (2, 2), (1, 2), (3, 2), (2, 3)}  # 200, 100, 300: partial blocks

    torch.manual_seed(1)
    model = transformers.LlamaForCausalLM(config).eval()
    report = fpt.load_checkpoint(model, folder)
    assert report.layout == "finegrained-fp8"
    assert report.counts() == {("float8_e4m3fn", "block", "W8A8 dynamic"):
                               14}
    assert isinstance(model.lm_head, torch.nn.Linear) and not isinstance(
        model.lm_head, fpt.Linear)
    assert report.float_linear_layers == ["lm_head"]
    assert "linear layers kept in float: 1: lm_head" in str(report)

    ids = torch.randint(0, 97, (2, 7), generator=torch.Generator()
                        .manual_seed(3))
    logits = check_layers(model, ids).logits  # every layer: float64 exact
    with torch.no_grad():
        reference = _float64_reference(source, layers, "block")(ids).logits
    # The whole model differs from the float64 one with dequantized weights
    # by the activations' FP8 quantization (W8A8, per 1x128 block).
    error = (logits.double() - reference).norm() / reference.norm()
    assert float(error) < 0.1, float(error)
    with open(f"{folder}/config.json") as file:
        assert json.load(file)["quantization_config"]["quant_method"] == "fp8"
