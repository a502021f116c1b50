"""fp8q.quantize / fp8q.dequantize / fp8q.QTensor against a NumPy reference
of the exact formulas:

    scale = float32(amax(group)) / float32(finfo(dtype).max)  (1.0 if amax 0,
            rounded up to a power of two with power_of_2=True)
    data  = fp8(float32(x) / scale)                         (one rounding)
    dequantize = float32(data) * scale                      (float32 product)

for every granularity (tensor, row, col, blocks with partial edges), given
scales, zero groups and non-finite inputs, plus the round-trip error bound.
"""
import math

import ml_dtypes
import numpy as np
import pytest

import fp8q
from helpers import FP8, FP8_MAX



# --------------------------------------------------------------------------
# Reference


def expected_scale_shape(shape, granularity):
    if granularity == "tensor":
        return ()
    if granularity == "row":
        return tuple(shape[:-1]) + (1,)
    if granularity == "col":
        return (1,) * (len(shape) - 1) + (shape[-1],)
    rows, cols = granularity
    return (math.ceil(shape[0] / rows), math.ceil(shape[1] / cols))


def expand(scale, shape, granularity):
    """The scale of every element of x (same shape as x)."""
    scale = np.asarray(scale, dtype=np.float32)
    if isinstance(granularity, tuple):
        rows, cols = granularity
        full = np.repeat(np.repeat(scale, rows, axis=0), cols, axis=1)
        return full[:shape[0], :shape[1]]
    return np.broadcast_to(scale, shape)


def reference_amax(x, granularity):
    magnitudes = np.abs(np.asarray(x, dtype=np.float32))
    if granularity == "tensor":
        return np.array(magnitudes.max() if magnitudes.size else 0,
                        dtype=np.float32)
    if granularity == "row":
        return magnitudes.max(axis=-1, keepdims=True)
    if granularity == "col":
        return magnitudes.max(axis=tuple(range(x.ndim - 1)), keepdims=True)
    rows, cols = granularity
    amax = np.zeros(expected_scale_shape(x.shape, granularity), np.float32)
    for i in range(amax.shape[0]):
        for j in range(amax.shape[1]):
            amax[i, j] = magnitudes[i * rows:(i + 1) * rows,
                                    j * cols:(j + 1) * cols].max()
    return amax


def round_up_to_power_of_2(scale):
    mantissa, exponent = np.frexp(scale.astype(np.float64))
    powers = np.where(mantissa == 0.5, scale.astype(np.float64),
                      np.ldexp(1.0, exponent))
    return powers.astype(np.float32)


def reference_scale(x, name, granularity, power_of_2=False):
    amax = reference_amax(x, granularity)
    with np.errstate(under="ignore"):
        scale = amax / np.float32(FP8_MAX[name])  # float32 division
    # A division that underflows to 0 takes the smallest positive float32.
    scale = np.where(scale == 0, np.float32(2.0 ** -149), scale)
    scale = np.where(amax == 0, np.float32(1), scale).astype(np.float32)
    return round_up_to_power_of_2(scale) if power_of_2 else scale


def reference_data(x, scale, name, granularity, saturate=True):
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        quotient = x / expand(scale, x.shape, granularity)
        if saturate:
            limit = np.float32(FP8_MAX[name])
            quotient = np.where(np.isnan(quotient), quotient,
                                np.clip(quotient, -limit, limit))
        return quotient.astype(FP8[name])


def codes(tensor):
    return np.ascontiguousarray(tensor.numpy()).view(np.uint8)


def assert_quantized(q, x, name, granularity, scale, context,
                     saturate=True):
    assert q.scale.dtype == fp8q.float32
    assert q.scale.shape == expected_scale_shape(np.shape(x), granularity), \
        context
    assert np.array_equal(q.scale.numpy(), scale), \
        f"{context}: scale {q.scale.numpy()} != {scale}"
    expected = reference_data(x, scale, name, granularity, saturate)
    actual = codes(q.data)
    differ = np.flatnonzero(actual.ravel() != expected.view(np.uint8).ravel())
    assert differ.size == 0, (
        f"{context}: {differ.size} codes differ, first at flat index "
        f"{differ[:5].tolist()}")


GRANULARITIES = [
    ("tensor", (37, 50)), ("tensor", (7,)), ("tensor", (2, 3, 4)),
    ("row", (37, 50)), ("row", (9,)), ("row", (2, 3, 40)),
    ("col", (37, 50)), ("col", (9,)), ("col", (2, 3, 40)),
    ((1, 128), (5, 300)), ((128, 128), (130, 260)), ((3, 5), (7, 11)),
    ((1, 1), (4, 6)), ((64, 1), (100, 3)), ((200, 300), (130, 260)),
]


# --------------------------------------------------------------------------
# Scales and data


@pytest.mark.parametrize("name", FP8)
@pytest.mark.parametrize("granularity, shape", GRANULARITIES)
def test_computed_scales_and_data(granularity, shape, name, rng, seed):
    x = (rng.standard_normal(shape) *
         np.exp2(rng.integers(-20, 20, size=shape))).astype(np.float32)
    q = fp8q.quantize(x, name, granularity=granularity)
    scale = reference_scale(x, name, granularity)
    assert_quantized(q, x, name, granularity, scale,
                     f"{name} {granularity} {shape} seed={seed}")


@pytest.mark.parametrize("granularity, shape", GRANULARITIES[::2])
def test_power_of_2_scales(granularity, shape, rng, seed):
    x = (rng.standard_normal(shape) * 1000).astype(np.float32)
    q = fp8q.quantize(x, "float8_e4m3fn", granularity=granularity,
                      power_of_2=True)
    scale = reference_scale(x, "float8_e4m3fn", granularity, power_of_2=True)
    mantissa, _ = np.frexp(q.scale.numpy())
    assert (mantissa == 0.5).all(), f"not powers of two (seed={seed})"
    assert_quantized(q, x, "float8_e4m3fn", granularity, scale,
                     f"power_of_2 {granularity} seed={seed}")


def test_power_of_2_keeps_exact_powers():
    x = np.array([[448.0, 1.0], [896.0, -2.0], [500.0, 0.0]], np.float32)
    q = fp8q.quantize(x, "e4m3", granularity="row", power_of_2=True)
    assert q.scale.numpy().ravel().tolist() == [1.0, 2.0, 2.0]


@pytest.mark.parametrize("name", FP8)
def test_zero_groups_get_scale_one(name, rng, seed):
    x = rng.standard_normal((6, 8)).astype(np.float32)
    x[2] = 0.0
    x[4] = -0.0
    q = fp8q.quantize(x, name, granularity="row")
    scale = q.scale.numpy()
    assert scale[2, 0] == 1.0 and scale[4, 0] == 1.0
    assert_quantized(q, x, name, "row", reference_scale(x, name, "row"),
                     f"zero rows seed={seed}")
    assert (q.data.numpy()[2].astype(np.float32) == 0).all()
    all_zero = fp8q.quantize(np.zeros((3, 3), np.float32), name)
    assert all_zero.scale.numpy() == 1.0
    assert (all_zero.dequantize().numpy() == 0).all()


def test_scale_underflow_keeps_the_scale_positive():
    x = np.array([[2.0 ** -140, 0.0], [2.0 ** -149, -2.0 ** -149]],
                 np.float32)
    q = fp8q.quantize(x, "e4m3", granularity="row")
    scale = reference_scale(x, "float8_e4m3fn", "row")
    assert scale[1, 0] == np.float32(2.0 ** -149)
    assert_quantized(q, x, "float8_e4m3fn", "row", scale, "underflow")


@pytest.mark.parametrize("granularity, shape", GRANULARITIES)
def test_given_scales(granularity, shape, rng, seed):
    x = (rng.standard_normal(shape) * 30).astype(np.float32)
    scale_shape = expected_scale_shape(shape, granularity)
    given = rng.uniform(0.01, 2, size=scale_shape).astype(np.float32)
    q = fp8q.quantize(x, "float8_e5m2", granularity=granularity,
                      scale=given)
    assert_quantized(q, x, "float8_e5m2", granularity, given,
                     f"given scale {granularity} seed={seed}")
    given[...] = 7.0  # the QTensor holds its own copy
    assert not np.array_equal(q.scale.numpy(), given) or given.size == 0


@pytest.mark.parametrize("granularity, shape, given", [
    ("row", (4, 6), 0.5),
    ("row", (4, 6), np.float32(0.25)),
    ("col", (4, 6), np.array([0.5], np.float32)),
    ((2, 4), (5, 9), np.array([[0.5], [0.125], [2.0]], np.float32)),
    ("tensor", (3,), np.array(0.75)),
    ("col", (2, 3, 4), np.array([1.0, 2.0, 4.0, 8.0], np.float32)),
])
def test_given_scales_broadcast_to_the_scale_shape(granularity, shape, given,
                                                   rng, seed):
    x = (rng.standard_normal(shape) * 30).astype(np.float32)
    q = fp8q.quantize(x, "e4m3", granularity=granularity, scale=given)
    scale_shape = expected_scale_shape(shape, granularity)
    full = np.broadcast_to(np.asarray(given, np.float32), scale_shape)
    assert_quantized(q, x, "float8_e4m3fn", granularity, full,
                     f"broadcast scale {granularity} seed={seed}")


def test_given_scale_overflow_follows_saturate():
    x = np.array([1.0, -1.0, 0.5], np.float32)
    saturated = fp8q.quantize(x, "e4m3", scale=1e-3)
    assert saturated.data.numpy().astype(np.float32).tolist() == \
        [448.0, -448.0, 448.0]
    plain = fp8q.quantize(x, "e4m3", scale=1e-3, saturate=False)
    assert np.isnan(plain.data.numpy().astype(np.float32)).all()
    e5m2 = fp8q.quantize(x, "e5m2", scale=1e-6, saturate=False)
    assert e5m2.data.numpy().astype(np.float32).tolist() == \
        [np.inf, -np.inf, np.inf]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("granularity", ["tensor", "row", "col", (2, 2)])
def test_non_finite_amax_raises(bad, granularity):
    x = np.ones((4, 4), np.float32)
    x[1, 2] = bad
    # The group holding x[1, 2], as a C-order index into the scale.
    group = {"tensor": 0, "row": 1, "col": 2}.get(granularity, 1)
    with pytest.raises(ValueError) as raised:
        fp8q.quantize(x, granularity=granularity)
    message = str(raised.value)
    assert message.startswith("x: ") and f"group {group} " in message, message
    assert ("nan" if np.isnan(bad) else "inf") in message, message


def test_non_finite_input_with_a_given_scale_is_cast():
    x = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    q = fp8q.quantize(x, "e4m3", scale=2.0)
    values = q.data.numpy().astype(np.float32)
    assert np.isnan(values[0])
    assert values[1:].tolist() == [448.0, -448.0, 0.5]


def test_other_input_dtypes_and_layouts(rng, seed):
    base = (rng.standard_normal((20, 30)) * 5).astype(np.float32)
    inputs = [base.astype(np.float16), base.astype(ml_dtypes.bfloat16),
              base[::-1, ::2], base.T, base.tolist(),
              base.astype(ml_dtypes.float8_e5m2)]
    for x in inputs:
        x32 = np.asarray(x).astype(np.float32)
        q = fp8q.quantize(x, "e4m3", granularity="row")
        assert_quantized(q, x32, "float8_e4m3fn", "row",
                         reference_scale(x32, "float8_e4m3fn", "row"),
                         f"input {np.asarray(x).dtype} seed={seed}")


def test_zero_d_and_empty_inputs():
    q = fp8q.quantize(np.array(-3.5, np.float32))
    assert q.shape == () and q.scale.shape == ()
    assert q.scale.numpy() == np.float32(3.5) / np.float32(448)
    empty = fp8q.quantize(np.zeros((0, 5), np.float32), granularity="col")
    assert empty.data.shape == (0, 5)
    assert empty.scale.numpy().tolist() == [[1.0] * 5]
    rows = fp8q.quantize(np.zeros((0, 5), np.float32), granularity="row")
    assert rows.scale.shape == (0, 1)
    assert rows.dequantize().shape == (0, 5)


# --------------------------------------------------------------------------
# dequantize and the round trip


@pytest.mark.parametrize("target", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("granularity, shape", GRANULARITIES[::3])
def test_dequantize_is_the_float32_product(granularity, shape, target, rng,
                                           seed):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    q = fp8q.quantize(x, "float8_e4m3fn", granularity=granularity)
    product = (q.data.numpy().astype(np.float32) *
               expand(q.scale.numpy(), shape, granularity))
    expected = product.astype({"float32": np.float32,
                               "float16": np.float16,
                               "bfloat16": ml_dtypes.bfloat16}[target])
    result = q.dequantize(target)
    assert result.dtype == fp8q.dtype(target)
    assert result.shape == tuple(shape)
    actual = np.ascontiguousarray(result.numpy())
    assert np.array_equal(actual.view(f"u{actual.itemsize}"),
                          expected.view(f"u{expected.itemsize}")), \
        f"{granularity} -> {target} seed={seed}"
    via_function = fp8q.dequantize(q, target).numpy()
    assert np.array_equal(via_function.view(f"u{actual.itemsize}"),
                          actual.view(f"u{actual.itemsize}"))


@pytest.mark.parametrize("name, bound", [("float8_e4m3fn", 2.0 ** -4),
                                         ("float8_e4m3fnuz", 2.0 ** -4),
                                         ("float8_e5m2", 2.0 ** -3),
                                         ("float8_e5m2fnuz", 2.0 ** -3)])
@pytest.mark.parametrize("granularity", ["row", "col", "tensor", (1, 128),
                                         (128, 128)])
def test_round_trip_error_bound(name, bound, granularity, rng, seed):
    x = (rng.standard_normal((300, 384)) *
         np.exp2(rng.integers(-8, 8, size=(300, 1)))).astype(np.float32)
    q = fp8q.quantize(x, name, granularity=granularity)
    restored = q.dequantize().numpy().astype(np.float64)
    scale = expand(q.scale.numpy(), x.shape, granularity).astype(np.float64)
    x64 = x.astype(np.float64)
    normal = np.abs(x64) / scale >= fp8q.finfo(name).tiny
    relative = np.abs(restored - x64)[normal] / np.abs(x64[normal])
    # Half an ulp of the format, plus the two float32 roundings.
    assert relative.max() <= bound * (1 + 2.0 ** -18), \
        f"{name} {granularity}: max relative error {relative.max()} " \
        f"(seed={seed})"
    # Below the normal range the error is at most half the subnormal step.
    step = fp8q.finfo(name).smallest_subnormal * scale[~normal]
    absolute = np.abs(restored - x64)[~normal]
    assert (absolute <= step / 2 * (1 + 2.0 ** -18)).all(), f"seed={seed}"


# --------------------------------------------------------------------------
# QTensor


def test_qtensor_attributes():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    q = fp8q.quantize(x, "e5m2", granularity=[1, 2])
    assert isinstance(q, fp8q.QTensor)
    assert isinstance(q.data, fp8q.Tensor)
    assert isinstance(q.scale, fp8q.Tensor)
    assert q.dtype == fp8q.float8_e5m2
    assert q.data.dtype == fp8q.float8_e5m2
    assert q.granularity == (1, 2)
    assert q.shape == (3, 4)
    assert q.scale.shape == (3, 2)
    text = repr(q)
    assert "QTensor" in text and "float8_e5m2" in text and "(1, 2)" in text
    assert fp8q.quantize(x).granularity == "tensor"
    assert fp8q.quantize(x).dtype == fp8q.float8_e4m3fn


def test_qtensor_built_from_parts_dequantizes():
    data = fp8q.cast(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), "e4m3")
    scale = fp8q.asarray(np.array([[2.0], [0.5]], np.float32))
    q = fp8q.QTensor(data, scale, "row")
    assert q.dequantize().numpy().tolist() == [[2.0, 4.0], [1.5, 2.0]]


def test_thread_count_never_changes_results(rng, seed, restore_threads):
    x = (rng.standard_normal((1200, 1000)) * 10).astype(np.float32)
    outcomes = []
    for threads in (1, 3):
        fp8q.set_num_threads(threads)
        per_granularity = []
        for granularity in ("tensor", "row", "col", (128, 128)):
            q = fp8q.quantize(x, granularity=granularity)
            per_granularity.append((codes(q.data), q.scale.numpy(),
                                    q.dequantize().numpy()))
        outcomes.append(per_granularity)
    for first, second in zip(*outcomes):
        for a, b in zip(first, second):
            assert np.array_equal(a, b), f"seed={seed}"


def test_info_command_reports_the_round_trip():
    """`python -m fp8q info --json`, the README's main job, in a fresh
    interpreter: it must not import torch, and its round trip must meet the
    E4M3 bound."""
    import json
    import subprocess
    import sys

    script = ("import json, sys, runpy\n"
              "sys.argv = ['fp8q', 'info', '--json']\n"
              "try:\n"
              "    runpy.run_module('fp8q', run_name='__main__')\n"
              "except SystemExit as done:\n"
              "    assert not done.code, done.code\n"
              "assert 'torch' not in sys.modules, 'info imported torch'\n")
    completed = subprocess.run([sys.executable, "-c", script],
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    facts = json.loads(completed.stdout)
    assert facts["fp8q"] == fp8q.__version__
    # Without a driver the reason lists the libraries tried; with one, a
    # build without kernels says so (tests/test_cuda_driver.py has details);
    # on a GPU machine with kernels, the devices are listed.
    if facts["cuda"]["available"]:
        assert facts["cuda"]["devices"], facts["cuda"]
    else:
        assert ("no CUDA driver found: tried" in facts["cuda"]["reason"]
                or "without CUDA kernels" in facts["cuda"]["reason"])
    assert facts["build"]["cuda_kernels"] is fp8q._C._build_info()["cuda_kernels"]
    assert facts["threads"] >= 1
    trip = facts["round_trip"]
    assert trip["max_relative_error_normal_range"] <= 2.0 ** -4
    assert 0 < trip["mean_relative_error"] < 2.0 ** -4


@pytest.mark.parametrize("granularity,same_as", [
    ((1, 2**63 - 1), "row"), ((2**63 - 1, 1), "col"),
    ((2**63 - 1, 2**63 - 1), "tensor"), ((2**70, 2), (3, 2))])
def test_huge_blocks_cover_the_input_in_one_block(granularity, same_as):
    # Regression: ceil(M / bm) was computed as (M + bm - 1) / bm, which
    # overflowed int64 for huge blocks and crashed (division by zero).
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    q = fp8q.quantize(x, granularity=granularity)
    expected = fp8q.quantize(x, granularity=same_as)
    assert q.scale.shape == tuple(
        expected_scale_shape(x.shape, (3, 4) if same_as == "tensor"
                             else same_as))
    np.testing.assert_array_equal(q.scale.numpy().ravel(),
                                  expected.scale.numpy().ravel())
    np.testing.assert_array_equal(codes(q.data), codes(expected.data))
    np.testing.assert_array_equal(q.dequantize().numpy(),
                                  expected.dequantize().numpy())


@pytest.mark.parametrize("granularity", ["tensor", "row", (1, 128)])
def test_transpose_writes_data_t(rng, granularity):
    """transpose=True adds data.T, C-contiguous, bit for bit."""
    x = rng.standard_normal((37, 300)).astype(np.float32)
    q = fp8q.quantize(x, granularity=granularity, transpose=True)
    assert q.transposed.shape == (300, 37) and q.transposed.is_contiguous()
    assert q.transposed.dtype == q.data.dtype
    np.testing.assert_array_equal(q.transposed.numpy().view(np.uint8),
                                  q.data.numpy().view(np.uint8).T)
    assert fp8q.quantize(x).transposed is None
    with pytest.raises(ValueError, match="transpose=True needs a 2-D x"):
        fp8q.quantize(x[0], transpose=True)
