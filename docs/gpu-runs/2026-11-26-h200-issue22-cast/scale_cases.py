"""Run by hand on the GPU machine (docs/gpu-runs/2026-11-26-h200-issue22-cast): fp8q.cast with one scale of three kinds
(amax/448, 0.01, a power of two) and per-token quantize with power_of_2,
against a device copy of the same bytes, CUDA-event medians."""
import torch
import fp8q


def median_ms(fn, repeats=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


g = torch.Generator(device="cuda").manual_seed(0)
for dtype, count in ((torch.bfloat16, 1 << 28), (torch.float32, 1 << 27)):
    x = torch.randn(count, device="cuda", dtype=dtype, generator=g)
    moved = count * (x.element_size() + 1)
    src = torch.empty(moved // 2, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy = median_ms(lambda: dst.copy_(src))
    fx = fp8q.from_dlpack(x)
    out = fp8q.empty((count,), "float8_e4m3fn", device="cuda")
    amax = float(x.abs().amax())
    for name, s in (("amax/448", amax / 448), ("0.01", 0.01), ("2^-6", 2.0 ** -6)):
        scale = fp8q.from_dlpack(torch.full((), s, device="cuda"))
        t = median_ms(lambda: fp8q.cast(fx, "float8_e4m3fn", scale=scale, out=out))
        print(f"cast {str(dtype)[6:]} scale {name}: {t:.3f} ms, {copy / t:.2f}x copy")
tokens = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=g)
ft = fp8q.from_dlpack(tokens)
src = torch.empty(8192 * 8192 * 3 // 2, dtype=torch.uint8, device="cuda")
dst = torch.empty_like(src)
copy = median_ms(lambda: dst.copy_(src))
for p2 in (False, True):
    t = median_ms(lambda: fp8q.quantize(ft, "float8_e4m3fn", granularity="row", power_of_2=p2))
    print(f"per-token quantize power_of_2={p2}: {t:.3f} ms, {copy / t:.2f}x copy")
