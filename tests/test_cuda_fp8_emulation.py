"""The kernels' host-and-device code against fp8q's codec, run on the host
through cuda_fp8.h / cuda_fp16.h / cuda_bf16.h's host code (NVIDIA's
software emulation of the conversion instructions, not the GPU:
tests/test_cuda_ops.py checks the GPU): kernels/fp8_hardware.cuh and
elements.cuh (the saturating E4M3FN / E5M2 encodes the kernels use on
sm_89+, one and four at a time, the FP8 codes of a quotient without the
division, four codes decoded to float16, four float32 values stored as
float16 / bfloat16 in pairs), the straight casts' loops
(kernels/straight_cast.cuh) and the per-row quantize's loop
(kernels/quantize_rows_loop.cuh). Needs a C++ compiler and cuda_fp8.h
(CUDA_HOME, CUDA_PATH or /usr/local/cuda); skips otherwise.
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


def build_and_run(tmp_path, source):
    """Compiles tests/<source> against cuda_fp8.h and the kernels' headers
    and runs it: its CompletedProcess (skips without cuda_fp8.h or a C++
    compiler)."""
    include = cuda_include()
    compiler = (shutil.which(os.environ.get("CXX", "c++"))
                or shutil.which("g++"))
    if include is None or compiler is None:
        pytest.skip("needs cuda_fp8.h and a C++ compiler")
    program = tmp_path / Path(source).stem
    subprocess.run([compiler, "-O2", f"-I{include}", f"-I{ROOT / 'csrc'}",
                    f"-I{ROOT / 'kernels'}", str(ROOT / "tests" / source),
                    "-o", str(program)],
                   check=True, capture_output=True, text=True)
    return subprocess.run([str(program)], capture_output=True, text=True,
                          timeout=300)


def assert_required_checks_pass(completed, count):
    """The program exited 0 and printed `count` lines "MUST ...", each
    ending ": 0 mismatches"."""
    assert completed.returncode == 0, completed.stdout + completed.stderr
    required = [line for line in completed.stdout.splitlines()
                if line.startswith("MUST")]
    assert len(required) == count and all(
        line.endswith(": 0 mismatches") for line in required), completed.stdout


def test_hardware_encodes_match_the_codec_under_emulation(tmp_path):
    assert_required_checks_pass(
        build_and_run(tmp_path, "cuda_fp8_emulation.cpp"), 16)


def test_straight_cast_loops_match_the_codec_under_emulation(tmp_path):
    """kernels/straight_cast.cuh's loops (fp8q_cast_to_fp8 and
    fp8q_cast_from_fp8), run on the host for every thread of grids of 1 to
    257 threads over aligned and unaligned runs, with no scale, one scale,
    row and block scales (non-finite ones included): every element the
    codec's cast of it, nothing written outside the run, the amax exact;
    and with infinity_to_nan (one scale): each infinity the format's NaN
    code with its sign (the program fails if it met no infinity). And
    fp8q_cast_from_fp8_wide's loop (16 codes a thread): every code of both
    formats in every position of a vector, each scaling and destination,
    grids of 1 and 3 threads and of one vector a thread, its takes and
    its grid."""
    completed = build_and_run(tmp_path, "straight_cast_emulation.cpp")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    lines = completed.stdout.splitlines()
    assert "fp8q_cast_to_fp8's loop: 0 mismatches" in lines, completed.stdout
    assert "fp8q_cast_from_fp8's loop: 0 mismatches" in lines, completed.stdout
    assert "fp8q_cast_from_fp8_wide's loop: 0 mismatches" in lines, (
        completed.stdout)
    assert "codes decoded by the wide loop: 512 of 512" in lines, (
        completed.stdout)


def test_quantize_rows_loop_matches_the_codec_under_emulation(tmp_path):
    """kernels/quantize_rows_loop.cuh's two loops (fp8q_quantize_rows and,
    for the cases it takes, fp8q_quantize_rows_warps), each block run on
    the host as fibers between its barriers and, for the warp loop, its
    warps' shuffles (exchanges among a warp's 32 fibers), grids below, at and above
    the row count, rows of 1 to 16384 elements, aligned and not, random
    values, random bit patterns (NaN payloads), subnormals and specials,
    threads in random orders between barriers, every source,
    format, saturate and power_of_2: each row's scale and codes those of
    the contract through the codec, nothing written outside them."""
    assert_required_checks_pass(
        build_and_run(tmp_path, "quantize_rows_emulation.cpp"), 5)


def test_gemv_pipeline_walk_and_split_under_emulation(tmp_path):
    """kernels/gemv_pipeline.cuh, the weight-only tensor-core kernel's copy
    pipeline and its cut of k, against a model of asynchronous copies that
    land at random moments before the wait that covers them: every chunk
    read once, in order, with its own codes, no stage overwritten before it
    is read, for 2 to 5 stages and 0 to 40 chunks; the walk that waits for
    one group fewer is caught; splits and warps cover the chunks of every k
    once, splits on 128-value boundaries; sm_75's register walk uses every
    chunk once, in order. Plain C++ (no CUDA header), so it never skips
    where a C++ compiler is."""
    compiler = (shutil.which(os.environ.get("CXX", "c++"))
                or shutil.which("g++"))
    if compiler is None:
        pytest.skip("needs a C++ compiler")
    program = tmp_path / "gemv_pipeline_emulation"
    subprocess.run([compiler, "-O2", f"-I{ROOT / 'kernels'}",
                    str(ROOT / "tests" / "gemv_pipeline_emulation.cpp"),
                    "-o", str(program)],
                   check=True, capture_output=True, text=True)
    assert_required_checks_pass(
        subprocess.run([str(program)], capture_output=True, text=True,
                       timeout=300), 4)
