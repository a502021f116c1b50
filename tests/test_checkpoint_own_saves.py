"""fp8q reads what fp8q writes (issue 40, item 3): a folder written by
save_pretrained of a model loaded with Fp8qConfig (config.json's
quant_method "fp8q") loads with fp8q.torch.load_checkpoint and is read by
`python -m fp8q inspect`, the scheme (activations, granularity) taken from
the config; its safetensors file alone is read with the same scheme from
the fp8q quantization_config in its metadata. The oracle is the saved
model: same layers, codes, scales and logits, bit for bit."""
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
from fp8q._checkpoint import CheckpointError, open_checkpoint  # noqa: E402
from fp8q._checkpoint import plan_checkpoint  # noqa: E402
from test_torch_transformers_save import (assert_same_layers,  # noqa: E402
                                          llama, logits)

CASES = {
    "W8A8-dynamic-row": (dict(activations="e4m3"), False,
                         ("row", "W8A8 dynamic")),
    "W8A8-static-row": (dict(activations="e4m3"), True,
                        ("row", "W8A8 static")),
    "W8A8-dynamic-block": (dict(activations="e4m3", granularity="block"),
                           False, ("block", "W8A8 dynamic")),
    "W8A16-e5m2-tensor": (dict(weights="e5m2", granularity="tensor"), False,
                          ("tensor", "W8A16")),
}


def saved_fp8q_model(folder, seed, settings, static):
    """A float Llama saved, loaded with Fp8qConfig(**settings) (frozen
    static input scales if `static`), saved again into folder / "fp8"."""
    llama(seed).save_pretrained(folder / "float")
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder / "float", quantization_config=fpt.Fp8qConfig(**settings))
    if static:
        with fpt.calibrate(model), torch.no_grad():
            model(input_ids=torch.tensor([[5, 3, 5, 8, 9]]), use_cache=False)
        fpt.freeze(model)
    model.save_pretrained(folder / "fp8")
    return model


def inspect(path):
    return subprocess.run([sys.executable, "-m", "fp8q", "inspect",
                           str(path)], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("case", list(CASES))
def test_load_checkpoint_and_inspect_read_fp8q_saves(case, tmp_path, seed):
    settings, static, (granularity, scheme) = CASES[case]
    saved = saved_fp8q_model(tmp_path, seed, settings, static)
    fmt = ("float8_e5m2" if settings.get("weights") == "e5m2"
           else "float8_e4m3fn")

    model = llama(seed + 1)  # other float weights, all replaced
    report = fpt.load_checkpoint(model, tmp_path / "fp8")
    assert report.layout == "compressed-tensors"
    assert report.counts() == {(fmt, granularity, scheme): 14}
    assert report.float_linear_layers == ["lm_head"]
    assert_same_layers(model, saved)
    assert torch.equal(logits(model), logits(saved))

    folder = inspect(tmp_path / "fp8")
    assert folder.returncode == 0, folder.stderr
    assert ("note: scheme from the fp8q quantization_config (config.json)"
            in folder.stdout)
    assert f"  14 x {fmt}, {granularity} scales, {scheme}" in folder.stdout
    row = (f"| model.layers.0.mlp.down_proj | 128x256 | {fmt} | "
           f"{granularity} | {scheme} |")
    assert row in folder.stdout

    alone = inspect(tmp_path / "fp8" / "model.safetensors")
    assert alone.returncode == 0, alone.stderr
    assert ("note: scheme from the fp8q quantization_config (safetensors "
            "metadata)" in alone.stdout)
    assert row in alone.stdout


def write(path, metadata):
    from safetensors.torch import save_file
    codes = torch.zeros(4, 8, dtype=torch.float8_e4m3fn)
    save_file({"proj.weight": codes, "proj.weight_scale": torch.ones(4, 1)},
              str(path), metadata=metadata)
    return path


@pytest.mark.parametrize("config, problem", [
    ({"quant_method": "fp8q", "granularity": "channel"},
     "granularity 'channel' is not row, tensor or block"),
    ({"quant_method": "fp8q", "activations": "e5m2"},
     "activations 'e5m2' is not null or \"e4m3\""),
])
def test_fp8q_config_fields_are_checked(tmp_path, config, problem):
    path = write(tmp_path / "model.safetensors",
                 {"fp8q_quantization_config": json.dumps(config)})
    with open_checkpoint(path) as checkpoint:
        with pytest.raises(CheckpointError, match="safetensors metadata: ") \
                as error:
            plan_checkpoint(checkpoint)
    assert problem in str(error.value)
    (tmp_path / "config.json").write_text(json.dumps(
        {"quantization_config": config}))
    with open_checkpoint(tmp_path) as checkpoint:
        with pytest.raises(CheckpointError, match="config.json: "):
            plan_checkpoint(checkpoint)


def test_metadata_that_is_not_an_fp8q_config_is_refused(tmp_path):
    path = write(tmp_path / "model.safetensors",
                 {"fp8q_quantization_config": "{not json"})
    with open_checkpoint(path) as checkpoint:
        with pytest.raises(CheckpointError,
                           match="fp8q_quantization_config: not an fp8q"):
            plan_checkpoint(checkpoint)
