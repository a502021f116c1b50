"""fp8q as Hugging Face transformers' quantization method "fp8q", without
importing transformers: `import fp8q.torch` registers it at once where
transformers' quantizers are imported already, else right after they are
(fp8q.torch._after_import), so from_pretrained of a folder that fp8q saved
rebuilds its FP8 layers whatever the import order. And the models fp8q
quantizes in place get fp8q's quantizer, so save_pretrained writes the
quantization_config that describes them (fp8q.torch._transformers)."""
import warnings

from fp8q.torch._after_import import after_import

QUANTIZERS = "transformers.quantizers"


def _register():
    """Imports fp8q.torch._transformers, which registers the method; a
    failure (a transformers without the custom-method API) is a warning,
    never an error inside transformers' own import."""
    try:
        import fp8q.torch._transformers  # noqa: F401 (registers "fp8q")
    except Exception as error:  # noqa: BLE001 (any failure: a warning)
        warnings.warn(f"fp8q could not register its transformers "
                      f"quantization method \"fp8q\": {error}", stacklevel=2)


def install():
    """Registers fp8q with transformers now if its quantizers are imported,
    else when they are."""
    after_import(QUANTIZERS, lambda module: _register())


def is_transformers_model(model):
    """Whether `model` is a transformers PreTrainedModel (without importing
    transformers)."""
    return any(cls.__name__ == "PreTrainedModel"
               and cls.__module__ == "transformers.modeling_utils"
               for cls in type(model).__mro__)


def attach_transformers_quantizer(model):
    """Gives a transformers PreTrainedModel holding fp8q layers fp8q's
    quantizer and quantization_config (fp8q.torch._transformers.attach);
    other models are left alone, and transformers is never imported for
    them."""
    if is_transformers_model(model):
        from fp8q.torch._transformers import attach
        attach(model)
