"""fp8q.asarray and interop with NumPy and ml_dtypes arrays (both directions,
float8 and bfloat16 included), buffer-protocol objects,
Python scalars and lists: zero-copy proofs (pointer equality, writes seen
both ways), conversions, copy= semantics, lifetimes and errors.
"""
import array
import gc
import sys
import weakref

import ml_dtypes
import numpy as np
import pytest

import fp8q
from helpers import ML, needs_numpy_versioned_dlpack, same_bits, values

NATIVE = ["float32", "float16", "uint8"]


# --------------------------------------------------------------------------
# NumPy and ml_dtypes arrays


@pytest.mark.parametrize("name", NATIVE + ML)
def test_numpy_zero_copy_both_ways(name, rng):
    a = values(name, (4, 5), rng)
    t = fp8q.asarray(a)
    assert t.dtype is fp8q.dtype(name)
    assert t.data_ptr == a.ctypes.data
    assert t.shape == (4, 5) and t.strides == (5, 1)
    n = t.numpy()
    assert n.ctypes.data == a.ctypes.data
    n[0, 0] = a[3, 4]
    assert a[0, 0] == a[3, 4]
    a[1, 1] = a[2, 2]
    assert same_bits(t.numpy(), a)
    assert fp8q.asarray(a, copy=False).data_ptr == a.ctypes.data
    assert fp8q.asarray(a, dtype=name, copy=False).data_ptr == a.ctypes.data


@pytest.mark.parametrize("name", NATIVE + ML)
def test_numpy_views_keep_strides(name, rng):
    a = values(name, (6, 8), rng)
    for view in (a[::2, 1::3], a[::-1], a[:, ::-2], a.T, a[2:3, ::-1],
                 np.broadcast_to(a[0], (3, 8))):
        t = fp8q.asarray(view)
        assert t.data_ptr == view.ctypes.data
        assert t.strides == tuple(s // a.itemsize for s in view.strides)
        assert same_bits(t.numpy(), view)
        assert same_bits(t.contiguous().numpy(), view)


def test_numpy_readonly_and_copy():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    t = fp8q.asarray(a)
    assert t.readonly and t.data_ptr == a.ctypes.data
    c = fp8q.asarray(a, copy=True)
    assert not c.readonly and c.data_ptr != a.ctypes.data
    np.testing.assert_array_equal(c.numpy(), a)


def test_numpy_conversions_to_float32():
    for source in (np.arange(5, dtype=np.float64) / 4,
                   np.arange(5, dtype=np.int64), np.arange(5, dtype=np.int8),
                   np.arange(5, dtype=np.uint16), np.array([True, False]),
                   np.arange(5, dtype=np.longdouble)):
        t = fp8q.asarray(source)
        assert t.dtype is fp8q.float32
        assert t.data_ptr != source.ctypes.data
        np.testing.assert_array_equal(t.numpy(), source.astype(np.float32))
        with pytest.raises(ValueError, match=r"^Unable to avoid copy while "
                           "converting obj"):
            fp8q.asarray(source, copy=False)


def test_float64_to_fp8_goes_through_float32(rng):
    x = rng.standard_normal(1000) * 100
    t = fp8q.asarray(x, dtype="e4m3")
    expected = np.clip(x.astype(np.float32), -448, 448).astype(
        ml_dtypes.float8_e4m3fn)
    assert same_bits(t.numpy(), expected)


def test_big_endian_input():
    little = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    big = little.astype(">f4")
    t = fp8q.asarray(big)
    assert t.dtype is fp8q.float32
    np.testing.assert_array_equal(t.numpy(), little)
    half = fp8q.asarray(little.astype(">f2"))
    assert half.dtype is fp8q.float16
    np.testing.assert_array_equal(half.numpy(), little.astype(np.float16))
    e4m3 = fp8q.asarray(big, dtype="e4m3")
    np.testing.assert_array_equal(e4m3.numpy().astype(np.float32), little)
    with pytest.raises(ValueError, match=r"Unable to avoid copy while "
                       r"converting obj \(a NumPy array of dtype >f4\)"):
        fp8q.asarray(big, copy=False)


def test_misaligned_and_odd_strides_are_copied():
    raw = np.zeros(17, dtype=np.uint8)
    misaligned = raw[1:].view(np.float32)
    assert not misaligned.flags.aligned
    t = fp8q.asarray(misaligned)
    assert t.data_ptr % 4 == 0 and t.shape == (4,)
    with pytest.raises(ValueError, match="layout needs a copy"):
        fp8q.asarray(misaligned, copy=False)
    record = np.zeros(3, dtype=[("a", np.uint8), ("b", np.float16)])
    record["b"] = [1, 2, 3]
    field = record["b"]
    assert field.strides == (3,)
    np.testing.assert_array_equal(fp8q.asarray(field).numpy(), [1, 2, 3])


def test_dtype_conversion_and_copy_semantics():
    a = np.array([0.1, 1.0, 500.0, -1e6], dtype=np.float32)
    t = fp8q.asarray(a, dtype="e4m3")
    np.testing.assert_array_equal(t.numpy().astype(np.float32),
                                  [0.1015625, 1.0, 448.0, -448.0])
    with pytest.raises(ValueError, match=r"^Unable to avoid copy while "
                       "converting obj from float32 to float8_e4m3fn"):
        fp8q.asarray(a, dtype="e4m3", copy=False)
    same = fp8q.asarray(t)
    assert same is t
    assert fp8q.asarray(t, dtype="float8_e4m3fn", copy=False) is t
    copied = fp8q.asarray(t, copy=True)
    assert copied is not t and copied.data_ptr != t.data_ptr
    assert same_bits(copied.numpy(), t.numpy())
    widened = fp8q.asarray(t, dtype=np.float16)
    assert widened.dtype is fp8q.float16
    np.testing.assert_array_equal(widened.numpy(),
                                  [0.1015625, 1.0, 448.0, -448.0])
    with pytest.raises(ValueError, match="Unable to avoid copy"):
        fp8q.asarray(t, dtype="bf16", copy=False)
    with pytest.raises(TypeError, match=r"^copy: expected None, True or "
                       "False"):
        fp8q.asarray(a, copy="yes")
    with pytest.raises(TypeError, match=r"^dtype: "):
        fp8q.asarray(a, dtype="float64")


@pytest.mark.parametrize("name", [
    "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e8m0fnu",
    "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "int4", "uint4",
    "int2", "uint2"])
def test_other_ml_dtypes_convert_to_float32(name):
    """ml_dtypes' floats and small ints that fp8q does not store are
    converted to float32 (every value exact; NumPy's own cast is the
    oracle), as the docstring says other floats are; they used to be
    refused as an "unsupported NumPy dtype"."""
    dtype = getattr(ml_dtypes, name)
    values = np.arange(256, dtype=np.uint8)
    if name.startswith("float8"):
        x = values.view(dtype)  # every code, NaN included
    else:
        x = np.array([0, 1, -1, 2, -2, 0.5, 3], np.float32).astype(dtype)
    got = fp8q.asarray(x)
    assert got.dtype is fp8q.float32
    assert same_bits(np.asarray(got), x.astype(np.float32))
    with pytest.raises(ValueError, match="Unable to avoid copy"):
        fp8q.asarray(x, copy=False)


def test_ml_dtypes_unrecognised_and_unsupported_dtypes():
    with pytest.raises(TypeError, match=r"^obj: unsupported NumPy dtype "
                       "complex128"):
        fp8q.asarray(np.zeros(2, complex))
    with pytest.raises(TypeError, match=r"unsupported NumPy dtype <U1"):
        fp8q.asarray(np.array(["a"]))
    with pytest.raises(ValueError, match=r"^obj: fp8q tensors have at most 16 "
                       "dims, got 17"):
        fp8q.asarray(np.zeros((1,) * 17, np.float32))
    assert fp8q.asarray(np.zeros((1,) * 16, np.float32)).ndim == 16


def test_numpy_zero_d_and_zero_size():
    scalar = np.array(3.5, dtype=np.float32)
    t = fp8q.asarray(scalar)
    assert t.shape == () and t.data_ptr == scalar.ctypes.data
    empty = np.zeros((3, 0), dtype=ml_dtypes.bfloat16)
    e = fp8q.asarray(empty)
    assert e.shape == (3, 0) and e.dtype is fp8q.bfloat16
    assert fp8q.asarray(np.float16(2.0)).dtype is fp8q.float16


def test_numpy_producer_lifetime():
    a = np.arange(100, dtype=np.float16)
    reference = weakref.ref(a)
    t = fp8q.asarray(a[::3])
    del a
    gc.collect()
    assert reference() is not None
    np.testing.assert_array_equal(t.numpy(), np.arange(0, 100, 3))
    del t
    gc.collect()
    assert reference() is None


# --------------------------------------------------------------------------
# Buffer-protocol objects, scalars and lists


def test_buffer_protocol_objects():
    data = bytearray(b"\x38\x40\x7e")
    t = fp8q.asarray(data)
    assert t.dtype is fp8q.uint8 and not t.readonly
    assert t.data_ptr == np.frombuffer(data, np.uint8).ctypes.data
    t.numpy()[0] = 7
    assert data[0] == 7
    codes = fp8q.asarray(b"\x38\x40")
    assert codes.readonly and codes.view("e4m3").numpy().astype(
        np.float32).tolist() == [1.0, 2.0]
    floats = array.array("f", [1.0, 2.0, 3.0])
    f = fp8q.asarray(floats)
    assert f.dtype is fp8q.float32
    assert f.data_ptr == floats.buffer_info()[0]
    f.numpy()[2] = 9.0
    assert floats[2] == 9.0
    halves = memoryview(np.array([1.5], np.float16))
    assert halves.format == "e"
    assert fp8q.asarray(halves).dtype is fp8q.float16
    doubles = array.array("d", [0.5, 2.0])
    converted = fp8q.asarray(doubles)
    assert converted.dtype is fp8q.float32
    assert converted.numpy().tolist() == [0.5, 2.0]
    grid = np.arange(12, dtype=np.uint8).reshape(3, 4)
    strided = fp8q.asarray(memoryview(grid[::2, 1::2]))
    assert strided.shape == (2, 2) and strided.strides == (8, 2)
    assert strided.data_ptr == grid[0, 1:].ctypes.data
    ints = array.array("i", [1, 2])
    assert fp8q.asarray(ints).numpy().tolist() == [1.0, 2.0]


def test_tensor_buffer_round_trip_through_memoryview():
    t = fp8q.asarray([1.0, 2.0], dtype="float16")
    again = fp8q.asarray(memoryview(t))
    assert again.dtype is fp8q.float16 and again.data_ptr == t.data_ptr
    raw = fp8q.asarray(memoryview(fp8q.asarray([1.0], dtype="bf16")))
    assert raw.dtype is fp8q.float32  # 'H' codes are integers to NumPy
    assert raw.numpy().tolist() == [float(0x3F80)]


def test_scalars_and_lists():
    assert fp8q.asarray(1.5).dtype is fp8q.float32
    assert fp8q.asarray(3).numpy().tolist() == 3.0
    assert fp8q.asarray(True).numpy().tolist() == 1.0
    nested = fp8q.asarray([[1, 2, 3], [4, 5, 6]])
    assert nested.shape == (2, 3) and nested.dtype is fp8q.float32
    assert fp8q.asarray([]).shape == (0,)
    assert fp8q.asarray((0.5, 1.5), dtype="e5m2").numpy().astype(
        np.float32).tolist() == [0.5, 1.5]
    listed = [1.0, 2.0]
    assert fp8q.asarray(listed, copy=True).numpy().tolist() == listed
    mixed = fp8q.asarray([np.float16(1), 2.0])
    assert mixed.dtype is fp8q.float32
    with pytest.raises(ValueError, match=r"^obj: cannot convert list to a "
                       "tensor"):
        fp8q.asarray([[1, 2], [3]])
    with pytest.raises(TypeError, match=r"^obj: expected a Tensor, .*got "
                       "NoneType"):
        fp8q.asarray(None)
    with pytest.raises(TypeError, match=r"got str"):
        fp8q.asarray("1.5")
    with pytest.raises(TypeError, match=r"got dict"):
        fp8q.asarray({"a": 1})
    with pytest.raises(TypeError, match=r"^obj: unsupported NumPy dtype "
                       "complex128"):
        fp8q.asarray(1 + 2j)
    with pytest.raises(TypeError):
        fp8q.asarray()


@needs_numpy_versioned_dlpack
def test_bare_capsules():
    a = np.arange(3, dtype=np.float32)
    capsule = a.__dlpack__(max_version=(1, 0))
    t = fp8q.asarray(capsule)
    assert t.data_ptr == a.ctypes.data
    with pytest.raises(BufferError, match="already consumed"):
        fp8q.asarray(capsule)
    with pytest.raises(TypeError, match="unsupported DLPack dtype"):
        fp8q.asarray(np.zeros(2).__dlpack__())


def test_concurrent_conversions(rng):
    """Conversions release the GIL; threads get their own right results."""
    import threading

    inputs = [rng.integers(-64, 64, size=1 << 19).astype(np.float32) / 8
              for _ in range(4)]
    results = [None] * len(inputs)

    def convert(index):
        for _ in range(3):
            results[index] = fp8q.asarray(inputs[index], dtype="e5m2")

    threads = [threading.Thread(target=convert, args=(index,))
               for index in range(len(inputs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for source, result in zip(inputs, results):
        assert same_bits(result.numpy(),
                         source.astype(ml_dtypes.float8_e5m2))


def test_objects_with_array_interfaces():
    class WithArray:
        def __array__(self, dtype=None, copy=None):
            return np.arange(3, dtype=np.float16)

    assert fp8q.asarray(WithArray()).dtype is fp8q.float16
    assert fp8q.asarray([fp8q.asarray([1.0]), fp8q.asarray([2.0])]).shape == \
        (2, 1)


def test_refcounts_are_stable():
    a = np.arange(4, dtype=np.float32)
    before = sys.getrefcount(a)
    for _ in range(1000):
        fp8q.asarray(a)
        fp8q.asarray(a, dtype="e4m3")
        fp8q.asarray(a).numpy()
    gc.collect()
    assert sys.getrefcount(a) == before


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2",
                                  "float8_e4m3fnuz", "float8_e5m2fnuz"])
def test_ml_dtypes_scalars_work_like_numpy_scalars(name):
    # Regression: ml_dtypes scalars went through the buffer protocol, which
    # NumPy refuses for user dtypes ("can only exported as a buffer without
    # format").
    scalar = getattr(ml_dtypes, name)(1.5)
    t = fp8q.asarray(scalar)
    assert t.shape == () and t.dtype == name
    assert float(fp8q.cast(scalar, "float32").numpy()) == 1.5
    assert float(fp8q.cast(ml_dtypes.float8_e4m3fn(2), "float32").numpy()) == 2
