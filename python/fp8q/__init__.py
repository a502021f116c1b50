"""fp8q: exact FP8 casts, quantization, FP8 scaled matmul and calibration, on
the CPU and on NVIDIA GPUs (fp8q's CUDA kernels and cuBLASLt's FP8 GEMM,
loaded at first GPU use; fp8q.info() says what this machine has).

Everything numeric runs in the C extension fp8q._C; this package re-exports it
and adds thin Python helpers: fp8q.QTensor, fp8q.finfo, the quantize /
dequantize wrappers that build and take QTensor objects, fp8q.linear (the
nn.Linear convention over fp8q.scaled_mm), and fp8q.CalibrationCache (also
fp8q.calib.CalibrationCache). fp8q.calib and fp8q.torch (which quantizes
PyTorch models) are imported on first use of the attribute, so
`import fp8q` never imports torch. The command line, `python -m fp8q`, is
fp8q._cli (its benchmarks and demo included), which the library never
imports.
"""
import atexit
import importlib
from fp8q._C import *  # noqa: F401,F403
from fp8q import _C
from fp8q._calibration_cache import CalibrationCache  # noqa: F401
from fp8q._finfo import finfo  # noqa: F401 (re-exported)
from fp8q._linear import linear  # noqa: F401 (re-exported)
from fp8q._qtensor import QTensor

__version__ = _C._build_info()["version"]


def quantize(x, dtype="float8_e4m3fn", *, granularity="tensor", scale=None,
             saturate=True, power_of_2=False, transpose=False, stream=None):
    """Quantizes x to an FP8 format with float32 scales; returns a QTensor.

    x: anything fp8q.asarray accepts (fp8q.Tensor, NumPy or ml_dtypes array,
    torch tensor, DLPack producer, buffer, scalar, nested list), any dtype.
    dtype: the FP8 format ("float8_e4m3fn" / "e4m3", "float8_e5m2" / "e5m2",
    "float8_e4m3fnuz", "float8_e5m2fnuz" or an equivalent dtype object).

    granularity: which elements share one scale, and the shape of .scale:

    - "tensor": all of x; scale shape ().
    - "row": one scale per index of all but the last axis; scale shape
      x.shape[:-1] + (1,).
    - "col": one scale per index of the last axis; scale shape
      (1,) * (x.ndim - 1) + (x.shape[-1],).
    - (bm, bn): blocks of bm x bn elements of a 2-D x of shape (M, N); scale
      shape (ceil(M / bm), ceil(N / bn)); edge blocks may be partial.
      (1, 128) and (128, 128) are the common choices.

    scale is the float32 dequantization scale (x ~= q * scale). With
    scale=None each group's scale is float32(amax) / float32(finfo(dtype).max)
    (correctly rounded float32 division), 1.0 for an all-zero group, and
    rounded up to the next power of two when power_of_2=True; a group whose
    amax is NaN or infinite raises ValueError. A given scale (float32, finite,
    > 0) must have the granularity's scale shape or broadcast to it; it is
    copied into the result.

    The data are float32(x) / scale, rounded once to nearest-even;
    saturate=True maps overflow to +-max, saturate=False to NaN (or +-inf for
    float8_e5m2), exactly as fp8q.cast.

    transpose=True (2-D x only) also writes data.T, C-contiguous, as the
    QTensor's `transposed` (the column-major operand an FP8 GEMM wants),
    in the same call.

    On a GPU (x a CUDA tensor; a strided one is gathered first) everything
    runs there, on `stream` (as fp8q.cast takes it), and data and scale stay
    there: each group's amax, the scales from it, then one scaled cast (x is
    read twice),
    with results bit-identical to the CPU's. The GPU cannot raise on its own
    data: a group whose amax is NaN or infinite gets a NaN or infinite scale
    (and NaN or zero data) instead of the CPU's ValueError. A given scale on
    the host is checked there; one on the GPU in the exact scale shape is
    used as is, unchecked.
    """
    data, scale, transposed = _C._quantize(
        x, dtype, granularity=granularity, scale=scale, saturate=saturate,
        power_of_2=power_of_2, transpose=transpose, stream=stream)
    return QTensor(data, scale, granularity, transposed)


def info():
    """Facts about this fp8q and where it runs, as a JSON-ready dict (what
    `python -m fp8q info --json` prints).

    Keys: fp8q (version); build (compiler, cuda_kernels, cuda_kernels_reason,
    nvcc_version, ptxas_version, numpy_headers, build_system, kernel_archs);
    platform; cpu_features; python; packages (numpy, ml_dtypes, torch:
    versions, None when not installed; torch is never imported); threads;
    cuda; cublaslt; round_trip (a 1024x1024 quantize/dequantize and its
    errors).

    cpu_features: for each x86 feature fp8q has code for ("AVX2", "FMA",
    "F16C"), {used (bool), by (the code that uses it: "conversions",
    "scaled_mm"; None when unused), why_not (None when used; else e.g. "not
    reported by the CPU", "the OS has not enabled AVX state", "not built
    (non-x86)")}.

    cuda: available (bool: fp8q's kernels load on at least one device),
    reason (why not, e.g. every driver library tried; else None), driver
    ({path, version like "13.0"} or None when no driver library was found),
    switches ({FP8Q_CUDA_NO_FP8_TENSOR_CORES: bool, FP8Q_CUDA_GEMM_TUNING:
    bool, FP8Q_CUDA_SCALED_MM_PATH: "auto", "padded", "epilogue" or "exact",
    FP8Q_CUDA_FP8_LAYER_PATH: "auto", "fp8" or "weight-only", error: why a
    value is refused, else None}, as read from the environment;
    docs/scaled_mm.md, "Switches", and docs/torch.md, "Which product runs")
    and devices:
    [{index, name, compute_capability like "8.9", memory_bytes, native_fp8
    (compute capability 8.9 or newer), kernels (bool), kernels_error,
    fp8_layer_weight_only_tokens (up to how many tokens a W8A8
    fp8q.torch.Linear takes the weight-only product there; None where the
    kernels do not load), ops:
    which implementation cast/quantize/amax use there, and scaled_mm:
    {tensorwise, rowwise, blockwise: the path a (16, 256) @ (256, 256)
    product of that scaling mode took there}}].

    cublaslt: found (None where no GPU is usable), version, path, error,
    search (every place tried before the outcome, "place (reason)"; the
    install folders of this interpreter only, never the working directory
    or a script's folder) and scale_modes: per device index, the scaling modes cuBLASLt accepted and
    refused so far ({accepted: [...], refused: [...]}; "unscaled" is the
    plain FP8, bfloat16 or float32 product of the fallback paths).

    The first call loads the CUDA driver (libcuda.so.1 or libcuda.so;
    nvcuda.dll from System32; or the library the environment variable
    FP8Q_CUDA_DRIVER names) and loads fp8q's kernels into each device's
    primary context, as the first GPU operation would, then loads cuBLASLt
    and runs one small scaled_mm of each scaling mode on each such device;
    `import fp8q` never touches CUDA.
    """
    from fp8q import _info

    return _info.info()


def dequantize(q, dtype="float32"):
    """Returns decode(q.data) * q.scale, rounded once into `dtype`.

    q: an fp8q.QTensor (from fp8q.quantize). The product is a correctly
    rounded float32 multiplication with each element's group scale; dtype is
    float32 (exact product), float16 or bfloat16 (rounded to nearest-even).
    Same as q.dequantize(dtype).
    """
    if not isinstance(q, QTensor):
        raise TypeError(
            "dequantize: q must be an fp8q.QTensor (the result of "
            f"fp8q.quantize), got an object of type {type(q).__name__}; "
            "to cast plain data use fp8q.cast")
    return q.dequantize(dtype)


@atexit.register
def _empty_cache_at_exit():
    """Frees fp8q's GPU scratch memory at interpreter exit (fp8q.empty_cache;
    nothing is touched when no GPU operation ran). A failure only leaks the
    memory, which the process's end returns anyway."""
    try:
        _C.empty_cache()
    except _C.CudaError:
        pass


# Submodules imported on first attribute access (fp8q.torch imports torch).
_LAZY_SUBMODULES = ("calib", "torch")


def __getattr__(name):
    """fp8q.calib and fp8q.torch, imported when first touched."""
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"fp8q.{name}")
    raise AttributeError(f"module 'fp8q' has no attribute {name!r}")


__all__ = sorted(
    {name for name in vars(_C) if not name.startswith("_")}
    | {"CalibrationCache", "QTensor", "dequantize", "finfo", "info",
       "linear", "quantize"})
