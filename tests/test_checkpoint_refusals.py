"""Every refusal of fp8q.torch.load_checkpoint, on corrupted variants of
synthesized checkpoints: the error names the key (or config field) and the
problem, and the model is left as it was."""
import json
import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

import fp8q.torch as fpt  # noqa: E402
from checkpoint_layouts import layout, save, tiny  # noqa: E402
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
