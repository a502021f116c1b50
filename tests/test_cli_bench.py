"""`python -m fp8q bench`'s options: each refused value is one line on
stderr naming the option, exit status 2, nothing run; --size is checked
only where a benchmark reads it; a --size past memory is one line too."""
import subprocess
import sys

import pytest

from fp8q._cli import _main


def run_bench(*arguments):
    return subprocess.run([sys.executable, "-m", "fp8q", "bench",
                           *map(str, arguments)],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf"])
def test_time_limit_must_be_finite_and_positive(value):
    result = run_bench("model", "--device", "cpu", "--time-limit", value)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        "fp8q bench: --time-limit must be a finite number of seconds > 0, "
        f"not {value}\n")
    assert result.stdout == ""


@pytest.mark.parametrize("what, size, message", [
    ("cast", 100, "--size must be >= 1024"),
    ("calib", 1023, "--size must be >= 1024"),
    ("cast", _main.MAX_SIZE + 1, "--size must be >= 1024"),
    ("gemm", 100, "--repeats must be >= 1, not 0")])
def test_refused_sizes_and_repeats_are_one_line(what, size, message):
    result = run_bench(what, "--device", "cpu", "--size", size,
                       "--repeats", "0" if what == "gemm" else "1")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"fp8q bench: {message}")
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("what, device, runs", [
    ("gemm", "cpu", "_bench_gemm.print_gemm_benchmark"),
    ("linear", "cpu", "_bench_linear.print_linear_benchmark"),
    ("model", "cpu", "_bench_model.print_model_benchmark"),
    ("cast", "cuda", "_bench_cast_gpu.print_gpu_cast_benchmark")])
def test_size_is_not_checked_where_it_is_not_read(monkeypatch, what, device,
                                                  runs):
    """gemm, linear, model and the GPU cast table have their own shapes:
    a --size below 1024 does not stop them (it once did)."""
    module, function = runs.split(".")
    called = []
    monkeypatch.setattr(getattr(_main, module), function,
                        lambda *arguments: called.append(arguments))
    assert _main.main(["bench", what, "--device", device, "--size", "100",
                       "--repeats", "1"]) == 0
    assert len(called) == 1


@pytest.mark.parametrize("what", ["cast", "calib"])
def test_a_size_past_memory_is_one_line(what):
    """_main.MAX_SIZE float32 elements are 2**61 bytes, more than any
    machine maps: a MemoryError, reported as one line naming --size."""
    result = run_bench(what, "--device", "cpu", "--size", _main.MAX_SIZE,
                       "--repeats", "1")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(
        f"fp8q bench: --size {_main.MAX_SIZE}: not enough memory for the "
        f"arrays of bench {what}")
    assert result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
