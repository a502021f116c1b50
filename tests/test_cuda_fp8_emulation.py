"""The kernels' host-and-device code against fp8q's codec, run on the host
through cuda_fp8.h / cuda_fp16.h / cuda_bf16.h's host code (NVIDIA's
software emulation of the conversion instructions, not the GPU:
tests/test_cuda_ops.py checks the GPU): kernels/fp8_hardware.cuh and
elements.cuh (the saturating E4M3FN / E5M2 encodes the kernels use on
sm_89+, one and four at a time, the FP8 codes of a quotient without the
division, four codes decoded to float16, four float32 values stored as
float16 / bfloat16 in pairs), the straight casts' loops
(kernels/straight_cast.cuh), the generic casts' loops
(kernels/generic_cast.cuh, also against ml_dtypes) and the per-row
quantize's loop (kernels/quantize_rows_loop.cuh). Needs a C++ compiler and cuda_fp8.h
(CUDA_HOME, CUDA_PATH or /usr/local/cuda); skips otherwise.
"""
import os
import shutil
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def cuda_include():
    for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                 "/usr/local/cuda"):
        if base and (Path(base) / "include" / "cuda_fp8.h").is_file():
            return Path(base) / "include"
    return None


def build_and_run(tmp_path, source, arguments=()):
    """Compiles tests/<source> against cuda_fp8.h and the kernels' headers
    and runs it with `arguments`: its CompletedProcess (skips without
    cuda_fp8.h or a C++ compiler)."""
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
    return subprocess.run([str(program), *arguments], capture_output=True,
                          text=True, timeout=300)


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
    chunk once, in order. The CUDA-core kernels' split walk (every
    splits-th block step of 4096 values) loads every 16 values of k once,
    each split only its own steps, the unsplit walk the one before the
    split (mutants dropping the split from the stride or the start
    caught); the splits' float32 sums in the kernel's order, added in split
    order, are exact for integer operands and the same bits whatever order
    the splits finish in (adding them as they finish caught). Plain C++ (no
    CUDA header), so it never skips where a C++ compiler is."""
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
                       timeout=300), 8)


CAST_DTYPES = {  # fp8q_dtype values (csrc/core/dtype.h) -> NumPy dtypes
    0: np.dtype(np.float32), 1: np.dtype(np.float16),
    2: np.dtype(ml_dtypes.bfloat16), 3: np.dtype(np.uint8),
    4: np.dtype(ml_dtypes.float8_e4m3fn), 5: np.dtype(ml_dtypes.float8_e5m2),
    6: np.dtype(ml_dtypes.float8_e4m3fnuz),
    7: np.dtype(ml_dtypes.float8_e5m2fnuz)}


def generic_cast_records(path):
    """The records tests/generic_cast_emulation.cpp wrote (write_record):
    dicts of the header's fields, scales, source and destination arrays."""
    data = path.read_bytes()
    offset, records = 0, []
    while offset < len(data):
        header = np.frombuffer(data, np.int64, 11, offset)
        offset += 88
        (source_dtype, destination_dtype, op, saturate, count, row_length,
         block_rows, block_cols, row_stride, col_stride, n_scales) = (
             int(v) for v in header)
        scales = np.frombuffer(data, np.float32, n_scales, offset)
        offset += 4 * n_scales
        source = np.frombuffer(data, CAST_DTYPES[source_dtype], count, offset)
        offset += source.nbytes
        result = np.frombuffer(data, CAST_DTYPES[destination_dtype], count,
                               offset)
        offset += result.nbytes
        records.append(dict(
            source_dtype=source_dtype, destination_dtype=destination_dtype,
            multiply=op == 1, saturate=bool(saturate), row_length=row_length,
            block_rows=block_rows, block_cols=block_cols,
            row_stride=row_stride, col_stride=col_stride, scales=scales,
            source=source, result=result))
    return records


def oracle_cast(record):
    """kernels/cast.cuh's function of a record by NumPy and ml_dtypes alone:
    the float32 value of each element, divided or multiplied by its scale in
    float32 (a NaN result: the first NaN operand quieted, else 0x7FC00000),
    then ml_dtypes' / NumPy's conversion (FP8 clipped to +-max first when
    saturating, NaN kept; uint8 truncated and clipped, NaN to 0); a
    same-dtype cast without a scale copies the bits. Returns the expected
    array and a mask of the elements whose expected value is a NaN of a
    float destination (their payload is the codec's choice: only NaN-ness is
    compared there)."""
    source, destination = record["source"], record["result"].dtype
    count = source.size
    if record["row_stride"] < 0:
        if source.dtype == destination:
            return source.copy(), np.zeros(count, bool)
        values = source.astype(np.float32)
    else:
        index = np.arange(count)
        row, column = index // record["row_length"], index % record["row_length"]
        group = ((row // record["block_rows"]) * record["row_stride"] +
                 (column // record["block_cols"]) * record["col_stride"])
        scale = record["scales"][group]
        value = source.astype(np.float32)
        with np.errstate(all="ignore"):
            values = value * scale if record["multiply"] else value / scale
        value_bits, scale_bits = value.view(np.uint32), scale.view(np.uint32)
        nan_bits = np.where(
            (value_bits & 0x7FFFFFFF) > 0x7F800000, value_bits,
            np.where((scale_bits & 0x7FFFFFFF) > 0x7F800000, scale_bits,
                     np.uint32(0x7FC00000))) | np.uint32(0x00400000)
        values = np.where(np.isnan(values), nan_bits.view(np.float32), values)
    with np.errstate(all="ignore"):
        if destination == np.uint8:
            cleaned = np.where(np.isnan(values), np.float32(0), values)
            expected = np.trunc(np.clip(cleaned, 0, 255)).astype(np.uint8)
        elif destination.name.startswith("float8") and record["saturate"]:
            limit = np.float32(ml_dtypes.finfo(destination).max)
            expected = np.where(np.isnan(values), values,
                                np.clip(values, -limit, limit)).astype(destination)
        else:
            expected = values.astype(destination)
    float_destination = destination in (np.float32, np.float16,
                                        ml_dtypes.bfloat16)
    return expected, float_destination & np.isnan(expected.astype(np.float32))


def test_generic_cast_loops_match_ml_dtypes_and_the_codec(tmp_path):
    """kernels/generic_cast.cuh's loops (fp8q_cast_uniform's compact loop,
    fp8q_cast's compiled pairs and compact loop), run on the host for every
    thread of grids of 1, 3 and 257 threads over aligned and unaligned
    runs, for all 64 (source, destination) pairs of the 8 cast dtypes, with
    no scale, one scale, row, column and block scales (vectors in one group
    and straddling two; zero, negative and non-finite scales among them),
    divide and multiply, saturating or not, the amax asked for or not:
    every element the codec's cast, nothing written outside the run, the
    amax exact. Then one case per pair, layout, operation and saturation
    checked against ml_dtypes / NumPy (oracle_cast), bit for bit."""
    ml_dtypes_cases = tmp_path / "generic_cast_cases.bin"
    completed = build_and_run(tmp_path, "generic_cast_emulation.cpp",
                              [str(ml_dtypes_cases)])
    assert_required_checks_pass(completed, 2)
    records = generic_cast_records(ml_dtypes_cases)
    pairs = {(r["source_dtype"], r["destination_dtype"]) for r in records}
    assert len(pairs) == 64 and len(records) == 64 * 11 * 4 - 64 * 3 * 2
    checked = 0
    for record in records:
        expected, nan_only = oracle_cast(record)
        got = record["result"]
        got_bits = got.view(f"u{got.dtype.itemsize}")
        expected_bits = expected.view(f"u{expected.dtype.itemsize}")
        differ = np.flatnonzero((got_bits != expected_bits) & ~nan_only)
        nan_lost = np.flatnonzero(nan_only & ~np.isnan(got.astype(np.float32)))
        assert differ.size == 0 and nan_lost.size == 0, (
            f"{record['source'].dtype} -> {got.dtype}, multiply "
            f"{record['multiply']}, saturate {record['saturate']}, strides "
            f"{record['row_stride']} / {record['col_stride']}: elements "
            f"{differ[:6].tolist()} {nan_lost[:6].tolist()} got "
            f"{got_bits[differ[:6]].tolist()}, expected "
            f"{expected_bits[differ[:6]].tolist()}")
        checked += got.size
    assert checked > 64 * 1000
