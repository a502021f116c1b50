"""optimum-quanto's own serialization loaded by fp8q.torch.load_checkpoint:
the installed optimum-quanto quantizes a model to qfloat8, saves its state
dict with safetensors and its quantization map as quanto_qmap.json; fp8q
loads the codes bit for bit and its outputs match quanto's."""
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")
quanto = pytest.importorskip(
    "optimum.quanto", reason="needs optimum-quanto (CI installs it)")

import fp8q.torch as fpt  # noqa: E402
from checkpoint_layouts import LINEARS, check_layers, tiny  # noqa: E402


def _quanto_folder(tmp_path, dtype, activations):
    from safetensors.torch import save_file

    model = tiny().to(dtype)
    quanto.quantize(model, weights=quanto.qfloat8,
                    activations=quanto.qfloat8 if activations else None)
    if activations:
        with quanto.Calibration():
            for seed in range(3):
                torch.manual_seed(seed)
                model(torch.randn(4, 40, dtype=dtype))
    quanto.freeze(model)
    state = {key: value.contiguous() for key, value
             in model.state_dict().items()}
    save_file(state, str(tmp_path / "model.safetensors"))
    (tmp_path / "quanto_qmap.json").write_text(
        json.dumps(quanto.quantization_map(model)))
    return model, state


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_quanto_weight_only_matches_quanto(tmp_path, dtype):
    reference, state = _quanto_folder(tmp_path, dtype, activations=False)
    assert "out.weight._data" in state
    model = tiny(seed=1).to(dtype)
    report = fpt.load_checkpoint(model, str(tmp_path))
    assert report.layout == "optimum-quanto"
    assert report.counts() == {("float8_e4m3fn", "row", "W8A16"): 3}
    for name in LINEARS:
        layer = getattr(model, name)
        assert torch.equal(layer.weight.view(torch.uint8),
                           state[name + ".weight._data"].view(torch.uint8))
        assert torch.equal(layer.weight_scale,
                           state[name + ".weight._scale"].float())
    torch.manual_seed(5)
    x = torch.randn(3, 40, dtype=dtype)
    with torch.no_grad():
        expected = reference(x).float()
    got = check_layers(model, x).float()
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    assert torch.allclose(got, expected, rtol=tolerance,
                          atol=tolerance * float(expected.abs().max()))


def test_quanto_static_activations(tmp_path):
    reference, state = _quanto_folder(tmp_path, torch.float32,
                                      activations=True)
    model = tiny(seed=1)
    report = fpt.load_checkpoint(model, str(tmp_path))
    assert report.counts() == {("float8_e4m3fn", "row", "W8A8 static"): 3}
    for name in LINEARS:
        assert float(getattr(model, name).input_scale) == float(
            state[name + ".input_scale"])
    torch.manual_seed(6)
    x = torch.randn(3, 40)
    got = check_layers(model, x)  # exact against fp8q's float64 reference
    with torch.no_grad():
        expected = reference(x)
    # quanto also quantizes each layer's output to FP8; fp8q does not.
    error = (got - expected).norm() / expected.norm()
    assert float(error) < 0.1


def test_quanto_save_pretrained_of_a_llama(tmp_path):
    transformers = pytest.importorskip(
        "transformers", reason="needs transformers (CI installs it)")
    from optimum.quanto import QuantizedModelForCausalLM

    config = transformers.LlamaConfig(
        vocab_size=97, hidden_size=200, intermediate_size=300,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        tie_word_embeddings=False)
    torch.manual_seed(0)
    quantized = QuantizedModelForCausalLM.quantize(
        transformers.LlamaForCausalLM(config).eval(), weights=quanto.qfloat8,
        exclude="lm_head")
    quantized.save_pretrained(str(tmp_path))
    model = transformers.LlamaForCausalLM(config).eval()
    report = fpt.load_checkpoint(model, str(tmp_path))
    assert report.counts() == {("float8_e4m3fn", "row", "W8A16"): 14}
    ids = torch.randint(0, 97, (2, 6), generator=torch.Generator()
                        .manual_seed(1))
    logits = check_layers(model, ids).logits
    with torch.no_grad():
        expected = quantized(ids).logits
    error = (logits - expected).abs().max() / expected.abs().max()
    assert float(error) < 1e-5, float(error)
