"""The weight-only (W8A16) half of `python -m fp8q bench linear` on a GPU:
fp8q.torch.Linear with FP8 weights and bfloat16 activations against a bf16
nn.Linear of the same shape, for decode-shaped batches (up to 64 tokens,
where fp8q reads the FP8 codes in place: kernels/gemv.cuh, CUDA cores up
to 7 tokens, tensor cores from 8, k split over the grid where the weight has
too few rows to fill the GPU) and larger ones (the weight decoded, then
torch's GEMM), with the verdict on issue 22's goals. The token counts on
both sides of each switch (8/9, 64/65) show where the crossovers lie.

Each timed call runs ROTATION copies of the layer in turn, so the weights
come from device memory and not from the L2 cache (an FP8 weight of 58 MB
would otherwise partly stay there between calls, a bf16 one not).
CUDA-event medians (fp8q._cli._bench_gpu). Each row also reports the weight's
bytes streamed per second (N x K one-byte codes per call) and that as a
share of the card's copy bandwidth, measured in the same run (a
device-to-device copy of COPY_BYTES: bytes read plus bytes written per
second), issue 38's yardstick (>= 80% at 1 to 16 tokens). No test asserts
timings.
"""
from fp8q._cli._bench import SEED
from fp8q._cli._bench_gpu import median_ms_cuda, unavailable_reason

TOKENS = (1, 2, 4, 8, 9, 16, 32, 64, 65, 128, 1024)
SHAPES = ((4096, 4096), (14336, 4096), (4096, 14336))  # (N, K)
ROTATION = 3
COPY_BYTES = 1 << 30
# Issue 22's goals: speed against bf16 nn.Linear at these token counts,
# and never below the floor at any.
GOALS = {1: 1.5, 16: 1.2}
FLOOR = 0.9


def _rotated(layers, x):
    """A call running every layer of `layers` on x once."""
    def run():
        for layer in layers:
            layer(x)
    return run


def measure(repeats):
    """Rows (tokens, N, K, bf16 ms, fp8q ms) per layer call, and notes.
    Raises RuntimeError saying why when no GPU can be measured."""
    import torch

    import fp8q.torch as fpt

    reason = unavailable_reason(torch)
    if reason is not None:
        raise RuntimeError(reason)
    rows = []
    for n, k in SHAPES:
        torch.manual_seed(SEED)
        floats = [torch.nn.Linear(k, n, bias=False).to("cuda", torch.bfloat16)
                  for _ in range(ROTATION)]
        quantized = [fpt.Linear.from_linear(layer, weights="e4m3")
                     for layer in floats]
        for m in TOKENS:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            with torch.inference_mode():
                bf16_ms, fp8q_ms = median_ms_cuda(
                    torch, [_rotated(floats, x), _rotated(quantized, x)],
                    repeats)
            rows.append((m, n, k, bf16_ms / ROTATION, fp8q_ms / ROTATION))
        del floats, quantized
        torch.cuda.empty_cache()
    source = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
    destination = torch.empty_like(source)
    copy_ms = median_ms_cuda(torch, [lambda: destination.copy_(source)],
                             repeats)[0]
    copy_gb_per_s = 2 * COPY_BYTES / copy_ms / 1e6
    del source, destination
    torch.cuda.empty_cache()
    notes = [f"{torch.cuda.get_device_name()}, torch {torch.__version__}; "
             "bfloat16 x, e4m3 weights with row scales, no bias; "
             f"CUDA-event medians per layer call ({ROTATION} layers in turn)"]
    notes.append(f"copy bandwidth: {copy_gb_per_s:.0f} GB/s (a {COPY_BYTES} "
                 "byte device-to-device copy, read + written)")
    return rows, notes, copy_gb_per_s


def table_lines(rows, copy_gb_per_s):
    """The W8A16 table in Markdown, one line per (tokens, N, K, bf16 ms,
    fp8q ms) row: its times, fp8q's speed against bf16 (bf16 ms / fp8q
    ms), the weight GB/s (N x K bytes of FP8 codes per fp8q call: N * K /
    ms / 1e6) and that as a percentage of copy_gb_per_s."""
    lines = ["| tokens | N | K | bf16 ms | fp8q W8A16 ms | speed vs bf16 | "
             "weight GB/s | % of copy |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for m, n, k, bf16_ms, fp8q_ms in rows:
        weight_gb_per_s = n * k / fp8q_ms / 1e6
        lines.append(f"| {m} | {n} | {k} | {bf16_ms:.4f} | {fp8q_ms:.4f} | "
                     f"{bf16_ms / fp8q_ms:.2f}x | {weight_gb_per_s:.0f} | "
                     f"{100 * weight_gb_per_s / copy_gb_per_s:.0f}% |")
    return lines


def print_weight_only_benchmark(repeats):
    """Prints the W8A16 table and the verdicts, or why it could not run."""
    try:
        rows, notes, copy_gb_per_s = measure(repeats)
    except RuntimeError as error:
        print(f"W8A16 GPU benchmark not run: {error}")
        return
    print()
    print("W8A16 (weight-only FP8) against bf16 nn.Linear:")
    for line in notes:
        print(line)
    print()
    for line in table_lines(rows, copy_gb_per_s):
        print(line)
    print()
    for tokens, goal in GOALS.items():
        worst = min(bf16 / ours for m, _, _, bf16, ours in rows if m == tokens)
        print(f"W8A16 at {tokens} token(s): slowest {worst:.2f}x bf16 (goal >= "
              f"{goal}: {'met' if worst >= goal else 'NOT met'})")
    worst = min(bf16 / ours for _, _, _, bf16, ours in rows)
    print(f"W8A16 at any token count: slowest {worst:.2f}x bf16 (goal >= "
          f"{FLOOR}: {'met' if worst >= FLOOR else 'NOT met'})")
