"""fp8q.torch.load_checkpoint: an FP8 checkpoint in any layout fp8q reads
(docs/checkpoints.md), loaded into a model: its nn.Linear modules with FP8
weights become fp8q.torch.Linear holding the checkpoint's codes and scales
as they are, the rest loads as load_state_dict would. Everything is checked
before the model changes; tensors are read from the memory map one at a
time and their pages dropped once copied."""
import os

import torch

from fp8q._checkpoint import CheckpointError, plan_checkpoint
from fp8q._checkpoint._plan import nbytes
from fp8q.torch import _ops
from fp8q.torch._checkpoint_report import CheckpointReport
from fp8q.torch._checkpoint_source import (StateDictCheckpoint,
                                           open_torch_checkpoint)
from fp8q.torch._checkpoint_values import check_layer_values
from fp8q.torch._linear import FORMATS, Linear
from fp8q.torch._meta_tensors import (left_on_meta, put_buffers,
                                      rebuilt_buffers, tie_again, tied_keys)
from fp8q.torch._register_transformers import attach_library_quantizer

LISTED = 5  # keys named per problem in an error message


def _listing(label, keys):
    shown = ", ".join(keys[:LISTED])
    more = f" (and {len(keys) - LISTED} more)" if len(keys) > LISTED else ""
    return f"{label} key(s): {shown}{more}"


def _is_linear(module):
    return isinstance(module, (torch.nn.Linear, Linear))


def _scale(checkpoint, key, dtype_shape):
    """The float32 scale `key` in fp8q's shape, or ones for key None."""
    if key is None:
        return torch.ones(dtype_shape)
    return checkpoint.tensor(key).to(torch.float32).reshape(dtype_shape)


def _codes(checkpoint, plan):
    """The layer's FP8 codes, viewed as its format (U8 storage too)."""
    codes = checkpoint.tensor(plan.weight_key)
    return codes.view(FORMATS[plan.format])


class _Match:
    """The checked plan against the model: which modules become FP8
    layers, which FP8 tensors are dequantized into non-linear modules,
    which float keys load, and what is unexpected or missing."""

    def __init__(self, model, plan, checkpoint):
        modules = dict(model.named_modules())
        state = model.state_dict(keep_vars=True)
        entries = checkpoint.entries
        self.linears = {}       # name -> (LayerPlan, module)
        self.dequantized = {}   # target key -> LayerPlan
        self.unexpected = []
        for name, layer in plan.layers.items():
            module = modules.get(name)
            if module is None or not name:
                self.unexpected.extend(layer.keys)
            elif _is_linear(module):
                shape = (module.out_features, module.in_features)
                if shape != layer.shape:
                    raise CheckpointError(
                        f"{layer.weight_key}: shape {layer.shape}, but the "
                        f"model's {name} is a {shape[1]} -> {shape[0]} "
                        "linear layer")
                self.linears[name] = (layer, module)
            else:
                self._check_dequantizable(name, layer, module, state)
                self.dequantized[name + ".weight"] = layer
        replaced = {key for key in state
                    if key.rpartition(".")[0] in self.linears}
        expected = {key for key in state if key not in replaced}
        expected.update(name + ".bias"
                        for name, (_, module) in self.linears.items()
                        if module.bias is not None)
        self.floats = []
        for key in plan.float_keys:
            if key not in expected:
                self.unexpected.append(key)
                continue
            self._check_not_into_fp8_layer(key, modules, entries)
            self.floats.append(key)
            target = state.get(key)
            if target is not None and tuple(target.shape) != \
                    tuple(entries[key][1]):
                raise CheckpointError(
                    f"{key}: shape {tuple(entries[key][1])} in the "
                    f"checkpoint, {tuple(target.shape)} in the model")
        provided = set(self.floats) | set(self.dequantized)
        self.missing = sorted(expected - provided)
        for layer, _ in self.linears.values():
            if layer.input_scale_key is not None:
                value = checkpoint.tensor(layer.input_scale_key).float()
                if not bool(torch.isfinite(value).all() and (value > 0).all()):
                    raise CheckpointError(
                        f"{layer.input_scale_key}: {value.reshape(-1)[0]}; "
                        "a static input scale must be finite and > 0")

    @staticmethod
    def _check_not_into_fp8_layer(key, modules, entries):
        """CheckpointError for a float `key` other than a bias aimed at a
        module that is an fp8q.torch.Linear holding FP8 codes already (a
        model quantized before loading): its codes and scales come from an
        FP8 layer of the checkpoint only (load_state_dict never turns
        values into codes). An unfrozen quanto_compat QLinear holds a
        float weight and takes float values."""
        name, _, local = key.rpartition(".")
        module = modules.get(name)
        if (local != "bias" and isinstance(module, Linear)
                and module.weight.element_size() == 1):
            raise CheckpointError(
                f"{key}: a float tensor ({entries[key][0]}) for {name}, an "
                "fp8q.torch.Linear holding "
                f"{str(module.weight.dtype).removeprefix('torch.')} codes; "
                "load_checkpoint loads FP8 layers into fp8q layers and "
                "float weights into float modules, never float values into "
                "codes. Load the checkpoint into the model before quantizing "
                f"it (or quantize with {name} excluded). Nothing was loaded: "
                "the model is unchanged")

    @staticmethod
    def _check_dequantizable(name, layer, module, state):
        target = state.get(name + ".weight")
        if target is None or not target.is_floating_point():
            raise CheckpointError(
                f"{layer.weight_key}: FP8 weights for {name}, a "
                f"{type(module).__name__} with no float weight to hold them")
        if layer.granularity != "tensor" or layer.activations is not None:
            raise CheckpointError(
                f"{layer.weight_key}: {layer.granularity} scales or FP8 "
                f"activations for {name}, a {type(module).__name__}; fp8q "
                "runs FP8 in linear layers only (and dequantizes per-tensor "
                "scaled weights of other modules)")
        if tuple(target.shape) != layer.shape:
            raise CheckpointError(f"{layer.weight_key}: shape {layer.shape} "
                                  f"in the checkpoint, {tuple(target.shape)} "
                                  "in the model")

    def refuse_if_strict(self):
        problems = []
        if self.missing:
            problems.append(_listing("missing", self.missing))
        if self.unexpected:
            problems.append(_listing("unexpected", self.unexpected))
        if problems:
            raise CheckpointError(
                "load_checkpoint(strict=True): " + "; ".join(problems)
                + " (strict=False loads the rest)")


def _fp8_layer(checkpoint, layer, module):
    """A new fp8q.torch.Linear holding the layer's codes and scales as they
    are, built through its constructor and load_state_dict, on the
    module's device (the CPU for a meta module), bias in its dtype."""
    replacement = Linear(
        layer.shape[1], layer.shape[0], bias=module.bias is not None,
        weights=layer.format,
        activations="e4m3" if layer.activations else None,
        granularity=layer.granularity)
    state = {"weight": _codes(checkpoint, layer),
             "weight_scale": _scale(checkpoint, layer.scale_key,
                                    _ops.weight_scale_shape(
                                        layer.shape[0], layer.shape[1],
                                        layer.granularity))}
    if layer.input_scale_key is not None:
        state["input_scale"] = _scale(checkpoint, layer.input_scale_key, ())
    bias_key = layer.name + ".bias"
    if module.bias is not None and bias_key in checkpoint.entries:
        state["bias"] = checkpoint.tensor(bias_key)
    elif module.bias is not None and not module.bias.is_meta:
        state["bias"] = module.bias.detach()  # missing (strict=False): kept
    # A missing bias of a meta module stays the constructor's zeros.
    replacement.load_state_dict(state, strict=module.bias is None
                                or "bias" in state)
    reference = module.bias if module.bias is not None else module.weight
    device = (torch.device("cpu") if reference.is_meta
              else reference.device)
    if reference.dtype in FORMATS.values():  # an fp8q layer's codes
        return replacement.to(device)
    return replacement.to(device=device, dtype=reference.dtype)


def _load_floats(model, checkpoint, tensors):
    """Loads {key: tensor} into the model's parameters and buffers, one
    module at a time: copied into them as load_state_dict does, or, for
    meta tensors, assigned as a copy in the target's dtype on the CPU."""
    state = model.state_dict(keep_vars=True)
    by_module = {}
    for key, tensor in tensors.items():
        module_name, _, local = key.rpartition(".")
        by_module.setdefault(module_name, {})[local] = (key, tensor)
    for module_name, local_tensors in by_module.items():
        module = model.get_submodule(module_name)
        meta = any(state[key].is_meta for key, _ in local_tensors.values())
        local = {local: (tensor.to("cpu" if state[key].is_meta
                                   else state[key].device,
                                   state[key].dtype, copy=True)
                         if meta else tensor)
                 for local, (key, tensor) in local_tensors.items()}
        module.load_state_dict(local, strict=False, assign=meta)
        for key, _ in local_tensors.values():
            if key in checkpoint.entries:
                checkpoint.release(key)


def load_checkpoint(model, source, *, strict=True, quantization_map=None):
    """Loads an FP8 checkpoint into `model`, in place, and returns a
    CheckpointReport.

    source: a .safetensors file, a folder of shards (its
    model.safetensors.index.json, else every .safetensors file, with
    config.json / hf_quant_config.json / quanto_qmap.json when present), or
    a state dict {key: tensor}. The layout is detected from the keys
    (docs/checkpoints.md): compressed-tensors / vLLM / ModelOpt,
    FineGrainedFP8 128x128 blocks, ComfyUI scaled fp8 and comfy_quant,
    plain FP8 (scale 1), optimum-quanto (quantization_map: its map, for a
    file or state dict without quanto_qmap.json beside it).

    Each nn.Linear with FP8 weights in the checkpoint is replaced by an
    fp8q.torch.Linear holding the checkpoint's codes bit for bit and its
    scales as float32 (exact from float16/bfloat16): weight-only (W8A16),
    W8A8 static with the checkpoint's input scale, or W8A8 dynamic where
    the layout's config says so; on the module's device (the CPU for a
    meta module), its bias in the module's dtype. FP8 tensors of other
    modules (per-tensor scale only) are dequantized into their float
    tensors. Float tensors load as load_state_dict loads them (into meta
    tensors: assigned, in the model's dtype, on the CPU), read memory-mapped
    one at a time.

    Into a meta-device model, the non-persistent buffers the checkpoint
    cannot hold (rotary embeddings' inv_freq) are rebuilt on the CPU by a
    transformers model's _init_weights (report.rebuilt_keys); any other
    tensor that would stay on meta is refused with strict=True (named),
    listed in report.meta_keys with strict=False. A key the checkpoint
    lacks whose parameter the model ties to a key it holds (lm_head.weight
    and the input embeddings) is not missing: it is loaded through that key
    and the tie kept. A transformers model that gets fp8q layers also gets
    fp8q's quantizer and quantization_config, so its save_pretrained
    reloads with from_pretrained (docs/torch.md).

    CheckpointError (a ValueError) naming the key for a layout fp8q cannot
    read as it is, for a shape that differs from the model's, for a float
    tensor other than a bias aimed at a module that is an fp8q.torch.Linear
    already (a model quantized before loading), for a scale
    that is not finite and > 0 or FP8 codes that are NaN (infinite too,
    in e5m2; the message names the layer too), and with strict=True for
    missing or unexpected keys or tensors left on meta; the model is
    unchanged then (everything is checked first). The layers it makes
    carry their qualified names (fp8q.torch.Linear.set_name) into their
    errors."""
    if isinstance(source, (str, os.PathLike)):
        checkpoint = open_torch_checkpoint(source)
    elif isinstance(source, dict):
        checkpoint = StateDictCheckpoint(source)
    else:
        raise TypeError("load_checkpoint: source must be a path (file or "
                        "folder) or a state dict, got "
                        f"{type(source).__name__}")
    try:
        return _load(model, checkpoint, strict, quantization_map)
    finally:
        checkpoint.close()


def _load(model, checkpoint, strict, quantization_map):
    plan = plan_checkpoint(checkpoint, quantization_map)
    match = _Match(model, plan, checkpoint)
    loaded = {*match.floats, *match.dequantized}
    tied = tied_keys(model, match.missing, loaded)
    match.missing = [key for key in match.missing if key not in tied]
    if strict:
        match.refuse_if_strict()
    check_layer_values(checkpoint, [*(layer for layer, _ in
                                      match.linears.values()),
                                    *match.dequantized.values()])
    rebuilt = rebuilt_buffers(model)
    meta_keys = left_on_meta(model, {*loaded, *tied}, match.linears, rebuilt)
    if strict and meta_keys:
        raise CheckpointError(
            "load_checkpoint(strict=True): " + _listing("meta", meta_keys)
            + ": the model's tensors that the checkpoint does not hold and "
            "fp8q cannot rebuild would stay on the meta device, where no "
            "forward can read them (non-persistent buffers, which a module "
            "computes in its constructor, are not saved). Build the model "
            "with its buffers on a real device (accelerate's "
            "init_empty_weights() puts only the parameters on meta) or set "
            "them before loading; strict=False loads the rest and lists "
            "them in report.meta_keys")
    entries = checkpoint.entries
    for name, (layer, module) in match.linears.items():
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        replacement = _fp8_layer(checkpoint, layer, module)
        replacement.set_name(name)  # for the layer's error messages
        setattr(parent, child, replacement)
        for key in (*layer.keys, layer.name + ".bias"):
            if key in entries:
                checkpoint.release(key)
    for key, layer in match.dequantized.items():
        value = (_codes(checkpoint, layer).to(torch.float32)
                 * _scale(checkpoint, layer.scale_key, ()))
        _load_floats(model, checkpoint, {key: value})
        for used in layer.keys:
            checkpoint.release(used)
    fp8_keys = {key for layer, _ in match.linears.values()
                for key in layer.keys}
    biases = {layer.name + ".bias" for layer, _ in match.linears.values()}
    floats = [key for key in match.floats if key not in biases]
    for start in range(0, len(floats), 64):
        _load_floats(model, checkpoint, {key: checkpoint.tensor(key)
                                         for key in floats[start:start + 64]})
    put_buffers(model, rebuilt)
    tie_again(model, tied)
    if match.linears:
        attach_library_quantizer(model)
    return CheckpointReport(
        layout=plan.layout,
        fp8_layers={name: layer for name, (layer, _) in match.linears.items()},
        float_linear_layers=[name for name, module in model.named_modules()
                             if _is_linear(module)
                             and not isinstance(module, Linear)],
        float_keys=match.floats,
        dequantized_keys=sorted(match.dequantized),
        unexpected_keys=match.unexpected, missing_keys=match.missing,
        fp8_bytes=sum(nbytes(entries, key) for key in fp8_keys),
        float_bytes=sum(nbytes(entries, key) for key in match.floats),
        notes=plan.notes, rebuilt_keys=sorted(rebuilt), meta_keys=meta_keys)
