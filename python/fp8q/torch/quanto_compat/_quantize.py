"""quanto_compat's model-level functions, as optimum-quanto's: quantize
(nn.Linear -> unfrozen QLinear), freeze, quantization_map and requantize
(reloading a saved model, the model built on the meta device included)."""
import torch

from fp8q.torch._linear import Linear
from fp8q.torch._quantize import (check_include_takes_a_layer, matches_any,
                                  replaceable_linears)
from fp8q.torch.quanto_compat import _qtypes
from fp8q.torch.quanto_compat._qlinear import (QLinear, QModuleMixin,
                                               layer_formats)


def _pattern_list(value):
    return [value] if isinstance(value, str) else value


def _replace(model, name, module):
    parent_name, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent_name) if parent_name else model,
            child, module)


def _check_frozen(name, layer, weights, activations):
    """ValueError when the frozen QLinear `layer` was quantized with other
    qtypes than this call's (optimum-quanto raises a RuntimeError,
    "Couldn't swap QLinear.weight", for any frozen layer)."""
    wanted = (_qtypes.resolve(weights, "weights"),
              _qtypes.resolve(activations, "activations"))
    if (layer.weight_qtype, layer.activation_qtype) != wanted:
        def describe(qtypes):
            return (f"weights={qtypes[0].name}, activations="
                    f"{getattr(qtypes[1], 'name', None)}")
        raise ValueError(
            f"quantize: {name!r} is a frozen QLinear with "
            f"{describe((layer.weight_qtype, layer.activation_qtype))}; "
            f"this call asks for {describe(wanted)}. Its float weight is "
            "gone (requantizing FP8 codes would round them twice): "
            "quantize before freeze, or exclude this layer")


def quantize(model, weights=None, activations=None, optimizer=None,
             include=None, exclude=None):
    """As optimum.quanto.quantize: replaces in place every float
    torch.nn.Linear of `model` whose qualified name matches an `include`
    pattern (shell-style, a string or a list; default all) and no `exclude`
    pattern by QLinear.from_module(module, weights, activations,
    optimizer), unfrozen (call freeze(model) for FP8 weights), with its
    `name` attribute set to that name. An unfrozen QLinear the patterns
    match is made again the same way from its float weight and bias, with
    this call's qtypes and input_scale / output_scale back to 1, as quanto
    does; a frozen one is left as it is when its qtypes are this call's,
    else a ValueError names it (quanto raises a RuntimeError for any
    frozen layer). Patterns that match nothing are ignored, as in quanto,
    but an `include` that matches only linear layers fp8q keeps float is a
    ValueError saying why. Other module kinds (Conv2d, LayerNorm, ...)
    stay float: fp8q quantizes linear layers only, and of those only the
    ones fp8q.torch.quantize replaces (replaceable_linears: not a Linear
    that torch's attention and encoder layers read without calling it,
    nor one a transformers model keeps in float32).
    The arguments are
    checked before anything changes (ValueError naming the argument and
    what fp8q supports); a model that is itself an nn.Linear is a
    ValueError (use QLinear.from_module). Returns None, as quanto's."""
    layer_formats(weights, activations, optimizer)
    include, exclude = _pattern_list(include), _pattern_list(exclude) or []
    replaceable = replaceable_linears(model)
    check_include_takes_a_layer(
        model, include, replaceable,
        note="; optimum-quanto quantizes them, fp8q's layers cannot stand "
             "there")
    chosen = [(name, module) for name, module in model.named_modules()
              if (id(module) in replaceable or isinstance(module, QLinear))
              and (include is None or matches_any(name, include))
              and not matches_any(name, exclude)]
    if any(name == "" for name, _ in chosen):
        raise ValueError("quantize: the model itself is an nn.Linear; use "
                         "QLinear.from_module(model, weights=...)")
    for name, module in chosen:
        if isinstance(module, QLinear) and module.frozen:
            _check_frozen(name, module, weights, activations)
    layers = []
    for name, module in chosen:
        if isinstance(module, QLinear) and module.frozen:
            continue
        layer = QLinear.from_module(module, weights=weights,
                                    activations=activations,
                                    optimizer=optimizer)
        layer.name = name
        layer.set_name(name)  # fp8q.torch.Linear's errors name it
        layers.append((name, layer))
    for name, layer in layers:
        _replace(model, name, layer)


def freeze(model):
    """As optimum.quanto.freeze: every unfrozen QLinear of `model` gets its
    FP8 weight (QLinear.freeze). All or nothing: a weight holding NaN or
    infinity raises a ValueError naming the layer before any layer
    changes. Layers that never ran under Calibration keep input_scale 1,
    as in quanto. Returns None."""
    layers = [module for module in model.modules()
              if isinstance(module, QLinear) and not module.frozen]
    quantized = [layer._quantized_layer() for layer in layers]
    for layer, fp8_layer in zip(layers, quantized):
        layer._use_fp8_tensors(fp8_layer)


def quantization_map(model):
    """As optimum.quanto.quantization_map: {module name: {"weights": qtype
    name, "activations": qtype name or "none"}} for every QLinear of
    `model`, what requantize needs besides the state dict (save it as JSON
    beside the weights). A plain fp8q.torch.Linear (from
    fp8q.torch.quantize) is a ValueError naming it: its state dict reloads
    with fp8q.torch.quantize and load_state_dict instead."""
    layers = {}
    for name, module in model.named_modules():
        if isinstance(module, QModuleMixin):
            layers[name] = {
                "weights": module.weight_qtype.name,
                "activations": ("none" if module.activation_qtype is None
                                else module.activation_qtype.name)}
        elif isinstance(module, Linear):
            raise ValueError(
                f"quantization_map: layer {name!r} is an fp8q.torch.Linear "
                "made by fp8q.torch.quantize, not a QLinear: reload such a "
                "model with fp8q.torch.quantize(model, ...) and "
                "load_state_dict, or quantize it with "
                "quanto_compat.quantize")
    return layers


def _materialize(model, device):
    """Replaces every tensor of `model` on the meta device by an empty one
    on `device` (QLinear's input_scale and output_scale by ones, their
    initial value); a tensor that several modules share (tied weights, as
    accelerate's init_empty_weights leaves them) stays shared. Returns the
    state-dict keys of those left without values, one tuple of keys per
    tensor."""
    replaced = {}  # id of the meta tensor: (new tensor, its keys or None)
    for prefix, module in model.named_modules():
        prefix = f"{prefix}." if prefix else ""
        for name, tensor in list(module._parameters.items()) + list(
                module._buffers.items()):
            if tensor is None or tensor.device.type != "meta":
                continue
            if id(tensor) not in replaced:
                if isinstance(module, QLinear) and name in ("input_scale",
                                                            "output_scale"):
                    value, keys = torch.ones_like(tensor, device=device), None
                else:
                    value, keys = torch.empty_like(tensor, device=device), []
                if name in module._parameters:
                    value = torch.nn.Parameter(
                        value, requires_grad=tensor.requires_grad)
                replaced[id(tensor)] = (tensor, value, keys)
            _, value, keys = replaced[id(tensor)]
            if keys is not None:
                keys.append(prefix + name)
            if name in module._parameters:
                module._parameters[name] = value
            else:
                module._buffers[name] = value
    return [tuple(keys) for _, _, keys in replaced.values()
            if keys is not None]


def _check_meta_buffers(model):
    """ValueError naming the non-persistent buffers of `model` on the meta
    device: no state dict holds them, so nothing could give them values."""
    stranded = sorted(
        f"{prefix}.{name}" if prefix else name
        for prefix, module in model.named_modules()
        for name in module._non_persistent_buffers_set
        if getattr(module._buffers.get(name), "is_meta", False))
    if stranded:
        raise ValueError(
            f"requantize: the model's non-persistent buffers {stranded} "
            "are on the meta device, and no state dict holds them: build "
            "the model with parameters only on meta (accelerate's "
            "init_empty_weights()), or on the CPU")


_QUANTO_DATA, _QUANTO_SCALE = "weight._data", "weight._scale"


def _from_quanto_layout(state_dict, names):
    """`state_dict` with the weights optimum-quanto serialized for the
    layers `names` (a frozen quanto QLinear writes `<layer>.weight._data`,
    the FP8 codes (out, in), and `<layer>.weight._scale`, one
    dequantization scale per output channel (out, 1) in the model's dtype)
    re-laid as fp8q's `<layer>.weight` and float32 `<layer>.weight_scale`:
    the same codes times the same scales (every bfloat16 / float16 value
    is a float32 one), so the dequantized weight is quanto's. Its
    input_scale / output_scale keys are fp8q's names already. A new dict
    when anything is re-laid; ValueError naming the key for half a pair or
    both layouts for one layer."""
    relaid = None
    for name in names:
        prefix = f"{name}." if name else ""
        data, scale = prefix + _QUANTO_DATA, prefix + _QUANTO_SCALE
        if data not in state_dict and scale not in state_dict:
            continue
        for present, absent in ((data, scale), (scale, data)):
            if present in state_dict and absent not in state_dict:
                raise ValueError(
                    f"requantize: state_dict has {present} (optimum-quanto's "
                    f"layout) but no {absent} beside it")
        if prefix + "weight" in state_dict:
            raise ValueError(
                f"requantize: state_dict has both {prefix}weight and "
                f"optimum-quanto's {data}: one layer, two weights")
        if relaid is None:
            relaid = dict(state_dict)
        relaid[prefix + "weight"] = relaid.pop(data)
        relaid[prefix + "weight_scale"] = relaid.pop(scale).float()
    return state_dict if relaid is None else relaid


def requantize(model, state_dict, quantization_map, device=None):
    """As optimum.quanto.requantize: replaces each torch.nn.Linear of the
    float `model` named in `quantization_map` (quantization_map() of the
    saved model) by a QLinear of the map's qtypes, gives every tensor
    still on the meta device storage on `device`, and loads `state_dict`
    (the saved model's state_dict(), e.g. safetensors' load_file) with
    strict=False, as quanto. The state dict may be fp8q's (a model
    quantized by quanto_compat) or optimum-quanto's (`weight._data` /
    `weight._scale`, _from_quanto_layout: the mapped layers load frozen
    with quanto's codes and scales). Keys the model lacks are ignored,
    and tensors the state dict lacks keep their values; tied tensors stay
    tied.
    Unlike quanto, a tensor that was on the meta device and is not in the
    state dict (under none of its keys, for a tied one) raises a
    ValueError naming its keys (quanto would leave it uninitialized), and
    so, before anything changes, does a non-persistent buffer on the meta
    device, which no state dict holds. device: default the model's (the
    CPU for a meta model). ValueError naming the entry for a map entry
    that names no nn.Linear of the model (or no module at all), lacks its
    "weights" or "activations" key (quanto: KeyError) or names a qtype
    fp8q does not have.
    FP8 codes of another format than the map's are refused (RuntimeError
    from load_state_dict naming the key).
    Returns None, as quanto's."""
    _check_meta_buffers(model)
    if device is None:
        device = next(model.parameters()).device
        if device.type == "meta":
            device = torch.device("cpu")
    replacements = []
    for name, qtypes in quantization_map.items():
        try:
            module = model.get_submodule(name) if name else None
        except AttributeError:
            raise ValueError(
                f"quantization_map[{name!r}]: the model has no module "
                f"{name!r}; build the model the map was saved from") from None
        if not isinstance(module, torch.nn.Linear) or isinstance(module,
                                                                 Linear):
            raise ValueError(
                f"quantization_map[{name!r}]: expected a float nn.Linear in "
                f"the model there, found {type(module).__name__}")
        missing = [key for key in ("weights", "activations")
                   if key not in qtypes]
        if missing:
            raise ValueError(
                f"quantization_map[{name!r}]: no {missing[0]!r} key; "
                "quantization_map() writes both \"weights\" and "
                "\"activations\" (\"none\" for float activations)")
        weights, activations = qtypes["weights"], qtypes["activations"]
        try:
            layer = QLinear.from_module(
                module, weights=None if weights == "none" else weights,
                activations=None if activations == "none" else activations)
        except ValueError as error:
            raise ValueError(f"quantization_map[{name!r}]: {error}") from None
        layer.name = name
        layer.set_name(name)  # fp8q.torch.Linear's errors name it
        replacements.append((name, layer))
    for name, layer in replacements:
        _replace(model, name, layer)
    state_dict = _from_quanto_layout(state_dict, quantization_map)
    uninitialized = _materialize(model, device)
    model.to(device)
    missing = model.load_state_dict(state_dict, strict=False).missing_keys
    # A tied tensor has values once one of its keys is loaded.
    unset = sorted(key for keys in uninitialized
                   if set(keys).issubset(missing) for key in keys)
    if unset:
        raise ValueError(
            f"requantize: state_dict has no {unset}: the model held them "
            "on the meta device, so they have no values; pass a state dict "
            "with every tensor of the saved model")
