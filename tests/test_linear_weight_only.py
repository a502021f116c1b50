"""fp8q.linear(x, w, weight_only=True) on the CPU: x stays in its float
dtype, y = x @ (decode(w) * scale).T + bias with float32 sums rounded once
into x's dtype, against a float64 reference of the exact decodes; and what
it refuses. The GPU path (kernels/gemv.cuh, in launches of up to 64 rows)
is tested on the fake driver (tests/fake_gpu_kernels.py) and on a GPU
(tests/test_cuda_ops.py)."""
import re

import numpy as np
import pytest

import fp8q

GRANULARITIES = ["tensor", "row", (128, 128)]
GRANULARITY_IDS = ["tensor", "row", "block"]
# The result's rounding, relative (half an ulp, doubled for slack).
UNIT = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


def exact_product(x, w, bias):
    """x @ (decode(w) * scale).T + bias in float64 and the sums of
    magnitudes |x| @ |W|.T that bound float32 accumulation."""
    x64 = np.asarray(fp8q.cast(x, "float32")).astype(np.float64)
    x64 = x64.reshape(-1, x64.shape[-1])
    codes = np.asarray(fp8q.cast(w.data, "float32")).astype(np.float64)
    scale = np.asarray(w.scale).astype(np.float64)
    if w.granularity == (128, 128):
        scale = np.repeat(np.repeat(scale, 128, axis=0), 128, axis=1)
        scale = scale[:codes.shape[0], :codes.shape[1]]
    weight = codes * scale
    product = x64 @ weight.T
    if bias is not None:
        product = product + np.asarray(fp8q.cast(bias, "float32"))
    return product, np.abs(x64) @ np.abs(weight).T


def assert_within_float32_accumulation(y, x, w, bias, dtype):
    expected, magnitudes = exact_product(x, w, bias)
    k = w.shape[1]
    got = np.asarray(fp8q.cast(y, "float32")).astype(np.float64)
    got = got.reshape(expected.shape)
    # float32 sums of exact products (plus the decode's one rounding of
    # w * scale), then one rounding into dtype.
    bound = UNIT[dtype] * np.abs(expected) + (k + 2) * 2.0 ** -22 * magnitudes
    assert np.all(np.abs(got - expected) <= bound)


@pytest.mark.parametrize("granularity", GRANULARITIES, ids=GRANULARITY_IDS)
@pytest.mark.parametrize("x_dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("x_shape", [(1, 200), (3, 5, 200), (70, 200)],
                         ids=["1-token", "3x5-tokens", "70-tokens"])
def test_weight_only_matches_the_exact_product(granularity, x_dtype, x_shape,
                                               rng, seed):
    w = fp8q.quantize(rng.standard_normal((150, 200)).astype(np.float32),
                      granularity=granularity)
    x = fp8q.asarray(rng.standard_normal(x_shape).astype(np.float32),
                     dtype=x_dtype)
    bias = fp8q.asarray(rng.standard_normal(150).astype(np.float32),
                        dtype="bfloat16")
    y = fp8q.linear(x, w, bias=bias, weight_only=True)
    assert y.shape == x_shape[:-1] + (150,) and y.dtype == x_dtype
    assert y.device == "cpu"
    assert_within_float32_accumulation(y, x, w, bias, x_dtype)


def test_weight_only_keeps_x_unquantized(rng, seed):
    """Weight-only differs from W8A8 by the activations' FP8 rounding: its
    error against the float product is the weight's alone, about 0.71 of
    W8A8's (1,500 seeds: at most 0.77, 17 standard deviations below 1)."""
    weight = rng.standard_normal((64, 256)).astype(np.float32)
    x = rng.standard_normal((16, 256)).astype(np.float32)
    w = fp8q.quantize(weight, granularity="row")
    reference = x.astype(np.float64) @ weight.T.astype(np.float64)
    errors = {mode: np.linalg.norm(np.asarray(fp8q.linear(
        x, w, weight_only=mode)) - reference) for mode in (False, True)}
    assert errors[True] < errors[False], (errors, f"seed={seed}")


def test_weight_only_of_no_tokens():
    w = fp8q.quantize(np.ones((8, 32), np.float32))
    y = fp8q.linear(np.zeros((0, 32), np.float32), w, weight_only=True)
    assert y.shape == (0, 8) and y.dtype == "float32"


def test_weight_only_propagates_nan_per_token(rng):
    w = fp8q.quantize(rng.standard_normal((16, 64)).astype(np.float32),
                      granularity="row")
    x = rng.standard_normal((3, 64)).astype(np.float32)
    x[1, 5] = np.nan
    y = np.asarray(fp8q.linear(x, w, weight_only=True))
    assert np.isnan(y[1]).all() and np.isfinite(y[[0, 2]]).all()


def test_weight_only_refusals():
    w = fp8q.quantize(np.ones((8, 32), np.float32))
    x = np.ones((2, 32), np.float32)
    with pytest.raises(TypeError, match="weight_only=True multiplies a float"):
        fp8q.linear(fp8q.quantize(x), w, weight_only=True)
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        fp8q.linear(fp8q.cast(x, "float8_e4m3fn"), w, weight_only=True)
    with pytest.raises(ValueError, match="out_dtype='bfloat16' differs"):
        fp8q.linear(x, w, weight_only=True, out_dtype="bfloat16")
    with pytest.raises(ValueError, match="expects 32 input features"):
        fp8q.linear(np.ones((2, 31), np.float32), w, weight_only=True)
    with pytest.raises(ValueError, match="bias must hold N = 8"):
        fp8q.linear(x, w, weight_only=True, bias=np.ones(7, np.float32))


@pytest.mark.parametrize("x_dtype, out_dtype", [
    ("float32", np.float32), ("float32", "f4"),
    ("float32", np.dtype("float32")), ("float32", "fp32"),
    ("float16", np.float16), ("bfloat16", "bf16"),
    ("bfloat16", fp8q.bfloat16)])
def test_weight_only_accepts_out_dtype_spelled_any_way(x_dtype, out_dtype):
    """weight_only=True takes an out_dtype equal to x's dtype however
    fp8q.dtype spells it (a NumPy type or dtype, a type code, an alias),
    as the W8A8 path does, and gives the same result as without it."""
    rng = np.random.default_rng(20240613)
    w = fp8q.quantize(rng.standard_normal((8, 32)).astype(np.float32),
                      granularity="row")
    x = fp8q.asarray(rng.standard_normal((3, 32)).astype(np.float32),
                     dtype=x_dtype)
    y = fp8q.linear(x, w, weight_only=True, out_dtype=out_dtype)
    expected = fp8q.linear(x, w, weight_only=True)
    assert y.dtype == x_dtype and y.shape == (3, 8)
    assert np.array_equal(np.asarray(fp8q.cast(y, "float32")),
                          np.asarray(fp8q.cast(expected, "float32")))


def test_weight_only_accepts_the_torch_dtype_of_a_torch_x():
    """A bfloat16 torch x with out_dtype=torch.bfloat16 (x's own dtype) is
    accepted under weight_only=True; torch.float32 still differs."""
    torch = pytest.importorskip("torch")
    generator = torch.Generator().manual_seed(20240613)
    w = fp8q.quantize(torch.randn((8, 32), generator=generator),
                      granularity="row")
    x = torch.randn((3, 32), generator=generator).to(torch.bfloat16)
    y = fp8q.linear(x, w, weight_only=True, out_dtype=torch.bfloat16)
    assert y.dtype == "bfloat16" and y.shape == (3, 8)
    with pytest.raises(ValueError, match="out_dtype=torch.float32 differs"):
        fp8q.linear(x, w, weight_only=True, out_dtype=torch.float32)


@pytest.mark.parametrize("out_dtype", [
    np.float32, "bf16", "f4", "float8_e4m3fn", "bogus", 3])
def test_weight_only_refuses_an_out_dtype_that_differs(out_dtype):
    """An out_dtype other than x's float16 (or one fp8q.dtype does not know)
    is still refused with the ValueError naming it."""
    w = fp8q.quantize(np.ones((8, 32), np.float32))
    x = np.ones((2, 32), np.float16)
    with pytest.raises(ValueError,
                       match=f"out_dtype={re.escape(repr(out_dtype))} differs"):
        fp8q.linear(x, w, weight_only=True, out_dtype=out_dtype)
