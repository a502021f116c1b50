"""fp8q.torch.Linear's eager forward is one call into fp8q._C
(linear_layer / layer_weight) that reads the torch tensors through DLPack's
C exchange API: exactly the bits of fp8q.quantize per token followed by
fp8q.scaled_mm (the composition fp8q.linear makes), of the custom operators
and of the from_torch fallback for a torch without that API; its result is
a torch tensor from torch's allocator; its refusals name the layer."""
import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: pip install torch to run the "
                    "fp8q.torch tests")

import fp8q  # noqa: E402
import fp8q.torch as fpt  # noqa: E402
from fp8q.torch import _convert, _ops  # noqa: E402

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
DTYPE_IDS = ["float32", "bfloat16", "float16"]
# (granularity, activations, static)
MODES = [("row", "e4m3", False), ("tensor", "e4m3", False),
         ("block", "e4m3", False), ("row", "e4m3", True),
         ("tensor", "e4m3", True), ("row", None, False),
         ("block", None, False)]
MODE_IDS = ["W8A8-row", "W8A8-tensor", "W8A8-block", "W8A8-row-static",
            "W8A8-tensor-static", "W8A16-row", "W8A16-block"]


def layer(seed, granularity, activations, static, dtype, features=(200, 160)):
    torch.manual_seed(seed % (2 ** 31))
    linear = torch.nn.Linear(*features)
    quantized = fpt.Linear.from_linear(linear, activations=activations,
                                       granularity=granularity).to(dtype)
    if static:
        quantized.set_input_scale(0.015)
    return quantized


def reference(quantized, x):
    """The layer's result composed from fp8q's public operations."""
    blocks = _ops.WEIGHT_GRANULARITIES[quantized.granularity]
    w = fp8q.QTensor(fpt.from_torch(quantized.weight),
                     fpt.from_torch(quantized.weight_scale), blocks)
    rows = x.reshape(-1, x.shape[-1])
    if quantized.activations is None:
        dequantized = fpt.to_torch(w.dequantize(str(x.dtype)[6:]))
        return torch.nn.functional.linear(x, dequantized, quantized.bias)
    if quantized.input_scale is not None:
        source = fp8q.quantize(fpt.from_torch(rows), "float8_e4m3fn",
                               scale=fpt.from_torch(quantized.input_scale))
    else:
        source = fpt.from_torch(rows)
    y = fp8q.linear(source, w, bias=fpt.from_torch(quantized.bias),
                    out_dtype=str(x.dtype)[6:])
    return fpt.to_torch(y).reshape(*x.shape[:-1], -1)


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("granularity,activations,static", MODES,
                         ids=MODE_IDS)
def test_one_call_is_fp8q_quantize_then_scaled_mm(granularity, activations,
                                                  static, dtype, seed):
    quantized = layer(seed, granularity, activations, static, dtype)
    x = torch.randn(3, 7, 200).to(dtype)
    with torch.inference_mode():
        got = quantized(x)
        assert type(got) is torch.Tensor and got.dtype == dtype
        assert same_bits(got, reference(quantized, x)), f"seed={seed}"
        op = (_ops.linear_weight_only(x, quantized.weight,
                                      quantized.weight_scale, quantized.bias,
                                      granularity)
              if activations is None else
              _ops.linear_fp8(x, quantized.weight, quantized.weight_scale,
                              quantized.bias, quantized.input_scale,
                              granularity))
        assert same_bits(got, op), f"seed={seed}"
        # The same x laid out non-contiguously gives the same result (W8A8;
        # W8A16's product is torch's own, whose bits follow x's layout).
        strided = x.transpose(0, 1).contiguous().transpose(0, 1)
        assert not strided.is_contiguous()
        if activations is not None:
            assert same_bits(quantized(strided), got), f"seed={seed}"


@pytest.mark.parametrize("granularity,activations,static", MODES,
                         ids=MODE_IDS)
def test_eager_forward_is_one_c_call(granularity, activations, static,
                                     monkeypatch, seed):
    quantized = layer(seed, granularity, activations, static, torch.float32)
    x = torch.randn(4, 200)
    with torch.no_grad():
        expected = quantized(x)
    calls = []

    class CountingC:
        def __getattr__(self, name):
            function = getattr(fp8q._C, name)

            def counted(*arguments):
                calls.append(name)
                return function(*arguments)
            return counted

    def refused(*arguments, **keywords):
        raise AssertionError("from_torch on the hot path")

    monkeypatch.setattr(_ops, "_C", CountingC())
    monkeypatch.setattr(_ops, "from_torch", refused)
    monkeypatch.setattr(fp8q, "linear", refused)
    with torch.no_grad():
        got = quantized(x)
    assert calls == ["linear_layer" if activations else "layer_weight"]
    assert same_bits(got, expected)


@pytest.mark.parametrize("granularity,activations,static", MODES,
                         ids=MODE_IDS)
def test_torch_without_the_c_exchange_api_gets_the_same_bits(
        granularity, activations, static, monkeypatch, seed):
    quantized = layer(seed, granularity, activations, static, torch.bfloat16)
    x = torch.randn(5, 200).to(torch.bfloat16)
    x[3, 11] = float("inf")
    with torch.no_grad():
        expected = quantized(x)
        monkeypatch.setattr(_ops, "HAS_C_EXCHANGE", False)
        got = quantized(x)
    assert same_bits(got, expected), f"seed={seed}"


@pytest.mark.parametrize("granularity,static", [
    ("row", False), ("tensor", False), ("block", False), ("row", True),
    ("tensor", True)], ids=["row", "tensor", "block", "row-static",
                            "tensor-static"])
def test_nonfinite_tokens_give_the_default_nan_rows(granularity, static,
                                                    seed):
    quantized = layer(seed, granularity, "e4m3", static, torch.bfloat16)
    x = torch.randn(6, 200).to(torch.bfloat16)
    x[1, 0] = float("nan")
    x[4, 199] = -float("inf")
    with torch.no_grad():
        got = quantized(x)
        kept = [0, 2, 3, 5]
        assert same_bits(got[kept], quantized(x[kept])), f"seed={seed}"
    nan_bits = torch.full((200,), float("nan"), dtype=torch.bfloat16)
    assert same_bits(got[1, :160], nan_bits[:160])
    assert same_bits(got[4, :160], nan_bits[:160])


def test_results_come_from_torch(seed):
    quantized = layer(seed, "row", "e4m3", False, torch.float32)
    x = torch.randn(2, 200)
    with torch.no_grad():
        first = quantized(x)
        second = quantized(x)
    assert first.data_ptr() != second.data_ptr()
    assert torch.equal(first, second)
    assert first._base is None and first.is_contiguous()
    first.zero_()  # writable, owned by torch alone
    assert not first.any() and second.any()


def test_refusals_name_the_layer(seed):
    quantized = layer(seed, "row", "e4m3", False, torch.float32)
    with torch.no_grad():
        with pytest.raises(TypeError, match="fp8q.torch.Linear: x must be "
                                            "float32, float16 or bfloat16"):
            quantized(torch.zeros(2, 200, dtype=torch.float64))
        with pytest.raises(TypeError, match="float32, float16 or bfloat16, "
                                            "got uint8"):
            quantized(torch.zeros(2, 200, dtype=torch.uint8))
        with pytest.raises(ValueError, match=r"expected x's last axis to "
                                             "have in_features=200 elements, "
                                             r"got 100 \(x has shape \(2, "
                                             r"100\)\)"):
            quantized(torch.zeros(2, 100))
        quantized.weight_scale[3] = 0.0
        with pytest.raises(ValueError, match="fp8q.torch.Linear: "
                                             "weight_scale: every value must "
                                             "be finite and > 0"):
            quantized(torch.zeros(2, 200))


def test_c_entry_refuses_bad_arguments(seed):
    quantized = layer(seed, "row", "e4m3", False, torch.float32)
    x = torch.randn(2, 200)
    arguments = [x, quantized.weight, quantized.weight_scale, quantized.bias,
                 None]
    with pytest.raises(ValueError, match="granularity must be"):
        fp8q._C.linear_layer(*arguments, "col", None)
    with pytest.raises(TypeError, match="takes 7 to 9 positional arguments"):
        fp8q._C.linear_layer(*arguments)
    with pytest.raises(ValueError, match="path must be None, \"auto\", "
                                         "\"fp8\" or \"weight-only\""):
        fp8q._C.linear_layer(*arguments, "row", None, "gemv")
    with pytest.raises(ValueError, match="bias must hold out_features = "
                                         "160"):
        fp8q._C.linear_layer(x, quantized.weight, quantized.weight_scale,
                             torch.zeros(3), None, "row", None)
    with pytest.raises(TypeError, match="weight must be a 2-D "
                                        "float8_e4m3fn or float8_e5m2"):
        fp8q._C.linear_layer(x, x, quantized.weight_scale, None, None, "row",
                             None)
    with pytest.raises(ValueError, match="stream must be None for torch "
                                         "tensors"):
        fp8q._C.layer_weight(x, quantized.weight, quantized.weight_scale,
                             "row", 7)
    with pytest.raises(ValueError, match="stream= applies to CUDA tensors"):
        fp8q._C.layer_weight(x.numpy(), fpt.from_torch(quantized.weight),
                             quantized.weight_scale.numpy(), "row", 7)
    with pytest.raises(TypeError, match="bias must be float32, float16 or "
                                        "bfloat16, got uint8"):
        fp8q._C.linear_layer(x, quantized.weight, quantized.weight_scale,
                             torch.zeros(160, dtype=torch.uint8), None, "row",
                             None)


def test_exchange_api_is_torch_s():
    assert _convert.HAS_C_EXCHANGE == hasattr(torch.Tensor,
                                              "__dlpack_c_exchange_api__")
    assert not fp8q._C._dlpack_exchange_usable(np.zeros(1))
    # NumPy arrays and fp8q tensors take fp8q.asarray's path: fp8q results.
    rng = np.random.default_rng(0)
    w = fp8q.quantize(rng.standard_normal((16, 32)).astype(np.float32))
    x = rng.standard_normal((3, 32)).astype(np.float32)
    got = fp8q._C.linear_layer(x, w.data, w.scale, None, None, "row", None)
    assert isinstance(got, fp8q.Tensor)
    expected = fp8q.linear(x, w)
    assert np.array_equal(got.numpy(), expected.numpy())


@pytest.mark.parametrize("activations", [None, "e4m3"],
                         ids=["W8A16", "W8A8"])
def test_tools_that_trace_see_the_custom_operator(activations, seed):
    """torch.jit.trace, torch.vmap and the meta device cannot see a C call:
    the layer gives them the custom operator, with the one-call result."""
    quantized = layer(seed, "row", activations, False, torch.float32)
    x = torch.randn(4, 200)
    with torch.no_grad():
        expected = quantized(x)
        traced = torch.jit.trace(quantized, x)
        assert same_bits(traced(x), expected), f"seed={seed}"
        per_sample = torch.vmap(quantized)(x.unsqueeze(1)).squeeze(1)
        assert per_sample.shape == expected.shape
        on_meta = quantized.to("meta")(x.to("meta"))
        assert on_meta.device.type == "meta" and on_meta.shape == (4, 160)


def test_a_trainable_bias_and_a_negative_view(seed):
    quantized = layer(seed, "row", "e4m3", False, torch.float32)
    x = torch.randn(3, 200)
    with torch.no_grad():
        expected = quantized(x)
        view = (x * -1j).conj().imag  # x, stored as -x with a negative bit
        assert view.is_neg() and torch.equal(view, x)
        assert same_bits(quantized(view), expected), f"seed={seed}"
    quantized.bias = torch.nn.Parameter(quantized.bias.clone())
    with torch.no_grad():
        assert same_bits(quantized(x), expected), f"seed={seed}"
    quantized(x).sum().backward()
    assert torch.equal(quantized.bias.grad, torch.full((160,), 3.0))


def _resident_bytes():
    """This process's resident memory (Linux /proc)."""
    import os

    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/statm"),
                    reason="reads resident memory from Linux's /proc")
@pytest.mark.parametrize("static", [False, True])
def test_layer_temporaries_go_back_to_torch(static):
    """The W8A8 call's codes and scales (one scratch block from torch's
    allocator, owned by a capsule) are handed back after every call: 300
    calls with 4 MiB of codes each leave resident memory within 64 MiB."""
    quantized = layer(3, "row", "e4m3", static, torch.float32,
                      features=(4096, 16))
    x = torch.randn(1024, 4096)
    with torch.inference_mode():
        for _ in range(20):
            quantized(x)
        before = _resident_bytes()
        for _ in range(300):
            quantized(x)
        grown = _resident_bytes() - before
    assert grown < 64 << 20, f"resident memory grew by {grown} bytes"


@pytest.mark.parametrize("granularity,activations,static", MODES,
                         ids=MODE_IDS)
def test_forward_takes_input_by_nn_linear_s_name(granularity, activations,
                                                 static):
    """forward(input=x), as nn.Linear's forward is called by keyword (its
    argument is `input`), gives forward(x)'s bits; it was a TypeError."""
    quantized = layer(5, granularity, activations, static, torch.float32)
    x = torch.randn(3, 200, generator=torch.Generator().manual_seed(5))
    assert same_bits(quantized(input=x), quantized(x))
    with torch.no_grad():
        assert same_bits(quantized.forward(input=x), quantized(x))


@pytest.mark.parametrize("activations", ["e4m3", None],
                         ids=["W8A8", "W8A16"])
def test_autocast_takes_x_in_the_autocast_dtype(activations):
    """Under torch.autocast("cpu", bfloat16) a float32 or float16 x is
    taken in bfloat16, as nn.Linear computes there: the eager call, the autograd
    path and the compiled layer all give the bits of the layer on
    x.bfloat16() (W8A8 returned float32, and W8A16 float32 compiled but
    bfloat16 eager); x's gradient stays float32, as torch's cast gives."""
    quantized = layer(9, "row", activations, False, torch.float32)
    x = torch.randn(3, 200, generator=torch.Generator().manual_seed(9))
    expected = quantized(x.bfloat16())
    compiled = torch.compile(quantized, backend="aot_eager", fullgraph=True)
    trainable = x.clone().requires_grad_(True)
    with torch.autocast("cpu", torch.bfloat16):
        assert torch.nn.Linear(200, 4)(x).dtype == torch.bfloat16
        with torch.no_grad():
            assert same_bits(quantized(x), expected)
        assert same_bits(compiled(x), expected)
        y = quantized(trainable)
    assert same_bits(y.detach(), expected)
    y.float().sum().backward()
    assert trainable.grad.dtype == torch.float32
    assert quantized(x).dtype == torch.float32  # autocast off again
    # A float16 x is taken in bfloat16 too, as nn.Linear takes it.
    with torch.autocast("cpu", torch.bfloat16), torch.no_grad():
        assert same_bits(quantized(x.half()), quantized(x.half().bfloat16()))
