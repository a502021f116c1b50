"""fp8q.Tensor: attributes, fp8q.empty / zeros, 0-d, 0-size and 16-d
tensors, views (.T, .view), copies, .numpy() and __array__, repr, len, the
buffer protocol (formats, strides, read-only, contiguity requests) and
weak references.
"""
import ctypes
import re
import subprocess
import sys
import textwrap
import warnings
import weakref

import ml_dtypes
import numpy as np
import pytest

import fp8q

DTYPES = ["float32", "float16", "bfloat16", "uint8", "float8_e4m3fn",
          "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"]
RAW = {"bfloat16": np.uint16}
FORMATS = {"float32": "f", "float16": "e", "bfloat16": "H", "uint8": "B"}


def numpy_dtype(name):
    """The NumPy dtype .numpy() gives for an fp8q dtype (ml_dtypes is
    installed here)."""
    if name in ("float32", "float16", "uint8"):
        return np.dtype(name)
    return np.dtype(getattr(ml_dtypes, name))


def sample(name, shape, rng):
    """A NumPy array of random finite values exactly representable in
    `name`."""
    if name == "uint8":
        return rng.integers(0, 256, size=shape).astype(np.uint8)
    values = rng.integers(0, 8, size=shape).astype(np.float32) - 3.5
    return values.astype(numpy_dtype(name))


@pytest.mark.parametrize("name", DTYPES)
def test_empty_attributes(name):
    t = fp8q.empty((2, 3, 4), dtype=name)
    assert type(t) is fp8q.Tensor
    assert t.shape == (2, 3, 4)
    assert t.strides == (12, 4, 1)
    assert t.dtype is fp8q.dtype(name)
    assert t.device == "cpu"
    assert t.ndim == 3
    assert t.size == 24
    assert t.nbytes == 24 * t.dtype.itemsize
    assert len(t) == 2
    assert isinstance(t.data_ptr, int)
    assert t.data_ptr % 64 == 0
    assert t.is_contiguous()
    assert t.readonly is False
    assert t.__dlpack_device__() == (1, 0)


def test_empty_shape_forms():
    assert fp8q.empty(5).shape == (5,)
    assert fp8q.empty(()).shape == ()
    assert fp8q.empty([]).shape == ()
    assert fp8q.empty(np.int64(3)).shape == (3,)
    assert fp8q.empty((np.int32(2), 3)).shape == (2, 3)
    assert fp8q.empty(shape=(1,), dtype="e4m3").dtype is fp8q.float8_e4m3fn
    assert fp8q.empty((2,)).dtype is fp8q.float32
    # As NumPy takes them: an array of ints, dtype=None for the default.
    assert fp8q.empty(np.array([2, 3])).shape == (2, 3)
    assert fp8q.zeros(6).reshape(np.array([3, 2])).shape == (3, 2)
    assert fp8q.empty(np.array(4)).shape == (4,)
    assert fp8q.zeros(3, dtype=None).dtype is fp8q.float32


def test_empty_shape_errors():
    with pytest.raises(ValueError, match=r"^shape: .*-1 at axis 1"):
        fp8q.empty((2, -1))
    with pytest.raises(ValueError, match=r"^shape: .*at most 16 dims, got 17"):
        fp8q.empty((1,) * 17)
    with pytest.raises(TypeError, match=r"^shape: expected ints, got float"):
        fp8q.empty((2, 1.5))
    with pytest.raises(TypeError, match=r"^shape: expected ints, got float at axis 1$"):
        fp8q.empty([2, 1.5])
    with pytest.raises(TypeError, match=r"^shape: expected ints, got str at axis 0$"):
        fp8q.zeros(["2"])
    # Extents beyond int64, as a bare int and inside a sequence.
    with pytest.raises(OverflowError):
        fp8q.empty(2**70)
    with pytest.raises(OverflowError):
        fp8q.empty((1, 2**70))
    with pytest.raises(OverflowError):
        fp8q.empty(3).reshape(2**70)
    with pytest.raises(TypeError, match=r"^shape: .*got str"):
        fp8q.empty("23")
    with pytest.raises(TypeError, match=r"^shape: .*got NoneType"):
        fp8q.empty(None)
    with pytest.raises(TypeError, match=r"^dtype: "):
        fp8q.zeros(3, dtype="float64")
    # Bools are not extents (NumPy and torch refuse them too; True once
    # gave a shape of (1,)).
    with pytest.raises(TypeError, match=r"^shape: expected ints, got bool "
                       r"at axis 0$"):
        fp8q.zeros(True)
    with pytest.raises(TypeError, match=r"^shape: expected ints, got bool "
                       r"at axis 1$"):
        fp8q.zeros(6).reshape(6, False)
    # reshape() without a shape (it once gave a 0-d tensor).
    with pytest.raises(TypeError, match=r"^Tensor.reshape\(\) takes a "
                       r"shape"):
        fp8q.zeros(1).reshape()
    assert fp8q.zeros(1).reshape(()).shape == ()


@pytest.mark.parametrize("name", DTYPES)
def test_zeros(name):
    t = fp8q.zeros((3, 5), dtype=name)
    assert not np.asarray(t).any()
    assert (t.numpy().astype(np.float32) == 0).all()
    assert np.signbit(t.numpy().astype(np.float32)).sum() == 0


def test_not_constructible():
    with pytest.raises(TypeError):
        fp8q.Tensor()
    with pytest.raises(TypeError):
        fp8q.Tensor([1.0])


def test_zero_d():
    t = fp8q.asarray(2.5)
    assert t.shape == () and t.strides == () and t.ndim == 0
    assert t.size == 1 and t.nbytes == 4
    assert t.T is t
    assert t.is_contiguous()
    with pytest.raises(TypeError, match="0-d"):
        len(t)
    a = t.numpy()
    assert a.shape == () and a[()] == 2.5
    assert repr(t) == "fp8q.Tensor(2.5, dtype=float32)"
    assert float(np.asarray(t.copy())) == 2.5
    e = fp8q.asarray(2.5, dtype="e4m3")
    assert repr(e) == "fp8q.Tensor(2.5, dtype=float8_e4m3fn)"


SCALARS = [2.5, -0.0, 0.1, 1e-46, 3.4028235e38, float("inf"),
           float("-inf"), float("nan"), 0, -7, 2**24 + 1, 2**63 - 1, -2**63,
           np.float32(0.1), np.float32(-0.0), np.float32("nan")]


@pytest.mark.parametrize("value", SCALARS, ids=repr)
def test_a_scalar_gives_what_numpy_converts_it_to(value):
    """Python floats and ints and NumPy float32 scalars skip NumPy
    (asarray.c's from_scalar); the tensor is NumPy's float32 of the value,
    bit for bit (float64 or int64 rounded once to float32)."""
    t = fp8q.asarray(value)
    expected = np.asarray(value).astype(np.float32)
    assert t.dtype == fp8q.float32 and t.shape == ()
    assert t.numpy().view(np.uint32) == expected.view(np.uint32)
    copied = fp8q.asarray(value, copy=True)
    assert copied.numpy().view(np.uint32) == expected.view(np.uint32)
    as_bf16 = fp8q.asarray(value, dtype="bfloat16")
    assert as_bf16.numpy().view(np.uint16) == expected.astype(
        ml_dtypes.bfloat16).view(np.uint16)
    t.numpy()[()] = 5.0  # writable, its own memory
    assert fp8q.asarray(value).numpy().view(np.uint32) == expected.view(
        np.uint32)


@pytest.mark.parametrize("value", [1e300, -1e39, 3.4028235677973366e38,
                                   2**63, 2**64 - 1], ids=repr)
def test_a_scalar_numpy_must_convert_still_goes_through_numpy(value):
    """Where NumPy's answer is not a plain rounding (a float that overflows
    float32: inf with NumPy's RuntimeWarning; ints beyond int64: uint64),
    asarray gives NumPy's."""
    with warnings.catch_warnings(record=True) as numpy_warned:
        warnings.simplefilter("always")
        expected = np.asarray(value).astype(np.float32)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        t = fp8q.asarray(value)
    assert t.numpy().view(np.uint32) == expected.view(np.uint32)
    assert ([w.category for w in warned]
            == [w.category for w in numpy_warned])


@pytest.mark.parametrize("value", [
    2**70, -2**70, 2**70 + 2**46 + 1, [2**70, 1], [[2**64, 3], [True, -2**80]],
    (2**100, 0.5)], ids=repr)
def test_ints_beyond_64_bits_convert_as_numpy_converts_them_to_float32(value):
    """NumPy keeps such ints as objects; asarray converts them as
    np.asarray(value, dtype=np.float32) does (through float64)."""
    expected = np.asarray(value, dtype=np.float32)
    t = fp8q.asarray(value)
    assert t.dtype == fp8q.float32 and t.shape == expected.shape
    np.testing.assert_array_equal(t.numpy().view(np.uint32),
                                  expected.view(np.uint32))


@pytest.mark.parametrize("value", [10**400, [1, -10**400]], ids=repr)
def test_ints_beyond_float64_are_refused_naming_the_argument(value):
    with pytest.raises(OverflowError,
                       match="^obj: cannot convert .* too large"):
        fp8q.asarray(value)


@pytest.mark.parametrize("value", [[2**70, None], [2**70, "1"]], ids=repr)
def test_big_ints_beside_other_objects_stay_refused(value):
    """Only all-int object arrays convert: None would become nan."""
    with pytest.raises(TypeError, match="got list"):
        fp8q.asarray(value)


@pytest.mark.parametrize("value", [2.5, 3], ids=repr)
def test_values_without_memory_with_copy_false_are_refused(value):
    """A Python number, a NumPy scalar and a list have no memory to view:
    copy=False refuses them, as NumPy 2 does (a NumPy float32 scalar and a
    list of them were once copied silently, so an amax_out= given as one
    lost the amax)."""
    for source in (value, np.float32(value), [np.float32(value)],
                   (value,)):
        with pytest.raises(ValueError, match="Unable to avoid copy"):
            fp8q.asarray(source, copy=False)
        assert float(np.asarray(fp8q.asarray(source)).reshape(())) == value
    with pytest.raises(ValueError, match="^Unable to avoid copy while "
                       "converting amax_out .*numpy.float32"):
        fp8q.cast(np.ones(2, np.float32), "e4m3", amax_out=np.float32(0))


@pytest.mark.parametrize("shape", [(0,), (2, 0, 3), (0, 0)])
def test_zero_size(shape):
    t = fp8q.zeros(shape, dtype="e4m3")
    assert t.shape == shape and t.size == 0 and t.nbytes == 0
    assert t.is_contiguous()
    assert t.copy().shape == shape
    assert t.numpy().shape == shape
    if len(shape) == 1:
        assert repr(t) == "fp8q.Tensor([], dtype=float8_e4m3fn)"
    else:
        assert repr(t) == (f"fp8q.Tensor([], shape={shape}, "
                           "dtype=float8_e4m3fn)")
    assert memoryview(t).nbytes == 0


def test_sixteen_dims():
    t = fp8q.zeros((1,) * 15 + (2,), dtype="bf16")
    assert t.ndim == 16 and t.size == 2
    assert t.numpy().shape == t.shape
    assert memoryview(t).ndim == 16
    assert t.copy().ndim == 16


def test_transpose(rng):
    a = sample("float32", (3, 4), rng)
    t = fp8q.asarray(a)
    tt = t.T
    assert tt.shape == (4, 3) and tt.strides == (1, 4)
    assert tt.data_ptr == t.data_ptr
    assert not tt.is_contiguous()
    np.testing.assert_array_equal(tt.numpy(), a.T)
    assert tt.T.shape == (3, 4)
    one = fp8q.zeros(5)
    assert one.T is one
    with pytest.raises(ValueError, match=r"Tensor\.T: .*3 dims"):
        fp8q.zeros((2, 2, 2)).T


@pytest.mark.parametrize("name", DTYPES)
def test_contiguous_and_copy(name, rng):
    a = sample(name, (4, 6), rng)
    t = fp8q.asarray(a)
    assert t.contiguous() is t
    strided = fp8q.asarray(a[::2, ::-3])
    assert not strided.is_contiguous()
    c = strided.contiguous()
    assert c.is_contiguous() and c.data_ptr != strided.data_ptr
    assert c.data_ptr % 64 == 0
    np.testing.assert_array_equal(c.numpy().view(np.uint8),
                                  np.ascontiguousarray(a[::2, ::-3])
                                  .view(np.uint8))
    d = t.copy()
    assert d.data_ptr != t.data_ptr and d.dtype is t.dtype
    np.testing.assert_array_equal(d.numpy().view(np.uint8), a.view(np.uint8))


def test_copy_is_bit_exact_for_every_code():
    codes = np.arange(256, dtype=np.uint8)
    for name in DTYPES:
        if fp8q.dtype(name).itemsize != 1:
            continue
        t = fp8q.asarray(codes).view(name)
        assert (np.asarray(t.copy()) == codes).all()
        assert (np.asarray(fp8q.asarray(codes[::-1]).view(name).contiguous())
                == codes[::-1]).all()
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    for name in ("float16", "bfloat16"):
        t = fp8q.asarray(halves.view(np.float16)).view(name)
        assert (t.copy().numpy().view(np.uint16) == halves).all()
        assert (t.copy().view("float16").numpy().view(np.uint16)
                == halves).all()


def test_view_reinterprets():
    t = fp8q.asarray(np.array([0x38, 0x40, 0x7E], np.uint8))
    f = t.view("e4m3")
    assert f.dtype is fp8q.float8_e4m3fn and f.data_ptr == t.data_ptr
    np.testing.assert_array_equal(f.numpy().astype(np.float32),
                                  [1.0, 2.0, 448.0])
    h = fp8q.asarray(np.array([1.0], np.float16))
    assert h.view(np.dtype(ml_dtypes.bfloat16)).dtype is fp8q.bfloat16
    with pytest.raises(ValueError, match=r"Tensor\.view: cannot read a "
                       r"tensor of uint8 \(itemsize 1\) as float32"):
        t.view("float32")  # 3 bytes
    # Other itemsizes re-cut the contiguous last axis, as NumPy's view.
    raw = np.arange(24, dtype=np.uint8).reshape(3, 8)
    bf = fp8q.asarray(raw).view("bfloat16")
    assert bf.shape == (3, 4) and bf.strides == (4, 1)
    assert bf.data_ptr == raw.ctypes.data
    np.testing.assert_array_equal(bf.view("uint8").numpy(), raw)
    with pytest.raises(ValueError, match="contiguous last axis"):
        fp8q.asarray(raw[:, ::2]).view("bfloat16")
    with pytest.raises(TypeError, match=r"^dtype: "):
        t.view("int8")
    # An empty tensor's extents may be any int64; re-cut into smaller
    # elements they must stay one (a last extent once wrapped negative).
    with pytest.raises(ValueError, match=r"^Tensor\.view: .*would not fit "
                       r"in an int64$"):
        fp8q.empty((0, 2 ** 61 + 1)).view("uint8")


@pytest.mark.parametrize("name", DTYPES)
def test_numpy_is_zero_copy(name, rng):
    a = sample(name, (3, 5), rng)
    t = fp8q.asarray(a)
    n = t.numpy()
    assert n.dtype == numpy_dtype(name)
    assert n.ctypes.data == t.data_ptr == a.ctypes.data
    assert n.base is t
    n[1, 2] = n[0, 0]
    assert a[1, 2] == a[0, 0]
    a[2, 4] = a[0, 1]
    assert t.numpy()[2, 4] == a[0, 1]


def test_numpy_keeps_tensor_alive():
    t = fp8q.asarray([1.0, 2.0, 3.0], dtype="e5m2")
    n = t.numpy()
    reference = weakref.ref(t)
    del t
    assert reference() is not None
    np.testing.assert_array_equal(n.astype(np.float32), [1, 2, 3])
    del n
    assert reference() is None


def test_numpy_readonly():
    source = np.arange(4, dtype=np.float32)
    source.flags.writeable = False
    t = fp8q.asarray(source)
    assert t.readonly
    n = t.numpy()
    assert not n.flags.writeable
    with pytest.raises(ValueError):
        n[0] = 1
    assert t.T.readonly and t.view("float32").readonly
    assert not t.copy().readonly


def test_numpy_without_ml_dtypes():
    """Without ml_dtypes, bfloat16 and FP8 tensors give raw uint16 / uint8
    arrays; repr still shows the values."""
    script = textwrap.dedent("""
        import sys
        sys.modules["ml_dtypes"] = None  # makes `import ml_dtypes` fail
        import numpy as np
        import fp8q
        t = fp8q.asarray([1.0, -2.0, 448.0], dtype="e4m3")
        n = t.numpy()
        assert n.dtype == np.uint8, n.dtype
        assert n.tolist() == [0x38, 0xC0, 0x7E], n
        assert n.ctypes.data == t.data_ptr
        b = fp8q.asarray([1.0], dtype="bf16").numpy()
        assert b.dtype == np.uint16 and b.tolist() == [0x3F80]
        print(repr(t))
        np.testing.assert_array_equal(t.__array__(np.float32), [1, -2, 448])
    """)
    result = subprocess.run([sys.executable, "-c", script],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "fp8q.Tensor([  1.,  -2., 448.], dtype=float8_e4m3fn)")


def test_array_protocol():
    t = fp8q.asarray([1.0, 2.5, -448.0], dtype="e4m3")
    same = t.__array__()
    assert same.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    assert same.ctypes.data == t.data_ptr
    copied = t.__array__(copy=True)
    assert copied.ctypes.data != t.data_ptr
    np.testing.assert_array_equal(t.__array__(np.float32), [1, 2.5, -448])
    np.testing.assert_array_equal(t.__array__(np.float64), [1, 2.5, -448])
    np.testing.assert_array_equal(t.__array__(np.float16), [1, 2.5, -448])
    assert t.__array__(np.float64).dtype == np.float64
    # A converted array has the requested dtype object itself.
    tagged = np.dtype(np.float16, metadata={"source": "test"})
    assert t.__array__(tagged).dtype.metadata == {"source": "test"}
    with pytest.raises(ValueError, match="Unable to avoid copy"):
        t.__array__(np.float32, copy=False)
    assert t.__array__(ml_dtypes.float8_e4m3fn, copy=False).ctypes.data == \
        t.data_ptr
    # uint8 requested from an FP8 tensor converts values, not codes.
    np.testing.assert_array_equal(fp8q.asarray([3.0], dtype="e5m2")
                                  .__array__(np.uint8), [3])
    f = fp8q.asarray(np.arange(3, dtype=np.float32))
    assert np.asarray(f).ctypes.data == f.data_ptr
    assert np.array(f, copy=True).ctypes.data != f.data_ptr


def test_array_protocol_raw_codes_through_buffer():
    """np.asarray prefers the buffer protocol: FP8 gives its codes."""
    t = fp8q.asarray([1.0, 2.0], dtype="e4m3")
    np.testing.assert_array_equal(np.asarray(t), [0x38, 0x40])
    assert np.asarray(t).dtype == np.uint8


def test_repr_values():
    assert repr(fp8q.asarray([1.0, 2.5, 448.0, np.nan], dtype="e4m3")) == (
        "fp8q.Tensor([1, 2.5, 448, nan], dtype=float8_e4m3fn)")
    assert repr(fp8q.asarray([[1, 2], [3, 4]], dtype="uint8")) == (
        "fp8q.Tensor([[1, 2],\n             [3, 4]], dtype=uint8)")
    assert repr(fp8q.asarray([0.5, -1.0])) == (
        "fp8q.Tensor([ 0.5, -1. ], dtype=float32)")
    assert repr(fp8q.asarray([1.5], dtype="bf16")) == (
        "fp8q.Tensor([1.5], dtype=bfloat16)")
    big = repr(fp8q.zeros((1000, 1000), dtype="e5m2"))
    assert "..." in big and len(big) < 1000


def test_len():
    assert len(fp8q.zeros((7, 2))) == 7
    assert len(fp8q.zeros((0, 2))) == 0


def test_weakref():
    t = fp8q.zeros(3)
    reference = weakref.ref(t)
    assert reference() is t
    del t
    assert reference() is None


# --------------------------------------------------------------------------
# Buffer protocol


@pytest.mark.parametrize("name", DTYPES)
def test_buffer_formats(name, rng):
    a = sample(name, (2, 3), rng)
    t = fp8q.asarray(a)
    m = memoryview(t)
    assert m.format == FORMATS.get(name, "B")
    assert m.itemsize == t.dtype.itemsize
    assert m.shape == (2, 3)
    assert m.strides == (3 * m.itemsize, m.itemsize)
    assert not m.readonly
    assert m.c_contiguous
    assert m.tobytes() == a.tobytes()
    raw = np.asarray(m)
    assert raw.ctypes.data == t.data_ptr
    if name in ("float32", "float16", "uint8"):
        np.testing.assert_array_equal(raw, a)
    else:
        np.testing.assert_array_equal(raw, a.view(RAW.get(name, np.uint8)))


def test_buffer_writes_are_visible():
    t = fp8q.zeros(4)
    m = memoryview(t)
    m[2] = 7.5
    assert t.numpy()[2] == 7.5
    t.numpy()[0] = -1.0
    assert m[0] == -1.0
    m.release()


def test_buffer_strided_and_negative():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = fp8q.asarray(a[::-2, 1::2])
    m = memoryview(t)
    assert m.strides == (-48, 8)
    assert m.shape == (2, 3)
    assert not m.c_contiguous
    np.testing.assert_array_equal(np.asarray(m), a[::-2, 1::2])
    assert m.tolist() == a[::-2, 1::2].tolist()


class PyBuffer(ctypes.Structure):
    """CPython's Py_buffer, to request exact PyBUF_* flags."""
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p),
                ("len", ctypes.c_ssize_t), ("itemsize", ctypes.c_ssize_t),
                ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p),
                ("shape", ctypes.POINTER(ctypes.c_ssize_t)),
                ("strides", ctypes.POINTER(ctypes.c_ssize_t)),
                ("suboffsets", ctypes.POINTER(ctypes.c_ssize_t)),
                ("internal", ctypes.c_void_p)]


PyBUF_WRITABLE = 0x1
PyBUF_FORMAT = 0x4
PyBUF_ND = 0x8
PyBUF_STRIDES = 0x18
PyBUF_C_CONTIGUOUS = 0x38
PyBUF_F_CONTIGUOUS = 0x58
PyBUF_ANY_CONTIGUOUS = 0x98


def get_buffer(obj, flags):
    """Calls PyObject_GetBuffer(obj, flags); returns what it filled in."""
    get = ctypes.pythonapi.PyObject_GetBuffer
    get.argtypes = [ctypes.py_object, ctypes.POINTER(PyBuffer), ctypes.c_int]
    release = ctypes.pythonapi.PyBuffer_Release
    release.argtypes = [ctypes.POINTER(PyBuffer)]
    view = PyBuffer()
    get(obj, ctypes.byref(view), flags)
    try:
        ndim = view.ndim
        return {
            "buf": view.buf, "len": view.len, "itemsize": view.itemsize,
            "readonly": view.readonly, "ndim": ndim,
            "format": None if view.format is None else view.format.decode(),
            "shape": None if not view.shape else tuple(view.shape[:ndim]),
            "strides": (None if not view.strides
                        else tuple(view.strides[:ndim])),
        }
    finally:
        release(ctypes.byref(view))


def test_buffer_flags():
    t = fp8q.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    simple = get_buffer(t, 0)
    assert simple["format"] is None and simple["shape"] is None
    assert simple["strides"] is None and simple["len"] == 24
    assert simple["itemsize"] == 4 and simple["buf"] == t.data_ptr
    nd = get_buffer(t, PyBUF_ND | PyBUF_FORMAT)
    assert nd["shape"] == (2, 3) and nd["strides"] is None
    assert nd["format"] == "f"
    strided = get_buffer(t, PyBUF_STRIDES)
    assert strided["strides"] == (12, 4)
    for flags in (PyBUF_C_CONTIGUOUS, PyBUF_ANY_CONTIGUOUS,
                  PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS):
        assert get_buffer(t, flags)["strides"] == (12, 4)
    with pytest.raises(BufferError, match="Fortran"):
        get_buffer(t, PyBUF_F_CONTIGUOUS)


def test_buffer_contiguity_requests():
    t = fp8q.asarray(np.arange(6, dtype=np.float32).reshape(2, 3)).T
    assert get_buffer(t, PyBUF_F_CONTIGUOUS)["strides"] == (4, 12)
    assert get_buffer(t, PyBUF_ANY_CONTIGUOUS)["strides"] == (4, 12)
    assert memoryview(t).f_contiguous
    for flags in (0, PyBUF_ND, PyBUF_C_CONTIGUOUS):
        with pytest.raises(BufferError, match="C-contiguous"):
            get_buffer(t, flags)
    gapped = fp8q.asarray(np.arange(12, dtype=np.uint8).reshape(3, 4)[:, ::2])
    assert get_buffer(gapped, PyBUF_STRIDES)["strides"] == (4, 2)
    with pytest.raises(BufferError, match="neither C- nor Fortran"):
        get_buffer(gapped, PyBUF_ANY_CONTIGUOUS)
    # bytes() asks for strides and gathers the elements itself.
    assert bytes(gapped) == bytes([0, 2, 4, 6, 8, 10])
    assert bytes(fp8q.asarray(np.arange(3, dtype=np.uint8))) == b"\0\1\2"


def test_buffer_readonly():
    source = np.arange(4, dtype=np.float32)
    source.flags.writeable = False
    t = fp8q.asarray(source)
    m = memoryview(t)
    assert m.readonly
    with pytest.raises(TypeError):
        m[0] = 1.0
    assert get_buffer(t, PyBUF_STRIDES)["readonly"] == 1
    with pytest.raises(BufferError, match="read-only"):
        get_buffer(t, PyBUF_WRITABLE)
    with pytest.raises(BufferError, match="read-only"):
        get_buffer(t, PyBUF_WRITABLE | PyBUF_STRIDES | PyBUF_FORMAT)
    assert get_buffer(fp8q.zeros(2), PyBUF_WRITABLE)["readonly"] == 0
    ro_bytes = fp8q.asarray(b"\x01\x02")
    assert ro_bytes.readonly and memoryview(ro_bytes).readonly


def test_buffer_zero_d_and_empty():
    m = memoryview(fp8q.asarray(1.5))
    assert m.ndim == 0 and m.shape == () and m.format == "f"
    assert m[()] == 1.5
    e = memoryview(fp8q.zeros((0, 3), dtype="bf16"))
    assert e.shape == (0, 3) and e.format == "H" and e.nbytes == 0


def test_buffer_keeps_tensor_alive():
    t = fp8q.asarray([1.0, 2.0])
    reference = weakref.ref(t)
    m = memoryview(t)
    del t
    assert reference() is not None
    assert m.tolist() == [1.0, 2.0]
    m.release()
    assert reference() is None


@pytest.mark.parametrize("shape,strides", [
    ((0, 2**62, 4), (0, 4, 1)), ((2**62, 4, 0), (4, 1, 1)),
    ((3, 0, 2**62, 2**62), (0, 0, 0, 1))])
def test_empty_tensors_are_never_too_large(shape, strides):
    # Regression: strides of empty tensors overflowed int64 (signed overflow,
    # UB) and empty tensors with large extents were refused as too large.
    # Strides a 64-bit byte offset cannot hold are 0 (no element uses them).
    for make in (fp8q.zeros, fp8q.empty):
        t = make(shape, dtype="float32")
        assert t.shape == shape and t.size == 0 and t.strides == strides
        assert repr(t) == "fp8q.Tensor([], shape=%s, dtype=float32)" % (
            shape,)
    reshaped = fp8q.zeros((0,), dtype="float32").reshape(shape)
    assert reshaped.shape == shape and reshaped.strides == strides
