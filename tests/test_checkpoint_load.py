"""fp8q.torch.load_checkpoint on every layout, synthesized on the fly from
a tiny model with odd dimensions: the codes bit-identical, the scales
exact, the activation scheme the layout's, every layer's output equal to
its float64 reference, from a file, a sharded folder and a state dict."""
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

import fp8q.torch as fpt  # noqa: E402
from checkpoint_layouts import (FP8, LINEARS,  # noqa: E402
                                check_layers, layout, quantized, save,
                                tiny)
from fp8q._checkpoint import CheckpointError  # noqa: E402

# (layout, options, expected layout name, granularity, scheme)
CASES = [
    ("compressed-tensors", {"granularity": "row"}, "compressed-tensors",
     "row", "W8A16"),
    ("compressed-tensors", {"granularity": "tensor", "static": True},
     "compressed-tensors", "tensor", "W8A8 static"),
    ("compressed-tensors", {"granularity": "row", "dynamic": True},
     "compressed-tensors", "row", "W8A8 dynamic"),
    ("compressed-tensors", {"granularity": "block", "dynamic": True},
     "compressed-tensors", "block", "W8A8 dynamic"),
    ("vllm-fp8", {"granularity": "row", "static": True},
     "compressed-tensors", "row", "W8A8 static"),
    ("vllm-fp8", {"granularity": "tensor"}, "compressed-tensors", "tensor",
     "W8A8 dynamic"),
    ("modelopt", {"static": True}, "compressed-tensors", "tensor",
     "W8A8 static"),
    ("finegrained", {}, "finegrained-fp8", "block", "W8A8 dynamic"),
    ("comfy-scaled", {}, "comfyui-scaled-fp8", "tensor", "W8A16"),
    ("comfy-scaled", {"static": True}, "comfyui-scaled-fp8", "tensor",
     "W8A8 static"),
    ("comfy-scaled", {"fmt": "e5m2"}, "comfyui-scaled-fp8", "tensor",
     "W8A16"),
    ("comfy-quant", {}, "comfyui-quant", "tensor", "W8A16"),
    ("comfy-quant", {"static": True, "fmt": "e5m2"}, "comfyui-quant",
     "tensor", "W8A8 static"),
    ("plain", {}, "plain-fp8", "tensor", "W8A16"),
    ("plain", {"fmt": "e5m2"}, "plain-fp8", "tensor", "W8A16"),
    ("quanto", {}, "optimum-quanto", "row", "W8A16"),
    ("quanto", {"static": True}, "optimum-quanto", "row", "W8A8 static"),
]
# The configs travel with a folder only: layouts that need one load from
# folders, the others from a state dict, a file and a sharded folder.
NEEDS_CONFIG = ("compressed-tensors", "vllm-fp8", "modelopt", "finegrained",
                "quanto")
RUNS = [(source, case) for case in CASES
        for source in (("folder",) if case[0] in NEEDS_CONFIG
                       else ("state_dict", "file", "folder"))]
IDS = [f"{source}-{case[0]}-" + "-".join(f"{k}={v}" for k, v in
                                         case[1].items())
       for source, case in RUNS]


def _check(model, state, granularity, scheme, fmt, static):
    """Each Linear is an fp8q.torch.Linear with the checkpoint's codes bit
    for bit, its scales exactly, the scheme; the float tensors loaded."""
    for name in LINEARS:
        layer = getattr(model, name)
        assert isinstance(layer, fpt.Linear), name
        codes = next(state[key] for key in (name + ".weight",
                                            name + ".weight._data")
                     if key in state)
        assert layer.weight.dtype == FP8[fmt]
        assert torch.equal(layer.weight.view(torch.uint8),
                           codes.view(torch.uint8)), name
        assert layer.granularity == granularity
        scale_keys = [name + suffix for suffix in (
            ".weight_scale", ".weight_scale_inv", ".scale_weight",
            ".weight._scale") if name + suffix in state]
        scale = (state[scale_keys[0]].to(torch.float32)
                 if scale_keys else torch.ones(()))
        assert torch.equal(layer.weight_scale.reshape(-1),
                           scale.reshape(-1)), name
        assert (layer.activations is not None) == (scheme != "W8A16")
        input_keys = [name + suffix for suffix in (".input_scale",
                                                   ".scale_input")
                      if name + suffix in state]
        if static:
            assert float(layer.input_scale) == float(
                state[input_keys[0]].float())
        else:
            assert layer.input_scale is None
    assert isinstance(model.norm, torch.nn.LayerNorm)
    assert torch.equal(model.norm.weight, state["norm.weight"])
    assert torch.equal(model.proj.bias, state["proj.bias"])


@pytest.mark.parametrize("source, case", RUNS, ids=IDS)
def test_layout_loads_exactly(source, case, tmp_path):
    name, options, expected, granularity, scheme = case
    state, configs = layout(name, tiny(), **options)
    if source == "state_dict":
        given = state
    elif source == "file":
        given = save(str(tmp_path), state) + "/model.safetensors"
    else:
        given = save(str(tmp_path), state, configs, shards=2)
    model = tiny(seed=1)
    report = fpt.load_checkpoint(model, given)
    assert report.layout == expected
    assert {(g, s) for (_, g, s) in report.counts()} == {(granularity,
                                                         scheme)}
    assert sum(report.counts().values()) == 3
    assert not report.unexpected_keys and not report.missing_keys
    _check(model, state, granularity, scheme, options.get("fmt", "e4m3"),
           options.get("static", False))
    torch.manual_seed(2)
    check_layers(model, torch.randn(2, 5, 40))


def test_report_text_and_bytes(tmp_path):
    state, configs = layout("finegrained", tiny())
    report = fpt.load_checkpoint(tiny(1), save(str(tmp_path), state,
                                               configs))
    text = str(report)
    assert "finegrained-fp8" in text and "3 x float8_e4m3fn, block" in text
    codes = sum(state[n + ".weight"].numel() for n in LINEARS)
    scales = sum(state[n + ".weight_scale_inv"].numel() * 4 for n in LINEARS)
    assert report.fp8_bytes == codes + scales
    assert report.float_bytes == sum(
        state[key].numel() * 4 for key in report.float_keys)


def test_meta_model_loads_on_the_cpu(tmp_path):
    state, configs = layout("compressed-tensors", tiny(), static=True)
    folder = save(str(tmp_path), state, configs)
    with torch.device("meta"):
        model = tiny()
    fpt.load_checkpoint(model, folder)
    assert all(not t.is_meta for t in model.state_dict().values())
    assert torch.equal(model.norm.weight, state["norm.weight"])
    check_layers(model, torch.randn(3, 40))


def test_bfloat16_model_keeps_codes_and_float32_scales():
    state, _ = layout("comfy-scaled", tiny(), static=True)
    model = tiny(1).to(torch.bfloat16)
    fpt.load_checkpoint(model, state)
    assert model.proj.bias.dtype == torch.bfloat16
    assert model.proj.weight_scale.dtype == torch.float32
    assert model.norm.weight.dtype == torch.bfloat16
    assert model(torch.randn(2, 40, dtype=torch.bfloat16)).dtype == \
        torch.bfloat16


def test_plain_fp8_non_linear_tensors_cast_exactly():
    state, _ = layout("plain", tiny())
    state["norm.weight"] = state["norm.weight"].to(torch.float8_e4m3fn)
    model = tiny(1)
    report = fpt.load_checkpoint(model, state)
    assert torch.equal(model.norm.weight,
                       state["norm.weight"].to(torch.float32))
    assert "norm.weight" in report.float_keys


def test_scaled_non_linear_weight_is_dequantized():
    model = tiny()
    state, _ = layout("comfy-scaled", model)
    model.emb = torch.nn.Embedding(6, 4)
    weight = torch.randn(6, 4)
    codes = (weight / 0.01).to(torch.float8_e4m3fn)
    state["emb.weight"] = codes
    state["emb.scale_weight"] = torch.tensor(0.01)
    target = tiny(1)
    target.emb = torch.nn.Embedding(6, 4)
    report = fpt.load_checkpoint(target, state)
    assert report.dequantized_keys == ["emb.weight"]
    assert torch.equal(target.emb.weight,
                       codes.to(torch.float32) * torch.tensor(0.01))


def test_strict_false_reports_missing_and_unexpected():
    state, _ = layout("comfy-scaled", tiny())
    del state["norm.bias"]
    state["extra.weight"] = torch.zeros(2)
    model = tiny(1)
    bias = model.norm.bias.detach().clone()
    with pytest.raises(CheckpointError, match=r"missing key\(s\): norm\.bias"
                       r".*unexpected key\(s\): extra\.weight"):
        fpt.load_checkpoint(model, state)
    assert isinstance(model.proj, torch.nn.Linear) and \
        not isinstance(model.proj, fpt.Linear)  # untouched
    report = fpt.load_checkpoint(model, state, strict=False)
    assert report.missing_keys == ["norm.bias"]
    assert report.unexpected_keys == ["extra.weight"]
    assert torch.equal(model.norm.bias, bias)


def test_quanto_map_argument_for_a_state_dict():
    state, configs = layout("quanto", tiny(), static=True)
    model = tiny(1)
    report = fpt.load_checkpoint(model, state,
                                 quantization_map=configs["quanto_qmap.json"])
    assert {s for (_, _, s) in report.counts()} == {"W8A8 static"}
    without = fpt.load_checkpoint(tiny(1), state)
    assert {s for (_, _, s) in without.counts()} == {"W8A16"}
    assert any("no quantization map" in note for note in without.notes)


def test_comfy_quant_from_safetensors_metadata_and_u8_storage(tmp_path):
    from safetensors.torch import save_file

    state, _ = layout("comfy-quant", tiny())
    layers = {}
    for name in LINEARS:
        layers[name] = json.loads(bytes(state.pop(name + ".comfy_quant")
                                        .tolist()))
        state[name + ".weight"] = state[name + ".weight"].view(torch.uint8)
    path = str(tmp_path / "m.safetensors")
    save_file(state, path, metadata={"_quantization_metadata": json.dumps(
        {"format_version": "1.0", "layers": layers})})
    model = tiny(1)
    fpt.load_checkpoint(model, path)
    assert model.out.weight.dtype == torch.float8_e4m3fn
    assert torch.equal(model.out.weight.view(torch.uint8),
                       state["out.weight"])


def test_codes_match_fp8q_quantize():
    model = tiny()
    state, _ = layout("finegrained", model)
    codes, scale = quantized(model, "block")["out"]
    assert torch.equal(state["out.weight"].view(torch.uint8),
                       codes.view(torch.uint8))
    assert scale.shape == (2, 2)  # 200 x 130: partial blocks both ways


def test_strict_false_with_bias_mismatches():
    state, _ = layout("comfy-scaled", tiny())
    state["out.bias"] = torch.ones(200)   # the model's out has no bias
    del state["head.bias"]                # the model's head has one
    with torch.device("meta"):
        model = tiny()
    report = fpt.load_checkpoint(model, state, strict=False)
    assert report.unexpected_keys == ["out.bias"]
    assert report.missing_keys == ["head.bias"]
    assert model.out.bias is None
    assert torch.equal(model.head.bias, torch.zeros(9))  # meta: zeros
    check_layers(model, torch.randn(2, 40))
