"""Zero-copy conversions between torch tensors and fp8q.Tensor."""
import torch

import fp8q

# Whether fp8q._C reads torch tensors through DLPack's C exchange API
# (torch >= 2.10 publishes a table fp8q takes): views, current stream and
# allocations in C. Asked of fp8q._C itself, so Python and C agree.
HAS_C_EXCHANGE = fp8q._C._dlpack_exchange_usable(torch.empty(0))

# torch's FP8 dtypes by fp8q name, for the uint8 fallback below.
_TORCH_FP8 = {
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "float8_e4m3fnuz": torch.float8_e4m3fnuz,
    "float8_e5m2fnuz": torch.float8_e5m2fnuz,
}


def current_stream(x):
    """PyTorch's current CUDA stream on x's device (the stream fp8q's work
    for a torch model runs on), or None for a CPU tensor."""
    if x.device.type != "cuda":
        return None
    return torch.cuda.current_stream(x.device)


def to_torch(t):
    """A torch tensor sharing t's memory (t: fp8q.Tensor or anything
    fp8q.asarray accepts without a copy), same dtype, shape, strides and
    device. Where the installed PyTorch's DLPack refuses a float8 dtype, the
    bytes cross as uint8 and are viewed as torch's float8 dtype: still no
    copy. For a CUDA tensor, torch passes its current stream, which fp8q
    orders after the tensor's last use."""
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
    DLPack refuses float8; no copy, no autograd history), on x's device.
    For a CUDA tensor the exchange happens on PyTorch's current stream:
    torch's pending work on x is ordered before fp8q's use of it."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"from_torch: expected a torch.Tensor, got "
                        f"{type(x).__name__}")
    if x.device.type not in ("cpu", "cuda"):
        raise ValueError(f"from_torch: x is on {x.device}; fp8q reads CPU "
                         "and CUDA tensors")
    x = x.detach()
    stream = current_stream(x)
    try:
        return fp8q.from_dlpack(x, stream=stream)
    except (BufferError, RuntimeError, TypeError):
        # Older PyTorch refuses to export float8 through DLPack: the bytes
        # cross as uint8 and are viewed as the FP8 dtype, still no copy.
        name = str(x.dtype).split(".")[-1]
        if name not in _TORCH_FP8:
            raise
        return fp8q.from_dlpack(x.view(torch.uint8), stream=stream).view(name)
