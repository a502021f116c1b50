"""docs/examples/quickstart.ipynb runs top to bottom (issue 24, item 5):
executed with nbclient in a fresh kernel, on the CPU here (its GPU step
says it was skipped), in a temporary folder for the file it saves. Skips
without nbclient, ipykernel, torch or safetensors."""
import pathlib

import pytest

pytest.importorskip("torch", reason="PyTorch is not installed")
pytest.importorskip("safetensors", reason="safetensors is not installed")
nbformat = pytest.importorskip(
    "nbformat", reason="nbformat is not installed (pip install nbclient "
                       "ipykernel)")
nbclient = pytest.importorskip(
    "nbclient", reason="nbclient is not installed (pip install nbclient "
                       "ipykernel)")
pytest.importorskip("ipykernel", reason="ipykernel is not installed (pip "
                                        "install ipykernel)")

NOTEBOOK = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "examples"
            / "quickstart.ipynb")


def outputs(cell):
    """The text a code cell printed (stdout and stderr) or returned."""
    parts = []
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream":
            parts.append(output["text"])
        elif output["output_type"] == "execute_result":
            parts.append(output["data"].get("text/plain", ""))
    return "".join(parts)


def test_quickstart_notebook_runs_on_the_cpu(tmp_path):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(cell.get("outputs") for cell in notebook.cells
                   if cell.cell_type == "code"), "commit it without outputs"
    client = nbclient.NotebookClient(
        notebook, timeout=600, kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError naming the failing cell
    text = "\n".join(outputs(cell) for cell in notebook.cells
                     if cell.cell_type == "code")
    assert "running on cpu" in text
    assert ("fp8q.torch.quantize: 5 Linear layers quantized; left in "
            "float: 1 Embedding, 2 LayerNorm; weights") in text
    comparisons = [line for line in text.splitlines()
                   if line.startswith("W8A8, ")]  # dynamic, then static
    assert len(comparisons) == 2, text
    for line in comparisons:
        assert float(line.split("relative error ")[1].split(",")[0]) < 0.1, \
            line
        assert float(line.split("mean cosine ")[1]) > 0.99, line
    assert "reloaded bit for bit: True" in text
    assert "no GPU here: the GPU step was skipped" in text
    assert (tmp_path / "quickstart-fp8.safetensors").is_file()
