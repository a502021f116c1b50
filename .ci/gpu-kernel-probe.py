"""One launch of each of fp8q's memory-bound GPU kernels at a size that
fills the device, for a kernel profiler (.ci/gpu-check's `ncu` step runs it
under `ncu`): the plain and scaled casts, the row-scaled cast, the
per-token quantize, the calibrators' reductions, the weight dequantize and
the weight-only product. Every operation runs once unprofiled first
(module load, scratch allocation), then once more between
cudaProfilerStart/Stop markers, which `ncu --profile-from-start off`
profiles. Needs PyTorch with CUDA.
"""
import torch

import fp8q
import fp8q.calib
from fp8q import _C


def operations():
    """(name, call) pairs."""
    generator = torch.Generator(device="cuda").manual_seed(0)
    flat = torch.randn(1 << 28, device="cuda", dtype=torch.bfloat16,
                       generator=generator)
    tokens = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16,
                         generator=generator)
    fx, ft = fp8q.from_dlpack(flat), fp8q.from_dlpack(tokens)
    scale = fp8q.from_dlpack(torch.full((), 0.01, device="cuda"))
    row_scale = fp8q.from_dlpack(torch.full((8192, 1), 0.01, device="cuda"))
    amax = fp8q.zeros((), device="cuda")
    out = fp8q.empty((1 << 28,), "float8_e4m3fn", device="cuda")
    out_tokens = fp8q.empty((8192, 8192), "float8_e4m3fn", device="cuda")
    weight = fp8q.quantize(fp8q.from_dlpack(torch.randn(
        14336, 4096, device="cuda", generator=generator)), "float8_e4m3fn",
        granularity="row")
    max_calibrator = fp8q.calib.MaxCalibrator()
    histogram = fp8q.calib.HistogramCalibrator()
    histogram.update(ft)
    one = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    sixteen = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
    weight_t = torch.from_dlpack(weight.data)
    scale_t = torch.from_dlpack(weight.scale)
    return [
        ("cast bf16 -> e4m3", lambda: fp8q.cast(fx, "float8_e4m3fn", out=out)),
        ("cast / scale + amax", lambda: fp8q.cast(
            fx, "float8_e4m3fn", scale=scale, out=out, amax_out=amax)),
        ("row-scaled cast", lambda: fp8q.cast(
            ft, "float8_e4m3fn", scale=row_scale, out=out_tokens)),
        ("per-token quantize", lambda: fp8q.quantize(
            ft, "float8_e4m3fn", granularity="row")),
        ("MaxCalibrator.update", lambda: max_calibrator.update(ft)),
        ("HistogramCalibrator.update", lambda: histogram.update(ft)),
        ("dequantize 14336x4096", lambda: weight.dequantize("bfloat16")),
        ("weight-only product, 1 token", lambda: _C.layer_gemv(
            one, weight_t, scale_t, None, "row", None)),
        ("weight-only product, 16 tokens", lambda: _C.layer_gemv(
            sixteen, weight_t, scale_t, None, "row", None)),
    ]


def main():
    calls = operations()
    for _, call in calls:
        call()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for name, call in calls:
        torch.cuda.nvtx.range_push(name)
        call()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()
