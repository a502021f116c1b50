"""fp8q as a transformers quantization method (issue 24, item 3):
AutoModelForCausalLM.from_pretrained(path, quantization_config=
fp8q.torch.Fp8qConfig(...)) on a tiny Llama saved from its config (random
weights, no download), then save_pretrained / from_pretrained of the FP8
model. The oracle is fp8q.torch.quantize applied by hand to the float model
loaded plainly: the same layers, codes and logits, bit for bit."""
import json
import warnings

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


def test_star_import_needs_neither_library():
    """`from fp8q.torch import *` imports neither transformers nor
    diffusers, and works where both are missing (the library configs are
    not in __all__: naming Fp8qDiffusersConfig there made it an
    ImportError without diffusers)."""
    out = python_output(
        "import sys\n"
        "sys.modules['transformers'] = sys.modules['diffusers'] = None\n"
        "from fp8q.torch import *\n"
        "print(callable(quantize), 'Fp8qConfig' in dir())\n")
    assert out.split() == ["True", "False"]


def tiny_t5(seed):
    torch.manual_seed(seed % (2 ** 31))
    return transformers.T5ForConditionalGeneration(transformers.T5Config(
        d_model=64, d_ff=128, num_layers=2, num_heads=4, d_kv=16,
        vocab_size=128, decoder_start_token_id=0)).eval()


def t5_logits(model, tokens):
    with torch.no_grad():
        return model(input_ids=tokens, decoder_input_ids=tokens[:, :4]).logits


def test_t5_keeps_its_fp32_modules_float(tmp_path, seed):
    """T5's feed-forward `wo` (its _keep_in_fp32_modules: T5 casts wo's
    input to wo.weight.dtype) stays float through quantize and through
    from_pretrained with Fp8qConfig, as transformers' own quantizers leave
    it; the model runs and generates (it raised "x must be float32, float16
    or bfloat16, got float8_e4m3fn"), and a saved quantized T5 reloads bit
    for bit."""
    model = tiny_t5(seed)
    model.save_pretrained(tmp_path / "float")
    tokens = torch.randint(0, 128, (2, 10),
                           generator=torch.Generator().manual_seed(seed % 997))
    quantized = fpt.quantize(tiny_t5(seed), exclude=["lm_head"])
    loaded = transformers.AutoModelForSeq2SeqLM.from_pretrained(
        tmp_path / "float", quantization_config=fpt.Fp8qConfig())
    for each in (quantized, loaded):
        kinds = {type(module) for name, module in each.named_modules()
                 if name.endswith(".wo")}
        assert kinds == {torch.nn.Linear}
        assert any(name.endswith(".wi") for name in fp8_layers(each))
        assert each.generate(tokens, max_new_tokens=3).shape == (2, 4)
    float_logits = t5_logits(model, tokens)
    error = (t5_logits(quantized, tokens) - float_logits).norm() / \
        float_logits.norm()
    assert error < 0.1, f"seed={seed}"
    quantized.save_pretrained(tmp_path / "fp8")
    reloaded = transformers.AutoModelForSeq2SeqLM.from_pretrained(
        tmp_path / "fp8")
    assert fp8_layers(reloaded).keys() == fp8_layers(quantized).keys()
    assert torch.equal(t5_logits(reloaded, tokens),
                       t5_logits(quantized, tokens)), f"seed={seed}"


def test_a_checkpoint_with_an_fp8_wo_is_refused(tmp_path, seed):
    """A T5 an older fp8q saved with `wo` quantized (before the rule that
    keeps it float; such a model could not run) is refused by name: its
    FP8 codes loaded into a float Linear would read as numbers (448 for the
    largest)."""
    model = fpt.quantize(tiny_t5(seed), exclude=["lm_head"])
    block = model.encoder.block[0].layer[1].DenseReluDense
    block.wo = fpt.Linear.from_linear(block.wo)
    model.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"^from_pretrained: the checkpoint "
                       r"holds FP8 weights for encoder\.block\.0\.layer\.1\."
                       r"DenseReluDense\.wo, which fp8q keeps in float"):
        transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path)


def test_gpt2_conv1d_layers_are_named_in_a_warning(seed):
    """transformers' Conv1D (GPT-2's linear layers) is no nn.Linear and
    stays float: quantize says so in a UserWarning naming those its
    patterns select (it changed nothing and said so only at INFO), and a
    pattern matching only Conv1D modules is a ValueError saying so."""
    torch.manual_seed(seed % (2 ** 31))
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_embd=64, n_layer=2, n_head=4, vocab_size=128))
    with pytest.warns(UserWarning, match=r"^quantize: 8 transformers Conv1D "
                      r"modules \(transformer\.h\.0\.attn\.c_attn, .*\) stay "
                      "in float"):
        fpt.quantize(model, exclude=["lm_head"])
    assert not fp8_layers(model)
    # Only the Conv1D modules the call's patterns select are named.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fpt.quantize(model, include=["lm_head"])
    with pytest.raises(ValueError, match=r"^include: no nn\.Linear module "
                       r"of the model matches "
                       r"\['transformer\.h\.1\.attn\.\*'\] "
                       r"\(it matches transformers Conv1D modules, "
                       r"transformer\.h\.1\.attn\.c_attn, "
                       r"transformer\.h\.1\.attn\.c_proj, which fp8q does "
                       r"not quantize"):
        fpt.quantize(model, include=["transformer.h.1.attn.*"])


def test_gpt2_from_pretrained_with_fp8qconfig_warns(tmp_path, seed):
    """from_pretrained(gpt2, quantization_config=Fp8qConfig()) leaves every
    layer float (Conv1D, and lm_head by transformers' default): the same
    UserWarning names the Conv1D modules (it quantized nothing silently)."""
    torch.manual_seed(seed % (2 ** 31))
    transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_embd=64, n_layer=1, n_head=4, vocab_size=128)).save_pretrained(
            tmp_path)
    with pytest.warns(UserWarning, match=r"^from_pretrained: 4 transformers "
                      r"Conv1D "
                      r"modules \(transformer\.h\.0\.attn\.c_attn, "):
        model = transformers.AutoModelForCausalLM.from_pretrained(
            tmp_path, quantization_config=fpt.Fp8qConfig())
    assert not fp8_layers(model)


def test_trainer_trains_adapters_on_a_from_pretrained_fp8q_model(
        tmp_path, seed):
    """transformers' Trainer takes a model loaded with Fp8qConfig once it
    has LoRA adapters (it refused: "quantized with fp8q but that
    quantization method do not support training"); the adapters change,
    the FP8 codes do not."""
    peft = pytest.importorskip("peft", reason="peft is not installed")
    pytest.importorskip("accelerate", reason="accelerate is not installed")
    save_float_llama(tmp_path / "float", seed)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "float", quantization_config=fpt.Fp8qConfig())
    model = peft.get_peft_model(model, peft.LoraConfig(
        r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    before = {name: codes(layer).clone()
              for name, layer in fp8_layers(model).items()}
    adapter = next(p for name, p in model.named_parameters()
                   if "lora_A" in name)
    adapter_before = adapter.detach().clone()
    generator = torch.Generator().manual_seed(seed % 997)
    samples = [{"input_ids": ids, "labels": ids} for ids in
               torch.randint(0, 512, (4, 8), generator=generator)]
    trainer = transformers.Trainer(
        model=model, train_dataset=samples,
        args=transformers.TrainingArguments(
            output_dir=str(tmp_path / "out"), per_device_train_batch_size=2,
            num_train_epochs=1, learning_rate=1e-2, report_to=[],
            save_strategy="no", use_cpu=True, seed=seed % (2 ** 31)))
    trainer.train()
    assert not torch.equal(adapter.detach(), adapter_before)
    assert all(torch.equal(codes(layer), before[name])
               for name, layer in fp8_layers(model).items())
