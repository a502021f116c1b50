"""The package's shape (python/fp8q): the library never imports the command
line (fp8q._cli: `python -m fp8q`, its benchmarks and demo), and the
command line's entry point is fp8q/__main__.py."""
import subprocess
import sys

import pytest

LIBRARY_USE = """
import sys
import numpy as np
import fp8q, fp8q.calib, fp8q.gemm_tuning
x = np.random.default_rng(0).standard_normal((8, 32), dtype=np.float32)
q = fp8q.quantize(x, "e4m3", granularity="row")
fp8q.dequantize(q)
fp8q.calib.HistogramCalibrator().update(x)
fp8q.info()
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    import fp8q.torch
    model = torch.nn.Sequential(torch.nn.Linear(32, 16))
    fp8q.torch.quantize(model, weights="e4m3", activations="e4m3")
    with torch.inference_mode():
        model(torch.from_numpy(x))
print(sorted(name for name in sys.modules if name.startswith("fp8q.")))
"""


def test_the_library_never_imports_the_command_line():
    result = subprocess.run([sys.executable, "-c", LIBRARY_USE],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    modules = eval(result.stdout.strip().splitlines()[-1])
    assert "fp8q._C" in modules and "fp8q._info" in modules
    assert [name for name in modules if name.startswith("fp8q._cli")] == []


@pytest.mark.parametrize("how", [
    ["-m", "fp8q"],
    ["-c", "import runpy; runpy.run_module('fp8q', run_name='__main__')"]])
def test_python_m_fp8q_is_the_command_line(how):
    """Both run fp8q/__main__.py, whose parser is fp8q._cli._main's: the
    usage line names every command and an unknown one exits 2."""
    result = subprocess.run([sys.executable, *how, "--help"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "usage: python -m fp8q [-h] {info,bench,demo,convert,inspect} ...")
    unknown = subprocess.run([sys.executable, *how, "nonsense"],
                             capture_output=True, text=True, timeout=120)
    assert unknown.returncode == 2
    assert "invalid choice: 'nonsense'" in unknown.stderr
