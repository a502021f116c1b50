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
were saved. Importing this module registers the method (it imports
transformers; fp8q.torch._register_transformers imports it as soon as
transformers' quantizers are imported).

A model quantized in place (fp8q.torch.quantize, fp8q.torch.load_checkpoint)
gets the same quantizer (`attach`), and every save_pretrained writes the
quantization_config that describes the model as it is then: its fp8q
layers' settings and the Linear layers left in float. A model that one
config cannot describe (fp8q layers with different settings, Linear layers
quantized by another method) is refused before any file is written.
"""
import json
import logging

import torch
from transformers.quantizers import (HfQuantizer, register_quantization_config,
                                     register_quantizer)
from transformers.utils.quantization_config import QuantizationConfigMixin

from fp8q._checkpoint._layout_compressed import FP8Q_METADATA_KEY
from fp8q._safetensors import SafetensorsReader
from fp8q.torch import _describe, _fused_norm
from fp8q.torch._linear import Linear
from fp8q.torch._quantize import (quantize, reads_per_token_codes,
                                  warn_transposed_linears)

METHOD = "fp8q"
logger = logging.getLogger("fp8q.torch")


@register_quantization_config(METHOD)
class Fp8qConfig(QuantizationConfigMixin):
    """fp8q.torch.quantize's settings for transformers' from_pretrained:
    weights ("e4m3" or "e5m2"), activations (None: weight-only, or
    "e4m3": FP8 activations, per token until calibrated), granularity
    ("row", "tensor" or "block"), and modules_to_not_convert: module names
    kept in float, matched as transformers' quantizers match them (a name
    matches the modules whose dotted path contains it as whole parts, and
    everything under them); None keeps transformers' default,
    the output embeddings (lm_head) and weights tied to them; fuse_norms
    (False): fp8q.torch.quantize's fuse_norms, applied once the weights
    have loaded (the norms' probe reads them), so a saved model whose
    norms were fused is fused again by from_pretrained. The values are
    checked here, by the layer's constructor (fuse_norms=True needs
    activations="e4m3" and "row" or "tensor" granularity)."""

    def __init__(self, weights="e4m3", activations=None, granularity="row",
                 modules_to_not_convert=None, fuse_norms=False, **kwargs):
        # kwargs: the rest of config.json's entry (its quant_method).
        _describe.check_settings("Fp8qConfig", weights, activations,
                                 granularity, fuse_norms)
        self.quant_method = METHOD
        self.weights = weights
        self.activations = activations
        self.granularity = granularity
        self.modules_to_not_convert = modules_to_not_convert
        self.fuse_norms = bool(fuse_norms)

    def settings(self):
        """The keyword arguments of fp8q.torch.quantize and Linear."""
        return {"weights": self.weights, "activations": self.activations,
                "granularity": self.granularity}


def _refuse_fp8_where_kept_float(model, skipped, keys):
    """ValueError when the checkpoint (its safetensors `keys`) holds the
    weight_scale of an nn.Linear that `skipped` does not cover but fp8q
    keeps in float (replaceable_linears: T5's wo, MultiheadAttention's
    out_proj), quantized by an fp8q before that rule: its FP8 codes loaded
    into a float Linear would read as numbers, and as an fp8q layer the
    model cannot run (its owner reads the weight's dtype or the weight)."""
    chosen = set(_describe.linear_names(model, skipped))
    stale = [name for name, module in model.named_modules()
             if isinstance(module, torch.nn.Linear) and name not in chosen
             and not isinstance(module, Linear)
             and f"{name}.weight_scale" in keys
             and not _describe.covered(name, skipped)]
    if stale:
        raise ValueError(
            f"from_pretrained: the checkpoint holds FP8 weights for "
            f"{', '.join(stale[:3])}{', ...' if len(stale) > 3 else ''}, "
            "which fp8q keeps in float: the model reads them directly or "
            "keeps them in float32 (_keep_in_fp32_modules, such as T5's "
            "wo), so a model saved with them quantized (by an older fp8q) "
            "cannot run. Quantize the float model again with this fp8q "
            "and save it")


def _check_ties(model, fp8q_layers):
    """ValueError when the model's config ties the weight of an fp8q layer
    to another tensor (tie_word_embeddings with a quantized lm_head):
    quantizing untied them, and from_pretrained would tie them again."""
    expand = getattr(model, "get_expanded_tied_weights_keys", None)
    tied = expand(all_submodels=True) if expand is not None else {}
    for target, source in tied.items():
        for key, other in ((target, source), (source, target)):
            name = key.removesuffix(".weight")
            if key.endswith(".weight") and name in fp8q_layers:
                raise ValueError(
                    f"save_pretrained: {name} is an fp8q layer, but the "
                    f"model's config ties {key} to {other} "
                    "(tie_word_embeddings=True), so from_pretrained would "
                    "tie them again over the FP8 weight. Quantize with "
                    f"exclude=[{name!r}] to keep the tie (and that layer in "
                    "float), or set model.config.tie_word_embeddings = "
                    f"False to save {name} as its own FP8 layer")


def describe_model(model, config=None):
    """The Fp8qConfig that makes from_pretrained rebuild `model` as it is
    now: the settings its fp8q.torch.Linear layers share, and as
    modules_to_not_convert the first of `config`'s own value and
    transformers' default (None) that selects exactly the Linear layers
    the model keeps in float, else their names. A model
    without fp8q layers keeps `config`'s settings (or the defaults).
    ValueError naming the layers when one config cannot describe the
    model: fp8q layers with different settings, a Linear layer whose
    weight is not floating point (another quantization method's), or an
    fp8q layer whose weight the config ties to another tensor."""
    fp8q_layers, float_layers = _describe.survey(model, "transformers")
    _check_ties(model, fp8q_layers)
    settings = _describe.shared_settings(fp8q_layers)
    if settings is None:
        settings = config.settings() if config is not None else {}
    # Fused norms are recorded so from_pretrained fuses them again.
    settings["fuse_norms"] = any(_fused_norm.is_fused(module)
                                 for module in model.modules())
    candidates = [] if config is None else [config.modules_to_not_convert,
                                            None]
    for skipped in candidates:
        resolved = HfQuantizer.get_modules_to_not_convert(model, skipped)
        if {name for name in (*fp8q_layers, *float_layers)
                if not _describe.covered(name, resolved)} == set(fp8q_layers):
            return Fp8qConfig(modules_to_not_convert=skipped, **settings)
    return Fp8qConfig(modules_to_not_convert=sorted(float_layers), **settings)


def attach(model):
    """Makes `model` (a transformers PreTrainedModel holding fp8q layers)
    save as fp8q: gives it fp8q's quantizer (model.hf_quantizer) and the
    Fp8qConfig that describes it (model.config.quantization_config), as
    from_pretrained(..., quantization_config=Fp8qConfig(...)) does, unless
    it has fp8q's quantizer already. Each save_pretrained describes the
    model again (Fp8qHfQuantizer.get_state_dict_and_metadata), and
    refuses one that no config describes (fp8q layers with different
    settings: meanwhile the config given here is the defaults). Returns
    the model."""
    if isinstance(getattr(model, "hf_quantizer", None), Fp8qHfQuantizer):
        return model
    try:
        # transformers' default (None) where it fits: a model's config is
        # shared with the models inside it, and quantize(model.model)'s
        # config then serves its parent's save too (lm_head in float).
        config = describe_model(model, Fp8qConfig())
    except ValueError:
        config = Fp8qConfig()  # save_pretrained refuses, naming the layers
    model.config.quantization_config = config
    model.hf_quantizer = Fp8qHfQuantizer(config, pre_quantized=True)
    return model


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
        _refuse_fp8_where_kept_float(model, self.modules_to_not_convert, keys)
        for name in _describe.linear_names(model,
                                           self.modules_to_not_convert):
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
        fuse_norms = getattr(self.quantization_config, "fuse_norms", False)
        if not self.pre_quantized:
            linears = _describe.linear_names(model,
                                             self.modules_to_not_convert)
            skipped = self.modules_to_not_convert
            warn_transposed_linears(
                model, lambda name: not _describe.covered(name, skipped),
                caller="from_pretrained", stacklevel=6)
            if linears:
                quantize(model, include=linears, fuse_norms=fuse_norms,
                         **self.quantization_config.settings())
                return model
        if fuse_norms:
            # A saved fused model: its layers loaded, the norms fuse again
            # (the same choice quantize makes; the summary's log says
            # which).
            fused, unfused = _fused_norm.fuse_decoder_norms(
                model, reads_per_token_codes)
            logger.info("fp8q.torch: from_pretrained fused %d norms with "
                        "the activation quantize%s", len(fused), "".join(
                            f"; {name} left unfused: {reason}"
                            for name, reason in unfused))
        return model

    def is_serializable(self):
        return True

    def get_state_dict_and_metadata(self, model):
        """save_pretrained's hook, before any file is written: the
        quantization_config of the model as it is now (describe_model;
        ValueError when one config cannot describe it) becomes the model's
        and the quantizer's, and its JSON goes into the metadata of every
        safetensors file (fp8q reads a file alone with it)."""
        config = describe_model(model, self.quantization_config)
        if config.to_dict() != self.quantization_config.to_dict():
            self.quantization_config = config
            model.config.quantization_config = config
        return None, {FP8Q_METADATA_KEY: json.dumps(
            self.quantization_config.to_dict(), sort_keys=True)}

    @property
    def is_trainable(self):
        """True: transformers' Trainer takes the model with adapters (peft
        LoRA trains on fp8q layers: docs/torch.md); the FP8 weights
        themselves never train. Trainer refuses a model from_pretrained
        quantized (is_quantized) without adapters; one quantized in place
        is not marked so, and Trainer trains its float parameters only."""
        return True

    @property
    def is_compileable(self):
        return True
