"""docs/checkpoints.md's recipes run as written (issue 40, item 2): the
meta-device recipe, executed from the page itself on a tiny Llama saved by
fp8q, gives a model whose forward runs and equals the saved model's, bit
for bit (its rotary embeddings' non-persistent inv_freq, in no checkpoint,
rebuilt by the model's own initialisation); the page's `inspect` command
runs on the same folder, and its `convert` command re-lays the saved file
into one that loads the same way, codes untouched. A tensor that would stay on the meta device is
refused with strict=True, naming it, and listed with strict=False."""
import contextlib
import io
import pathlib
import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (pip install "
                           "transformers)")
pytest.importorskip("safetensors", reason="safetensors is not installed")

import fp8q.torch as fpt  # noqa: E402
from checkpoint_layouts import layout, tiny  # noqa: E402
from fp8q._checkpoint import CheckpointError  # noqa: E402
from test_torch_transformers_save import llama, logits  # noqa: E402

PAGE = (pathlib.Path(__file__).resolve().parents[1] / "docs"
        / "checkpoints.md").read_text()
PLACEHOLDER = "path/to/checkpoint"


def blocks(language):
    return re.findall(rf"```{language}\n(.*?)```", PAGE, re.S)


@pytest.mark.parametrize("activations, tie", [
    (None, False), ("e4m3", False), (None, True)],
    ids=["W8A16", "W8A8-dynamic", "W8A16-tied-embeddings"])
def test_the_meta_device_recipe_runs_as_written(activations, tie, tmp_path,
                                                seed):
    """With tie_word_embeddings the checkpoint holds the embeddings once:
    lm_head.weight loads through model.embed_tokens.weight, still tied."""
    saved = fpt.quantize(llama(seed, tie_word_embeddings=tie),
                         activations=activations, exclude="lm_head")
    saved.save_pretrained(tmp_path)
    recipe = blocks("python")[0]
    assert 'with torch.device("meta")' in recipe and PLACEHOLDER in recipe
    namespace = {}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(recipe.replace(PLACEHOLDER, str(tmp_path)), namespace)
    model = namespace["model"]
    assert not any(t.is_meta for t in (*model.parameters(),
                                       *model.buffers()))
    assert namespace["report"].rebuilt_keys == [
        "model.rotary_emb.inv_freq", "model.rotary_emb.original_inv_freq"]
    assert "rebuilt (non-persistent buffers): 2" in printed.getvalue()
    assert torch.equal(model.model.rotary_emb.inv_freq,
                       saved.model.rotary_emb.inv_freq)
    assert namespace["report"].missing_keys == []
    assert (model.lm_head.weight is model.model.embed_tokens.weight) == tie
    assert torch.equal(logits(model), logits(saved))

    commands = [line for line in blocks("bash")[0].splitlines()
                if "inspect" in line]
    assert len(commands) == 1
    command = commands[0].split("#")[0].split()
    assert command[:4] == ["python", "-m", "fp8q", "inspect"]
    result = subprocess.run(
        [sys.executable, *command[1:]][:-1] + [str(tmp_path)],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    scheme = "W8A16" if activations is None else "W8A8 dynamic"
    assert f"14 x float8_e4m3fn, row scales, {scheme}" in result.stdout

    # The page's convert line, on the saved file: the re-laid file (with
    # the config convert copies beside it) loads through the same recipe
    # into the same model, codes untouched.
    commands = [line.split("#")[0].split() for line in
                blocks("bash")[0].splitlines() if " convert " in line]
    assert len(commands) == 1 and commands[0][:4] == [
        "python", "-m", "fp8q", "convert"], commands
    converted = tmp_path / "vllm" / "model.safetensors"
    converted.parent.mkdir()
    arguments = [str(tmp_path / "model.safetensors"), str(converted)]
    result = subprocess.run(
        [sys.executable, *commands[0][1:4], *arguments, *commands[0][6:]],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    with contextlib.redirect_stdout(io.StringIO()):
        exec(recipe.replace(PLACEHOLDER, str(converted.parent)), namespace)
    reloaded = namespace["model"]
    assert torch.equal(logits(reloaded), logits(saved))
    for name, layer in saved.named_modules():
        if isinstance(layer, fpt.Linear):
            assert torch.equal(
                reloaded.get_submodule(name).weight.view(torch.uint8),
                layer.weight.view(torch.uint8)), name


class Tabled(torch.nn.Module):
    """checkpoint_layouts' Tiny with a non-persistent buffer that no
    initialisation fp8q knows rebuilds."""

    def __init__(self):
        super().__init__()
        self.body = tiny()
        self.register_buffer("table", torch.arange(4.0), persistent=False)


def test_a_tensor_left_on_meta_is_refused_or_listed():
    state, _ = layout("compressed-tensors", tiny())
    state = {f"body.{key}": value for key, value in state.items()}
    with torch.device("meta"):
        model = Tabled()
    with pytest.raises(CheckpointError, match="meta key") as error:
        fpt.load_checkpoint(model, state)
    assert "table" in str(error.value)
    assert "init_empty_weights" in str(error.value)
    assert model.body.proj.weight.is_meta  # unchanged
    assert type(model.body.proj) is torch.nn.Linear
    report = fpt.load_checkpoint(model, state, strict=False)
    assert report.meta_keys == ["table"]
    assert "LEFT ON THE META DEVICE (set them before a forward): 1: table" \
        in str(report)
    assert isinstance(model.body.proj, fpt.Linear)


def test_a_buffer_the_model_init_does_not_write_is_not_rebuilt(tmp_path,
                                                              seed):
    """Inside a transformers model, a non-persistent buffer its
    _init_weights leaves alone is refused, not filled with garbage."""
    saved = fpt.quantize(llama(seed), exclude="lm_head")
    saved.save_pretrained(tmp_path)
    with torch.device("meta"):
        model = llama(seed)
        model.model.extra = torch.nn.Module()
        model.model.extra.register_buffer("steps", torch.arange(3),
                                          persistent=False)
    with pytest.raises(CheckpointError) as error:
        fpt.load_checkpoint(model, tmp_path)
    assert "model.extra.steps" in str(error.value)
    assert "rotary" not in str(error.value)  # that one is rebuilt


def test_tied_weights_load_into_a_real_model(tmp_path, seed):
    saved = fpt.quantize(llama(seed, tie_word_embeddings=True),
                         exclude="lm_head")
    saved.save_pretrained(tmp_path)
    model = llama(seed + 1, tie_word_embeddings=True)
    report = fpt.load_checkpoint(model, tmp_path)
    assert report.missing_keys == [] and report.meta_keys == []
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert torch.equal(model.lm_head.weight, saved.lm_head.weight)
    assert torch.equal(logits(model), logits(saved))
