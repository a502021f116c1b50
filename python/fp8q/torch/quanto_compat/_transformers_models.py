"""quanto_compat.QuantizedTransformersModel / QuantizedModelForCausalLM:
optimum-quanto's wrappers that quantize a transformers model and save and
reload it with its quantization map. Imported on first use, and only
when transformers is installed (quanto_compat.__getattr__)."""
import json
import os

import transformers
from safetensors.torch import load_file

from fp8q.torch.quanto_compat._qlinear import QModuleMixin
from fp8q.torch.quanto_compat._quantize import (freeze, quantization_map,
                                                quantize, requantize)

# The quantization map's file name beside the weights, as quanto's.
QMAP_NAME = "quanto_qmap.json"


def _load_state_dict(directory):
    """The state dict saved in `directory` by save_pretrained: one
    model.safetensors, or the shards a model.safetensors.index.json
    lists (all read into memory)."""
    index = os.path.join(directory, transformers.utils.SAFE_WEIGHTS_INDEX_NAME)
    if os.path.exists(index):
        with open(index, encoding="utf-8") as file:
            shards = sorted(set(json.load(file)["weight_map"].values()))
        state_dict = {}
        for shard in shards:
            state_dict.update(load_file(os.path.join(directory, shard)))
        return state_dict
    single = os.path.join(directory, transformers.utils.SAFE_WEIGHTS_NAME)
    if not os.path.exists(single):
        raise ValueError(f"from_pretrained: no safetensors weights in "
                         f"{directory}")
    return load_file(single)


def _empty_weights():
    """A context building a model without initializing its weights:
    accelerate's init_empty_weights (parameters on the meta device) when
    installed, as quanto, else transformers' no_init_weights (parameters
    on the CPU, not initialized)."""
    try:
        from accelerate import init_empty_weights
    except ImportError:
        from transformers.initialization import no_init_weights
        return no_init_weights()
    return init_empty_weights()


class QuantizedTransformersModel:
    """A quantized transformers model, as optimum-quanto's wrapper: calls
    and unknown attributes go to the wrapped PreTrainedModel. Build one
    with quantize(); save_pretrained() writes the model
    (save_pretrained, safetensors: fp8q's FP8 codes and scales) and
    quanto_qmap.json; from_pretrained() of a subclass with an
    `auto_class` (QuantizedModelForCausalLM) reloads it. The files are
    fp8q's, not quanto's (quanto writes weight._data / weight._scale)."""

    auto_class = None

    def __init__(self, model):
        if (not isinstance(model, transformers.PreTrainedModel)
                or not quantization_map(model)):
            raise ValueError("model: expected a transformers model "
                             "quantized by quanto_compat.quantize")
        self._wrapped = model

    def __getattr__(self, name):
        try:
            wrapped = self.__dict__["_wrapped"]
        except KeyError:  # while copy or pickle rebuild the object
            raise AttributeError(name) from None
        return getattr(wrapped, name)

    def __call__(self, *args, **kwargs):
        return self._wrapped(*args, **kwargs)

    def forward(self, *args, **kwargs):
        return self._wrapped.forward(*args, **kwargs)

    def __repr__(self):
        return repr(self._wrapped)

    @classmethod
    def quantize(cls, model, weights=None, activations=None, optimizer=None,
                 include=None, exclude=None):
        """quanto_compat.quantize(model, ...) then freeze(model) (so the
        weights are FP8 at once, as quanto's wrapper does), wrapped in
        cls. ValueError when model is not a transformers model."""
        if not isinstance(model, transformers.PreTrainedModel):
            raise ValueError("model: expected a transformers PreTrainedModel, "
                             f"got {type(model).__name__}")
        quantize(model, weights=weights, activations=activations,
                 optimizer=optimizer, include=include, exclude=exclude)
        freeze(model)
        return cls(model)

    def save_pretrained(self, save_directory, **kwargs):
        """The wrapped model's save_pretrained(save_directory,
        safe_serialization=True, **kwargs) plus quanto_qmap.json. A
        quantized output embedding unties it from the input one
        (config.tie_word_embeddings = False), as in quanto. push_to_hub is
        refused: the map is written after the model (push the folder with
        huggingface_hub's upload_folder)."""
        if kwargs.get("push_to_hub"):
            raise ValueError("save_pretrained: push_to_hub would upload the "
                             "model without quanto_qmap.json; save, then "
                             "push the folder with huggingface_hub's "
                             "upload_folder")
        model = self._wrapped
        if getattr(model.config, "tie_word_embeddings", False) and any(
                isinstance(module, QModuleMixin)
                for module in (model.get_input_embeddings(),
                               model.get_output_embeddings())):
            model.config.tie_word_embeddings = False
        model.save_pretrained(save_directory, safe_serialization=True,
                              **kwargs)
        with open(os.path.join(save_directory, QMAP_NAME), "w",
                  encoding="utf-8") as file:
            json.dump(quantization_map(model), file, indent=4)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, **kwargs):
        """Reloads what save_pretrained wrote (a folder, or a Hub
        repository through huggingface_hub.snapshot_download(**kwargs)):
        the config, a model built from it without initialized weights
        (cls.auto_class.from_config), requantize with the saved state
        dict and map, tied embeddings tied again, eval mode. ValueError
        on the base class (no auto_class) and without a quantization
        map."""
        if cls.auto_class is None:
            raise ValueError(
                f"from_pretrained: {cls.__name__} cannot build a model; use "
                "a class with an auto_class such as "
                "QuantizedModelForCausalLM")
        directory = str(pretrained_model_name_or_path)
        if not os.path.isdir(directory):
            from huggingface_hub import snapshot_download
            directory = snapshot_download(directory, **kwargs)
        qmap_path = os.path.join(directory, QMAP_NAME)
        if not os.path.exists(qmap_path):
            raise ValueError(f"from_pretrained: no {QMAP_NAME} in "
                             f"{pretrained_model_name_or_path}: is this a "
                             "model saved by save_pretrained?")
        with open(qmap_path, encoding="utf-8") as file:
            qmap = json.load(file)
        config = transformers.AutoConfig.from_pretrained(directory)
        with _empty_weights():
            model = cls.auto_class.from_config(config)
        tied = getattr(model.config, "tie_word_embeddings", False)
        if tied:
            # Tied before requantize too: accelerate's init_empty_weights
            # leaves the tied output embedding a meta tensor of its own,
            # which the saved state dict has no values for.
            model.tie_weights()
        requantize(model, _load_state_dict(directory), qmap)
        if tied:
            model.tie_weights()
        model.eval()
        return cls(model)


class QuantizedModelForCausalLM(QuantizedTransformersModel):
    """QuantizedTransformersModel reloading with AutoModelForCausalLM."""

    auto_class = transformers.AutoModelForCausalLM
