"""torch tensors whose memory does not hold their values as DLPack describes
them: views with the negative bit, meta and sparse tensors, and tensor
subclasses without storage. Every fp8q entry refuses them with a message that
names the fix (never wrong values, never C++ stack frames); the torch layer's
eager forward takes a negative view and gives the same result as for x.
"""
import ml_dtypes
import numpy as np
import pytest

import fp8q
from helpers import same_bits

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: pip install torch to run the "
    "PyTorch refusal tests")
import fp8q.torch as fpt  # noqa: E402  (after the importorskip)
from torch.utils._pytree import tree_map  # noqa: E402


def negative_view(x):
    """A view equal to x whose memory holds -x (torch's negative bit)."""
    view = (x * -1j).conj().imag
    assert view.is_neg() and torch.equal(view, x)
    return view


def random_float32(seed, shape):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator)


ENTRIES = {
    "asarray": lambda x: fp8q.asarray(x),
    "from_torch": lambda x: fpt.from_torch(x),
    "from_dlpack": lambda x: fp8q.from_dlpack(x),
    "cast": lambda x: fp8q.cast(x, "e4m3"),
    "quantize": lambda x: fp8q.quantize(x),
    "amax": lambda x: fp8q.amax(x),
}


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_a_negative_view_is_refused_naming_resolve_neg(entry):
    x = random_float32(40, (5, 8))
    with pytest.raises(BufferError, match=r"negative bit.*resolve_neg\(\)"):
        ENTRIES[entry](negative_view(x))
    # The fix the message names gives x's values: the ml_dtypes oracle.
    resolved = negative_view(x).resolve_neg()
    if entry == "cast":
        expected = x.numpy().astype(ml_dtypes.float8_e4m3fn)
        assert same_bits(np.asarray(ENTRIES[entry](resolved)), expected)
    elif entry == "amax":
        assert np.asarray(ENTRIES[entry](resolved)) == x.abs().max().item()
    elif entry == "quantize":
        q = ENTRIES[entry](resolved)
        assert same_bits(np.asarray(q.data), np.asarray(fp8q.quantize(
            x.numpy()).data))
    else:
        assert np.array_equal(np.asarray(ENTRIES[entry](resolved)),
                              x.numpy())


def test_a_negative_view_as_out_is_refused():
    x = random_float32(41, (4, 4))
    out = negative_view(torch.zeros(4, 4))
    with pytest.raises(BufferError, match="resolve_neg"):
        fp8q.cast(x, "float32", out=out)
    assert torch.equal(out, torch.zeros(4, 4))


@pytest.mark.parametrize("activations", [None, "e4m3"])
def test_the_layer_forward_reads_a_negative_view_as_its_values(activations):
    torch.manual_seed(42)
    layer = fpt.Linear.from_linear(torch.nn.Linear(64, 24),
                                   activations=activations)
    x = random_float32(43, (3, 64))
    with torch.no_grad():
        expected = layer(x)
        got = layer(negative_view(x))
    assert torch.equal(got, expected)
    # Not the stored values' output: -x gives another result.
    with torch.no_grad():
        assert not torch.allclose(layer(-x), expected)


def test_meta_tensors_are_refused_without_cpp_frames():
    for entry in ("asarray", "amax", "cast"):
        with pytest.raises(BufferError, match="meta device and has no data") \
                as caught:
            ENTRIES[entry](torch.empty(3, 4, device="meta"))
        assert "frame #" not in str(caught.value)
    # Also where torch's dtype is one NumPy would have to convert.
    with pytest.raises(BufferError, match="meta device"):
        fp8q.asarray(torch.empty(3, dtype=torch.float64, device="meta"))


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_sparse_tensors_are_refused_naming_to_dense(layout):
    dense = random_float32(44, (4, 4))
    sparse = dense.to_sparse() if layout == "coo" else dense.to_sparse_csr()
    for entry in ("asarray", "amax", "quantize"):
        with pytest.raises(TypeError, match=rf"sparse_{layout}.*x?\.?"
                           r"to_dense\(\)") as caught:
            ENTRIES[entry](sparse)
        assert "frame #" not in str(caught.value)
    assert np.array_equal(np.asarray(fp8q.asarray(sparse.to_dense())),
                          dense.numpy())


class WrapperTensor(torch.Tensor):
    """A tensor subclass without storage of its own (as quantized tensor
    types are): its elements live in `inner`."""

    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(
            cls, inner.shape, dtype=inner.dtype, device=inner.device)

    def __init__(self, inner):
        self.inner = inner

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def unwrap(value):
            return value.inner if isinstance(value, WrapperTensor) else value
        return func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))


def test_a_subclass_without_storage_is_refused_naming_its_type():
    wrapper = WrapperTensor(random_float32(45, (2, 8)))
    assert wrapper.data_ptr() == 0
    for entry in ("asarray", "amax"):
        with pytest.raises(TypeError, match="WrapperTensor is a torch tensor "
                           "subclass without storage"):
            ENTRIES[entry](wrapper)
    # Empty, it has nothing to read: no refusal.
    assert fp8q.asarray(WrapperTensor(torch.empty(0))).shape == (0,)
