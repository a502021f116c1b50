"""Exactness of fp8q.cast: bit-identical to ml_dtypes (FP8, bfloat16) and
NumPy (float16) on every input class.

Exhaustive where cheap (all 65,536 float16 and bfloat16 bit patterns, all 256
codes of each FP8 format), random elsewhere (>= 10^6 float32 bit patterns per
format and mode) plus constructed ties, subnormals, overflow edges and
specials. Also: the scale division, broadcast scales, strided and negative-
stride inputs and outputs, out=, uint8 semantics, fp8q.finfo, and that the
thread count never changes a result, and that a process forked after
fp8q's worker threads started still casts in parallel. Outputs are poisoned first, so every
element is proven written.
"""
import os
import re
import threading
import time
import warnings

import ml_dtypes
import numpy as np
import pytest

import fp8q
from helpers import FP8, FP8_MAX

WIDE = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
}
SATURATE = [True, False]


# --------------------------------------------------------------------------
# Helpers


def bits(array):
    """The raw bit patterns of an array, as unsigned integers."""
    array = np.ascontiguousarray(array)
    return array.view(f"u{array.dtype.itemsize}")


def reference_fp8(values, name, saturate):
    """ml_dtypes' astype; of the input clipped to +-max (NaN kept) when
    saturate=True. float32 holds every fp16/bf16/FP8 value exactly."""
    with np.errstate(invalid="ignore", over="ignore"):
        if not saturate:
            return np.asarray(values).astype(FP8[name])
        values = np.asarray(values).astype(np.float32)
        limit = np.float32(FP8_MAX[name])
        clipped = np.where(np.isnan(values), values,
                           np.clip(values, -limit, limit))
        return clipped.astype(FP8[name])


def assert_same_bits(actual, expected, inputs, context):
    """Asserts bit identity and names the first differing inputs."""
    actual_bits = bits(actual).ravel()
    expected_bits = bits(expected).ravel()
    assert actual_bits.shape == expected_bits.shape, context
    differ = np.flatnonzero(actual_bits != expected_bits)
    if differ.size:
        first = differ[:6]
        input_bits = bits(inputs).ravel()[first]
        raise AssertionError(
            f"{context}: {differ.size} of {actual_bits.size} results differ; "
            f"inputs {[hex(v) for v in input_bits]} "
            f"(values {np.asarray(inputs).ravel()[first].tolist()}) gave "
            f"{[hex(v) for v in actual_bits[first]]}, expected "
            f"{[hex(v) for v in expected_bits[first]]}")


def fp8_values(name):
    """Every finite value of a format, sorted, as float64 (no -0)."""
    codes = np.arange(256, dtype=np.uint8).view(FP8[name])
    values = codes.astype(np.float64)
    return np.unique(values[np.isfinite(values)])


def edge_inputs(name):
    """float32 inputs at every rounding decision of a format: each value, the
    midpoint to its neighbour (ties, including the tie just above max and
    those in the subnormal range) and the float32 neighbours of both, plus
    specials."""
    values = fp8_values(name)
    top_gap = values[-1] - values[-2]
    grid = np.concatenate([[-values[-1] - top_gap], values,
                           [values[-1] + top_gap]])
    midpoints = (grid[:-1] + grid[1:]) / 2
    points = np.concatenate([grid, midpoints]).astype(np.float32)
    assert np.array_equal(points.astype(np.float64),
                          np.concatenate([grid, midpoints]))
    neighbours = [np.nextafter(points, np.float32(np.inf)),
                  np.nextafter(points, np.float32(-np.inf))]
    specials = np.array(
        [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000,
         0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFBFFFFF,
         0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x80000001, 0x00800000,
         0x807FFFFF, 0x3F800000, 0x71800000, 0x0C000000],
        dtype=np.uint32).view(np.float32)
    return np.concatenate([points, *neighbours, specials])


def random_float32(rng, count, name):
    """Half uniformly random bit patterns (every class, mostly far outside
    the format), half random values whose exponent lies in or next to the
    format's range, so most of them land on rounding decisions."""
    uniform = rng.integers(0, 1 << 32, size=count // 2, dtype=np.uint32)
    info = ml_dtypes.finfo(FP8[name])
    low = int(np.log2(float(info.smallest_subnormal))) - 3 + 127
    high = int(np.log2(float(info.max))) + 3 + 127
    near = count - count // 2
    exponent = rng.integers(low, high + 1, size=near, dtype=np.uint32)
    fraction = rng.integers(0, 1 << 23, size=near, dtype=np.uint32)
    sign = rng.integers(0, 2, size=near, dtype=np.uint32) << np.uint32(31)
    in_range = sign | (exponent << np.uint32(23)) | fraction
    return np.concatenate([uniform, in_range]).view(np.float32)


def poisoned_bytes(rng, shape):
    """uint8 memory full of random garbage."""
    return rng.integers(0, 256, size=shape, dtype=np.uint8)


# --------------------------------------------------------------------------
# Exhaustive: every float16 / bfloat16 input, every FP8 code


@pytest.mark.parametrize("saturate", SATURATE)
@pytest.mark.parametrize("name", FP8)
@pytest.mark.parametrize("source", ["float16", "bfloat16"])
def test_all_16_bit_patterns_to_fp8(source, name, saturate):
    inputs = np.arange(1 << 16, dtype=np.uint16).view(WIDE[source])
    result = fp8q.cast(inputs, name, saturate=saturate)
    assert result.dtype == fp8q.dtype(name)
    assert result.shape == (1 << 16,)
    assert_same_bits(result.numpy(), reference_fp8(inputs, name, saturate),
                     inputs, f"{source} -> {name} saturate={saturate}")


@pytest.mark.parametrize("target", WIDE)
@pytest.mark.parametrize("name", FP8)
def test_all_fp8_codes_decode(name, target):
    codes = np.arange(256, dtype=np.uint8).view(FP8[name])
    result = fp8q.cast(codes, target)
    assert result.dtype == fp8q.dtype(target)
    assert_same_bits(result.numpy(), codes.astype(WIDE[target]), codes,
                     f"{name} -> {target}")


@pytest.mark.parametrize("saturate", SATURATE)
@pytest.mark.parametrize("target", FP8)
@pytest.mark.parametrize("source", FP8)
def test_all_fp8_codes_to_every_fp8_format(source, target, saturate):
    codes = np.arange(256, dtype=np.uint8).view(FP8[source])
    result = fp8q.cast(codes, target, saturate=saturate)
    if source == target:
        # Nothing to round: a same-dtype cast copies the codes (NaN payloads
        # and float8_e5m2's infinities included), as NumPy's astype does.
        expected = codes
    else:
        expected = reference_fp8(codes, target, saturate)
    assert_same_bits(result.numpy(), expected, codes,
                     f"{source} -> {target} saturate={saturate}")


@pytest.mark.parametrize("pair", [("float16", "bfloat16"),
                                  ("bfloat16", "float16"),
                                  ("float16", "float32"),
                                  ("bfloat16", "float32")])
def test_all_16_bit_patterns_between_wide_types(pair):
    source, target = pair
    inputs = np.arange(1 << 16, dtype=np.uint16).view(WIDE[source])
    result = fp8q.cast(inputs, target).numpy()
    with np.errstate(invalid="ignore", over="ignore"):
        expected = inputs.astype(WIDE[target])
        # float16 results follow NumPy's float32 -> float16 rule, which keeps
        # NaN payloads; ml_dtypes' direct bfloat16 -> float16 makes every NaN
        # 0x7E00. Both agree on everything else.
        via_numpy = inputs.astype(np.float32).astype(WIDE[target])
    numbers = ~np.isnan(inputs.astype(np.float32))
    assert_same_bits(result[numbers], expected[numbers], inputs[numbers],
                     f"{source} -> {target}")
    assert_same_bits(result, via_numpy, inputs,
                     f"{source} -> {target} (NumPy's rule)")


# --------------------------------------------------------------------------
# float32 inputs: random bit patterns, ties, subnormals, overflow, specials


@pytest.mark.parametrize("saturate", SATURATE)
@pytest.mark.parametrize("name", FP8)
def test_random_float32_to_fp8(name, saturate, rng, seed):
    inputs = random_float32(rng, 1 << 21, name)
    result = fp8q.cast(inputs, name, saturate=saturate)
    assert_same_bits(result.numpy(), reference_fp8(inputs, name, saturate),
                     inputs, f"float32 -> {name} saturate={saturate} "
                             f"seed={seed}")


@pytest.mark.parametrize("saturate", SATURATE)
@pytest.mark.parametrize("name", FP8)
def test_float32_rounding_edges_to_fp8(name, saturate):
    inputs = edge_inputs(name)
    result = fp8q.cast(inputs, name, saturate=saturate)
    assert_same_bits(result.numpy(), reference_fp8(inputs, name, saturate),
                     inputs, f"float32 edges -> {name} saturate={saturate}")


@pytest.mark.parametrize("name", FP8)
def test_overflow_rules(name):
    """The rules themselves, independent of the oracle."""
    limit = FP8_MAX[name]
    inputs = np.array([limit, -limit, np.inf, -np.inf, 2 * limit, np.nan],
                      dtype=np.float32)
    saturated = fp8q.cast(inputs, name).numpy().astype(np.float32)
    assert saturated[:5].tolist() == [limit, -limit, limit, -limit, limit]
    assert np.isnan(saturated[5])
    plain = fp8q.cast(inputs, name, saturate=False).numpy().astype(np.float32)
    assert plain[:2].tolist() == [limit, -limit]
    if name == "float8_e5m2":
        assert plain[2:5].tolist() == [np.inf, -np.inf, np.inf]
    else:
        assert np.isnan(plain[2:5]).all()
    if name.endswith("fnuz"):
        negative_zero = fp8q.cast(np.float32(-0.0), name).numpy()
        assert bits(negative_zero.reshape(1))[0] == 0


def test_random_float32_to_float16_matches_numpy(rng, seed):
    with np.errstate(invalid="ignore", over="ignore"):
        inputs = np.concatenate([
            rng.integers(0, 1 << 32, size=1 << 20,
                         dtype=np.uint32).view(np.float32),
            random_float32(rng, 1 << 20, "float8_e5m2") * np.float32(2 ** 10),
            edge_inputs("float8_e5m2"),
        ])
        expected = inputs.astype(np.float16)
    assert_same_bits(fp8q.cast(inputs, "float16").numpy(), expected, inputs,
                     f"float32 -> float16 seed={seed}")


def test_random_float32_to_bfloat16_matches_ml_dtypes(rng, seed):
    inputs = np.concatenate([
        rng.integers(0, 1 << 32, size=1 << 20,
                     dtype=np.uint32).view(np.float32),
        edge_inputs("float8_e4m3fn"),
    ])
    with np.errstate(invalid="ignore"):
        expected = inputs.astype(ml_dtypes.bfloat16)
    assert_same_bits(fp8q.cast(inputs, "bfloat16").numpy(), expected, inputs,
                     f"float32 -> bfloat16 seed={seed}")


def test_float32_to_float32_keeps_every_bit(rng, seed):
    inputs = rng.integers(0, 1 << 32, size=1 << 16,
                          dtype=np.uint32).view(np.float32)
    assert_same_bits(fp8q.cast(inputs, "float32").numpy(), inputs, inputs,
                     f"float32 -> float32 seed={seed}")


# --------------------------------------------------------------------------
# uint8


def test_float32_to_uint8_truncates_and_saturates(rng, seed):
    inputs = np.concatenate([
        rng.uniform(-300, 600, size=1 << 16).astype(np.float32),
        np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.99999994, 1.0,
                  254.99998, 255.0, 255.5, 256.0, -0.5, 1e30, -1e30],
                 dtype=np.float32),
    ])
    cleaned = np.where(np.isnan(inputs), np.float32(0), inputs)
    expected = np.trunc(np.clip(cleaned, 0, 255)).astype(np.uint8)
    assert_same_bits(fp8q.cast(inputs, "uint8").numpy(), expected, inputs,
                     f"float32 -> uint8 seed={seed}")


@pytest.mark.parametrize("target", [*WIDE, *FP8])
def test_uint8_to_every_float_type(target):
    inputs = np.arange(256, dtype=np.uint8)
    if target in FP8:
        expected = reference_fp8(inputs.astype(np.float32), target, True)
    else:
        expected = inputs.astype(WIDE[target])
    assert_same_bits(fp8q.cast(inputs, target).numpy(), expected, inputs,
                     f"uint8 -> {target}")


# --------------------------------------------------------------------------
# Scales


def scaled_reference(inputs, scale, name, saturate):
    """float32(x) / scale in NumPy's (correctly rounded) float32 division,
    then one rounding to the format."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        quotient = np.asarray(inputs, np.float32) / np.asarray(scale,
                                                               np.float32)
    return reference_fp8(quotient, name, saturate)


@pytest.mark.parametrize("saturate", SATURATE)
@pytest.mark.parametrize("name", FP8)
def test_scale_divides_then_rounds_once(name, saturate, rng, seed):
    with np.errstate(invalid="ignore", over="ignore"):
        inputs = random_float32(rng, 1 << 18, name) * np.float32(8)
    scale = np.exp2(rng.uniform(-140, 120, size=inputs.size)).astype(
        np.float32)
    scale = np.where(scale > 0, scale, np.float32(1e-45))
    result = fp8q.cast(inputs, name, scale=scale, saturate=saturate)
    assert_same_bits(result.numpy(),
                     scaled_reference(inputs, scale, name, saturate), inputs,
                     f"float32 / scale -> {name} saturate={saturate} "
                     f"seed={seed}")


@pytest.mark.parametrize("scale_shape", [None, (), (5, 1), (1, 7), (7,),
                                         (5, 7), (1, 1)])
def test_broadcast_scales(scale_shape, rng, seed):
    inputs = rng.standard_normal((5, 7)).astype(np.float32) * 300
    if scale_shape is None:
        scale = 0.75  # a Python float
    else:
        scale = rng.uniform(0.1, 4, size=scale_shape).astype(np.float32)
    result = fp8q.cast(inputs, "float8_e4m3fn", scale=scale)
    expected = scaled_reference(inputs, np.broadcast_to(scale, (5, 7)),
                                "float8_e4m3fn", True)
    assert_same_bits(result.numpy(), expected, inputs,
                     f"scale shape {scale_shape} seed={seed}")


def test_scale_from_other_dtypes_is_converted_to_float32(rng, seed):
    inputs = rng.standard_normal((3, 4)).astype(np.float32)
    scale64 = np.array([[0.1], [0.3], [1.7]])
    result = fp8q.cast(inputs, "float8_e5m2", scale=scale64)
    expected = scaled_reference(inputs, scale64.astype(np.float32),
                                "float8_e5m2", True)
    assert_same_bits(result.numpy(), expected, inputs, f"seed={seed}")


# --------------------------------------------------------------------------
# Layouts: strided and negative-stride inputs and outputs, out=


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2fnuz"])
def test_strided_and_reversed_inputs(name, rng, seed):
    base = rng.standard_normal((9, 40)).astype(np.float32) * 100
    views = [base[::-1, ::3], base[2:7, ::-2], base.T, base[::2].T[::-1],
             base[:, 5], base[3, ::-1]]
    for view in views:
        result = fp8q.cast(view, name)
        assert result.shape == view.shape
        assert_same_bits(result.numpy(), reference_fp8(view, name, True),
                         view, f"strides {view.strides} seed={seed}")


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2"])
def test_strided_and_reversed_outputs(name, rng, seed):
    inputs = rng.standard_normal((6, 10)).astype(np.float32) * 50
    memory = poisoned_bytes(rng, (12, 30))
    original = memory.copy()
    target = memory[::-2, 29:9:-2]  # (6, 10), both strides negative
    out = fp8q.from_dlpack(target, dtype=name)
    returned = fp8q.cast(inputs, name, scale=0.5, out=out)
    assert returned is out
    expected = scaled_reference(inputs, 0.5, name, True)
    assert_same_bits(target, expected, inputs, f"strided out seed={seed}")
    untouched = np.ones(memory.shape, dtype=bool)
    untouched[::-2, 29:9:-2] = False
    assert np.array_equal(memory[untouched], original[untouched]), \
        f"cast wrote outside out= (seed={seed})"


@pytest.mark.parametrize("target", ["float32", "float16", "bfloat16",
                                    "uint8", "float8_e4m3fnuz"])
def test_out_receives_every_element(target, rng, seed):
    inputs = rng.standard_normal((33, 17)).astype(np.float32) * 20
    itemsize = fp8q.dtype(target).itemsize
    memory = poisoned_bytes(rng, (33, 17 * itemsize))
    storage = memory.view(f"u{itemsize}") if itemsize > 1 else memory
    if target == "float32":
        storage = memory.view(np.float32)
    out = fp8q.from_dlpack(storage, dtype=target)
    returned = fp8q.cast(inputs, target, out=out)
    assert returned is out
    assert_same_bits(storage, fp8q.cast(inputs, target).numpy(), inputs,
                     f"out= {target} seed={seed}")
    if target == "float16":
        assert_same_bits(storage, inputs.astype(np.float16), inputs,
                         f"out= float16 vs NumPy seed={seed}")


def test_in_place_cast_through_an_aliasing_out(rng, seed):
    codes = rng.integers(0, 256, size=4096, dtype=np.uint8)
    expected = reference_fp8(codes.view(ml_dtypes.float8_e4m3fn),
                             "float8_e5m2", True)
    source = fp8q.from_dlpack(codes, dtype="float8_e4m3fn")
    out = fp8q.from_dlpack(codes, dtype="float8_e5m2")
    fp8q.cast(source, "float8_e5m2", out=out)
    assert_same_bits(codes, expected, expected, f"in place seed={seed}")


# --------------------------------------------------------------------------
# Objects, shapes, threads


def test_scalars_lists_and_tensors_as_input():
    assert fp8q.cast(1.0, "e4m3").shape == ()
    assert fp8q.cast(1.0, "e4m3").numpy().astype(np.float32) == 1.0
    from_list = fp8q.cast([[0.1, 500.0], [-3.0, 1e-3]], "float8_e4m3fn")
    expected = reference_fp8(np.array([[0.1, 500.0], [-3.0, 1e-3]],
                                      np.float32), "float8_e4m3fn", True)
    assert_same_bits(from_list.numpy(), expected, expected, "list input")
    tensor = fp8q.cast(np.arange(6, dtype=np.float32).reshape(2, 3), "fp16")
    again = fp8q.cast(tensor, "float8_e5m2")
    assert again.numpy().astype(np.float32).tolist() == [[0, 1, 2],
                                                         [3, 4, 5]]


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4, 5), ()])
def test_empty_and_zero_d(shape):
    inputs = np.full(shape, 3.0, dtype=np.float32)
    result = fp8q.cast(inputs, "float8_e4m3fn", scale=np.float32(2))
    assert result.shape == shape
    assert result.numpy().astype(np.float32).tolist() == \
        np.full(shape, 1.5, np.float32).tolist()


def test_many_dimensions(rng, seed):
    inputs = rng.standard_normal((2,) * 10).astype(np.float32)
    result = fp8q.cast(inputs[..., ::-1], "float8_e4m3fn")
    assert result.ndim == 10
    assert_same_bits(result.numpy(),
                     reference_fp8(inputs[..., ::-1], "float8_e4m3fn", True),
                     inputs, f"10-d seed={seed}")


@pytest.mark.parametrize("target", ["float8_e4m3fn", "float8_e5m2",
                                    "bfloat16", "float16", "uint8"])
def test_thread_count_never_changes_results(target, rng, seed,
                                            restore_threads):
    base = rng.integers(0, 1 << 32, size=(2050, 1030),
                        dtype=np.uint32).view(np.float32)
    inputs = base[::-1, 3:]
    scale = None
    if target.startswith("float8"):
        scale = np.exp2(rng.integers(-10, 10, size=(2050, 1))).astype(
            np.float32)
    results = []
    for threads in (1, 2, 4, 7):
        fp8q.set_num_threads(threads)
        assert fp8q.get_num_threads() == threads
        results.append(fp8q.cast(inputs, target, scale=scale).numpy())
    for result in results[1:]:
        assert_same_bits(result, results[0], inputs,
                         f"threads differ for {target} seed={seed}")


def test_concurrent_calls_from_python_threads(rng, seed):
    inputs = [rng.standard_normal(1 << 19).astype(np.float32) * 100
              for _ in range(4)]
    expected = [reference_fp8(x, "float8_e4m3fn", True) for x in inputs]
    results = [None] * len(inputs)

    def work(index):
        for _ in range(3):
            results[index] = fp8q.cast(inputs[index], "e4m3").numpy()

    threads = [threading.Thread(target=work, args=(index,))
               for index in range(len(inputs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for index, result in enumerate(results):
        assert_same_bits(result, expected[index], inputs[index],
                         f"thread {index} seed={seed}")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() on this OS")
def test_forked_child_casts_with_threads(rng, seed, restore_threads):
    """The worker threads do not survive fork(): a child made after they
    started must start its own (seen in /proc on Linux), not wait for the
    parent's or run alone."""
    inputs = rng.standard_normal(1 << 22).astype(np.float32) * 100
    expected = reference_fp8(inputs, "float8_e4m3fn", True).view(np.uint8)
    fp8q.set_num_threads(2)
    fp8q.cast(inputs, "e4m3")  # starts the parent's workers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork + threads
        pid = os.fork()
    if pid == 0:
        status = 1
        try:
            result = fp8q.cast(inputs, "e4m3").numpy().view(np.uint8)
            status = 0 if np.array_equal(result, expected) else 3
            if status == 0 and os.path.isdir("/proc/self/task"):
                status = 0 if len(os.listdir("/proc/self/task")) > 1 else 4
        finally:
            os._exit(status)
    deadline = time.monotonic() + 60
    while True:
        finished, wait_status = os.waitpid(pid, os.WNOHANG)
        if finished:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child hung in fp8q.cast (seed={seed})")
        time.sleep(0.01)
    assert os.waitstatus_to_exitcode(wait_status) == 0, f"seed={seed}"


def test_num_threads_default_is_restored(restore_threads):
    default = fp8q.get_num_threads()
    assert default >= 1
    fp8q.set_num_threads(3)
    assert fp8q.get_num_threads() == 3
    fp8q.set_num_threads(0)
    assert fp8q.get_num_threads() == default


# --------------------------------------------------------------------------
# finfo


@pytest.mark.parametrize("name, expected", [
    ("float8_e4m3fn", (448.0, 2.0 ** -6, 2.0 ** -9, 2.0 ** -3)),
    ("float8_e5m2", (57344.0, 2.0 ** -14, 2.0 ** -16, 2.0 ** -2)),
    ("float8_e4m3fnuz", (240.0, 2.0 ** -7, 2.0 ** -10, 2.0 ** -3)),
    ("float8_e5m2fnuz", (57344.0, 2.0 ** -15, 2.0 ** -17, 2.0 ** -2)),
])
def test_finfo_of_fp8_formats(name, expected):
    info = fp8q.finfo(name)
    assert (info.max, info.tiny, info.smallest_subnormal, info.eps) == \
        expected
    assert info.bits == 8
    assert info.min == -info.max
    assert info.smallest_normal == info.tiny
    assert info.dtype == fp8q.dtype(name)
    assert info.has_infinity == (name == "float8_e5m2")
    assert info.has_negative_zero == (not name.endswith("fnuz"))
    reference = ml_dtypes.finfo(FP8[name])
    assert info.max == float(reference.max)
    assert info.tiny == float(reference.tiny)
    assert info.smallest_subnormal == float(reference.smallest_subnormal)
    assert info.eps == float(reference.eps)
    assert name in repr(info)


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
def test_finfo_of_wide_types(name):
    info = fp8q.finfo(name)
    reference = (ml_dtypes.finfo(ml_dtypes.bfloat16) if name == "bfloat16"
                 else np.finfo(WIDE[name]))
    assert info.bits == reference.bits
    assert info.max == float(reference.max)
    assert info.tiny == float(reference.tiny)
    assert info.smallest_subnormal == float(reference.smallest_subnormal)
    assert info.eps == float(reference.eps)
    assert info.has_infinity and info.has_negative_zero


def test_finfo_accepts_aliases_and_dtype_objects():
    assert fp8q.finfo("e4m3").max == 448.0
    assert fp8q.finfo(fp8q.float8_e5m2).max == 57344.0
    assert fp8q.finfo(ml_dtypes.float8_e4m3fnuz).max == 240.0
    assert fp8q.finfo(np.float16).max == 65504.0


def test_bench_command_prints_a_table():
    """`python -m fp8q bench cast` on a small size (timings are never
    asserted, only that every row is there)."""
    import subprocess
    import sys

    completed = subprocess.run(
        [sys.executable, "-m", "fp8q", "bench", "cast", "--size", "65536",
         "--repeats", "1"], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    for text in ("ml_dtypes astype", "fp8q.cast(out=)", "numpy copyto",
                 "fp8q.quantize", "fp8q.dequantize", "criterion >= 10x"):
        assert text in completed.stdout, completed.stdout


def test_out_may_be_a_numpy_or_ml_dtypes_array_written_in_place(rng):
    """out= accepts arrays fp8q can view without copying; the very object is
    returned, every element written (poisoned first)."""
    x = rng.standard_normal((5, 7)).astype(np.float32)
    out = np.full((5, 7), np.nan, np.float16)
    assert fp8q.cast(x, "float16", out=out) is out
    np.testing.assert_array_equal(out.view(np.uint16),
                                  x.astype(np.float16).view(np.uint16))
    codes = np.full((7, 5), 0x55, np.uint8).view(ml_dtypes.float8_e4m3fn)
    result = fp8q.cast(x.T, "e4m3", out=codes)
    assert result is codes
    np.testing.assert_array_equal(
        codes.view(np.uint8), x.T.astype(ml_dtypes.float8_e4m3fn).view(np.uint8))
    readonly = np.empty((5, 7), np.float16)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="out="):
        fp8q.cast(x, "float16", out=readonly)


@pytest.mark.parametrize("source", ["float32", "bfloat16", "float8_e5m2"])
def test_amax_out_records_the_input_amax(rng, source):
    """amax_out= receives max |x| before scaling (NaN wins), overwriting
    what it held, while the cast itself is unchanged."""
    x = fp8q.asarray(rng.standard_normal((9, 33)).astype(np.float32) * 50,
                     dtype=source)
    values = np.asarray(x.numpy(), np.float64)
    buffer = np.full((), 1e30, np.float32)
    q = fp8q.cast(x, "e4m3", scale=0.125, amax_out=buffer)
    assert buffer == np.abs(values).max()
    np.testing.assert_array_equal(
        q.numpy().view(np.uint8),
        fp8q.cast(x, "e4m3", scale=0.125).numpy().view(np.uint8))
    one = fp8q.zeros((1, 1))
    with_nan = values.astype(np.float32)
    with_nan[3, 4] = np.nan
    fp8q.cast(with_nan, "e5m2", amax_out=one)
    assert np.isnan(one.numpy()[0, 0])


def test_amax_out_of_an_in_place_cast_is_the_input_amax():
    """With out=x (in place, one itemsize), amax_out= still receives max |x|
    of the input, as the GPU's one pass gives it: it was once read from the
    cast's output (24 for an input of 96 divided by 4)."""
    codes = np.array([1, 96, -3], np.float32).astype(ml_dtypes.float8_e4m3fn)
    amax = np.zeros(1, np.float32)
    fp8q.cast(codes, "e4m3", scale=np.float32(4), out=codes, amax_out=amax)
    assert amax[0] == 96
    np.testing.assert_array_equal(codes.astype(np.float32), [0.25, 24, -0.75])
    halves = np.array([1e4, 1], np.float32).astype(ml_dtypes.bfloat16)
    fp8q.cast(halves, "float16", out=halves.view(np.float16), amax_out=amax)
    assert amax[0] == 9984  # bfloat16(1e4), before it became float16 bits


def test_amax_out_sharing_memory_is_refused():
    """amax_out= inside x, scale= or out= would change what the cast reads
    or be overwritten by it (it once corrupted out's first element)."""
    x = np.array([1, 2, 5], np.float32)
    out = np.zeros(3, np.float32)
    with raises_value("cast: amax_out= must not share memory with out="):
        fp8q.cast(x, "float32", out=out, amax_out=out[:1])
    np.testing.assert_array_equal(out, 0)
    with raises_value("cast: amax_out= must not share memory with x"):
        fp8q.cast(x, "e4m3", amax_out=x[2:])
    scale = np.full(3, 2, np.float32)
    with raises_value("cast: amax_out= must not share memory with scale="):
        fp8q.cast(x, "e4m3", scale=scale, amax_out=scale[1:2])
    np.testing.assert_array_equal(x, [1, 2, 5])
    np.testing.assert_array_equal(scale, 2)


def raises_value(message):
    return pytest.raises(ValueError, match=f"^{re.escape(message)}$")


def test_amax_out_errors():
    x = np.ones(4, np.float32)
    for bad, what in ((np.zeros(2, np.float32), "another number of elements"),
                      (np.zeros((), np.float16), "another dtype")):
        with pytest.raises(ValueError, match=r"^cast: amax_out= must be a "
                           r"writable float32 tensor of one element on cpu "
                           rf"\(x's device\), got {what}"):
            fp8q.cast(x, "e4m3", amax_out=bad)
    readonly = np.zeros((), np.float32)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="got a read-only tensor"):
        fp8q.cast(x, "e4m3", amax_out=readonly)


def test_self_overlapping_out_is_refused():
    # Regression: as_strided rows that overlap were accepted as out=, and the
    # threads' results raced on the shared elements.
    storage = np.full(40, 7, dtype=np.uint8)
    rows = np.lib.stride_tricks.as_strided(storage, (4, 16), (8, 1))
    x = np.ones((4, 16), dtype=np.float32)
    with pytest.raises(ValueError, match=r"^cast: out: axis 0 \(extent 4, "
                       r"stride 8\) revisits elements"):
        fp8q.cast(x, "float8_e4m3fn", out=rows.view(ml_dtypes.float8_e4m3fn))
    assert (storage == 7).all()
    disjoint = np.lib.stride_tricks.as_strided(storage, (4, 8), (8, 1))
    fp8q.cast(x[:, :8], "float8_e4m3fn",
              out=disjoint.view(ml_dtypes.float8_e4m3fn))
    assert (storage[:32] == 0x38).all()  # 1.0 in E4M3
