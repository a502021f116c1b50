"""Fuzz harness: fp8q.from_dlpack on hostile capsules built with ctypes
(any ndim, extents, strides, byte_offset, dtype, device, version, data
pointer). Each capsule is either refused with TypeError / ValueError /
BufferError / fp8q.CudaError and left unconsumed, or consumed with its
deleter called exactly once when the tensor goes; a tensor whose elements
lie inside the real buffer is cast and compared with NumPy."""
import ctypes
import gc

import numpy as np

import fp8q
from dlpack_abi import (CODES, DLDataType, DLDevice, DLManagedTensor,
                        DLManagedTensorVersioned, DLPackVersion, DLTensor,
                        LEGACY_DELETER, VERSIONED_DELETER, capsule_name,
                        capsule_new)
from helpers import np_dtype

EXTENTS = [0, 1, 2, 3, 5, 2**31, 2**62, 2**63 - 1, -1, -(2**63)]
STRIDES = [0, 1, 2, -1, -3, 7, 2**40, 2**61, -(2**63), 2**63 - 1]
OFFSETS = [0, 4, 8, 1, 2, 2**62, 2**63, 2**64 - 4, 2**64 - 1]
DEVICES = [(1, 0)] * 6 + [(2, 0), (4, 0), (1, 5), (-1, -1)]
REFUSALS = (TypeError, ValueError, BufferError, fp8q.CudaError)


def pick(rng, options):
    return options[int(rng.integers(len(options)))]


def random_dtype(rng):
    if rng.random() < 0.8:
        name = pick(rng, list(CODES))
        return name, CODES[name][0], CODES[name][1], 1
    return None, int(rng.integers(256)), int(rng.integers(256)), \
        int(rng.integers(4))


def one_case(rng, buffer):
    """Builds, imports and checks one capsule; returns a description on
    failure, None when it behaved."""
    ndim = int(rng.integers(0, 5)) if rng.random() < 0.9 else int(
        rng.integers(-2, 20))
    count = max(ndim, 1)
    small = rng.random() < 0.6
    shape = (ctypes.c_int64 * count)(*[
        int(rng.integers(0, 4)) if small else pick(rng, EXTENTS)
        for _ in range(count)])
    strides = (ctypes.c_int64 * count)(*[
        int(rng.integers(-4, 5)) if small else pick(rng, STRIDES)
        for _ in range(count)])
    name, code, bits, lanes = random_dtype(rng)
    base = buffer.ctypes.data + 256 * int(rng.integers(0, 4))
    data = pick(rng, [base, base, base, base + 1, base + 2, 0])
    tensor = DLTensor()
    tensor.data = data
    tensor.device = DLDevice(*pick(rng, DEVICES))
    tensor.ndim = ndim
    tensor.dtype = DLDataType(code, bits, lanes)
    tensor.shape = shape if rng.random() < 0.97 else None
    tensor.strides = strides if rng.random() < 0.7 else None
    tensor.byte_offset = pick(rng, OFFSETS) if rng.random() < 0.3 else 0
    calls = []
    versioned = rng.random() < 0.7
    if versioned:
        deleter = VERSIONED_DELETER(lambda pointer: calls.append(1))
        managed = DLManagedTensorVersioned(
            DLPackVersion(pick(rng, [1, 1, 1, 0, 2]), int(rng.integers(3))),
            None, deleter, int(rng.integers(4)), tensor)
        capsule = capsule_new(ctypes.addressof(managed),
                              b"dltensor_versioned", None)
    else:
        deleter = LEGACY_DELETER(lambda pointer: calls.append(1))
        managed = DLManagedTensor(tensor, None, deleter)
        capsule = capsule_new(ctypes.addressof(managed), b"dltensor", None)
    description = dict(ndim=ndim, shape=list(shape)[:max(ndim, 0)],
                       strides=list(strides)[:max(ndim, 0)],
                       dtype=(code, bits, lanes), data=data - base,
                       byte_offset=tensor.byte_offset,
                       device=(tensor.device.device_type,
                               tensor.device.device_id),
                       versioned=versioned)
    try:
        result = fp8q.from_dlpack(capsule)
    except REFUSALS:
        if capsule_name(capsule).startswith("used_") or calls:
            return f"refused but consumed: {description}"
        return None
    except Exception as error:  # anything else is a finding
        return f"{type(error).__name__}: {error}: {description}"
    if not capsule_name(capsule).startswith("used_"):
        return f"accepted but not consumed: {description}"
    problem = check_values(result, buffer, name)
    del result
    gc.collect()
    if len(calls) != 1:
        return f"deleter called {len(calls)} times: {description}"
    return problem and f"{problem}: {description}"


def check_values(tensor, buffer, name):
    """Compares cast(tensor, float32) with NumPy when every element lies
    inside `buffer`; None when it agrees or cannot be checked."""
    if (name is None or not 0 < tensor.size <= 1 << 16
            or tensor.device != "cpu"):
        return None
    itemsize = np_dtype(name).itemsize
    offsets = [(extent - 1) * stride for extent, stride in
               zip(tensor.shape, tensor.strides)]
    low = tensor.data_ptr + itemsize * sum(o for o in offsets if o < 0)
    high = tensor.data_ptr + itemsize * (sum(o for o in offsets if o > 0) + 1)
    if low < buffer.ctypes.data or high > buffer.ctypes.data + buffer.size:
        return None  # the producer lied about memory it does not own
    start = tensor.data_ptr - buffer.ctypes.data
    # as_strided on unsigned codes: NumPy's array interface has no
    # ml_dtypes types.
    expected = np.lib.stride_tricks.as_strided(
        buffer[start:].view(f"u{itemsize}"), tensor.shape,
        [stride * itemsize for stride in tensor.strides]
    ).view(np_dtype(name))
    actual = fp8q.cast(tensor, "float32").numpy()
    wanted = expected.astype(np.float32)
    if not np.array_equal(actual, wanted, equal_nan=True):
        return "values differ from NumPy's"
    return None


def run(rng, iterations, seconds, clock):
    """Runs up to `iterations` cases within `seconds`; returns (cases run,
    failure descriptions)."""
    raw = rng.integers(0, 256, size=4096 + 64).astype(np.uint8)
    buffer = raw[(-raw.ctypes.data) % 64:][:4096]  # 64-byte aligned
    failures = []
    start = clock()
    done = 0
    while done < iterations and clock() - start < seconds:
        problem = one_case(rng, buffer)
        if problem:
            failures.append(problem)
        done += 1
    return done, failures
