"""fp8q.torch.quantize as a whole-model call (issue 24): all layers or none
(defect 2), a second call with other settings refused and the same call
changing nothing (defect 3), and the summary it logs (item 4), whose counts
and bytes are computed here from the model's own modules and tensors."""
import logging

import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: pip install torch to run the "
                    "fp8q.torch tests")

import fp8q.torch as fpt  # noqa: E402


class Mixed(torch.nn.Module):
    """Linear layers beside modules quantize leaves in float."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 64)
        self.conv = torch.nn.Conv1d(64, 64, 1)
        self.norm = torch.nn.LayerNorm(64)
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(),
                                torch.nn.Linear(96, 64, bias=False))
            for _ in range(2))
        self.head = torch.nn.Linear(64, 50)

    def forward(self, tokens):
        h = self.embed(tokens)
        h = self.conv(h.transpose(1, 2)).transpose(1, 2)
        for block in self.blocks:
            h = h + block(self.norm(h))
        return self.head(h)


def model(seed):
    torch.manual_seed(seed % (2 ** 31))
    return Mixed()


def module_types(m):
    return {name: type(module) for name, module in m.named_modules()}


@pytest.mark.parametrize("poison", [float("nan"), float("inf")])
def test_a_bad_weight_quantizes_nothing_and_names_the_module(poison, seed):
    m = model(seed)
    with torch.no_grad():
        m.blocks[1][2].weight[3, 5] = poison
    types_before = module_types(m)
    state_before = {k: v.clone() for k, v in m.state_dict().items()}
    with pytest.raises(ValueError) as error:
        fpt.quantize(m, activations="e4m3")
    message = str(error.value)
    assert message == (
        "quantize: module 'blocks.1.2' (Linear 96 -> 64): its weight holds 1 "
        "NaN or infinite values, which no FP8 scale represents; repair them, "
        "or keep the layer in float with exclude=['blocks.1.2']. No layer "
        "was quantized: the model is unchanged")
    # blocks.0.* come before the bad layer and head after it: none changed.
    assert module_types(m) == types_before
    after = m.state_dict()
    assert after.keys() == state_before.keys()
    for name, tensor in state_before.items():
        assert torch.equal(after[name], tensor) or name == "blocks.1.2.weight"


def test_any_failure_names_the_module_and_changes_nothing(seed,
                                                          monkeypatch):
    """A stand-in failure (out of memory on the third layer, say) keeps
    its type and message, prefixed with the module path."""
    m = model(seed)
    types_before = module_types(m)
    real = fpt.Linear.from_linear.__func__
    calls = []

    def failing(cls, linear, **settings):
        calls.append(linear)
        if len(calls) == 3:
            raise RuntimeError("stand-in failure")
        return real(cls, linear, **settings)

    monkeypatch.setattr(fpt.Linear, "from_linear", classmethod(failing))
    with pytest.raises(RuntimeError, match=(
            r"^quantize: module 'blocks\.1\.0' \(Linear 64 -> 96\): "
            r"quantizing its weight: stand-in failure\. No layer was "
            r"quantized: the model is unchanged$")):
        fpt.quantize(m)
    assert module_types(m) == types_before


def fp8_state(m):
    return {k: v.view(torch.uint8) if v.element_size() == 1 else v
            for k, v in m.state_dict().items()}


def test_quantizing_twice_the_same_way_changes_nothing(seed):
    m = fpt.quantize(model(seed), activations="e4m3", exclude="head")
    before = fp8_state(m)
    layers = dict(m.named_modules())
    assert fpt.quantize(m, activations="e4m3", exclude="head") is m
    assert all(layers[name] is module for name, module in m.named_modules())
    after = fp8_state(m)
    assert after.keys() == before.keys()
    assert all(torch.equal(after[k], before[k]) for k in before)


@pytest.mark.parametrize("second", [{"weights": "e5m2"},
                                    {"activations": "e4m3"},
                                    {"granularity": "tensor"}])
def test_quantizing_again_with_other_settings_is_refused(second, seed):
    m = fpt.quantize(model(seed))
    before = fp8_state(m)
    with pytest.raises(ValueError, match=r"^quantize: 'blocks\.0\.0' is "
                                         r"quantized already with weights="
                                         r"float8_e4m3fn, activations=None, "
                                         r"granularity=row; this call asks "
                                         r"for .*round them twice"):
        fpt.quantize(m, **second)
    after = fp8_state(m)
    assert all(torch.equal(after[k], before[k]) for k in before)
    assert m.blocks[0][0].weight.dtype == torch.float8_e4m3fn


def test_a_second_call_can_quantize_other_layers_other_ways(seed):
    m = fpt.quantize(model(seed), include="blocks.*")
    fpt.quantize(m, include="head", weights="e5m2", activations="e4m3")
    assert m.head.weight.dtype == torch.float8_e5m2
    assert m.head.activations == "float8_e4m3fn"
    assert m.blocks[1][0].weight.dtype == torch.float8_e4m3fn
    assert m.blocks[1][0].activations is None


def test_the_summary_counts_layers_kinds_and_bytes(seed, caplog):
    m = model(seed)
    float_bytes = sum(p.numel() * p.element_size() for p in m.parameters())
    linear_weights = [m.blocks[i][j].weight for i in range(2)
                      for j in (0, 2)]  # head is excluded below
    fp8_bytes = float_bytes - sum(w.numel() * 3 for w in linear_weights) \
        + sum(4 * w.shape[0] for w in linear_weights)  # row scales
    with caplog.at_level(logging.INFO, logger="fp8q.torch"):
        fpt.quantize(m, exclude="head")
    records = [r for r in caplog.records if r.name == "fp8q.torch"]
    assert len(records) == 1
    summary = records[0].fp8q_summary
    assert summary == fpt.QuantizeSummary(
        quantized=4, already_quantized=0,
        left_in_float={"Embedding": 1, "Conv1d": 1, "LayerNorm": 1,
                       "Linear": 1},
        weight_bytes_before=float_bytes, weight_bytes_after=fp8_bytes)
    assert records[0].getMessage() == str(summary)
    assert str(summary) == (
        "fp8q.torch.quantize: 4 Linear layers quantized; left in float: "
        "1 Conv1d, 1 Embedding, 1 LayerNorm, 1 Linear; weights "
        f"{float_bytes / 2 ** 20:.2f} MiB -> {fp8_bytes / 2 ** 20:.2f} MiB")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="fp8q.torch"):
        fpt.quantize(m, exclude="head")
    again = caplog.records[-1].fp8q_summary
    assert (again.quantized, again.already_quantized) == (0, 4)
    assert again.weight_bytes_before == again.weight_bytes_after == fp8_bytes
