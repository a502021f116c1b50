"""Shared checks of models holding fp8q.torch.Linear layers, for the tests
that save and reload them through a library (transformers, diffusers).

Imported as `torch_layers` after the test module has skipped where torch is
missing (it imports torch and fp8q.torch)."""
import torch

import fp8q.torch as fpt


def fp8_layers(model):
    """{name: layer} of model's fp8q.torch.Linear layers."""
    return {name: module for name, module in model.named_modules()
            if isinstance(module, fpt.Linear)}


def assert_same_layers(reloaded, model):
    """The two models have fp8q layers (at least one) at the same names with
    the same settings, FP8 codes, float32 weight scales and input scales,
    bit for bit."""
    ours, theirs = fp8_layers(reloaded), fp8_layers(model)
    assert ours.keys() == theirs.keys() and ours
    for name, layer in ours.items():
        other = theirs[name]
        assert layer.weight.dtype == other.weight.dtype, name
        assert layer.granularity == other.granularity, name
        assert layer.activations == other.activations, name
        assert torch.equal(layer.weight.view(torch.uint8),
                           other.weight.view(torch.uint8)), name
        assert layer.weight_scale.dtype == torch.float32, name
        assert torch.equal(layer.weight_scale, other.weight_scale), name
        assert (layer.input_scale is None) == (other.input_scale is None)
        if layer.input_scale is not None:
            assert torch.equal(layer.input_scale, other.input_scale), name
