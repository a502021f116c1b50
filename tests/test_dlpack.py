"""DLPack: Tensor.__dlpack__ / __dlpack_device__ (capsule kind chosen by
max_version, every keyword's semantics, dtype codes, read-only flag) and
fp8q.from_dlpack (versioned and legacy producers, bare capsules, NULL strides,
dtype= reinterpretation, errors), the capsule ownership rules, lifetimes and
the absence of leaks over 10^4 round trips.

Capsules are inspected and hand-built with ctypes, using a declaration of
the DLPack 1.1 ABI written here from the specification.
"""
import ctypes
import gc
import os
import sys
import weakref

import numpy as np
import pytest

import fp8q
from helpers import needs_numpy_versioned_dlpack

# --------------------------------------------------------------------------
# The DLPack ABI, for inspecting and building capsules


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice),
                ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


LEGACY_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor),
                            ("manager_ctx", ctypes.c_void_p),
                            ("deleter", LEGACY_DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


VERSIONED_DELETER = ctypes.CFUNCTYPE(None,
                                     ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion),
                                     ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", VERSIONED_DELETER),
                                     ("flags", ctypes.c_uint64),
                                     ("dl_tensor", DLTensor)]

FLAG_READ_ONLY = 1
FLAG_IS_COPIED = 2

CODES = {"float32": (2, 32), "float16": (2, 16), "bfloat16": (4, 16),
         "uint8": (1, 8), "float8_e4m3fn": (10, 8), "float8_e4m3fnuz": (11, 8),
         "float8_e5m2": (12, 8), "float8_e5m2fnuz": (13, 8)}

_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_get_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_get_name.restype = ctypes.c_char_p
_capsule_get_name.argtypes = [ctypes.py_object]
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def capsule_name(capsule):
    return _capsule_get_name(capsule).decode()


def read_capsule(capsule):
    """(managed tensor struct, is_versioned) of an unconsumed capsule; the
    struct keeps the capsule (which owns its memory) alive."""
    name = capsule_name(capsule)
    address = _capsule_get_pointer(capsule, name.encode())
    versioned = name == "dltensor_versioned"
    assert versioned or name == "dltensor", name
    struct = DLManagedTensorVersioned if versioned else DLManagedTensor
    managed = struct.from_address(address)
    managed.capsule = capsule
    return managed, versioned


def dl_fields(dl_tensor):
    ndim = dl_tensor.ndim
    return {
        "data": dl_tensor.data or 0,
        "device": (dl_tensor.device.device_type, dl_tensor.device.device_id),
        "ndim": ndim,
        "dtype": (dl_tensor.dtype.code, dl_tensor.dtype.bits,
                  dl_tensor.dtype.lanes),
        "shape": tuple(dl_tensor.shape[:ndim]),
        "strides": (None if not dl_tensor.strides
                    else tuple(dl_tensor.strides[:ndim])),
        "byte_offset": dl_tensor.byte_offset,
    }


class HandMade:
    """A DLPack managed tensor built with ctypes over a NumPy buffer, whose
    deleter counts its calls. Use .capsule() for a fresh capsule."""

    def __init__(self, array, *, versioned=True, code=None, bits=None,
                 lanes=1, strides="given", flags=0, major=1, minor=1,
                 device=(1, 0), byte_offset=0, ndim=None):
        self.array = array
        self.calls = 0
        ndim = array.ndim if ndim is None else ndim
        self.shape = (ctypes.c_int64 * max(ndim, 1))(
            *(list(array.shape) + [1] * (ndim - array.ndim)))
        self.strides = (ctypes.c_int64 * max(ndim, 1))(
            *([s // array.itemsize for s in array.strides]
              + [1] * (ndim - array.ndim)))
        if code is None:
            code, bits = {np.dtype(np.float32): (2, 32),
                          np.dtype(np.uint8): (1, 8)}[array.dtype]
        tensor = DLTensor()
        tensor.data = array.ctypes.data - byte_offset
        tensor.device = DLDevice(*device)
        tensor.ndim = ndim
        tensor.dtype = DLDataType(code, bits, lanes)
        tensor.shape = self.shape
        tensor.strides = self.strides if strides == "given" else None
        tensor.byte_offset = byte_offset
        if versioned:
            self.deleter = VERSIONED_DELETER(self._delete)
            self.managed = DLManagedTensorVersioned(
                DLPackVersion(major, minor), None, self.deleter, flags, tensor)
            self.name = b"dltensor_versioned"
        else:
            self.deleter = LEGACY_DELETER(self._delete)
            self.managed = DLManagedTensor(tensor, None, self.deleter)
            self.name = b"dltensor"

    def _delete(self, pointer):
        self.calls += 1

    def capsule(self):
        # No destructor: an unconsumed hand-made capsule frees nothing.
        return _capsule_new(ctypes.addressof(self.managed), self.name, None)


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
    capsule = _capsule_new(ctypes.addressof(holder), b"something_else", None)
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
