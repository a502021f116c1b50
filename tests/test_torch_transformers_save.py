"""save_pretrained of a transformers model that fp8q quantized in place
(issue 40, item 1): fp8q.torch.quantize and load_checkpoint give the model
fp8q's transformers quantizer, so save_pretrained writes the
quantization_config that a plain AutoModelForCausalLM.from_pretrained
rebuilds the FP8 layers from, with fp8q.torch imported before or after
transformers; without fp8q, transformers says it skips the "fp8q" method.
A model that one config cannot describe is refused before any file is
written. The oracle is the quantized model itself: the reloaded one has the
same layers, codes, scales and logits, bit for bit. Tiny Llama built from
its config on the CPU (random weights, no download)."""
import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (pip install "
                           "transformers)")
pytest.importorskip("safetensors", reason="safetensors is not installed")

import fp8q.torch as fpt  # noqa: E402
from torch_layers import assert_same_layers, fp8_layers  # noqa: E402

TOKENS = [[3, 1, 4, 1, 5, 9, 2, 6]]


def llama(seed, **overrides):
    config = transformers.LlamaConfig(
        hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, vocab_size=512,
        max_position_embeddings=256, **overrides)
    torch.manual_seed(seed % (2 ** 31))
    return transformers.AutoModelForCausalLM.from_config(config).eval()


def logits(model):
    with torch.no_grad():
        return model(input_ids=torch.tensor(TOKENS), use_cache=False).logits


CASES = {
    # quantize's defaults quantize lm_head too: the config must say so.
    "W8A16-e4m3-row-all": (dict(), False),
    "W8A8-static-row": (dict(activations="e4m3", exclude="lm_head"), True),
    "W8A8-dynamic-block": (dict(activations="e4m3", granularity="block",
                                exclude=["lm_head", "*.q_proj"]), False),
    "W8A16-e5m2-tensor": (dict(weights="e5m2", granularity="tensor",
                               include="*mlp*"), False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_in_place_quantize_save_pretrained_reloads_bit_for_bit(
        case, tmp_path, seed):
    settings, static = CASES[case]
    model = fpt.quantize(llama(seed), **settings)
    if static:
        with fpt.calibrate(model), torch.no_grad():
            model(input_ids=torch.tensor([[7, 7, 2, 9, 4]]), use_cache=False)
        fpt.freeze(model)
    expected = logits(model)
    model.save_pretrained(tmp_path)

    config = json.loads((tmp_path / "config.json").read_text())
    saved = config["quantization_config"]
    assert saved["quant_method"] == "fp8q"
    assert saved["weights"] == settings.get("weights", "e4m3")
    assert saved["activations"] == settings.get("activations")
    assert saved["granularity"] == settings.get("granularity", "row")
    floats = sorted(name for name, module in model.named_modules()
                    if type(module) is torch.nn.Linear)
    # transformers' default (None: lm_head) where it fits, else the names.
    assert saved["modules_to_not_convert"] == (
        None if floats == ["lm_head"] else floats)

    reloaded, info = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, output_loading_info=True)
    assert not any(info[key] for key in ("missing_keys", "unexpected_keys",
                                         "mismatched_keys"))
    assert_same_layers(reloaded, model)
    assert sorted(name for name, module in reloaded.named_modules()
                  if type(module) is torch.nn.Linear) == floats
    assert torch.equal(logits(reloaded), expected)


RELOAD = """
import sys, torch
order = sys.argv[2]
if order == "fp8q-first":
    import fp8q.torch
    import transformers
elif order == "transformers-first":
    import transformers, transformers.quantizers
    import fp8q.torch
else:
    import transformers
model = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1])
kinds = sorted({type(m).__module__ + "." + type(m).__name__
                for n, m in model.named_modules() if n.endswith("_proj")})
with torch.no_grad():
    out = model(input_ids=torch.tensor(%r), use_cache=False).logits
torch.save(out, sys.argv[1] + "/reloaded.pt")
print(kinds)
""" % (TOKENS,)


def reload_in_a_fresh_process(folder, order):
    return subprocess.run([sys.executable, "-c", RELOAD, str(folder), order],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("order", ["fp8q-first", "transformers-first"])
def test_plain_from_pretrained_in_a_fresh_process(order, tmp_path, seed):
    """`import fp8q.torch` alone registers the method, before or after
    transformers is imported."""
    model = fpt.quantize(llama(seed), activations="e4m3", exclude="lm_head")
    model.save_pretrained(tmp_path)
    result = reload_in_a_fresh_process(tmp_path, order)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['fp8q.torch._linear.Linear']"
    assert torch.equal(torch.load(tmp_path / "reloaded.pt"), logits(model))


def test_without_fp8q_transformers_says_it_skips_the_method(tmp_path, seed):
    """fp8q cannot change what transformers does with a method it does not
    know: it warns, naming "fp8q", and loads the codes as float values
    (docs/torch.md says to import fp8q.torch first)."""
    fpt.quantize(llama(seed)).save_pretrained(tmp_path)
    result = reload_in_a_fresh_process(tmp_path, "without-fp8q")
    assert result.returncode == 0, result.stderr
    assert "Unknown quantization type, got fp8q" in result.stderr
    assert "weight_scale" in result.stderr  # and the scales are unexpected
    assert "fp8q" not in result.stdout      # plain nn.Linear layers


def test_load_checkpoint_model_saves_and_reloads(tmp_path, seed):
    """A model that load_checkpoint filled (here from a state dict, on the
    meta device) saves as fp8q too."""
    source = fpt.quantize(llama(seed), granularity="tensor",
                          exclude="lm_head")
    with torch.device("meta"):
        model = llama(seed + 1)
    fpt.load_checkpoint(model, dict(source.state_dict()))
    assert model.config.quantization_config.granularity == "tensor"
    model.save_pretrained(tmp_path)
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    assert_same_layers(reloaded, source)
    assert torch.equal(logits(reloaded), logits(source))


def test_quantize_twice_with_the_same_settings_saves(tmp_path, seed):
    model = fpt.quantize(llama(seed), include="*mlp*")
    fpt.quantize(model, include="*self_attn*")
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["quantization_config"]["modules_to_not_convert"] is None
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    assert len(fp8_layers(reloaded)) == 14
    assert torch.equal(logits(reloaded), logits(model))


def test_quantizing_the_decoder_alone_saves_with_its_parent(tmp_path,
                                                            seed):
    """quantize(model.model) leaves lm_head in float; the config the two
    share says so (transformers' default), so the parent's save reloads."""
    model = llama(seed)
    fpt.quantize(model.model, granularity="tensor")
    model.save_pretrained(tmp_path)
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    assert type(reloaded.lm_head) is torch.nn.Linear
    assert_same_layers(reloaded, model)
    assert torch.equal(logits(reloaded), logits(model))


def test_mixed_settings_are_refused_before_any_file(tmp_path, seed):
    model = fpt.quantize(llama(seed), include="*mlp*")
    fpt.quantize(model, include="*self_attn*", granularity="tensor")
    with pytest.raises(ValueError, match="different settings") as error:
        model.save_pretrained(tmp_path / "out")
    assert "granularity=tensor" in str(error.value)
    assert "granularity=row" in str(error.value)
    assert not any((tmp_path / "out").iterdir())


def test_tied_lm_head_is_refused_naming_both_fixes(tmp_path, seed):
    model = fpt.quantize(llama(seed, tie_word_embeddings=True))
    with pytest.raises(ValueError, match="tie_word_embeddings") as error:
        model.save_pretrained(tmp_path / "refused")
    assert "exclude=['lm_head']" in str(error.value)
    assert not any((tmp_path / "refused").iterdir())
    # The second fix: lm_head saved as its own FP8 layer.
    model.config.tie_word_embeddings = False
    model.save_pretrained(tmp_path / "untied")
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "untied")
    assert isinstance(reloaded.lm_head, fpt.Linear)
    assert torch.equal(logits(reloaded), logits(model))
    # The first: the tie kept, lm_head in float.
    model = fpt.quantize(llama(seed, tie_word_embeddings=True),
                         exclude="lm_head")
    model.save_pretrained(tmp_path / "tied")
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "tied")
    assert type(reloaded.lm_head) is torch.nn.Linear
    assert torch.equal(logits(reloaded), logits(model))


def test_a_plain_torch_model_is_left_alone():
    model = torch.nn.Sequential(torch.nn.Linear(64, 32))
    fpt.quantize(model)
    assert not hasattr(model, "hf_quantizer")


def test_fused_norms_are_recorded_and_fused_again_on_reload(tmp_path, seed):
    """quantize(..., fuse_norms=True) then save_pretrained: the config
    records fuse_norms, and from_pretrained fuses the same norms again
    (the reloaded model takes the norms' codes: its logits are the fused
    model's, bit for bit). An unfused model records False."""
    model = fpt.quantize(llama(seed), activations="e4m3", fuse_norms=True)
    expected = logits(model)
    model.save_pretrained(tmp_path / "fused")
    saved = json.loads((tmp_path / "fused" / "config.json").read_text())
    assert saved["quantization_config"]["fuse_norms"] is True
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "fused")
    norms = [module for name, module in reloaded.named_modules()
             if name.endswith("layernorm")]
    assert len(norms) == 4
    assert all(type(norm).__name__ == "Fp8qFusedLlamaRMSNorm"
               for norm in norms)
    assert torch.equal(logits(reloaded), expected)

    plain = fpt.quantize(llama(seed), activations="e4m3")
    plain.save_pretrained(tmp_path / "plain")
    saved = json.loads((tmp_path / "plain" / "config.json").read_text())
    assert saved["quantization_config"]["fuse_norms"] is False
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "plain")
    assert type(reloaded.model.norm).__name__ == "LlamaRMSNorm"
    assert type(reloaded.model.layers[0].input_layernorm).__name__ == (
        "LlamaRMSNorm")


def test_fp8q_config_fuse_norms_quantizes_a_float_checkpoint(tmp_path,
                                                            seed):
    llama(seed).save_pretrained(tmp_path)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, quantization_config=fpt.Fp8qConfig(
            activations="e4m3", fuse_norms=True))
    assert type(model.model.layers[1].post_attention_layernorm).__name__ == (
        "Fp8qFusedLlamaRMSNorm")
    with pytest.raises(ValueError, match="fuse_norms"):
        fpt.Fp8qConfig(fuse_norms=True)
