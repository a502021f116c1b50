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
