"""Interop with PyTorch CPU tensors in both directions (float8 and bfloat16
included): zero-copy proofs, strided views, the uint8-view fallback for
float8 exports, conversions, lifetimes and reference counts. Skipped as a
whole, with the reason, where PyTorch is not installed.
"""
import gc
import os
import subprocess
import sys
import textwrap
import warnings
import weakref

import numpy as np
import pytest

import fp8q
from helpers import FP8_NAMES, same_bits, values

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: pip install torch to run the "
    "PyTorch interop tests")

TORCH = {"float32": torch.float32, "float16": torch.float16,
         "bfloat16": torch.bfloat16, "uint8": torch.uint8,
         "float8_e4m3fn": torch.float8_e4m3fn,
         "float8_e5m2": torch.float8_e5m2,
         "float8_e4m3fnuz": torch.float8_e4m3fnuz,
         "float8_e5m2fnuz": torch.float8_e5m2fnuz}

BITS = {1: (np.uint8, torch.uint8), 2: (np.int16, torch.int16),
        4: (np.int32, torch.int32)}


def torch_from_numpy_bits(reference, name):
    """A torch tensor holding the same bits as the NumPy array."""
    numpy_bits, _ = BITS[reference.itemsize]
    return torch.from_numpy(reference.view(numpy_bits).copy()).view(
        TORCH[name])


def torch_bits(x):
    """The raw bits of a torch tensor as a NumPy integer array."""
    return x.view(BITS[x.element_size()][1]).numpy()


@pytest.mark.parametrize("name", list(TORCH))
def test_torch_to_fp8q_zero_copy(name, rng):
    reference = values(name, (3, 4), rng)
    x = torch_from_numpy_bits(reference, name)
    for t in (fp8q.asarray(x), fp8q.from_dlpack(x)):
        assert t.dtype is fp8q.dtype(name)
        assert t.data_ptr == x.data_ptr()
        assert t.shape == (3, 4) and t.strides == (4, 1)
        assert same_bits(t.numpy(), reference)
    t = fp8q.asarray(x)
    t.numpy()[0, 0] = reference[2, 3]
    assert torch_bits(x)[0, 0] == torch_bits(x)[2, 3]
    x[1, 2] = x[2, 1]
    assert same_bits(t.numpy()[1, 2], reference[2, 1])


@pytest.mark.parametrize("name", list(TORCH))
def test_fp8q_to_torch_zero_copy(name, rng):
    reference = values(name, (3, 4), rng)
    t = fp8q.asarray(reference)
    x = torch.from_dlpack(t)
    assert x.dtype == TORCH[name]
    assert x.data_ptr() == t.data_ptr
    assert tuple(x.shape) == (3, 4) and x.stride() == (4, 1)
    np.testing.assert_array_equal(x.float().numpy(),
                                  reference.astype(np.float32))
    x[1, 1] = x[0, 0]
    assert same_bits(t.numpy()[1, 1], t.numpy()[0, 0])
    transposed = torch.from_dlpack(t.T)
    assert transposed.stride() == (1, 4)
    assert torch.equal(transposed.float(), x.float().T)


def test_torch_non_contiguous_views(rng):
    base = torch.arange(48, dtype=torch.float32).reshape(6, 8)
    views = [base[::2, 1::3], base.T, base[:, 2], base[1:4].t()[::2],
             base[0].expand(3, 8), base.unsqueeze(1)[:, :, ::4]]
    for view in views:
        t = fp8q.asarray(view)
        assert t.data_ptr == view.data_ptr()
        assert t.shape == tuple(view.shape)
        np.testing.assert_array_equal(t.numpy(), view.numpy())
        assert torch.equal(torch.from_dlpack(t.contiguous()),
                           view.contiguous())
    flipped = fp8q.asarray(np.arange(5, dtype=np.float32)[::-1])
    # PyTorch has no negative strides: export a contiguous copy.
    assert torch.equal(torch.from_dlpack(flipped.contiguous()),
                       torch.tensor([4.0, 3, 2, 1, 0]))


def test_torch_float8_round_trip_is_bit_exact():
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    for name in FP8_NAMES:
        x = codes.view(TORCH[name])
        t = fp8q.asarray(x)
        assert t.data_ptr == x.data_ptr()
        assert bytes(t) == bytes(range(256))
        back = torch.from_dlpack(t)
        assert torch.equal(back.view(torch.uint8), codes)
        nan = torch.isnan(x.float())
        np.testing.assert_array_equal(
            np.isnan(t.numpy().astype(np.float32)), nan.numpy())
        finite = ~nan
        np.testing.assert_array_equal(
            t.numpy().astype(np.float32)[finite.numpy()],
            x.float()[finite].numpy())


class RefusesFloat8:
    """Stands for a PyTorch version whose DLPack export refuses float8:
    __dlpack__ raises, .dtype and .view(torch.uint8) work."""

    def __init__(self, tensor):
        self.tensor = tensor
        self.dtype = tensor.dtype

    def __dlpack__(self, **kwargs):
        raise BufferError("float8 types are not supported by dlpack")

    def __dlpack_device__(self):
        return (1, 0)

    def view(self, dtype):
        return self.tensor.view(dtype)


@pytest.mark.parametrize("name", FP8_NAMES)
def test_torch_float8_fallback_through_uint8_view(name):
    x = torch.tensor([1.0, -2.0, 0.5, 448.0 if "e4m3" in name else 4.0]).to(
        TORCH[name])
    wrapped = RefusesFloat8(x)
    for t in (fp8q.from_dlpack(wrapped), fp8q.asarray(wrapped)):
        assert t.dtype is fp8q.dtype(name)
        assert t.data_ptr == x.data_ptr()
        np.testing.assert_array_equal(t.numpy().astype(np.float32),
                                      x.float().numpy())
    as_codes = fp8q.from_dlpack(wrapped, dtype="uint8")
    assert as_codes.dtype is fp8q.uint8


def test_from_dlpack_of_a_torch_tensor_uses_the_c_exchange_table():
    """A torch tensor is exported through its type's C exchange table, with
    no Python __dlpack__ call (as fp8q.asarray does); with dtype= (a
    reinterpretation) and for a tensor that requires grad, __dlpack__ is
    called."""
    class Counted(torch.Tensor):
        calls = 0

        def __dlpack__(self, *args, **kwargs):
            Counted.calls += 1
            return super().__dlpack__(*args, **kwargs)

    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t = fp8q.from_dlpack(x.as_subclass(Counted))
    assert Counted.calls == 0
    assert t.data_ptr == x.data_ptr() and t.shape == (2, 3)
    del x
    np.testing.assert_array_equal(t.numpy(), np.arange(6).reshape(2, 3))
    codes = fp8q.from_dlpack(
        torch.zeros(4, dtype=torch.uint8).as_subclass(Counted), dtype="e4m3")
    assert Counted.calls == 1 and codes.dtype is fp8q.float8_e4m3fn
    with pytest.raises(BufferError, match="gradient"):
        fp8q.from_dlpack(torch.ones(2, requires_grad=True).as_subclass(
            Counted))
    assert Counted.calls == 2


def test_a_known_torch_type_is_converted_without_looking_up_dlpack():
    """Once a type's DLPack exchange table is known, converting one of its
    tensors (an argument, or out=) asks no attribute "__dlpack__" (a name
    lookup cost 0.1 us on every torch argument of every operation). In a
    fresh interpreter: the first 8 producer types seen are the ones
    remembered (csrc/python/dlpack_exchange.c)."""
    script = textwrap.dedent("""
        import numpy as np, torch, fp8q

        class Watched(torch.Tensor):
            looked_up = []

            def __getattribute__(self, name):
                Watched.looked_up.append(name)
                return super().__getattribute__(name)

        x = torch.arange(4, dtype=torch.float32).as_subclass(Watched)
        fp8q.asarray(x)
        Watched.looked_up.clear()
        t = fp8q.asarray(x)
        out = torch.zeros(4, dtype=torch.float16).as_subclass(Watched)
        fp8q.cast(x, "float16", out=out)
        assert "__dlpack__" not in Watched.looked_up, Watched.looked_up
        np.testing.assert_array_equal(t.numpy(), np.arange(4))
        np.testing.assert_array_equal(out.numpy(), np.arange(4))
    """)
    subprocess.run([sys.executable, "-c", script], check=True,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def test_a_torch_tensor_the_exchange_table_refuses_gets_torch_s_message():
    """A tensor torch's C exchange export refuses (a quantized one) goes
    through __dlpack__, whose Python error says why, not the C++ one with
    its backtrace."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized tensors are deprecated
        quantized = torch.quantize_per_tensor(torch.ones(4), 0.1, 0,
                                              torch.quint8)
    for convert in (fp8q.from_dlpack, fp8q.asarray,
                    lambda t: fp8q.cast(t, "e4m3")):
        with pytest.raises(BufferError, match="QUInt") as refused:
            convert(quantized)
        assert "Exception raised from" not in str(refused.value)


def test_failing_export_of_other_objects_is_reported():
    class Refuses:
        dtype = "torch.float32"

        def __dlpack__(self, **kwargs):
            raise BufferError("cannot export this")

    with pytest.raises(BufferError, match="cannot export this"):
        fp8q.from_dlpack(Refuses())
    with pytest.raises(BufferError, match="cannot export this"):
        fp8q.asarray(Refuses())


def test_torch_conversions_and_errors():
    doubles = torch.tensor([0.25, 1.5], dtype=torch.float64)
    t = fp8q.asarray(doubles)
    assert t.dtype is fp8q.float32
    np.testing.assert_array_equal(t.numpy(), [0.25, 1.5])
    assert fp8q.asarray(torch.tensor([True, False])).numpy().tolist() == [1, 0]
    assert fp8q.asarray(torch.arange(3, dtype=torch.int32)).dtype is \
        fp8q.float32
    assert fp8q.asarray(torch.tensor([1.0]), dtype=torch.bfloat16).dtype is \
        fp8q.bfloat16
    with pytest.raises(TypeError, match=r"^obj: unsupported DLPack dtype"):
        fp8q.from_dlpack(doubles)
    with pytest.raises(ValueError, match="Unable to avoid copy"):
        fp8q.asarray(doubles, copy=False)
    with pytest.raises(Exception, match="gradient"):
        fp8q.asarray(torch.ones(2, requires_grad=True))


def test_torch_zero_d_and_empty():
    scalar = torch.tensor(2.5)
    t = fp8q.asarray(scalar)
    assert t.shape == () and t.data_ptr == scalar.data_ptr()
    back = torch.from_dlpack(t)
    assert back.shape == () and back.item() == 2.5
    empty = fp8q.asarray(torch.empty(0, 3, dtype=torch.float8_e5m2))
    assert empty.shape == (0, 3) and empty.dtype is fp8q.float8_e5m2
    assert torch.from_dlpack(fp8q.zeros((2, 0), dtype="e4m3")).shape == (2, 0)


def test_torch_lifetime_both_directions():
    x = torch.arange(1000, dtype=torch.float32)
    expected = x.clone()
    t = fp8q.asarray(x)
    del x
    gc.collect()
    assert torch.equal(torch.from_numpy(t.numpy().copy()), expected)
    source = fp8q.asarray(np.arange(10, dtype=np.float32), dtype="bf16")
    reference = weakref.ref(source)
    y = torch.from_dlpack(source)
    del source
    gc.collect()
    assert reference() is not None
    assert torch.equal(y.float(), torch.arange(10, dtype=torch.float32))
    del y
    gc.collect()
    assert reference() is None


def test_torch_readonly_export_is_versioned():
    a = np.arange(3, dtype=np.float32)
    a.flags.writeable = False
    t = fp8q.asarray(a)
    # A legacy capsule of a read-only tensor is refused without copy=True,
    # so sharing the pointer proves PyTorch got a versioned capsule.
    x = torch.from_dlpack(t)
    assert x.data_ptr() == t.data_ptr


def test_refcounts_are_stable():
    x = torch.arange(4, dtype=torch.float32)
    before = sys.getrefcount(x)
    for _ in range(1000):
        fp8q.asarray(x)
        torch.from_dlpack(fp8q.asarray(x))
    gc.collect()
    assert sys.getrefcount(x) == before


def test_cast_writes_into_a_torch_tensor_in_place():
    x = torch.linspace(-500, 500, 24).reshape(4, 6)
    out = torch.full((4, 6), 0x55, dtype=torch.uint8).view(torch.float8_e4m3fn)
    assert fp8q.cast(x, "e4m3", out=out) is out
    expected = x.clamp(-448, 448).to(torch.float8_e4m3fn)  # saturate=True
    assert torch.equal(out.view(torch.uint8), expected.view(torch.uint8))
