"""fp8q.linear runs through the torch layer's C entry (fp8q._C.linear,
csrc/python/linear_layer.c): the same bits as _C.linear_layer on the CPU,
a non-finite token giving its own NaN row as the layer does, and the
weight-only CPU product equal to NumPy's float32 product of the exact
float32 decodes (the documented computation)."""
import ml_dtypes
import numpy as np
import pytest

import fp8q

GRANULARITIES = [("tensor", "tensor"), ("row", "row"),
                 ("block", (128, 128))]


def bits(tensor):
    return np.asarray(fp8q.asarray(tensor).numpy()).view(np.uint8)


@pytest.mark.parametrize("name, granularity", GRANULARITIES)
@pytest.mark.parametrize("x_dtype", [np.float32, np.float16,
                                     ml_dtypes.bfloat16])
def test_linear_is_the_layer_call(name, granularity, x_dtype):
    rng = np.random.default_rng(61)
    weight = rng.standard_normal((140, 260)).astype(np.float32)
    x = (rng.standard_normal((2, 3, 260)) * 4).astype(x_dtype)
    bias = rng.standard_normal(140).astype(np.float32)
    w = fp8q.quantize(weight, granularity=granularity)
    got = fp8q.linear(x, w, bias=bias)
    layer = fp8q._C.linear_layer(fp8q.asarray(x), w.data, w.scale,
                                 fp8q.asarray(bias), None, name, None)
    assert got.shape == layer.shape == (2, 3, 140)
    assert np.array_equal(bits(got), bits(layer)), (name, x_dtype)


@pytest.mark.parametrize("name, granularity", GRANULARITIES)
@pytest.mark.parametrize("poison", [np.nan, np.inf, -np.inf])
def test_a_nonfinite_token_gives_its_own_nan_row_on_the_cpu(
        name, granularity, poison):
    """As on a GPU and in fp8q.torch.Linear (before, the CPU refused x with
    the quantize's "cannot compute a scale")."""
    rng = np.random.default_rng(67)
    weight = rng.standard_normal((96, 256)).astype(np.float32)
    x = rng.standard_normal((5, 256)).astype(np.float32)
    w = fp8q.quantize(weight, granularity=granularity)
    poisoned = x.copy()
    poisoned[2, 17] = poison
    got = np.asarray(fp8q.linear(poisoned, w).numpy())
    kept = [0, 1, 3, 4]
    without = np.asarray(fp8q.linear(x[kept], w).numpy())
    assert np.isnan(got[2]).all(), (name, poison)
    assert np.array_equal(got[kept].view(np.uint32),
                          without.view(np.uint32)), name


@pytest.mark.parametrize("granularity", ["tensor", "row", (128, 128)])
@pytest.mark.parametrize("shape", [(3, 200), (1, 200), (200,), (2, 4, 200),
                                   (0, 200)])
def test_weight_only_cpu_is_numpys_float32_product(granularity, shape):
    rng = np.random.default_rng(71)
    weight = rng.standard_normal((150, 200)).astype(np.float32)
    bias = rng.standard_normal(150).astype(np.float16)
    w = fp8q.quantize(weight, granularity=granularity)
    for x_dtype in (np.float32, np.float16, ml_dtypes.bfloat16):
        x = (rng.standard_normal(shape) * 2).astype(x_dtype)
        got = fp8q.linear(x, w, bias=bias, weight_only=True)
        x32 = x.astype(np.float32).reshape(-1, 200)
        w32 = np.asarray(w.dequantize("float32").numpy())
        y32 = np.matmul(x32, w32.T)
        y32 += bias.astype(np.float32)
        want = y32.astype(x_dtype).reshape(shape[:-1] + (150,))
        assert got.dtype == fp8q.dtype(np.dtype(x_dtype).name)
        assert np.array_equal(bits(got), want.view(np.uint8).reshape(
            bits(got).shape)), (granularity, shape, x_dtype)


@pytest.mark.parametrize("weight_only", [False, True])
@pytest.mark.parametrize("x_dtype", [np.float32, np.float16])
@pytest.mark.parametrize("with_bias", [False, True])
def test_zero_in_features_gives_the_bias_in_every_row(weight_only, x_dtype,
                                                      with_bias):
    """K = 0: every row of x @ w.T + bias is the bias rounded into the
    result's dtype (zeros without a bias), as torch's linear gives it; it
    used to be refused (and before that, the weight-only CPU product
    returned its uninitialised result)."""
    w = fp8q.quantize(np.zeros((4, 0), np.float32), granularity="row")
    x = np.zeros((2, 3, 0), x_dtype)
    bias = np.array([1.1, -2.0, 3e-3, 7.0], np.float32) if with_bias else None
    got = fp8q.linear(x, w, bias=bias, weight_only=weight_only)
    row = bias if with_bias else np.zeros(4, np.float32)
    assert got.shape == (2, 3, 4)
    assert got.dtype == fp8q.dtype(np.dtype(x_dtype).name)
    assert np.array_equal(np.asarray(got),
                          np.broadcast_to(row.astype(x_dtype), (2, 3, 4)))


@pytest.mark.parametrize("k", [0, 4])
def test_zero_in_features_refuses_as_linear_does(k):
    """K = 0 refuses a bad out_dtype, stream or x dtype naming linear, as
    for K > 0 (its scaled_mm's refusals named scaled_mm)."""
    w = fp8q.quantize(np.ones((3, k), np.float32), granularity="row")
    x = np.zeros((2, k), np.float32)
    with pytest.raises(TypeError, match="^linear: out_dtype must be"):
        fp8q.linear(x, w, out_dtype="nonsense")
    with pytest.raises(ValueError, match="^linear: stream= applies to CUDA"):
        fp8q.linear(x, w, stream=1)
    with pytest.raises(TypeError, match="^linear: x must be float32, "
                                        "float16 or bfloat16, got uint8$"):
        fp8q.linear(x.astype(np.uint8), w)


def test_zero_in_features_of_a_quantized_x_is_bfloat16_bias():
    """A QTensor x with K = 0 gives the bias in bfloat16, linear's result
    dtype for a quantized x, or out_dtype when given."""
    w = fp8q.quantize(np.zeros((2, 0), np.float32), granularity="row")
    x = fp8q.quantize(np.zeros((5, 0), np.float32), granularity="row")
    bias = np.array([0.1, 300.0], np.float32)
    got = fp8q.linear(x, w, bias=bias)
    assert got.dtype == fp8q.bfloat16
    want = bias.astype(ml_dtypes.bfloat16).astype(np.float32)
    assert np.array_equal(np.asarray(fp8q.cast(got, "float32")),
                          np.broadcast_to(want, (5, 2)))
    got = fp8q.linear(x, w, bias=bias, out_dtype="float32")
    assert np.array_equal(np.asarray(got), np.broadcast_to(bias, (5, 2)))


def test_weight_only_entry_checks_x_against_the_weight():
    """_C.linear's weight-only product names a mismatched K as the W8A8
    one does (it used to surface as the dequantize's "out: expected
    shape")."""
    rng = np.random.default_rng(73)
    w = fp8q.quantize(rng.standard_normal((8, 32)).astype(np.float32),
                      granularity="row")
    x = fp8q.asarray(np.ones((3, 16), np.float32))
    for weight_only in (False, True):
        with pytest.raises(ValueError,
                           match=r"x has shape \(3, 16\), but the layer has "
                                 r"32 input features"):
            fp8q._C.linear(x, w.data, w.scale, "row", None, None,
                           weight_only, None, None)


@pytest.mark.parametrize("argument, value, exception", [
    ("x", "text", TypeError),
    ("x", np.ones((2, 8), np.complex64), TypeError),
    ("x", [[1.0] * 8, [1.0]], ValueError),
    ("bias", "text", TypeError),
])
def test_refusals_of_x_and_bias_name_them(argument, value, exception):
    """fp8q.linear converts x and bias as the C operations convert theirs,
    so a refusal names the argument (it said "obj", asarray's name)."""
    w = fp8q.quantize(np.ones((4, 8), np.float32), granularity="row")
    x = np.ones((2, 8), np.float32)
    arguments = {"x": x, "bias": None, argument: value}
    with pytest.raises(exception, match=f"^{argument}: "):
        fp8q.linear(arguments["x"], w, bias=arguments["bias"])
