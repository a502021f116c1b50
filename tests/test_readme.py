"""README.md stays true: its Python examples run and print what their comments
say, its two commands come first and are the ones this repository provides,
and every other command in it runs as written."""
import contextlib
import io
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

# The wheel tests (wheels/cibuildwheel.toml) copy tests/ without README.md.
pytestmark = pytest.mark.skipif(
    not README.is_file(), reason="needs the repository checkout (README.md)")


def python_blocks():
    return re.findall(r"```python\n(.*?)\n```", README.read_text("utf-8"), re.S)


def marked_command(marker):
    """The fenced block after <!-- marker -->, as .ci/run reads it."""
    text = README.read_text("utf-8")
    block = re.search(r"```[a-z]*\n(.*?)\n```",
                      text[text.index(f"<!-- {marker} -->"):], re.S)
    return block.group(1).strip()


def bash_lines():
    """Every line of the README's ```bash blocks, in order."""
    return [line for block in re.findall(r"```bash\n(.*?)\n```",
                                         README.read_text("utf-8"), re.S)
            for line in block.splitlines() if line.strip()]


def test_example_runs_and_prints_what_its_comments_say():
    example = python_blocks()[0]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(example, "README.md", "exec"), {})
    lines = printed.getvalue().splitlines()
    promised = [comment for code, comment in
                re.findall(r"^(print\(.*?\))\s*#\s*(.*)$", example, re.M)]
    assert len(lines) == 3, lines
    assert lines[0] == promised[0]
    assert float(lines[1]) < 0.25  # row-scaled e4m3 error on N(0, 1) data
    assert lines[2] == promised[2]


def test_calibration_example_runs(tmp_path, monkeypatch):
    """The second block continues the first (it uses x) and writes its cache
    file into the working directory; its scale is the entropy amax / 448."""
    example, calibration = python_blocks()[:2]
    namespace = {}
    monkeypatch.chdir(tmp_path)
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(example, "README.md", "exec"), namespace)
    exec(compile(calibration, "README.md", "exec"), namespace)
    amax = namespace["hist"].compute_amax("entropy")
    assert 0 < amax <= float(abs(namespace["x"]).max())
    assert namespace["scale"] == float(
        namespace["np"].float32(amax) / namespace["np"].float32(448))
    assert (tmp_path / "calibration.json").is_file()


def test_the_two_commands():
    text = README.read_text("utf-8")
    main = re.search(r"<!-- main-command -->\n```bash\n(.*?)\n```",
                     text, re.S).group(1)
    assert main == "python -m fp8q demo"
    test_command = re.search(r"<!-- test-command -->\n```bash\n(.*?)\n```",
                             text, re.S).group(1)
    assert "pytest" in test_command and "tests" in test_command


def test_torch_example_runs():
    """The third block quantizes a torch model in place and runs it."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    import fp8q.torch as fpt
    namespace = {}
    exec(compile(python_blocks()[2], "README.md", "exec"), namespace)
    model, y = namespace["model"], namespace["y"]
    assert isinstance(model[0], fpt.Linear) and isinstance(model[2], fpt.Linear)
    assert y.shape == (8, 64) and y.dtype == torch.float32


def test_the_two_commands_come_first():
    """The install command and the two commands end within the README's
    first 40 lines, and the install is from the clone (no release yet)."""
    lines = README.read_text("utf-8").splitlines()
    for marker in ("install-command", "main-command", "test-command"):
        start = lines.index(f"<!-- {marker} -->")
        end = lines.index("```", start + 2)
        assert end < 40, (marker, end + 1)
    assert marked_command("install-command") == "pip install ."
    head = "\n".join(lines[:40])
    assert "No release is published yet" in head
    assert "`pip install fp8q` will install" in head


def run_here(command, cwd):
    """Runs one README line with bash in `cwd`, this interpreter's folder
    first on PATH (its `python`, as in a virtual environment); returns the
    CompletedProcess."""
    environment = dict(os.environ)
    environment["PATH"] = (os.path.dirname(sys.executable) + os.pathsep
                           + environment.get("PATH", ""))
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=600)


def test_every_bash_command_is_run(tmp_path, monkeypatch):
    """Each line of the README's bash blocks is run here as written, or is
    one that .ci/run runs (the install and test commands; the main
    command, which tests/test_demo.py runs too). The checkpoint commands run
    in a folder holding the files they name: a float checkpoint with an
    embedding (model.safetensors) and a ComfyUI scaled-fp8 one
    (comfy-fp8.safetensors); then the load_checkpoint block loads the
    converted file into a model of that architecture. The seed sweep runs
    from the repository root over 2 seeds instead of the README's 20."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    pytest.importorskip("safetensors", reason="safetensors is not installed")
    from safetensors.torch import save_file

    import fp8q.torch as fpt
    from checkpoint_layouts import layout, save, tiny

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(16, 64)
            self.proj = torch.nn.Linear(64, 128)
            self.head = torch.nn.Linear(128, 16)

    torch.manual_seed(0)
    save_file(Net().state_dict(), str(tmp_path / "model.safetensors"))
    state, _ = layout("comfy-scaled", tiny())
    shutil.move(save(str(tmp_path / "comfy"), state) + "/model.safetensors",
                tmp_path / "comfy-fp8.safetensors")
    run_by_ci = {marked_command("install-command"),
                 marked_command("main-command"),
                 marked_command("test-command")}
    ran = []
    for line in bash_lines():
        if line in run_by_ci:
            continue
        if line.startswith("python tests/seed_sweep.py --seeds 0:20 "):
            result = run_here(line.replace("0:20", "0:2", 1), ROOT)
            assert result.returncode == 0, result.stdout + result.stderr
            assert "| 2 | 0 |" in result.stdout  # 2 seeds, none failed
        else:
            assert line.startswith("python -m fp8q "), line
            result = run_here(line, tmp_path)
            assert result.returncode == 0, (line, result.stderr)
        ran.append(line.split("#")[0].split()[:4])
    assert [words[3] for words in ran if words[:3] == [
        "python", "-m", "fp8q"]] == ["convert", "inspect", "convert"]
    assert (tmp_path / "vllm-fp8.safetensors").is_file()
    model = Net()
    namespace = {"fp8q": __import__("fp8q"), "model": model}
    monkeypatch.chdir(tmp_path)
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        exec(compile(python_blocks()[3], "README.md", "exec"), namespace)
    assert isinstance(model.proj, fpt.Linear)
    assert isinstance(model.head, fpt.Linear)
    assert isinstance(model.embed, torch.nn.Embedding)
    assert str(namespace["report"]) in printed.getvalue()


def test_inline_fp8q_commands_name_real_commands():
    """Commands quoted inline (`python -m fp8q X ...`) name commands the
    command line has."""
    from fp8q._cli._main import _parse

    named = re.findall(r"`python -m fp8q (\w+)", README.read_text("utf-8"))
    assert {"info", "bench", "demo", "convert", "inspect"} >= set(named)
    for command in named:
        with pytest.raises(SystemExit) as exited:
            with contextlib.redirect_stdout(io.StringIO()):
                _parse([command, "--help"])
        assert exited.value.code == 0
