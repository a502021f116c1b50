"""Every refusal of fp8q.torch.load_checkpoint, on corrupted variants of
synthesized checkpoints: the error names the key (or config field) and the
problem, and the model is left as it was."""
import collections
import json
import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

import fp8q.torch as fpt  # noqa: E402
from checkpoint_layouts import FP8, layout, save, tiny  # noqa: E402
from fp8q._checkpoint import CheckpointError  # noqa: E402


def _set(mapping, key, value):
    mapping[key] = value


def _config(configs, name="config.json"):
    return configs[name]["quantization_config"] if name == "config.json" \
        else configs[name]


def _group(configs):
    return _config(configs)["config_groups"]["group_0"]


def _json_tensor(value):
    return torch.tensor(list(json.dumps(value).encode()), dtype=torch.uint8)


# (id, layout, options, corrupt(state, configs), message pattern)
CORRUPTIONS = [
    ("scale-without-weight", "compressed-tensors", {},
     lambda s, c: s.pop("out.weight"),
     r"out\.weight: missing \(its scale is in the checkpoint"),
    ("scale-fits-no-granularity", "compressed-tensors", {},
     lambda s, c: _set(s, "out.weight_scale", torch.ones(7)),
     r"out\.weight_scale: shape \(7,\) is not a row scale"),
    ("scale-fits-nothing-without-config", "comfy-scaled", {},
     lambda s, c: _set(s, "out.scale_weight", torch.ones(3, 5)),
     r"out\.scale_weight: shape \(3, 5\) fits no scale granularity"),
    ("integer-scale", "comfy-scaled", {},
     lambda s, c: _set(s, "out.scale_weight",
                       torch.ones((), dtype=torch.int32)),
     r"out\.scale_weight: a scale must be F32, F16 or BF16, this one is I32"),
    ("input-scale-without-weight", "compressed-tensors", {},
     lambda s, c: _set(s, "norm.input_scale", torch.ones(1)),
     r"norm\.input_scale: an input scale without an FP8 weight"),
    ("float-weight-with-scale", "compressed-tensors", {},
     lambda s, c: _set(s, "out.weight", s["out.weight"].float()),
     r"out\.weight: dtype F32, expected FP8"),
    ("fp8-weight-without-scale", "compressed-tensors", {},
     lambda s, c: s.pop("head.weight_scale"),
     r"head\.weight: an FP8 tensor without a scale"),
    ("static-config-without-input-scale", "compressed-tensors",
     {"static": True}, lambda s, c: s.pop("proj.input_scale"),
     r"proj\.input_scale: missing; the checkpoint's config declares static"),
    ("int8-config", "compressed-tensors", {},
     lambda s, c: _group(c)["weights"].update(type="int"),
     r"config\.json: quantization_config\.config_groups\.group_0\.weights "
     r"is 8-bit int"),
    ("block-structure-64", "compressed-tensors", {"granularity": "block"},
     lambda s, c: _group(c)["weights"].update(block_structure=[64, 64]),
     r"block_structure \[64, 64\]; fp8q's block scales are 128x128"),
    ("groups-disagree", "compressed-tensors", {},
     lambda s, c: _config(c)["config_groups"].update(group_1={
         "weights": {"num_bits": 8, "type": "float", "strategy": "tensor"}}),
     r"config_groups declare different schemes"),
    ("unknown-quant-method", "compressed-tensors", {},
     lambda s, c: _config(c).update(quant_method="gptq"),
     r"quant_method 'gptq'"),
    ("block-with-static-input-scale", "compressed-tensors",
     {"granularity": "block"},
     lambda s, c: _set(s, "out.input_scale", torch.ones(1)),
     r"out\.input_scale: a static per-tensor input scale with 128x128 block"),
    ("input-scale-zero", "compressed-tensors", {"static": True},
     lambda s, c: _set(s, "head.input_scale", torch.zeros(1)),
     r"head\.input_scale: 0\.0; a static input scale must be finite and > 0"),
    ("input-scale-two-values", "compressed-tensors", {"static": True},
     lambda s, c: _set(s, "head.input_scale", torch.ones(2)),
     r"head\.input_scale: a static input scale must hold one value"),
    ("modelopt-nvfp4", "modelopt", {},
     lambda s, c: c["hf_quant_config.json"]["quantization"].update(
         quant_algo="NVFP4"),
     r"hf_quant_config\.json: quantization\.quant_algo is 'NVFP4'"),
    ("finegrained-block-64", "finegrained", {},
     lambda s, c: _config(c).update(weight_block_size=[64, 64]),
     r"weight_block_size \[64, 64\]; fp8q's block scales are 128x128"),
    ("finegrained-static", "finegrained", {},
     lambda s, c: _config(c).update(activation_scheme="static"),
     r"activation_scheme 'static' with block weight scales"),
    ("finegrained-row-shaped-scale", "finegrained", {},
     lambda s, c: _set(s, "out.weight_scale_inv", torch.ones(200, 1)),
     r"out\.weight_scale_inv: shape \(200, 1\) is not a block scale"),
    ("marker-contradicts-weight", "comfy-scaled", {},
     lambda s, c: _set(s, "scaled_fp8",
                       torch.empty(0, dtype=torch.float8_e5m2)),
     r"(proj|out|head)\.weight: stored as float8_e4m3fn but the checkpoint's "
     r"format marker says float8_e5m2"),
    ("marker-not-fp8", "comfy-scaled", {},
     lambda s, c: _set(s, "scaled_fp8", torch.empty(0)),
     r"scaled_fp8: the scaled-fp8 marker's dtype names the weights' format; "
     r"F32 is not FP8"),
    ("scale-input-without-scale-weight", "comfy-scaled", {},
     lambda s, c: _set(s, "norm.scale_input", torch.ones(())),
     r"norm\.scale_input: an input scale without its weight scale"),
    ("comfy-quant-int8", "comfy-quant", {},
     lambda s, c: _set(s, "out.comfy_quant",
                       _json_tensor({"format": "int8_blockwise"})),
     r"out\.comfy_quant: format 'int8_blockwise'; fp8q loads float8_e4m3fn "
     r"and float8_e5m2 only"),
    ("comfy-quant-format-contradicts-weight", "comfy-quant", {},
     lambda s, c: _set(s, "out.comfy_quant",
                       _json_tensor({"format": "float8_e5m2"})),
     r"out\.weight: stored as float8_e4m3fn but the checkpoint's format "
     r"marker says float8_e5m2"),
    ("comfy-quant-not-json", "comfy-quant", {},
     lambda s, c: _set(s, "out.comfy_quant",
                       torch.tensor([255, 0], dtype=torch.uint8)),
     r"out\.comfy_quant: does not hold JSON"),
    ("comfy-quant-without-scale", "comfy-quant", {},
     lambda s, c: s.pop("out.weight_scale"),
     r"out\.weight_scale: missing \(out\.comfy_quant names an FP8 layer"),
    ("comfy-quant-nvfp4-scale", "comfy-quant", {},
     lambda s, c: _set(s, "out.weight_scale_2", torch.ones(())),
     r"out\.weight_scale_2: a second-level scale"),
    ("comfy-quant-scale-without-config", "comfy-quant", {},
     lambda s, c: s.pop("head.comfy_quant"),
     r"head\.weight_scale: a scale of a layer with no comfy_quant config"),
    ("quanto-data-without-scale", "quanto", {},
     lambda s, c: s.pop("out.weight._scale"),
     r"out\.weight\._scale: missing beside out\.weight\._data"),
    ("quanto-qint8", "quanto", {},
     lambda s, c: _set(s, "out.weight._data",
                       s["out.weight._data"].view(torch.int8)),
     r"out\.weight\._data: dtype I8, expected FP8"),
    ("quanto-map-qint4", "quanto", {},
     lambda s, c: c["quanto_qmap.json"]["out"].update(weights="qint4"),
     r"quantization map \['out'\]: weights 'qint4'"),
    ("quanto-map-without-layer", "quanto", {},
     lambda s, c: c["quanto_qmap.json"].pop("out"),
     r"out\.weight\._data: the quantization map has no entry 'out'"),
    ("quanto-map-contradicts-weight", "quanto", {},
     lambda s, c: c["quanto_qmap.json"]["out"].update(weights="qfloat8_e5m2"),
     r"out\.weight\._data: stored as float8_e4m3fn but the checkpoint's "
     r"format marker says float8_e5m2"),
    ("two-layouts", "finegrained", {},
     lambda s, c: _set(s, "head.scale_weight", torch.ones(())),
     r"\.weight_scale_inv: a finegrained-fp8 key in a checkpoint that also "
     r"has comfyui-scaled-fp8 keys \(head\.scale_weight\)"),
    ("float-checkpoint", "plain", {},
     lambda s, c: s.update({k: v.float() for k, v in s.items()}),
     r"no FP8 tensor and no FP8 layout's keys"),
    ("shape-differs-from-model", "comfy-scaled", {},
     lambda s, c: _set(s, "out.weight", s["out.weight"][:100]),
     r"out\.weight: shape \(100, 130\), but the model's out is a 130 -> 200"),
    ("float-shape-differs-from-model", "comfy-scaled", {},
     lambda s, c: _set(s, "norm.weight", torch.ones(5)),
     r"norm\.weight: shape \(5,\) in the checkpoint, \(130,\) in the model"),
    ("missing-float-key", "comfy-scaled", {},
     lambda s, c: s.pop("proj.bias"),
     r"load_checkpoint\(strict=True\): missing key\(s\): proj\.bias"),
    ("unexpected-layer", "comfy-scaled", {},
     lambda s, c: s.update({"ghost.weight": s["out.weight"].clone(),
                            "ghost.scale_weight": s["out.scale_weight"]
                            .clone()}),
     r"unexpected key\(s\): ghost\.weight, ghost\.scale_weight"),
    # Issue: malformed config JSON, each level checked and named.
    ("config-json-not-object", "compressed-tensors", {},
     lambda s, c: _set(c, "config.json", [1]),
     r"^config\.json is an array \[1\]; expected a JSON object$"),
    ("quantization-config-string", "compressed-tensors", {},
     lambda s, c: _set(c["config.json"], "quantization_config", "fp8"),
     r"^config\.json: quantization_config is a string \"fp8\"; expected"),
    ("config-groups-list", "compressed-tensors", {},
     lambda s, c: _config(c).update(config_groups=[1]),
     r"^config\.json: quantization_config\.config_groups is an array"),
    ("config-group-string", "compressed-tensors", {},
     lambda s, c: _config(c)["config_groups"].update(group_0="x"),
     r"^config\.json: quantization_config\.config_groups\.group_0 is a "
     r"string"),
    ("input-activations-true", "compressed-tensors", {},
     lambda s, c: _group(c).update(input_activations=True),
     r"^config\.json: quantization_config\.config_groups\.group_0\."
     r"input_activations is a boolean true; expected a JSON object"),
    ("strategy-list", "compressed-tensors", {},
     lambda s, c: _group(c)["weights"].update(strategy=["tensor"]),
     r"weights\.strategy \['tensor'\] is not tensor, channel or block"),
    ("block-structure-number", "compressed-tensors", {"granularity": "block"},
     lambda s, c: _group(c)["weights"].update(block_structure=128),
     r"weights\.block_structure 128; fp8q's block scales are 128x128"),
    ("modelopt-quantization-list", "modelopt", {},
     lambda s, c: _set(c["hf_quant_config.json"], "quantization", ["FP8"]),
     r"^hf_quant_config\.json: quantization is an array \[\"FP8\"\]; "),
    ("finegrained-block-size-number", "finegrained", {},
     lambda s, c: _config(c).update(weight_block_size=128),
     r"weight_block_size 128; fp8q's block scales are 128x128"),
    ("quanto-map-list", "quanto", {},
     lambda s, c: _set(c, "quanto_qmap.json", ["out"]),
     r"^quantization map is an array \[\"out\"\]; expected a JSON object"),
    ("quanto-map-entry-string", "quanto", {},
     lambda s, c: _set(c["quanto_qmap.json"], "out", "qfloat8"),
     r"^quantization map \['out'\] is a string \"qfloat8\"; expected"),
    ("quanto-map-weights-list", "quanto", {},
     lambda s, c: c["quanto_qmap.json"]["out"].update(weights=["qfloat8"]),
     r"quantization map \['out'\]: weights \['qfloat8'\]"),
    ("row-scaled-non-linear", "compressed-tensors", {},
     lambda s, c: s.update({"norm.weight": torch.ones(130, 1).to(
         torch.float8_e4m3fn), "norm.weight_scale": torch.ones(130, 1)}),
     r"norm\.weight: row scales or FP8 activations for norm, a LayerNorm"),
]


@pytest.mark.parametrize("corruption", CORRUPTIONS,
                         ids=[c[0] for c in CORRUPTIONS])
def test_refused_with_the_key_named(corruption, tmp_path):
    _, name, options, corrupt, pattern = corruption
    state, configs = layout(name, tiny(), **options)
    corrupt(state, configs)
    folder = save(str(tmp_path), state, configs)
    model = tiny(seed=1)
    before = {key: value.clone() for key, value in model.state_dict().items()}
    with pytest.raises(CheckpointError, match=pattern):
        fpt.load_checkpoint(model, folder)
    after = model.state_dict()
    assert set(after) == set(before)
    assert all(torch.equal(after[key], before[key]) for key in before)


def test_not_a_source():
    with pytest.raises(TypeError, match="source must be a path"):
        fpt.load_checkpoint(tiny(), 3)
    with pytest.raises(CheckpointError, match=re.escape("nowhere: no such")):
        fpt.load_checkpoint(tiny(), "nowhere")


def test_folder_without_shards_and_bad_index(tmp_path):
    with pytest.raises(CheckpointError, match="holds no .safetensors file"):
        fpt.load_checkpoint(tiny(), str(tmp_path))
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "gone.safetensors"}}))
    with pytest.raises(CheckpointError, match="names gone.safetensors"):
        fpt.load_checkpoint(tiny(), str(tmp_path))


@pytest.mark.parametrize("layers, kind", [
    ([], "an array []"), (None, "null"), ("a", 'a string "a"')], ids=str)
def test_comfy_quant_metadata_layers_not_an_object(layers, kind, tmp_path):
    from safetensors.torch import save_file

    state, _ = layout("comfy-quant", tiny())
    path = str(tmp_path / "model.safetensors")
    save_file(state, path, metadata={"_quantization_metadata": json.dumps(
        {"format_version": "1.0", "layers": layers})})
    _refused_unchanged(path, "^" + re.escape(
        f"metadata _quantization_metadata: layers is {kind}; expected a "
        "JSON object") + "$")


def test_index_weight_map_values_not_file_names(tmp_path):
    state, _ = layout("comfy-scaled", tiny())
    save(str(tmp_path), state)
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"out.weight": 5}}))
    _refused_unchanged(str(tmp_path), re.escape(
        f"{index}: weight_map['out.weight'] is not a file name (5)"))
    index.write_text("[]")
    _refused_unchanged(str(tmp_path), re.escape(
        f"{index} is an array []; expected a JSON object"))


# Issue 40, item 4: scales and codes whose values no layer can hold. The
# key of each layout's weight scale for layer "out".
SCALE_KEYS = {"compressed-tensors": "out.weight_scale",
              "modelopt": "out.weight_scale",
              "finegrained": "out.weight_scale_inv",
              "comfy-scaled": "out.scale_weight",
              "comfy-quant": "out.weight_scale",
              "quanto": "out.weight._scale"}
WEIGHT_KEYS = {"quanto": "out.weight._data"}
BAD_SCALES = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, -0.5]
VALUE_CASES = [(name, options) for name, options in (
    ("compressed-tensors", {"granularity": "row"}),
    ("compressed-tensors", {"granularity": "tensor", "static": True}),
    ("compressed-tensors", {"granularity": "block"}),
    ("modelopt", {}), ("finegrained", {}), ("comfy-scaled", {}),
    ("comfy-quant", {"fmt": "e5m2"}), ("quanto", {}))]


def _poison(tensor, position, value):
    """A copy of `tensor` with its element number `position` (C order)
    set to `value`."""
    poisoned = tensor.clone()
    poisoned.reshape(-1)[position] = value
    return poisoned


def _codes_with(codes, position, code):
    """A copy of the FP8 `codes` with the byte at `position` (C order)
    set to `code`."""
    return _poison(codes.view(torch.uint8), position, code).view(codes.dtype)


def _refused_unchanged(source, pattern, build=lambda: tiny(seed=1)):
    """load_checkpoint(build(), source) raises a CheckpointError matching
    `pattern`, and the model is as it was: no layer replaced, every tensor
    equal."""
    model = build()
    before = {key: value.clone() for key, value in model.state_dict().items()}
    with pytest.raises(CheckpointError, match=pattern):
        fpt.load_checkpoint(model, source)
    assert not any(isinstance(module, fpt.Linear)
                   for module in model.modules())
    after = model.state_dict()
    assert set(after) == set(before)
    assert all(torch.equal(after[key], before[key]) for key in before)


@pytest.mark.parametrize("bad", BAD_SCALES, ids=str)
@pytest.mark.parametrize("name, options", VALUE_CASES,
                         ids=[f"{n}-{'-'.join(map(str, o.values()))}"
                              for n, o in VALUE_CASES])
def test_scale_values_refused_naming_key_and_layer(name, options, bad,
                                                   tmp_path, seed):
    state, configs = layout(name, tiny(), **options)
    key = SCALE_KEYS[name]
    torch.manual_seed(seed % (2 ** 31))
    position = int(torch.randint(state[key].numel(), ()))
    state[key] = _poison(state[key], position, bad)
    folder = save(str(tmp_path), state, configs)
    _refused_unchanged(folder, rf"^{re.escape(key)} \(layer 'out'\): 1 of "
                               rf"its {state[key].numel()} values are not "
                               r"finite and > 0.*the first, element "
                               rf"{position} in C order, is {bad}\. Nothing "
                               "was loaded: the model is unchanged")


def _non_finite(dtype):
    """The codes (0..255) whose value in `dtype` is NaN or infinite, by
    torch's own decoding: the oracle for what the loader refuses."""
    values = torch.arange(256, dtype=torch.uint8).view(dtype).float()
    return [code for code in range(256)
            if not bool(torch.isfinite(values[code]))]


def test_the_non_finite_codes_are_the_documented_ones():
    assert _non_finite(torch.float8_e4m3fn) == [0x7F, 0xFF]
    assert _non_finite(torch.float8_e5m2) == [*range(0x7C, 0x80),
                                               *range(0xFC, 0x100)]


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_every_non_finite_code_is_refused_and_no_other(fmt):
    """All 256 codes, one at a time, in layer 'out' of a state dict: the
    load fails exactly for the codes torch decodes to NaN or infinity."""
    dtype = FP8[fmt]
    state, _ = layout("comfy-scaled", tiny(), fmt=fmt)
    codes = state["out.weight"]
    bad = set(_non_finite(dtype))
    for code in range(256):
        trial = dict(state)
        trial["out.weight"] = _codes_with(codes, 137 * code % codes.numel(),
                                          code)
        if code in bad:
            _refused_unchanged(trial, r"^out\.weight \(layer 'out'\): 1 of "
                                      r"its 26000 float8_e\w+ codes are NaN")
        else:
            fpt.load_checkpoint(tiny(seed=1), trial)


@pytest.mark.parametrize("name, options", [
    ("compressed-tensors", {}), ("quanto", {}), ("plain", {"fmt": "e5m2"}),
    ("comfy-quant", {})])
def test_nan_codes_refused_naming_key_and_layer(name, options, tmp_path,
                                                seed):
    state, configs = layout(name, tiny(), **options)
    key = WEIGHT_KEYS.get(name, "out.weight")
    torch.manual_seed(seed % (2 ** 31))
    positions = sorted(torch.randperm(state[key].numel())[:3].tolist())
    codes = state[key]
    if name == "comfy-quant":  # the codes stored as bytes (U8)
        codes = codes.view(torch.uint8)
    for position in positions:
        codes = _poison(codes, position, 0xFF) if codes.dtype == torch.uint8 \
            else _codes_with(codes, position, 0xFF)
    state[key] = codes
    folder = save(str(tmp_path), state, configs)
    first = [positions[0] // 130, positions[0] % 130]
    _refused_unchanged(folder, rf"^{re.escape(key)} \(layer 'out'\): 3 of "
                               r"its 26000 float8_e\w+ codes are NaN.*the "
                               rf"first at index {re.escape(str(first))}")


def _tiny_with_embedding():
    model = tiny(seed=1)
    model.emb = torch.nn.Embedding(6, 4)
    return model


def test_a_dequantized_weight_is_checked_too():
    """FP8 weights of other modules, dequantized into their float
    weights, are checked as the linear layers' are."""
    state, _ = layout("comfy-scaled", tiny())
    state["emb.weight"] = torch.ones(6, 4).to(torch.float8_e4m3fn)
    state["emb.scale_weight"] = torch.tensor(-1.0)
    _refused_unchanged(state, r"^emb\.scale_weight \(layer 'emb'\): 1 of "
                              r"its 1 values are not finite and > 0",
                       _tiny_with_embedding)
    state["emb.scale_weight"] = torch.tensor(1.0)
    state["emb.weight"] = _codes_with(state["emb.weight"], 5, 0x7F)
    _refused_unchanged(state, r"^emb\.weight \(layer 'emb'\): 1 of its "
                              r"24 float8_e4m3fn codes are NaN",
                       _tiny_with_embedding)


@pytest.mark.parametrize("strict", [True, False])
def test_float_weight_for_an_fp8q_layer_refused_before_any_change(strict):
    """A float lm_head.weight aimed at a model quantized before loading
    (its lm_head an fp8q.torch.Linear): refused naming the key and the
    layer, with strict=False too, before proj is replaced."""
    torch.manual_seed(0)
    model = fpt.quantize(torch.nn.Sequential(collections.OrderedDict(
        proj=torch.nn.Linear(16, 16), lm_head=torch.nn.Linear(16, 8))))
    state = {"proj.weight": torch.randn(16, 16).to(torch.float8_e5m2),
             "proj.weight_scale": torch.tensor(0.5),
             "proj.bias": torch.zeros(16),
             "lm_head.weight": torch.randn(8, 16),
             "lm_head.bias": torch.zeros(8)}
    modules = dict(model.named_modules())
    before = {key: value.clone() for key, value in model.state_dict().items()}
    with pytest.raises(CheckpointError, match=r"^lm_head\.weight: a float "
                       r"tensor \(F32\) for lm_head, an fp8q\.torch\.Linear "
                       r"holding float8_e4m3fn codes.*the model is "
                       r"unchanged$"):
        fpt.load_checkpoint(model, state, strict=strict)
    assert dict(model.named_modules()) == modules
    after = model.state_dict()
    assert set(after) == set(before)
    assert all(after[key].dtype == before[key].dtype
               and torch.equal(_bits(after[key]), _bits(before[key]))
               for key in before)


def test_float_weight_loads_into_an_unfrozen_quanto_layer():
    """An unfrozen quanto_compat QLinear holds a float weight: a float
    weight of the checkpoint loads into it (not refused as if it held
    codes), beside an FP8 layer loaded into the other module."""
    from fp8q.torch import quanto_compat
    torch.manual_seed(1)
    state = {"proj.weight": torch.randn(16, 16).to(torch.float8_e4m3fn),
             "proj.weight_scale": torch.tensor(0.5),
             "lm_head.weight": torch.randn(8, 16)}
    model = torch.nn.Sequential(collections.OrderedDict(
        proj=torch.nn.Linear(16, 16, bias=False),
        lm_head=torch.nn.Linear(16, 8, bias=False)))
    quanto_compat.quantize(model, weights=quanto_compat.qfloat8)
    # strict=False: the QLinear's input / output scales are not in it.
    fpt.load_checkpoint(model, state, strict=False)
    assert isinstance(model.lm_head, quanto_compat.QLinear)
    assert not model.lm_head.frozen
    assert torch.equal(model.lm_head.weight, state["lm_head.weight"])
    assert torch.equal(_bits(model.proj.weight), _bits(state["proj.weight"]))


def _bits(tensor):
    """FP8 tensors as their bytes (torch.equal compares no FP8)."""
    return tensor.view(torch.uint8) if tensor.element_size() == 1 else tensor
