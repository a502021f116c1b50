"""fp8q as a transformers quantization method (issue 24, item 3):
AutoModelForCausalLM.from_pretrained(path, quantization_config=
fp8q.torch.Fp8qConfig(...)) on a tiny Llama saved from its config (random
weights, no download), then save_pretrained / from_pretrained of the FP8
model. The oracle is fp8q.torch.quantize applied by hand to the float model
loaded plainly: the same layers, codes and logits, bit for bit."""
import json

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (pip install "
                           "transformers)")
pytest.importorskip("safetensors", reason="safetensors is not installed")

import fp8q.torch as fpt  # noqa: E402
from fp8q._safetensors import SafetensorsReader  # noqa: E402

SETTINGS = [dict(activations="e4m3"),
            dict(weights="e5m2", granularity="tensor")]
IDS = ["W8A8-e4m3-row", "W8A16-e5m2-tensor"]


def save_float_llama(directory, seed):
    config = transformers.LlamaConfig(
        hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, vocab_size=512,
        max_position_embeddings=256)
    torch.manual_seed(seed % (2 ** 31))
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(
        directory)


def logits(model, tokens):
    with torch.no_grad():
        return model(input_ids=tokens, use_cache=False).logits


def fp8_layers(model):
    return {name: module for name, module in model.named_modules()
            if isinstance(module, fpt.Linear)}


def codes(layer):
    return layer.weight.view(torch.uint8)


@pytest.mark.parametrize("settings", SETTINGS, ids=IDS)
def test_from_pretrained_quantizes_as_fp8q_torch_quantize(settings, tmp_path,
                                                          seed):
    save_float_llama(tmp_path, seed)
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, quantization_config=fpt.Fp8qConfig(**settings),
        output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    by_hand = fpt.quantize(
        transformers.AutoModelForCausalLM.from_pretrained(tmp_path),
        exclude="lm_head", **settings)
    ours, theirs = fp8_layers(model), fp8_layers(by_hand)
    assert len(ours) == 14 and ours.keys() == theirs.keys()
    # transformers' default keeps the output embeddings in float.
    assert type(model.lm_head) is torch.nn.Linear
    for name, layer in ours.items():
        assert torch.equal(codes(layer), codes(theirs[name])), name
        assert torch.equal(layer.weight_scale, theirs[name].weight_scale)
    tokens = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])
    assert torch.equal(logits(model, tokens), logits(by_hand, tokens))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16],
                         ids=["float32", "bfloat16"])
@pytest.mark.parametrize("settings", SETTINGS, ids=IDS)
def test_save_pretrained_keeps_fp8_and_reloads_bit_for_bit(settings, dtype,
                                                           tmp_path, seed):
    """from_pretrained(dtype=...) converts the float parts only: the codes
    stay FP8 and the scales float32."""
    save_float_llama(tmp_path / "float", seed)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "float", quantization_config=fpt.Fp8qConfig(**settings),
        dtype=dtype)
    assert model.model.norm.weight.dtype == dtype
    tokens = torch.tensor([[2, 7, 1, 8, 2, 8]])
    static = settings.get("activations") is not None
    if static:
        with fpt.calibrate(model), torch.no_grad():
            model(input_ids=tokens, use_cache=False)
        fpt.freeze(model)
    model.save_pretrained(tmp_path / "fp8")

    config = json.loads((tmp_path / "fp8" / "config.json").read_text())
    assert config["quantization_config"]["quant_method"] == "fp8q"
    reader = SafetensorsReader(tmp_path / "fp8" / "model.safetensors")
    code = {"e5m2": "F8_E5M2"}.get(settings.get("weights"), "F8_E4M3")
    name = "model.layers.0.mlp.down_proj"
    assert reader.entries[name + ".weight"] == (code, (128, 256))
    assert reader.entries[name + ".weight_scale"][0] == "F32"
    assert (name + ".input_scale" in reader.entries) == static
    reader.close()

    reloaded, info = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "fp8", output_loading_info=True, dtype=dtype)
    assert not any(info[key] for key in ("missing_keys", "unexpected_keys",
                                         "mismatched_keys"))
    ours, theirs = fp8_layers(reloaded), fp8_layers(model)
    assert ours.keys() == theirs.keys() and len(ours) == 14
    for name, layer in ours.items():
        assert layer.weight.dtype == theirs[name].weight.dtype, name
        assert layer.weight_scale.dtype == torch.float32, name
        assert torch.equal(codes(layer), codes(theirs[name])), name
        assert torch.equal(layer.weight_scale, theirs[name].weight_scale)
        if static:
            assert torch.equal(layer.input_scale, theirs[name].input_scale)
    assert torch.equal(logits(reloaded, tokens), logits(model, tokens))


def test_modules_to_not_convert_and_bad_settings(tmp_path, seed):
    save_float_llama(tmp_path, seed)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, quantization_config=fpt.Fp8qConfig(
            modules_to_not_convert=["lm_head", "mlp"]))
    assert sorted(fp8_layers(model)) == sorted(
        f"model.layers.{i}.self_attn.{p}_proj" for i in range(2)
        for p in "qkvo")
    with pytest.raises(ValueError, match="weights: expected"):
        fpt.Fp8qConfig(weights="int8")


def python_output(code):
    """stdout of `code` run by a fresh Python (an error fails the test)."""
    import subprocess
    import sys
    result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_without_transformers_fp8q_torch_says_what_to_install():
    out = python_output("import sys; sys.modules['transformers'] = None\n"
                        "import fp8q.torch\n"
                        "try:\n    fp8q.torch.Fp8qConfig\n"
                        "except ImportError as error:\n    print(error)\n")
    assert out.startswith("fp8q.torch.Fp8qConfig needs Hugging Face "
                          "transformers (pip install transformers)")


def test_import_fp8q_torch_registers_without_importing_transformers():
    """The method is registered once transformers' quantizers are imported
    (issue 40: a plain from_pretrained after `import fp8q.torch`)."""
    out = python_output("import sys, fp8q.torch\n"
                        "print('transformers' in sys.modules)\n"
                        "import transformers.quantizers.auto as auto\n"
                        "print('fp8q' in auto.AUTO_QUANTIZER_MAPPING)\n")
    assert out.split() == ["False", "True"]
