"""Scenarios of the GPU backend's switches (csrc/cuda/switches.h) and of
the paths fp8q.info() reports, each run in a fresh interpreter on the fake
CUDA driver and cuBLASLt by tests/test_cuda_switches.py (FAKE_CUDA_CC and
the switches set by the test). Each function raises AssertionError on
failure.
"""
import os

import numpy as np

import fp8q
from fake_gpu_scenarios import calls, close, log_lines, matmul_log, operands

ONE = "one cuBLASLt call"
ONE_PADDED = "one cuBLASLt call on operands padded to multiples of 16"
FP8 = "cuBLASLt FP8 product + epilogue kernel"
FP8_PADDED = ("cuBLASLt FP8 product of operands padded to multiples of 16 + "
              "epilogue kernel")
BFLOAT16 = "bfloat16 product of the decoded codes + epilogue kernel"
FLOAT32 = "float32 product of block-scaled operands + epilogue kernel"

# (granularity, K, N, out_dtype) of an M = 4 product: aligned operands of
# each mode, K not a multiple of 16 where padding pays (Kp = 48 <= 2 x 40)
# and where it does not (Kp = 16 > 2 x 4), N not a multiple of 16, and an
# FP8 result (with a GPU scale_result and amax_out).
CASES = [("tensor", 64, 32, "bfloat16"), ("row", 64, 32, "bfloat16"),
         ("block", 256, 32, "bfloat16"), ("row", 40, 32, "bfloat16"),
         ("row", 4, 32, "bfloat16"), ("tensor", 64, 40, "bfloat16"),
         ("row", 64, 32, "float8_e4m3fn")]
# The path of each case, by compute capability and the switch's setting
# ("no-fp8" is FP8Q_CUDA_NO_FP8_TENSOR_CORES=1, the others
# FP8Q_CUDA_SCALED_MM_PATH's values). Rowwise and blockwise one calls need
# sm_90 (the fake's cuBLASLt is 13.10).
EXACT = (BFLOAT16, BFLOAT16, FLOAT32, BFLOAT16, BFLOAT16, BFLOAT16,
         BFLOAT16)
PATHS = {
    ("9.0", "auto"): (ONE, ONE, ONE, ONE_PADDED, BFLOAT16, FP8_PADDED, ONE),
    ("9.0", "padded"): (ONE_PADDED, ONE_PADDED, ONE_PADDED, ONE_PADDED,
                        ONE_PADDED, FP8_PADDED, ONE_PADDED),
    ("9.0", "epilogue"): (FP8, FP8, FLOAT32, FP8_PADDED, BFLOAT16,
                          FP8_PADDED, FP8),
    ("9.0", "exact"): EXACT,
    ("9.0", "no-fp8"): EXACT,
    ("8.9", "auto"): (ONE, FP8, FLOAT32, FP8_PADDED, BFLOAT16, FP8_PADDED,
                      FP8),
    ("8.9", "padded"): (ONE_PADDED, FP8_PADDED, FLOAT32, FP8_PADDED,
                        FP8_PADDED, FP8_PADDED, FP8_PADDED),
    ("8.9", "epilogue"): (FP8, FP8, FLOAT32, FP8_PADDED, BFLOAT16,
                          FP8_PADDED, FP8),
    ("8.9", "exact"): EXACT,
    ("8.9", "no-fp8"): EXACT,
}
# cuBLASLt's type numbers in the fake's log (A and B: the operands it
# multiplies; D: its result).
LT_TYPES = {"float32": "0", "bfloat16": "14", "float8_e4m3fn": "28",
            "float8_e5m2": "29"}


def setting():
    """The switch this interpreter runs under, as PATHS names it."""
    if os.environ.get("FP8Q_CUDA_NO_FP8_TENSOR_CORES") == "1":
        return "no-fp8"
    return os.environ.get("FP8Q_CUDA_SCALED_MM_PATH") or "auto"


def expected_work(path, granularity, out_dtype):
    """What the fake logs for a product along `path`: (cuBLASLt's A, B and D
    types, the pad kernel launched, the epilogue kernel launched)."""
    if path in (BFLOAT16, FLOAT32):
        operand = LT_TYPES["bfloat16" if path == BFLOAT16 else "float32"]
        return operand, operand, LT_TYPES["float32"], False, True
    a_type = LT_TYPES["float8_e5m2" if granularity == "tensor"
                      else "float8_e4m3fn"]
    one_call = path in (ONE, ONE_PADDED)
    return (a_type, LT_TYPES["float8_e4m3fn"],
            LT_TYPES[out_dtype if one_call else "float32"],
            path in (ONE_PADDED, FP8_PADDED), not one_call)


def scaled_mm_takes_the_switched_path():
    """Each case takes the path PATHS gives for this GPU and switch: the
    path fp8q records (fp8q._C._scaled_mm_paths()), the cuBLASLt product
    and the pad and epilogue kernels the fake logs; results as the CPU's
    within the bounds of the other scenarios, amax_out too."""
    rng = np.random.default_rng(40)
    paths = PATHS[os.environ["FAKE_CUDA_CC"], setting()]
    for (granularity, k, n, out_dtype), path in zip(CASES, paths):
        case = (granularity, k, n, out_dtype)
        a, b, scale_a, scale_b = operands(rng, 4, k, n, granularity)
        keywords, host_keywords = {"out_dtype": out_dtype}, {}
        fp8_out = out_dtype == "float8_e4m3fn"
        if fp8_out:
            keywords["scale_result"] = fp8q.asarray(np.float32(0.3),
                                                    device="cuda")
            keywords["amax_out"] = fp8q.zeros(1, device="cuda")
            host_keywords = {"scale_result": np.float32(0.3),
                             "amax_out": np.zeros(1, np.float32)}
        expected = fp8q.scaled_mm(a, b, scale_a, scale_b,
                                  out_dtype=out_dtype, **host_keywords)
        before = len(log_lines())
        got = fp8q.scaled_mm(a.to("cuda"), b.T.to("cuda").T,
                             scale_a.to("cuda"), scale_b.to("cuda"),
                             **keywords)
        made = calls()[before:]
        mode = {"tensor": "tensorwise", "row": "rowwise",
                "block": "blockwise"}[granularity]
        assert fp8q._C._scaled_mm_paths()["0"][mode] == path, (
            case, fp8q._C._scaled_mm_paths())
        taken = (*matmul_log()[-1][:3], "fp8q_pad" in made,
                 "fp8q_scaled_mm_epilogue" in made)
        assert made.count("cublasLtMatmul") == 1, (case, made)
        assert taken == expected_work(path, granularity, out_dtype), (
            case, path, taken)
        assert close(got, expected, out_dtype), (case, path)
        if fp8_out:
            got_amax = float(keywords["amax_out"].cpu().numpy()[0])
            want_amax = host_keywords["amax_out"][0]
            assert abs(got_amax - want_amax) <= 1e-5 * want_amax, case


def info_reports_the_switched_paths():
    """fp8q.info() shows the switches as set and, per device, the path of
    one small product of each scaling mode: the aligned cases' paths of
    PATHS; cublaslt.scale_modes lists the modes cuBLASLt ran for them."""
    facts = fp8q.info()
    switches = facts["cuda"]["switches"]
    assert switches == {
        "FP8Q_CUDA_NO_FP8_TENSOR_CORES": setting() == "no-fp8",
        "FP8Q_CUDA_GEMM_TUNING": True,
        "FP8Q_CUDA_SCALED_MM_PATH":
            "auto" if setting() == "no-fp8" else setting(),
        "FP8Q_CUDA_FP8_LAYER_PATH": "auto",
        "error": None}, switches
    paths = PATHS[os.environ["FAKE_CUDA_CC"], setting()]
    device, = facts["cuda"]["devices"]
    assert device["ops"]["scaled_mm"] == {
        "tensorwise": "cuda: " + paths[0], "rowwise": "cuda: " + paths[1],
        "blockwise": "cuda: " + paths[2]}, device["ops"]
    # A one call is a product of the scaling mode itself; every other path
    # multiplies unscaled operands.
    accepted = {mode if path in (ONE, ONE_PADDED) else "unscaled"
                for mode, path in zip(("tensorwise", "rowwise", "blockwise"),
                                      paths[:3])}
    order = ["unscaled", "tensorwise", "rowwise", "blockwise"]
    assert facts["cublaslt"]["scale_modes"] == {"0": {
        "accepted": sorted(accepted, key=order.index), "refused": []}}, (
        facts["cublaslt"]["scale_modes"])


def switches_are_read_once():
    """The switches are read at the backend's first use: changing the
    environment afterwards changes neither the path nor what info shows
    (FP8Q_CUDA_SCALED_MM_PATH=exact at the start, on sm_90)."""
    rng = np.random.default_rng(41)
    a, b, scale_a, scale_b = operands(rng, 4, 64, 32, "tensor")
    ga = a.to("cuda")  # the first use
    os.environ["FP8Q_CUDA_SCALED_MM_PATH"] = "auto"
    os.environ["FP8Q_CUDA_NO_FP8_TENSOR_CORES"] = "0"
    fp8q.scaled_mm(ga, b.T.to("cuda").T, scale_a, scale_b)
    assert fp8q._C._scaled_mm_paths()["0"]["tensorwise"] == BFLOAT16
    assert fp8q.info()["cuda"]["switches"]["FP8Q_CUDA_SCALED_MM_PATH"] == (
        "exact")


def refused_values_make_the_backend_unusable():
    """A value a switch does not take: CUDA is unavailable, info says why,
    and the first GPU use raises fp8q.CudaError with the same message."""
    name, value = os.environ["REFUSED"].split("=", 1)
    cuda = fp8q.info()["cuda"]
    assert not cuda["available"], cuda
    assert cuda["reason"] == cuda["switches"]["error"], cuda
    assert cuda["reason"].startswith(
        f"{name}={value} is not one of the values it takes: "
        if len(value) < 32 else
        f"{name} is not one of the values it takes (see docs/scaled_mm.md, "
        "\"Switches\"): its value is longer than 31 bytes"), cuda["reason"]
    try:
        fp8q.zeros(1, device="cuda")
    except fp8q.CudaError as error:
        assert str(error) == cuda["reason"], str(error)
    else:
        raise AssertionError("no CudaError")
