"""fp8q.amax against NumPy's max(abs(x)): axes (int, tuple, negative),
keepdims, NaN and inf propagation, empty inputs, 0-d inputs, every input
dtype, strided inputs, and independence from the thread count.
"""
import itertools

import ml_dtypes
import numpy as np
import pytest

import fp8q

INPUT_DTYPES = {
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "uint8": np.uint8,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
    "float8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "float8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
}


def reference_amax(x, axis=None, keepdims=False):
    """max |x| in float32; NaN-propagating; 0 for an empty group."""
    magnitudes = np.abs(np.asarray(x).astype(np.float32))
    if magnitudes.size == 0:
        shape = np.sum(magnitudes, axis=axis, keepdims=keepdims).shape
        return np.zeros(shape, dtype=np.float32)
    return np.max(magnitudes, axis=axis, keepdims=keepdims)


def check(x, axis=None, keepdims=False, context=""):
    result = fp8q.amax(x, axis=axis, keepdims=keepdims)
    assert isinstance(result, fp8q.Tensor)
    assert result.dtype == fp8q.float32
    expected = reference_amax(x, axis, keepdims)
    actual = result.numpy()
    assert actual.shape == expected.shape, (axis, keepdims, context)
    assert np.array_equal(actual, expected, equal_nan=True), \
        f"axis={axis} keepdims={keepdims} {context}"


def all_axes(ndim):
    """None, every int axis (both signs) and every tuple of distinct axes."""
    choices = [None]
    for axis in range(-ndim, ndim):
        choices.append(axis)
    for count in range(ndim + 1):
        choices.extend(itertools.combinations(range(ndim), count))
    choices.append(tuple(range(-1, -ndim - 1, -1)))
    return choices


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("shape", [(7,), (4, 5), (3, 4, 5), (2, 3, 1, 4)])
def test_every_axis_choice(shape, keepdims, rng, seed):
    x = (rng.standard_normal(shape) * 100).astype(np.float32)
    for axis in all_axes(len(shape)):
        check(x, axis, keepdims, f"shape={shape} seed={seed}")


@pytest.mark.parametrize("name", INPUT_DTYPES)
def test_every_input_dtype(name, rng, seed):
    if name == "uint8":
        x = rng.integers(0, 256, size=(6, 9), dtype=np.uint8)
    else:
        codes = rng.standard_normal((6, 9)) * 50
        x = codes.astype(np.float32).astype(INPUT_DTYPES[name])
    for axis in (None, 0, 1, (0, 1), -1):
        check(x, axis, False, f"{name} seed={seed}")
        check(x, axis, True, f"{name} seed={seed}")


def test_nan_propagates_per_group():
    x = np.arange(20, dtype=np.float32).reshape(4, 5) - 10
    x[1, 3] = np.nan
    x[2, 0] = -np.inf
    result = fp8q.amax(x, axis=1).numpy()
    assert np.isnan(result[1]) and not np.isnan(result[[0, 2, 3]]).any()
    assert result[2] == np.inf
    assert result[0] == 10 and result[3] == 9
    assert np.isnan(fp8q.amax(x).numpy())
    columns = fp8q.amax(x, axis=0).numpy()
    assert np.isnan(columns[3]) and columns[0] == np.inf
    check(x, 0)
    check(x, (0, 1), True)


def test_nan_in_every_position_is_seen(rng, seed):
    x = rng.standard_normal((3, 300)).astype(np.float32)
    for position in range(0, 300, 7):
        poisoned = x.copy()
        poisoned[1, position] = np.nan
        result = fp8q.amax(poisoned, axis=-1).numpy()
        assert np.isnan(result[1]) and not np.isnan(result[[0, 2]]).any(), \
            f"NaN at {position} seed={seed}"


def test_fp8_nan_codes_propagate():
    codes = np.array([0x10, 0x7F, 0x05], dtype=np.uint8)
    x = codes.view(ml_dtypes.float8_e4m3fn)
    assert np.isnan(fp8q.amax(x).numpy())
    fnuz = np.array([0x10, 0x80], dtype=np.uint8).view(
        ml_dtypes.float8_e4m3fnuz)
    assert np.isnan(fp8q.amax(fnuz).numpy())


@pytest.mark.parametrize("shape, axis", [((0,), None), ((0,), 0),
                                         ((3, 0), 1), ((3, 0), None),
                                         ((0, 4), 0), ((0, 4), 1),
                                         ((2, 0, 3), (0, 2))])
def test_empty_inputs(shape, axis):
    x = np.zeros(shape, dtype=np.float32)
    for keepdims in (False, True):
        check(x, axis, keepdims, f"shape={shape}")


def test_empty_group_gives_zero():
    result = fp8q.amax(np.zeros((3, 0), np.float32), axis=1)
    assert result.shape == (3,)
    assert result.numpy().tolist() == [0.0, 0.0, 0.0]


def test_zero_d_inputs():
    for value in (-2.5, np.float32(np.nan), 0.0):
        x = np.array(value, dtype=np.float32)
        check(x, None)
        check(x, (), False)
        check(x, None, True)
    assert fp8q.amax(-3.0).numpy() == 3.0
    assert fp8q.amax([[1.0, -7.0], [2.0, 3.0]], axis=1).numpy().tolist() == \
        [7.0, 3.0]


def test_strided_and_reversed_inputs(rng, seed):
    base = (rng.standard_normal((8, 30)) * 10).astype(np.float32)
    for view in (base[::-1, ::3], base.T, base[1::2, ::-1], base[:, 4]):
        for axis in (None, 0, -1):
            check(view, axis, False, f"strides={view.strides} seed={seed}")


def test_negative_zero_and_signs():
    x = np.array([-0.0, -5.0, 3.0], dtype=np.float32)
    assert fp8q.amax(x).numpy() == 5.0
    zero = fp8q.amax(np.array([-0.0], np.float32)).numpy()
    assert zero == 0 and not np.signbit(zero)


def test_keepdims_view_owns_its_memory(rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    expected = np.abs(x).max(axis=0)
    result = fp8q.amax(x, axis=0)
    del x
    assert result.shape == (6,)
    np.testing.assert_array_equal(result.numpy(), expected)


def test_thread_count_never_changes_results(rng, seed, restore_threads):
    x = rng.standard_normal((1500, 700)).astype(np.float32)
    x[rng.integers(0, 1500, 20), rng.integers(0, 700, 20)] = np.nan
    results = []
    for threads in (1, 2, 5):
        fp8q.set_num_threads(threads)
        results.append([fp8q.amax(x, axis=axis).numpy()
                        for axis in (None, 0, 1)])
    for other in results[1:]:
        for first, second in zip(results[0], other):
            assert np.array_equal(first, second, equal_nan=True), \
                f"seed={seed}"
    check(x, 0, False, f"seed={seed}")
    check(x, 1, False, f"seed={seed}")
    check(x, None, False, f"seed={seed}")
