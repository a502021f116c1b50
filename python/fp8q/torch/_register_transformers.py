"""fp8q as Hugging Face transformers' quantization method "fp8q", without
importing transformers: `import fp8q.torch` registers it at once where
transformers' quantizers are imported already, else right after they are
(a one-shot import hook), so from_pretrained of a folder that fp8q saved
rebuilds its FP8 layers whatever the import order. And the models fp8q
quantizes in place get fp8q's quantizer, so save_pretrained writes the
quantization_config that describes them (fp8q.torch._transformers)."""
import importlib.abc
import importlib.util
import sys
import warnings

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


class _AfterQuantizersImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when transformers.quantizers is about to be
    imported, it leaves sys.meta_path and makes that module's loader
    register fp8q once the module has run."""

    def find_spec(self, name, path, target=None):
        if name != QUANTIZERS:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            _register()

        loader.exec_module = exec_module
        return spec


def install():
    """Registers fp8q with transformers now if its quantizers are imported,
    else when they are (once per process)."""
    if QUANTIZERS in sys.modules:
        _register()
    elif not any(isinstance(finder, _AfterQuantizersImport)
                 for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterQuantizersImport())


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
