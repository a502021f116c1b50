"""fp8q.torch: FP8 quantization of PyTorch models with fp8q's kernels.

Imported on demand (`import fp8q.torch`); `import fp8q` never imports torch.

- to_torch / from_torch: zero-copy conversions through DLPack, FP8 included.
- quantize(model, ...): replaces nn.Linear modules by fp8q.torch.Linear,
  which holds FP8 weights with float32 dequantization scales, all or none,
  and logs a QuantizeSummary.
- Linear: the quantized layer, an nn.Linear subclass whose FP8 weight
  and scales are frozen parameters (gradients reach its input and bias),
  computed by one fp8q._C call per forward, or by fp8q's
  PyTorch custom operators (torch.ops.fp8q.*, registered on import), so
  torch.compile and torch.export trace it without graph breaks.
- calibrate(model, method) / freeze(model): static activation scales.
- load_checkpoint(model, source): FP8 checkpoints of every common layout
  (compressed-tensors/vLLM, FineGrainedFP8, ComfyUI, optimum-quanto,
  plain FP8) loaded into fp8q.torch.Linear layers, codes as they are.
- merge_lora(model): merges peft LoRA adapters into FP8 base weights;
  peft's own merge_and_unload() and diffusers' fuse_lora() do the same on
  fp8q layers (peft's LoRA Linear.merge is wrapped when peft is imported).
- fp8q.torch.quanto_compat: optimum-quanto's FP8 API on top of these.
- Fp8qConfig: fp8q as a transformers quantization method
  (from_pretrained(..., quantization_config=Fp8qConfig(...)),
  save_pretrained); touching it imports transformers and registers it,
  and `import fp8q.torch` registers it as soon as transformers' quantizers
  are imported. Models quantized in place (quantize, load_checkpoint) save
  with save_pretrained as those loaded with Fp8qConfig do.
- Fp8qDiffusersConfig: the same for diffusers' models (touching it imports
  diffusers); `import fp8q.torch` registers "fp8q" with diffusers too.

The GEMMs run through fp8q's scaled_mm on the tensors' device (CPU or
CUDA, on PyTorch's current stream). docs/torch.md.
"""
import importlib

from fp8q.torch import _ops  # noqa: F401 (registers torch.ops.fp8q)
from fp8q.torch import _register_transformers
from fp8q.torch._calibrate import calibrate, freeze
from fp8q.torch._checks import InputShapeError
from fp8q.torch._convert import from_torch, to_torch
from fp8q.torch._linear import Linear
from fp8q.torch._load_checkpoint import load_checkpoint
from fp8q.torch._lora import merge_lora
from fp8q.torch._peft import install as _install_peft_merge
from fp8q.torch._quantize import quantize
from fp8q.torch._summary import QuantizeSummary

# peft's merge_and_unload / diffusers' fuse_lora re-quantize fp8q layers.
_install_peft_merge()
_register_transformers.install()

# Fp8qConfig and Fp8qDiffusersConfig are left out: a star import would
# import their library (and fail where it is missing).
__all__ = ["InputShapeError", "Linear", "QuantizeSummary", "calibrate",
           "freeze", "from_torch", "load_checkpoint", "merge_lora",
           "quantize", "to_torch"]


# The configs touching a library imports, by name: (module, library).
_LIBRARY_CONFIGS = {
    "Fp8qConfig": ("fp8q.torch._transformers", "transformers"),
    "Fp8qDiffusersConfig": ("fp8q.torch._diffusers", "diffusers"),
}


def __getattr__(name):
    """Fp8qConfig / Fp8qDiffusersConfig on first use: each imports its
    library (transformers, diffusers; fp8q needs neither otherwise) and
    registers fp8q as its quantization method."""
    if name not in _LIBRARY_CONFIGS:
        raise AttributeError(f"module 'fp8q.torch' has no attribute {name!r}")
    module_name, library = _LIBRARY_CONFIGS[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ImportError(
            f"fp8q.torch.{name} needs Hugging Face {library} "
            f"(pip install {library}): {error}") from error
    return getattr(module, name)
