"""`python -m fp8q bench linear --glue` on the CPU with one sample per
layer: every shape, dtype and layer has its row, and the verdict lines on
issue 21's goals are printed. Timings are never asserted. Skips without
torch."""
import subprocess
import sys

import pytest

from helpers import markdown_table

pytest.importorskip("torch", reason="PyTorch is not installed")

LAYERS = ["torch.nn.Linear", "fp8q.torch.Linear W8A8",
          "fp8q.torch.Linear W8A16"]


def test_bench_linear_glue_prints_every_shape_dtype_and_layer():
    completed = subprocess.run(
        [sys.executable, "-m", "fp8q", "bench", "linear", "--device", "cpu",
         "--glue", "--repeats", "1"],
        capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr
    header, rows = markdown_table(completed.stdout)
    assert header == ["tokens", "in -> out", "dtype", "layer",
                      "us per call", "time / nn.Linear's"], completed.stdout
    expected = [(tokens, shape, dtype, layer)
                for tokens, shape in (("1", "64 -> 64"), ("16", "64 -> 64"),
                                      ("1", "256 -> 256"))
                for dtype in ("float32", "bfloat16") for layer in LAYERS]
    assert [tuple(row[:4]) for row in rows] == expected, completed.stdout
    for row in rows:
        assert float(row[4]) > 0, row
        assert row[5].endswith("x"), row
    for scheme, goal in (("W8A8", 4), ("W8A16", 3)):
        for dtype in ("float32", "bfloat16"):
            verdict = (f"fp8q.torch.Linear {scheme} (64 -> 64, 1 token, "
                       f"{dtype}): ")
            lines = [line for line in completed.stdout.splitlines()
                     if line.startswith(verdict)]
            assert len(lines) == 1, completed.stdout
            assert f"nn.Linear's time (goal <= {goal}x: " in lines[0]
    costs = completed.stdout[completed.stdout.index(
        "| fp8q call on torch CPU tensors"):]
    header, rows = markdown_table(costs)
    assert header == ["fp8q call on torch CPU tensors", "us per call"]
    assert [row[0].split(",")[0].split("(")[0] for row in rows] == [
        "fp8q.asarray", "fp8q.cast", "fp8q.cast", "fp8q.quantize",
        "QTensor.dequantize", "fp8q.scaled_mm"], costs
    assert all(float(row[1]) > 0 for row in rows), costs


def test_bench_linear_breakdown_says_why_it_cannot_run_without_a_gpu():
    """--breakdown is a GPU table: without one it says why, in one line,
    and exits 0 (the pieces it times are checked on the fake driver by
    tests/test_cuda_layer_path.py)."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: .ci/gpu-check's breakdown step runs it")
    completed = subprocess.run(
        [sys.executable, "-m", "fp8q", "bench", "linear", "--device", "cuda",
         "--breakdown", "--repeats", "1"],
        capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == (
        "GPU breakdown not run: this PyTorch has no usable CUDA device"), (
        completed.stdout)


def test_weight_only_table_reports_weight_bandwidth_and_share_of_copy():
    """The W8A16 table's rows (fp8q._cli._bench_weight_only.table_lines, the
    GPU bench's printer, here on made-up timings): speed against bf16, the
    weight's GB/s (N x K bytes per call over fp8q's time) and its share of
    the copy bandwidth measured in the same run, for every row."""
    from fp8q._cli._bench_weight_only import table_lines

    rows = [(1, 4096, 4096, 0.0400, 0.0050),
            (16, 14336, 4096, 0.1300, 0.0160)]
    header, cells = markdown_table("\n".join(table_lines(rows, 4000.0)))
    assert header[-3:] == ["speed vs bf16", "weight GB/s", "% of copy"]
    assert [row[:3] for row in cells] == [["1", "4096", "4096"],
                                          ["16", "14336", "4096"]]
    # 4096 * 4096 bytes in 5 us: 3355 GB/s, 84% of 4000 GB/s; 14336 *
    # 4096 bytes in 16 us: 3670 GB/s, 92%.
    assert [row[-3:] for row in cells] == [["8.00x", "3355", "84%"],
                                           ["8.12x", "3670", "92%"]]


@pytest.mark.parametrize("module", ["_bench_cast_gpu", "_bench_gemm_gpu"])
def test_gpu_bench_halves_say_why_they_cannot_run(monkeypatch, module):
    """The GPU halves of `bench cast` and `bench gemm` refuse with
    RuntimeError and the reason: without a CUDA device, fp8q._cli._bench_gpu
    unavailable_reason's sentence; without PyTorch, that it is needed."""
    import importlib

    import torch

    measure = importlib.import_module(f"fp8q._cli.{module}").measure
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError,
                       match="^this PyTorch has no usable CUDA device$"):
        measure(1)
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch fails
    with pytest.raises(RuntimeError, match=r"^needs PyTorch \(for the peers "
                       r"and CUDA events\)$"):
        measure(1)
