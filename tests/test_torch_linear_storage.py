"""fp8q.torch.Linear is an nn.Linear whose FP8 weight and float32 scales are
parameters that never require grad: the state dict keeps today's names,
dtypes and shapes (vLLM / compressed-tensors), and what nn.Linear tooling
does to a float weight (initialisation, a second quantize, a loader's dtype
conversion, weight tying, optimizers) never corrupts the FP8 codes."""
import warnings

import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: pip install torch to run the "
                    "fp8q.torch tests")

import fp8q  # noqa: E402
import fp8q.torch as fpt  # noqa: E402
from fp8q.torch import _linear  # noqa: E402

GRANULARITIES = ["row", "tensor", "block"]
SCALE_SHAPES = {"row": (160, 1), "tensor": (), "block": (2, 2)}


def float_model(seed):
    torch.manual_seed(seed % (2 ** 31))
    return torch.nn.Sequential(torch.nn.Linear(200, 160), torch.nn.ReLU(),
                               torch.nn.Linear(160, 40, bias=False))


def fp8q_quantize(weight, granularity):
    """(codes, scale) by fp8q's public quantize: the independent oracle."""
    blocks = {"row": "row", "tensor": "tensor", "block": (128, 128)}
    q = fp8q.quantize(fpt.from_torch(weight.detach().contiguous()),
                      "float8_e4m3fn", granularity=blocks[granularity])
    return fpt.to_torch(q.data), fpt.to_torch(q.scale)


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_an_nn_linear_with_frozen_fp8_parameters(granularity, seed):
    model = fpt.quantize(float_model(seed), activations="e4m3",
                         granularity=granularity)
    layer = model[0]
    assert isinstance(layer, torch.nn.Linear)
    # Non-scalar tensors are frozen parameters; scalar scales are buffers
    # (FSDP2 refuses scalar parameters).
    parameters = dict(layer.named_parameters())
    scale_is_scalar = granularity == "tensor"
    assert sorted(parameters) == (["bias", "weight"] if scale_is_scalar
                                  else ["bias", "weight", "weight_scale"])
    assert not any(p.requires_grad for p in parameters.values())
    assert [name for name, _ in layer.named_buffers()] == (
        ["weight_scale"] if scale_is_scalar else [])
    if granularity != "block":  # static activation scales
        with fpt.calibrate(model), torch.no_grad():
            model(torch.randn(4, 200))
        fpt.freeze(model)
    # Today's state dict, exactly: names, dtypes, shapes.
    layout = {name: (tensor.dtype, tuple(tensor.shape))
              for name, tensor in model.state_dict().items()}
    static = {} if granularity == "block" else {
        "0.input_scale": (torch.float32, ()),
        "2.input_scale": (torch.float32, ())}
    assert layout == {
        **static,
        "0.weight": (torch.float8_e4m3fn, (160, 200)),
        "0.weight_scale": (torch.float32, SCALE_SHAPES[granularity]),
        "0.bias": (torch.float32, (160,)),
        "2.weight": (torch.float8_e4m3fn, (40, 160)),
        "2.weight_scale": (torch.float32,
                           {"row": (40, 1), "tensor": (),
                            "block": (1, 2)}[granularity])}
    if granularity != "block":
        assert "input_scale" in dict(model[0].named_buffers())


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_a_checkpoint_written_by_hand_loads_bit_for_bit(granularity, seed):
    """The state dict as vLLM and compressed-tensors write it (and as
    fp8q wrote it with buffers) loads into a freshly quantized model."""
    source = float_model(seed)
    checkpoint = {}
    for index in (0, 2):
        codes, scale = fp8q_quantize(source[index].weight, granularity)
        checkpoint[f"{index}.weight"] = codes
        checkpoint[f"{index}.weight_scale"] = scale
    checkpoint["0.bias"] = source[0].bias.detach().clone()
    model = fpt.quantize(float_model(seed + 1), granularity=granularity)
    model.load_state_dict(checkpoint)
    for name, tensor in model.state_dict().items():
        assert same_bits(tensor, checkpoint[name]), name
    x = torch.randn(3, 200)
    dequantized = float_model(seed)
    with torch.no_grad():
        for index in (0, 2):
            dequantized[index].weight.copy_(
                model[index].weight.float() * model[index].weight_scale
                if granularity != "block" else
                fpt.to_torch(fp8q.QTensor(
                    fpt.from_torch(model[index].weight),
                    fpt.from_torch(model[index].weight_scale),
                    (128, 128)).dequantize("float32")))
        assert torch.allclose(model(x), dequantized(x), rtol=1e-5,
                              atol=1e-5), f"seed={seed}"


def test_from_fp8_holds_the_given_tensors(seed):
    torch.manual_seed(seed % (2 ** 31))
    codes, scale = fp8q_quantize(torch.randn(160, 200), "row")
    bias = torch.randn(160, dtype=torch.bfloat16)
    layer = fpt.Linear.from_fp8(codes, scale, bias, activations="e4m3")
    assert layer.weight.data_ptr() == codes.data_ptr()
    assert layer.weight_scale.data_ptr() == scale.data_ptr()
    assert layer.compute_dtype == torch.bfloat16
    assert (layer.in_features, layer.out_features) == (200, 160)
    with pytest.raises(ValueError, match="weight_scale has shape"):
        fpt.Linear.from_fp8(codes, scale.reshape(-1), granularity="row")
    with pytest.raises(ValueError, match="2-D float8_e4m3fn"):
        fpt.Linear.from_fp8(codes.float(), scale)


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_reset_parameters_quantizes_nn_linears_initialisation(granularity,
                                                              seed):
    layer = fpt.Linear(200, 160, granularity=granularity, device="meta")
    layer.to_empty(device="cpu")
    torch.manual_seed(seed % (2 ** 31))
    layer.reset_parameters()
    torch.manual_seed(seed % (2 ** 31))
    reference = torch.nn.Linear(200, 160)  # nn.Linear's initialisation
    codes, scale = fp8q_quantize(reference.weight, granularity)
    assert same_bits(layer.weight, codes) and same_bits(layer.weight_scale,
                                                        scale)
    assert torch.equal(layer.bias, reference.bias.detach())
    assert not layer.weight.requires_grad


def test_what_treats_the_layer_as_float_leaves_the_codes_alone(seed):
    model = fpt.quantize(float_model(seed))
    layer = model[0]
    before = {name: tensor.clone() for name, tensor in
              model.state_dict().items()}
    # torch.nn.init on FP8 codes: torch refuses (no FP8 kernel).
    with pytest.raises(NotImplementedError):
        torch.nn.init.normal_(layer.weight)
    # A second quantize leaves quantized layers as they are.
    assert fpt.quantize(model, include=["0"]) is model and model[0] is layer
    with pytest.raises(ValueError, match="already an fp8q.torch.Linear"):
        fpt.Linear.from_linear(layer)
    # requires_grad_ on the model, then an optimizer step: no FP8 code or
    # scale receives a gradient, so none moves.
    model.requires_grad_(True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(2, 200)).square().sum().backward()
    assert layer.weight.grad is None and layer.weight_scale.grad is None
    optimizer.step()
    for name, tensor in model.state_dict().items():
        if not name.endswith("bias"):
            assert same_bits(tensor, before[name]), name


def test_a_storage_parameter_of_another_dtype_is_refused(seed):
    model = fpt.quantize(float_model(seed))
    layer = model[2]
    with pytest.raises(ValueError, match=r"fp8q.torch.Linear '2': weight "
                                         r"must stay torch.float8_e4m3fn"):
        layer.weight = torch.nn.Parameter(layer.weight.to(torch.bfloat16),
                                          requires_grad=False)
    with pytest.raises(ValueError, match="weight_scale must stay "
                                         "torch.float32, got torch.bfloat16"):
        # As accelerate's set_module_tensor_to_device writes it.
        layer._parameters["weight_scale"] = torch.nn.Parameter(
            layer.weight_scale.to(torch.bfloat16), requires_grad=False)
    assert layer.weight.dtype == torch.float8_e4m3fn
    assert layer.weight_scale.dtype == torch.float32
    model.to(torch.bfloat16)  # converts the bias only (no layer 2 bias)
    assert model[0].compute_dtype == torch.bfloat16
    assert model[0].weight.dtype == torch.float8_e4m3fn


def test_a_float_weight_tied_or_resized_in_is_refused_naming_the_fix(seed):
    # The message blamed a loader's dtype= conversion whatever set it.
    model = fpt.quantize(float_model(seed))
    layer = model[2]
    codes = layer.weight.detach().clone()
    # Tying the layer to a float weight (as transformers' tie_weights ties
    # lm_head to the input embeddings), or a resize assigning a new one.
    with pytest.raises(ValueError) as error:
        layer.weight = torch.nn.Parameter(torch.randn(40, 160))
    message = str(error.value)
    assert "fp8q.torch.Linear '2': weight must stay" in message
    for cause in ("tie_weights()", "resize_token_embeddings",
                  "load_checkpoint_and_dispatch(dtype=...)",
                  "exclude=['2']", "before quantizing"):
        assert cause in message, cause
    assert same_bits(layer.weight, codes)
    # A scale is not tied or resized: the loader and assignment only.
    with pytest.raises(ValueError, match="a loader converting every "
                       "floating tensor .* or an assignment") as error:
        layer._parameters["weight_scale"] = torch.nn.Parameter(
            layer.weight_scale.to(torch.bfloat16), requires_grad=False)
    assert "tie_weights" not in str(error.value)


def test_transformers_tie_weights_over_a_quantized_lm_head_says_so(seed):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed % (2 ** 31))
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, vocab_size=64,
        tie_word_embeddings=True))
    quantized = fpt.quantize(model)
    assert isinstance(quantized.lm_head, fpt.Linear)
    with pytest.raises(ValueError, match=r"'lm_head': weight must stay(.|\n)*"
                       r"weight tying(.|\n)*exclude=\['lm_head'\]"):
        quantized.tie_weights()
    assert quantized.lm_head.weight.dtype == torch.float8_e4m3fn


def test_a_trainable_fp8_weight_is_warned_about_once(seed, monkeypatch):
    # model.requires_grad_(True) marked the FP8 weights trainable silently:
    # they never get a gradient, so a "full fine-tune" trained the float
    # parameters only.
    monkeypatch.setattr(_linear, "_warned_trainable_weight", False)
    model = fpt.quantize(float_model(seed))
    x = torch.randn(2, 200)
    model[0].bias.requires_grad_(True)  # a float parameter: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model(x).sum().backward()
        with torch.no_grad():
            model.requires_grad_(True)(x)  # nothing to train
    with pytest.warns(UserWarning, match=r"fp8q.torch.Linear '0' .*FP8 "
                      r"weight requires grad.*never get a gradient"):
        model(x).sum().backward()
    assert model[0].weight.grad is None and model[2].weight.grad is None
    with warnings.catch_warnings():  # once per process
        warnings.simplefilter("error")
        model(x).sum().backward()
