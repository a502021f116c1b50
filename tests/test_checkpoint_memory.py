"""A small version of the memory figure in docs/benchmarks.md: loading a
synthesized FP8 checkpoint into a meta-device model grows the process's
peak resident memory by at most 1.25 x the checkpoint plus its float
tensors (docs/examples/checkpoint_memory.py, in a fresh process)."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
if not sys.platform.startswith("linux"):
    pytest.skip("reads /proc/self/status", allow_module_level=True)

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "docs", "examples",
                      "checkpoint_memory.py")


def test_loading_stays_within_the_memory_bound(tmp_path):
    for command in (["write", tmp_path, "--layers", "24", "--hidden",
                     "2048"], ["load", tmp_path]):
        result = subprocess.run([sys.executable, SCRIPT, *map(str, command)],
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
    assert "24 x float8_e4m3fn, row scales, W8A16" in result.stdout
