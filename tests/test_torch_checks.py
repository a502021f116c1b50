"""fp8q.torch.Linear refuses what would compute garbage or fail obscurely:
a state dict whose weight is in another format (issue 24, defect 1) and an
input whose shape does not fit, with nn.Linear's words and the layer's name
(defect 9). torch's nn.Linear is the oracle for which shapes fail."""
import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: pip install torch to run the "
                    "fp8q.torch tests")

import fp8q.torch as fpt  # noqa: E402

ACTIVATIONS = [None, "e4m3"]


def raw(tensor):
    """FP8 codes as bytes (torch.equal does not compare float8), other
    tensors as they are."""
    return tensor.view(torch.uint8) if tensor.element_size() == 1 else tensor


def layer(seed, weights="e4m3", activations=None):
    torch.manual_seed(seed % (2 ** 31))
    return fpt.Linear.from_linear(torch.nn.Linear(64, 32), weights=weights,
                                  activations=activations)


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("source, target", [("e5m2", "e4m3"),
                                            ("e4m3", "e5m2")])
def test_another_fp8_format_is_refused_naming_key_and_formats(
        source, target, strict, seed):
    model = torch.nn.Sequential(torch.nn.Linear(64, 32))
    fpt.quantize(model, weights=target)
    before = {name: t.clone() for name, t in model.state_dict().items()}
    theirs = {"0." + name: t for name, t in
              layer(seed, weights=source).state_dict().items()}
    full = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}
    with pytest.raises(RuntimeError) as error:
        model.load_state_dict(theirs, strict=strict)
    message = str(error.value)
    assert "'0.weight'" in message
    assert f"holds {full[source]}" in message
    assert f"weight is {full[target]}" in message
    # Nothing of the layer loaded: its codes, scales and bias are as before.
    for name, tensor in model.state_dict().items():
        assert torch.equal(raw(tensor), raw(before[name])), name


def test_float_weights_into_fp8_codes_are_refused(seed):
    torch.manual_seed(seed % (2 ** 31))
    float_model = torch.nn.Sequential(torch.nn.Linear(64, 32))
    model = fpt.quantize(torch.nn.Sequential(torch.nn.Linear(64, 32)))
    with pytest.raises(RuntimeError, match=r"'0\.weight'\] holds float32, "
                                           r"but the layer's weight is "
                                           r"float8_e4m3fn"):
        model.load_state_dict(float_model.state_dict(), strict=False)


def test_the_same_format_still_loads_exactly(seed):
    source = layer(seed, weights="e5m2")
    target = fpt.Linear(64, 32, weights="e5m2")
    target.load_state_dict(source.state_dict())
    assert torch.equal(target.weight.view(torch.uint8),
                       source.weight.view(torch.uint8))


def bad_inputs():
    return [torch.randn(4, 63), torch.randn(63), torch.randn(2, 3, 65),
            torch.randn(()), torch.randn(4, 64).T]


@pytest.mark.parametrize("activations", ACTIVATIONS)
@pytest.mark.parametrize("mode", ["inference", "no_grad", "requires_grad",
                                  "meta"])
def test_shape_errors_say_what_nn_linear_expects(activations, mode, seed):
    fp8_layer = layer(seed, activations=activations)
    for x in bad_inputs():
        with pytest.raises(RuntimeError):  # the oracle: nn.Linear fails too
            torch.nn.Linear(64, 32)(x)
        if mode == "meta":
            x, fp8_layer = x.to("meta"), fp8_layer.to("meta")
        if mode == "requires_grad":
            x.requires_grad_()
        context = {"inference": torch.inference_mode,
                   "no_grad": torch.no_grad}.get(mode, torch.enable_grad)
        with pytest.raises(fpt.InputShapeError) as error, context():
            fp8_layer(x)
        # Caught as nn.Linear's error would be, and as fp8q's checks are.
        assert isinstance(error.value, RuntimeError)
        assert isinstance(error.value, ValueError)
        message = str(error.value)
        assert message.startswith("fp8q.torch.Linear (in_features=64, "
                                  "out_features=32): "), message
        if x.dim() == 0:
            assert "at least one axis (..., 64), got a 0-d tensor" in message
        else:
            assert (f"expected x's last axis to have in_features=64 "
                    f"elements, got {x.shape[-1]} (x has shape "
                    f"{tuple(x.shape)})") in message


@pytest.mark.parametrize("activations", ACTIVATIONS)
def test_shape_errors_name_the_layer_in_a_quantized_model(activations, seed):
    torch.manual_seed(seed % (2 ** 31))
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 48),
        torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(32, 8)))
    fpt.quantize(model, activations=activations)
    with pytest.raises(fpt.InputShapeError,
                       match=r"^fp8q\.torch\.Linear '1\.1' \(in_features=32, "
                             r"out_features=8\): expected x's last axis to "
                             r"have in_features=32 elements, got 48"), \
            torch.inference_mode():
        model(torch.randn(5, 64))


@pytest.mark.parametrize("activations", ACTIVATIONS)
def test_other_errors_pass_through_unchanged(activations, seed):
    """A fitting shape with a wrong dtype keeps fp8q's own message."""
    fp8_layer = layer(seed, activations=activations)
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"), \
            torch.inference_mode():
        fp8_layer(torch.ones(2, 64, dtype=torch.int32))
