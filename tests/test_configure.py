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
            "compute_120: about 148 s on 2 cores. FP8Q_CUDA_ARCHS=none skips them"
            in output), output


def test_auto_builds_for_the_visible_gpu(tmp_path):
    nvcc, output = configure(tmp_path, with_gpu=True)
    assert ("fp8q: FP8Q_CUDA_ARCHS=auto: this machine's GPUs are 90 "
            "(FP8Q_CUDA_ARCHS=all builds for every GPU)") in output, output
    assert (f"fp8q: nvcc 12.8.93 at {nvcc} (from CMAKE_CUDA_COMPILER) will compile "
            "the CUDA kernels for sm_90,compute_90: about 52 s") in output, output


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
for argument in "$@"; do
  case "$argument" in --create=*) name=$(basename "${argument#--create=}") ;; esac
done
printf '%s\\n' "$@" >"$(dirname "$0")/$name.args"
for argument in "$@"; do
  case "$argument" in --create=*) : >"${argument#--create=}" ;; esac
done
"""


def test_the_cuda_12_route_packs_the_cubins_lz4_and_the_ptx_apart_zstd(tmp_path):
    """FP8Q_PTXAS's fatbins: the real code's every image compressed
    (--compress-all) in the LZ4 `speed` mode, the one CUDA 12.0 drivers read
    (kernels/README.md, "Image size"), no zstd mode, not uncompressed; the
    PTX alone in its own fatbin, in the zstd `size` mode."""
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
    arguments = (tools / "fp8q_kernels.fatbin.args").read_text().splitlines()
    assert "--compress-all" in arguments and "--compress-mode=speed" in arguments, arguments
    assert not [a for a in arguments
                if a.startswith("--compress") and a not in ("--compress-all",
                                                             "--compress-mode=speed")]
    images = [a for a in arguments if a.startswith("--image3=")]
    assert [a.split(",")[:2] for a in images] == [
        ["--image3=kind=elf", "sm=75"], ["--image3=kind=elf", "sm=90"]], arguments
    arguments = (tools / "fp8q_kernels_ptx.fatbin.args").read_text().splitlines()
    assert [a for a in arguments if a.startswith("--compress")] == [
        "--compress-all", "--compress-mode=size"], arguments
    assert [a.split(",")[:2] for a in arguments if a.startswith("--image3=")] == [
        ["--image3=kind=ptx", "sm=90"]], arguments


# The nvcc route: nvcc records how it was asked to write each fatbin.
FAKE_NVCC_ARGS = """#!/bin/sh
case "$1" in
  --version) echo "Cuda compilation tools, release 13.0, V13.0.88" ;;
  --list-gpu-code) printf 'sm_75\\nsm_80\\nsm_86\\nsm_89\\nsm_90\\nsm_100\\nsm_120\\n' ;;
  *) all="$*"
     while [ $# -gt 0 ]; do
       if [ "$1" = -o ]; then : >"$2"; printf '%s\\n' $all >"$(dirname "$0")/$(basename "$2").args"; fi
       shift
     done ;;
esac
"""


def test_the_nvcc_route_writes_the_cubins_and_the_ptx_apart(tmp_path):
    """Without FP8Q_PTXAS: fp8q_kernels.fatbin from the sm_ gencodes only,
    fp8q_kernels_ptx.fatbin from the newest compute_ one, every image
    zstd-compressed (-Xfatbin=--compress-all --compress-mode=size)."""
    tools = tmp_path / "tools"
    tools.mkdir()
    nvcc = script(tools / "nvcc", FAKE_NVCC_ARGS)
    environment = {name: value for name, value in os.environ.items()
                   if name not in ("FP8Q_CUDA_ARCHS", "FP8Q_PREBUILT_FATBIN")}
    build = tmp_path / "build"
    for command in (["cmake", "-S", str(ROOT), "-B", str(build),
                     f"-DCMAKE_CUDA_COMPILER={nvcc}", f"-DPython_EXECUTABLE={sys.executable}",
                     "-DFP8Q_CUDA_ARCHS=75;90"],
                    ["cmake", "--build", str(build), "--target", "fp8q_fatbin"]):
        completed = subprocess.run(command, env=environment, capture_output=True,
                                   text=True, timeout=300)
        assert completed.returncode == 0, completed.stdout + completed.stderr
    real = (tools / "fp8q_kernels.fatbin.args").read_text().split()
    ptx = (tools / "fp8q_kernels_ptx.fatbin.args").read_text().split()
    assert [a for a in real if a.startswith("arch=")] == [
        "arch=compute_75,code=sm_75", "arch=compute_90,code=sm_90"], real
    assert [a for a in ptx if a.startswith("arch=")] == [
        "arch=compute_90,code=compute_90"], ptx
    assert "--compress-mode=size" in real and "-Xfatbin=--compress-all" not in real
    assert "-Xfatbin=--compress-all" in ptx and "--compress-mode=size" in ptx
