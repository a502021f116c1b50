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


# The FP8Q_PTXAS route (kernels for CUDA 12 drivers): nvcc writes PTX (a
# .version line, lowered by kernels/lower_ptx_version.cmake), ptxas names
# its release and its PTX ISA and "assembles", and the fatbinary beside nvcc
# records how it was asked to pack the images.
FAKE_NVCC_PTX = """#!/bin/sh
case "$1" in
  --version) echo "Cuda compilation tools, release 13.0, V13.0.88" ;;
  --list-gpu-code) printf 'sm_75\\nsm_80\\nsm_86\\nsm_89\\nsm_90\\nsm_100\\nsm_120\\n' ;;
  *) while [ $# -gt 0 ]; do
       [ "$1" = -o ] && printf '.version 9.0\\n.target sm_90\\n' >"$2"; shift
     done ;;
esac
"""

FAKE_PTXAS = """#!/bin/sh
case "$*" in
  --version) echo "Cuda compilation tools, release 12.9, V12.9.86" ;;
  *isa.ptx*) echo "ptxas fatal: Unsupported .version 99.9; current version is '8.8'" >&2
             exit 1 ;;
  *) while [ $# -gt 0 ]; do [ "$1" = -o ] && : >"$2"; shift; done ;;
esac
"""

FAKE_FATBINARY = """#!/bin/sh
printf '%s\\n' "$@" >"$(dirname "$0")/fatbinary.args"
for argument in "$@"; do
  case "$argument" in --create=*) : >"${argument#--create=}" ;; esac
done
"""


def test_the_cuda_12_route_packs_every_image_lz4_compressed(tmp_path):
    """FP8Q_PTXAS's fatbin: every image compressed (--compress-all) in the
    LZ4 `speed` mode, the one CUDA 12.0 drivers read (kernels/README.md,
    "Image size"); no zstd mode, and not uncompressed."""
    tools = tmp_path / "tools"
    tools.mkdir()
    nvcc = script(tools / "nvcc", FAKE_NVCC_PTX)
    ptxas = script(tools / "ptxas", FAKE_PTXAS)
    script(tools / "fatbinary", FAKE_FATBINARY)
    environment = {name: value for name, value in os.environ.items()
                   if name not in ("FP8Q_CUDA_ARCHS", "FP8Q_PREBUILT_FATBIN")}
    build = tmp_path / "build"
    completed = subprocess.run(
        ["cmake", "-S", str(ROOT), "-B", str(build), f"-DCMAKE_CUDA_COMPILER={nvcc}",
         f"-DPython_EXECUTABLE={sys.executable}", "-DFP8Q_CUDA_ARCHS=75;90",
         f"-DFP8Q_PTXAS={ptxas}"],
        env=environment, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "fp8q: ptxas 12.9.86 (PTX ISA 8.8) assembles" in completed.stdout
    completed = subprocess.run(["cmake", "--build", str(build), "--target", "fp8q_fatbin"],
                               env=environment, capture_output=True, text=True,
                               timeout=300)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    arguments = (tools / "fatbinary.args").read_text().splitlines()
    assert "--compress-all" in arguments and "--compress-mode=speed" in arguments, arguments
    assert not [a for a in arguments
                if a.startswith("--compress") and a not in ("--compress-all",
                                                             "--compress-mode=speed")]
    images = [a for a in arguments if a.startswith("--image3=")]
    assert [a.split(",")[:2] for a in images] == [
        ["--image3=kind=elf", "sm=75"], ["--image3=kind=elf", "sm=90"],
        ["--image3=kind=ptx", "sm=90"]], arguments
