"""fp8q as Hugging Face transformers' quantization method "fp8q", without
importing transformers: `import fp8q.torch` registers it at once where
transformers' quantizers are imported already, else right after they are
(fp8q.torch._after_import), so from_pretrained of a folder that fp8q saved
rebuilds its FP8 layers whatever the import order. And the models fp8q
quantizes in place get fp8q's quantizer, so save_pretrained writes the
quantization_config that describes them (fp8q.torch._transformers).
The same for diffusers: its quantizers get the method "fp8q" when they
are imported, and a diffusers model that fp8q quantizes gets fp8q's
diffusers quantizer (fp8q.torch._diffusers)."""
import importlib
import warnings

from fp8q.torch._after_import import after_import

QUANTIZERS = "transformers.quantizers"
DIFFUSERS_QUANTIZERS = "diffusers.quantizers.auto"


def _register():
    """Imports fp8q.torch._transformers, which registers the method; a
    failure (a transformers without the custom-method API) is a warning,
    never an error inside transformers' own import."""
    try:
        importlib.import_module("fp8q.torch._transformers")  # registers
    except Exception as error:  # noqa: BLE001 (any failure: a warning)
        warnings.warn(f"fp8q could not register its transformers "
                      f"quantization method \"fp8q\": {error}", stacklevel=2)


def _register_diffusers():
    """Imports fp8q.torch._diffusers, which adds "fp8q" to diffusers'
    quantizer mappings; a failure is a warning, as _register's."""
    try:
        importlib.import_module("fp8q.torch._diffusers")  # registers
    except Exception as error:  # noqa: BLE001 (any failure: a warning)
        warnings.warn(f"fp8q could not register its diffusers "
                      f"quantization method \"fp8q\": {error}", stacklevel=2)


def install():
    """Registers fp8q with transformers and diffusers now if their
    quantizers are imported, else when they are."""
    after_import(QUANTIZERS, lambda module: _register())
    after_import(DIFFUSERS_QUANTIZERS, lambda module: _register_diffusers())


def is_transformers_model(model):
    """Whether `model` is a transformers PreTrainedModel (without importing
    transformers)."""
    return any(cls.__name__ == "PreTrainedModel"
               and cls.__module__ == "transformers.modeling_utils"
               for cls in type(model).__mro__)


def is_diffusers_model(model):
    """Whether `model` is a diffusers ModelMixin (without importing
    diffusers)."""
    return any(cls.__name__ == "ModelMixin"
               and cls.__module__ == "diffusers.models.modeling_utils"
               for cls in type(model).__mro__)


def attach_library_quantizer(model):
    """Gives a transformers PreTrainedModel holding fp8q layers fp8q's
    quantizer and quantization_config (fp8q.torch._transformers.attach),
    and a diffusers ModelMixin fp8q's diffusers quantizer and config
    (fp8q.torch._diffusers.attach); other models are left alone, and
    neither library is imported for them."""
    if is_transformers_model(model):
        from fp8q.torch._transformers import attach
        attach(model)
    elif is_diffusers_model(model):
        try:
            from fp8q.torch._diffusers import attach
        except Exception as error:  # noqa: BLE001 (any failure: a warning)
            warnings.warn(
                f"fp8q could not give this diffusers model its quantizer "
                f"({error}): save_pretrained would write its FP8 codes "
                "without a quantization_config, and from_pretrained would "
                "load them as float values. Save it with safetensors and "
                "reload it with fp8q.torch.load_checkpoint", stacklevel=3)
            return
        attach(model)
