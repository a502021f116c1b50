"""fp8q.torch: FP8 quantization of PyTorch models with fp8q's kernels.

Imported on demand (`import fp8q.torch`); `import fp8q` never imports torch.

- to_torch / from_torch: zero-copy conversions through DLPack, FP8 included.
- quantize(model, ...): replaces nn.Linear modules by fp8q.torch.Linear,
  which holds FP8 weights with float32 dequantization scales.
- Linear: the quantized layer, an nn.Linear subclass whose FP8 weight
  and scales are frozen parameters (gradients reach its input and bias),
  computed by one fp8q._C call per forward, or by fp8q's
  PyTorch custom operators (torch.ops.fp8q.*, registered on import), so
  torch.compile and torch.export trace it without graph breaks.
- calibrate(model, method) / freeze(model): static activation scales.
- merge_lora(model): merges peft LoRA adapters into FP8 base weights.
- fp8q.torch.quanto_compat: optimum-quanto's FP8 API on top of these.

The GEMMs run through fp8q's scaled_mm on the tensors' device (CPU or
CUDA, on PyTorch's current stream). docs/torch.md.
"""
from fp8q.torch import _ops  # noqa: F401 (registers torch.ops.fp8q)
from fp8q.torch._calibrate import calibrate, freeze
from fp8q.torch._convert import from_torch, to_torch
from fp8q.torch._linear import Linear
from fp8q.torch._lora import merge_lora
from fp8q.torch._quantize import quantize

__all__ = ["Linear", "calibrate", "freeze", "from_torch", "merge_lora",
           "quantize", "to_torch"]
