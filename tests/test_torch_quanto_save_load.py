"""fp8q.torch.quanto_compat's save and reload path (quantization_map,
requantize) and its ImportError for quanto's non-FP8 qtypes; the map is
checked against optimum-quanto's when that is installed."""
import json

import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: pip install torch to run the "
                    "fp8q.torch tests")

import fp8q.torch as fpt  # noqa: E402
from fp8q.torch import quanto_compat as qc  # noqa: E402


def float_model(seed):
    torch.manual_seed(seed % (2 ** 31))
    return torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.ReLU(),
                               torch.nn.Linear(48, 32),
                               torch.nn.Linear(32, 8))


def quantized_frozen(seed):
    model = float_model(seed)
    qc.quantize(model, weights=qc.qfloat8, activations=qc.qfloat8,
                exclude="3")
    qc.quantize(model, weights=qc.qfloat8_e5m2, include="3")
    with qc.Calibration(), torch.no_grad():
        model(torch.randn(4, 64))
    qc.freeze(model)
    return model


def test_quantization_map_names_each_layer_and_its_qtypes(seed):
    model = quantized_frozen(seed)
    assert qc.quantization_map(model) == {
        "0": {"weights": "qfloat8_e4m3fn", "activations": "qfloat8_e4m3fn"},
        "2": {"weights": "qfloat8_e4m3fn", "activations": "qfloat8_e4m3fn"},
        "3": {"weights": "qfloat8_e5m2", "activations": "none"}}
    block = fpt.quantize(float_model(seed), granularity="block")
    with pytest.raises(ValueError, match="'0' has granularity='block'"):
        qc.quantization_map(block)


def test_safetensors_and_requantize_round_trip(tmp_path, seed):
    safetensors_torch = pytest.importorskip(
        "safetensors.torch", reason="safetensors is not installed (it is in "
                                    "fp8q's [test] extra)")
    model = quantized_frozen(seed)
    safetensors_torch.save_file(model.state_dict(),
                                str(tmp_path / "model.safetensors"))
    (tmp_path / "map.json").write_text(json.dumps(qc.quantization_map(model)))

    fresh = float_model(seed + 1)
    assert qc.requantize(fresh, safetensors_torch.load_file(
        str(tmp_path / "model.safetensors")),
        json.loads((tmp_path / "map.json").read_text()), device="cpu") is None
    assert all(isinstance(fresh[index], fpt.Linear) for index in (0, 2, 3))
    assert fresh[3].weight.dtype == torch.float8_e5m2
    assert fresh[0].input_scale == model[0].input_scale
    x = torch.randn(5, 64)
    with torch.no_grad():
        assert torch.equal(fresh(x), model(x)), f"seed={seed}"


def test_requantize_errors_name_the_entry(seed):
    state = quantized_frozen(seed).state_dict()
    with pytest.raises(ValueError, match=r"\['1'\]: expected an nn.Linear"):
        qc.requantize(float_model(seed), state,
                      {"1": {"weights": "qfloat8", "activations": "none"}})
    with pytest.raises(ValueError, match=r"\['0'\]: weights: fp8q supports"):
        qc.requantize(float_model(seed), state, {"0": {"weights": "qint8"}})
    with pytest.raises(ValueError, match="activations.*qfloat8_e4m3fn"):
        qc.requantize(float_model(seed), state,
                      {"0": {"weights": "qfloat8",
                             "activations": "qfloat8_e5m2"}})
    with pytest.raises(RuntimeError, match="Missing key"):
        qc.requantize(float_model(seed), {}, qc.quantization_map(
            quantized_frozen(seed)))


@pytest.mark.parametrize("name", ["qint8", "qint4", "qint2",
                                  "qfloat8_e4m3fnuz"])
def test_integer_qtype_imports_say_what_fp8q_supports(name):
    with pytest.raises(ImportError, match=f"no {name}: fp8q supports the "
                                          "FP8 qtypes qfloat8"):
        exec(f"from fp8q.torch.quanto_compat import {name}", {})
    with pytest.raises(AttributeError):
        qc.no_such_name  # noqa: B018


def test_quantization_map_matches_optimum_quanto(seed):
    quanto = pytest.importorskip(
        "optimum.quanto", reason="optimum-quanto is not installed")
    theirs = float_model(seed)
    quanto.quantize(theirs, weights=quanto.qfloat8,
                    activations=quanto.qfloat8, exclude="3")
    quanto.quantize(theirs, weights=quanto.qfloat8_e5m2, include="3")
    assert qc.quantization_map(quantized_frozen(seed)) == \
        quanto.quantization_map(theirs)
