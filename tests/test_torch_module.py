"""fp8q.torch.Linear as an nn.Module: dtype and device conversions keep the
FP8 weight and float32 scales, forward is NaN-safe per token, and zero-size
layers and batches behave like torch's nn.Linear."""
import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: pip install torch to run the "
                    "fp8q.torch tests")

import fp8q.torch as fpt  # noqa: E402

ACTIVATIONS = [None, "e4m3"]
GRANULARITIES = ["row", "tensor", "block"]
DTYPE_METHODS = {"half": torch.float16, "bfloat16": torch.bfloat16,
                 "float": torch.float32}


def quantized(seed, activations, granularity="row", static=False):
    torch.manual_seed(seed % (2 ** 31))
    model = torch.nn.Sequential(torch.nn.Linear(200, 160), torch.nn.ReLU(),
                                torch.nn.Linear(160, 40, bias=False))
    fpt.quantize(model, activations=activations, granularity=granularity)
    if static:
        with fpt.calibrate(model), torch.no_grad():
            model(torch.randn(4, 200))
        fpt.freeze(model)
    return model


def storage(model):
    """The FP8 codes and float32 scales of every fp8q layer, cloned."""
    return {name: tensor.clone() for name, tensor in model.state_dict().items()
            if not name.endswith("bias")}


def assert_storage_unchanged(model, before):
    after = storage(model)
    assert after.keys() == before.keys()
    for name, tensor in before.items():
        assert after[name].dtype == tensor.dtype, name
        assert torch.equal(after[name].reshape(-1).view(torch.uint8),
                           tensor.reshape(-1).view(torch.uint8)), name


@pytest.mark.parametrize("activations", ACTIVATIONS)
@pytest.mark.parametrize("method", sorted(DTYPE_METHODS))
def test_dtype_methods_keep_fp8_weights(activations, method, seed):
    model = quantized(seed, activations, static=activations is not None)
    before = storage(model)
    x = torch.randn(3, 200)
    with torch.no_grad():
        want = model(x.to(DTYPE_METHODS[method]))
        getattr(model, method)()
        assert_storage_unchanged(model, before)
        assert model[0].bias.dtype == DTYPE_METHODS[method]
        got = model(x.to(DTYPE_METHODS[method]))
    assert got.dtype == DTYPE_METHODS[method]
    if method != "float":  # the bias was rounded into the new dtype
        assert torch.allclose(got.float(), want.float(), rtol=2e-2,
                              atol=2e-2), f"seed={seed}"


@pytest.mark.parametrize("activations", ACTIVATIONS)
@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_to_dtype_and_device(activations, granularity, seed):
    model = quantized(seed, activations, granularity)
    before = storage(model)
    model.to(torch.bfloat16)
    assert_storage_unchanged(model, before)
    model.to("cpu", torch.float16)
    assert_storage_unchanged(model, before)
    assert model[0].bias.dtype == torch.float16
    with torch.no_grad():
        y = model(torch.randn(2, 200, dtype=torch.float16))
    assert y.dtype == torch.float16 and y.shape == (2, 40)
    # A device move takes every buffer along (meta: no GPU needed).
    model.to("meta", torch.bfloat16)
    for name, tensor in model.state_dict().items():
        assert tensor.device.type == "meta", name
        if not name.endswith("bias"):
            assert tensor.dtype == before[name].dtype, name


def test_state_dict_round_trip_after_half(seed):
    model = quantized(seed, "e4m3", static=True).half()
    fresh = quantized(seed + 1, "e4m3").half()
    fresh.load_state_dict(model.state_dict())
    assert_storage_unchanged(fresh, storage(model))
    x = torch.randn(3, 200, dtype=torch.float16)
    with torch.no_grad():
        assert torch.equal(fresh(x), model(x)), f"seed={seed}"


@pytest.mark.parametrize("activations,static", [(None, False),
                                                ("e4m3", False),
                                                ("e4m3", True)])
@pytest.mark.parametrize("poison", [float("nan"), float("inf")])
def test_nonfinite_token_gives_nan_row_only(activations, static, poison,
                                            seed):
    layer = quantized(seed, activations, static=static)[0]
    x = torch.randn(5, 200)
    x[2, 17] = poison
    with torch.no_grad():
        y = layer(x)
        if activations is None:  # torch's float path, as is
            reference = torch.nn.functional.linear(
                x, layer.weight.float() * layer.weight_scale, layer.bias)
            torch.testing.assert_close(y, reference, rtol=0, atol=0,
                                       equal_nan=True, msg=f"seed={seed}")
            assert not torch.isfinite(y[2]).all()
        else:
            assert torch.isnan(y[2]).all()
            kept = [0, 1, 3, 4]
            assert torch.equal(y[kept], layer(x[kept])), f"seed={seed}"
    assert torch.isfinite(y[[0, 1, 3, 4]]).all()


@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors")
@pytest.mark.parametrize("activations", ACTIVATIONS)
@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_zero_size_layers_and_batches_work_like_torch(activations,
                                                      granularity):
    torch.manual_seed(0)
    for in_features, out_features, batch in [(0, 4, (3,)), (200, 160, (0,)),
                                              (200, 160, (2, 0)),
                                              (8, 0, (3,))]:
        linear = torch.nn.Linear(in_features, out_features)
        with torch.no_grad():
            linear.bias.uniform_(-1, 1)
        x = torch.randn(*batch, in_features)
        with torch.no_grad():
            want = linear(x)
            layer = fpt.Linear.from_linear(linear, activations=activations,
                                           granularity=granularity)
            got = layer(x)
        assert got.shape == want.shape
        assert torch.equal(got, want), (in_features, out_features, batch)


# ---------------------------------------------------------------------------
# Weights on the meta device, parametrize / prune, torch.fx, TorchScript,
# float64 biases and a float64 default dtype.


def empty_model(activations):
    """A quantized model whose tensors are still on the meta device (as
    accelerate's init_empty_weights leaves them before loading)."""
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(64, 32))
    fpt.quantize(model, activations=activations)
    return model


NEVER_LOADED = (r"fp8q.torch.Linear '0' \(in_features=64, out_features=32\):"
                r" x is on cpu, but the layer's weight is on the meta "
                r"device: its weights were never loaded")


@pytest.mark.parametrize("activations", ACTIVATIONS)
@pytest.mark.parametrize("path", ["no_grad", "requires_grad", "vmap",
                                  "negative_view"])
def test_meta_weights_with_a_real_x_are_refused(activations, path, seed):
    # Through the custom operators torch ran their fake implementation,
    # returning uninitialized memory (and garbage gradients); the one-call
    # path failed in DLPack with a C++ traceback. nn.Linear refuses too.
    model = empty_model(activations)
    torch.manual_seed(seed % (2 ** 31))
    x = torch.randn(2, 64, requires_grad=path == "requires_grad")
    with pytest.raises(RuntimeError, match="not on the expected device"):
        torch.nn.Linear(64, 32, device="meta")(x)
    call = {"vmap": lambda: torch.vmap(model)(x.expand(3, 2, 64)),
            "negative_view": lambda: model(torch._neg_view(x))}.get(
                path, lambda: model(x))
    with pytest.raises(RuntimeError, match=NEVER_LOADED) as error, \
            torch.set_grad_enabled(path == "requires_grad"):
        call()
    assert "Cannot pack" not in str(error.value)
    # On the meta device, x included, the shape still comes out.
    on_meta = model(x.detach().to("meta"))
    assert on_meta.is_meta and on_meta.shape == (2, 32)


def test_operators_refuse_a_real_x_with_meta_operands(seed):
    layer = empty_model("e4m3")[0]
    x = torch.ones(2, 64)
    for operator, call in {
            "linear_weight_only": lambda: torch.ops.fp8q.linear_weight_only(
                x, layer.weight, layer.weight_scale, layer.bias, "row"),
            "linear_fp8": lambda: torch.ops.fp8q.linear_fp8(
                x, layer.weight, layer.weight_scale, layer.bias, None,
                "row"),
            "dequantize_weight": lambda: torch.ops.fp8q.dequantize_weight(
                x, layer.weight, layer.weight_scale, "row")}.items():
        with pytest.raises(RuntimeError,
                           match=f"fp8q.{operator}: an operand is on the "
                                 "meta device"):
            call()


@pytest.mark.parametrize("activations", ACTIVATIONS)
def test_fake_tensor_mode_and_compile_still_trace(activations, seed):
    from torch._subclasses.fake_tensor import FakeTensorMode
    model = quantized(seed, activations)
    x = torch.randn(3, 200)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        y = model(mode.from_tensor(x))
    assert y.shape == (3, 40)
    torch._dynamo.reset()
    assert torch.equal(torch.compile(model)(x), model(x))


class Doubled(torch.nn.Module):
    def forward(self, value):
        return value * 2


@pytest.mark.parametrize("activations", ACTIVATIONS)
@pytest.mark.parametrize("grad", [False, True])
def test_parametrized_and_pruned_biases_work(activations, grad, seed):
    # forward read self._parameters["bias"]: a KeyError.
    from torch.nn.utils import parametrize, prune
    model = quantized(seed, activations)
    x = torch.randn(4, 200)
    layer = model[0]
    bias = layer.bias.detach().clone()
    parametrize.register_parametrization(layer, "bias", Doubled())
    with torch.set_grad_enabled(grad):
        y = layer(x)
    assert torch.equal(y, fpt.Linear.from_fp8(
        layer.weight, layer.weight_scale, bias * 2,
        activations=activations)(x))
    parametrize.remove_parametrizations(layer, "bias")
    prune.l1_unstructured(layer, "bias", amount=0.5)
    pruned = layer.bias.detach().clone()
    assert int((pruned == 0).sum()) == 80
    with torch.set_grad_enabled(grad):
        y = layer(x)
    assert torch.equal(y, fpt.Linear.from_fp8(
        layer.weight, layer.weight_scale, pruned,
        activations=activations)(x))


@pytest.mark.parametrize("grad", [False, True])
def test_a_parametrized_fp8_weight_is_refused(grad, seed):
    from torch.nn.utils import parametrize
    model = quantized(seed, "e4m3")
    model[0].set_name("0")

    class Identity(torch.nn.Module):
        def forward(self, value):
            return value

    parametrize.register_parametrization(model[0], "weight", Identity())
    with pytest.raises(RuntimeError,
                       match=r"Linear '0' .*its weight is parametrized or "
                             r"pruned .*before quantizing"), \
            torch.set_grad_enabled(grad):
        model(torch.randn(2, 200))


@pytest.mark.parametrize("activations", ACTIVATIONS)
def test_fx_symbolic_trace_gives_the_layer_output(activations, seed):
    # The eager dtype checks ran on a Proxy: TraceError.
    model = quantized(seed, activations)
    traced = torch.fx.symbolic_trace(model)
    targets = {str(node.target) for node in traced.graph.nodes}
    assert any("fp8q" in target for target in targets), targets
    x = torch.randn(5, 200)
    assert torch.equal(traced(x), model(x))


def test_jit_script_is_refused_with_the_alternatives(seed):
    model = quantized(seed, None)
    with pytest.raises(RuntimeError, match="torch.jit.script cannot compile"
                                           ".*torch.jit.trace, torch.export"):
        torch.jit.script(model)


@pytest.mark.parametrize("activations", ACTIVATIONS)
def test_double_keeps_fp8_and_float32_inputs_work(activations, seed):
    # W8A8 refused float32 x after model.double() (float64 bias) in DLPack's
    # words; the bias is added as float32 now, as W8A16 casts it.
    model = quantized(seed, activations)
    x = torch.randn(4, 200)
    reference = model(x)
    model.double()
    assert model[0].bias.dtype == torch.float64
    assert model[0].weight.dtype == torch.float8_e4m3fn
    assert torch.equal(model(x), reference)
    with torch.enable_grad():
        assert torch.equal(model(x.clone().requires_grad_()), reference)


def test_reset_parameters_under_a_float64_default_dtype(seed):
    torch.manual_seed(seed % (2 ** 31))
    layer = fpt.Linear(64, 32, dtype=torch.float32)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        layer.reset_parameters()
    finally:
        torch.set_default_dtype(default)
    assert layer.weight.dtype == torch.float8_e4m3fn
    assert layer.bias.dtype == torch.float32
    assert layer.weight.float().abs().max() > 0
