"""peft's own LoRA merge on fp8q.torch.Linear base layers.

peft's lora.Linear.merge adds the adapter to `base_layer.weight.data`, which
torch refuses for FP8 codes ("Promotion for Float8 Types is not supported").
So that merge_and_unload(), merge_adapter() and diffusers' fuse_lora() give
the merged FP8 model, peft's lora.Linear.merge and unmerge are wrapped once,
as soon as peft.tuners.lora.layer is imported (before or after fp8q.torch):
a layer whose base is an fp8q.torch.Linear merges as fp8q.torch.merge_lora
does (dequantize, add in float32, re-quantize with fresh scales); every other
layer runs peft's own code, unchanged. peft's unmerge of such a layer raises
a RuntimeError that says why (the re-quantized weight cannot be taken apart)
and what to do.

peft's DoRA (LoraConfig(use_dora=True)) reads the base layer's weight
through peft.utils.integrations.dequantize_module_weight (as it does for
bitsandbytes' and HQQ's layers), which returns the FP8 codes of an
fp8q.torch.Linear: torch then refuses the arithmetic ("Promotion for Float8
Types is not supported"). That function is wrapped too, in peft's module
and in the LoRA modules that imported it by name, so that an
fp8q.torch.Linear gives its dequantized weight (in its compute_dtype, what
its W8A16 forward multiplies by) and every other layer peft's own result.
"""
import torch

from fp8q.torch import _ops
from fp8q.torch._after_import import after_import
from fp8q.torch._linear import Linear
from fp8q.torch._lora import merge_layer

_LAYER_MODULE = "peft.tuners.lora.layer"
# The modules holding peft's dequantize_module_weight under that name:
# its own and those that import it by name (DoRA's weight norm and merge).
_DEQUANTIZE_MODULES = ("peft.utils.integrations", "peft.tuners.lora.dora",
                       "peft.tuners.lora.variants", _LAYER_MODULE)


def _wrap(peft_linear):
    """Wraps peft_linear.merge and .unmerge (once)."""
    if getattr(peft_linear, "_fp8q_merges", False):
        return
    peft_merge = peft_linear.merge
    peft_unmerge = peft_linear.unmerge

    def merge(self, safe_merge=False, adapter_names=None):
        if not isinstance(self.get_base_layer(), Linear):
            return peft_merge(self, safe_merge=safe_merge,
                              adapter_names=adapter_names)
        # Checked before anything is stored, as safe_merge asks.
        merge_layer("peft merge", self, adapter_names)
        return None

    def unmerge(self):
        if not (isinstance(self.get_base_layer(), Linear) and self.merged):
            return peft_unmerge(self)
        raise RuntimeError(
            "fp8q.torch.Linear: peft cannot unmerge adapters "
            f"{list(self.merged_adapters)} from an FP8 base layer: the merge "
            "re-quantized its weight (fp8q.torch.merge_lora), which cannot "
            "be taken apart. Reload the base model without the merge "
            "instead")

    merge.__doc__ = peft_merge.__doc__
    merge.__wrapped__ = peft_merge
    unmerge.__doc__ = peft_unmerge.__doc__
    unmerge.__wrapped__ = peft_unmerge
    peft_linear.merge = merge
    peft_linear.unmerge = unmerge
    peft_linear._fp8q_merges = True


def _wrap_module(module):
    peft_linear = getattr(module, "Linear", None)
    if (isinstance(peft_linear, type) and hasattr(peft_linear, "merge")
            and hasattr(peft_linear, "unmerge")):
        _wrap(peft_linear)


def dequantized_weight(layer):
    """An fp8q.torch.Linear's weight dequantized into its compute_dtype on
    its device, as a new tensor that does not require grad."""
    with torch.no_grad():
        return _ops.dequantize_weight(
            torch.empty(0, dtype=layer.compute_dtype,
                        device=layer.weight.device),
            layer.weight, layer.weight_scale, layer.granularity)


def _wrap_dequantize(module):
    """Replaces module.dequantize_module_weight (once) by a function giving
    an fp8q.torch.Linear's dequantized weight, peft's result otherwise."""
    peft_dequantize = getattr(module, "dequantize_module_weight", None)
    if peft_dequantize is None or getattr(peft_dequantize, "_fp8q", False):
        return

    def dequantize_module_weight(layer):
        if isinstance(layer, Linear):
            return dequantized_weight(layer)
        return peft_dequantize(layer)

    dequantize_module_weight.__doc__ = peft_dequantize.__doc__
    dequantize_module_weight.__wrapped__ = peft_dequantize
    dequantize_module_weight._fp8q = True
    module.dequantize_module_weight = dequantize_module_weight


def install():
    """Makes peft's merge of fp8q.torch.Linear base layers re-quantize, and
    peft's dequantize_module_weight (DoRA) dequantize them: now where peft's
    modules are imported, else when they are."""
    after_import(_LAYER_MODULE, _wrap_module)
    for name in _DEQUANTIZE_MODULES:
        after_import(name, _wrap_dequantize)
