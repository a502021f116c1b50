"""The values of a checkpoint's FP8 layers, checked by
fp8q.torch.load_checkpoint before it changes the model: every weight scale
finite and > 0, and no FP8 code that is NaN (or infinite, in e5m2). A
layer holding either would fail its first forward or compute NaN. Each
tensor is read once, by vectorised reductions over its bytes, and its
pages are dropped again."""
from fp8q._checkpoint import CheckpointError
from fp8q.torch import _checks
from fp8q.torch._linear import FORMATS


def check_layer_values(checkpoint, layers):
    """CheckpointError naming the key and the layer (its qualified name)
    for the first of `layers` (fp8q._checkpoint.LayerPlan objects:
    the FP8 linear layers and the FP8 weights of other modules) whose
    weight scale has a value that is not finite and > 0 (NaN, infinity,
    zero, negative), or whose codes hold NaN (float8_e4m3fn: 0x7F, 0xFF;
    float8_e5m2: 0x7D-0x7F, 0xFD-0xFF) or infinity (float8_e5m2: 0x7C,
    0xFC). Static input scales are checked where the layers are matched
    to the model. Returns None when every value is valid."""
    for layer in layers:
        if layer.scale_key is not None:
            _refuse(layer, layer.scale_key, _checks.scale_problem(
                checkpoint.tensor(layer.scale_key)))
        _refuse(layer, layer.weight_key, _checks.code_problem(
            checkpoint.tensor(layer.weight_key), FORMATS[layer.format]))
        for key in (layer.scale_key, layer.weight_key):
            if key is not None:
                checkpoint.release(key)


def _refuse(layer, key, problem):
    if problem is not None:
        raise CheckpointError(
            f"{key} (layer {layer.name!r}): {problem}. Nothing was loaded: "
            "the model is unchanged")
