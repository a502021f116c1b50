"""`python -m fp8q inspect` on every layout and on refused checkpoints, and
`python -m fp8q convert` re-laying ComfyUI, plain FP8 and optimum-quanto
checkpoints into the vLLM / compressed-tensors layout with the codes
untouched."""
import ast
import pathlib
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

import fp8q.torch as fpt  # noqa: E402
from checkpoint_layouts import (FP8, LINEARS, check_layers,  # noqa: E402
                                layout, save, tiny)
from fp8q._safetensors import SafetensorsReader  # noqa: E402


def run(*arguments):
    return subprocess.run([sys.executable, "-m", "fp8q", *map(str, arguments)],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name, options, expected, line", [
    ("compressed-tensors", {"static": True}, "compressed-tensors",
     "| out | 200x130 | float8_e4m3fn | row | W8A8 static |"),
    ("finegrained", {}, "finegrained-fp8",
     "| out | 200x130 | float8_e4m3fn | block | W8A8 dynamic |"),
    ("comfy-scaled", {"fmt": "e5m2"}, "comfyui-scaled-fp8",
     "| out | 200x130 | float8_e5m2 | tensor | W8A16 |"),
    ("comfy-quant", {"static": True}, "comfyui-quant",
     "| out | 200x130 | float8_e4m3fn | tensor | W8A8 static |"),
    ("plain", {}, "plain-fp8", "| out | 200x130 | float8_e4m3fn | tensor | "
     "W8A16 |"),
    ("quanto", {}, "optimum-quanto",
     "| out | 200x130 | float8_e4m3fn | row | W8A16 |"),
])
def test_inspect_every_layout(tmp_path, name, options, expected, line):
    state, configs = layout(name, tiny(), **options)
    result = run("inspect", save(str(tmp_path), state, configs))
    assert result.returncode == 0, result.stderr
    assert f"layout {expected} (" in result.stdout
    assert line in result.stdout
    assert "| FP8 weight | F8_E" in result.stdout
    assert "| float | F32 | 4 | 1,596 |" in result.stdout


@pytest.mark.parametrize("name, corrupt, message", [
    ("comfy-scaled", lambda s: s.pop("out.weight"), "out.weight: missing"),
    ("plain", lambda s: s.update({k: v.float() for k, v in s.items()}),
     "no FP8 tensor"),
])
def test_inspect_refusal_is_one_line_exit_2(tmp_path, name, corrupt, message):
    state, _ = layout(name, tiny())
    corrupt(state)
    result = run("inspect", save(str(tmp_path), state) + "/model.safetensors")
    assert result.returncode == 2
    assert result.stderr.startswith("fp8q inspect: error: ")
    assert message in result.stderr and result.stderr.count("\n") == 1
    missing = run("inspect", tmp_path / "nothing.safetensors")
    assert missing.returncode == 2 and "no such file" in missing.stderr


@pytest.mark.parametrize("name, options", [
    ("comfy-scaled", {"static": True}), ("comfy-scaled", {"fmt": "e5m2"}),
    ("comfy-quant", {"static": True}), ("plain", {}), ("quanto", {})])
def test_convert_relays_into_the_vllm_layout(tmp_path, name, options):
    state, _ = layout(name, tiny(), **options)
    source = save(str(tmp_path / "in"), state) + "/model.safetensors"
    output = tmp_path / "out.safetensors"
    result = run("convert", source, output, "--format", "vllm")
    assert result.returncode == 0, result.stderr
    reader = SafetensorsReader(output)
    try:
        for layer in LINEARS:
            codes = state.get(layer + ".weight",
                              state.get(layer + ".weight._data"))
            assert reader.entries[layer + ".weight"][0] == (
                "F8_E5M2" if options.get("fmt") == "e5m2" else "F8_E4M3")
            assert bytes(reader.tensor(layer + ".weight")) == bytes(
                codes.view(torch.uint8).numpy())
            assert reader.entries[layer + ".weight_scale"][0] == "F32"
            assert (layer + ".input_scale" in reader.entries) == \
                options.get("static", False)
        assert not any(key.endswith((".scale_weight", "scaled_fp8",
                                     ".comfy_quant", "._data", "._scale",
                                     ".output_scale"))
                       for key in reader.entries)
        assert reader.metadata["fp8q_source_layout"]
    finally:
        reader.close()
    model = tiny(seed=1)
    report = fpt.load_checkpoint(model, str(output))
    assert report.layout == "compressed-tensors"
    direct = tiny(seed=2)
    fpt.load_checkpoint(direct, state)
    x = torch.randn(3, 40)
    assert torch.equal(check_layers(model, x), check_layers(direct, x))


def test_convert_refuses_an_inconsistent_fp8_checkpoint(tmp_path):
    state, _ = layout("comfy-scaled", tiny())
    state["scaled_fp8"] = torch.empty(0, dtype=torch.float8_e5m2)
    source = save(str(tmp_path / "in"), state) + "/model.safetensors"
    output = tmp_path / "out.safetensors"
    result = run("convert", source, output)
    assert result.returncode == 2
    assert "marker says float8_e5m2" in result.stderr
    assert not output.exists()


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_convert_writes_unscaled_fp8_tensors_as_exact_float16(tmp_path,
                                                              fmt):
    """A plain-FP8 checkpoint whose norm and biases are FP8 too: they are
    written as F16 holding their exact values (the output's layout has no
    FP8 tensor without a scale), so inspect and load_checkpoint read the
    output, and it loads as the input does."""
    state, _ = layout("plain", tiny(), fmt=fmt)
    unscaled = ("norm.weight", "norm.bias", "proj.bias", "head.bias")
    for key in unscaled:
        state[key] = state[key].to(FP8[fmt])
    source = save(str(tmp_path / "in"), state) + "/model.safetensors"
    output = tmp_path / "out.safetensors"
    result = run("convert", source, output)
    assert result.returncode == 0, result.stderr
    assert ("note: 4 FP8 tensors without a scale that no layer holds "
            "(head.bias, norm.bias, norm.weight, ...) are written as F16"
            in result.stdout)
    reader = SafetensorsReader(output)
    try:
        for key in unscaled:
            assert reader.entries[key] == ("F16", tuple(state[key].shape))
            assert np.array_equal(reader.tensor(key),
                                  state[key].to(torch.float16).numpy())
    finally:
        reader.close()
    assert run("inspect", output).returncode == 0
    model, direct = tiny(seed=1), tiny(seed=2)
    fpt.load_checkpoint(model, str(output))
    fpt.load_checkpoint(direct, state)
    x = torch.randn(3, 40)
    assert torch.equal(check_layers(model, x), check_layers(direct, x))


@pytest.mark.parametrize("name, arguments, suffix", [
    ("compressed-tensors", ("--format", "vllm"), ".weight_scale"),
    ("compressed-tensors", ("--format", "fp8q"), ".weight_scale"),
    ("finegrained", ("--format", "fp8q"), ".weight_scale_inv"),
    ("finegrained", ("--format", "vllm"), ".weight_scale_inv")])
def test_quantize_float_block_scales_take_the_input_scale_names(
        tmp_path, name, arguments, suffix):
    """--quantize-float --granularity block names the new scales as the FP8
    input's are, whatever --format: one layout, which fp8q reads back."""
    state, _ = layout(name, tiny(), granularity="block")
    state["head.weight"] = tiny().head.weight.detach().clone()
    del state["head" + suffix]
    source = save(str(tmp_path / "in"), state) + "/model.safetensors"
    output = tmp_path / "out.safetensors"
    result = run("convert", source, output, "--quantize-float",
                 "--granularity", "block", *arguments)
    assert result.returncode == 0, result.stderr
    reader = SafetensorsReader(output)
    try:
        assert sorted(key for key in reader.entries if "scale" in key) == [
            layer + suffix for layer in ("head", "out", "proj")]
    finally:
        reader.close()
    assert run("inspect", output).returncode == 0
    model = tiny(seed=1)
    report = fpt.load_checkpoint(model, str(output))
    assert sorted(report.fp8_layers) == ["head", "out", "proj"]
    assert model.head.granularity == "block"


@pytest.mark.parametrize("granularity", ["row", "tensor"])
def test_quantize_float_refuses_non_block_scales_in_a_finegrained_file(
        tmp_path, granularity):
    state, _ = layout("finegrained", tiny())
    state["head.weight"] = tiny().head.weight.detach().clone()
    del state["head.weight_scale_inv"]
    source = save(str(tmp_path / "in"), state) + "/model.safetensors"
    output = tmp_path / "out.safetensors"
    result = run("convert", source, output, "--quantize-float",
                 "--granularity", granularity)
    assert result.returncode == 2
    assert result.stderr == (
        f"fp8q convert: error: --granularity {granularity}: {source} is a "
        "FineGrainedFP8 checkpoint (*.weight_scale_inv), whose layout holds "
        "128x128 block scales only; --quantize-float its float tensors with "
        "--granularity block\n")
    assert not output.exists()
    assert run("convert", source, output).returncode == 0  # nothing quantized


def _comfy_with_float_head(folder):
    """A ComfyUI scaled-fp8 file of the tiny model whose head (a linear
    layer) and a 2-D embed.weight are kept in float: the path."""
    state, _ = layout("comfy-scaled", tiny())
    state["head.weight"] = tiny().head.weight.detach().clone()
    del state["head.scale_weight"]
    state["embed.weight"] = torch.randn(6, 40)
    return save(str(folder), state) + "/model.safetensors"


@pytest.mark.parametrize("arguments, converted", [
    ((), ()),
    (("--quantize-float",), ("head.weight",)),
    (("--quantize-float", "--granularity", "block", "--format", "vllm"),
     ("head.weight",)),
    (("--quantize-float", "--all-2d", "--granularity", "tensor"),
     ("head.weight", "embed.weight")),
    (("--quantize-float", "--exclude", "head.*"), ())])
def test_convert_flags_apply_to_a_relaid_checkpoint(tmp_path, arguments,
                                                     converted):
    """The float tensors of a re-laid layout convert as a compressed-tensors
    input's do: kept unless --quantize-float, then by --granularity,
    --all-2d and --exclude; the scales named NAME_scale (one layout)."""
    source = _comfy_with_float_head(tmp_path / "in")
    output = tmp_path / "out.safetensors"
    result = run("convert", source, output, *arguments)
    assert result.returncode == 0, result.stderr
    granularity = (arguments[arguments.index("--granularity") + 1]
                   if "--granularity" in arguments else "row")
    scale_shapes = {"row": (9, 1), "tensor": (), "block": (1, 2)}
    reader = SafetensorsReader(output)
    try:
        for key in ("head.weight", "embed.weight"):
            assert reader.entries[key][0] == (
                "F8_E4M3" if key in converted else "F32"), key
        assert "head.weight_scale_inv" not in reader.entries
        assert (reader.entries.get("head.weight_scale")
                == (("F32", scale_shapes[granularity])
                    if "head.weight" in converted else None))
        assert reader.metadata["fp8q_source_layout"] == "comfyui-scaled-fp8"
    finally:
        reader.close()
    if "embed.weight" in converted:
        return  # embed_scale: a tensor no model here holds
    assert run("inspect", output).returncode == 0
    model = tiny(seed=1)
    model.embed = torch.nn.Linear(40, 6, bias=False)  # holds embed.weight
    report = fpt.load_checkpoint(model, str(output))
    assert ("head" in report.fp8_layers) == ("head.weight" in converted)
    if "head.weight" in converted:
        assert model.head.granularity == granularity


def test_convert_refuses_an_unused_exclude_on_a_relaid_checkpoint(
        tmp_path):
    source = _comfy_with_float_head(tmp_path / "in")
    output = tmp_path / "out.safetensors"
    result = run("convert", source, output, "--quantize-float", "--exclude",
                 "no-such-*")
    assert result.returncode == 2
    assert result.stderr.startswith(
        "fp8q convert: error: --exclude 'no-such-*': matches no tensor of "
        f"{source} ")
    assert not output.exists()


# A fresh interpreter where `import torch` raises ImportError (as on a
# machine without torch): it imports every module of fp8q._checkpoint, then
# runs one command of `python -m fp8q`.
WITHOUT_TORCH = (
    "import importlib, pkgutil, sys\n"
    "sys.modules['torch'] = None\n"
    "import fp8q._checkpoint as package\n"
    "for module in pkgutil.iter_modules(package.__path__):\n"
    "    importlib.import_module('fp8q._checkpoint.' + module.name)\n"
    "from fp8q._cli._main import main\n"
    "sys.exit(main(sys.argv[1:]))\n")


def test_checkpoint_reading_inspect_and_convert_need_no_torch(tmp_path):
    """fp8q._checkpoint says it reads checkpoints without torch: every one
    of its modules imports with torch unavailable, and inspect and convert
    (which use only it) print and write exactly what they do with torch."""
    state, _ = layout("comfy-scaled", tiny(), static=True)
    source = save(str(tmp_path / "in"), state) + "/model.safetensors"
    without = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, "inspect", source],
        capture_output=True, text=True, timeout=300)
    assert without.returncode == 0, without.stderr
    assert without.stdout == run("inspect", source).stdout
    assert "layout comfyui-scaled-fp8 (" in without.stdout
    outputs = tmp_path / "without.safetensors", tmp_path / "with.safetensors"
    converted = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, "convert", source,
         str(outputs[0]), "--format", "vllm"],
        capture_output=True, text=True, timeout=300)
    assert converted.returncode == 0, converted.stderr
    assert run("convert", source, outputs[1], "--format",
               "vllm").returncode == 0
    assert outputs[0].read_bytes() == outputs[1].read_bytes()


def test_no_checkpoint_module_imports_torch():
    """Not even inside a function: a torch tensor of a checkpoint's tensor
    is fp8q.torch's (TorchFileCheckpoint.tensor)."""
    import fp8q._checkpoint

    folder = pathlib.Path(fp8q._checkpoint.__file__).parent
    imports = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            names = ([alias.name for alias in node.names]
                     if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom)
                     else [])
            imports += [(path.name, name) for name in names
                        if name.split(".")[0] == "torch"
                        or name.startswith("fp8q.torch")]
    assert len(list(folder.glob("*.py"))) >= 10
    assert imports == []
