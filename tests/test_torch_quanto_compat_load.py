"""fp8q.torch.quanto_compat's save and reload paths: quantization_map and
requantize (on float models and on models built on the meta device, with
quanto's strict=False loading; issue 24 defect 6), and the transformers
wrappers' save_pretrained / from_pretrained. Maps and outputs are checked
against optimum-quanto's when it is installed."""
import json

import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: pip install torch to run the "
                    "fp8q.torch tests")

import fp8q.torch as fpt  # noqa: E402
from fp8q.torch import quanto_compat as qc  # noqa: E402


class Encoder(torch.nn.Module):
    """Embedding, LayerNorm and Linear layers: parameters that requantize
    must bring off the meta device besides the quantized ones."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 64)
        self.norm = torch.nn.LayerNorm(64)
        self.up = torch.nn.Linear(64, 48)
        self.down = torch.nn.Linear(48, 32)
        self.head = torch.nn.Linear(32, 8)

    def forward(self, ids):
        x = self.norm(self.embed(ids))
        return self.head(torch.relu(self.down(torch.relu(self.up(x)))))


def float_model(seed, device=None):
    torch.manual_seed(seed % 2 ** 31)
    with torch.device(device or "cpu"):
        return Encoder()


def quantized_frozen(seed):
    model = float_model(seed)
    qc.quantize(model, weights=qc.qfloat8, activations=qc.qfloat8,
                exclude="head")
    qc.quantize(model, weights=qc.qfloat8_e5m2, include="head")
    with qc.Calibration(), torch.no_grad():
        model(ids(seed))
    qc.freeze(model)
    return model


def ids(seed):
    return torch.randint(0, 50, (3, 7),
                         generator=torch.Generator().manual_seed(seed % 997))


def saved(seed):
    model = quantized_frozen(seed)
    return model, model.state_dict(), json.loads(json.dumps(
        qc.quantization_map(model)))


def test_quantization_map_names_each_layer_and_its_qtypes(seed):
    assert qc.quantization_map(quantized_frozen(seed)) == {
        "up": {"weights": "qfloat8_e4m3fn", "activations": "qfloat8_e4m3fn"},
        "down": {"weights": "qfloat8_e4m3fn",
                 "activations": "qfloat8_e4m3fn"},
        "head": {"weights": "qfloat8_e5m2", "activations": "none"}}
    with pytest.raises(ValueError, match="'up' is an fp8q.torch.Linear"):
        qc.quantization_map(fpt.quantize(float_model(seed)))


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_requantize_reproduces_the_saved_model(device, tmp_path, seed):
    safetensors_torch = pytest.importorskip(
        "safetensors.torch", reason="safetensors is not installed (it is in "
                                    "fp8q's [test] extra)")
    model, state, qmap = saved(seed)
    safetensors_torch.save_file(state, str(tmp_path / "model.safetensors"))
    fresh = float_model(seed + 1, device)
    assert qc.requantize(fresh, safetensors_torch.load_file(
        str(tmp_path / "model.safetensors")), qmap) is None
    assert all(isinstance(getattr(fresh, name), qc.QLinear)
               and getattr(fresh, name).frozen
               for name in ("up", "down", "head"))
    assert fresh.head.weight.dtype == torch.float8_e5m2
    assert fresh.up.input_scale == model.up.input_scale
    assert fresh.norm.weight.device.type == "cpu"
    with torch.no_grad():
        assert torch.equal(fresh(ids(seed)), model(ids(seed))), seed


def test_requantize_loads_like_quanto_with_strict_false(seed):
    model, state, qmap = saved(seed)
    state["extra.weight"] = torch.ones(3)  # ignored, as quanto
    del state["norm.bias"]  # a float model keeps its own value
    fresh = float_model(seed)
    qc.requantize(fresh, state, qmap, device="cpu")
    assert torch.equal(fresh.norm.bias, float_model(seed).norm.bias)
    on_meta = float_model(seed, "meta")
    with pytest.raises(ValueError, match=r"no \['norm.bias'\].*meta device"):
        qc.requantize(on_meta, state, qmap)


def test_requantize_errors_name_the_entry(seed):
    _, state, qmap = saved(seed)
    with pytest.raises(ValueError, match=r"\['norm'\]: expected a float "
                                         "nn.Linear"):
        qc.requantize(float_model(seed), state,
                      {"norm": {"weights": "qfloat8", "activations": "none"}})
    with pytest.raises(ValueError, match=r"\['up'\]: weights: fp8q supports"):
        qc.requantize(float_model(seed), state,
                      {"up": {"weights": "qint8", "activations": "none"}})
    with pytest.raises(ValueError, match=r"\['up'\]: activations: fp8q "
                                         "supports.*qfloat8_e4m3fnuz"):
        qc.requantize(float_model(seed), state,
                      {"up": {"weights": "qfloat8",
                              "activations": "qfloat8_e4m3fnuz"}})
    # quanto: AttributeError from torch / KeyError; here the entry is named.
    with pytest.raises(ValueError, match=r"\['nope'\]: the model has no "
                                         "module 'nope'"):
        qc.requantize(float_model(seed), state,
                      {"nope": {"weights": "qfloat8", "activations": "none"}})
    with pytest.raises(ValueError, match=r"\['up'\]: no 'activations' key"):
        qc.requantize(float_model(seed), state, {"up": {"weights": "qfloat8"}})
    wrong = dict(qmap, head={"weights": "qfloat8", "activations": "none"})
    with pytest.raises(RuntimeError, match="head.weight holds "
                                           "torch.float8_e5m2 codes"):
        qc.requantize(float_model(seed), state, wrong)


def test_requantize_refuses_meta_buffers_no_state_dict_holds(seed):
    model, state, qmap = saved(seed)
    on_meta = float_model(seed, "meta")
    on_meta.register_buffer("positions", torch.arange(7, device="meta"),
                            persistent=False)
    with pytest.raises(ValueError, match=r"non-persistent buffers "
                                         r"\['positions'\].*init_empty"):
        qc.requantize(on_meta, state, qmap)


def test_quantization_map_matches_optimum_quanto(seed):
    """The same map as quanto's for the same quantization. quanto also
    turns LayerNorm into a QLayerNorm when activations are quantized;
    fp8q leaves it float, so quanto's is excluded here."""
    quanto = pytest.importorskip("optimum.quanto",
                                 reason="optimum-quanto is not installed")
    theirs = float_model(seed)
    quanto.quantize(theirs, weights=quanto.qfloat8,
                    activations=quanto.qfloat8, exclude=["head", "norm"])
    quanto.quantize(theirs, weights=quanto.qfloat8_e5m2, include="head")
    assert saved(seed)[2] == quanto.quantization_map(theirs)


transformers = None


def tiny_causal_lm(seed):
    global transformers
    transformers = pytest.importorskip(
        "transformers", reason="transformers is not installed")
    config = transformers.LlamaConfig(
        vocab_size=96, hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=32, tie_word_embeddings=True)
    torch.manual_seed(seed % 2 ** 31)
    return transformers.AutoModelForCausalLM.from_config(config)


@pytest.mark.parametrize("exclude", ["lm_head", None])
def test_quantized_causal_lm_saves_and_reloads(exclude, tmp_path, seed):
    model = tiny_causal_lm(seed)
    tokens = torch.randint(0, 96, (2, 9))
    wrapped = qc.QuantizedModelForCausalLM.quantize(
        model, weights=qc.qfloat8, exclude=exclude)
    assert wrapped.model is model.model  # attributes reach the model
    with torch.no_grad():
        logits = wrapped(tokens).logits
    wrapped.save_pretrained(tmp_path)
    assert (tmp_path / "quanto_qmap.json").exists()
    reloaded = qc.QuantizedModelForCausalLM.from_pretrained(tmp_path)
    layer = reloaded.model.layers[0].mlp.up_proj
    assert isinstance(layer, qc.QLinear) and layer.frozen
    assert isinstance(reloaded.lm_head, qc.QLinear) == (exclude is None)
    assert not reloaded.training
    with torch.no_grad():
        assert torch.equal(reloaded(tokens).logits, logits), seed


def test_transformers_wrappers_refuse_what_they_cannot_do(tmp_path, seed):
    model = tiny_causal_lm(seed)
    with pytest.raises(ValueError, match="quantized by quanto_compat"):
        qc.QuantizedTransformersModel(model)
    with pytest.raises(ValueError, match="expected a transformers "
                                         "PreTrainedModel"):
        qc.QuantizedModelForCausalLM.quantize(torch.nn.Linear(2, 2),
                                              weights=qc.qfloat8)
    with pytest.raises(ValueError, match="no quanto_qmap.json"):
        qc.QuantizedModelForCausalLM.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match="QuantizedModelForCausalLM"):
        qc.QuantizedTransformersModel.from_pretrained(tmp_path)


def test_wrapper_copies_and_refuses_push_to_hub(tmp_path, seed):
    import copy
    model = tiny_causal_lm(seed)  # skips without transformers
    wrapped = qc.QuantizedModelForCausalLM.quantize(
        model, weights=qc.qfloat8, exclude="lm_head")
    twin = copy.deepcopy(wrapped)
    assert twin.model is not wrapped.model
    with pytest.raises(ValueError, match="push_to_hub.*upload_folder"):
        wrapped.save_pretrained(tmp_path, push_to_hub=True)
    assert not (tmp_path / "model.safetensors").exists()


def _quanto_saved(quanto, seed, dtype):
    """A float model and the state dict and map optimum-quanto saves for it
    quantized (head e5m2, the rest qfloat8 with calibrated activations)
    and frozen: `weight._data` / `weight._scale` keys."""
    model = float_model(seed).to(dtype)
    quanto.quantize(model, weights=quanto.qfloat8,
                    activations=quanto.qfloat8, include=["up", "down"])
    quanto.quantize(model, weights=quanto.qfloat8_e5m2, include="head")
    with quanto.Calibration(), torch.no_grad():
        model(ids(seed))
    quanto.freeze(model)
    return model, model.state_dict(), json.loads(json.dumps(
        quanto.quantization_map(model)))


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_requantize_loads_optimum_quanto_state_dicts(device, dtype, seed):
    """A state dict optimum-quanto saved used to load as nothing (its keys
    ignored under strict=False, the layers unfrozen with the fresh
    model's random weights); now each mapped layer is frozen with quanto's
    codes, scales and input_scale, the dequantized weight quanto's own
    requantize gives, bit for bit."""
    quanto = pytest.importorskip("optimum.quanto",
                                 reason="optimum-quanto is not installed")
    _, state, qmap = _quanto_saved(quanto, seed, dtype)
    assert "up.weight._data" in state
    theirs = float_model(seed + 1).to(dtype)
    quanto.requantize(theirs, dict(state), qmap)
    ours = float_model(seed + 2, device).to(dtype)
    qc.requantize(ours, dict(state), qmap)
    for name in ("up", "down", "head"):
        mine, want = ours.get_submodule(name), theirs.get_submodule(name)
        assert mine.frozen, name
        assert torch.equal(mine.qweight.dequantize(),
                           want.weight.dequantize()), (name, seed)
        assert float(mine.input_scale) == float(want.input_scale), name
    assert torch.equal(ours.norm.weight, theirs.norm.weight)
    if dtype == torch.float32:
        # Weight-only layers compute as quanto's to float32 rounding.
        x = torch.randn(5, 32, generator=torch.Generator().manual_seed(
            seed % 991))
        with torch.no_grad():
            want, got = theirs.head(x), ours.head(x)
        assert float((got - want).norm() / want.norm()) < 1e-6, seed


def test_requantize_refuses_half_of_a_quanto_weight(seed):
    quanto = pytest.importorskip("optimum.quanto",
                                 reason="optimum-quanto is not installed")
    _, state, qmap = _quanto_saved(quanto, seed, torch.float32)
    del state["up.weight._scale"]
    with pytest.raises(ValueError, match=r"up.weight._data \(optimum-"
                                         r"quanto's layout\) but no "
                                         r"up.weight._scale"):
        qc.requantize(float_model(seed), state, qmap)


def test_from_pretrained_reads_an_optimum_quanto_folder(tmp_path, seed):
    quanto = pytest.importorskip("optimum.quanto",
                                 reason="optimum-quanto is not installed")
    model = tiny_causal_lm(seed)
    tokens = torch.randint(0, 96, (2, 9), generator=torch.Generator()
                           .manual_seed(seed % 983))
    saved_by_quanto = quanto.QuantizedModelForCausalLM.quantize(
        model, weights=quanto.qfloat8, exclude="lm_head")
    quanto.freeze(model)
    with torch.no_grad():
        want = model(tokens).logits
    saved_by_quanto.save_pretrained(tmp_path)
    reloaded = qc.QuantizedModelForCausalLM.from_pretrained(tmp_path)
    layer = reloaded.model.layers[0].mlp.up_proj
    assert isinstance(layer, qc.QLinear) and layer.frozen
    assert torch.equal(layer.qweight.dequantize(),
                       model.model.layers[0].mlp.up_proj.weight.dequantize())
    with torch.no_grad():
        got = reloaded(tokens).logits
    assert float((got - want).norm() / want.norm()) < 1e-5, seed
