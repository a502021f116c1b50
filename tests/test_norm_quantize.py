"""The fused norm + per-token FP8 quantize (torch.ops.fp8q.norm_quantize,
csrc/core/norm_quantize.c) and fp8q.torch.quantize(..., fuse_norms=True):
the norm against a float64 NumPy oracle, the codes and scales against
ml_dtypes' casts of the norm's own output (bit for bit), NaN rows, the
W8A8 layers taking the codes (same bits as quantizing themselves), and a
tiny transformers Llama quantized with and without fusion."""
import copy
import logging

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: pip install torch to run the "
                    "fp8q.torch tests")

import fp8q  # noqa: E402
import fp8q.torch as fpt  # noqa: E402
from fp8q.torch import _fused_norm  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# One unit in the last place of each dtype's significand, relative: the
# norm's output is rounded once into x's dtype (half of this) after float32
# arithmetic whose error is a few float32 units.
RELATIVE_BOUND = {torch.float32: 8 * 2.0 ** -23, torch.float16: 2.0 ** -10,
                  torch.bfloat16: 2.0 ** -7}


def oracle(x, weight, bias, epsilon, layer_norm):
    """float64 NumPy RMSNorm / LayerNorm of x's rows."""
    values = x.double().numpy()
    mean = values.mean(-1, keepdims=True) if layer_norm else 0.0
    centred = values - mean
    spread = (centred * centred).mean(-1, keepdims=True)
    result = centred / np.sqrt(spread + epsilon) * weight.double().numpy()
    if bias is not None:
        result = result + bias.double().numpy()
    return result


def inputs(seed, shape, dtype, layer_norm):
    generator = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=generator) * 3 + 0.5).to(dtype)
    weight = (torch.rand(shape[-1], generator=generator) + 0.5).to(dtype)
    bias = (torch.randn(shape[-1], generator=generator).to(dtype)
            if layer_norm else None)
    return x, weight, bias


def expected_codes(normed):
    """(codes as uint8, scale) of normed per row: scale = float32(amax) /
    448 (1 for a zero row), codes = ml_dtypes' e4m3fn of the float32
    quotient."""
    values = normed.float().numpy().reshape(-1, normed.shape[-1])
    amax = np.abs(values).max(-1, keepdims=True).astype(np.float32)
    scale = np.where(amax == 0, np.float32(1),
                     amax / np.float32(448)).astype(np.float32)
    with np.errstate(invalid="ignore"):
        codes = (values / scale).astype(np.float32).astype(
            ml_dtypes.float8_e4m3fn)
    return codes.view(np.uint8), scale


@pytest.mark.parametrize("layer_norm", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 1), (7, 100), (2, 3, 4096)])
def test_norm_and_codes_match_the_oracles(shape, dtype, layer_norm, seed):
    # The seed fixture's (fixed per test id), not hash() of the parameters:
    # str hashes are salted per process (PYTHONHASHSEED), so that seed
    # changed on every run.
    x, weight, bias = inputs(seed, shape, dtype, layer_norm)
    epsilon = 1e-5
    normed, codes, scale = torch.ops.fp8q.norm_quantize(
        x, weight, bias, epsilon, layer_norm)
    assert normed.dtype == dtype and normed.shape == x.shape
    assert codes.dtype == torch.float8_e4m3fn and codes.shape == x.shape
    assert scale.dtype == torch.float32 and scale.shape == (*shape[:-1], 1)
    reference = oracle(x, weight, bias, epsilon, layer_norm)
    error = np.abs(normed.double().numpy() - reference)
    bound = RELATIVE_BOUND[dtype] * np.abs(reference) + 1e-6
    assert (error <= bound).all(), (f"seed={seed}",
                                    float((error - bound).max()))
    want_codes, want_scale = expected_codes(normed)
    np.testing.assert_array_equal(
        codes.view(torch.uint8).numpy().reshape(want_codes.shape),
        want_codes, err_msg=f"seed={seed}")
    np.testing.assert_array_equal(scale.numpy().reshape(-1, 1), want_scale)


def test_codes_are_fp8q_quantize_of_the_output():
    x, weight, _ = inputs(5, (9, 300), torch.bfloat16, False)
    normed, codes, scale = torch.ops.fp8q.norm_quantize(
        x, weight, None, 1e-6, False)
    quantized = fp8q.quantize(fpt.from_torch(normed), "float8_e4m3fn",
                                  granularity="row")
    assert torch.equal(fpt.to_torch(quantized.data).view(torch.uint8),
                       codes.view(torch.uint8))
    assert torch.equal(fpt.to_torch(quantized.scale), scale)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_non_finite_token_gives_a_nan_scale_in_its_row_only(bad):
    x, weight, _ = inputs(11, (6, 64), torch.float16, False)
    clean = torch.ops.fp8q.norm_quantize(x, weight, None, 1e-6, False)
    x[3, 17] = bad
    normed, codes, scale = torch.ops.fp8q.norm_quantize(
        x, weight, None, 1e-6, False)
    assert torch.isnan(scale[3]).all()
    assert torch.isnan(codes[3].float()).any()
    others = [0, 1, 2, 4, 5]
    assert torch.equal(scale[others], clean[2][others])
    assert torch.equal(codes[others].view(torch.uint8),
                       clean[1][others].view(torch.uint8))
    assert torch.equal(normed[others], clean[0][others])


def test_the_fake_implementation_gives_shapes_and_dtypes():
    x = torch.empty((2, 5, 32), dtype=torch.bfloat16, device="meta")
    weight = torch.empty(32, dtype=torch.bfloat16, device="meta")
    normed, codes, scale = torch.ops.fp8q.norm_quantize(
        x, weight, None, 1e-6, False)
    assert (normed.shape, normed.dtype) == (x.shape, torch.bfloat16)
    assert (codes.shape, codes.dtype) == (x.shape, torch.float8_e4m3fn)
    assert (scale.shape, scale.dtype) == ((2, 5, 1), torch.float32)


def test_wrong_arguments_are_refused():
    x, weight, _ = inputs(1, (4, 16), torch.float32, False)
    with pytest.raises(ValueError, match="weight"):
        torch.ops.fp8q.norm_quantize(x, weight[:8], None, 1e-6, False)
    with pytest.raises(ValueError, match="epsilon"):
        torch.ops.fp8q.norm_quantize(x, weight, None, -1.0, False)


@pytest.mark.parametrize("layer_norm", [False, True])
def test_the_one_crossing_form_makes_its_outputs(layer_norm):
    """_C.norm_quantize(x, weight, bias, epsilon, layer_norm) with torch
    tensors returns torch tensors (from torch's allocator, in C) with the
    bits the 9-argument form writes into given ones; with NumPy arrays,
    fp8q Tensors with the same bits."""
    x, weight, bias = inputs(12, (2, 3, 40), torch.bfloat16, layer_norm)
    normed, codes, scale = fp8q._C.norm_quantize(x, weight, bias, 1e-5,
                                                 layer_norm)
    assert all(type(t) is torch.Tensor for t in (normed, codes, scale))
    assert (normed.dtype, normed.shape) == (torch.bfloat16, x.shape)
    assert (codes.dtype, codes.shape) == (torch.float8_e4m3fn, x.shape)
    assert (scale.dtype, scale.shape) == (torch.float32, (2, 3, 1))
    given = (torch.full_like(x, 7.0),
             torch.zeros(x.shape, dtype=torch.float8_e4m3fn),
             torch.full((2, 3, 1), 7.0))
    fp8q._C.norm_quantize(
        fpt.from_torch(x), fpt.from_torch(weight),
        None if bias is None else fpt.from_torch(bias),
        *(fpt.from_torch(t) for t in given), 1e-5, layer_norm, None)
    assert torch.equal(normed.view(torch.int16), given[0].view(torch.int16))
    assert torch.equal(codes.view(torch.uint8), given[1].view(torch.uint8))
    assert torch.equal(scale, given[2])
    arrays = fp8q._C.norm_quantize(
        x.float().numpy(), weight.float().numpy(),
        None if bias is None else bias.float().numpy(), 1e-5, layer_norm)
    assert all(isinstance(t, fp8q.Tensor) for t in arrays)
    again = fp8q._C.norm_quantize(x.float(), weight.float(),
                                  None if bias is None else bias.float(),
                                  1e-5, layer_norm)
    assert np.array_equal(np.asarray(arrays[0]), again[0].numpy())
    assert np.array_equal(np.asarray(arrays[1]).view(np.uint8),
                          again[1].view(torch.uint8).numpy())
    assert np.array_equal(np.asarray(arrays[2]), again[2].numpy())
    with pytest.raises(TypeError, match="5 or 9 positional arguments"):
        fp8q._C.norm_quantize(x, weight, bias, 1e-5)


@pytest.mark.parametrize("output", ["normed", "codes", "scale"])
def test_read_only_outputs_are_refused(output):
    """_C.norm_quantize writes normed, codes and scale: a read-only array
    for any of them is a ValueError naming it (nothing written)."""
    x = np.random.default_rng(11).standard_normal((4, 16)).astype(np.float32)
    weight = np.ones(16, np.float32)
    outputs = {"normed": np.full_like(x, 7.0),
               "codes": np.zeros((4, 16), ml_dtypes.float8_e4m3fn),
               "scale": np.full((4, 1), 7.0, np.float32)}
    outputs[output].flags.writeable = False
    with pytest.raises(ValueError, match=f"{output} is an output and must "
                                         "be writable"):
        fp8q._C.norm_quantize(x, weight, None, *outputs.values(), 1e-6,
                              False, None)
    assert (outputs["normed"] == 7.0).all()
    assert (outputs["scale"] == 7.0).all()


@pytest.mark.parametrize("output, other", [("scale", "x"), ("normed", "x"),
                                           ("codes", "normed"),
                                           ("scale", "weight")])
def test_outputs_sharing_memory_are_refused(output, other):
    """An output in the memory of an input or of another output is a
    ValueError naming both, nothing written: a row's scale written into a
    row of x not yet read changed that row's result."""
    x = np.random.default_rng(12).standard_normal((4, 16)).astype(np.float32)
    arrays = {"x": x.copy(), "weight": np.ones(16, np.float32),
              "normed": np.full((4, 16), 7.0, np.float32),
              "codes": np.zeros((4, 16), ml_dtypes.float8_e4m3fn),
              "scale": np.full((4, 1), 7.0, np.float32)}
    inside = arrays[other].reshape(-1).view(np.uint8)
    size = arrays[output].nbytes
    arrays[output] = inside[:size].view(arrays[output].dtype).reshape(
        arrays[output].shape)
    with pytest.raises(ValueError, match=f"^norm_quantize: {output} must "
                       f"not share memory with {other}$"):
        fp8q._C.norm_quantize(arrays["x"], arrays["weight"], None,
                              arrays["normed"], arrays["codes"],
                              arrays["scale"], 1e-6, False, None)


# ---------------------------------------------------------------------------
# The W8A8 layers taking the codes


def fp8_layer(seed, in_features=64, out_features=48, dtype=torch.float32):
    torch.manual_seed(seed)
    layer = fpt.Linear.from_linear(
        torch.nn.Linear(in_features, out_features).to(dtype),
        activations="e4m3")
    layer.reads_quantized_input = True
    return layer


def fused_output(x, weight):
    """A fused norm's output: normed carrying its codes and scale."""
    normed, codes, scale = torch.ops.fp8q.norm_quantize(
        x, weight, None, 1e-6, False)
    setattr(normed, _fused_norm.HANDOFF, (normed._version, codes, scale))
    return normed, codes, scale


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_layer_taking_the_codes_computes_the_same_bits(dtype):
    x, weight, _ = inputs(21, (5, 64), dtype, False)
    layer = fp8_layer(21, dtype=dtype)
    normed, codes, scale = fused_output(x, weight)
    with torch.no_grad():
        from_codes = layer(normed)
        by_itself = layer(normed.clone())  # no handoff: quantizes itself
        # The codes are what the layer reads: poisoned ones change it.
        setattr(normed, _fused_norm.HANDOFF,
                (normed._version, torch.zeros_like(codes), scale))
        poisoned = layer(normed)
    assert torch.equal(from_codes, by_itself)
    assert torch.equal(poisoned, torch.zeros_like(poisoned) + layer.bias)


def given_codes_error(codes, scale, m=4, k=64):
    """The ValueError message of a W8A8 layer's call given (codes, scale)
    for x of m x k float32 values."""
    layer = fp8_layer(24, in_features=k)
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(24))
    with pytest.raises(ValueError) as caught, torch.no_grad():
        fpt._ops.fp8_forward(x, layer.weight, layer.weight_scale, layer.bias,
                             None, "row", (codes, scale))
    return str(caught.value)


def test_given_codes_of_another_shape_dtype_or_layout_are_refused():
    fp8 = torch.float8_e4m3fn
    codes = torch.zeros(4, 64, dtype=fp8)
    scale = torch.ones(4, 1)
    assert "codes must be float8_e4m3fn, got float32" in given_codes_error(
        codes.float(), scale)
    assert "scale must be float32, got float16" in given_codes_error(
        codes, scale.half())
    # The same number of values in another shape: (8, 32) is not x's rows.
    assert "codes must have x's 4 rows of 64 values" in given_codes_error(
        codes.reshape(8, 32), scale)
    assert "scale must have x's 4 rows of 1 values" in given_codes_error(
        codes, scale.reshape(1, 4))
    assert "codes must be C-contiguous" in given_codes_error(
        torch.zeros(64, 4, dtype=fp8).t(), scale)
    # One byte past a 16-byte boundary: the FP8 GEMM cannot read it.
    shifted = torch.zeros(4 * 64 + 16, dtype=fp8)[1:4 * 64 + 1].view(4, 64)
    assert "codes must start on a 16-byte boundary" in given_codes_error(
        shifted, scale)
    # Leading axes as x's (a (2, 2, 64) x's rows) are accepted.
    layer = fp8_layer(24)
    x = torch.randn(2, 2, 64, generator=torch.Generator().manual_seed(25))
    normed, codes, scale = fused_output(x, torch.ones(64))
    with torch.no_grad():
        assert torch.equal(layer(normed), layer(normed.clone()))


def test_a_modified_output_is_quantized_again():
    x, weight, _ = inputs(22, (4, 64), torch.float32, False)
    layer = fp8_layer(22)
    normed, codes, scale = fused_output(x, weight)
    setattr(normed, _fused_norm.HANDOFF,
            (normed._version, torch.zeros_like(codes), scale))
    with torch.no_grad():
        normed.mul_(2)  # bumps the version: the codes no longer describe it
        assert torch.equal(layer(normed), layer(normed.clone()))


def test_a_nan_token_gives_a_nan_row_through_the_codes():
    x, weight, _ = inputs(23, (5, 64), torch.float32, False)
    x[2, 5] = float("nan")
    layer = fp8_layer(23)
    normed, _, _ = fused_output(x, weight)
    with torch.no_grad():
        y = layer(normed)
        expected = layer(normed.clone())
    assert torch.isnan(y[2]).all()
    rows = [0, 1, 3, 4]
    assert torch.equal(y[rows], expected[rows])


# ---------------------------------------------------------------------------
# quantize(fuse_norms=True) on a transformers Llama


def tiny_llama(dtype=torch.float32):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    return transformers.LlamaForCausalLM(config).to(dtype).eval()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_llama_with_fused_norms_gives_the_same_logits(dtype, caplog):
    model = tiny_llama(dtype)
    unfused = fpt.quantize(copy.deepcopy(model), activations="e4m3")
    with caplog.at_level(logging.INFO, logger="fp8q.torch"):
        fused = fpt.quantize(copy.deepcopy(model), activations="e4m3",
                             fuse_norms=True)
    summary = caplog.records[-1].fp8q_summary
    assert summary.fused_norms == tuple(
        f"model.layers.{i}.{name}" for i in range(2)
        for name in ("input_layernorm", "post_attention_layernorm"))
    assert "norms fused with the activation quantize: 4" in str(summary)
    assert fused.model.norm.__class__.__name__ == "LlamaRMSNorm"
    assert set(fused.state_dict()) == set(unfused.state_dict())
    ids = torch.randint(0, 128, (2, 9), generator=torch.Generator()
                        .manual_seed(1))
    with torch.no_grad():
        want = unfused(ids).logits.double()
        got = fused(ids).logits.double()
    # The fused norm rounds once from float32 where transformers' rounds
    # in x's dtype twice (and sums in another order): a token's FP8 codes
    # may move by one step, so the logits agree within the FP8 error.
    tolerance = {torch.float32: 1e-4, torch.bfloat16: 0.1}[dtype]
    assert (got - want).abs().max() <= tolerance * want.abs().max()


def test_fuse_norms_needs_per_token_activations():
    model = tiny_llama()
    with pytest.raises(ValueError, match="fuse_norms"):
        fpt.quantize(model, fuse_norms=True)
    with pytest.raises(ValueError, match="fuse_norms"):
        fpt.quantize(model, activations="e4m3", granularity="block",
                     fuse_norms=True)


def test_inference_mode_takes_the_codes_too():
    """Inference tensors have no version counter: the handoff still works
    (the bench and generate() run under torch.inference_mode)."""
    model = tiny_llama()
    unfused = fpt.quantize(copy.deepcopy(model), activations="e4m3")
    fused = fpt.quantize(copy.deepcopy(model), activations="e4m3",
                         fuse_norms=True)
    ids = torch.randint(0, 128, (1, 5), generator=torch.Generator()
                        .manual_seed(2))
    with torch.inference_mode():
        normed = fused.model.layers[0].input_layernorm(
            fused.model.embed_tokens(ids))
        assert _fused_norm.quantized_input(normed) is not None
        want, got = unfused(ids).logits, fused(ids).logits
    assert (got - want).abs().max() <= 1e-4 * want.abs().max()


def test_norms_that_compute_otherwise_are_left_unfused():
    """Gemma's RMSNorm multiplies by 1 + weight: the probe sees it and
    leaves it in float (no fusion, no error); a meta-device model fuses
    nothing either."""
    model = tiny_llama()
    for layer in model.model.layers:
        norm = layer.input_layernorm
        norm.forward = (lambda x, norm=norm: torch.nn.functional.rms_norm(
            x, (x.shape[-1],), 1 + norm.weight, norm.variance_epsilon))
    assert _fused_norm._plain_rms_norm(model.model.layers[0]
                                       .input_layernorm) is False
    with torch.device("meta"):
        meta_norm = type(model.model.norm)(64)
    assert _fused_norm.norm_parameters(meta_norm) is None
    assert "probing it on one row failed" in _fused_norm.unfusable_reason(
        meta_norm)


def test_the_summary_names_the_norms_left_unfused_and_why(caplog):
    """A norm in the pattern's place that stays unfused is reported with
    its reason: a norm that computes otherwise (the probe), a norm whose
    probe cannot run, and one whose following layer was excluded."""
    model = tiny_llama()
    gemma_like = model.model.layers[0].input_layernorm
    type_name = type(gemma_like).__name__
    gemma_like.__class__ = type(type_name, (type(gemma_like),), {
        "forward": lambda self, x: torch.nn.functional.rms_norm(
            x, (x.shape[-1],), 1 + self.weight, self.variance_epsilon)})
    failing = model.model.layers[1].input_layernorm
    failing.__class__ = type(type_name, (type(failing),), {
        "forward": lambda self, x: (_ for _ in ()).throw(
            RuntimeError("no kernel for this norm"))})
    with caplog.at_level(logging.INFO, logger="fp8q.torch"):
        fpt.quantize(model, activations="e4m3", fuse_norms=True,
                     exclude="model.layers.1.mlp.up_proj")
    summary = caplog.records[-1].fp8q_summary
    assert summary.fused_norms == ("model.layers.0.post_attention_layernorm",)
    reasons = dict(summary.unfused_norms)
    assert list(reasons) == ["model.layers.0.input_layernorm",
                             "model.layers.1.input_layernorm",
                             "model.layers.1.post_attention_layernorm"]
    assert "does not compute x * rsqrt" in reasons[
        "model.layers.0.input_layernorm"]
    assert ("probing it on one row failed (RuntimeError: no kernel for this "
            "norm)") == reasons["model.layers.1.input_layernorm"]
    assert reasons["model.layers.1.post_attention_layernorm"] == (
        "mlp.up_proj is not an fp8q W8A8 layer with dynamic per-token "
        "activations")
    text = str(summary)
    assert "norms left unfused: 3 (model.layers.0.input_layernorm: " in text


# ---------------------------------------------------------------------------
# Fused norms with calibration, hooks, accelerate, extra arguments, pickling


def fused_and_unfused(seed=3):
    model = tiny_llama()
    unfused = fpt.quantize(copy.deepcopy(model), activations="e4m3")
    fused = fpt.quantize(copy.deepcopy(model), activations="e4m3",
                         fuse_norms=True)
    ids = torch.randint(0, 128, (2, 7), generator=torch.Generator()
                        .manual_seed(seed))
    return unfused, fused, ids


def test_calibrated_and_frozen_fused_model_uses_its_static_scales():
    """After calibrate + freeze the layers have input_scale: they quantize
    with it (the fused norm's per-token codes do not apply), as the same
    model quantized without fusion does; a state_dict with input_scale
    loaded into a fresh fused model too."""
    unfused, fused, ids = fused_and_unfused(4)
    for model in (unfused, fused):
        with torch.no_grad(), fpt.calibrate(model):
            model(ids)
        fpt.freeze(model)
    assert fused.model.layers[0].self_attn.q_proj.input_scale is not None
    with torch.no_grad():
        want = unfused(ids).logits
        got = fused(ids).logits
    assert (got - want).abs().max() <= 1e-4 * want.abs().max()
    _, fresh, _ = fused_and_unfused(4)
    fresh.load_state_dict(fused.state_dict())
    with torch.no_grad():
        assert torch.equal(fresh(ids).logits, got)


def check_hooked_models(unfused, fused, ids, mode, handles):
    """Runs both models on ids under `mode` ("inference_mode" or "no_grad")
    with their hooks, removes the hooks (`handles`), asserts the fused
    logits are the unfused ones within float32 rounding (a hook's in-place
    effect missed differs by far more), and returns the output of the fused
    model's layer-1 input norm on the embeddings."""
    try:
        context = (torch.inference_mode() if mode == "inference_mode"
                   else torch.no_grad())
        with context:
            want = unfused(ids).logits
            got = fused(ids).logits
            plain = fused.model.layers[1].input_layernorm(
                fused.model.embed_tokens(ids))
    finally:
        for handle in handles:
            handle.remove()
    assert (got - want).abs().max() <= 1e-4 * want.abs().max()
    return plain


@pytest.mark.parametrize("mode", ["inference_mode", "no_grad"])
@pytest.mark.parametrize("where", ["module", "module_kwargs", "global"])
def test_an_in_place_forward_hook_on_the_norm_is_seen(mode, where):
    """A forward hook that scales the norm's output in place: the layers
    read the scaled output (as the unfused model with the same hook), not
    codes of the unscaled one."""
    unfused, fused, ids = fused_and_unfused(5)

    def hook(module, args, *rest):
        rest[-1].mul_(3)

    handles = []
    for model in (unfused, fused):
        norm = model.model.layers[0].input_layernorm
        if where == "module":
            handles.append(norm.register_forward_hook(hook))
        elif where == "module_kwargs":
            handles.append(norm.register_forward_hook(hook, with_kwargs=True))
    if where == "global":
        handles.append(torch.nn.modules.module.register_module_forward_hook(
            lambda module, args, output: (
                output.mul_(3) if module is unfused.model.layers[0]
                .input_layernorm or module is fused.model.layers[0]
                .input_layernorm else None)))
    plain = check_hooked_models(unfused, fused, ids, mode, handles)
    # The norms without hooks still hand over their codes (a global hook
    # could change any norm's output: none does under inference_mode).
    assert (_fused_norm.quantized_input(plain) is None) == (
        where == "global" and mode == "inference_mode")


@pytest.mark.parametrize("mode", ["inference_mode", "no_grad"])
@pytest.mark.parametrize("where", ["attention_pre_hook", "reader_pre_hook",
                                   "reader_hook", "global_pre_hook"])
def test_an_in_place_hook_before_the_readers_is_seen(mode, where):
    """A hook between the norm and its readers that scales the norm's
    output in place (activation steering): a pre-hook of self_attn or of
    q_proj, a forward hook of q_proj (k_proj and v_proj read after it), a
    global pre-hook. The layers read the scaled output, as the unfused
    model with the same hook; under inference_mode (no version counter)
    the q/k/v layers used the stale codes of the unscaled output."""
    unfused, fused, ids = fused_and_unfused(6)

    def scale_input(module, args, *rest):
        (args[0] if args else rest[0]["hidden_states"]).mul_(2)

    handles = []
    for model in (unfused, fused):
        attention = model.model.layers[0].self_attn
        if where == "attention_pre_hook":
            handles.append(attention.register_forward_pre_hook(
                scale_input, with_kwargs=True))
        elif where == "reader_pre_hook":
            handles.append(attention.q_proj.register_forward_pre_hook(
                scale_input))
        elif where == "reader_hook":
            handles.append(attention.q_proj.register_forward_hook(
                lambda module, args, output: args[0].mul_(2)))
    if where == "global_pre_hook":
        layers = (unfused.model.layers[0].self_attn.q_proj,
                  fused.model.layers[0].self_attn.q_proj)
        handles.append(
            torch.nn.modules.module.register_module_forward_pre_hook(
                lambda module, args: (args[0].mul_(2)
                                      if module in layers else None)))
    plain = check_hooked_models(unfused, fused, ids, mode, handles)
    # Layer 1's norm, with no hook on its way, still hands its codes over
    # (a global pre-hook could change any norm's output under
    # inference_mode: then none does).
    assert (_fused_norm.quantized_input(plain) is None) == (
        where == "global_pre_hook" and mode == "inference_mode")


def test_a_forward_hook_after_the_reads_keeps_the_handoff():
    """A forward hook of self_attn runs after q/k/v have read the norm's
    output (transformers installs one on every self_attn for
    output_attentions): under inference_mode the norm still hands its
    codes over."""
    _, fused, ids = fused_and_unfused(7)
    layer = fused.model.layers[0]
    handle = layer.self_attn.register_forward_hook(
        lambda module, args, output: None)
    try:
        with torch.inference_mode():
            normed = layer.input_layernorm(fused.model.embed_tokens(ids))
    finally:
        handle.remove()
    assert _fused_norm.quantized_input(normed) is not None


def test_an_accelerate_hooked_norm_is_fused_through_its_old_forward():
    """accelerate's add_hook_to_module sets an instance forward that calls
    _old_forward: fusing re-points _old_forward at the fused forward. A
    norm with another instance forward is left unfused and unreported."""
    hooks = pytest.importorskip("accelerate.hooks")
    model = tiny_llama()
    unfused = fpt.quantize(copy.deepcopy(model), activations="e4m3")
    for layer in model.model.layers:
        hooks.add_hook_to_module(layer.input_layernorm, hooks.ModelHook())
    other = model.model.layers[1].post_attention_layernorm
    other.forward = (lambda x, norm=other:
                     type(norm).forward(norm, x))
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("fp8q.torch")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        fused = fpt.quantize(model, activations="e4m3", fuse_norms=True)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert records[-1].fp8q_summary.fused_norms == (
        "model.layers.0.input_layernorm",
        "model.layers.0.post_attention_layernorm",
        "model.layers.1.input_layernorm")
    ids = torch.randint(0, 128, (1, 6), generator=torch.Generator()
                        .manual_seed(6))
    with torch.no_grad():
        norm = fused.model.layers[0].input_layernorm
        normed = norm(fused.model.embed_tokens(ids))
        assert _fused_norm.quantized_input(normed) is not None
        assert not isinstance(other, tuple(_fused_norm._FUSED_CLASSES
                                           .values()))
        want = unfused(ids).logits
        got = fused(ids).logits
    assert (got - want).abs().max() <= 1e-4 * want.abs().max()


def test_a_fused_norm_takes_the_arguments_of_its_own_forward():
    """Extra arguments go to the norm's own forward (no handoff)."""

    class ScaledRMSNorm(torch.nn.RMSNorm):
        def forward(self, x, factor=1.0):
            return super().forward(x) * factor

    torch.manual_seed(7)
    norm = ScaledRMSNorm(64, eps=1e-6)
    _fused_norm.fuse(norm)
    x = torch.randn(3, 64)
    with torch.no_grad():
        reference = torch.nn.functional.rms_norm(x, (64,), norm.weight, 1e-6)
        doubled = norm(x, 2.0)
        keyword = norm(x, factor=2.0)
        plain = norm(x)
    assert torch.equal(doubled, reference * 2.0)
    assert torch.equal(keyword, reference * 2.0)
    assert _fused_norm.quantized_input(doubled) is None
    assert _fused_norm.quantized_input(plain) is not None


def test_a_model_with_fused_norms_survives_torch_save(tmp_path):
    """torch.save(model) / torch.load: the same logits, norms still fused
    and handing over their codes; copy.deepcopy too."""
    _, fused, ids = fused_and_unfused(8)
    path = tmp_path / "model.pt"
    torch.save(fused, path)
    loaded = torch.load(path, weights_only=False)
    with torch.no_grad():
        want = fused(ids).logits
        for model in (loaded, copy.deepcopy(fused)):
            norm = model.model.layers[0].input_layernorm
            assert type(norm) is type(fused.model.layers[0].input_layernorm)
            assert torch.equal(model(ids).logits, want)
            normed = norm(model.model.embed_tokens(ids))
            assert _fused_norm.quantized_input(normed) is not None


@pytest.mark.parametrize("protocol", range(6))
def test_a_fused_norm_pickles_with_every_protocol(protocol):
    import pickle

    torch.manual_seed(9)
    norm = torch.nn.RMSNorm(32, eps=1e-6)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    _fused_norm.fuse(norm)
    loaded = pickle.loads(pickle.dumps(norm, protocol=protocol))
    assert type(loaded) is type(norm) and loaded._fp8q_norm == norm._fp8q_norm
    x = torch.randn(3, 32, generator=torch.Generator().manual_seed(10))
    with torch.no_grad():
        got = loaded(x)
        assert torch.equal(got, norm(x))
    assert _fused_norm.quantized_input(got) is not None
