"""fp8q as a quantization method of Hugging Face transformers, through its
public API for custom methods (register_quantization_config,
register_quantizer, HfQuantizer):

    from fp8q.torch import Fp8qConfig
    model = AutoModelForCausalLM.from_pretrained(
        path, quantization_config=Fp8qConfig(activations="e4m3"))
    model.save_pretrained(out)                    # FP8 codes + scales
    model = AutoModelForCausalLM.from_pretrained(out)   # FP8 again

A float checkpoint loads as usual and is then quantized by
fp8q.torch.quantize. A saved fp8q model (config.json's quantization_config
has quant_method "fp8q") is rebuilt with fp8q.torch.Linear layers before its
weights load, so the FP8 codes, scales and static input scales load as they
were saved. Importing this module (touching fp8q.torch.Fp8qConfig) registers
the method; it imports transformers.
"""
import torch
from transformers.quantizers import (HfQuantizer, register_quantization_config,
                                     register_quantizer)
from transformers.utils.quantization_config import QuantizationConfigMixin

from fp8q._safetensors import SafetensorsReader
from fp8q.torch._linear import Linear
from fp8q.torch._quantize import quantize

METHOD = "fp8q"


@register_quantization_config(METHOD)
class Fp8qConfig(QuantizationConfigMixin):
    """fp8q.torch.quantize's settings for transformers' from_pretrained:
    weights ("e4m3" or "e5m2"), activations (None: weight-only, or
    "e4m3": FP8 activations, per token until calibrated), granularity
    ("row", "tensor" or "block"), and modules_to_not_convert: module names
    kept in float, matched as transformers' quantizers match them (a name
    matches the modules whose dotted path contains it as whole parts, and
    everything under them); None keeps transformers' default,
    the output embeddings (lm_head) and weights tied to them. The values
    are checked here, by the layer's constructor."""

    def __init__(self, weights="e4m3", activations=None, granularity="row",
                 modules_to_not_convert=None, **kwargs):
        # kwargs: the rest of config.json's entry (its quant_method).
        Linear(0, 0, weights=weights, activations=activations,
               granularity=granularity)
        self.quant_method = METHOD
        self.weights = weights
        self.activations = activations
        self.granularity = granularity
        self.modules_to_not_convert = modules_to_not_convert

    def settings(self):
        """The keyword arguments of fp8q.torch.quantize and Linear."""
        return {"weights": self.weights, "activations": self.activations,
                "granularity": self.granularity}


def _linear_names(model, skipped):
    """Names of model's nn.Linear modules that no name in `skipped`
    covers (as whole dotted parts: "lm_head" covers "lm_head", "mlp"
    covers "layers.0.mlp.up_proj")."""
    return [name for name, module in model.named_modules()
            if isinstance(module, torch.nn.Linear)
            and not isinstance(module, Linear)
            and not any(f".{skip}." in f".{name}." for skip in skipped)]


def _checkpoint_keys(checkpoint_files):
    """Tensor names of the safetensors files (their headers)."""
    keys = set()
    for path in checkpoint_files or ():
        if str(path).endswith(".safetensors"):
            reader = SafetensorsReader(path)
            keys.update(reader.entries)
            reader.close()
    return keys


@register_quantizer(METHOD)
class Fp8qHfQuantizer(HfQuantizer):
    """transformers' hooks for fp8q: a float checkpoint is quantized by
    fp8q.torch.quantize after its weights loaded; an fp8q checkpoint gets
    fp8q.torch.Linear layers (on the meta device, with room for the
    input_scale the checkpoint holds) before they load."""

    requires_calibration = False

    def _skipped(self, model):
        return self.get_modules_to_not_convert(
            model, self.quantization_config.modules_to_not_convert)

    def _process_model_before_weight_loading(self, model,
                                             checkpoint_files=None,
                                             **kwargs):
        self.modules_to_not_convert = self._skipped(model)
        if not self.pre_quantized:
            return model
        keys = _checkpoint_keys(checkpoint_files)
        for name in _linear_names(model, self.modules_to_not_convert):
            module = model.get_submodule(name)
            with torch.device(module.weight.device):
                layer = Linear(module.in_features, module.out_features,
                               bias=module.bias is not None,
                               **self.quantization_config.settings())
            if name + ".input_scale" in keys:
                # Room for the checkpoint's value (checked on the CPU,
                # whatever device transformers builds the model on).
                with torch.device("cpu"):
                    layer.set_input_scale(1.0)
            layer.set_name(name)  # for the layer's error messages
            parent_name, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent_name), child, layer)
        return model

    def _process_model_after_weight_loading(self, model, **kwargs):
        if not self.pre_quantized:
            linears = _linear_names(model, self.modules_to_not_convert)
            if linears:
                quantize(model, include=linears,
                         **self.quantization_config.settings())
        return model

    def is_serializable(self):
        return True

    @property
    def is_trainable(self):
        # The FP8 weights never train; adapters on fp8q layers are issue 26.
        return False

    @property
    def is_compileable(self):
        return True
