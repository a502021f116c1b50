"""The GPU half of `python -m fp8q bench cast`: bfloat16 -> float8_e4m3fn with
a per-tensor scale and the input's amax recorded in the same pass (delayed
scaling), against a device-to-device copy moving the same bytes and against
PyTorch doing the same work, all in one run on one device.

Peers: torch's `dst.copy_(src)` of as many bytes as the cast reads plus
writes, over 2 (so both read and write the same total); PyTorch eager
`(x / s).clamp(-448, 448).to(torch.float8_e4m3fn)` plus `x.abs().amax()`;
and the same expression under torch.compile when it compiles here. Times
are CUDA-event medians of --repeats rounds of a few calls each, the
implementations taking turns within every round. GB/s counts bytes read
plus bytes written. Needs PyTorch with CUDA (for the peers and the
events); no test asserts timings.

A second table (issues 14 and 22) measures per-token dynamic quantization
of an 8192 x 8192 bfloat16 activation (fp8q.quantize(granularity="row"),
the one-pass kernel) against PyTorch eager `x.abs().amax(-1)` + divide +
`.to(float8_e4m3fn)` and torch.compile of it, fp8q's of the same values in
float32 (rows the kernel quantizes one at a time, without the next row in
flight), the rowwise scaled cast
(fp8q.cast with one given scale per row), the plain casts of bfloat16 and
float32 against torch's `.to(float8_e4m3fn)`, the dequantize of the
per-token codes with their row scales into bfloat16 (the W8A16 layer's
weight decode above 64 tokens) against PyTorch eager `(codes.float() *
scale).to(bfloat16)`, and MaxCalibrator and HistogramCalibrator updates
from the GPU tensor (reduced on the GPU into a state kept there, no host
wait), each against a copy of the bytes it must move.
"""
import fp8q
from fp8q._cli._bench_gpu import gpu_torch, median_ms_cuda

DEFAULT_BYTES = 512 << 20  # bfloat16 input: 256 Mi elements
GOAL_OF_COPY = 0.90
GOAL_OF_EAGER = 3.0
TOKENS, HIDDEN = 8192, 8192  # the per-token quantize input, bfloat16
GOALS_OF_COPY_14 = {"per-token": 0.85, "rowwise": 0.85, "histogram": 0.50,
                    "plain": 0.90, "max": 0.50, "dequantize": 0.90}
# Peers each fp8q operation of the second table must beat: (peer, goal of
# the peer's time over fp8q's).
PEER_GOALS = {
    "fp8q.quantize(x, granularity=\"row\")": (
        ("PyTorch eager x.abs().amax(-1) + divide + .to(e4m3)", GOAL_OF_EAGER),
        ("torch.compile of the same", 1.2)),
    "fp8q.cast(x) bfloat16 -> e4m3 (no scale)": (
        ("PyTorch x.to(float8_e4m3fn), bfloat16", 1.0),),
    "fp8q.cast(x) float32 -> e4m3 (no scale)": (
        ("PyTorch x.to(float8_e4m3fn), float32", 1.0),),
}


def _torch_compiled(torch, expression):
    """torch.compile(expression), or (None, reason) when it does not run."""
    try:
        compiled = torch.compile(expression)
        return compiled, None
    except Exception as error:  # noqa: BLE001 - any failure is reported
        return None, f"{type(error).__name__}: {error}"


def measure(repeats, input_bytes=DEFAULT_BYTES):
    """Runs the GPU measurements; returns (rows, notes): rows are (name,
    milliseconds, bytes moved) and notes lines of text. Raises RuntimeError
    saying why when there is no GPU to measure on."""
    torch = gpu_torch()

    count = input_bytes // 2
    generator = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(count, device="cuda", dtype=torch.bfloat16,
                    generator=generator)
    scale_value = float(x.abs().amax()) / 448.0
    scale = torch.full((), scale_value, device="cuda")
    moved = count * (2 + 1)
    copy_source = torch.empty(moved // 2, device="cuda", dtype=torch.uint8)
    copy_destination = torch.empty_like(copy_source)

    fx = fp8q.from_dlpack(x)
    f_scale = fp8q.from_dlpack(scale)
    f_out = fp8q.empty((count,), "float8_e4m3fn", device="cuda")
    f_amax = fp8q.zeros((), device="cuda")

    def fp8q_cast():
        fp8q.cast(fx, "float8_e4m3fn", scale=f_scale, out=f_out,
                  amax_out=f_amax)

    def copy():
        copy_destination.copy_(copy_source)

    def eager():
        quantized = (x / scale).clamp(-448, 448).to(torch.float8_e4m3fn)
        return quantized, x.abs().amax()

    functions = [("device-to-device copy (torch copy_)", copy),
                 ("fp8q.cast(scale=, amax_out=)", fp8q_cast),
                 ("PyTorch eager (x / s).clamp().to(e4m3) + abs().amax()",
                  eager)]
    notes = []
    compiled, reason = _torch_compiled(torch, eager)
    if compiled is not None:
        try:
            compiled()
            functions.append(("torch.compile of the same", compiled))
        except Exception as error:  # noqa: BLE001 - reported, not fatal
            reason = f"{type(error).__name__}: {error}".splitlines()[0]
    if reason is not None:
        notes.append(f"torch.compile not measured: {reason}")

    times = median_ms_cuda(torch, [function for _, function in functions],
                       repeats)
    rows = [(name, ms, moved) for (name, _), ms in zip(functions, times)]

    # Results agree with PyTorch's in float32 (the eager expression above
    # divides in bfloat16, so it may round some values differently).
    expected = (x.float() / scale).clamp(-448, 448).to(torch.float8_e4m3fn)
    expected_amax = x.abs().amax().float()
    torch.cuda.synchronize()
    ours = torch.from_dlpack(f_out.view("uint8"))
    same = bool(torch.equal(ours, expected.view(torch.uint8)))
    same_amax = float(f_amax.cpu().numpy()) == float(expected_amax)
    notes.append(f"fp8q's codes equal PyTorch's float32 "
                 f"(x.float() / s).clamp(-448, 448).to(e4m3): {same}; amax "
                 f"equal: {same_amax}")
    device = torch.cuda.get_device_name()
    notes.insert(0, f"{device}, torch {torch.__version__}, input "
                 f"{count} bfloat16 values ({input_bytes >> 20} MiB)")
    return rows, notes


def measure_per_token(repeats):
    """Issue 14's rows: (name, milliseconds, bytes moved, copy milliseconds
    of those bytes) per operation, and notes. Raises RuntimeError as
    measure."""
    import torch

    import fp8q.calib

    generator = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(TOKENS, HIDDEN, device="cuda", dtype=torch.bfloat16,
                    generator=generator)
    x *= torch.exp2(torch.randint(-8, 8, (TOKENS, 1), device="cuda",
                                  generator=generator)).to(torch.bfloat16)
    fx = fp8q.from_dlpack(x)
    row_scale = (x.abs().amax(-1, keepdim=True).float() / 448.0)
    f_row_scale = fp8q.from_dlpack(row_scale)
    f_out = fp8q.empty((TOKENS, HIDDEN), "float8_e4m3fn", device="cuda")
    calibrator = fp8q.calib.HistogramCalibrator()
    calibrator.update(fx)  # the first update fixes the range
    max_calibrator = fp8q.calib.MaxCalibrator()
    x32 = x.float()
    fx32 = fp8q.from_dlpack(x32)
    q_rows = fp8q.quantize(fx, "float8_e4m3fn", granularity="row")
    codes = torch.from_dlpack(q_rows.data.view("uint8")).view(
        torch.float8_e4m3fn)
    code_scales = torch.from_dlpack(q_rows.scale)

    def eager():
        scale = x.abs().amax(-1, keepdim=True).float() / 448.0
        return (x.float() / scale).to(torch.float8_e4m3fn), scale

    elements = TOKENS * HIDDEN
    quantize_bytes = elements * (2 + 1) + TOKENS * 4
    operations = [
        ("per-token", "fp8q.quantize(x, granularity=\"row\")",
         lambda: fp8q.quantize(fx, "float8_e4m3fn", granularity="row"),
         quantize_bytes),
        ("per-token", "PyTorch eager x.abs().amax(-1) + divide + .to(e4m3)",
         eager, quantize_bytes),
        ("per-token", "fp8q.quantize(x, granularity=\"row\"), float32 x",
         lambda: fp8q.quantize(fx32, "float8_e4m3fn", granularity="row"),
         elements * (4 + 1) + TOKENS * 4),
        ("rowwise", "fp8q.cast(x, scale=<one per row>)",
         lambda: fp8q.cast(fx, "float8_e4m3fn", scale=f_row_scale,
                           out=f_out), quantize_bytes),
        ("histogram", "HistogramCalibrator.update(x on the GPU, state kept there)",
         lambda: calibrator.update(fx), elements * 2),
        ("max", "MaxCalibrator.update(x on the GPU, state kept there)",
         lambda: max_calibrator.update(fx), elements * 2),
        ("plain", "fp8q.cast(x) bfloat16 -> e4m3 (no scale)",
         lambda: fp8q.cast(fx, "float8_e4m3fn", out=f_out), elements * 3),
        ("plain", "PyTorch x.to(float8_e4m3fn), bfloat16",
         lambda: x.to(torch.float8_e4m3fn), elements * 3),
        ("plain", "fp8q.cast(x) float32 -> e4m3 (no scale)",
         lambda: fp8q.cast(fx32, "float8_e4m3fn", out=f_out), elements * 5),
        ("plain", "PyTorch x.to(float8_e4m3fn), float32",
         lambda: x32.to(torch.float8_e4m3fn), elements * 5),
        ("dequantize", "fp8q.dequantize(q, \"bfloat16\"), row scales",
         lambda: fp8q.dequantize(q_rows, "bfloat16"), quantize_bytes),
        ("dequantize", "PyTorch (codes.float() * scale).to(bfloat16)",
         lambda: (codes.float() * code_scales).to(torch.bfloat16),
         quantize_bytes),
    ]
    notes = []
    compiled, reason = _torch_compiled(torch, eager)
    if compiled is not None:
        try:
            compiled()
            operations.insert(2, ("per-token", "torch.compile of the same",
                                  compiled, quantize_bytes))
        except Exception as error:  # noqa: BLE001 - reported, not fatal
            reason = f"{type(error).__name__}: {error}".splitlines()[0]
    if reason is not None:
        notes.append(f"torch.compile not measured: {reason}")

    copies = {}
    for moved in sorted({moved for *_, moved in operations}):
        source = torch.empty(moved // 2, device="cuda", dtype=torch.uint8)
        destination = torch.empty_like(source)
        copies[moved] = (lambda s=source, d=destination: d.copy_(s))
    functions = [function for _, _, function, _ in operations]
    functions += list(copies.values())
    times = median_ms_cuda(torch, functions, repeats)
    copy_ms = dict(zip(copies, times[len(operations):]))
    rows = [(group, name, ms, moved, copy_ms[moved])
            for (group, name, _, moved), ms in zip(operations, times)]

    # The codes and scales agree with PyTorch's float32 computation of the
    # same formula (fp8q's scale: amax / 448, correctly rounded in float32).
    q = fp8q.quantize(fx, "float8_e4m3fn", granularity="row")
    expected, expected_scale = eager()
    torch.cuda.synchronize()
    same = bool(torch.equal(torch.from_dlpack(q.data.view("uint8")),
                            expected.view(torch.uint8)))
    same_scale = bool(torch.equal(torch.from_dlpack(q.scale), expected_scale))
    notes.append(f"per-token codes equal PyTorch's float32 computation: "
                 f"{same}; scales equal: {same_scale}")
    return rows, notes


def print_per_token_benchmark(repeats):
    """Prints issue 14's table and its verdicts."""
    rows, notes = measure_per_token(repeats)
    print()
    print(f"Per-token quantize ({TOKENS} x {HIDDEN} bfloat16 -> e4m3fn), "
          "rowwise and plain casts, calibrator updates:")
    print()
    print("| goal | operation | median ms | GB/s | vs copy of its bytes |")
    print("|---|---|---:|---:|---:|")
    for group, name, ms, moved, copy_ms in rows:
        print(f"| {group} | {name} | {ms:.3f} | {moved / ms / 1e6:.0f} "
              f"| {copy_ms / ms:.2f}x |")
    print()
    for line in notes:
        print(line)
    by_name = {name: (ms, copy_ms) for _, name, ms, _, copy_ms in rows}
    for group, name, ms, _, copy_ms in rows:
        if not name.startswith(("fp8q.", "HistogramCalibrator",
                                "MaxCalibrator")):
            continue
        goal = GOALS_OF_COPY_14[group]
        verdict = (f"{name}: {copy_ms / ms:.2f}x the copy's bandwidth (goal "
                   f">= {goal:.2f}: {'met' if copy_ms / ms >= goal else 'NOT met'})")
        for peer, goal_of_peer in PEER_GOALS.get(name, ()):
            if peer in by_name:
                ratio = by_name[peer][0] / ms
                verdict += (f", {ratio:.2f}x {peer} (goal >= {goal_of_peer:g}: "
                            f"{'met' if ratio >= goal_of_peer else 'NOT met'})")
        print(verdict)


def print_gpu_cast_benchmark(repeats):
    """Prints the GPU table and the verdict on issue 3's goals, or why it
    could not run."""
    try:
        rows, notes = measure(repeats)
    except RuntimeError as error:
        print(f"GPU cast benchmark not run: {error}")
        return
    for line in notes[:1]:
        print(line)
    print()
    print("| operation | median ms | GB/s | vs copy | vs PyTorch eager |")
    print("|---|---:|---:|---:|---:|")
    copy_ms = rows[0][1]
    eager_ms = rows[2][1]
    for name, ms, moved in rows:
        print(f"| {name} | {ms:.3f} | {moved / ms / 1e6:.0f} "
              f"| {copy_ms / ms:.2f}x | {eager_ms / ms:.2f}x |")
    print()
    for line in notes[1:]:
        print(line)
    fp8q_ms = rows[1][1]
    of_copy = copy_ms / fp8q_ms
    of_eager = eager_ms / fp8q_ms
    print(f"fp8q.cast: {of_copy:.2f}x the copy's bandwidth (goal >= "
          f"{GOAL_OF_COPY:.2f}: {'met' if of_copy >= GOAL_OF_COPY else 'NOT met'}"
          f"), {of_eager:.2f}x PyTorch eager (goal >= {GOAL_OF_EAGER:g}: "
          f"{'met' if of_eager >= GOAL_OF_EAGER else 'NOT met'})")
    print_per_token_benchmark(repeats)
