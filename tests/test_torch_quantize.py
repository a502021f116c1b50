"""fp8q.torch: conversions, quantize(model) and the quantized Linear,
against float64 references built from the dequantized weights."""
import copy

import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: pip install torch to run the "
                    "fp8q.torch tests")

import fp8q  # noqa: E402
import fp8q.torch as fpt  # noqa: E402

GRANULARITIES = ["row", "tensor", "block"]


def mlp(seed, dtype=torch.float32):
    torch.manual_seed(seed % (2 ** 31))
    model = torch.nn.Sequential(
        torch.nn.Linear(200, 160), torch.nn.GELU(),
        torch.nn.Sequential(torch.nn.Linear(160, 96, bias=False)),
        torch.nn.Linear(96, 40))
    return model.to(dtype)


def dequantized_weight(layer):
    """float64 NumPy weight * scale, expanded per granularity."""
    weight = layer.weight.view(torch.uint8).numpy()
    codes = fp8q.asarray(weight).view(str(layer.weight.dtype).split(".")[-1])
    values = fp8q.cast(codes, "float32").numpy().astype(np.float64)
    scale = layer.weight_scale.numpy().astype(np.float64)
    if layer.granularity == "block":
        scale = np.repeat(np.repeat(scale, 128, 0), 128, 1)[
            :values.shape[0], :values.shape[1]]
    return values * scale


def test_import_fp8q_does_not_import_torch():
    import subprocess
    import sys
    code = ("import sys, fp8q\n"
            "assert fp8q.calib.MaxCalibrator is not None\n"
            "print('torch' in sys.modules)\n"
            "assert fp8q.torch.Linear is not None\n"
            "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["False", "True"]


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16",
                                  "float8_e4m3fn", "float8_e5m2"])
def test_conversions_are_zero_copy(name, rng):
    t = fp8q.cast(rng.standard_normal((3, 5)).astype(np.float32), name)
    x = fpt.to_torch(t)
    assert str(x.dtype) == f"torch.{name}" and tuple(x.shape) == (3, 5)
    assert x.data_ptr() == t.data_ptr
    back = fpt.from_torch(x)
    assert back.data_ptr == t.data_ptr and back.dtype.name == name
    with pytest.raises(TypeError, match="torch.Tensor"):
        fpt.from_torch(np.zeros(3))


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_weights_are_fp8q_quantize(granularity, seed):
    model = mlp(seed)
    reference = copy.deepcopy(model)
    fpt.quantize(model, granularity=granularity)
    block = (128, 128) if granularity == "block" else granularity
    for (name, layer), (_, original) in zip(
            [(n, m) for n, m in model.named_modules()
             if isinstance(m, fpt.Linear)],
            [(n, m) for n, m in reference.named_modules()
             if isinstance(m, torch.nn.Linear)]):
        q = fp8q.quantize(original.weight.detach().numpy(), "e4m3",
                          granularity=block)
        assert layer.weight.dtype == torch.float8_e4m3fn
        assert np.array_equal(layer.weight.view(torch.uint8).numpy(),
                              q.data.view("uint8").numpy()), name
        assert np.array_equal(layer.weight_scale.numpy(), q.scale.numpy())
        if original.bias is None:
            assert layer.bias is None
        else:
            assert torch.equal(layer.bias, original.bias)


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_weight_only_forward_matches_reference(granularity, rng, seed):
    model = fpt.quantize(mlp(seed), granularity=granularity)
    layer = model[0]
    x = torch.from_numpy(rng.standard_normal((2, 3, 200)).astype(np.float32))
    with torch.no_grad():
        y = layer(x).numpy().astype(np.float64)
    want = (x.numpy().astype(np.float64) @ dequantized_weight(layer).T
            + layer.bias.numpy())
    error = np.linalg.norm(y - want) / np.linalg.norm(want)
    assert y.shape == (2, 3, 160) and error < 1e-5, (error, f"seed={seed}")


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_fp8_activations_forward_matches_fp8q_linear(granularity, rng, seed):
    model = fpt.quantize(mlp(seed), activations="e4m3",
                         granularity=granularity)
    layer = model[0]
    x = rng.standard_normal((7, 200)).astype(np.float32)
    with torch.no_grad():
        y = layer(torch.from_numpy(x)).numpy()
    w = fp8q.QTensor(fpt.from_torch(layer.weight),
                     fpt.from_torch(layer.weight_scale),
                     (128, 128) if granularity == "block" else granularity)
    want = fp8q.linear(x, w, bias=layer.bias.numpy()).numpy()
    assert np.array_equal(y, want), f"seed={seed}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16,
                                   torch.bfloat16])
@pytest.mark.parametrize("activations", [None, "e4m3"])
def test_model_output_close_to_float_model(dtype, activations, rng, seed):
    model = mlp(seed, dtype)
    x = torch.from_numpy(rng.standard_normal((4, 9, 200)).astype(
        np.float32)).to(dtype)
    with torch.no_grad():
        want = model(x).float()
        got = fpt.quantize(model, activations=activations)(x)
    assert got.dtype == dtype and got.shape == want.shape
    cosine = torch.nn.functional.cosine_similarity(
        got.float().flatten(), want.flatten(), dim=0)
    assert cosine > 0.995, (float(cosine), f"seed={seed}")


def test_state_dict_round_trip_exact(rng, seed):
    model = fpt.quantize(mlp(seed), activations="e4m3")
    state = model.state_dict()
    assert state["0.weight"].dtype == torch.float8_e4m3fn
    assert state["0.weight_scale"].shape == (160, 1)
    fresh = fpt.quantize(mlp(seed + 1), activations="e4m3")
    fresh.load_state_dict(state)
    x = torch.from_numpy(rng.standard_normal((5, 200)).astype(np.float32))
    with torch.no_grad():
        assert torch.equal(fresh(x), model(x))
    for key, value in fresh.state_dict().items():
        assert torch.equal(value.view(torch.uint8) if value.dtype ==
                           torch.float8_e4m3fn else value,
                           state[key].view(torch.uint8) if state[key].dtype
                           == torch.float8_e4m3fn else state[key]), key


def test_include_exclude_patterns(seed):
    model = fpt.quantize(mlp(seed), include=["2.*", "3"])
    assert isinstance(model[0], torch.nn.Linear)
    assert isinstance(model[2][0], fpt.Linear)
    assert isinstance(model[3], fpt.Linear)
    model = fpt.quantize(mlp(seed), exclude="0")
    assert isinstance(model[0], torch.nn.Linear)
    assert isinstance(model[3], fpt.Linear)
    with pytest.raises(ValueError, match="matches"):
        fpt.quantize(mlp(seed), include="decoder.*")
    with pytest.raises(ValueError, match="from_linear"):
        fpt.quantize(torch.nn.Linear(4, 4))


class TiedLinears(torch.nn.Module):
    """One nn.Linear registered at two paths (a and b, as tied layers are)
    between two of its own."""

    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(64, 32)
        self.a = torch.nn.Linear(32, 32)
        self.b = self.a
        self.last = torch.nn.Linear(32, 16)

    def forward(self, x):
        return self.last(self.b(torch.relu(self.a(self.first(x)))))


def test_a_linear_shared_by_two_paths_stays_one_layer(seed, caplog):
    """quantize turns a Linear registered under two names into one
    fp8q.torch.Linear set at both (m.a is m.b still holds, none of it left
    in float, the output that of a model quantized without the sharing);
    include matches it through either name, exclude through either keeps
    it float at both."""
    torch.manual_seed(seed % (2 ** 31))
    reference = TiedLinears()
    x = torch.randn(5, 64)
    for include, exclude, quantized in ((None, None, True),
                                        (["b"], None, True),
                                        (None, ["b"], False)):
        model = copy.deepcopy(reference)
        with caplog.at_level("INFO", logger="fp8q.torch"):
            fpt.quantize(model, include=include, exclude=exclude)
        summary = caplog.records[-1].fp8q_summary
        assert model.a is model.b, (include, exclude)
        assert isinstance(model.a, fpt.Linear) == quantized, (include,
                                                              exclude)
        assert [name for name, module in model.named_modules()
                if module is model.a] == ["a"]
        if include is None and exclude is None:
            assert summary.quantized == 3
            assert "Linear" not in summary.left_in_float, summary
            # The same layers as quantizing each object on its own gives.
            expected = copy.deepcopy(reference)
            expected.a = expected.b = fpt.Linear.from_linear(reference.a)
            expected.first = fpt.Linear.from_linear(reference.first)
            expected.last = fpt.Linear.from_linear(reference.last)
            with torch.no_grad():
                assert torch.equal(model(x), expected(x)), f"seed={seed}"
        elif quantized:
            assert summary.quantized == 1
        else:
            assert summary.left_in_float == {"Linear": 1}, summary


def test_quantizing_a_weight_has_no_gradient(seed):
    weight = torch.randn(16, 32, requires_grad=True)
    codes, scale = torch.ops.fp8q.quantize_weight(weight, torch.float8_e4m3fn,
                                                  "row")
    with pytest.raises(RuntimeError, match="quantize_weight has no "
                                           "backward"):
        scale.sum().backward()


def test_argument_errors(seed):
    with pytest.raises(ValueError, match="granularity"):
        fpt.quantize(mlp(seed), granularity="col")
    with pytest.raises(ValueError, match="weights"):
        fpt.quantize(mlp(seed), weights="int8")
    with pytest.raises(ValueError, match="activations"):
        fpt.quantize(mlp(seed), activations="e5m2")
    model = fpt.quantize(mlp(seed))
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        model(torch.zeros(2, 200, dtype=torch.float64))


def test_safetensors_round_trip(tmp_path, rng, seed):
    safetensors_torch = pytest.importorskip(
        "safetensors.torch", reason="safetensors is not installed (it is in "
                                    "fp8q's [test] extra)")
    model = fpt.quantize(mlp(seed), activations="e4m3", granularity="block")
    path = tmp_path / "model.safetensors"
    safetensors_torch.save_file(model.state_dict(), str(path))
    loaded = safetensors_torch.load_file(str(path))
    assert loaded["0.weight"].dtype == torch.float8_e4m3fn
    fresh = fpt.quantize(mlp(seed + 1), activations="e4m3",
                         granularity="block")
    fresh.load_state_dict(loaded)
    x = torch.from_numpy(rng.standard_normal((3, 200)).astype(np.float32))
    with torch.no_grad():
        assert torch.equal(fresh(x), model(x)), f"seed={seed}"


# ---------------------------------------------------------------------------
# Static activation scales: calibrate / freeze (quanto_compat's Calibration:
# tests/test_torch_quanto_compat_calibration.py)


def calibration_batches(rng, count=4):
    """Batches of different magnitudes, the largest not last (a calibrator
    that kept only the last batch would be caught)."""
    scales = [2.0, 4.0, 1.0, 3.0][:count]
    return [torch.from_numpy(rng.standard_normal((6, 200)).astype(
        np.float32) * scale) for scale in scales]


def first_layer_inputs(model, batches):
    """The float32 inputs each batch gives model[0] (the model's input)."""
    return [batch.numpy() for batch in batches]


@pytest.mark.parametrize("method", ["max", "percentile", "entropy", "mse"])
def test_calibrate_freeze_sets_input_scale(method, rng, seed):
    model = fpt.quantize(mlp(seed), activations="e4m3")
    batches = calibration_batches(rng)
    with fpt.calibrate(model, method=method):
        with torch.no_grad():
            for batch in batches:
                model(batch)
    fpt.freeze(model)
    layer = model[0]
    data = np.concatenate(first_layer_inputs(model, batches))
    if method == "max":
        calibrator = fp8q.calib.MaxCalibrator()
        for batch in batches:
            calibrator.update(batch.numpy())
        amax = calibrator.amax
    else:
        calibrator = fp8q.calib.HistogramCalibrator()
        calibrator.update(data)
        amax = calibrator.compute_amax(method)
    assert layer.input_scale.shape == ()
    assert float(layer.input_scale) == fp8q.calib.scale_from_amax(amax), \
        (method, f"seed={seed}")
    # Static quantization: x / input_scale, then the FP8 product.
    x = batches[0].numpy()
    w = fp8q.QTensor(fpt.from_torch(layer.weight),
                     fpt.from_torch(layer.weight_scale), "row")
    qx = fp8q.quantize(x, "e4m3", scale=float(layer.input_scale))
    with torch.no_grad():
        got = layer(batches[0]).numpy()
    want = fp8q.linear(qx, w, bias=layer.bias.numpy(),
                       out_dtype="float32").numpy()
    assert np.array_equal(got, want), f"seed={seed}"
    # A frozen checkpoint loads into a fresh (unfrozen) quantized model.
    fresh = fpt.quantize(mlp(seed + 1), activations="e4m3")
    fresh.load_state_dict(model.state_dict())
    with torch.no_grad():
        assert torch.equal(fresh(batches[1]), model(batches[1]))


def test_calibrate_errors(rng, seed):
    with pytest.raises(ValueError, match="activations"):
        with fpt.calibrate(fpt.quantize(mlp(seed))):
            pass
    model = fpt.quantize(mlp(seed), activations="e4m3")
    with pytest.raises(ValueError, match="method"):
        with fpt.calibrate(model, method="median"):
            pass
    with pytest.raises(ValueError, match="nothing to freeze"):
        fpt.freeze(fpt.quantize(mlp(seed), activations="e4m3"))
    with fpt.calibrate(model):
        pass
    with pytest.raises(ValueError, match="saw no input"):
        fpt.freeze(model)
    block = fpt.quantize(mlp(seed), activations="e4m3", granularity="block")
    with pytest.raises(ValueError, match="granularity=\"block\".*dynamic"):
        with fpt.calibrate(block):
            pass


def test_calibrate_skip_nonfinite_as_its_error_suggests(rng, seed):
    model = fpt.quantize(mlp(seed), activations="e4m3")
    batches = calibration_batches(rng)
    poisoned = batches[1].clone()
    poisoned[2, 5] = float("nan")
    with pytest.raises(ValueError, match="'0'.*skip_nonfinite=True"):
        with fpt.calibrate(model), torch.no_grad():
            model(batches[0])
            model(poisoned)
    # The failed block's statistics are dropped, not frozen as if complete.
    with pytest.raises(ValueError, match="nothing to freeze"):
        fpt.freeze(model)
    with fpt.calibrate(model, skip_nonfinite=True), torch.no_grad():
        for batch in (batches[0], poisoned):
            model(batch)
    fpt.freeze(model)
    # The NaN is left out: the first layer's amax is that of the rest.
    amax = max(float(batches[0].abs().max()),
               float(poisoned.nan_to_num(0.0).abs().max()))
    assert float(model[0].input_scale) == \
        fp8q.calib.scale_from_amax(amax), f"seed={seed}"


def test_a_model_mid_calibration_copies_and_pickles(rng, seed):
    """copy.deepcopy and torch.save of a model between calibrate and freeze
    carry the calibrators' statistics: the copy freezes to the same
    scales."""
    import copy
    import io
    for method in ("max", "percentile"):
        model = fpt.quantize(mlp(seed), activations="e4m3")
        with fpt.calibrate(model, method=method), torch.no_grad():
            for batch in calibration_batches(rng):
                model(batch)
        buffer = io.BytesIO()
        torch.save(model, buffer)
        buffer.seek(0)
        copies = [copy.deepcopy(model),
                  torch.load(buffer, weights_only=False)]
        fpt.freeze(model)
        scales = [layer.input_scale for layer in model.modules()
                  if isinstance(layer, fpt.Linear)]
        assert scales, "no calibrated layer"
        for twin in copies:
            fpt.freeze(twin)
            assert all(torch.equal(mine, theirs) for mine, theirs in zip(
                scales, [layer.input_scale for layer in twin.modules()
                         if isinstance(layer, fpt.Linear)])), \
                (method, f"seed={seed}")


def test_a_copy_made_during_calibration_stops_recording_after_it(rng,
                                                                 seed):
    """A copy.deepcopy or torch.save/torch.load copy of a model made inside
    calibrate(model) records its own inputs while that block runs and none
    after it (its hook is removed at its next call), freezes, and runs
    after freeze; it freezes to the scales of the original, which saw the
    same batches."""
    import io
    model = fpt.quantize(mlp(seed), activations="e4m3")
    batches = calibration_batches(rng)
    with fpt.calibrate(model), torch.no_grad():
        model(batches[0])
        buffer = io.BytesIO()
        torch.save(model, buffer)
        buffer.seek(0)
        copies = [copy.deepcopy(model),
                  torch.load(buffer, weights_only=False)]
        for batch in batches[1:]:
            for each in (model, *copies):
                each(batch)
    fpt.freeze(model)
    scales = [layer.input_scale for layer in model.modules()
              if isinstance(layer, fpt.Linear)]
    for twin in copies:
        # Far larger than any batch of the block: recorded, it would
        # change the first layer's scale.
        with torch.no_grad():
            twin(batches[0] * 1000.0)
        assert not any(layer._forward_pre_hooks
                       for layer in twin.modules()), f"seed={seed}"
        torch.save(twin, io.BytesIO())
        fpt.freeze(twin)
        assert all(torch.equal(mine, theirs) for mine, theirs in zip(
            scales, [layer.input_scale for layer in twin.modules()
                     if isinstance(layer, fpt.Linear)])), f"seed={seed}"
        with torch.no_grad():
            assert torch.equal(twin(batches[1]), model(batches[1])), \
                f"seed={seed}"


def test_freeze_reduces_across_ranks(tmp_path, rng, seed):
    """With torch.distributed initialized (one gloo rank here), freeze runs
    the all_reduce recipe and gives the single-process result."""
    import torch.distributed as dist
    if not dist.is_available():
        pytest.skip("this PyTorch build has no torch.distributed")
    batches = calibration_batches(rng)
    results = []
    for distributed in (False, True):
        if distributed:
            dist.init_process_group(
                "gloo", init_method=f"file://{tmp_path / 'rendezvous'}",
                rank=0, world_size=1)
        try:
            scales = []
            for method in ("max", "entropy"):
                model = fpt.quantize(mlp(seed), activations="e4m3")
                with fpt.calibrate(model, method=method), torch.no_grad():
                    for batch in batches:
                        model(batch)
                fpt.freeze(model)
                scales.append(float(model[0].input_scale))
            results.append(scales)
        finally:
            if distributed:
                dist.destroy_process_group()
    assert results[0] == results[1], f"seed={seed}"


def test_calibrate_checks_options_up_front(seed):
    """Option names and values are refused when calibrate() starts, before
    any batch runs (a percentile out of range once surfaced only at
    freeze, after the whole calibration)."""
    model = fpt.quantize(mlp(seed), activations="e4m3")
    with pytest.raises(TypeError, match="percentil"):
        with fpt.calibrate(model, method="percentile", percentil=99.9):
            pass
    with pytest.raises(TypeError, match="percentile"):
        with fpt.calibrate(model, method="max", percentile=99.9):
            pass
    for bad in (150, 0, float("nan")):
        ran = []
        with pytest.raises(ValueError, match=r"^calibrate: percentile: "):
            with fpt.calibrate(model, method="percentile", percentile=bad):
                ran.append(True)
        assert not ran, bad
    assert not any(hasattr(layer, "_calibration") or layer._forward_pre_hooks
                   for layer in model.modules())


def test_calibrate_records_a_keyword_input(rng, seed):
    """layer(input=x), the keyword nn.Linear's forward takes, is recorded
    as layer(x) is (it raised IndexError inside calibrate)."""
    batches = calibration_batches(rng)
    scales = []
    for keyword in (False, True):
        model = fpt.quantize(mlp(seed), activations="e4m3")
        with fpt.calibrate(model), torch.no_grad():
            for batch in batches:
                if keyword:
                    hidden = model[1](model[0](input=batch))
                    model[3](input=model[2][0](input=hidden))
                else:
                    model(batch)
        fpt.freeze(model)
        scales.append([float(layer.input_scale) for layer in model.modules()
                       if isinstance(layer, fpt.Linear)])
    amax = max(float(np.abs(batch.numpy()).max()) for batch in batches)
    assert scales[0] == scales[1], f"seed={seed}"
    assert scales[0][0] == fp8q.calib.scale_from_amax(
        amax, "float8_e4m3fn"), f"seed={seed}"


def _one_layer_unseen(seed, method):
    """An MLP calibrated with `method` through its first layer only (the
    later layers see no input, like an MoE expert no token reached)."""
    model = fpt.quantize(mlp(seed), activations="e4m3")
    with fpt.calibrate(model, method=method), torch.no_grad():
        model[0](torch.ones(2, 200))
    return model


def test_freeze_is_all_or_nothing(seed):
    """A layer that saw no input makes freeze raise, naming it, before any
    layer changes: the statistics stay, and freeze works once every layer
    has its input (it froze the layers before the unseen one first)."""
    for method in ("max", "percentile"):
        model = _one_layer_unseen(seed, method)
        with pytest.raises(ValueError, match=r"^freeze: layer '2\.0' saw no "
                           r"input during calibration"):
            fpt.freeze(model)
        layers = [layer for layer in model.modules()
                  if isinstance(layer, fpt.Linear)]
        assert all(layer.input_scale is None for layer in layers), method
        assert all(hasattr(layer, "_calibration") for layer in layers)


def test_freeze_refuses_a_layer_no_rank_saw(tmp_path, seed):
    """With torch.distributed initialized (one gloo rank), a layer that saw
    no input on any rank is the same ValueError as without it (it froze
    silently to scale 1.0, amax 448, for method="max")."""
    import torch.distributed as dist
    if not dist.is_available():
        pytest.skip("this PyTorch build has no torch.distributed")
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'rendezvous'}",
        rank=0, world_size=1)
    try:
        for method in ("max", "percentile"):
            model = _one_layer_unseen(seed, method)
            with pytest.raises(ValueError, match=r"^freeze: layer '2\.0' "
                               "saw no input"):
                fpt.freeze(model)
            assert model[0].input_scale is None, method
    finally:
        dist.destroy_process_group()


def test_from_torch_falls_back_to_uint8_for_float8(monkeypatch):
    """As with a PyTorch whose DLPack export refuses float8: the bytes come
    through as uint8, viewed as the FP8 dtype, without a copy."""
    original = fp8q.from_dlpack

    def refuse_float8(x, *args, **kwargs):
        if "float8" in str(getattr(x, "dtype", "")):
            raise BufferError("float8 types are not supported by dlpack")
        return original(x, *args, **kwargs)

    monkeypatch.setattr(fp8q, "from_dlpack", refuse_float8)
    x = torch.tensor([1.0, -2.0, 448.0]).to(torch.float8_e4m3fn)
    t = fpt.from_torch(x)
    assert t.dtype.name == "float8_e4m3fn" and t.data_ptr == x.data_ptr()
    assert fp8q.cast(t, "float32").numpy().tolist() == [1.0, -2.0, 448.0]


class FalconStyleLinear(torch.nn.Linear):
    """An nn.Linear subclass computing x @ W.T + b in a forward of its own
    (as transformers' FalconLinear does)."""

    def forward(self, x):
        y = x @ self.weight.T
        return y if self.bias is None else y + self.bias


def test_linears_torch_reads_directly_stay_float(seed, caplog):
    """quantize leaves the Linears a TransformerEncoderLayer reads without
    a call (its attention's out_proj; linear1 / linear2 in its inference
    fast path) in float, counted in the summary: the encoder still runs,
    bit for bit (it raised a dtype error). An nn.Linear subclass with its
    own forward is replaced as nn.Linear is (FalconLinear's case). include
    naming only a Linear torch reads directly is a ValueError saying why;
    exclude may name it."""
    torch.manual_seed(seed % (2 ** 31))
    encoder = torch.nn.TransformerEncoderLayer(
        32, 4, 64, dropout=0.0, batch_first=True).eval()
    model = torch.nn.Sequential(FalconStyleLinear(32, 32), encoder,
                                torch.nn.Linear(32, 16))
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        float_encoded = encoder(x)
    with caplog.at_level("INFO", logger="fp8q.torch"):
        fpt.quantize(model, exclude=["1.self_attn.out_proj"])
    summary = caplog.records[-1].fp8q_summary
    assert isinstance(model[0], fpt.Linear)
    assert isinstance(model[2], fpt.Linear)
    assert type(encoder.self_attn.out_proj) is \
        torch.nn.modules.linear.NonDynamicallyQuantizableLinear
    assert type(encoder.linear1) is type(encoder.linear2) is torch.nn.Linear
    assert summary.quantized == 2
    assert summary.left_in_float["NonDynamicallyQuantizableLinear"] == 1
    assert summary.left_in_float["Linear"] == 2
    with torch.no_grad():
        assert torch.equal(encoder(x), float_encoded)
        assert model(x).shape == (2, 5, 16)
    with pytest.raises(ValueError, match=r"^include: \['1.linear1'\] match "
                       r"only nn.Linear modules fp8q leaves in float "
                       r"\(1.linear1\): its owner reads it"):
        fpt.quantize(model, include=["1.linear1"])


def test_a_float64_model_is_refused_naming_the_dtype():
    """A float64 Linear is refused with TypeError saying what fp8q
    quantizes and what to do (it said "obj: unsupported DLPack dtype
    (code 2: float, bits 64, lanes 1)"), the model unchanged."""
    model = torch.nn.Sequential(torch.nn.Linear(16, 8)).double()
    with pytest.raises(TypeError, match=r"^from_linear: the weight is "
                       r"torch.float64; fp8q quantizes float32, float16 and "
                       r"bfloat16 weights \(convert the layer first, e.g. "
                       r"model.float\(\)\)$"):
        fpt.Linear.from_linear(model[0])
    with pytest.raises(TypeError, match=r"module '0'.*torch.float64.*"
                       r"model.float\(\)"):
        fpt.quantize(model)
    assert type(model[0]) is torch.nn.Linear
