"""Shared test data and helpers for the pytest suite: the FP8 formats with
their ml_dtypes types and largest finite values, NumPy dtypes by fp8q name,
exactly representable random values and bit-for-bit comparison.

Imported as `helpers` (pytest's default import mode puts tests/ on sys.path).
"""
import sys
import threading

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


# --------------------------------------------------------------------------
# Error bounds of FP8 matrix products on GPUs (docs/numerics.md)

# Mantissa bits the FP8 tensor cores' accumulator keeps between promotions
# to float32. Hopper's is measured at about 13-14 (DeepSeek-V3 report, sec.
# 3.3.2); 13, the lower end, with truncation rather than rounding, is the
# conservative model.
ACCUMULATOR_BITS = 13
# Products between two promotions of the partial sum into float32 when fast
# accumulation is off (fp8q's default, use_fast_accum=False): one WGMMA
# instruction covers 32 products on Hopper and the promotion interval
# recommended there is 4 of them (DeepSeek-V3, sec. 3.3.2); cuBLASLt does
# not document its own, so the model takes the larger, 128. With
# use_fast_accum=True nothing is promoted before the end: pass None.
PROMOTION_INTERVAL = 128
# Unit roundoff of each output dtype (half an ulp at 1.0).
OUTPUT_UNIT = {"float32": 2.0 ** -24, "bfloat16": 2.0 ** -8,
               "float16": 2.0 ** -11, "float8_e4m3fn": 2.0 ** -4}


def fp8_matmul_error_bound(abs_products, k, out_dtype, expected,
                           promotion_interval=PROMOTION_INTERVAL):
    """Elementwise bound on |GPU result - CPU result| for one FP8 matrix
    product. abs_products: sum_p |a[i,p]| |b[p,j]| with the scales applied
    (what the result would be on the absolute values), in output units;
    expected: the CPU's result; promotion_interval: products accumulated in
    the narrow register before each float32 promotion (None: all k).

    Accumulation: each addition into the narrow register may lose one unit
    of the ACCUMULATOR_BITS-bit partial sum (truncation), and a partial sum
    holds at most promotion_interval products, so |error| <= min(k,
    interval) 2^-13 sum|a||b|; the float32 promotions and the CPU's own
    float32 sums add k 2^-24 sum|a||b|. Output: each side rounds once into
    out_dtype. An exact path (bit-identical decode) needs no bound."""
    abs_products = np.asarray(abs_products, np.float64)
    narrow = k if promotion_interval is None else min(k, promotion_interval)
    accumulation = (narrow * 2.0 ** -ACCUMULATOR_BITS +
                    k * 2.0 ** -24) * abs_products
    rounding = 2 * OUTPUT_UNIT[out_dtype] * (
        np.abs(np.asarray(expected, np.float64)) + accumulation)
    # The float32 evaluation of abs_products itself (k 2^-24 relative).
    return (accumulation + rounding) * (1 + k * 2.0 ** -23)


def truncated_sum_product(a, b, bits, promotion_interval):
    """a @ b as a tensor core with a `bits`-bit accumulator would compute
    it: every partial sum truncated (toward zero) to `bits` mantissa bits,
    promoted into a float32 sum every `promotion_interval` products. a, b
    float64 holding FP8 values (their products are exact)."""
    def truncate(x):
        mantissa, exponent = np.frexp(x)
        return np.ldexp(np.trunc(mantissa * 2.0 ** (bits + 1)) /
                        2.0 ** (bits + 1), exponent)

    total = np.zeros((a.shape[0], b.shape[1]), np.float32)
    partial = np.zeros(total.shape)
    for p in range(a.shape[1]):
        partial = truncate(partial + np.outer(a[:, p], b[p]))
        if (p + 1) % promotion_interval == 0 or p + 1 == a.shape[1]:
            total = (total + partial.astype(np.float32)).astype(np.float32)
            partial[:] = 0.0
    return total


def markdown_table(text):
    """The first markdown table in `text` (a command's output): (header
    cells, rows of cells), cells stripped; the |---| line is skipped."""
    lines = text.splitlines()
    start = next(index for index, line in enumerate(lines)
                 if line.startswith("|"))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return table[0], table[2:]


def run_threads(n_threads, worker):
    """Runs worker(index) for index in range(n_threads), each on its own
    thread, all released together by a barrier, with sys's switch interval
    at 1e-6 s meanwhile (so the Python parts interleave too; restored
    after); joins them all, then re-raises the first exception any thread
    raised."""
    errors = []
    barrier = threading.Barrier(n_threads)

    def body(index):
        try:
            barrier.wait()
            worker(index)
        except BaseException as error:  # noqa: B902 - re-raised below
            errors.append(error)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=body, args=(index,))
                   for index in range(n_threads)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    if errors:
        raise errors[0]
