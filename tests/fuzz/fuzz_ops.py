"""Fuzz harness: fp8q.cast and fp8q.amax on random dtypes, shapes, strided
and reversed views and random bit patterns, against ml_dtypes / NumPy
references (bit-exact casts, exact amax)."""
import numpy as np

import fp8q
from helpers import FP8, FP8_MAX, np_dtype

SOURCES = ["float32", "float16", "bfloat16"] + list(FP8)
TARGETS = ["float32"] + list(FP8)


def pick(rng, options):
    return options[int(rng.integers(len(options)))]


def random_view(rng, name):
    """A random-bits array of dtype `name`, sliced with random steps (some
    negative) and maybe transposed: shape, strides and order vary."""
    ndim = int(rng.integers(0, 5))
    big = rng.random() < 0.05  # past the parallel threshold
    shape = [int(rng.integers(0, 7)) for _ in range(ndim)]
    if big and ndim:
        shape[-1] = 1 << 19
    itemsize = np_dtype(name).itemsize
    raw = rng.integers(0, 256, size=int(np.prod(shape, dtype=np.int64))
                       * itemsize, dtype=np.uint8)
    array = raw.view(np_dtype(name)).reshape(shape)
    index = tuple(slice(None, None, pick(rng, [1, 1, 2, -1, -2]))
                  for _ in range(ndim))
    array = array[index]
    if ndim > 1 and rng.random() < 0.3:
        array = array.T
    return array


def reference_cast(values, target, saturate):
    with np.errstate(invalid="ignore", over="ignore"):
        wide = values.astype(np.float32)
        if target == "float32":
            return wide
        if saturate:
            limit = np.float32(FP8_MAX[target])
            wide = np.where(np.isnan(wide), wide, np.clip(wide, -limit, limit))
        return wide.astype(FP8[target])


def same_values(actual, expected):
    """Bit-identical, except that any NaN equals any NaN (the references
    go through float32, whose NaN payloads differ)."""
    actual = np.ascontiguousarray(actual)
    expected = np.ascontiguousarray(expected)
    nan = np.isnan(expected.astype(np.float32))
    if actual.shape != expected.shape or not np.array_equal(
            np.isnan(actual.astype(np.float32)), nan):
        return False
    unsigned = f"u{actual.dtype.itemsize}"
    return np.array_equal(actual.view(unsigned)[~nan],
                          expected.view(unsigned)[~nan])


def one_case(rng):
    source = pick(rng, SOURCES)
    target = pick(rng, TARGETS)
    saturate = bool(rng.random() < 0.5)
    values = random_view(rng, source)
    description = (f"cast {source}{values.shape} strides {values.strides} "
                   f"to {target} saturate={saturate}")
    actual = fp8q.cast(values, target, saturate=saturate).numpy()
    expected = (values if source == target  # a copy, every bit kept
                else reference_cast(values, target, saturate))
    if not same_values(actual, expected):
        return description
    finite = values.astype(np.float32)
    if values.size and np.isfinite(finite).all():
        amax = float(fp8q.amax(values).numpy())
        if amax != float(np.abs(finite).max()):
            return f"amax of {source}{values.shape}: {amax}"
    return None


def run(rng, iterations, seconds, clock):
    """Runs up to `iterations` cases within `seconds`; returns (cases run,
    failure descriptions)."""
    failures = []
    start = clock()
    done = 0
    while done < iterations and clock() - start < seconds:
        problem = one_case(rng)
        if problem:
            failures.append(problem)
        done += 1
    return done, failures
