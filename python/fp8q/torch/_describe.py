"""What a model quantized by fp8q holds, for the quantization_config that a
library's from_pretrained rebuilds it from (fp8q.torch._transformers and
fp8q.torch._diffusers, one set of rules for both): the settings of its
fp8q.torch.Linear layers, the Linear layers it keeps in float, and the
names a list of modules kept in float covers. No library is imported."""
import torch

from fp8q.torch._linear import Linear
from fp8q.torch._module_names import covered
from fp8q.torch._quantize import replaceable_linears


def layer_settings(layer):
    """The settings (quantize's keyword arguments) that rebuild the fp8q
    layer `layer`."""
    return {"weights": {torch.float8_e4m3fn: "e4m3",
                        torch.float8_e5m2: "e5m2"}[layer.weight.dtype],
            "activations": None if layer.activations is None else "e4m3",
            "granularity": layer.granularity}


def check_settings(owner, weights, activations, granularity, fuse_norms):
    """Checks a quantization config's settings (`owner`: the config's
    class name, for the message): fp8q.torch.Linear's constructor checks
    weights, activations and granularity; fuse_norms=True needs
    activations="e4m3" and "row" or "tensor" granularity (the fused norm
    writes per-token codes)."""
    Linear(0, 0, weights=weights, activations=activations,
           granularity=granularity)
    if fuse_norms and (activations is None or granularity == "block"):
        raise ValueError(f"{owner}: fuse_norms=True needs "
                         "activations=\"e4m3\" and \"row\" or \"tensor\" "
                         "granularity")


def linear_names(model, skipped):
    """Names of model's nn.Linear modules that fp8q replaces
    (replaceable_linears: as quantize chooses them) and no name in `skipped`
    covers."""
    replaceable = replaceable_linears(model)
    return [name for name, module in model.named_modules()
            if id(module) in replaceable and not covered(name, skipped)]


def _describe(settings):
    return ", ".join(f"{key}={value}" for key, value in settings.items())


def survey(model, library):
    """({name: layer_settings} of model's fp8q layers, [names of its float
    nn.Linear layers]). ValueError naming the layers when a Linear holds a
    weight that is not floating point (another quantization method's), or
    when the fp8q layers have different settings: one quantization_config
    of `library` (its name, for the message) cannot describe them."""
    fp8q_layers, float_layers, foreign = {}, [], []
    for name, module in model.named_modules():
        if isinstance(module, Linear):
            fp8q_layers[name] = layer_settings(module)
        elif isinstance(module, torch.nn.Linear):
            weight = module.weight
            if weight is None or (weight.is_floating_point()
                                  and weight.element_size() > 1):
                float_layers.append(name)
            else:
                foreign.append(f"{name} ({type(module).__name__}, "
                               f"{weight.dtype})")
    if foreign:
        raise ValueError(
            f"save_pretrained: {', '.join(foreign[:3])} hold weights that "
            "neither fp8q nor a float Linear holds; one quantization_config "
            "cannot describe layers of fp8q and of another method: quantize "
            "a float model with fp8q.torch.quantize only")
    distinct = {}
    for name, settings in fp8q_layers.items():
        distinct.setdefault(tuple(settings.items()), name)
    if len(distinct) > 1:
        examples = "; ".join(f"{name!r}: {_describe(dict(settings))}"
                             for settings, name in distinct.items())
        raise ValueError(
            f"save_pretrained: the model's fp8q layers have different "
            f"settings ({examples}); {library}' quantization_config holds "
            "one setting per model, so from_pretrained would rebuild some "
            "layers wrong. Quantize every quantized layer with one setting "
            "(exclude the others to keep them in float)")
    return fp8q_layers, float_layers


def shared_settings(fp8q_layers):
    """The settings every layer of survey's fp8q_layers has, or None when
    there is none."""
    return dict(next(iter(fp8q_layers.values()))) if fp8q_layers else None
