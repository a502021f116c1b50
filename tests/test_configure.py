"""A source build says what it will do before it does it (CMakeLists.txt):
the nvcc it found and where, the architectures and a time estimate; with a
GPU visible, FP8Q_CUDA_ARCHS=auto (the default) builds for that GPU only.

CMake's configure step runs against a fake nvcc (a script that answers
--version and --list-gpu-code and "compiles" the probe) and a fake
nvidia-smi; nothing is compiled.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"),
                       reason="the fake nvcc and nvidia-smi are shell scripts"),
    pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake"),
    pytest.mark.skipif(not (ROOT / "CMakeLists.txt").is_file(),
                       reason="needs the source tree (CMakeLists.txt)"),
]

FAKE_NVCC = """#!/bin/sh
case "$1" in
  --version) echo "Cuda compilation tools, release 12.8, V12.8.93" ;;
  --list-gpu-code) printf 'sm_75\\nsm_80\\nsm_86\\nsm_89\\nsm_90\\nsm_100\\nsm_120\\n' ;;
  *) while [ $# -gt 0 ]; do [ "$1" = -o ] && : >"$2"; shift; done ;;
esac
"""

FAKE_NVIDIA_SMI = """#!/bin/sh
echo 9.0
"""


def script(path, text):
    path.write_text(text)
    path.chmod(0o755)
    return path


def configure(tmp_path, with_gpu):
    """The configure step's output with the fake nvcc (and the fake
    nvidia-smi first on PATH when with_gpu)."""
    tools = tmp_path / "tools"
    tools.mkdir()
    nvcc = script(tools / "nvcc", FAKE_NVCC)
    if with_gpu:
        script(tools / "nvidia-smi", FAKE_NVIDIA_SMI)
    environment = {name: value for name, value in os.environ.items()
                   if name not in ("FP8Q_CUDA_ARCHS", "FP8Q_PREBUILT_FATBIN")}
    environment["PATH"] = f"{tools}{os.pathsep}{environment['PATH']}"
    completed = subprocess.run(
        ["cmake", "-S", str(ROOT), "-B", str(tmp_path / "build"),
         f"-DCMAKE_CUDA_COMPILER={nvcc}", f"-DPython_EXECUTABLE={sys.executable}"],
        env=environment, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return nvcc, completed.stdout


def test_configure_names_nvcc_the_architectures_and_the_time(tmp_path):
    if shutil.which("nvidia-smi"):
        pytest.skip("a real nvidia-smi is on PATH: auto would pick its GPUs")
    nvcc, output = configure(tmp_path, with_gpu=False)
    assert (f"fp8q: nvcc 12.8.93 at {nvcc} (from CMAKE_CUDA_COMPILER) will compile "
            "the CUDA kernels for sm_75,sm_80,sm_86,sm_89,sm_90,sm_100,sm_120,"
            "compute_120: about 320 s on 2 cores. FP8Q_CUDA_ARCHS=none skips them"
            in output), output


def test_auto_builds_for_the_visible_gpu(tmp_path):
    nvcc, output = configure(tmp_path, with_gpu=True)
    assert ("fp8q: FP8Q_CUDA_ARCHS=auto: this machine's GPUs are 90 "
            "(FP8Q_CUDA_ARCHS=all builds for every GPU)") in output, output
    assert (f"fp8q: nvcc 12.8.93 at {nvcc} (from CMAKE_CUDA_COMPILER) will compile "
            "the CUDA kernels for sm_90,compute_90: about 80 s") in output, output
