"""What load_checkpoint does about a model built on the meta device whose
tensors the checkpoint does not hold: the non-persistent buffers a module
computes in its constructor (rotary embeddings' inv_freq) are rebuilt on
the CPU where the model can say how (a transformers model's _init_weights,
run on a copy of the module), and every tensor that would still be on meta
after the load is named, so that no load reports success for a model whose
first forward fails."""
import copy

import torch

from fp8q.torch._register_transformers import is_transformers_model


def _sentinel(dtype):
    """A value no initialisation leaves behind (NaN, or the largest
    integer), or None for a dtype without one."""
    if dtype.is_floating_point:
        return float("nan")
    if dtype in (torch.int8, torch.int16, torch.int32, torch.int64,
                 torch.uint8):
        return torch.iinfo(dtype).max
    return None


def _written(tensor, sentinel):
    if isinstance(sentinel, float):
        return not bool(torch.isnan(tensor).any())
    return not bool((tensor == sentinel).any())


def _has_own_state(module):
    """Whether the module holds parameters or persistent buffers itself
    (which an initialisation would overwrite)."""
    return (any(value is not None for value in module._parameters.values())
            or any(value is not None and name not in
                   module._non_persistent_buffers_set
                   for name, value in module._buffers.items()))


def _rebuild(initialize, module, names):
    """{buffer name: CPU tensor} computed by initialize(copy of module)
    for the meta buffers `names`, or None when initialize fails or leaves
    one of them unwritten."""
    clone = copy.copy(module)
    clone.__dict__["_buffers"] = dict(module._buffers)
    sentinels = {}
    for name in names:
        meta = module._buffers[name]
        sentinels[name] = _sentinel(meta.dtype)
        if sentinels[name] is None:
            return None
        clone._buffers[name] = torch.full(meta.shape, sentinels[name],
                                          dtype=meta.dtype)
    try:
        with torch.no_grad():
            initialize(clone)
    except Exception:  # noqa: BLE001 (any failure: not rebuildable)
        return None
    values = {name: clone._buffers.get(name) for name in names}
    for name, value in values.items():
        meta = module._buffers[name]
        if (not isinstance(value, torch.Tensor) or value.is_meta
                or value.shape != meta.shape or value.dtype != meta.dtype
                or not _written(value, sentinels[name])):
            return None
    return values


def _initializer(model, module_name):
    """The _init_weights of the innermost transformers model holding the
    module `module_name`, or None."""
    best = None
    for name, module in model.named_modules():
        inside = (name == "" or module_name == name
                  or module_name.startswith(name + "."))
        if inside and is_transformers_model(module) and (
                best is None or len(name) > len(best[0])):
            best = (name, module)
    return None if best is None else getattr(best[1], "_init_weights", None)


def rebuilt_buffers(model):
    """{key: CPU tensor} for the model's non-persistent buffers on the meta
    device that can be rebuilt: those of a module inside a transformers
    model that holds no parameters or persistent buffers of its own, whose
    model's _init_weights, run on a copy of the module, writes every
    element of them (checked against NaN / largest-integer fillers). The
    model is not changed; assign them with put_buffers."""
    rebuilt = {}
    for module_name, module in model.named_modules():
        names = [name for name, value in module._buffers.items()
                 if value is not None and value.is_meta
                 and name in module._non_persistent_buffers_set]
        if not names or _has_own_state(module):
            continue
        initialize = _initializer(model, module_name)
        values = None if initialize is None else _rebuild(initialize,
                                                          module, names)
        prefix = f"{module_name}." if module_name else ""
        for name, value in (values or {}).items():
            rebuilt[prefix + name] = value
    return rebuilt


def put_buffers(model, buffers):
    """Sets each buffer {key: tensor} of the model (persistence kept)."""
    for key, value in buffers.items():
        module_name, _, name = key.rpartition(".")
        model.get_submodule(module_name)._buffers[name] = value


def left_on_meta(model, loaded, replaced_modules, rebuilt):
    """The keys of the model's parameters and buffers (every name of a
    shared one) on the meta device that a load would leave there: not in
    `loaded` (keys the load fills), not in a module of `replaced_modules`
    (replaced whole), not in `rebuilt`."""
    left = []
    for key, tensor in (*model.named_parameters(remove_duplicate=False),
                        *model.named_buffers(remove_duplicate=False)):
        if not tensor.is_meta or key in loaded or key in rebuilt:
            continue
        if key.rpartition(".")[0] in replaced_modules:
            continue
        left.append(key)
    return left


def tied_keys(model, missing, loaded):
    """{missing key: loaded key} for the keys in `missing` whose parameter
    is the very parameter of a key in `loaded` (weights the model ties,
    such as lm_head.weight and embed_tokens.weight, which checkpoints save
    once): they are loaded through that key, not missing."""
    by_tensor = {}
    for key, tensor in model.named_parameters(remove_duplicate=False):
        by_tensor.setdefault(id(tensor), []).append(key)
    tied = {}
    for keys in by_tensor.values():
        sources = [key for key in keys if key in loaded]
        if sources:
            tied.update({key: sources[0] for key in keys
                         if key in missing})
    return tied


def tie_again(model, tied):
    """Points each key of `tied` at its loaded key's parameter (a meta
    model's loaded tensors are new ones, so the tie would be lost)."""
    for key, source in tied.items():
        module_name, _, name = key.rpartition(".")
        model.get_submodule(module_name)._parameters[name] = \
            model.get_parameter(source)
