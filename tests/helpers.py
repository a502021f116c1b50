"""Shared test data and helpers for the pytest suite: the FP8 formats with
their ml_dtypes types and largest finite values, NumPy dtypes by fp8q name,
exactly representable random values and bit-for-bit comparison.

Imported as `helpers` (pytest's default import mode puts tests/ on sys.path).
"""
import ml_dtypes
import numpy as np
import pytest

FP8 = {
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
    "float8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "float8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
}
FP8_MAX = {
    "float8_e4m3fn": 448.0,
    "float8_e5m2": 57344.0,
    "float8_e4m3fnuz": 240.0,
    "float8_e5m2fnuz": 57344.0,
}
FP8_NAMES = list(FP8)
# The dtypes NumPy knows only through ml_dtypes.
ML = ["bfloat16"] + FP8_NAMES

# NumPy 2.1 speaks versioned DLPack (__dlpack__(max_version=, copy=),
# read-only exports); older NumPy (fp8q supports 1.25+) only the legacy one.
needs_numpy_versioned_dlpack = pytest.mark.skipif(
    np.lib.NumpyVersion(np.__version__) < "2.1.0",
    reason=f"needs NumPy >= 2.1 (versioned DLPack); this is NumPy {np.__version__}")


def np_dtype(name):
    return np.dtype(getattr(ml_dtypes, name) if name in ML else name)


def values(name, shape, rng):
    """Random values exactly representable in every float dtype here."""
    if name == "uint8":
        return rng.integers(0, 256, size=shape).astype(np.uint8)
    return (rng.integers(-8, 8, size=shape) / 2).astype(np.float32).astype(
        np_dtype(name))


def same_bits(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def scaled_mm_operands(rng, m, k, n, granularity, b_dtype="float8_e4m3fn"):
    """FP8 a (M, K) and b = w.T (K, N) of random data, quantized with
    fp8q.quantize, and their scales in scaled_mm's shapes: "tensor", "row"
    or "block" (1x128 blocks of a, 128x128 of w)."""
    import fp8q

    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    if granularity == "block":
        qa = fp8q.quantize(x, granularity=(1, 128))
        qw = fp8q.quantize(w, granularity=(128, 128))
        return qa.data, qw.data.T, qa.scale, qw.scale.T
    qa = fp8q.quantize(x, granularity=granularity)
    qw = fp8q.quantize(w, b_dtype, granularity=granularity)
    return (qa.data, qw.data.T, qa.scale,
            qw.scale if granularity == "tensor" else qw.scale.T)
