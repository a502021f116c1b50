"""`python -m fp8q convert`: FP8 checkpoints from safetensors files, the
safetensors reader and writer, and the command's error handling."""
import json
import struct
import subprocess
import sys

import numpy as np
import pytest

import fp8q
from fp8q._cli import _convert_checkpoint
from fp8q._safetensors import SafetensorsReader, write_safetensors


def bfloat16_bytes(values):
    return fp8q.cast(values.astype(np.float32), "bfloat16").view(
        "uint8").numpy()


def write_checkpoint(path, rng):
    """A small checkpoint: two 2-D bf16 weights of one class, a float32
    embedding, a float16 2-D weight, a 1-D bias and an int64 tensor.
    Returns {name: float64 values or raw array}."""
    weights = {
        "layers.0.mlp.weight": rng.standard_normal((130, 96)),
        "layers.1.mlp.weight": rng.standard_normal((130, 96)) * 3,
    }
    embed = rng.standard_normal((50, 96)).astype(np.float32)
    head = rng.standard_normal((40, 96)).astype(np.float16)
    bias = rng.standard_normal(130).astype(np.float32)
    steps = np.array([7, -1], np.int64)
    tensors = [(name, "BF16", values.shape,
                lambda v=values: bfloat16_bytes(v))
               for name, values in weights.items()]
    tensors += [("embed.weight", "F32", embed.shape, lambda: embed),
                ("head.weight", "F16", head.shape, lambda: head),
                ("layers.0.mlp.bias", "F32", bias.shape, lambda: bias),
                ("steps", "I64", steps.shape, lambda: steps)]
    with open(path, "wb") as file:
        write_safetensors(file, tensors, {"origin": "test"})
    return weights, embed, head, bias, steps


def run_cli(*arguments):
    return subprocess.run([sys.executable, "-m", "fp8q", "convert",
                           *map(str, arguments)],
                          capture_output=True, text=True, timeout=300)


def test_reader_reads_what_the_writer_wrote(tmp_path, rng):
    path = tmp_path / "in.safetensors"
    weights, embed, head, bias, steps = write_checkpoint(path, rng)
    reader = SafetensorsReader(path)
    assert list(reader.entries) == ["layers.0.mlp.weight",
                                    "layers.1.mlp.weight", "embed.weight",
                                    "head.weight", "layers.0.mlp.bias",
                                    "steps"]
    assert reader.metadata == {"origin": "test"}
    assert np.array_equal(reader.tensor("steps"), steps)
    assert np.array_equal(reader.tensor("embed.weight"), embed)
    assert np.array_equal(reader.tensor("head.weight"), head)
    w = reader.fp8q_tensor("layers.1.mlp.weight")
    assert w.dtype.name == "bfloat16" and w.shape == (130, 96)
    assert np.array_equal(w.view("uint8").numpy(),
                          bfloat16_bytes(weights["layers.1.mlp.weight"]))
    # The header is 8-byte aligned JSON.
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    assert size % 8 == 0 and json.loads(raw[8:8 + size])["steps"]["dtype"] \
        == "I64"
    reader.close()


@pytest.mark.parametrize("granularity", ["row", "tensor", "block"])
@pytest.mark.parametrize("output_format", ["fp8q", "vllm"])
def test_convert_quantizes_2d_floats_and_copies_the_rest(
        tmp_path, rng, seed, granularity, output_format):
    source = tmp_path / "in.safetensors"
    target = tmp_path / "out.safetensors"
    weights, embed, head, bias, steps = write_checkpoint(source, rng)
    # --exclude before the positionals takes one pattern and no more.
    result = run_cli("--exclude", "embed*", source, target, "--granularity",
                     granularity, "--format", output_format)
    assert result.returncode == 0, result.stderr
    assert "converted 3 tensors" in result.stdout
    assert "| layers.*.mlp.weight | 2 |" in result.stdout
    reader = SafetensorsReader(target)
    suffix = ("weight_scale_inv" if output_format == "vllm"
              and granularity == "block" else "weight_scale")
    block = (128, 128) if granularity == "block" else granularity
    for name, values in list(weights.items()) + [
            ("head.weight", head.astype(np.float64))]:
        original = (fp8q.asarray(bfloat16_bytes(values)).view("bfloat16")
                    if name != "head.weight" else head)
        q = fp8q.quantize(original, "e4m3", granularity=block)
        code, shape = reader.entries[name]
        assert code == "F8_E4M3" and shape == values.shape
        assert np.array_equal(reader.tensor(name),
                              q.data.view("uint8").numpy()), name
        scale_name = name[:-len("weight")] + suffix
        assert reader.entries[scale_name][0] == "F32"
        assert np.array_equal(reader.tensor(scale_name), q.scale.numpy())
    assert np.array_equal(reader.tensor("embed.weight"), embed)
    assert np.array_equal(reader.tensor("layers.0.mlp.bias"), bias)
    assert np.array_equal(reader.tensor("steps"), steps)
    assert reader.metadata["origin"] == "test"
    assert reader.metadata["fp8q_granularity"] == granularity
    reader.close()


def test_converted_checkpoint_loads_into_fp8q_torch(tmp_path, seed):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    import fp8q.torch as fpt
    torch.manual_seed(seed % (2 ** 31))
    model = torch.nn.Sequential(torch.nn.Linear(64, 48),
                                torch.nn.Linear(48, 8))
    source, target = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    safetensors_torch.save_file(model.state_dict(), str(source))
    assert run_cli(source, target).returncode == 0
    quantized = fpt.quantize(model)
    fresh = fpt.quantize(torch.nn.Sequential(torch.nn.Linear(64, 48),
                                             torch.nn.Linear(48, 8)))
    fresh.load_state_dict(safetensors_torch.load_file(str(target)))
    x = torch.randn(3, 64)
    with torch.no_grad():
        assert torch.equal(fresh(x), quantized(x))


def leftovers(directory):
    return sorted(path.name for path in directory.iterdir()
                  if path.name.startswith(("out", ".out")) or
                  path.suffix == ".tmp")


@pytest.mark.parametrize("damage", ["missing", "not safetensors",
                                    "bad json", "truncated", "nan weight",
                                    "unwritable output", "same file",
                                    "empty file", "input directory",
                                    "output directory", "unused exclude"])
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, rng, damage):
    source = tmp_path / "in.safetensors"
    target = tmp_path / "out.safetensors"
    write_checkpoint(source, rng)
    raw = source.read_bytes()
    if damage == "missing":
        source = tmp_path / "absent.safetensors"
    elif damage == "not safetensors":
        source.write_bytes(b"PK\x03\x04 this is a zip file, not a checkpoint")
    elif damage == "bad json":
        source.write_bytes(raw[:8] + b"#" + raw[9:])  # not JSON any more
    elif damage == "truncated":
        source.write_bytes(raw[:len(raw) - 100])
    elif damage == "nan weight":
        values = np.ones((4, 4), np.float32)
        values[1, 2] = np.nan
        with open(source, "wb") as file:
            write_safetensors(file, [("w.weight", "F32", (4, 4),
                                      lambda: values)], {})
    elif damage == "unwritable output":
        target = tmp_path / "no" / "such" / "dir" / "out.safetensors"
    elif damage == "same file":
        target = source
    elif damage == "empty file":
        source.write_bytes(b"")
    elif damage == "input directory":
        source = tmp_path
    elif damage == "output directory":
        target = tmp_path
    extra = ["--exclude", "decoder.*"] if damage == "unused exclude" else []
    result = run_cli(source, target, *extra)
    assert result.returncode == 2, (damage, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fp8q convert: error:"), \
        (damage, result.stderr)
    assert "Traceback" not in result.stderr
    assert leftovers(tmp_path) == [], damage
    # Each message names the problem and what to do about it.
    expected = {"empty file": "in.safetensors: not a valid safetensors "
                              "file: the file is empty",
                "input directory": "is a directory; give the .safetensors",
                "output directory": "is a directory; give the output file",
                "nan weight": "--exclude w.weight",
                "unused exclude": "--exclude 'decoder.*': matches no tensor"}
    assert expected.get(damage, "") in lines[0], lines[0]


def test_summary_classes_and_ratio():
    rows = [("model.layers.0.q.weight", 400, 110, 0.02),
            ("model.layers.11.q.weight", 400, 110, 0.04),
            ("lm_head.weight", 800, 210, 0.01)]
    import io
    out = io.StringIO()
    _convert_checkpoint.print_summary(rows, 2000, 600, out)
    text = out.getvalue()
    assert "converted 3 tensors" in text and "(30.0%)" in text
    assert "| model.layers.*.q.weight | 2 | 4.00e-02 | 3.00e-02 |" in text
    assert "| lm_head.weight | 1 | 1.00e-02 | 1.00e-02 |" in text


def test_scale_name_collision_is_refused(tmp_path):
    source, target = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    values = np.ones((4, 4), np.float32)
    with open(source, "wb") as file:
        write_safetensors(file, [("a", "F32", (4, 4), lambda: values),
                                 ("a_scale", "F32", (4, 4), lambda: values)],
                          {})
    result = run_cli(source, target, "--all-2d")
    assert result.returncode == 2 and "two tensors named" in result.stderr
    assert leftovers(tmp_path) == []


def test_scale_names_for_tensors_not_named_weight(tmp_path):
    source, target = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    values = np.ones((4, 4), np.float32)
    with open(source, "wb") as file:
        write_safetensors(file, [("e", "F32", (4, 4), lambda: values),
                                 ("proj.weight", "F32", (4, 4),
                                  lambda: values)], {})
    assert run_cli(source, target, "--all-2d").returncode == 0
    reader = SafetensorsReader(target)
    assert list(reader.entries) == ["e", "e_scale", "proj.weight",
                                    "proj.weight_scale"]
    reader.close()


def test_by_default_only_linear_weights_convert(tmp_path):
    """Issue 24: embedding tables (and 2-D tensors not named *.weight)
    stay float unless --all-2d asks for every 2-D float tensor."""
    source = tmp_path / "in.safetensors"
    values = np.ones((4, 4), np.float32)
    names = ["bert.embeddings.word_embeddings.weight", "model.embed_tokens.weight",
             "transformer.wte.weight", "transformer.wpe.weight",
             "shared.weight", "embed.weight", "pos_embedding",
             "x_embedder.weight", "layers.0.attn.q_proj.weight",
             "time_text_embed.timestep_embedder.linear_1.weight",
             "lm_head.weight"]
    with open(source, "wb") as file:
        write_safetensors(file, [(name, "F32", (4, 4), lambda: values)
                                 for name in names], {})
    linear = {"x_embedder.weight", "layers.0.attn.q_proj.weight",
              "time_text_embed.timestep_embedder.linear_1.weight",
              "lm_head.weight"}
    for flags, converted in (((), linear), (("--all-2d",), set(names))):
        target = tmp_path / f"out{len(flags)}.safetensors"
        result = run_cli(source, target, *flags)
        assert result.returncode == 0, result.stderr
        assert f"converted {len(converted)} tensors" in result.stdout
        reader = SafetensorsReader(target)
        assert {name for name in names if reader.entries[name][0]
                == "F8_E4M3"} == converted, flags
        reader.close()


def test_a_default_conversion_loads_strictly_into_a_quantized_model(
        tmp_path, seed):
    """The issue's case: an embedding model converted by default loads into
    fp8q.torch.quantize's model strictly and computes what it computes."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    import fp8q.torch as fpt

    def build():
        torch.manual_seed(seed % (2 ** 31))
        embeddings = torch.nn.Module()
        embeddings.word_embeddings = torch.nn.Embedding(30, 64)
        return torch.nn.ModuleDict({"embeddings": embeddings,
                                    "dense": torch.nn.Linear(64, 16)})

    model = build()
    source, target = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    safetensors_torch.save_file(model.state_dict(), str(source))
    result = run_cli(source, target)
    assert result.returncode == 0, result.stderr
    fresh = fpt.quantize(build())
    fresh.load_state_dict(safetensors_torch.load_file(str(target)))
    quantized = fpt.quantize(model)
    tokens = torch.tensor([[1, 5, 29]])
    with torch.no_grad():
        want = quantized["dense"](quantized["embeddings"].word_embeddings(
            tokens))
        got = fresh["dense"](fresh["embeddings"].word_embeddings(tokens))
    assert torch.equal(got, want)


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path):
    """`convert ... | head -1`: stdout's reader is gone before the summary
    is printed; the file is complete, so the status is 0, and stderr is
    empty."""
    source, target = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    values = np.ones((8, 8), np.float32)
    with open(source, "wb") as file:
        write_safetensors(file, [(f"l{index}.weight", "F32", (8, 8),
                                  lambda: values) for index in range(200)],
                          {})
    child = subprocess.Popen([sys.executable, "-m", "fp8q", "convert",
                              str(source), str(target)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdout.close()  # before the child has printed anything
    stderr = child.stderr.read().decode()
    assert child.wait(timeout=300) == 0, stderr
    assert stderr == ""
    reader = SafetensorsReader(target)
    assert len(reader.entries) == 400
    reader.close()


@pytest.mark.parametrize("output_format", ["fp8q", "vllm"])
def test_converting_a_converted_checkpoint_changes_nothing(tmp_path, rng,
                                                           output_format):
    source = tmp_path / "in.safetensors"
    once, twice = tmp_path / "once.safetensors", tmp_path / "twice.safetensors"
    write_checkpoint(source, rng)
    arguments = ["--granularity", "block", "--format", output_format]
    assert run_cli(source, once, *arguments).returncode == 0
    result = run_cli(once, twice, *arguments)
    assert result.returncode == 0, result.stderr
    assert "converted 0 tensors" in result.stdout
    first, second = SafetensorsReader(once), SafetensorsReader(twice)
    assert first.entries == second.entries
    for name in first.entries:
        assert np.array_equal(first.tensor(name), second.tensor(name)), name
    first.close()
    second.close()


@pytest.mark.skipif(sys.platform == "win32",
                    reason="POSIX signals: on Windows Popen.send_signal has no "
                           "SIGINT and its SIGTERM is TerminateProcess, which "
                           "no handler sees")
@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_signal_removes_the_partial_file_and_exits_with_one_line(
        tmp_path, signal_name):
    """The conversion is stopped mid-way (a slow progress callback stands
    in for a large checkpoint) by the signal; nothing is left behind."""
    source, target = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    values = np.ones((64, 64), np.float32)
    with open(source, "wb") as file:
        write_safetensors(file, [(f"l{index}.weight", "F32", (64, 64),
                                  lambda: values) for index in range(50)], {})
    code = (
        "import os, signal, sys, time\n"
        "from fp8q._cli import _convert_checkpoint as c\n"
        "from fp8q._cli._main import _parse\n"
        "def slow(index, total, name):\n"
        "    if index == 3:\n"
        "        print('ready', flush=True)\n"
        "    time.sleep(0.2)\n"
        "arguments = _parse(['convert', sys.argv[1], sys.argv[2]])\n"
        "original = c.convert\n"
        "c.convert = lambda *a: original(*a[:5], slow)\n"
        "sys.exit(c.main(arguments))\n")
    process = subprocess.Popen([sys.executable, "-c", code, str(source),
                                str(target)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "ready"
    number = getattr(__import__("signal"), signal_name)
    process.send_signal(number)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + number, stderr
    assert stderr.strip().splitlines() == [
        f"fp8q convert: stopped by {signal_name}; no output written"]
    assert leftovers(tmp_path) == []


def test_empty_tensors_and_file_permissions(tmp_path):
    import os
    source, target = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    empty = np.zeros((0, 8), np.float32)
    steps = np.zeros((0, 3), np.int64)
    with open(source, "wb") as file:
        write_safetensors(file, [("w.weight", "F32", (0, 8), lambda: empty),
                                 ("steps", "I64", (0, 3), lambda: steps)], {})
    result = run_cli(source, target)
    assert result.returncode == 0, result.stderr
    reader = SafetensorsReader(target)
    assert reader.entries["w.weight"] == ("F8_E4M3", (0, 8))
    assert reader.entries["w.weight_scale"] == ("F32", (0, 1))
    assert reader.tensor("steps").shape == (0, 3)
    reader.close()
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(target).st_mode & 0o777 == 0o666 & ~umask


def _ignored_head_checkpoint(folder):
    """Issue 40, item 5: a compressed-tensors checkpoint (llm-compressor's
    layout) of checkpoint_layouts' tiny model whose config ignores the
    last layer, "head", kept in float32 in the file. Returns the float
    head weight."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    pytest.importorskip("safetensors")
    from checkpoint_layouts import layout, save, tiny

    model = tiny()
    state, configs = layout("compressed-tensors", model, granularity="row",
                            dynamic=True)
    head = model.head.weight.detach().clone()
    state["head.weight"] = head
    del state["head.weight_scale"]
    configs["config.json"]["quantization_config"]["ignore"] = ["head"]
    configs["config.json"]["model_type"] = "tiny"
    save(str(folder), state, configs)
    return torch, head


def _logits(folder, x):
    """The tiny model loaded from `folder` by load_checkpoint: its output
    for x, and the report."""
    import torch

    import fp8q.torch as fpt
    from checkpoint_layouts import tiny

    model = tiny(seed=1)
    report = fpt.load_checkpoint(model, str(folder))
    with torch.no_grad():
        return model(x), report


@pytest.mark.parametrize("output_format", ["fp8q", "vllm"])
def test_float_layers_of_an_fp8_input_stay_float_with_its_config(
        tmp_path, output_format):
    source, target = tmp_path / "in", tmp_path / "out"
    torch, head = _ignored_head_checkpoint(source)
    target.mkdir()
    result = run_cli(source / "model.safetensors",
                     target / "model.safetensors", "--format", output_format)
    assert result.returncode == 0, result.stderr
    assert "converted 0 tensors" in result.stdout
    assert ("note: FP8 input: 1 float tensors its writer kept in float are "
            "copied as they are (head.weight); --quantize-float quantizes "
            "them") in result.stdout
    reader = SafetensorsReader(target / "model.safetensors")
    original = SafetensorsReader(source / "model.safetensors")
    assert reader.entries["head.weight"] == ("F32", (9, 200))
    assert np.array_equal(reader.tensor("head.weight"), head.numpy())
    for name in original.entries:  # codes, scales and floats as they were
        assert reader.entries[name] == original.entries[name], name
        assert np.array_equal(reader.tensor(name), original.tensor(name))
    assert set(reader.entries) == set(original.entries)
    reader.close()
    original.close()
    config = json.loads((target / "config.json").read_text())
    assert config == json.loads((source / "config.json").read_text())
    assert config["quantization_config"]["ignore"] == ["head"]
    torch.manual_seed(0)
    x = torch.randn(8, 40)
    want, _ = _logits(source, x)
    got, report = _logits(target, x)
    assert report.float_linear_layers == ["head"]
    assert torch.equal(got, want)
    assert torch.equal(got.argmax(-1), want.argmax(-1))


def test_quantize_float_is_asked_for_and_drops_the_config(tmp_path):
    source, target = tmp_path / "in", tmp_path / "out"
    torch, head = _ignored_head_checkpoint(source)
    target.mkdir()
    result = run_cli(source / "model.safetensors",
                     target / "model.safetensors", "--quantize-float")
    assert result.returncode == 0, result.stderr
    assert "converted 1 tensors" in result.stdout
    assert "its config files no longer describe the output" in result.stdout
    assert not (target / "config.json").exists()
    reader = SafetensorsReader(target / "model.safetensors")
    q = fp8q.quantize(head.numpy(), "e4m3", granularity="row")
    assert reader.entries["head.weight"][0] == "F8_E4M3"
    assert np.array_equal(reader.tensor("head.weight"),
                          q.data.view("uint8").numpy())
    reader.close()


def test_a_different_config_beside_the_output_is_kept(tmp_path):
    source, target = tmp_path / "in", tmp_path / "out"
    _ignored_head_checkpoint(source)
    target.mkdir()
    (target / "config.json").write_text("{}")
    result = run_cli(source / "model.safetensors",
                     target / "model.safetensors")
    assert result.returncode == 0, result.stderr
    assert (target / "config.json").read_text() == "{}"
    assert (f"note: {target / 'config.json'}: kept as it is; it differs from "
            "the input's config.json") in result.stdout


@pytest.mark.parametrize("granularity", ["row", "tensor", "block"])
def test_quantize_float_drops_the_fp8q_scheme_metadata(tmp_path,
                                                       granularity):
    """A file fp8q saved (its scheme, W8A8 dynamic row, in the metadata)
    whose head is float: --quantize-float writes a file without that
    metadata, which fp8q reads back, the new head weight-only."""
    pytest.importorskip("torch", reason="PyTorch is not installed")
    pytest.importorskip("safetensors")
    from safetensors.torch import save_file

    import fp8q.torch as fpt
    from checkpoint_layouts import layout, tiny
    from fp8q._checkpoint import open_checkpoint, plan_checkpoint

    key = "fp8q_quantization_config"
    state, _ = layout("compressed-tensors", tiny(), granularity="row")
    state["head.weight"] = tiny().head.weight.detach().clone()
    del state["head.weight_scale"]
    source, target = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    save_file(state, source, metadata={key: json.dumps(
        {"quant_method": "fp8q", "granularity": "row",
         "activations": "e4m3"})})
    result = run_cli(source, target, "--quantize-float", "--granularity",
                     granularity)
    assert result.returncode == 0, result.stderr
    assert (f"note: the input's {key} metadata no longer describes the "
            "output and was dropped") in result.stdout
    with open_checkpoint(target) as checkpoint:
        assert key not in checkpoint.metadata
        plan = plan_checkpoint(checkpoint)
    assert {name: layer.scheme for name, layer in plan.layers.items()} == {
        "proj": "W8A16", "out": "W8A16", "head": "W8A16"}
    model = tiny(seed=1)
    fpt.load_checkpoint(model, str(target))
    assert model.head.activations is None
    inspect = subprocess.run([sys.executable, "-m", "fp8q", "inspect",
                              str(target)], capture_output=True, text=True,
                             timeout=300)
    assert inspect.returncode == 0, inspect.stderr


def _fp8_codes(rng, shape):
    """Random float8_e4m3fn codes of `shape` (uint8, no NaN codes)."""
    return rng.integers(0, 0x7E, shape, dtype=np.uint8)


def write_comfy_mixed(path, rng):
    """A ComfyUI scaled-fp8 file whose layer l1 has 128x128 block scales
    and l2 row scales, beside a float norm."""
    block, row = _fp8_codes(rng, (256, 256)), _fp8_codes(rng, (16, 32))
    block_scale = rng.random((2, 2)).astype(np.float32) / 100
    row_scale = rng.random((16, 1)).astype(np.float32) / 100
    norm = np.ones(16, np.float32)
    with open(path, "wb") as file:
        write_safetensors(file, [
            ("scaled_fp8", "F8_E4M3", (0,), lambda: np.zeros(0, np.uint8)),
            ("l1.weight", "F8_E4M3", (256, 256), lambda: block),
            ("l1.scale_weight", "F32", (2, 2), lambda: block_scale),
            ("l2.weight", "F8_E4M3", (16, 32), lambda: row),
            ("l2.scale_weight", "F32", (16, 1), lambda: row_scale),
            ("norm.weight", "F32", (16,), lambda: norm)], {})


def test_vllm_refuses_a_relaid_mix_of_block_and_row_scales(tmp_path, rng):
    """--format vllm names block scales NAME_scale_inv (FineGrainedFP8,
    block scales only): a ComfyUI file that mixes block- and row-scaled
    layers is refused up front in one line, no output (it once ended in a
    CheckpointError traceback on its own re-laid result); --format fp8q
    writes it, every scale NAME_scale, and inspect reads that."""
    source, target = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    write_comfy_mixed(source, rng)
    result = run_cli(source, target, "--format", "vllm")
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"fp8q convert: error: --format vllm: {source} mixes 128x128 "
        "block-scaled layers (l1.weight) with row-scaled ones (l2.weight), "
        "and vLLM's layout for block scales (NAME_scale_inv, "
        "FineGrainedFP8) holds block scales only; --format fp8q writes "
        "every scale as NAME_scale (compressed-tensors, block scales "
        "too)\n")
    assert leftovers(tmp_path) == []
    result = run_cli(source, target, "--format", "fp8q")
    assert result.returncode == 0, result.stderr
    reader = SafetensorsReader(target)
    assert reader.entries["l1.weight_scale"] == ("F32", (2, 2))
    assert reader.entries["l2.weight_scale"] == ("F32", (16, 1))
    assert "fp8q_granularity" not in reader.metadata  # two granularities
    reader.close()
    inspect = subprocess.run([sys.executable, "-m", "fp8q", "inspect",
                              str(target)], capture_output=True, text=True,
                             timeout=300)
    assert inspect.returncode == 0, inspect.stderr


def test_a_layout_error_of_the_relaid_input_is_one_line(tmp_path, rng,
                                                        monkeypatch):
    """Whatever detect() refuses in the input convert reads (re-laid or
    not) is a one-line error naming the input, exit status 2, no output:
    never a CheckpointError traceback."""
    from fp8q._checkpoint import CheckpointError

    source, target = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    write_comfy_mixed(source, rng)

    def refuse(reader):
        raise CheckpointError("x.weight_scale: two layouts")

    monkeypatch.setattr(_convert_checkpoint, "detect", refuse)
    with pytest.raises(_convert_checkpoint.ConvertError) as error:
        _convert_checkpoint.convert(str(source), str(target))
    assert str(error.value) == f"{source}: x.weight_scale: two layouts"
    assert leftovers(tmp_path) == []


def write_fp8_with_config(folder, rng):
    """A compressed-tensors FP8 file (row scales) with its config.json in
    `folder`; returns the file's path."""
    folder.mkdir()
    codes = _fp8_codes(rng, (8, 16))
    scale = rng.random((8, 1)).astype(np.float32)
    with open(folder / "model.safetensors", "wb") as file:
        write_safetensors(file, [
            ("a.weight", "F8_E4M3", (8, 16), lambda: codes),
            ("a.weight_scale", "F32", (8, 1), lambda: scale)], {})
    (folder / "config.json").write_text('{"quantization_config": {}}')
    return folder / "model.safetensors"


@pytest.mark.parametrize("blocker", ["directory", "broken link"])
def test_a_config_that_cannot_be_carried_is_refused_before_writing(
        tmp_path, rng, blocker):
    """A directory or a broken link named config.json in the output folder
    (where the FP8 input's config.json is to be carried): one line, exit
    status 2, and no output file, checked before the output is written
    (once a traceback, or an error after model.safetensors was written)."""
    import os

    source = write_fp8_with_config(tmp_path / "in", rng)
    folder = tmp_path / "out"
    folder.mkdir()
    if blocker == "directory":
        (folder / "config.json").mkdir()
    else:
        if sys.platform == "win32":
            pytest.skip("symbolic links need a privilege on Windows")
        os.symlink(tmp_path / "nowhere" / "config.json",
                   folder / "config.json")
    result = run_cli(source, folder / "model.safetensors")
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"fp8q convert: error: {folder / 'config.json'}: is a {blocker}, so "
        "the input's config.json, which describes the output, cannot be "
        "carried beside it; remove it or write the output to another "
        "folder\n")
    assert sorted(path.name for path in folder.iterdir()) == ["config.json"]


def test_a_config_copy_that_fails_leaves_no_output(tmp_path, rng,
                                                   monkeypatch):
    """A config copy that fails (a full disk, say) is a ConvertError
    before the output is written; no temporary file is left."""
    import shutil

    source = write_fp8_with_config(tmp_path / "in", rng)
    folder = tmp_path / "out"
    folder.mkdir()

    def full(original, copy):
        with open(copy, "wb"):
            pass
        raise OSError(28, "No space left on device", copy)

    monkeypatch.setattr(shutil, "copyfile", full)
    with pytest.raises(_convert_checkpoint.ConvertError,
                       match="No space left on device"):
        _convert_checkpoint.convert(str(source),
                                    str(folder / "model.safetensors"))
    assert list(folder.iterdir()) == []


def test_carried_config_is_written_with_the_output(tmp_path, rng):
    source = write_fp8_with_config(tmp_path / "in", rng)
    folder = tmp_path / "out"
    folder.mkdir()
    result = run_cli(source, folder / "model.safetensors")
    assert result.returncode == 0, result.stderr
    assert (f"note: {folder / 'config.json'}: the input's config.json, "
            "carried beside the output") in result.stdout
    assert sorted(path.name for path in folder.iterdir()) == [
        "config.json", "model.safetensors"]
    assert (folder / "config.json").read_text() == \
        '{"quantization_config": {}}'


def _metadata_granularity(path):
    reader = SafetensorsReader(path)
    try:
        return reader.metadata.get("fp8q_granularity")
    finally:
        reader.close()


def test_granularity_metadata_describes_the_file(tmp_path, rng):
    """fp8q_granularity is the granularity of the file's scales: a
    converted file converted again with --granularity block (nothing to
    convert) keeps row; a re-laid plain-FP8 file, whose scales are one per
    tensor, says tensor; a file with no scale or scales of two
    granularities has no such key."""
    source = tmp_path / "in.safetensors"
    write_checkpoint(source, rng)
    once, twice = tmp_path / "once.safetensors", tmp_path / "twice.safetensors"
    assert run_cli(source, once).returncode == 0
    assert _metadata_granularity(once) == "row"
    result = run_cli(once, twice, "--granularity", "block")
    assert result.returncode == 0, result.stderr
    assert "converted 0 tensors" in result.stdout
    assert _metadata_granularity(twice) == "row"
    plain, relaid = tmp_path / "plain.safetensors", tmp_path / "relaid.st"
    codes = _fp8_codes(rng, (8, 16))
    with open(plain, "wb") as file:
        write_safetensors(file, [("a.weight", "F8_E4M3", (8, 16),
                                  lambda: codes)], {})
    assert run_cli(plain, relaid).returncode == 0
    assert _metadata_granularity(relaid) == "tensor"
    none = tmp_path / "none.safetensors"
    assert run_cli(source, none, "--exclude", "*.weight").returncode == 0
    assert _metadata_granularity(none) is None
    mixed = tmp_path / "mixed.safetensors"
    result = run_cli(once, mixed, "--quantize-float", "--all-2d",
                     "--granularity", "tensor")
    assert result.returncode == 0, result.stderr
    assert _metadata_granularity(mixed) is None


class _Terminal:
    """A stand-in for stderr on a terminal: isatty() is True and what is
    written is kept."""

    def __init__(self):
        self.text = ""

    def isatty(self):
        return True

    def write(self, text):
        self.text += text

    def flush(self):
        pass


def test_an_error_on_a_terminal_starts_a_line_of_its_own(tmp_path,
                                                          monkeypatch):
    """On a terminal the progress bar is one line redrawn with \\r; an
    error after it starts a line of its own (once it was glued to the
    bar), and an error before any bar is its one line alone."""
    from fp8q._cli._main import _parse

    source, target = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    bad = np.ones((8, 16), np.float32)
    bad[1, 1] = np.inf
    good = np.ones((8, 16), np.float32)
    with open(source, "wb") as file:
        write_safetensors(file, [("a.weight", "F32", (8, 16), lambda: good),
                                 ("b.weight", "F32", (8, 16), lambda: bad)],
                          {})
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    arguments = _parse(["convert", str(source), str(target)])
    assert _convert_checkpoint.main(arguments) == 2
    bar, error, end = terminal.text.split("\n")
    assert bar.startswith("\r[") and "2/2 b.weight" in bar
    assert error.startswith("fp8q convert: error: ")
    assert end == ""
    assert leftovers(tmp_path) == []
    terminal.text = ""
    arguments = _parse(["convert", str(tmp_path / "absent"), str(target)])
    assert _convert_checkpoint.main(arguments) == 2
    assert terminal.text == \
        f"fp8q convert: error: {tmp_path / 'absent'}: no such file\n"
