"""DLPack: Tensor.__dlpack__ / __dlpack_device__ (capsule kind chosen by
max_version, every keyword's semantics, dtype codes, read-only flag) and
fp8q.from_dlpack (versioned and legacy producers, bare capsules, NULL strides,
dtype= reinterpretation, errors), the capsule ownership rules, lifetimes and
the absence of leaks over 10^4 round trips.

Capsules are inspected and hand-built with ctypes (tests/dlpack_abi.py).
"""
import ctypes
import gc
import os
import sys
import weakref

import numpy as np
import pytest

import fp8q
from dlpack_abi import (CODES, FLAG_IS_COPIED, FLAG_READ_ONLY, HandMade,
                        capsule_name, capsule_new, dl_fields, read_capsule)
from helpers import needs_numpy_versioned_dlpack

# --------------------------------------------------------------------------
# Producer


@pytest.mark.parametrize("max_version,kind", [
    (None, "dltensor"), ((0, 8), "dltensor"), ((1, 0), "dltensor_versioned"),
    ((1, 1), "dltensor_versioned"), ((1, 5), "dltensor_versioned"),
    ((2, 0), "dltensor_versioned")])
def test_capsule_kind_follows_max_version(max_version, kind):
    t = fp8q.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    capsule = t.__dlpack__(max_version=max_version)
    assert capsule_name(capsule) == kind
    managed, versioned = read_capsule(capsule)
    if versioned:
        assert (managed.version.major, managed.version.minor) == (1, 1)
        assert managed.flags == 0
    fields = dl_fields(managed.dl_tensor)
    assert fields == {"data": t.data_ptr, "device": (1, 0), "ndim": 2,
                      "dtype": (2, 32, 1), "shape": (2, 3), "strides": (3, 1),
                      "byte_offset": 0}


@pytest.mark.parametrize("name", sorted(CODES))
def test_dtype_codes(name):
    t = fp8q.zeros((4,), dtype=name)
    for max_version in (None, (1, 1)):
        managed, _ = read_capsule(t.__dlpack__(max_version=max_version))
        code, bits = CODES[name]
        assert dl_fields(managed.dl_tensor)["dtype"] == (code, bits, 1)


def test_strided_and_zero_d_exports():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = fp8q.asarray(a[::-2, 1::3])
    fields = dl_fields(read_capsule(t.__dlpack__(max_version=(1, 0)))[0]
                       .dl_tensor)
    assert fields["shape"] == (2, 2) and fields["strides"] == (-12, 3)
    assert fields["data"] == a[3, 1:].ctypes.data
    scalar = fp8q.asarray(1.0)
    fields = dl_fields(read_capsule(scalar.__dlpack__())[0].dl_tensor)
    assert fields["ndim"] == 0 and fields["shape"] == ()


def test_dlpack_device():
    assert fp8q.zeros(1).__dlpack_device__() == (1, 0)


def test_producer_keywords():
    t = fp8q.asarray([1.0, 2.0])
    assert capsule_name(t.__dlpack__(stream=None)) == "dltensor"
    assert capsule_name(t.__dlpack__(dl_device=(1, 0))) == "dltensor"
    with pytest.raises(ValueError, match=r"^stream: .*stream=None, got 1"):
        t.__dlpack__(stream=1)
    with pytest.raises(ValueError, match="stream"):
        t.__dlpack__(stream=-1, max_version=(1, 0))
    with pytest.raises(BufferError, match=r"^dl_device: .*\(2, 0\)"):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="dl_device"):
        t.__dlpack__(dl_device=(1, 1))
    with pytest.raises(TypeError, match="^dl_device: "):
        t.__dlpack__(dl_device="cpu")
    with pytest.raises(TypeError, match="^max_version: "):
        t.__dlpack__(max_version=1)
    with pytest.raises(TypeError, match="^max_version: "):
        t.__dlpack__(max_version=(1,))
    with pytest.raises(TypeError):
        t.__dlpack__(None)
    with pytest.raises(TypeError):
        t.__dlpack__(unknown=1)


def test_producer_copy():
    t = fp8q.asarray([1.0, 2.0], dtype="e4m3")
    shared, _ = read_capsule(t.__dlpack__(copy=False, max_version=(1, 0)))
    assert shared.dl_tensor.data == t.data_ptr and shared.flags == 0
    capsule = t.__dlpack__(copy=True, max_version=(1, 0))
    copied, _ = read_capsule(capsule)
    assert copied.dl_tensor.data != t.data_ptr
    assert copied.flags == FLAG_IS_COPIED
    c = fp8q.from_dlpack(capsule)
    assert c.data_ptr != t.data_ptr
    np.testing.assert_array_equal(np.asarray(c), np.asarray(t))
    legacy, _ = read_capsule(t.__dlpack__(copy=True))
    assert legacy.dl_tensor.data != t.data_ptr


@needs_numpy_versioned_dlpack
def test_producer_readonly():
    source = np.arange(3, dtype=np.float32)
    source.flags.writeable = False
    t = fp8q.asarray(source)
    managed, versioned = read_capsule(t.__dlpack__(max_version=(1, 0)))
    assert versioned and managed.flags == FLAG_READ_ONLY
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__()
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__(max_version=(0, 9))
    copied, _ = read_capsule(t.__dlpack__(copy=True))
    assert copied.dl_tensor.data != t.data_ptr
    copied, _ = read_capsule(t.__dlpack__(copy=True, max_version=(1, 1)))
    assert copied.flags == FLAG_IS_COPIED
    back = fp8q.from_dlpack(t)
    assert back.readonly and back.data_ptr == t.data_ptr
    assert not np.from_dlpack(t).flags.writeable


def test_unconsumed_capsule_releases_the_tensor():
    t = fp8q.asarray([1.0, 2.0])
    baseline = sys.getrefcount(t)
    for max_version in (None, (1, 0)):
        capsule = t.__dlpack__(max_version=max_version)
        assert sys.getrefcount(t) == baseline + 1
        del capsule
        assert sys.getrefcount(t) == baseline


def test_consumed_capsule_is_released_once_by_the_consumer():
    t = fp8q.asarray([1.0, 2.0])
    baseline = sys.getrefcount(t)
    for max_version in (None, (1, 0)):
        capsule = t.__dlpack__(max_version=max_version)
        imported = fp8q.from_dlpack(capsule)
        assert capsule_name(capsule).startswith("used_")
        del capsule
        assert sys.getrefcount(t) == baseline + 1
        view = imported.T.view("float32")  # views keep the export alive
        del imported
        assert sys.getrefcount(t) == baseline + 1
        del view
        assert sys.getrefcount(t) == baseline


@needs_numpy_versioned_dlpack
def test_numpy_consumes_fp8q_capsules():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = fp8q.asarray(a)
    for source in (t, t.T, fp8q.asarray(a[:, ::-1])):
        n = np.from_dlpack(source)
        assert n.ctypes.data == source.data_ptr
        np.testing.assert_array_equal(n, source.numpy())
    n = np.from_dlpack(t)
    n[0, 0] = 42.0
    assert a[0, 0] == 42.0


# --------------------------------------------------------------------------
# Consumer


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.uint8])
def test_from_numpy(dtype):
    a = np.arange(12).astype(dtype).reshape(3, 4)
    t = fp8q.from_dlpack(a)
    assert t.dtype == np.dtype(dtype)
    assert t.data_ptr == a.ctypes.data
    assert t.shape == (3, 4) and t.strides == (4, 1)
    assert not t.readonly
    t.numpy()[1, 1] = 99
    assert a[1, 1] == 99
    s = fp8q.from_dlpack(a[::-1, ::2])
    assert s.strides == (-4, 2)
    assert s.data_ptr == a[2].ctypes.data
    np.testing.assert_array_equal(s.numpy(), a[::-1, ::2])


@needs_numpy_versioned_dlpack
def test_from_numpy_readonly():
    a = np.arange(3, dtype=np.float32)
    a.flags.writeable = False
    t = fp8q.from_dlpack(a)
    assert t.readonly and t.data_ptr == a.ctypes.data


def test_producer_deleted_data_intact():
    a = np.arange(1000, dtype=np.float32)
    reference = weakref.ref(a)
    t = fp8q.from_dlpack(a)
    del a
    gc.collect()
    assert reference() is not None
    assert t.numpy().sum() == sum(range(1000))
    del t
    assert reference() is None


@needs_numpy_versioned_dlpack
def test_bare_capsules():
    a = np.arange(4, dtype=np.float32)
    for max_version in (None, (1, 0)):
        capsule = a.__dlpack__(max_version=max_version)
        t = fp8q.from_dlpack(capsule)
        assert t.data_ptr == a.ctypes.data
        with pytest.raises(BufferError, match="^obj: .*already consumed"):
            fp8q.from_dlpack(capsule)


def test_capsule_with_another_name():
    holder = ctypes.c_int(0)
    capsule = capsule_new(ctypes.addressof(holder), b"something_else", None)
    with pytest.raises(TypeError, match="something_else"):
        fp8q.from_dlpack(capsule)


@pytest.mark.parametrize("versioned", [True, False])
def test_null_strides_and_deleter_called_once(versioned):
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    made = HandMade(array, versioned=versioned, strides=None)
    capsule = made.capsule()
    t = fp8q.from_dlpack(capsule)
    assert capsule_name(capsule).startswith("used_")
    assert t.strides == (4, 1) and t.shape == (3, 4)
    assert t.data_ptr == array.ctypes.data
    np.testing.assert_array_equal(t.numpy(), array)
    del capsule
    assert made.calls == 0
    transposed = t.T
    del t
    gc.collect()
    assert made.calls == 0
    del transposed
    gc.collect()
    assert made.calls == 1


def test_byte_offset_and_readonly_flag():
    array = np.arange(8, dtype=np.float32)
    made = HandMade(array[2:], byte_offset=8, flags=FLAG_READ_ONLY)
    t = fp8q.from_dlpack(made.capsule())
    assert t.data_ptr == array[2:].ctypes.data and t.readonly
    np.testing.assert_array_equal(t.numpy(), array[2:])
    legacy = HandMade(array, versioned=False)
    assert not fp8q.from_dlpack(legacy.capsule()).readonly


def test_consumer_refusals_leave_the_capsule_unconsumed():
    array = np.zeros(4, dtype=np.float32)
    cases = [
        (dict(major=2, minor=0), BufferError, "DLPack version 2.0"),
        (dict(device=(4, 0)), BufferError,
         r"device \(4, 0\); fp8q reads CPU \(1, 0\) and CUDA"),
        (dict(code=2, bits=64), TypeError, r"code 2: float, bits 64"),
        (dict(code=5, bits=64), TypeError, r"code 5: complex"),
        (dict(code=0, bits=32), TypeError, r"code 0: int, bits 32"),
        (dict(code=2, bits=16, lanes=2), TypeError, "lanes 2"),
        (dict(ndim=17), ValueError, "0 to 16 dims, got 17"),
    ]
    for keywords, exception, pattern in cases:
        made = HandMade(array, **keywords)
        capsule = made.capsule()
        with pytest.raises(exception, match="^obj: .*" + pattern):
            fp8q.from_dlpack(capsule)
        assert capsule_name(capsule) == "dltensor_versioned"
        assert made.calls == 0


@pytest.mark.parametrize("shape,strides", [
    ((2**62, 4), None), ((2**31, 2**31, 4), None), ((3,), (2**62,)),
    ((2, 2), (2**61, 2**61)), ((3,), (-2**63,)), ((5, -1), None)])
def test_layouts_beyond_int64_or_negative_are_refused(shape, strides):
    # Regression: such shapes used to overflow int64 silently (size 0 or a
    # wrapped byte span) and were accepted.
    made = HandMade(np.zeros((1,) * len(shape), dtype=np.float32),
                    strides="given" if strides else None)
    for axis, extent in enumerate(shape):
        made.shape[axis] = extent
        if strides:
            made.strides[axis] = strides[axis]
    capsule = made.capsule()
    with pytest.raises(BufferError, match="^obj: unusable DLPack tensor"):
        fp8q.from_dlpack(capsule)
    assert capsule_name(capsule) == "dltensor_versioned"
    assert made.calls == 0


def test_misaligned_data_is_refused():
    raw = np.zeros(20, dtype=np.uint8)
    made = HandMade(raw[:16].view(np.float32))
    made.managed.dl_tensor.data = raw.ctypes.data + 1
    with pytest.raises(BufferError, match="not aligned"):
        fp8q.from_dlpack(made.capsule())


def test_reinterpret_dtype():
    codes = np.array([0x38, 0x40, 0x7E, 0xFE], dtype=np.uint8)
    t = fp8q.from_dlpack(codes, dtype="float8_e4m3fn")
    assert t.dtype is fp8q.float8_e4m3fn and t.data_ptr == codes.ctypes.data
    np.testing.assert_array_equal(t.numpy().astype(np.float32),
                                  [1, 2, 448, -448])
    signed = fp8q.from_dlpack(codes.view(np.int8), dtype="e5m2")
    assert signed.dtype is fp8q.float8_e5m2
    half = fp8q.from_dlpack(np.array([1.0], np.float16), dtype="bf16")
    assert half.dtype is fp8q.bfloat16
    assert half.numpy().view(np.uint16)[0] == 0x3C00
    with pytest.raises(ValueError, match=r"^obj: dtype=float16 \(16 bits\) "
                       r"cannot reinterpret DLPack elements of 8 bits"):
        fp8q.from_dlpack(codes, dtype="float16")
    with pytest.raises(TypeError, match="^dtype: "):
        fp8q.from_dlpack(codes, dtype="int8")


@pytest.mark.parametrize("array,pattern", [
    (np.zeros(2, np.float64), "code 2: float, bits 64"),
    (np.zeros(2, np.int32), "code 0: int, bits 32"),
    (np.zeros(2, np.complex64), "code 5: complex, bits 64"),
    (np.zeros(2, np.bool_), "code 6: bool, bits 8"),
])
def test_unsupported_dlpack_dtypes(array, pattern):
    with pytest.raises(TypeError, match="^obj: unsupported DLPack dtype .*"
                       + pattern):
        fp8q.from_dlpack(array)


def test_consumer_argument_errors():
    with pytest.raises(TypeError, match=r"^obj: expected a DLPack producer.*"
                       "got list"):
        fp8q.from_dlpack([1.0])
    with pytest.raises(TypeError):
        fp8q.from_dlpack()
    with pytest.raises(TypeError):
        fp8q.from_dlpack(np.zeros(1, np.float32), "float32")

    class NotACapsule:
        def __dlpack__(self, **kwargs):
            return "capsule"

    with pytest.raises(TypeError, match=r"__dlpack__\(\) returned str"):
        fp8q.from_dlpack(NotACapsule())


class Producer:
    """A DLPack producer wrapping a NumPy array, recording the calls."""

    def __init__(self, array, device=(1, 0), legacy_only=False):
        self.array = array
        self.device = device
        self.legacy_only = legacy_only
        self.calls = []

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None, **kwargs):
        if self.legacy_only and kwargs:
            raise TypeError("unexpected keyword argument")
        self.calls.append(kwargs)
        return self.array.__dlpack__(**kwargs)


@needs_numpy_versioned_dlpack
def test_consumer_asks_for_versioned_then_falls_back():
    array = np.arange(3, dtype=np.float32)
    producer = Producer(array)
    t = fp8q.from_dlpack(producer)
    assert producer.calls == [{"max_version": (1, 1)}]
    assert t.data_ptr == array.ctypes.data
    legacy = Producer(array, legacy_only=True)
    t = fp8q.from_dlpack(legacy)
    assert legacy.calls == [{}]
    assert t.data_ptr == array.ctypes.data


def test_producer_on_another_device_kind_is_refused_before_export():
    producer = Producer(np.zeros(2, np.float32), device=(4, 0))
    with pytest.raises(BufferError, match=r"^obj: the data is on DLPack "
                       r"device \(4, 0\); fp8q reads CPU"):
        fp8q.from_dlpack(producer)
    assert producer.calls == []


def test_fp8q_round_trip_every_dtype():
    for name in CODES:
        t = fp8q.asarray(np.arange(6, dtype=np.float32).reshape(2, 3),
                         dtype=name)
        for max_version in (None, (1, 1)):
            back = fp8q.from_dlpack(t.__dlpack__(max_version=max_version))
            assert back.dtype is t.dtype and back.data_ptr == t.data_ptr
            assert back.shape == t.shape and back.strides == t.strides
            assert bytes(back) == bytes(t)


# --------------------------------------------------------------------------
# Leaks


def rss_bytes():
    """Resident set size of this process in bytes."""
    if sys.platform.startswith("linux"):
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    if sys.platform == "win32":
        class Counters(ctypes.Structure):
            _fields_ = [("cb", ctypes.c_uint32),
                        ("PageFaultCount", ctypes.c_uint32)] + [
                (name, ctypes.c_size_t) for name in (
                    "PeakWorkingSetSize", "WorkingSetSize",
                    "QuotaPeakPagedPoolUsage", "QuotaPagedPoolUsage",
                    "QuotaPeakNonPagedPoolUsage", "QuotaNonPagedPoolUsage",
                    "PagefileUsage", "PeakPagefileUsage")]
        counters = Counters()
        counters.cb = ctypes.sizeof(Counters)
        process = ctypes.windll.kernel32.GetCurrentProcess()
        ctypes.windll.psapi.GetProcessMemoryInfo(
            process, ctypes.byref(counters), counters.cb)
        return counters.WorkingSetSize
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (
        1 if sys.platform == "darwin" else 1024)


def test_no_leak_over_many_round_trips():
    """10^4 round trips through every path with 64 KiB tensors: a leak of
    the data would grow the process by 640 MiB per path, a leak of the
    wrapper objects is caught by reference counts."""
    element_count = 16384
    source = np.arange(element_count, dtype=np.float32)
    producer_baseline = sys.getrefcount(source)

    def one_round():
        t = fp8q.asarray(np.arange(element_count, dtype=np.float32))
        back = fp8q.from_dlpack(t.__dlpack__(max_version=(1, 0)))
        legacy = fp8q.from_dlpack(back.__dlpack__())
        array = np.from_dlpack(legacy)
        again = fp8q.asarray(array, dtype="e4m3")
        np.asarray(memoryview(again))
        fp8q.from_dlpack(source)
        fp8q.asarray(source, copy=True)
        fp8q.from_dlpack(again.__dlpack__(copy=True, max_version=(1, 1)))

    for _ in range(200):
        one_round()
    gc.collect()
    before = rss_bytes()
    for _ in range(10_000):
        one_round()
    gc.collect()
    growth = rss_bytes() - before
    assert growth < 48 * 2**20, f"RSS grew by {growth / 2**20:.1f} MiB"
    assert sys.getrefcount(source) == producer_baseline


# --------------------------------------------------------------------------
# Regressions of the audit (issue 17)


@pytest.mark.parametrize("byte_offset,pattern", [
    (2**64 - 4, r"byte_offset 18446744073709551612 overflows"),
    (2**63, r"byte_offset 9223372036854775808 overflows"),
    (2, r"byte_offset 2 is not a multiple of the 4-byte elements")])
def test_unusable_byte_offsets_are_refused(byte_offset, pattern):
    # Regression: byte_offset was added to the data pointer unchecked; 2**64-4
    # read before the buffer, offsets >= 2**63 overflowed the pointer.
    made = HandMade(np.zeros(4, dtype=np.float32))
    made.managed.dl_tensor.data = np.zeros(8, np.float32).ctypes.data
    made.managed.dl_tensor.byte_offset = byte_offset
    capsule = made.capsule()
    with pytest.raises(BufferError, match="^obj: DLPack " + pattern):
        fp8q.from_dlpack(capsule)
    assert capsule_name(capsule) == "dltensor_versioned"
    assert made.calls == 0


def test_elements_wrapping_around_the_address_space_are_refused():
    made = HandMade(np.zeros(4, dtype=np.float32))
    made.strides[0] = -(2**58)  # 3 * 2**60 bytes below the data
    with pytest.raises(BufferError, match="lie outside the address space"):
        fp8q.from_dlpack(made.capsule())


def test_byte_offset_beyond_any_mapped_address_is_refused():
    # Regression: an offset of 2**62 on a 4-element tensor neither overflows
    # nor wraps, and crashed the next op; no process maps memory there.
    made = HandMade(np.zeros(4, dtype=np.float32))
    made.managed.dl_tensor.byte_offset = 2**62
    with pytest.raises(BufferError, match=r"byte_offset 4611686018427387904 "
                                          r"included\) lie outside"):
        fp8q.from_dlpack(made.capsule())
    assert made.calls == 0


def test_empty_capsule_whose_extents_overflow_int64():
    # Regression: fp8q_view_size multiplied 2 * (2**63 - 1) before the 0.
    made = HandMade(np.zeros((1, 1, 1), dtype=np.float32), strides=None)
    made.shape[0], made.shape[1], made.shape[2] = 2, 2**63 - 1, 0
    t = fp8q.from_dlpack(made.capsule())
    assert t.shape == (2, 2**63 - 1, 0) and t.size == 0
    assert fp8q.cast(t, "float8_e4m3fn").shape == t.shape


class DeviceReporter:
    """A producer whose __dlpack_device__ returns `device`."""

    def __init__(self, device):
        self.device = device

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, **kwargs):
        raise AssertionError("must be refused before the export")


def test_out_of_range_ints_in_dlpack_arguments():
    # Regression: ints beyond int64 raised OverflowError instead of the
    # documented errors.
    t = fp8q.asarray(np.arange(4, dtype=np.float32))
    with pytest.raises(BufferError, match=r"device \(2361183241434822606848, "
                       r"0\); fp8q reads CPU"):
        fp8q.from_dlpack(DeviceReporter((2**71, 0)))
    with pytest.raises(BufferError, match=r"device \(-2361183241434822606848"):
        fp8q.from_dlpack(DeviceReporter((-2**71, 0)))
    with pytest.raises(BufferError, match=r"exports it to \(1, "
                       r"1180591620717411303424\) only as a copy"):
        t.__dlpack__(dl_device=(1, 2**70))
    with pytest.raises(BufferError, match=r"\(1180591620717411303424, 0\)"):
        t.__dlpack__(dl_device=(2**70, 0), copy=True)
    capsule = t.__dlpack__(max_version=(2**70, 0))
    assert capsule_name(capsule) == "dltensor_versioned"
    assert capsule_name(t.__dlpack__(max_version=(-2**70, 0))) == "dltensor"
    with pytest.raises(TypeError, match="max_version: expected None or a"):
        t.__dlpack__(max_version=(2**70,))
