"""fp8q.scaled_mm, fp8q.linear and fp8q.Tensor.reshape against an independent
float64 NumPy reference built from the dequantized operands:

    ref = (decode(a) * scale_a) @ (decode(b) * scale_b) + bias

with decode() the exact ml_dtypes FP8 -> float64 conversion and the scales
expanded to one value per element (tensorwise, rowwise, or the 1x128 blocks
of a and 128x128 blocks of b), everything in float64.

Error bounds (u32 = 2^-24, the float32 unit roundoff). The CPU computes a
float32 product P of float32 operands A', B' (exact decodes; in the blockwise
mode decode * scale rounded once, relative error <= u32 each), then
float32(P * sa * sb + bias) in double, then rounds to out_dtype. Any float32
summation order of K products satisfies |P - A'B'| <= gamma_K |A'| |B'| with
gamma_K = K u32 / (1 - K u32) (Higham, Accuracy and Stability, 3.5), so with
S = |A| @ |B| (the dequantized operands' absolute product):

    |out32 - ref| <= (K + 4) u32 (1 + 1e-3) S + u32 |ref|         (float32)

where the +4 u32 S covers the two operand roundings of the blockwise mode and
the double-precision epilogue (its own error is ~2^-52, negligible), and the
u32 |ref| term the final rounding to float32. A 16-bit output adds one more
rounding of the float32 value, at most u16 |out32| (u16 = 2^-8 for bfloat16,
2^-11 for float16; float16 also has an absolute half-step of 2^-25 below its
normal range). That is a rigorous per-element bound whatever the BLAS does.
On top of it the relative Frobenius error is checked against the targets of
docs/scaled_mm.md: 1e-5 for float32 (random rounding errors give about
sqrt(K) u32 ~ 1e-6 for the K used here) and u16 (+1e-5) for 16-bit outputs.
"""
import math

import ml_dtypes
import re

import numpy as np
import pytest

import fp8q
from helpers import FP8, FP8_MAX, same_bits, scaled_mm_operands

E4M3 = "float8_e4m3fn"
E5M2 = "float8_e5m2"
BLOCK = 128
U32 = 2.0 ** -24
UNIT_ROUNDOFF = {"float32": U32, "bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}
# Absolute error of rounding below the normal range (half the smallest step).
ABSOLUTE = {"float32": 2.0 ** -150, "bfloat16": 2.0 ** -134,
            "float16": 2.0 ** -25}
NP_FLOAT = {"float32": np.float32, "float16": np.float16,
            "bfloat16": ml_dtypes.bfloat16}

# (dtype of a, dtype of b): every pair scaled_mm accepts.
DTYPE_PAIRS = [(E4M3, E4M3), (E4M3, E5M2), (E5M2, E4M3)]


# --------------------------------------------------------------------------
# Data and the float64 reference


def random_fp8(rng, shape, name):
    """Random FP8 values spread over a range of exponents (normals,
    subnormals, zeros), never NaN."""
    values = (rng.standard_normal(shape) *
              np.exp2(rng.integers(-7, 4, size=shape)))
    limit = FP8_MAX[name]
    return np.clip(values, -limit, limit).astype(np.float32).astype(FP8[name])


def random_scales(rng, shape):
    """Positive float32 scales with varied exponents and mantissas."""
    return np.exp2(rng.uniform(-6, -1, size=shape)).astype(np.float32)


def blocks(k, n=None):
    kb = math.ceil(k / BLOCK)
    return kb if n is None else (kb, math.ceil(n / BLOCK))


def scale_shapes(mode, m, k, n):
    if mode == "tensorwise":
        return (), ()
    if mode == "rowwise":
        return (m, 1), (1, n)
    return (m, blocks(k)), blocks(k, n)


def element_scales(scale, rows, cols, block_rows=None, block_cols=None):
    """The float64 scale of every element of a (rows, cols) operand: one
    value, one per row ((rows, 1)), one per column ((1, cols)), or one per
    block of block_rows x block_cols (edge blocks partial)."""
    scale = np.asarray(scale, dtype=np.float64)
    if scale.size == 1:
        return np.full((rows, cols), scale.reshape(()))
    if block_rows is None:
        return np.broadcast_to(scale, (rows, cols))
    full = np.repeat(np.repeat(scale, block_rows, axis=0), block_cols, axis=1)
    return full[:rows, :cols]


def dequantized(a, b, scale_a, scale_b, mode):
    """float64 (a * scale_a, b * scale_b), scales expanded per element."""
    a64 = np.asarray(a).astype(np.float64)
    b64 = np.asarray(b).astype(np.float64)
    (m, k), n = a64.shape, b64.shape[1]
    if mode == "blockwise":
        sa = element_scales(scale_a, m, k, 1, BLOCK)
        sb = element_scales(scale_b, k, n, BLOCK, BLOCK)
    else:
        sa = element_scales(scale_a, m, k)
        sb = element_scales(scale_b, k, n)
    return a64 * sa, b64 * sb


def reference(a, b, scale_a, scale_b, mode, bias=None):
    """(ref, S): the float64 result and |A| @ |B| of the dequantized
    operands."""
    a_deq, b_deq = dequantized(a, b, scale_a, scale_b, mode)
    ref = a_deq @ b_deq
    if bias is not None:
        ref = ref + np.asarray(bias).astype(np.float64)
    return ref, np.abs(a_deq) @ np.abs(b_deq)


def error_bound(ref, magnitude, k, out_dtype):
    """The per-element bound of the module docstring."""
    float32_error = ((k + 4) * U32 * (1 + 1e-3) * magnitude +
                     U32 * np.abs(ref) + ABSOLUTE["float32"])
    if out_dtype == "float32":
        return float32_error
    u16 = UNIT_ROUNDOFF[out_dtype]
    return (float32_error + u16 * (np.abs(ref) + float32_error) +
            ABSOLUTE[out_dtype])


def as_float64(result):
    return np.asarray(result.numpy() if isinstance(result, fp8q.Tensor)
                      else result).astype(np.float64)


def assert_close(result, ref, magnitude, k, out_dtype, context):
    """result within the per-element bound of ref, and the relative
    Frobenius error within the documented target."""
    actual = as_float64(result)
    assert actual.shape == ref.shape, f"{context}: shape {actual.shape}"
    assert np.isfinite(actual).all(), f"{context}: non-finite output"
    error = np.abs(actual - ref)
    bound = error_bound(ref, magnitude, k, out_dtype)
    worst = np.unravel_index(np.argmax(error - bound), error.shape) \
        if error.size else None
    assert (error <= bound).all(), (
        f"{context}: element {worst} is {actual[worst]!r}, reference "
        f"{ref[worst]!r}, error {error[worst]:.3g} > bound "
        f"{bound[worst]:.3g}")
    norm = np.linalg.norm(ref)
    if norm > 0:
        # Below the normal range the absolute half-step is the limit
        # (float16 results of tiny products): allow it on every element.
        floor = math.sqrt(ref.size) * ABSOLUTE[out_dtype] / norm
        relative = np.linalg.norm(actual - ref) / norm
        target = floor + (1e-5 if out_dtype == "float32" else
                          UNIT_ROUNDOFF[out_dtype] + 1e-5)
        assert relative <= target, (
            f"{context}: relative Frobenius error {relative:.3g} > "
            f"{target:.3g}")


def poisoned(shape, out_dtype):
    """An output array whose every element is NaN (0x7F for e4m3fn)."""
    if out_dtype == E4M3:
        return np.full(shape, 0x7F, np.uint8).view(ml_dtypes.float8_e4m3fn)
    return np.full(shape, np.nan, NP_FLOAT[out_dtype])


def case(rng, m, k, n, mode, a_name=E4M3, b_name=E4M3):
    a = random_fp8(rng, (m, k), a_name)
    b = random_fp8(rng, (k, n), b_name)
    shape_a, shape_b = scale_shapes(mode, m, k, n)
    return a, b, random_scales(rng, shape_a), random_scales(rng, shape_b)


def codes(x):
    return np.ascontiguousarray(np.asarray(
        x.numpy() if isinstance(x, fp8q.Tensor) else x)).view(np.uint8)


# --------------------------------------------------------------------------
# Accuracy: every mode, dtype pair, output dtype and bias dtype


SHAPES = [(1, 16, 8), (2, 1, 3), (37, 200, 129), (5, 257, 130),
          (129, 384, 64)]
MODES = ["tensorwise", "rowwise", "blockwise"]
BIASES = [None, "float32", "float16", "bfloat16"]


@pytest.mark.parametrize("a_name, b_name", DTYPE_PAIRS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("m, k, n", SHAPES)
def test_matches_the_float64_reference(m, k, n, mode, a_name, b_name, rng,
                                       seed):
    a, b, scale_a, scale_b = case(rng, m, k, n, mode, a_name, b_name)
    for index, out_dtype in enumerate(["float32", "bfloat16", "float16"]):
        for bias_name in (None, BIASES[1 + index]):
            bias = None
            if bias_name is not None:
                bias = (rng.standard_normal(n) * 4).astype(
                    NP_FLOAT[bias_name])
            context = (f"{mode} {a_name} x {b_name} ({m}, {k}, {n}) -> "
                       f"{out_dtype}, bias {bias_name}, seed={seed}")
            out = poisoned((m, n), out_dtype)
            result = fp8q.scaled_mm(a, b, scale_a, scale_b, bias=bias,
                                    out_dtype=out_dtype, out=out)
            assert result is out, context
            ref, magnitude = reference(a, b, scale_a, scale_b, mode, bias)
            assert_close(out, ref, magnitude, k, out_dtype, context)
            # Without out=: a new fp8q.Tensor with the same values.
            fresh = fp8q.scaled_mm(a, b, scale_a, scale_b, bias=bias,
                                   out_dtype=out_dtype)
            assert isinstance(fresh, fp8q.Tensor), context
            assert fresh.dtype == fp8q.dtype(out_dtype), context
            assert fresh.shape == (m, n), context
            assert_close(fresh, ref, magnitude, k, out_dtype, context)


def test_default_out_dtype_is_bfloat16(rng, seed):
    a, b, scale_a, scale_b = case(rng, 9, 40, 11, "rowwise")
    result = fp8q.scaled_mm(a, b, scale_a, scale_b)
    assert result.dtype == fp8q.bfloat16
    ref, magnitude = reference(a, b, scale_a, scale_b, "rowwise")
    assert_close(result, ref, magnitude, 40, "bfloat16", f"seed={seed}")
    # Given only out=, the result takes out's dtype.
    out = poisoned((9, 11), "float32")
    assert fp8q.scaled_mm(a, b, scale_a, scale_b, out=out) is out
    assert_close(out, ref, magnitude, 40, "float32", f"seed={seed}")


def test_large_exact_multiples_of_the_blocks(rng, seed):
    """Several whole 128-blocks in every dimension, with scales far apart
    from block to block (a misplaced block scale would be obvious)."""
    m, k, n = 256, 512, 384
    a, b, _, _ = case(rng, m, k, n, "blockwise")
    scale_a = np.exp2(rng.integers(-12, 4, size=(m, blocks(k)))).astype(
        np.float32)
    scale_b = np.exp2(rng.integers(-12, 4, size=blocks(k, n))).astype(
        np.float32)
    out = poisoned((m, n), "float32")
    fp8q.scaled_mm(a, b, scale_a, scale_b, out_dtype="float32", out=out)
    ref, magnitude = reference(a, b, scale_a, scale_b, "blockwise")
    assert_close(out, ref, magnitude, k, "float32", f"seed={seed}")


def test_exact_small_products():
    """Small exact integers: every rounding is exact, so the result must be
    exactly the integer product (with scales that are powers of two)."""
    a = np.array([[1, 2, -3], [4, 0.5, 6]], np.float32).astype(
        ml_dtypes.float8_e4m3fn)
    b = np.array([[1, -1], [2, 0.5], [-4, 8]], np.float32).astype(
        ml_dtypes.float8_e5m2)
    expected = (a.astype(np.float64) @ b.astype(np.float64)) * 0.5 * 4
    expected += np.array([1.0, -2.0])
    # Representable in every output dtype (8 significant bits at most).
    assert np.array_equal(expected.astype(ml_dtypes.bfloat16), expected)
    for out_dtype in ("float32", "bfloat16", "float16"):
        result = fp8q.scaled_mm(a, b, 0.5, 4.0, out_dtype=out_dtype,
                                bias=np.array([1.0, -2.0], np.float32))
        assert result.numpy().astype(np.float64).tolist() == \
            expected.tolist(), out_dtype
    rows = fp8q.scaled_mm(a, b, np.array([[2.0], [0.5]], np.float32),
                          np.array([[1.0, 4.0]], np.float32),
                          out_dtype="float32").numpy()
    direct = (a.astype(np.float64) * [[2.0], [0.5]]) @ \
        (b.astype(np.float64) * [[1.0, 4.0]])
    assert rows.tolist() == direct.tolist()


@pytest.mark.parametrize("scale", [
    0.375, np.float32(0.375), np.array(0.375, np.float32),
    np.array([0.375], np.float32), np.array([[0.375]], np.float32),
    np.array([[0.375]], np.float64), [0.375]])
def test_tensorwise_scale_forms_agree(scale, rng, seed):
    a, b, _, _ = case(rng, 13, 70, 17, "tensorwise")
    expected = fp8q.scaled_mm(a, b, np.float32(0.375), np.float32(2.5),
                              out_dtype="float32").numpy()
    actual = fp8q.scaled_mm(a, b, scale, 2.5, out_dtype="float32").numpy()
    assert np.array_equal(actual, expected), f"seed={seed}"
    swapped = fp8q.scaled_mm(a, b, 2.5, scale, out_dtype="float32").numpy()
    ref, magnitude = reference(a, b, 2.5, 0.375, "tensorwise")
    assert_close(swapped, ref, magnitude, 70, "float32", f"seed={seed}")


def test_rowwise_scales_of_other_layouts(rng, seed):
    """Rowwise scales given as strided views and as float64 arrays."""
    m, k, n = 21, 50, 19
    a, b, scale_a, scale_b = case(rng, m, k, n, "rowwise")
    ref, magnitude = reference(a, b, scale_a, scale_b, "rowwise")
    wide_a = np.repeat(scale_a, 3, axis=1)[:, 1:2]         # (m, 1), strided
    wide_b = np.repeat(scale_b, 2, axis=0)[::2]             # (1, n), strided
    column_b = np.ascontiguousarray(scale_b.T).T            # (1, n), F order
    for sa, sb in [(wide_a, wide_b), (scale_a.astype(np.float64), column_b),
                   (fp8q.asarray(scale_a), fp8q.asarray(column_b))]:
        result = fp8q.scaled_mm(a, b, sa, sb, out_dtype="float32")
        assert_close(result, ref, magnitude, k, "float32", f"seed={seed}")


# --------------------------------------------------------------------------
# Empty dimensions


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("m, k, n", [(0, 5, 4), (3, 0, 4), (3, 5, 0),
                                     (0, 0, 0), (1, 0, 200), (130, 0, 1)])
def test_empty_dimensions(m, k, n, mode, rng, seed):
    """An empty inner dimension gives bias (or zeros: an empty sum); an
    empty M or N an empty result."""
    a, b, scale_a, scale_b = case(rng, m, k, n, mode)
    bias = (rng.standard_normal(n) * 4).astype(np.float32)
    context = f"{mode} ({m}, {k}, {n}) seed={seed}"
    plain = fp8q.scaled_mm(a, b, scale_a, scale_b)
    assert plain.shape == (m, n) and plain.dtype == fp8q.bfloat16, context
    assert (plain.numpy().astype(np.float32) == 0).all(), context
    with_bias = fp8q.scaled_mm(a, b, scale_a, scale_b, bias=bias,
                               out_dtype="float32")
    assert np.array_equal(with_bias.numpy(), np.broadcast_to(bias, (m, n))), \
        context
    # out= an fp8q.Tensor (poisoned when it has elements).
    out = fp8q.asarray(poisoned((m, n), "float32")) if m * n else \
        fp8q.empty((m, n), "float32")
    assert fp8q.scaled_mm(a, b, scale_a, scale_b, bias=bias, out=out) is out
    assert np.array_equal(out.numpy(), np.broadcast_to(bias, (m, n))), \
        context


@pytest.mark.parametrize("shape", [(0, 4), (3, 0), (0, 0)])
def test_zero_size_numpy_out(shape):
    """A writable NumPy array with no elements is a valid out= (NumPy gives
    empty arrays zero strides; no two results can share an element)."""
    m, n = shape
    a = np.zeros((m, 5), ml_dtypes.float8_e4m3fn)
    b = np.zeros((5, n), ml_dtypes.float8_e4m3fn)
    out = np.empty(shape, np.float32)
    assert fp8q.scaled_mm(a, b, 1.0, 1.0, out=out) is out


# --------------------------------------------------------------------------
# FP8 output, scale_result and amax_out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("m, k, n", [(1, 16, 8), (37, 200, 129),
                                     (5, 257, 130)])
def test_fp8_output_is_the_cast_of_the_float32_result(m, k, n, mode, rng,
                                                      seed):
    """out = e4m3fn(float32(result) / scale_result), saturating at 448: the
    same float32 result as out_dtype="float32" (the same operands and
    product), then one correctly rounded float32 division and one rounding
    to e4m3fn, which ml_dtypes' float32 -> e4m3fn cast of the clipped
    quotient reproduces bit for bit."""
    a, b, scale_a, scale_b = case(rng, m, k, n, mode, E4M3, E5M2)
    bias = (rng.standard_normal(n) * 2).astype(ml_dtypes.bfloat16)
    context = f"{mode} ({m}, {k}, {n}) seed={seed}"
    result32 = fp8q.scaled_mm(a, b, scale_a, scale_b, bias=bias,
                              out_dtype="float32").numpy()
    ref, magnitude = reference(a, b, scale_a, scale_b, mode, bias)
    assert_close(result32, ref, magnitude, k, "float32", context)
    amax = float(np.abs(result32).max())
    # Half the values of the largest magnitude saturate.
    for scale_result in (np.float32(amax / 448 * 0.5), None,
                         np.float32(amax / 300)):
        out = poisoned((m, n), E4M3)
        amax_out = np.full(1, np.nan, np.float32)
        returned = fp8q.scaled_mm(
            a, b, scale_a, scale_b, bias=bias, out_dtype=E4M3,
            scale_result=scale_result, amax_out=amax_out, out=out)
        assert returned is out, context
        divisor = np.float32(1 if scale_result is None else scale_result)
        quotient = np.clip(result32 / divisor, np.float32(-448),
                           np.float32(448))
        expected = quotient.astype(ml_dtypes.float8_e4m3fn)
        differ = np.flatnonzero(codes(out) != codes(expected))
        assert differ.size == 0, (
            f"{context} scale_result={scale_result}: {differ.size} codes "
            f"differ, first at {differ[:5].tolist()}: got "
            f"{out.ravel()[differ[:5]]}, expected "
            f"{expected.ravel()[differ[:5]]} from "
            f"{result32.ravel()[differ[:5]]}")
        if scale_result is not None and divisor < amax / 448:
            assert (np.abs(expected.astype(np.float32)) == 448).any(), \
                context
        # amax_out: max |result| before scale_result, exactly the float32
        # result's maximum; max is 1-Lipschitz in the largest element error,
        # so it is also within the largest bound of the reference's.
        assert amax_out[0] == np.float32(amax), (
            f"{context}: amax_out {amax_out[0]!r} != {amax!r}")
        assert abs(amax_out[0] - np.abs(ref).max()) <= \
            error_bound(ref, magnitude, k, "float32").max(), context


def test_fp8_output_without_out_and_scale_result_forms(rng, seed):
    a, b, scale_a, scale_b = case(rng, 10, 64, 12, "tensorwise")
    result32 = fp8q.scaled_mm(a, b, scale_a, scale_b,
                              out_dtype="float32").numpy()
    for given in (0.01, np.float32(0.01), np.array([0.01], np.float32),
                  np.array([[0.01]], np.float32)):
        result = fp8q.scaled_mm(a, b, scale_a, scale_b, out_dtype="e4m3",
                                scale_result=given)
        assert result.dtype == fp8q.float8_e4m3fn
        expected = np.clip(result32 / np.float32(0.01), -448, 448).astype(
            np.float32).astype(ml_dtypes.float8_e4m3fn)
        assert np.array_equal(codes(result), codes(expected)), f"seed={seed}"


@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16", "float16"])
def test_amax_out_with_a_float_output(out_dtype, rng, seed):
    a, b, scale_a, scale_b = case(rng, 33, 150, 40, "blockwise", E5M2, E4M3)
    result32 = fp8q.scaled_mm(a, b, scale_a, scale_b,
                              out_dtype="float32").numpy()
    for amax_out in (np.full(1, np.nan, np.float32),
                     np.full((1, 1), np.nan, np.float32),
                     np.full((), np.nan, np.float32)):
        fp8q.scaled_mm(a, b, scale_a, scale_b, out_dtype=out_dtype,
                       amax_out=amax_out)
        assert amax_out.reshape(()) == np.abs(result32).max(), \
            f"{out_dtype} amax_out {amax_out} seed={seed}"


def test_amax_out_sharing_memory_is_refused(rng):
    """amax_out= inside out= (the product would overwrite it: the amax was
    silently lost) or inside an operand or scale is refused, naming it."""
    a, b, scale_a, scale_b = case(rng, 4, 32, 8, "rowwise")
    out = np.zeros((4, 8), np.float32)
    for amax_out, name in ((out[0, :1], "out="),
                           (np.asarray(scale_a)[:1, 0], "scale_a")):
        with pytest.raises(ValueError, match="^scaled_mm: amax_out= must not "
                           f"share memory with {re.escape(name)}$"):
            fp8q.scaled_mm(a, b, scale_a, scale_b, out_dtype="float32",
                           out=out, amax_out=amax_out)
    np.testing.assert_array_equal(out, 0)
    # A NumPy scalar has no memory to write into (the amax was lost).
    with pytest.raises(ValueError, match="amax_out.*numpy.float32"):
        fp8q.scaled_mm(a, b, scale_a, scale_b, out_dtype="float32",
                       amax_out=np.float32(0))


# --------------------------------------------------------------------------
# Layouts


# Shapes around the CPU kernels' tiles and switches for b = w.T
# (docs/scaled_mm.md): rows 1-8 take the few-rows dot products, more the
# packed panels (tiles of 6 rows); columns in panels of 16 and blocks of
# 256; rows of b in blocks of 256 (scales every 128) with tails of 8.
WEIGHT_T_SHAPES = [(1, 4096, 24), (3, 7, 5), (8, 300, 33), (9, 256, 16),
                   (13, 520, 300), (64, 129, 257), (300, 264, 40)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("a_name, b_name", DTYPE_PAIRS)
@pytest.mark.parametrize("m, k, n", WEIGHT_T_SHAPES)
def test_weight_transposed_kernels(m, k, n, mode, a_name, b_name, rng, seed):
    """b = w.T of a row-major weight, the layout fp8q multiplies itself:
    float32 results (new and given) meet the float64 reference, with a
    bias too."""
    a, b, scale_a, scale_b = case(rng, m, k, n, mode, a_name, b_name)
    b_view = np.ascontiguousarray(b.T).T
    bias = (rng.standard_normal(n) * 4).astype(np.float32)
    ref, magnitude = reference(a, b, scale_a, scale_b, mode, bias)
    context = f"{mode} {a_name} x {b_name} ({m}, {k}, {n}) seed={seed}"
    fresh = fp8q.scaled_mm(a, b_view, scale_a, scale_b, bias=bias,
                           out_dtype="float32")
    assert_close(fresh, ref, magnitude, k, "float32", context)
    out = poisoned((m, n), "float32")
    fp8q.scaled_mm(a, b_view, scale_a, scale_b, bias=bias,
                   out_dtype="float32", out=out)
    assert_close(out, ref, magnitude, k, "float32", context)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("m, k, n", [(64, 520, 300), (20, 256, 384)])
def test_thread_count_never_changes_the_product(m, k, n, mode, rng, seed,
                                                restore_threads):
    """The column blocks shrink with more threads (narrow products keep
    every thread busy); each sum still runs in the same order, so the
    results are bit-identical, and correct at every width."""
    a, b, scale_a, scale_b = case(rng, m, k, n, mode)
    b_view = np.ascontiguousarray(b.T).T
    ref, magnitude = reference(a, b, scale_a, scale_b, mode, None)
    results = []
    for threads in (1, 2, 3, 8, 19):
        fp8q.set_num_threads(threads)
        result = fp8q.scaled_mm(a, b_view, scale_a, scale_b,
                                out_dtype="float32").numpy()
        context = f"{mode} ({m}, {k}, {n}) {threads} threads seed={seed}"
        assert_close(result, ref, magnitude, k, "float32", context)
        results.append(result)
    for result in results[1:]:
        np.testing.assert_array_equal(result.view(np.uint32),
                                      results[0].view(np.uint32))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("a_name, b_name", DTYPE_PAIRS)
def test_layouts(mode, a_name, b_name, rng, seed):
    """b as the transposed view of a row-major (N, K) weight (the
    nn.Linear layout), b row-major, b column-strided; a row-major,
    transposed, sliced with steps (also negative) -- every combination
    meets the reference."""
    m, k, n = 23, 260, 135
    a, b, scale_a, scale_b = case(rng, m, k, n, mode, a_name, b_name)
    ref, magnitude = reference(a, b, scale_a, scale_b, mode)
    weight = np.ascontiguousarray(b.T)                     # (N, K) row-major
    big_a = random_fp8(rng, (3 * m, 2 * k + 1), a_name)
    big_a[::-3, 1::2] = a                                  # a, reversed rows
    big_b = random_fp8(rng, (k, 3 * n), b_name)
    big_b[:, ::3] = b
    a_layouts = {"row-major": a, "transposed": np.asfortranarray(a),
                 "steps": big_a[::-3, 1::2], "fp8q.Tensor": fp8q.asarray(a)}
    b_layouts = {"weight.T": weight.T, "row-major": b,
                 "strided": big_b[:, ::3],
                 "fp8q weight.T": fp8q.asarray(weight).T}
    assert np.array_equal(codes(big_a[::-3, 1::2]), codes(a))
    first = None
    for a_label, a_view in a_layouts.items():
        for b_label, b_view in b_layouts.items():
            context = (f"{mode} {a_name} x {b_name} a {a_label}, "
                       f"b {b_label} seed={seed}")
            out = poisoned((m, n), "float32")
            fp8q.scaled_mm(a_view, b_view, scale_a, scale_b,
                           out_dtype="float32", out=out)
            assert_close(out, ref, magnitude, k, "float32", context)
            if first is None:
                first = out
            # Each result is within the bound of the reference; two of them
            # can differ by at most twice that.
            assert (np.abs(out.astype(np.float64) - first) <=
                    2 * error_bound(ref, magnitude, k, "float32")).all(), \
                context


def test_strided_and_foreign_outputs(rng, seed):
    a, b, scale_a, scale_b = case(rng, 7, 90, 9, "rowwise")
    ref, magnitude = reference(a, b, scale_a, scale_b, "rowwise")
    big = np.full((14, 27), np.nan, np.float32)
    view = big[::2, ::3]
    assert fp8q.scaled_mm(a, b, scale_a, scale_b, out=view) is view
    assert_close(view, ref, magnitude, 90, "float32", f"seed={seed}")
    untouched = np.ones(big.shape, bool)
    untouched[::2, ::3] = False
    assert np.isnan(big[untouched]).all(), "wrote outside the out= view"
    transposed = np.full((9, 7), np.nan, ml_dtypes.bfloat16).T
    assert fp8q.scaled_mm(a, b, scale_a, scale_b, out=transposed) is \
        transposed
    assert_close(transposed, ref, magnitude, 90, "bfloat16", f"seed={seed}")
    tensor = fp8q.asarray(np.full((7, 9), np.nan, np.float16))
    assert fp8q.scaled_mm(a, b, scale_a, scale_b, out=tensor) is tensor
    assert_close(tensor, ref, magnitude, 90, "float16", f"seed={seed}")


def test_torch_operands_and_output(rng, seed):
    torch = pytest.importorskip("torch")
    m, k, n = 12, 200, 20
    a, b, scale_a, scale_b = case(rng, m, k, n, "rowwise")
    ref, magnitude = reference(a, b, scale_a, scale_b, "rowwise")
    a_torch = torch.from_numpy(codes(a).copy()).view(torch.float8_e4m3fn)
    weight = torch.from_numpy(np.ascontiguousarray(codes(b).T)).view(
        torch.float8_e4m3fn)                                # (N, K)
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
    returned = fp8q.scaled_mm(a_torch, weight.t(), torch.from_numpy(scale_a),
                              torch.from_numpy(scale_b), out=out)
    assert returned is out
    assert_close(out.float().numpy(), ref, magnitude, k, "bfloat16",
                 f"seed={seed}")


# --------------------------------------------------------------------------
# Errors


def _operands(m=4, k=5, n=3):
    rng = np.random.default_rng(1)
    return random_fp8(rng, (m, k), E4M3), random_fp8(rng, (k, n), E4M3)


@pytest.mark.parametrize("scale_a, scale_b", [
    ((4, 2), ()), ((1, 4), (1, 3)),
    ((4,), (3,)), ((4, 1), (3, 1)), ((1, 1, 1), ()), ((2,), ()),
    ((4, 1), (1, 2)), ((4, 2), (2, 1))])
def test_wrong_scale_shapes_list_the_accepted_ones(scale_a, scale_b):
    a, b = _operands()
    with pytest.raises(ValueError) as raised:
        fp8q.scaled_mm(a, b, np.ones(scale_a, np.float32),
                       np.ones(scale_b, np.float32))
    message = str(raised.value)
    assert "scale_a" in message and "scale_b" in message, message
    for accepted in ("tensorwise", "rowwise (4, 1) and (1, 3), either of "
                     "them may be one value", "blockwise (4, 1) and (1, 1)"):
        assert accepted in message, message


@pytest.mark.parametrize("single_side", ["a", "b"])
def test_rowwise_with_one_value_on_one_side(rng, single_side):
    """Rows of a times one value for b (or the other way round): rowwise,
    the single value repeated."""
    a, b, scale_a, scale_b = case(rng, 6, 48, 10, "rowwise")
    if single_side == "a":
        scale_a = np.float32(0.375)
    else:
        scale_b = np.full((1, 1), 0.375, np.float32)
    ref, magnitude = reference(a, b, scale_a, scale_b, "rowwise")
    result = fp8q.scaled_mm(a, b, scale_a, scale_b, out_dtype="float32")
    assert_close(result, ref, magnitude, 48, "float32", single_side)


def test_out_errors_leave_out_untouched():
    a, b = _operands()
    cases = [
        (np.full((4, 4), np.nan, np.float32), "float32", ValueError),
        (np.full((3, 4), np.nan, np.float32), "float32", ValueError),
        (np.full((4, 3), np.nan, np.float32), "bfloat16", TypeError),
        (np.full((4, 3), np.nan, np.float16), "float32", TypeError),
    ]
    readonly = np.full((4, 3), np.nan, np.float32)
    readonly.flags.writeable = False
    cases.append((readonly, "float32", ValueError))
    cases.append((np.full((4, 3), np.nan, np.float32)[:, :1], "float32",
                  ValueError))
    for out, out_dtype, error in cases:
        with pytest.raises(error, match="out"):
            fp8q.scaled_mm(a, b, 1.0, 1.0, out_dtype=out_dtype, out=out)
        assert np.isnan(out).all()
    # An out= of a dtype scaled_mm never produces.
    with pytest.raises(TypeError):
        fp8q.scaled_mm(a, b, 1.0, 1.0, out=np.zeros((4, 3), np.uint8))
    # Several results on one element: a stride-0 axis.
    overlapping = np.lib.stride_tricks.as_strided(
        np.full(3, np.nan, np.float32), shape=(4, 3), strides=(0, 4),
        writeable=True)
    with pytest.raises(ValueError, match="out"):
        fp8q.scaled_mm(a, b, 1.0, 1.0, out_dtype="float32", out=overlapping)
    assert np.isnan(overlapping).all()


def _read_only(array):
    array.flags.writeable = False
    return array


def _refusals():
    """(id, positional arguments, keywords, exception, message): every
    refusal of scaled_mm reachable on the CPU, for a (4, 5) @ b (5, 3)."""
    a, b = _operands()
    a5, b5 = a.astype(ml_dtypes.float8_e5m2), b.astype(ml_dtypes.float8_e5m2)
    rows, columns = np.ones((4, 1), np.float32), np.ones((1, 3), np.float32)
    bad_rows, bad_columns = rows.copy(), columns.copy()
    bad_rows[2, 0], bad_columns[0, 1] = np.nan, -1.0
    ones = (a, b, 1.0, 1.0)
    not_fp8 = ("must be float8_e4m3fn or float8_e5m2 (quantize it first, "
               "e.g. with fp8q.quantize), got ")
    not_a_tensor = (": expected a Tensor, a NumPy array, a DLPack or "
                    "buffer-protocol object, a number or a nested sequence "
                    "of numbers, got str")
    not_positive = (": every value must be finite and > 0 (it is the "
                    "dequantization scale, x ~= q * scale), but element ")
    out_kinds = ("must be an fp8q.Tensor, or an array fp8q can write in "
                 "place (NumPy array, DLPack producer, writable buffer), of "
                 "dtype ")
    out_dtypes = "bfloat16, float16, float32 or float8_e4m3fn, got "
    amax = ("scaled_mm: amax_out= must be one writable float32 element on "
            "a's device (e.g. numpy.zeros(1, numpy.float32) for CPU "
            "operands), got ")
    return [
        ("a text", ("x", b, 1.0, 1.0), {}, TypeError,
         "scaled_mm: a" + not_a_tensor),
        ("a float32", (a.astype(np.float32), b, 1.0, 1.0), {}, TypeError,
         "scaled_mm: a " + not_fp8 + "float32"),
        ("b uint8", (a, b.view(np.uint8), 1.0, 1.0), {}, TypeError,
         "scaled_mm: b " + not_fp8 + "uint8"),
        ("b e4m3fnuz", (a, b.astype(ml_dtypes.float8_e4m3fnuz), 1.0, 1.0),
         {}, TypeError, "scaled_mm: b " + not_fp8 + "float8_e4m3fnuz"),
        ("a vector", (a[0], b, 1.0, 1.0), {}, ValueError,
         "scaled_mm: a must be a matrix (2 dimensions), got shape (5,)"),
        ("b 3-D", (a, b[None], 1.0, 1.0), {}, ValueError,
         "scaled_mm: b must be a matrix (2 dimensions), got shape "
         "(1, 5, 3)"),
        ("stream on the CPU", ones, {"stream": 0}, ValueError,
         "scaled_mm: stream= applies to CUDA tensors; this call runs on the "
         "CPU (pass stream=None)"),
        ("stream object", ones, {"stream": "s"}, TypeError,
         "scaled_mm: stream: expected None, an int stream handle, or a "
         "stream object (with __cuda_stream__ or .cuda_stream, e.g. "
         "torch.cuda.Stream), got 's'"),
        ("stream negative", ones, {"stream": -1}, ValueError,
         "scaled_mm: stream: the int is not a stream handle (a "
         "pointer-sized int >= 0), got -1"),
        ("both e5m2", (a5, b5, 1.0, 1.0), {}, TypeError,
         "scaled_mm: a and b cannot both be float8_e5m2 (FP8 matrix "
         "multiplies need at least one float8_e4m3fn operand, as the "
         "hardware does)"),
        ("K", (a, b[:4], 1.0, 1.0), {}, ValueError,
         "scaled_mm: a is (4, 5) and b is (4, 3): a's columns must equal "
         "b's rows"),
        ("scale_a text", (a, b, "x", 1.0), {}, TypeError,
         "scaled_mm: scale_a" + not_a_tensor),
        ("scale_a zero", (a, b, 0.0, 1.0), {}, ValueError,
         "scaled_mm: scale_a" + not_positive + "0 (C order) is 0"),
        ("scale_b nan", (a, b, 1.0, np.nan), {}, ValueError,
         "scaled_mm: scale_b" + not_positive + "0 (C order) is nan"),
        ("scale_a row", (a, b, bad_rows, columns), {}, ValueError,
         "scaled_mm: scale_a" + not_positive + "2 (C order) is nan"),
        ("scale_b column", (a, b, rows, bad_columns), {}, ValueError,
         "scaled_mm: scale_b" + not_positive + "1 (C order) is -1"),
        ("scale shapes", (a, b, np.ones(4, np.float32), 1.0), {},
         ValueError,
         "scaled_mm: scale_a, scale_b: shapes (4,) and () do not describe a "
         "scaling of a (4, 5) @ b (5, 3); accepted: tensorwise () and () (or "
         "(1, 1)); rowwise (4, 1) and (1, 3), either of them may be one "
         "value; blockwise (4, 1) and (1, 1) for 1x128 blocks of a and "
         "128x128 blocks of b"),
        ("bias text", ones, {"bias": "x"}, TypeError,
         "scaled_mm: bias" + not_a_tensor),
        ("bias uint8", ones, {"bias": np.ones(3, np.uint8)}, TypeError,
         "scaled_mm: bias must be float32, float16 or bfloat16, got uint8"),
        ("bias length", ones, {"bias": np.ones(4, np.float32)}, ValueError,
         "scaled_mm: bias must be a vector of N = 3 values (one per column "
         "of the result), got shape (4,)"),
        ("bias matrix", ones, {"bias": np.ones((1, 3), np.float32)},
         ValueError,
         "scaled_mm: bias must be a vector of N = 3 values (one per column "
         "of the result), got shape (1, 3)"),
        ("out_dtype e5m2", ones, {"out_dtype": E5M2}, TypeError,
         "scaled_mm: out_dtype must be " + out_dtypes + "float8_e5m2"),
        ("out_dtype unknown", ones, {"out_dtype": "bogus"}, TypeError,
         "scaled_mm: out_dtype must be " + out_dtypes + "'bogus' (str)"),
        ("out_dtype int", ones, {"out_dtype": 3}, TypeError,
         "scaled_mm: out_dtype must be " + out_dtypes + "3 (int)"),
        ("out uint8", ones, {"out": np.zeros((4, 3), np.uint8)}, TypeError,
         "scaled_mm: out= must have dtype " + out_dtypes + "uint8"),
        ("scale_result of bfloat16", ones, {"scale_result": 2.0},
         ValueError,
         "scaled_mm: scale_result applies to an FP8 result "
         "(out_dtype=\"float8_e4m3fn\"), but the result is bfloat16"),
        ("scale_result of out float32", ones,
         {"scale_result": 1.0, "out": np.zeros((4, 3), np.float32)},
         ValueError,
         "scaled_mm: scale_result applies to an FP8 result "
         "(out_dtype=\"float8_e4m3fn\"), but the result is float32"),
        ("scale_result text", ones,
         {"out_dtype": E4M3, "scale_result": "x"}, TypeError,
         "scaled_mm: scale_result" + not_a_tensor),
        ("scale_result two", ones,
         {"out_dtype": E4M3, "scale_result": [1.0, 2.0]}, ValueError,
         "scaled_mm: scale_result must be one float32 value, got 2 values"),
        ("scale_result inf", ones,
         {"out_dtype": E4M3, "scale_result": np.inf}, ValueError,
         "scaled_mm: scale_result" + not_positive + "0 (C order) is inf"),
        ("amax_out float64", ones, {"amax_out": np.zeros(1)}, ValueError,
         amax + "a NumPy array of dtype float64"),
        ("amax_out list", ones, {"amax_out": [0.0]}, ValueError,
         amax + "an object of type list"),
        ("amax_out two", ones, {"amax_out": np.zeros(2, np.float32)},
         ValueError, amax + "a float32 tensor of shape (2,)"),
        ("amax_out float16", ones, {"amax_out": np.zeros(1, np.float16)},
         ValueError, amax + "a float16 tensor of shape (1,)"),
        ("amax_out read-only", ones,
         {"amax_out": _read_only(np.zeros((1, 1), np.float32))}, ValueError,
         amax + "a read-only float32 tensor of shape (1, 1)"),
        ("out list", ones, {"out": [[0.0] * 3] * 4}, TypeError,
         "scaled_mm: out= " + out_kinds + "bfloat16; got an object of type "
         "list"),
        ("out float64", ones,
         {"out": np.zeros((4, 3)), "out_dtype": "float32"}, ValueError,
         "scaled_mm: out= " + out_kinds + "float32; got a NumPy array of "
         "dtype float64"),
        ("out of another dtype", ones,
         {"out": np.zeros((4, 3), np.float32), "out_dtype": "bfloat16"},
         TypeError,
         "scaled_mm: out= must have dtype bfloat16, got a tensor of dtype "
         "float32"),
        ("out shape", ones, {"out": np.zeros((3, 4), np.float32)},
         ValueError,
         "scaled_mm: out= must have the result's shape (4, 3), got shape "
         "(3, 4)"),
        ("out read-only", ones,
         {"out": _read_only(np.zeros((4, 3), np.float32))}, ValueError,
         "scaled_mm: out= must be writable, got a read-only tensor"),
        ("out overlapping", ones,
         {"out": np.lib.stride_tricks.as_strided(
             np.zeros(3, np.float32), shape=(4, 3), strides=(0, 4),
             writeable=True)}, ValueError,
         "scaled_mm: out: axis 0 (extent 4, stride 0) revisits elements "
         "already reached, so several results would land on one element"),
    ]


REFUSALS = _refusals()


@pytest.mark.parametrize("arguments, keywords, exception, message",
                         [case[1:] for case in REFUSALS],
                         ids=[case[0] for case in REFUSALS])
def test_every_refusal_names_the_argument(arguments, keywords, exception,
                                          message):
    """Each refusal's exact text: scaled_mm, the argument, what was given
    and what is accepted (docs/scaled_mm.md, Errors)."""
    with pytest.raises(exception, match=f"^{re.escape(message)}$"):
        fp8q.scaled_mm(*arguments, **keywords)


# --------------------------------------------------------------------------
# fp8q.linear


def dequantize64(q):
    """float64 data * scale of a 2-D QTensor (any granularity linear
    takes)."""
    data = np.asarray(q.data.numpy()).astype(np.float64)
    scale = np.asarray(q.scale.numpy()).astype(np.float64)
    if isinstance(q.granularity, tuple):
        rows, cols = q.granularity
        full = np.repeat(np.repeat(scale, rows, axis=0), cols, axis=1)
        return data * full[:data.shape[0], :data.shape[1]]
    return data * scale  # () , (..., 1) broadcast


WEIGHT_GRANULARITIES = ["tensor", "row", (128, 128)]


def linear_reference(x, w, bias=None):
    """(ref, S, K) for linear(x, w) with x float: x quantized per row (1x128
    blocks for block weights) by fp8q.quantize itself, then float64."""
    k = w.shape[1]
    x2 = np.asarray(x).astype(np.float32).reshape(-1, k)
    granularity = (1, 128) if w.granularity == (128, 128) else "row"
    xq = fp8q.quantize(x2, w.dtype, granularity=granularity)
    return linear_reference_q(xq, w, bias)


def linear_reference_q(xq, w, bias=None):
    k = w.shape[1]
    x_deq = dequantize64(xq).reshape(-1, k)
    w_deq = dequantize64(w)
    ref = x_deq @ w_deq.T
    if bias is not None:
        ref = ref + np.asarray(bias).astype(np.float64)
    return ref, np.abs(x_deq) @ np.abs(w_deq).T, k


@pytest.mark.parametrize("w_dtype", [E4M3])
@pytest.mark.parametrize("granularity", WEIGHT_GRANULARITIES)
@pytest.mark.parametrize("x_shape", [(2, 3, 200), (37, 200), (200,),
                                     (1, 200)])
def test_linear_float_input(x_shape, granularity, w_dtype, rng, seed):
    n, k = 150, 200
    weight = (rng.standard_normal((n, k)) *
              np.exp2(rng.integers(-3, 3, size=(n, 1)))).astype(np.float32)
    x = (rng.standard_normal(x_shape) * 3).astype(np.float32)
    bias = (rng.standard_normal(n)).astype(np.float32)
    w = fp8q.quantize(weight, w_dtype, granularity=granularity)
    context = f"{w_dtype} {granularity} x {x_shape} seed={seed}"
    for with_bias in (False, True):
        b = bias if with_bias else None
        y = fp8q.linear(x, w, bias=b)
        assert isinstance(y, fp8q.Tensor), context
        assert y.shape == x_shape[:-1] + (n,), context
        assert y.dtype == fp8q.float32, context  # x's dtype
        ref, magnitude, _ = linear_reference(x, w, b)
        assert_close(y.numpy().reshape(-1, n), ref, magnitude, k, "float32",
                     context)
        # Against the unquantized product: FP8 rounding of both operands
        # (relative 2^-4 each for e4m3, 2^-3 for e5m2 weights) bounds the
        # relative Frobenius error well below 0.25.
        exact = x.reshape(-1, k).astype(np.float64) @ weight.T.astype(
            np.float64) + (0 if b is None else b)
        relative = np.linalg.norm(y.numpy().reshape(-1, n) - exact) / \
            np.linalg.norm(exact)
        assert relative < 0.25, f"{context}: {relative}"


@pytest.mark.parametrize("granularity", WEIGHT_GRANULARITIES)
def test_linear_default_and_given_out_dtypes(granularity, rng, seed):
    n, k = 40, 300
    weight = rng.standard_normal((n, k)).astype(np.float32)
    x = rng.standard_normal((5, k)).astype(np.float32)
    w = fp8q.quantize(weight, granularity=granularity)
    ref, magnitude, _ = linear_reference(x, w)
    for x_dtype, expected in [(np.float32, "float32"),
                              (np.float16, "float16"),
                              (ml_dtypes.bfloat16, "bfloat16"),
                              (np.float64, "float32")]:
        xt = x.astype(x_dtype)
        ref_x, magnitude_x, _ = linear_reference(xt, w)
        y = fp8q.linear(xt, w)
        assert y.dtype == fp8q.dtype(expected), (x_dtype, y.dtype)
        assert_close(y, ref_x, magnitude_x, k, expected,
                     f"{granularity} x {np.dtype(x_dtype)} seed={seed}")
    for out_dtype in ["float32", "bfloat16", "float16"]:
        y = fp8q.linear(x, w, out_dtype=out_dtype)
        assert y.dtype == fp8q.dtype(out_dtype)
        assert_close(y, ref, magnitude, k, out_dtype,
                     f"{granularity} -> {out_dtype} seed={seed}")
    y8 = fp8q.linear(x, w, out_dtype=E4M3)
    assert y8.dtype == fp8q.float8_e4m3fn
    # FP8 output of linear: the cast of its float32 output (saturating).
    y32 = fp8q.linear(x, w, out_dtype="float32").numpy()
    expected = np.clip(y32, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    assert np.array_equal(codes(y8), codes(expected)), f"seed={seed}"


@pytest.mark.parametrize("w_granularity, x_granularity", [
    ("tensor", "tensor"), ("tensor", "row"), ("row", "tensor"),
    ("row", "row"), ((128, 128), (1, 128))])
@pytest.mark.parametrize("x_shape", [(2, 3, 260), (7, 260)])
def test_linear_quantized_input(w_granularity, x_granularity, x_shape, rng,
                                seed):
    n, k = 131, 260
    if isinstance(x_granularity, tuple):
        x_shape = (int(np.prod(x_shape[:-1])), k)  # blocks need 2-D x
    weight = rng.standard_normal((n, k)).astype(np.float32)
    x = (rng.standard_normal(x_shape) *
         np.exp2(rng.integers(-4, 4, size=x_shape[:-1] + (1,)))).astype(
             np.float32)
    w = fp8q.quantize(weight, E4M3, granularity=w_granularity)
    xq = fp8q.quantize(x, E4M3, granularity=x_granularity)
    bias = rng.standard_normal(n).astype(np.float16)
    context = f"w {w_granularity} x {x_granularity} {x_shape} seed={seed}"
    y = fp8q.linear(xq, w, bias=bias)
    assert y.dtype == fp8q.bfloat16, context     # QTensor x: bfloat16
    assert y.shape == x_shape[:-1] + (n,), context
    ref, magnitude, _ = linear_reference_q(xq, w, bias)
    assert_close(y.numpy().reshape(-1, n), ref, magnitude, k, "bfloat16",
                 context)
    y32 = fp8q.linear(xq, w, bias=bias, out_dtype="float32")
    assert_close(y32.numpy().reshape(-1, n), ref, magnitude, k, "float32",
                 context)
    # An e5m2 activation with an e4m3 weight.
    x5 = fp8q.quantize(x, E5M2, granularity=x_granularity)
    ref5, magnitude5, _ = linear_reference_q(x5, w)
    y5 = fp8q.linear(x5, w, out_dtype="float32")
    assert_close(y5.numpy().reshape(-1, n), ref5, magnitude5, k, "float32",
                 context + " e5m2 x")


def test_linear_granularity_errors(rng):
    n, k = 20, 300
    weight = rng.standard_normal((n, k)).astype(np.float32)
    x = rng.standard_normal((6, k)).astype(np.float32)
    by = {g: fp8q.quantize(weight, granularity=g)
          for g in WEIGHT_GRANULARITIES}
    mismatched = [
        ("tensor", "col"), ("tensor", (1, 128)), ("row", "col"),
        ("row", (1, 128)), ("row", (128, 128)), ((128, 128), "row"),
        ((128, 128), "col"), ((128, 128), (128, 128)),
        ((128, 128), (1, 64)), ((128, 128), "tensor")]
    for w_granularity, x_granularity in mismatched:
        xq = fp8q.quantize(x, granularity=x_granularity)
        with pytest.raises(ValueError):
            fp8q.linear(xq, by[w_granularity])
    for bad in ["col", (64, 64), (1, 128), (128, 1)]:
        with pytest.raises(ValueError, match="linear: w"):
            fp8q.linear(x, fp8q.quantize(weight, granularity=bad))


def test_linear_argument_errors(rng):
    n, k = 20, 64
    weight = rng.standard_normal((n, k)).astype(np.float32)
    x = rng.standard_normal((6, k)).astype(np.float32)
    w = fp8q.quantize(weight, granularity="row")
    with pytest.raises(TypeError, match="QTensor"):
        fp8q.linear(x, weight)
    with pytest.raises(TypeError, match="QTensor"):
        fp8q.linear(x, w.data)
    with pytest.raises(ValueError, match="2-D"):
        fp8q.linear(x, fp8q.quantize(weight[0]))
    with pytest.raises(ValueError, match="input features"):
        fp8q.linear(x[:, :60], w)
    with pytest.raises(ValueError, match="input features"):
        fp8q.linear(fp8q.quantize(x[:, :60], granularity="row"), w)
    with pytest.raises(ValueError, match="input features"):
        fp8q.linear(np.float32(1.0), w)
    with pytest.raises(TypeError, match="FP8"):
        fp8q.linear(x.astype(ml_dtypes.float8_e4m3fn), w)
    # Refusals name linear's own arguments (x, w), not scaled_mm's (a, b).
    with pytest.raises(TypeError, match=re.escape(
            "linear: x and w are both float8_e5m2, but an FP8 product needs "
            "one float8_e4m3fn operand; quantize x to float8_e4m3fn, or pass "
            "it unquantized")):
        fp8q.linear(fp8q.quantize(x, E5M2, granularity="row"),
                    fp8q.quantize(weight, E5M2, granularity="row"))
    with pytest.raises(ValueError, match=re.escape(
            "linear: bias must hold N = 20 values (one per output feature of "
            "w), got shape (21,)")):
        fp8q.linear(x, w, bias=np.ones(n + 1, np.float32))


def test_linear_e5m2_weight_gets_e4m3fn_activations(rng, seed):
    """A float x against an e5m2 weight is quantized to e4m3fn (an FP8
    product needs one e4m3fn operand): the result equals linear with that
    QTensor x."""
    n, k = 24, 160
    x = rng.standard_normal((5, k)).astype(np.float32)
    w = fp8q.quantize(rng.standard_normal((n, k)).astype(np.float32), E5M2,
                      granularity="row")
    qx = fp8q.quantize(x, "float8_e4m3fn", granularity="row")
    got = fp8q.linear(x, w).numpy()
    want = fp8q.linear(qx, w, out_dtype="float32").numpy()
    assert np.array_equal(got, want), f"seed={seed}"


@pytest.mark.parametrize("granularity", WEIGHT_GRANULARITIES)
def test_linear_torch_input(granularity, rng, seed):
    torch = pytest.importorskip("torch")
    n, k = 70, 200
    weight = rng.standard_normal((n, k)).astype(np.float32)
    x = rng.standard_normal((2, 3, k)).astype(np.float32)
    w = fp8q.quantize(weight, granularity=granularity)
    context = f"{granularity} seed={seed}"
    y = fp8q.linear(torch.from_numpy(x), w)
    assert y.dtype == fp8q.float32 and y.shape == (2, 3, n), context
    ref, magnitude, _ = linear_reference(x, w)
    assert_close(y.numpy().reshape(-1, n), ref, magnitude, k, "float32",
                 context)
    x_bf16 = torch.from_numpy(x).to(torch.bfloat16)
    y = fp8q.linear(x_bf16, w)
    assert y.dtype == fp8q.bfloat16 and y.shape == (2, 3, n), context
    as_numpy = x_bf16.float().numpy().astype(ml_dtypes.bfloat16)
    ref, magnitude, _ = linear_reference(as_numpy, w)
    assert_close(y.numpy().reshape(-1, n), ref, magnitude, k, "bfloat16",
                 context)
    same = fp8q.linear(as_numpy, w)
    assert np.array_equal(codes(same), codes(y)), context
    # A non-contiguous torch input.
    strided = torch.from_numpy(x).transpose(0, 1)      # (3, 2, K)
    y = fp8q.linear(strided, w)
    assert y.shape == (3, 2, n), context
    ref, magnitude, _ = linear_reference(x.transpose(1, 0, 2), w)
    assert_close(y.numpy().reshape(-1, n), ref, magnitude, k, "float32",
                 context)


# --------------------------------------------------------------------------
# fp8q.Tensor.reshape


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", E4M3, "uint8"])
def test_reshape_of_a_contiguous_tensor_is_a_view(dtype):
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = fp8q.asarray(base, dtype=dtype)
    expected = np.asarray(t.numpy())
    for args, shape in [((2, 12), (2, 12)), (((3, -1),), (3, 8)),
                        (([-1],), (24,)), ((24,), (24,)),
                        ((-1, 2, 3), (4, 2, 3)), ((1, 4, 1, 6), (1, 4, 1, 6)),
                        ((np.int64(6), -1), (6, 4))]:
        r = t.reshape(*args)
        assert r.shape == shape, args
        assert r.dtype == t.dtype
        assert r.data_ptr == t.data_ptr, args
        assert r.is_contiguous()
        assert codes(r).tolist() == codes(expected.reshape(shape)).tolist()
    # Writes through the view reach the original.
    source = fp8q.asarray(np.zeros(6, np.float32))
    view = source.reshape(3, 2)
    view.numpy()[2, 1] = 7.0
    assert source.numpy()[5] == 7.0


def test_reshape_of_a_non_contiguous_tensor_copies():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = fp8q.asarray(base)
    for source, expected in [(t.T, base.T), (fp8q.asarray(base[:, ::2]),
                                             base[:, ::2]),
                             (fp8q.asarray(base[::-1]), base[::-1])]:
        r = source.reshape(-1)
        assert r.shape == (expected.size,)
        assert np.array_equal(r.numpy(), expected.reshape(-1))
        assert r.is_contiguous()
        # A copy: not the original memory, and writes do not reach it.
        r.numpy()[0] = -1.0
        assert np.array_equal(base, np.arange(24).reshape(4, 6))
        assert np.array_equal(source.numpy(), expected)
        r2 = source.reshape(expected.shape[1], -1)
        assert np.array_equal(r2.numpy(),
                              expected.reshape(expected.shape[1], -1))
    assert t.T.reshape(24).data_ptr != t.data_ptr


def test_reshape_edge_shapes():
    one = fp8q.asarray(np.array([3.0], np.float32))
    assert one.reshape(()).shape == ()
    assert one.reshape(()).numpy() == 3.0
    scalar = fp8q.asarray(np.float32(5.0))
    assert scalar.reshape(1, 1).shape == (1, 1)
    assert scalar.reshape(-1).shape == (1,)
    empty = fp8q.zeros((0, 6))
    assert empty.reshape(-1, 6).shape == (0, 6)
    assert empty.reshape(3, 0, 2).shape == (3, 0, 2)
    assert empty.reshape(-1).shape == (0,)
    ro = np.arange(6, dtype=np.float32)
    ro.flags.writeable = False
    assert fp8q.asarray(ro).reshape(2, 3).readonly


@pytest.mark.parametrize("args", [(5, 5), (25,), (-1, 5), (-1, -1),
                                  (2, -1, -1), (-2, -12), (0, -1),
                                  (4, 7)])
def test_reshape_errors(args):
    t = fp8q.asarray(np.arange(24, dtype=np.float32).reshape(4, 6))
    with pytest.raises(ValueError, match="reshape"):
        t.reshape(*args)


def test_reshape_type_errors():
    t = fp8q.asarray(np.arange(24, dtype=np.float32))
    for args in [(2.0, 12), ("a",), ([2, None],), ()]:  # () as NumPy
        with pytest.raises(TypeError):
            t.reshape(*args)


def test_reshape_cannot_infer_next_to_zero():
    """As NumPy: -1 is ambiguous when another extent is 0; messages show the
    shape as given."""
    empty = fp8q.zeros((0, 6), "float32")
    with pytest.raises(ValueError, match="cannot be inferred"):
        empty.reshape(0, -1)
    assert empty.reshape(3, 0, 2).shape == (3, 0, 2)
    with pytest.raises(ValueError, match=r"into \(25,\)"):
        fp8q.zeros((4, 6), "float32").reshape(25)


def test_linear_empty_block_quantized_input():
    w = fp8q.quantize(np.ones((130, 200), np.float32), granularity=(128, 128))
    x = fp8q.quantize(np.ones((0, 200), np.float32), granularity=(1, 128))
    y = fp8q.linear(x, w)
    assert y.shape == (0, 130)


@pytest.mark.parametrize("granularity", ["tensor", "row", "block"])
def test_fast_accumulation_changes_nothing_on_the_cpu(granularity):
    """use_fast_accum=True is accepted on the CPU and computes exactly as
    without it (docs/numerics.md, "Fast accumulation"): the same bits."""
    rng = np.random.default_rng(37)
    a, b, scale_a, scale_b = scaled_mm_operands(rng, 7, 256, 40, granularity,
                                                "e4m3")
    for out_dtype in ("float32", "bfloat16"):
        plain = fp8q.scaled_mm(a, b, scale_a, scale_b, out_dtype=out_dtype)
        fast = fp8q.scaled_mm(a, b, scale_a, scale_b, out_dtype=out_dtype,
                              use_fast_accum=True)
        assert same_bits(fast.numpy(), plain.numpy()), (granularity,
                                                        out_dtype)
