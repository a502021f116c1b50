"""save_pretrained / from_pretrained of a diffusers model that fp8q
quantized: fp8q registers the quantization method "fp8q" with diffusers'
quantizers, so save_pretrained writes a quantization_config and
from_pretrained rebuilds fp8q.torch.Linear layers and loads the FP8 codes
and scales as saved (before, diffusers loaded the codes into plain
nn.Linear layers as numbers: max |w| = 448, output garbage, only a
"weights not used: ...weight_scale" warning). The oracle is the quantized
model itself: the reloaded one has the same layers, codes, scales and
outputs, bit for bit (with torch_dtype=torch.bfloat16: the quantized
model converted by .to(torch.bfloat16)). A tiny UNet2DConditionModel built
from its config on the CPU (random weights, no download)."""
import copy
import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
diffusers = pytest.importorskip(
    "diffusers", reason="diffusers is not installed (pip install diffusers)")
pytest.importorskip("safetensors", reason="safetensors is not installed")

import fp8q.torch as fpt  # noqa: E402
from torch_layers import assert_same_layers, fp8_layers  # noqa: E402

UNET = dict(block_out_channels=(32, 64), layers_per_block=1, sample_size=8,
            in_channels=4, out_channels=4,
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
            cross_attention_dim=32, norm_num_groups=8, attention_head_dim=8)


def unet(seed):
    torch.manual_seed(seed % (2 ** 31))
    return diffusers.UNet2DConditionModel(**UNET).eval()


def inputs(seed, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed % (2 ** 31))
    return (torch.randn(2, 4, 8, 8, generator=generator).to(dtype),
            torch.tensor([10, 500]),
            torch.randn(2, 7, 32, generator=generator).to(dtype))


def run(model, seed, dtype=torch.float32):
    with torch.no_grad():
        return model(*inputs(seed, dtype)).sample


def saved_config(folder):
    with open(folder / "config.json") as file:
        return json.load(file)["quantization_config"]


SETTINGS = [dict(), dict(activations="e4m3", static=True),
            dict(activations="e4m3", granularity="block"),
            dict(weights="e5m2", granularity="tensor")]


@pytest.mark.parametrize("settings", SETTINGS,
                         ids=["w8a16", "w8a8-static", "w8a8-block",
                              "e5m2-tensor"])
def test_save_pretrained_reloads_fp8_layers_bit_for_bit(seed, tmp_path,
                                                        settings):
    settings = dict(settings)
    static = settings.pop("static", False)
    model = fpt.quantize(unet(seed), **settings)
    if static:
        with fpt.calibrate(model), torch.no_grad():
            run(model, seed + 1)
        fpt.freeze(model)
    expected = run(model, seed)
    model.save_pretrained(tmp_path)
    config = saved_config(tmp_path)
    assert config["quant_method"] == "fp8q"
    assert config["weights"] == settings.get("weights", "e4m3")
    assert config["granularity"] == settings.get("granularity", "row")
    assert config["activations"] == settings.get("activations")
    assert config["modules_to_not_convert"] is None

    reloaded = diffusers.UNet2DConditionModel.from_pretrained(tmp_path)
    assert_same_layers(reloaded, model)
    assert len(fp8_layers(reloaded)) == 50
    assert torch.equal(run(reloaded, seed), expected)

    # torch_dtype converts the float parts only: the codes and float32
    # scales load as saved, as model.to(torch.bfloat16) keeps them.
    reloaded = diffusers.UNet2DConditionModel.from_pretrained(
        tmp_path, torch_dtype=torch.bfloat16)
    converted = copy.deepcopy(model).to(torch.bfloat16)
    assert_same_layers(reloaded, converted)
    assert reloaded.dtype == torch.bfloat16
    assert torch.equal(run(reloaded, seed, torch.bfloat16),
                       run(converted, seed, torch.bfloat16))


def test_excluded_layers_are_saved_as_float(seed, tmp_path):
    model = fpt.quantize(unet(seed), exclude=["*attn2*", "time_embedding*"])
    expected = run(model, seed)
    model.save_pretrained(tmp_path)
    skipped = saved_config(tmp_path)["modules_to_not_convert"]
    assert skipped and all("attn2" in name or "time_embedding" in name
                           for name in skipped)
    reloaded = diffusers.UNet2DConditionModel.from_pretrained(tmp_path)
    assert_same_layers(reloaded, model)
    for name in skipped:
        assert type(reloaded.get_submodule(name)) is torch.nn.Linear
    assert torch.equal(run(reloaded, seed), expected)


def test_float_folder_with_quantization_config_is_quantized(seed, tmp_path):
    Fp8qDiffusersConfig = fpt.Fp8qDiffusersConfig
    float_model = unet(seed)
    float_model.save_pretrained(tmp_path / "float")
    loaded = diffusers.UNet2DConditionModel.from_pretrained(
        tmp_path / "float",
        quantization_config=Fp8qDiffusersConfig(activations="e4m3"))
    by_hand = fpt.quantize(copy.deepcopy(float_model), activations="e4m3")
    assert_same_layers(loaded, by_hand)
    assert torch.equal(run(loaded, seed), run(by_hand, seed))
    loaded.save_pretrained(tmp_path / "fp8")
    reloaded = diffusers.UNet2DConditionModel.from_pretrained(tmp_path / "fp8")
    assert_same_layers(reloaded, by_hand)


def test_mixed_settings_are_refused_before_writing(seed, tmp_path):
    model = fpt.quantize(unet(seed), include=["*attn1*"])
    fpt.quantize(model, include=["*attn2*"], weights="e5m2")
    with pytest.raises(ValueError, match="different settings"):
        model.save_pretrained(tmp_path / "out")
    assert not (tmp_path / "out").exists()


IMPORTS = {"fp8q-first": "import fp8q.torch as fpt\n"
                         "from diffusers import UNet2DConditionModel\n",
           "diffusers-first": "from diffusers import UNet2DConditionModel\n"
                              "import fp8q.torch as fpt\n"}


@pytest.mark.parametrize("order", IMPORTS)
def test_reload_in_a_fresh_process_whatever_the_import_order(seed, tmp_path,
                                                             order):
    model = fpt.quantize(unet(seed))
    model.save_pretrained(tmp_path)
    torch.save(run(model, seed), tmp_path / "expected.pt")
    script = (
        "import sys, torch\n" + IMPORTS[order] +
        "sys.path.insert(0, sys.argv[2])\n"
        "from test_torch_diffusers_save import run\n"
        "model = UNet2DConditionModel.from_pretrained(sys.argv[1])\n"
        "assert isinstance(model.conv_in, torch.nn.Conv2d)\n"
        "assert sum(isinstance(m, fpt.Linear) for m in model.modules()) "
        "== 50\n"
        "expected = torch.load(sys.argv[1] + '/expected.pt')\n"
        f"assert torch.equal(run(model, {seed}), expected)\n")
    subprocess.run([sys.executable, "-c", script, str(tmp_path),
                    str(__import__("pathlib").Path(__file__).parent)],
                   check=True)


def test_float_model_built_from_a_quantized_config_is_refused_at_load(
        seed, tmp_path):
    # from_config(quantized.config) (EMA copies, training scripts) copies
    # its quantization_config into a float model, whose save_pretrained
    # writes it: the reload built fp8q layers, cast the float weights to
    # FP8 and left the scales on the meta device (forward failed later).
    quantized = fpt.quantize(unet(seed))
    float_copy = diffusers.UNet2DConditionModel.from_config(quantized.config)
    float_copy.save_pretrained(tmp_path)
    assert saved_config(tmp_path)["quant_method"] == "fp8q"
    with pytest.raises(ValueError, match="its weights are float.*"
                       "Remove quantization_config from its config.json"):
        diffusers.UNet2DConditionModel.from_pretrained(tmp_path)
    # The fix the message names: the folder loads as the float model.
    config = json.loads((tmp_path / "config.json").read_text())
    del config["quantization_config"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    reloaded = diffusers.UNet2DConditionModel.from_pretrained(tmp_path)
    assert not fp8_layers(reloaded)
    assert torch.equal(run(reloaded, seed), run(float_copy, seed))


@pytest.mark.parametrize("saved,edited", [
    (dict(weights="e5m2"), dict(weights="e4m3")),
    (dict(weights="e4m3"), dict(weights="e5m2")),
    (dict(granularity="row"), dict(granularity="tensor")),
], ids=["e5m2-as-e4m3", "e4m3-as-e5m2", "row-as-tensor"])
def test_checkpoint_not_matching_its_config_is_refused(seed, tmp_path, saved,
                                                       edited):
    # diffusers converts each tensor to the rebuilt layer's dtype before
    # any quantizer hook sees it: e5m2 codes under an e4m3 config loaded
    # clipped to 448 (25% off), no error. The safetensors headers are
    # checked before loading.
    fpt.quantize(unet(seed), **saved).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["quantization_config"].update(edited)
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError,
                       match="does not match its quantization_config"):
        diffusers.UNet2DConditionModel.from_pretrained(tmp_path)


def test_quantizer_is_trainable_as_transformers_says(seed):
    model = fpt.quantize(unet(seed))
    assert model.hf_quantizer.is_trainable is True


def test_torch_dtype_keeps_modules_covered_by_dotted_names(seed):
    # _keep_in_fp32_modules matched only single name parts; fp8q's rule
    # (_module_names.covered) takes whole dotted parts ("time_embedding.
    # linear_1"), as modules_to_not_convert does.
    from fp8q.torch._diffusers import _convert
    model = unet(seed)
    _convert(model, torch.bfloat16, ["time_embedding.linear_1", "conv_in"])
    assert model.time_embedding.linear_1.weight.dtype == torch.float32
    assert model.conv_in.weight.dtype == torch.float32
    assert model.time_embedding.linear_2.weight.dtype == torch.bfloat16
    assert model.conv_out.weight.dtype == torch.bfloat16
