"""fp8q.torch.quanto_compat's quantize / Calibration / freeze: quanto's
scale updates checked against a NumPy float32 oracle of its documented
formula and, when installed, optimum-quanto itself; copies, unused layers
and non-finite inputs (issue 24, defects 4 and 5)."""
import copy

import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: pip install torch to run the "
                    "fp8q.torch tests")

import fp8q.torch as fpt  # noqa: E402
from fp8q.torch import quanto_compat as qc  # noqa: E402


class Head(torch.nn.Module):
    """Two linear layers and a head that forward never calls (an unused
    expert)."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(48, 64),
                                        torch.nn.ReLU(),
                                        torch.nn.Linear(64, 32))
        self.unused = torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.body(x)


def model_w8a8(seed):
    torch.manual_seed(seed % 2 ** 31)
    model = Head()
    qc.quantize(model, weights=qc.qfloat8, activations=qc.qfloat8)
    return model


def batches(seed, count=3):
    generator = torch.Generator().manual_seed(seed % 2 ** 31 + 1)
    return [torch.randn(4, 48, generator=generator) * (1 + index)
            for index in range(count)]


def oracle_scales(tensors, momentum, qmax=448.0):
    """quanto's documented update in float32: the first batch's absmax /
    qmax, then momentum * scale + (1 - momentum) * batch scale."""
    scale = np.float32(1)
    for tensor in tensors:
        batch = np.float32(np.abs(tensor.numpy()).max()) / np.float32(qmax)
        scale = batch if scale == 1 else (
            np.float32(momentum) * scale + batch * np.float32(1 - momentum))
    return scale


@pytest.mark.parametrize("momentum", [0.9, 0.5])
def test_calibration_updates_scales_as_quanto_documents(momentum, seed):
    model = model_w8a8(seed)
    seen = {name: ([], []) for name in ("body.0", "body.2")}
    for name, (inputs, outputs) in seen.items():
        layer = model.get_submodule(name)
        layer.register_forward_pre_hook(
            lambda module, args, inputs=inputs: inputs.append(args[0]))
        layer.register_forward_hook(
            lambda module, args, out, outputs=outputs: outputs.append(out))
    with qc.Calibration(momentum=momentum), torch.no_grad():
        for batch in batches(seed):
            model(batch)
    for name, (inputs, outputs) in seen.items():
        layer = model.get_submodule(name)
        assert layer.name == name
        assert float(layer.input_scale) == oracle_scales(inputs, momentum), \
            (name, seed)
        assert float(layer.output_scale) == oracle_scales(outputs, momentum), \
            (name, seed)
    assert float(model.unused.input_scale) == 1.0


def test_calibrated_forward_uses_the_updated_scale(seed):
    model = model_w8a8(seed)
    batch = batches(seed, 1)[0]
    with qc.Calibration(), torch.no_grad():
        during = model(batch)
    qc.freeze(model)
    reference = fpt.Linear.from_linear(
        _float_twin(seed).body[0], activations="e4m3")
    reference.set_input_scale(float(model.body[0].input_scale))
    with torch.no_grad():
        assert torch.equal(model(batch), during)
        assert torch.equal(model.body[0](batch), reference(batch))


def _float_twin(seed):
    torch.manual_seed(seed % 2 ** 31)
    return Head()


def test_freeze_accepts_layers_that_never_ran(seed):
    """issue 24 defect 4: an unused layer is frozen with input_scale 1,
    as quanto's."""
    model = model_w8a8(seed)
    with qc.Calibration(), torch.no_grad():
        model(batches(seed, 1)[0])
    assert qc.freeze(model) is None
    assert all(layer.frozen for layer in (model.body[0], model.body[2],
                                          model.unused))
    assert float(model.unused.input_scale) == 1.0
    assert float(model.body[0].input_scale) != 1.0


def test_copies_calibrate(seed):
    """issue 24 defect 5: Calibration acts on every QLinear that runs,
    copy.deepcopy of a quantized model included."""
    copied = copy.deepcopy(model_w8a8(seed))
    with qc.Calibration(), torch.no_grad():
        copied(batches(seed, 1)[0])
    assert float(copied.body[0].input_scale) != 1.0
    assert float(copied.body[2].output_scale) != 1.0


def test_nonfinite_inputs_name_the_layer_or_are_skipped(seed):
    model = model_w8a8(seed)
    batch = batches(seed, 1)[0]
    batch[1, 3] = float("nan")
    batch[2, 0] = float("inf")
    with pytest.raises(ValueError, match="input of layer 'body.0' holds NaN "
                                         "or infinity.*skip_nonfinite=True"):
        with qc.Calibration(), torch.no_grad():
            model(batch)
    assert float(model.body[0].input_scale) == 1.0
    with qc.Calibration(skip_nonfinite=True), torch.no_grad():
        model(batch)
    finite = batch[torch.isfinite(batch)]
    assert float(model.body[0].input_scale) == oracle_scales([finite], 0.9)


def test_calibration_arguments(seed, capsys):
    model = model_w8a8(seed)
    with qc.Calibration(momentum=0.9, streamline=False, debug=True), \
            torch.no_grad():
        model(batches(seed, 1)[0])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["'body.0'", "'body.2'"]
    assert all("qfloat8_e4m3fn" in line for line in lines)
    with pytest.raises(ValueError, match="momentum: expected a value in"):
        qc.Calibration(momentum=1.5)
    with pytest.raises(TypeError):
        qc.Calibration(0.9)  # keyword-only, as quanto's (TypeError there)


def test_quantize_patterns_and_checks(seed):
    torch.manual_seed(seed % 2 ** 31)
    model = Head()
    assert qc.quantize(model, weights="qfloat8", exclude="body.*") is None
    assert isinstance(model.unused, qc.QLinear)
    assert model.unused.name == "unused"
    assert isinstance(model.body[0], torch.nn.Linear)
    qc.quantize(model, weights=qc.qfloat8_e5m2, include=["nope*", "body.2"])
    assert isinstance(model.body[2], qc.QLinear)
    assert model.body[2].weight_qtype is qc.qfloat8_e5m2
    assert isinstance(model.body[0], torch.nn.Linear)
    # As quanto: an unfrozen QLinear is made again with the new qtypes,
    # sharing its float weight (it used to be skipped, silently).
    weight = model.body[2].weight
    qc.quantize(model, weights=qc.qfloat8, activations=qc.qfloat8,
                include="body.2")
    assert model.body[2].weight_qtype is qc.qfloat8_e4m3fn
    assert model.body[2].activation_qtype is qc.qfloat8_e4m3fn
    assert model.body[2].weight is weight and model.body[2].name == "body.2"
    qc.freeze(model)
    qc.quantize(model, weights=qc.qfloat8, activations=qc.qfloat8,
                include="body.2")  # frozen, same qtypes: left as it is
    assert model.body[2].frozen
    with pytest.raises(ValueError, match="'body.2' is a frozen QLinear with "
                                         "weights=qfloat8_e4m3fn, "
                                         "activations=qfloat8_e4m3fn; this "
                                         "call asks for weights="
                                         "qfloat8_e5m2"):
        qc.quantize(model, weights=qc.qfloat8_e5m2)
    assert model.body[2].weight_qtype is qc.qfloat8_e4m3fn
    assert isinstance(model.body[0], torch.nn.Linear)  # nothing changed
    assert not isinstance(model.body[0], qc.QLinear)
    with pytest.raises(ValueError, match="the model itself is an nn.Linear"):
        qc.quantize(torch.nn.Linear(4, 4), weights=qc.qfloat8)


def test_freeze_is_all_or_nothing(seed):
    model = model_w8a8(seed)
    with torch.no_grad():
        model.body[2].weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match="freeze: layer 'body.2'"):
        qc.freeze(model)
    assert not any(layer.frozen for layer in (model.body[0], model.body[2],
                                              model.unused))


def test_outputs_match_optimum_quanto(seed):
    """W8A16 frozen: quanto's outputs to float32 rounding; W8A8: the first
    layer's calibrated input_scale bit for bit (later layers see inputs
    that quanto, which quantizes outputs too, rounds differently)."""
    quanto = pytest.importorskip("optimum.quanto",
                                 reason="optimum-quanto is not installed")
    x = batches(seed, 1)[0]
    theirs, ours = _float_twin(seed), _float_twin(seed)
    quanto.quantize(theirs, weights=quanto.qfloat8)
    quanto.freeze(theirs)
    qc.quantize(ours, weights=qc.qfloat8)
    qc.freeze(ours)
    with torch.no_grad():
        want, got = theirs(x), ours(x)
    assert float((got - want).norm() / want.norm()) < 1e-6, seed
    theirs, ours = _float_twin(seed), _float_twin(seed)
    quanto.quantize(theirs, weights=quanto.qfloat8,
                    activations=quanto.qfloat8)
    qc.quantize(ours, weights=qc.qfloat8, activations=qc.qfloat8)
    with torch.no_grad():
        for model, calibration in ((theirs, quanto.Calibration),
                                   (ours, qc.Calibration)):
            with calibration():
                for batch in batches(seed):
                    model(batch)
    assert torch.equal(ours.body[0].input_scale,
                       theirs.body[0].input_scale.float()), seed
    assert qc.quantization_map(ours) == quanto.quantization_map(theirs)


def test_e5m2_input_scale_matches_optimum_quanto(seed):
    quanto = pytest.importorskip("optimum.quanto",
                                 reason="optimum-quanto is not installed")
    theirs, ours = _float_twin(seed), _float_twin(seed)
    quanto.quantize(theirs, weights=quanto.qfloat8,
                    activations=quanto.qfloat8_e5m2)
    qc.quantize(ours, weights=qc.qfloat8, activations=qc.qfloat8_e5m2)
    with torch.no_grad():
        for model, calibration in ((theirs, quanto.Calibration),
                                   (ours, qc.Calibration)):
            with calibration():
                for batch in batches(seed):
                    model(batch)
    assert torch.equal(ours.body[0].input_scale,
                       theirs.body[0].input_scale.float()), seed
    assert float(ours.body[0].input_scale) == oracle_scales(
        batches(seed), 0.9, qmax=57344.0)


@pytest.mark.parametrize("second", [
    {"weights": "qfloat8", "activations": "qfloat8"},
    {"weights": "qfloat8_e5m2"}])
def test_quantize_again_as_optimum_quanto(second, seed):
    """A second quantize over unfrozen QLinear layers was ignored; quanto
    makes them again with the new qtypes (input_scale back to 1, the
    float weight shared), and so does quanto_compat now."""
    quanto = pytest.importorskip("optimum.quanto",
                                 reason="optimum-quanto is not installed")
    x = batches(seed, 1)[0]
    maps, scales = [], []
    for lib in (quanto, qc):
        model = _float_twin(seed)
        lib.quantize(model, weights="qfloat8", activations="qfloat8")
        with lib.Calibration(), torch.no_grad():
            model(x)
        lib.quantize(model, include="body.2", **second)
        maps.append(lib.quantization_map(model))
        scales.append(float(model.body[2].input_scale))
    assert maps[0] == maps[1]
    assert scales == [1.0, 1.0]


def test_include_of_layers_fp8q_keeps_float_is_refused(seed):
    """include="0.linear1" quantized nothing, silently (quanto quantizes
    it; fp8q keeps the linear layers torch's encoder reads directly)."""
    torch.manual_seed(seed % 2 ** 31)
    model = torch.nn.Sequential(
        torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True),
        torch.nn.Linear(16, 4))
    for include in ("0.linear1", ["0.self_attn.out_proj", "nope"]):
        with pytest.raises(ValueError, match="match only nn.Linear modules "
                                             "fp8q leaves in float"):
            qc.quantize(model, weights=qc.qfloat8, include=include)
    assert qc.quantization_map(model) == {}
    qc.quantize(model, weights=qc.qfloat8, include=["0.linear1", "1"])
    assert sorted(qc.quantization_map(model)) == ["1"]
