"""kernels/fp8_hardware.cuh (the saturating E4M3FN / E5M2 encodes the
kernels use on sm_89+, one and four at a time, the FP8 codes of a quotient
without the division, and four codes decoded to float16) against fp8q's codec, run on the host through
cuda_fp8.h's host code: NVIDIA's software emulation of cvt.rn.satfinite,
not the GPU instruction (tests/test_cuda_ops.py checks the GPU). Needs a
C++ compiler and cuda_fp8.h (CUDA_HOME, CUDA_PATH or /usr/local/cuda);
skips otherwise.
"""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def cuda_include():
    for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                 "/usr/local/cuda"):
        if base and (Path(base) / "include" / "cuda_fp8.h").is_file():
            return Path(base) / "include"
    return None


def test_hardware_encodes_match_the_codec_under_emulation(tmp_path):
    include = cuda_include()
    compiler = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")
    if include is None or compiler is None:
        pytest.skip("needs cuda_fp8.h and a C++ compiler")
    program = tmp_path / "emulation"
    subprocess.run([compiler, "-O2", f"-I{include}", f"-I{ROOT / 'csrc'}",
                    f"-I{ROOT / 'kernels'}",
                    str(ROOT / "tests" / "cuda_fp8_emulation.cpp"), "-o",
                    str(program)], check=True, capture_output=True, text=True)
    completed = subprocess.run([str(program)], capture_output=True,
                               text=True, timeout=300)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    required = [line for line in completed.stdout.splitlines()
                if line.startswith("MUST")]
    assert len(required) == 14 and all(line.endswith(": 0 mismatches")
                                      for line in required), completed.stdout
