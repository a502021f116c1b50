"""Synthesizes FP8 checkpoints in every layout fp8q.torch.load_checkpoint
reads, from a tiny float model (odd dimensions, so partial 128x128 blocks
occur), and the float64 references the loaded layers are checked against.

Imported as `checkpoint_layouts` (pytest puts tests/ on sys.path).
"""
import json
import os

import torch

import fp8q
from fp8q.torch import _ops
from helpers import fp8_matmul_error_bound

FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
LINEARS = ("proj", "out", "head")
# Per-layer tolerance of the FP8 products against float64, relative to
# sum |x| |w|, by output dtype: the rounding of the dequantized weight (for
# W8A16) and of the products, sums and result in that dtype.
TOLERANCE = {torch.float32: 2e-6, torch.float16: 2e-3,
             torch.bfloat16: 1.6e-2}


class Tiny(torch.nn.Module):
    """x (..., 40) -> Linear 40->130 -> ReLU -> LayerNorm -> Linear
    130->200 (no bias) -> ReLU -> Linear 200->9."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(40, 130)
        self.norm = torch.nn.LayerNorm(130)
        self.out = torch.nn.Linear(130, 200, bias=False)
        self.head = torch.nn.Linear(200, 9)

    def forward(self, x):
        x = self.norm(torch.relu(self.proj(x)))
        return self.head(torch.relu(self.out(x)))


def tiny(seed=0):
    torch.manual_seed(seed)
    model = Tiny()
    with torch.no_grad():
        model.norm.weight.uniform_(0.5, 1.5)
        model.norm.bias.uniform_(-0.1, 0.1)
    return model


def quantized(model, granularity, fmt="e4m3"):
    """{layer: (codes, float32 scale in fp8q's shape)} of the Linears."""
    return {name: _ops.quantize_weight(
                getattr(model, name).weight.detach(), FP8[fmt], granularity)
            for name in LINEARS}


def floats(model, skip=("weight",)):
    """The float tensors, without the Linears' weights."""
    return {key: value.detach().clone()
            for key, value in model.state_dict().items()
            if not (key.split(".")[0] in LINEARS and key.endswith(skip))}


def input_scales():
    return {name: torch.tensor(0.02 + 0.01 * index)
            for index, name in enumerate(LINEARS)}


def layout(name, model, *, granularity="row", fmt="e4m3", static=False,
           dynamic=False):
    """(state dict, configs {file name: JSON}) of `model` in layout `name`:
    compressed-tensors, vllm-fp8, modelopt, finegrained, comfy-scaled,
    comfy-quant, plain, quanto."""
    state = floats(model)
    configs = {}
    scales = input_scales()
    if name == "plain":
        for layer in LINEARS:
            state[layer + ".weight"] = getattr(model, layer).weight.detach() \
                .to(FP8[fmt])
        return state, configs
    granularity = {"finegrained": "block", "modelopt": "tensor",
                   "comfy-scaled": "tensor", "comfy-quant": "tensor",
                   "quanto": "row"}.get(name, granularity)
    for layer, (codes, scale) in quantized(model, granularity, fmt).items():
        if name == "compressed-tensors" or name == "vllm-fp8":
            state[layer + ".weight"] = codes
            state[layer + ".weight_scale"] = (scale.reshape(1)
                                              if granularity == "tensor"
                                              else scale)
            if static:
                state[layer + ".input_scale"] = scales[layer].reshape(1)
        elif name == "modelopt":
            state[layer + ".weight"] = codes
            state[layer + ".weight_scale"] = scale
            state[layer + ".input_scale"] = scales[layer]
        elif name == "finegrained":
            state[layer + ".weight"] = codes
            state[layer + ".weight_scale_inv"] = scale
        elif name == "comfy-scaled":
            state[layer + ".weight"] = codes
            state[layer + ".scale_weight"] = scale
            if static:
                state[layer + ".scale_input"] = scales[layer]
        elif name == "comfy-quant":
            state[layer + ".weight"] = codes
            state[layer + ".weight_scale"] = scale
            state[layer + ".comfy_quant"] = torch.tensor(
                list(json.dumps({"format": str(FP8[fmt])[6:]}).encode()),
                dtype=torch.uint8)
            if static:
                state[layer + ".input_scale"] = scales[layer]
        elif name == "quanto":
            state[layer + ".weight._data"] = codes
            state[layer + ".weight._scale"] = scale.to(torch.bfloat16)
            state[layer + ".input_scale"] = (scales[layer] if static
                                             else torch.tensor(1.0)) \
                .to(torch.bfloat16)
            state[layer + ".output_scale"] = torch.tensor(1.0).to(
                torch.bfloat16)
        else:
            raise ValueError(name)
    if name == "comfy-scaled":
        state["scaled_fp8"] = torch.empty(0, dtype=FP8[fmt])
    if name == "compressed-tensors":
        inputs = ({"num_bits": 8, "type": "float", "strategy": "tensor",
                   "dynamic": False} if static else
                  {"num_bits": 8, "type": "float", "strategy": "token",
                   "dynamic": True} if dynamic else None)
        weights = {"num_bits": 8, "type": "float", "symmetric": True,
                   "strategy": {"row": "channel"}.get(granularity,
                                                      granularity)}
        if granularity == "block":
            weights["block_structure"] = [128, 128]
        configs["config.json"] = {"quantization_config": {
            "quant_method": "compressed-tensors", "format": "float-quantized",
            "config_groups": {"group_0": {
                "targets": ["Linear"], "weights": weights,
                "input_activations": inputs}}}}
    elif name == "vllm-fp8":
        configs["config.json"] = {"quantization_config": {
            "quant_method": "fp8",
            "activation_scheme": "static" if static else "dynamic"}}
    elif name == "modelopt":
        configs["hf_quant_config.json"] = {
            "producer": {"name": "modelopt"},
            "quantization": {"quant_algo": "FP8"}}
    elif name == "finegrained":
        configs["config.json"] = {"quantization_config": {
            "quant_method": "fp8", "activation_scheme": "dynamic",
            "weight_block_size": [128, 128]}}
    elif name == "quanto":
        qtype = "qfloat8_e4m3fn" if fmt == "e4m3" else "qfloat8_e5m2"
        configs["quanto_qmap.json"] = {
            layer: {"weights": qtype,
                    "activations": "qfloat8_e4m3fn" if static else "none"}
            for layer in LINEARS}
    return state, configs


def save(folder, state, configs=None, shards=1):
    """Writes `state` as `shards` safetensors files (with an index when
    more than one) and the configs into `folder`; returns the folder."""
    from safetensors.torch import save_file

    os.makedirs(folder, exist_ok=True)
    keys = list(state)
    weight_map = {}
    for shard in range(shards):
        file = (f"model-{shard + 1:05d}-of-{shards:05d}.safetensors"
                if shards > 1 else "model.safetensors")
        part = {key: state[key].contiguous() for key in keys[shard::shards]}
        save_file(part, os.path.join(folder, file))
        weight_map.update(dict.fromkeys(part, file))
    if shards > 1:
        with open(os.path.join(folder, "model.safetensors.index.json"),
                  "w") as file:
            json.dump({"weight_map": weight_map}, file)
    for name, config in (configs or {}).items():
        with open(os.path.join(folder, name), "w") as file:
            json.dump(config, file)
    return folder


def dequantized(codes, scale, granularity):
    """codes x scale in float64, block scales expanded over 128x128."""
    weight = codes.to(torch.float64)
    scale = scale.to(torch.float64)
    if granularity == "block":
        scale = scale.repeat_interleave(128, 0)[:weight.shape[0]] \
            .repeat_interleave(128, 1)[:, :weight.shape[1]]
    return weight * scale.reshape(scale.shape if scale.dim() else ())


def layer_reference(layer, x):
    """The float64 reference of an fp8q.torch.Linear on x: x (quantized to
    e4m3fn as the layer does: with its input_scale, per token, or in 1x128
    blocks for block weights, by fp8q.quantize) times the dequantized
    weight, plus the bias; and sum |x| |w| for the tolerance."""
    weight = dequantized(layer.weight.cpu(), layer.weight_scale.cpu(),
                         layer.granularity)
    rows = x.detach().cpu().reshape(-1, x.shape[-1]).to(torch.float32)
    if layer.activations is not None:
        if layer.input_scale is not None:
            q = fp8q.quantize(rows.numpy(), "e4m3",
                              scale=float(layer.input_scale))
        else:
            q = fp8q.quantize(rows.numpy(), "e4m3", granularity=(
                (1, 128) if layer.granularity == "block" else "row"))
        rows = torch.from_numpy(q.dequantize().numpy().astype("float64"))
    rows = rows.to(torch.float64)
    y = rows @ weight.T
    if layer.bias is not None:
        y = y + layer.bias.detach().cpu().to(torch.float64)
    return y, rows.abs() @ weight.abs().T


def check_layers(model, *args, **kwargs):
    """Runs `model(*args, **kwargs)` and checks every fp8q.torch.Linear's
    output against its float64 reference (hooks capture each layer's input);
    returns the model's output."""
    import fp8q.torch as fpt

    seen = []

    def hook(module, inputs, output):
        seen.append((module, inputs[0], output))

    handles = [module.register_forward_hook(hook)
               for module in model.modules() if isinstance(module, fpt.Linear)]
    try:
        with torch.no_grad():
            result = model(*args, **kwargs)
    finally:
        for handle in handles:
            handle.remove()
    assert seen, "no fp8q.torch.Linear ran"
    for module, inputs, output in seen:
        reference, magnitude = layer_reference(module, inputs)
        error = (output.cpu().reshape(reference.shape).to(torch.float64)
                 - reference).abs()
        if output.is_cuda and module.activations is not None:
            # The GPU's FP8 GEMM: its tensor cores' accumulation
            # (tests/helpers.py, from what the hardware does).
            bound = torch.from_numpy(fp8_matmul_error_bound(
                magnitude.numpy(), module.in_features,
                str(output.dtype).replace("torch.", ""),
                reference.numpy())) + 1e-30
        else:
            # A GPU's float GEMM sums in another order (and in blocks).
            factor = 8 if output.is_cuda else 1
            bound = (factor * TOLERANCE[output.dtype]
                     * (magnitude + reference.abs()) + 1e-30)
        assert bool((error <= bound).all()), (
            f"{module}: max error {float(error.max()):.3g}, bound "
            f"{float(bound.max()):.3g}")
    return result
