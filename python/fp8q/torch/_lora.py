"""fp8q.torch.merge_lora: merges peft LoRA adapters into the FP8 weights of
fp8q.torch.Linear base layers (dequantize, add, re-quantize). peft's own
merge (merge_and_unload, diffusers' fuse_lora) adds the adapter to
`weight.data`, which torch refuses for FP8 codes."""
import torch

from fp8q.torch import _ops
from fp8q.torch._linear import Linear


def _is_dora(module, adapter):
    """Whether `adapter` of peft LoRA layer `module` is a DoRA adapter."""
    return bool(getattr(module, "use_dora", {}).get(adapter)
                and adapter in getattr(module, "lora_magnitude_vector", {}))


def _adapters_to_merge(name, module, adapter_names):
    """The adapters of peft LoRA layer `module` to merge: adapter_names
    (default: its active adapters) that it has and has not merged yet.
    ValueError naming the layer for an adapter whose merge is neither
    W + B @ A * scaling nor DoRA's (the other variants, a LoRA bias), and
    for a DoRA adapter on a layer that has merged adapters already (its
    weight norm needs the weight without them, which the re-quantized
    weight no longer holds apart)."""
    wanted = (module.active_adapters if adapter_names is None
              else adapter_names)
    chosen = [adapter for adapter in wanted
              if adapter in module.lora_A
              and adapter not in module.merged_adapters]
    for adapter in chosen:
        if getattr(module, "lora_bias", {}).get(adapter) or (
                adapter in getattr(module, "lora_variant", {})
                and not _is_dora(module, adapter)):
            raise ValueError(
                f"merge_lora: {name!r}: adapter {adapter!r} is a LoRA "
                "variant other than DoRA or has a bias; fp8q merges plain "
                "LoRA (W + B @ A * scaling) and DoRA only. Keep the adapter "
                "unmerged")
        if _is_dora(module, adapter) and module.merged_adapters:
            raise ValueError(
                f"merge_lora: {name!r}: DoRA adapter {adapter!r} cannot be "
                f"merged after {list(module.merged_adapters)}: its weight "
                "norm needs the base weight without them, and the merge "
                "re-quantized it. Merge all adapters in one call, or keep "
                "this one unmerged")
    return chosen


def merge_lora(model, adapter_names=None):
    """Merges peft LoRA adapters into the fp8q.torch.Linear layers they
    adapt, in place, and returns the names of the merged layers.

    For every peft LoRA layer of `model` (a PeftModel, or a model with
    adapters loaded by peft or diffusers) whose base layer is an
    fp8q.torch.Linear, the adapters `adapter_names` (default: the layer's
    active adapters) not merged yet are merged: W' = quantize(dequantize(W)
    + sum of the adapters' B @ A * scaling), computed in float32 and
    re-quantized with fresh scales in the layer's format and granularity
    (exactly fp8q.quantize of the float32 sum). A DoRA adapter merges as
    peft merges it, in float32 too: the sum so far S becomes
    m / ||W + dW|| * (S + dW), the norm taken row by row, with W the
    dequantized weight before this merge, dW = B @ A * scaling and m the
    adapter's magnitude vector. So the merged layer differs
    from the float merge by one FP8 rounding of each weight (e4m3: at most
    2**-4 relative to the weight, 2**-9 of its group's scale near zero),
    as any FP8 checkpoint of the merged model would. The adapters are then
    recorded as merged by peft (`merged_adapters`), so the layer computes
    with the merged base alone, peft's merge_and_unload() and diffusers'
    fuse_lora() leave it as it is (and merge the float layers themselves),
    and unload() keeps the merged base. peft's unmerge cannot undo it
    (torch refuses arithmetic on FP8 codes).

    ValueError naming the layer for a LoRA variant other than DoRA, an
    adapter with a bias, a DoRA adapter on a layer that merged adapters
    before (its weight norm needs the weight without them), or a merged
    weight that is not finite."""
    merged = []
    for name, module in model.named_modules():
        base = getattr(module, "base_layer", None)
        if not (isinstance(base, Linear)
                and hasattr(module, "get_delta_weight")):
            continue
        if merge_layer(name, module, adapter_names):
            merged.append(name)
    return merged


def merge_layer(name, module, adapter_names=None):
    """merge_lora's merge of one peft LoRA layer `module` (named `name` in
    messages) whose base layer is an fp8q.torch.Linear; returns whether an
    adapter was merged."""
    base = module.base_layer
    adapters = _adapters_to_merge(name, module, adapter_names)
    if not adapters:
        return False
    with torch.no_grad():
        weight = _ops.dequantize_weight(
            torch.empty(0, device=base.weight.device), base.weight,
            base.weight_scale, base.granularity)
        base_weight = (weight.clone() if any(
            _is_dora(module, adapter) for adapter in adapters) else None)
        for adapter in adapters:
            delta = module.get_delta_weight(adapter).float()
            if _is_dora(module, adapter):
                # peft's DoRA merge: the norm of each row of the weight
                # without the merged adapters plus this one's delta.
                norm = torch.linalg.norm(base_weight + delta, dim=1)
                magnitude = module.lora_magnitude_vector[adapter].weight
                weight = ((magnitude.float() / norm).view(-1, 1)
                          * (weight + delta))
            else:
                weight += delta
        if not torch.isfinite(weight).all():
            raise ValueError(f"merge_lora: {name!r}: the merged weight "
                             "holds NaN or infinity")
        codes, scale = _ops.quantize_weight(weight, base.weight.dtype,
                                            base.granularity)
    base._set_storage(codes, scale, base.bias)
    module.merged_adapters.extend(adapters)
    return True
