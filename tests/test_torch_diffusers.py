"""fp8q.torch on a diffusers FLUX transformer (issue 24, item 3): a small
FluxTransformer2DModel built from its config (random weights, no download)
is quantized and run, in float32 and bfloat16. The oracle for weight-only
FP8 is the float model itself with each Linear's weight replaced by the
FP8 codes times their scales, computed here with torch: the outputs must
agree bit for bit."""
import copy

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
diffusers = pytest.importorskip(
    "diffusers", reason="diffusers is not installed (pip install diffusers)")

import fp8q.torch as fpt  # noqa: E402

TOKENS, TEXT_TOKENS, CHANNELS = 16, 6, 8


def flux_transformer(seed):
    """FLUX's double- and single-stream blocks, tiny: 2 heads of 16, one
    double block, two single blocks."""
    torch.manual_seed(seed % (2 ** 31))
    return diffusers.FluxTransformer2DModel(
        patch_size=1, in_channels=CHANNELS, num_layers=1,
        num_single_layers=2, attention_head_dim=16, num_attention_heads=2,
        joint_attention_dim=32, pooled_projection_dim=24,
        axes_dims_rope=(4, 4, 8)).eval()


def inputs(seed, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed % (2 ** 31))

    def randn(*shape):
        return torch.randn(*shape, generator=generator).to(dtype)

    return dict(hidden_states=randn(1, TOKENS, CHANNELS),
                encoder_hidden_states=randn(1, TEXT_TOKENS, 32),
                pooled_projections=randn(1, 24),
                timestep=torch.tensor([0.5], dtype=dtype),
                img_ids=torch.zeros(TOKENS, 3),
                txt_ids=torch.zeros(TEXT_TOKENS, 3), return_dict=False)


def run(model, seed, dtype=torch.float32):
    with torch.inference_mode():
        return model(**inputs(seed, dtype))[0]


def with_dequantized_weights(float_model, quantized):
    """float_model's copy whose nn.Linear weights are quantized's codes
    times their row scales (float32, one rounding: torch's product)."""
    oracle = copy.deepcopy(float_model)
    layers = dict(quantized.named_modules())
    for name, module in oracle.named_modules():
        if isinstance(module, torch.nn.Linear):
            layer = layers[name]
            assert isinstance(layer, fpt.Linear), name
            with torch.no_grad():
                module.weight.copy_(layer.weight.to(torch.float32)
                                    * layer.weight_scale)
    return oracle


def test_quantized_flux_transformer_runs_and_matches_its_oracle(seed):
    model = flux_transformer(seed)
    linears = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    quantized = fpt.quantize(copy.deepcopy(model))
    assert sum(isinstance(m, fpt.Linear)
               for m in quantized.modules()) == linears > 20
    got = run(quantized, seed)
    assert got.shape == (1, TOKENS, CHANNELS)
    assert torch.equal(got, run(with_dequantized_weights(model, quantized),
                                seed))
    want = run(model, seed)
    assert ((got - want).norm() / want.norm()).item() < 0.1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fp8_activations_in_float32_and_bfloat16(dtype, seed):
    model = flux_transformer(seed)
    quantized = fpt.quantize(copy.deepcopy(model), activations="e4m3")
    # As pipe.to(device, dtype) does: the FP8 codes and scales stay.
    quantized.to("cpu", dtype)
    layer = quantized.transformer_blocks[0].attn.to_q
    assert layer.weight.dtype == torch.float8_e4m3fn
    assert layer.weight_scale.dtype == torch.float32
    got = run(quantized, seed, dtype)
    assert got.dtype == dtype and torch.isfinite(got).all()
    want = run(model.to(dtype), seed, dtype).float()
    error = ((got.float() - want).norm() / want.norm()).item()
    assert error < 0.15, error
