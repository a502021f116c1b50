"""Zero-copy conversions between torch tensors and fp8q.Tensor."""
import torch

import fp8q

# torch's FP8 dtypes by fp8q name, for the uint8 fallback below.
_TORCH_FP8 = {
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "float8_e4m3fnuz": torch.float8_e4m3fnuz,
    "float8_e5m2fnuz": torch.float8_e5m2fnuz,
}


def to_torch(t):
    """A torch tensor sharing t's memory (t: fp8q.Tensor or anything
    fp8q.asarray accepts without a copy), same dtype, shape and strides.
    Where the installed PyTorch's DLPack refuses a float8 dtype, the bytes
    cross as uint8 and are viewed as torch's float8 dtype: still no copy."""
    t = fp8q.asarray(t)
    try:
        return torch.from_dlpack(t)
    except (BufferError, RuntimeError, TypeError):
        name = t.dtype.name
        if name not in _TORCH_FP8:
            raise
        return torch.from_dlpack(t.view("uint8")).view(_TORCH_FP8[name])


def from_torch(x):
    """An fp8q.Tensor sharing the memory of the torch tensor x (any dtype
    fp8q stores, FP8 included, through uint8 where the installed PyTorch's
    DLPack refuses float8; no copy, no autograd history). CPU tensors only
    in this version: a CUDA tensor raises ValueError."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"from_torch: expected a torch.Tensor, got "
                        f"{type(x).__name__}")
    if x.device.type != "cpu":
        raise ValueError(
            f"from_torch: x is on {x.device}, but this version of fp8q "
            "runs on the CPU only (its CUDA device tensors are not there "
            "yet): move it with x.cpu()")
    x = x.detach()
    try:
        return fp8q.from_dlpack(x)
    except (BufferError, RuntimeError, TypeError):
        # Older PyTorch refuses to export float8 through DLPack: the bytes
        # cross as uint8 and are viewed as the FP8 dtype, still no copy.
        name = str(x.dtype).split(".")[-1]
        if name not in _TORCH_FP8:
            raise
        return fp8q.from_dlpack(x.view(torch.uint8)).view(name)
