"""safetensors dtype codes <-> torch dtypes (imports torch: for the loader
and for state-dict sources only)."""
import torch

TORCH_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
    "BF16": torch.bfloat16, "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2, "I64": torch.int64, "I32": torch.int32,
    "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "U16": torch.uint16, "U32": torch.uint32, "U64": torch.uint64,
    "BOOL": torch.bool, "C64": torch.complex64,
    "F8_E8M0": torch.float8_e8m0fnu,
}
CODES = {dtype: code for code, dtype in TORCH_DTYPES.items()}
