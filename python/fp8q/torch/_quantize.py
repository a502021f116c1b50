"""fp8q.torch.quantize: replaces a model's nn.Linear modules by
fp8q.torch.Linear in place."""
import fnmatch

import torch

from fp8q.torch._linear import Linear


def _matches(name, patterns):
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def _patterns(value, argument):
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    patterns = list(value)
    if not all(isinstance(pattern, str) for pattern in patterns):
        raise TypeError(f"{argument}: expected a pattern or a list of "
                        "shell-style patterns (str)")
    return patterns


def quantize(model, weights="e4m3", activations=None, granularity="row",
             include=None, exclude=None):
    """Replaces, in place, every torch.nn.Linear of `model` whose qualified
    name (as in model.named_modules()) matches `include` (shell-style
    patterns; default: all) and none of `exclude`, by an
    fp8q.torch.Linear with its weight quantized to `weights` ("e4m3" or
    "e5m2") at `granularity` ("row": one scale per output feature,
    "tensor", or "block": 128x128). activations=None keeps activations in
    floating point (weight-only); activations="e4m3" quantizes them to FP8
    in forward (per token, dynamically). Layers that already are
    fp8q.torch.Linear (an nn.Linear subclass) count as matches and are left
    as they are: quantizing twice would round twice. Returns the model.
    ValueError when a pattern matches no Linear (a typo would otherwise
    quantize nothing silently)."""
    include = _patterns(include, "include")
    exclude = _patterns(exclude, "exclude") or []
    linears = [(name, module) for name, module in model.named_modules()
               if isinstance(module, torch.nn.Linear)]
    for argument, patterns in (("include", include or []),
                               ("exclude", exclude)):
        unused = [pattern for pattern in patterns
                  if not any(fnmatch.fnmatchcase(name, pattern)
                             for name, _ in linears)]
        if unused:
            raise ValueError(f"{argument}: no nn.Linear module of the model "
                             f"matches {unused}")
    chosen = [(name, module) for name, module in linears
              if (include is None or _matches(name, include))
              and not _matches(name, exclude)
              and not isinstance(module, Linear)]
    if any(name == "" for name, _ in chosen):
        raise ValueError("quantize: the model itself is an nn.Linear; use "
                         "fp8q.torch.Linear.from_linear(model)")
    for name, module in chosen:
        replacement = Linear.from_linear(module, weights=weights,
                                         activations=activations,
                                         granularity=granularity)
        replacement.set_name(name)
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, replacement)
    return model
