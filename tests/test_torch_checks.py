"""fp8q.torch.Linear refuses what would compute garbage or fail obscurely:
a state dict whose weight is in another format (issue 24, defect 1) and an
input whose shape does not fit, with nn.Linear's words and the layer's name
(defect 9). torch's nn.Linear is the oracle for which shapes fail."""
import copy

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


# Issue 40, item 4: scales and codes that no layer may hold are refused
# where they arrive (from_fp8, load_state_dict), and every forward error of
# a named layer (quantize, load_checkpoint) carries its qualified name.
BAD_SCALES = [float("nan"), float("inf"), 0.0, -1.0]
MODES = ["inference", "no_grad", "requires_grad", "meta"]


def _context(mode):
    return {"inference": torch.inference_mode,
            "no_grad": torch.no_grad}.get(mode, torch.enable_grad)()


@pytest.mark.parametrize("bad", BAD_SCALES, ids=str)
def test_from_fp8_refuses_scales_that_are_not_finite_and_positive(bad,
                                                                  seed):
    source = layer(seed)
    scale = source.weight_scale.detach().clone()
    scale[7] = bad
    with pytest.raises(ValueError, match=r"^from_fp8: weight_scale: 1 of its "
                                         r"32 values are not finite and > 0"
                                         r".* element 7 in C order, is "
                                         rf"{bad}"):
        fpt.Linear.from_fp8(source.weight, scale)
    with pytest.raises(ValueError, match=r"set_input_scale: expected a "
                                         r"finite scale > 0"):
        fpt.Linear.from_fp8(source.weight, source.weight_scale,
                            input_scale=torch.tensor(bad),
                            activations="e4m3")


@pytest.mark.parametrize("weights", ["e4m3", "e5m2"])
def test_from_fp8_refuses_exactly_the_non_finite_codes(weights, seed):
    """Every one of the 256 codes in turn; torch's decoding of the code is
    the oracle for which are NaN or infinite."""
    source = layer(seed, weights=weights)
    dtype = source.weight.dtype
    decoded = torch.arange(256, dtype=torch.uint8).view(dtype).float()
    for code in range(256):
        codes = source.weight.detach().view(torch.uint8).clone()
        codes[3, 9] = code
        codes = codes.view(dtype)
        if bool(torch.isfinite(decoded[code])):
            built = fpt.Linear.from_fp8(codes, source.weight_scale)
            assert built.weight is not None
            continue
        with pytest.raises(ValueError, match=r"^from_fp8: weight: 1 of its "
                                             r"2048 float8_e\w+ codes are "
                                             r"NaN.*first at index \[3, "
                                             r"9\]"):
            fpt.Linear.from_fp8(codes, source.weight_scale)


@pytest.mark.parametrize("tensor", ["weight", "weight_scale", "input_scale"])
def test_load_state_dict_refuses_bad_values_and_loads_nothing(tensor, seed):
    model = torch.nn.Sequential(torch.nn.Linear(64, 32))
    fpt.quantize(model, activations="e4m3")
    model[0].set_input_scale(0.25)
    before = {name: raw(t).clone() for name, t in model.state_dict().items()}
    theirs = {"0." + name: t.detach().clone() for name, t in
              layer(seed, activations="e4m3").state_dict().items()}
    theirs["0.input_scale"] = torch.tensor(0.5)
    if tensor == "weight":
        theirs["0.weight"] = theirs["0.weight"].view(torch.uint8)
        theirs["0.weight"][0, 0] = 0x7F
        theirs["0.weight"] = theirs["0.weight"].view(torch.float8_e4m3fn)
        problem = "float8_e4m3fn codes are NaN"
    else:
        theirs["0." + tensor].reshape(-1)[0] = float("nan")
        problem = "values are not finite and > 0"
    with pytest.raises(RuntimeError, match=rf"fp8q\.torch\.Linear '0' "
                                           rf"\(in_features=64, out_features"
                                           rf"=32\): state_dict\['0\."
                                           rf"{tensor}'\]: 1 of its \d+ "
                                           rf"{problem}"):
        model.load_state_dict(theirs)
    for name, value in model.state_dict().items():
        assert torch.equal(raw(value), before[name]), name


@pytest.mark.parametrize("kind", ["weight-only", "block"])
def test_input_scale_into_a_layer_without_one_is_an_unexpected_key(kind,
                                                                    seed):
    """A state dict's input_scale (a frozen W8A8 layer's, valid or not)
    loading into a layer that takes none (weight-only, block scales) is
    what nn.Linear makes of a key it does not have: unexpected with
    strict=True, skipped with strict=False, where the rest loads."""
    source = layer(seed, activations="e4m3")
    source.set_input_scale(0.25)
    settings = ({"activations": None} if kind == "weight-only"
                else {"activations": "e4m3", "granularity": "block"})
    for value in (torch.tensor(0.25), torch.tensor([0.5, 0.5]),
                  torch.tensor(-1.0)):
        target = fpt.Linear.from_linear(torch.nn.Linear(64, 32), **settings)
        theirs = {name: t.detach().clone() for name, t in
                  target.state_dict().items()}
        theirs["bias"] = source.bias.detach().clone()
        theirs["input_scale"] = value
        with pytest.raises(RuntimeError, match=r'Unexpected key\(s\) in '
                                               r'state_dict: "input_scale"'):
            target.load_state_dict(theirs)
        result = target.load_state_dict(theirs, strict=False)
        assert result.unexpected_keys == ["input_scale"], value
        assert target.input_scale is None
        assert torch.equal(target.bias, source.bias)


def test_a_bad_input_scale_is_reported_naming_its_key(seed):
    """An input_scale of another shape than one scale is a load_state_dict
    error naming the key and the layer, for a layer with or without a
    static scale yet, and nothing of the layer loads."""
    for frozen in (False, True):
        model = torch.nn.Sequential(torch.nn.Linear(64, 32))
        fpt.quantize(model, activations="e4m3")
        if frozen:
            model[0].set_input_scale(0.25)
        before = {name: raw(t).clone()
                  for name, t in model.state_dict().items()}
        theirs = {"0." + name: t.detach().clone() for name, t in
                  layer(seed, activations="e4m3").state_dict().items()}
        theirs["0.input_scale"] = torch.tensor([0.5, 0.5])
        for strict in (True, False):
            with pytest.raises(RuntimeError, match=r"fp8q\.torch\.Linear "
                                                   r"'0' .*state_dict\['0\."
                                                   r"input_scale'\]: .*got "
                                                   r"shape \(2,\)"):
                model.load_state_dict(theirs, strict=strict)
            assert model.state_dict().keys() == before.keys()
            for name, value in model.state_dict().items():
                assert torch.equal(raw(value), before[name]), name


def _corrupt_scale(fp8_layer, value):
    """Writes `value` into the layer's first weight scale, past every
    check (as a tool writing the tensor's memory would)."""
    fp8_layer.weight_scale.data.reshape(-1)[0] = value


@pytest.mark.parametrize("activations", ACTIVATIONS)
@pytest.mark.parametrize("mode", MODES)
def test_forward_errors_name_the_quantized_layer(activations, mode, seed):
    """The same exception type as without a name, its message prefixed by
    the layer's qualified name and sizes, in every forward path."""
    torch.manual_seed(seed % (2 ** 31))
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 48),
        torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(48, 8)))
    fpt.quantize(model, activations=activations)
    named = model[1][1]
    assert named.qualified_name == "1.1"
    x = torch.randn(5, 64)
    if mode == "meta":
        model, x = model.to("meta"), x.to("meta")
        wrong = x.to(torch.float64)
    else:
        _corrupt_scale(named, float("nan"))
        wrong = None
    if mode == "requires_grad":
        x.requires_grad_()
    prefix = r"^fp8q\.torch\.Linear '1\.1' \(in_features=48, out_features=8\): "
    if wrong is None:
        # The oracle for the type and the message's body: the same failure
        # of an unnamed copy of the layer.
        unnamed = copy.deepcopy(named)
        del unnamed.qualified_name
        with pytest.raises(Exception) as plain, _context(mode):
            unnamed(model[1][0](model[0](x)))
        assert "'1.1'" not in str(plain.value)
        with pytest.raises(type(plain.value), match=prefix + r"weight_scale"
                           r": every value must be finite and > 0"), \
                _context(mode):
            model(x)
    else:
        with pytest.raises(TypeError, match=prefix + r"x must be float32, "
                                                     r"float16 or bfloat16"), \
                _context(mode):
            model[1][1](wrong[:, :48])


def test_loaded_layers_carry_their_names_into_errors():
    from checkpoint_layouts import layout, tiny

    state, _ = layout("comfy-scaled", tiny())
    model = tiny(seed=1)
    fpt.load_checkpoint(model, state)
    assert [module.qualified_name for module in model.modules()
            if isinstance(module, fpt.Linear)] == ["proj", "out", "head"]
    _corrupt_scale(model.out, -1.0)
    with pytest.raises(ValueError, match=r"^fp8q\.torch\.Linear 'out' "
                                         r"\(in_features=130, out_features"
                                         r"=200\): weight_scale: every value"
                                         r" must be finite and > 0"), \
            torch.no_grad():
        model(torch.randn(3, 40))
