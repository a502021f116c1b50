"""fp8q as a quantization method of Hugging Face diffusers ("fp8q"), so
that a diffusers model (ModelMixin) that fp8q quantized saves and reloads
as FP8:

    fp8q.torch.quantize(unet)                       # or load_checkpoint
    unet.save_pretrained(out)    # FP8 codes, scales, a quantization_config
    unet = UNet2DConditionModel.from_pretrained(out)   # fp8q layers again

diffusers has no public API for custom methods: importing this module adds
fp8q's config and quantizer to the mappings its DiffusersAutoQuantizer
reads (diffusers.quantizers.auto.AUTO_QUANTIZATION_CONFIG_MAPPING and
AUTO_QUANTIZER_MAPPING), which fp8q.torch._register_transformers does as
soon as diffusers' quantizers are imported. A saved fp8q model (config.json's
quantization_config has quant_method "fp8q") is rebuilt with
fp8q.torch.Linear layers before its weights load, and their FP8 codes,
float32 scales and input scales load as saved whatever torch_dtype says. A
float folder loaded with quantization_config=Fp8qDiffusersConfig(...) is
quantized by fp8q.torch.quantize once its weights have loaded.

A model quantized in place gets the same quantizer (`attach`); each
save_pretrained describes the model as it is then (fp8q.torch._describe)
before it writes any file, and refuses one that one config cannot
describe (fp8q layers with different settings, Linear layers of another
method)."""
import json
import os

import torch
from diffusers.quantizers import auto as _auto
from diffusers.quantizers.base import DiffusersQuantizer
from diffusers.quantizers.quantization_config import QuantizationConfigMixin

from fp8q._checkpoint._layout_compressed import FP8Q_METADATA_KEY
from fp8q._safetensors import SafetensorsReader
from fp8q.torch import _describe, _fused_norm
from fp8q.torch._checkpoint_dtypes import CODES
from fp8q.torch._linear import STORAGE, Linear
from fp8q.torch._module_names import covered
from fp8q.torch._quantize import quantize, reads_per_token_codes

METHOD = "fp8q"
LIBRARY = "diffusers"


class _Method(str):
    """"fp8q" with the `.value` diffusers reads from its QuantizationMethod
    enum members (from_pretrained's user agent)."""

    @property
    def value(self):
        return str(self)


class Fp8qDiffusersConfig(QuantizationConfigMixin):
    """fp8q.torch.quantize's settings for diffusers' from_pretrained:
    weights ("e4m3" or "e5m2"), activations (None: weight-only, or "e4m3"),
    granularity ("row", "tensor" or "block"), modules_to_not_convert
    (None: every Linear layer fp8q.torch.quantize replaces; a list of
    module names kept in float, each covering the modules whose dotted
    path contains it as whole parts) and fuse_norms (fp8q.torch.quantize's,
    applied once the weights have loaded). Checked here, by the layer's
    constructor."""

    def __init__(self, weights="e4m3", activations=None, granularity="row",
                 modules_to_not_convert=None, fuse_norms=False, **kwargs):
        # kwargs: the rest of config.json's entry (its quant_method).
        _describe.check_settings("Fp8qDiffusersConfig", weights, activations,
                                 granularity, fuse_norms)
        self.quant_method = _Method(METHOD)
        self.weights = weights
        self.activations = activations
        self.granularity = granularity
        self.modules_to_not_convert = (
            None if modules_to_not_convert is None
            else list(modules_to_not_convert))
        self.fuse_norms = bool(fuse_norms)

    def to_dict(self):
        """config.json's quantization_config: every field, quant_method
        "fp8q" as a plain string."""
        return {**super().to_dict(), "quant_method": METHOD}

    def to_diff_dict(self):
        """to_dict(): every field (to_json_string and so repr read it)."""
        return self.to_dict()

    def settings(self):
        """The keyword arguments of fp8q.torch.quantize and Linear."""
        return {"weights": self.weights, "activations": self.activations,
                "granularity": self.granularity}


def describe_model(model, config=None):
    """The Fp8qDiffusersConfig that makes from_pretrained rebuild `model` as
    it is now: the settings its fp8q.torch.Linear layers share (`config`'s,
    else the defaults, for a model without any), fuse_norms, and as
    modules_to_not_convert the first of `config`'s own value and None
    (nothing kept in float) that selects exactly the Linear layers the
    model keeps in float, else their names. ValueError naming the layers
    when one config cannot describe the model (_describe.survey)."""
    fp8q_layers, float_layers = _describe.survey(model, LIBRARY)
    settings = _describe.shared_settings(fp8q_layers)
    if settings is None:
        settings = {} if config is None else config.settings()
    settings["fuse_norms"] = any(_fused_norm.is_fused(module)
                                 for module in model.modules())
    names = set(fp8q_layers) | set(float_layers)
    candidates = [None] if config is None else [
        config.modules_to_not_convert, None]
    for skipped in candidates:
        if {name for name in names if not _describe.covered(
                name, skipped or [])} == set(fp8q_layers):
            return Fp8qDiffusersConfig(modules_to_not_convert=skipped,
                                       **settings)
    return Fp8qDiffusersConfig(modules_to_not_convert=sorted(float_layers),
                               **settings)


def _set_config(model, config):
    """`config` as the model's quantization_config (config.json's)."""
    model.register_to_config(quantization_config=config)


def attach(model):
    """Makes `model` (a diffusers ModelMixin holding fp8q layers) save as
    fp8q: gives it fp8q's quantizer (model.hf_quantizer) and the config
    that describes it (model.config.quantization_config), unless it has
    fp8q's quantizer already. model.is_quantized is not set, so
    model.to(dtype) keeps working (it converts the float parts only).
    Returns the model."""
    if isinstance(getattr(model, "hf_quantizer", None), Fp8qDiffusersQuantizer):
        return model
    try:
        config = describe_model(model, Fp8qDiffusersConfig())
    except ValueError:
        config = Fp8qDiffusersConfig()  # save_pretrained refuses, naming them
    quantizer = Fp8qDiffusersQuantizer(config, pre_quantized=True)
    quantizer.model = model
    _set_config(model, config)
    model.hf_quantizer = quantizer
    return model


def _convert(model, dtype, keep_in_fp32_modules):
    """model's floating tensors converted to dtype, as diffusers' loading
    converts them: but those whose name keep_in_fp32_modules covers (as
    whole dotted parts, _module_names.covered), and the FP8 codes and
    scales of fp8q layers (Linear._apply keeps them)."""
    kept = {id(tensor) for name, tensor in (*model.named_parameters(),
                                            *model.named_buffers())
            if covered(name, keep_in_fp32_modules)}
    model._apply(lambda tensor: tensor if id(tensor) in kept
                 or not tensor.is_floating_point() else tensor.to(dtype))


def _checkpoint_entries(checkpoint_files):
    """Tensor name -> (safetensors dtype code, shape) of the safetensors
    files among checkpoint_files (their headers; no tensor is read)."""
    entries = {}
    for path in checkpoint_files or ():
        if str(path).endswith(".safetensors"):
            reader = SafetensorsReader(path)
            try:
                entries.update(reader.entries)
            finally:
                reader.close()
    return entries


class Fp8qDiffusersQuantizer(DiffusersQuantizer):
    """diffusers' hooks for fp8q: an fp8q folder gets fp8q.torch.Linear
    layers (on the meta device, with room for the input_scale the
    checkpoint holds) before its weights load, and their FP8 codes and
    float32 scales are set as saved (no torch_dtype conversion); a float
    folder is quantized by fp8q.torch.quantize after its weights loaded.
    `model` is the model the quantizer describes at save_pretrained."""

    requires_calibration = False
    # The model's _keep_in_fp32_modules stay float32 (as a plain load keeps
    # them); fp8q.torch.quantize leaves their Linear layers in float.
    use_keep_in_fp32_modules = True

    def __init__(self, quantization_config, **kwargs):
        super().__init__(quantization_config, **kwargs)
        self.model = None
        self.loaded_keys = set()
        self.checkpoint_entries = {}  # the safetensors headers' tensors
        self.checkpoint_files = []
        self.torch_dtype = None  # update_torch_dtype's, for a saved model
        self.keep_in_fp32_modules = []

    def _skipped(self):
        return self.quantization_config.modules_to_not_convert or []

    def preprocess_model(self, model, **kwargs):
        """_process_model_before_weight_loading, without setting
        model.is_quantized."""
        # diffusers' own sets model.is_quantized, which refuses
        # model.to(dtype); an fp8q layer converts its float parts only.
        model.quantization_method = self.quantization_config.quant_method
        return self._process_model_before_weight_loading(model, **kwargs)

    def update_torch_dtype(self, torch_dtype):
        """torch_dtype for a float folder; None (and torch_dtype kept for
        after loading) for an fp8q folder."""
        # diffusers' loading converts every floating tensor of the
        # checkpoint but float8_e4m3fn ones to torch_dtype before a
        # quantizer sees it (float32 scales and e5m2 codes would lose
        # bits): an fp8q folder loads as saved, and the model is converted
        # after (Linear.to(dtype) converts the float parts only).
        if not self.pre_quantized:
            return torch_dtype
        self.torch_dtype = torch_dtype
        return None

    def maybe_update_loaded_keys(self, loaded_keys, checkpoint_files):
        """Records the checkpoint's tensor names and, for safetensors files,
        their dtypes and shapes (headers only), which the layers built
        before loading are checked against. Returns loaded_keys as is."""
        self.loaded_keys = set(loaded_keys)
        self.checkpoint_files = list(checkpoint_files or [])
        if self.pre_quantized:
            self.checkpoint_entries = _checkpoint_entries(checkpoint_files)
        return loaded_keys

    def _folder(self):
        """The checkpoint's folder (for messages), or "the checkpoint"."""
        if self.checkpoint_files:
            return os.path.dirname(str(self.checkpoint_files[0]))
        return "the checkpoint"

    def _check_float_weights(self, names):
        """ValueError when the checkpoint holds no weight_scale for a layer
        fp8q is about to build: the folder's config says fp8q, its
        weights are float."""
        missing = [name for name in names
                   if name + ".weight_scale" not in self.loaded_keys]
        if not missing:
            return
        shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
        raise ValueError(
            f"from_pretrained: {self._folder()}: config.json's "
            "quantization_config says quant_method \"fp8q\", but its weights "
            f"are float: no weight_scale for {len(missing)} of the "
            f"{len(names)} Linear layers fp8q would rebuild ({shown}). Such "
            "a folder is typically saved from a float model built from a "
            "quantized model's config (from_config(quantized.config) copies "
            "its quantization_config). Remove quantization_config from its "
            "config.json to load it as float, or quantize the model "
            "(fp8q.torch.quantize) before save_pretrained.")

    def _check_layer(self, name, layer):
        """ValueError when the checkpoint's header gives one of the layer's
        FP8 weight, weight_scale or input_scale another dtype or shape than
        the layer its quantization_config rebuilds holds (safetensors files
        only; diffusers converts each tensor to the layer's dtype before
        any later hook sees it)."""
        for leaf in STORAGE:
            entry = self.checkpoint_entries.get(f"{name}.{leaf}")
            current = getattr(layer, leaf, None)
            if entry is None or current is None:
                continue
            code, shape = entry
            expected = CODES.get(current.dtype, str(current.dtype))
            if code != expected or tuple(shape) != tuple(current.shape):
                raise ValueError(
                    f"from_pretrained: {name}.{leaf} is {code} of shape "
                    f"{tuple(shape)} in the checkpoint, the fp8q layer that "
                    f"its quantization_config rebuilds holds {expected} of "
                    f"shape {tuple(current.shape)}: the checkpoint does not "
                    "match its quantization_config "
                    f"({self.quantization_config.settings()})")

    def _process_model_before_weight_loading(self, model,
                                             keep_in_fp32_modules=None,
                                             **kwargs):
        """For an fp8q folder: checks the checkpoint against its
        quantization_config (_check_float_weights, _check_layer) and
        replaces the Linear layers it quantizes with fp8q.torch.Linear
        layers; a float folder is left as is."""
        self.modules_to_not_convert = self._skipped()
        self.keep_in_fp32_modules = list(keep_in_fp32_modules or [])
        if not self.pre_quantized:
            return model
        names = _describe.linear_names(model, self.modules_to_not_convert)
        self._check_float_weights(names)
        for name in names:
            module = model.get_submodule(name)
            weight = module.weight
            with torch.device(weight.device):
                layer = Linear(module.in_features, module.out_features,
                               bias=module.bias is not None,
                               dtype=(weight.dtype if weight.is_floating_point()
                                      else None),
                               **self.quantization_config.settings())
            if name + ".input_scale" in self.loaded_keys:
                # Room for the checkpoint's value (checked on the CPU).
                with torch.device("cpu"):
                    layer.set_input_scale(1.0)
            layer.set_name(name)  # for the layer's error messages
            self._check_layer(name, layer)
            parent_name, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent_name) if parent_name
                    else model, child, layer)
        return model

    def check_if_quantized_param(self, model, param_value, param_name,
                                 state_dict, **kwargs):
        """Whether param_name is the FP8 weight or a scale of an fp8q
        layer: create_quantized_param sets those, never converted to
        from_pretrained's torch_dtype."""
        module_name, _, leaf = param_name.rpartition(".")
        if leaf not in STORAGE:
            return False
        try:
            module = model.get_submodule(module_name)
        except AttributeError:
            return False
        return isinstance(module, Linear)

    def check_quantized_param_shape(self, param_name, current_param,
                                    loaded_param):
        """Called by diffusers for an fp8q layer's tensor whose checkpoint
        shape differs from the layer's (a .bin checkpoint; a safetensors
        one was checked before loading): always a ValueError."""
        raise ValueError(
            f"from_pretrained: {param_name} has shape "
            f"{tuple(loaded_param.shape)} in the checkpoint, the fp8q layer "
            f"that its quantization_config rebuilds holds "
            f"{tuple(current_param.shape)}: the checkpoint does not match "
            f"its quantization_config ({self.quantization_config.settings()})")

    def create_quantized_param(self, model, param_value, param_name,
                               target_device, state_dict,
                               unexpected_keys=None, **kwargs):
        """Sets an fp8q layer's FP8 weight or scale as diffusers passes it
        (already in the layer's dtype). A safetensors checkpoint's dtype
        and shape were checked before loading (_check_layer); a .bin
        checkpoint's are not read beforehand, so only its shapes are
        checked (check_quantized_param_shape) and a dtype its config does
        not name is converted, as docs/torch.md says."""
        from accelerate.utils import set_module_tensor_to_device
        set_module_tensor_to_device(model, param_name, target_device,
                                    value=param_value)

    def _process_model_after_weight_loading(self, model, **kwargs):
        """Quantizes a float folder's model (fp8q.torch.quantize), or converts
        an fp8q folder's float parts to torch_dtype and fuses its norms;
        then describes the model as its quantization_config."""
        self.model = model
        fuse_norms = self.quantization_config.fuse_norms
        if not self.pre_quantized:
            linears = _describe.linear_names(model, self.modules_to_not_convert)
            model.hf_quantizer = self  # quantize's attach keeps this one
            if linears:
                quantize(model, include=linears, fuse_norms=fuse_norms,
                         **self.quantization_config.settings())
        else:
            if self.torch_dtype is not None:
                _convert(model, self.torch_dtype, self.keep_in_fp32_modules)
            if fuse_norms:
                _fused_norm.fuse_decoder_norms(model, reads_per_token_codes)
        # What the model holds now: the config save_pretrained writes.
        self.quantization_config = describe_model(model,
                                                  self.quantization_config)
        _set_config(model, self.quantization_config)
        return model

    @property
    def is_serializable(self):
        """save_pretrained's first check, before it writes any file: the
        config of the model as it is now (describe_model; ValueError when
        one config cannot describe it) becomes the model's and the
        quantizer's, so config.json says what the weights hold."""
        if self.model is not None:
            config = describe_model(self.model, self.quantization_config)
            if config.to_dict() != self.quantization_config.to_dict():
                self.quantization_config = config
                _set_config(self.model, config)
        return True

    def get_state_dict_and_metadata(self, state_dict, safe_serialization=False):
        """The state dict unchanged, and as each safetensors file's metadata
        the config's JSON (fp8q_quantization_config), so fp8q's
        load_checkpoint reads a file alone with it."""
        return state_dict, {FP8Q_METADATA_KEY: json.dumps(
            self.quantization_config.to_dict(), sort_keys=True)}

    @property
    def is_trainable(self):
        """True, as transformers' quantizer says: LoRA adapters (peft,
        diffusers' load_lora_adapter) on fp8q layers train, as do the
        model's float parts; the FP8 weights and their scales never do
        (requires_grad False). diffusers 0.42 itself does not read it."""
        return True

    @property
    def is_compileable(self):
        """True: fp8q layers run under torch.compile (custom operators)."""
        return True


_auto.AUTO_QUANTIZATION_CONFIG_MAPPING[METHOD] = Fp8qDiffusersConfig
_auto.AUTO_QUANTIZER_MAPPING[METHOD] = Fp8qDiffusersQuantizer
