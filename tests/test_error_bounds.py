"""The FP8 matrix-product error bound of tests/helpers.py (used by the
real-GPU tests) covers a simulated reduced-precision accumulator: partial
sums truncated to 13 mantissa bits, promoted to float32 every 4, 32 or 128
products (or never, the fast-accumulation model), on random FP8 operands
of mixed signs and on all-positive ones (no cancellation to hide the
error)."""
import ml_dtypes
import numpy as np
import pytest

from helpers import (ACCUMULATOR_BITS, PROMOTION_INTERVAL,
                     fp8_matmul_error_bound, truncated_sum_product)


def fp8_operand(rng, shape, positive):
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(-4, 4, size=shape)
    x = np.abs(x) if positive else x
    return x.astype(ml_dtypes.float8_e4m3fn).astype(np.float64)


@pytest.mark.parametrize("k", [16, 96, 512])
@pytest.mark.parametrize("interval", [4, 32, 128, None])
@pytest.mark.parametrize("positive", [False, True])
def test_bound_covers_a_truncating_13_bit_accumulator(k, interval, positive,
                                                      rng, seed):
    a = fp8_operand(rng, (8, k), positive)
    b = fp8_operand(rng, (k, 12), positive)
    exact = a @ b
    expected = (a @ b).astype(np.float32)  # the CPU's float32 result
    got = truncated_sum_product(a, b, ACCUMULATOR_BITS, interval or k)
    bound = fp8_matmul_error_bound(
        np.abs(a) @ np.abs(b), k, "float32", expected,
        PROMOTION_INTERVAL if interval is not None else None)
    assert np.all(np.abs(got - expected) <= bound), f"seed={seed}"
    assert np.all(np.abs(got - exact) <= bound), f"seed={seed}"
    # The model is not vacuous: the truncation is visible at these sizes.
    if positive and k >= 96:
        assert np.any(got != expected), f"seed={seed}"


def test_bound_is_not_met_by_a_narrower_accumulator(rng):
    """A 6-bit accumulator breaks the 13-bit bound: the bound says
    something about the accumulator's width."""
    a = fp8_operand(rng, (8, 512), True)
    b = fp8_operand(rng, (512, 12), True)
    expected = (a @ b).astype(np.float32)
    got = truncated_sum_product(a, b, 6, 512)
    bound = fp8_matmul_error_bound(np.abs(a) @ np.abs(b), 512, "float32",
                                   expected, None)
    assert np.any(np.abs(got - expected) > bound)


def test_bound_is_not_met_without_the_promotions_it_assumes(rng):
    """An accumulator that never promotes breaks the bound that assumes a
    promotion every PROMOTION_INTERVAL products: the interval matters."""
    a = fp8_operand(rng, (8, 4096), True)
    b = fp8_operand(rng, (4096, 12), True)
    expected = (a @ b).astype(np.float32)
    got = truncated_sum_product(a, b, ACCUMULATOR_BITS, 4096)
    bound = fp8_matmul_error_bound(np.abs(a) @ np.abs(b), 4096, "float32",
                                   expected)
    assert np.any(np.abs(got - expected) > bound)
