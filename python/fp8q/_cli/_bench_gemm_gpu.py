"""The GPU half of `python -m fp8q bench gemm`: fp8q.scaled_mm (tensorwise
float8_e4m3fn, bfloat16 result) against torch._scaled_mm with the same codes
and scales and against a bfloat16 torch.matmul, in one run on one device,
plus the host time per call for small M.

Shapes (issue 4): M in {1, 16, 64, 256, 1024, 4096, 8192} x (N, K) in
{(4096, 4096), (14336, 4096), (4096, 14336), (8192, 8192)}. Times are
CUDA-event medians of --repeats rounds of a few calls each, the three
implementations taking turns within every round. TFLOP/s counts 2 M N K.
Host time: wall time to enqueue 200 calls (no synchronisation in between),
per call. Needs PyTorch with CUDA; no test asserts timings.

Padding rows: for K or N not multiples of 16, fp8q's product of zero-padded
FP8 operands against its exact bfloat16 path (fp8q._C._scaled_mm_padding
switches padding off), the measurement of csrc/cuda/matmul_padding.h's
rule (pad while the padded product is at most twice the work; timed once,
docs/benchmarks.md's GPU section).
"""
import fp8q
from fp8q._cli._bench_gpu import gpu_torch, host_microseconds, median_ms_cuda

M_VALUES = [1, 16, 64, 256, 1024, 4096, 8192]
NK_VALUES = [(4096, 4096), (14336, 4096), (4096, 14336), (8192, 8192)]
# (M, N, K) with K or N off a multiple of 16, for the padding rows.
PADDING_SHAPES = [(16, 4096, 4095), (1024, 4096, 4095), (1024, 4100, 4096),
                  (1024, 4100, 4095), (4096, 4100, 4095), (1024, 4096, 24)]
GOAL_OF_TORCH = 1.0
GOAL_PFLOPS = 1.3
GOAL_HOST_US = 10.0


def measure(repeats):
    """Rows (m, n, k, fp8q ms, torch._scaled_mm ms, bf16 ms, fp8q host us,
    torch host us or None) for every shape; RuntimeError saying why when
    there is no GPU to measure on."""
    torch = gpu_torch()
    if torch.cuda.get_device_capability() < (8, 9):
        raise RuntimeError("torch._scaled_mm needs FP8 tensor cores (sm_89+)")
    # FP8 tensors cross as uint8 where this PyTorch's DLPack refuses float8.
    from fp8q.torch._convert import from_torch

    generator = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    for n, k in NK_VALUES:
        w = torch.randn(n, k, device="cuda", generator=generator)
        scale_w = (w.abs().amax() / 448).float()
        qw = (w / scale_w).to(torch.float8_e4m3fn)
        w16 = w.to(torch.bfloat16)
        f_w = from_torch(qw).T
        f_scale_w = from_torch(scale_w)
        for m in M_VALUES:
            x = torch.randn(m, k, device="cuda", generator=generator)
            scale_x = (x.abs().amax() / 448).float()
            qx = (x / scale_x).to(torch.float8_e4m3fn)
            x16 = x.to(torch.bfloat16)
            f_x = from_torch(qx)
            f_scale_x = from_torch(scale_x)
            out = fp8q.empty((m, n), "bfloat16", device="cuda")

            def ours():
                fp8q.scaled_mm(f_x, f_w, f_scale_x, f_scale_w, out=out)

            def theirs():
                torch._scaled_mm(qx, qw.t(), scale_a=scale_x,
                                 scale_b=scale_w, out_dtype=torch.bfloat16)

            def bf16():
                torch.matmul(x16, w16.t())

            ms = median_ms_cuda(torch, [ours, theirs, bf16], repeats)
            host = ((host_microseconds(torch, ours),
                     host_microseconds(torch, theirs)) if m <= 16
                    else (None, None))
            rows.append((m, n, k, *ms, *host))
    return rows, torch.cuda.get_device_name(), torch.__version__


def measure_padding(torch, repeats):
    """Rows (m, n, k, padded ms, exact ms) for PADDING_SHAPES: one
    tensorwise product each with padding on and off, taking turns."""
    from fp8q.torch._convert import from_torch
    generator = torch.Generator(device="cuda").manual_seed(1)
    rows = []
    for m, n, k in PADDING_SHAPES:
        codes_x = torch.randn(m, k, device="cuda", generator=generator).to(
            torch.float8_e4m3fn)
        codes_w = torch.randn(n, k, device="cuda", generator=generator).to(
            torch.float8_e4m3fn)
        f_x, f_w = from_torch(codes_x), from_torch(codes_w).T
        out = fp8q.empty((m, n), "bfloat16", device="cuda")

        def product(padding):
            def run():
                previous = fp8q._C._scaled_mm_padding(padding)
                try:
                    fp8q.scaled_mm(f_x, f_w, 1.0, 1.0, out=out)
                finally:
                    fp8q._C._scaled_mm_padding(previous)
            return run

        rows.append((m, n, k, *median_ms_cuda(
            torch, [product(True), product(False)], repeats)))
    return rows


def print_padding_rows(torch, repeats):
    """Prints the padded-against-exact table (measure_padding)."""
    print()
    print("K or N not multiples of 16: zero-padded FP8 operands against "
          "the exact bfloat16 path")
    print()
    print("| M | N | K | padded ms | exact ms | exact / padded |")
    print("|---:|---:|---:|---:|---:|---:|")
    for m, n, k, padded, exact in measure_padding(torch, repeats):
        print(f"| {m} | {n} | {k} | {padded:.3f} | {exact:.3f} "
              f"| {exact / padded:.2f}x |")


def print_gpu_gemm_benchmark(repeats):
    """Prints the table and the verdict on issue 4's GPU goals, or why it
    could not run."""
    try:
        rows, device, torch_version = measure(repeats)
    except RuntimeError as error:
        print(f"GPU gemm benchmark not run: {error}")
        return
    print(f"{device}, torch {torch_version}; tensorwise e4m3fn, bfloat16 "
          "result")
    print()
    print("| M | N | K | fp8q TFLOP/s | torch._scaled_mm TFLOP/s | bf16 "
          "TFLOP/s | fp8q / _scaled_mm | fp8q / bf16 | host us fp8q "
          "| host us torch |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst = None
    for m, n, k, ours, theirs, bf16, host_ours, host_theirs in rows:
        flops = 2.0 * m * n * k
        ratio = theirs / ours
        worst = ratio if worst is None else min(worst, ratio)
        host = (f"{host_ours:.1f} | {host_theirs:.1f}"
                if host_ours is not None else "- | -")
        print(f"| {m} | {n} | {k} | {flops / ours / 1e9:.1f} "
              f"| {flops / theirs / 1e9:.1f} | {flops / bf16 / 1e9:.1f} "
              f"| {ratio:.2f}x | {bf16 / ours:.2f}x | {host} |")
    print()
    big = [row for row in rows if row[:3] == (8192, 8192, 8192)][0]
    pflops = 2.0 * 8192 ** 3 / big[3] / 1e12
    host_worst = max(row[6] for row in rows if row[6] is not None)
    print(f"fp8q vs torch._scaled_mm, slowest shape: {worst:.2f}x (goal >= "
          f"{GOAL_OF_TORCH:.1f}x at every shape: "
          f"{'met' if worst >= GOAL_OF_TORCH else 'NOT met'}); 8192^3: "
          f"{pflops:.2f} PFLOP/s (goal >= {GOAL_PFLOPS}: "
          f"{'met' if pflops >= GOAL_PFLOPS else 'NOT met'}); host time per "
          f"call for M <= 16: up to {host_worst:.1f} us (goal <= "
          f"{GOAL_HOST_US:g}: {'met' if host_worst <= GOAL_HOST_US else 'NOT met'})")
    import torch
    print_padding_rows(torch, repeats)
