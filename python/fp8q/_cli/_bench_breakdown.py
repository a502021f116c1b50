"""`python -m fp8q bench linear --device cuda --breakdown`: where the time
of a W8A8 fp8q.torch.Linear forward goes on a GPU, piece by piece, against
bf16 nn.Linear and torch._scaled_mm in the same run.

The pieces are the calls that compute the layer's work alone
(`fp8_pieces`, `weight_only_piece`): the activation quantize exactly as the
layer quantizes x, the FP8 GEMM on those codes, and the weight-only product
that few tokens take (docs/torch.md, "Which product runs"). On the fake CUDA
driver, tests/fake_gpu_layer.py checks that each product's pieces launch
exactly the layer's kernels and cuBLASLt calls and give its bits, so the
table's pieces add up to the layer. Per shape and token count the GPU table
has CUDA-event medians of every piece, the layer forced onto each product
and as users get it (eager and replayed from a CUDA graph), bf16 eager and
graphed, the host's time per eager call, and the crossover between the two
products; the W8A16 weight decode (`weight_decode_piece`) of each shape
against a device copy of its bytes; then the kernels and copies torch's profiler sees in one layer
call, and, where Nsight Compute (ncu) is installed, its profile of them.
Results go to docs/benchmarks.md; no test asserts timings.
"""
import csv
import functools
import os
import shutil
import subprocess
import sys

import fp8q
from fp8q import _C
from fp8q._cli._bench import SEED
from fp8q._cli._bench_gpu import host_microseconds, median_ms_cuda, \
    unavailable_reason

# (N, K) of the goals: Llama-3-8B's q/o, gate/up and down
# projections, and a square 8192.
SHAPES = ((4096, 4096), (14336, 4096), (4096, 14336), (8192, 8192))
TOKENS = (1, 2, 4, 8, 16, 64, 128, 2048, 8192)
HOST_MAX_TOKENS = 16  # host time per call is measured up to this many
PROFILED_CALLS = 10   # layer calls under torch's profiler
NCU_TIMEOUT = 60      # seconds for the one ncu run
DECODE_GOAL = 0.9     # the W8A16 weight decode against the copy (issue 38)
# The quantize granularity of x for each weight granularity (dynamic).
ACTIVATION_GRANULARITY = {"row": "row", "tensor": "row", "block": (1, 128)}


# ---------------------------------------------------------------------------
# The pieces (fp8q.Tensor or torch tensors; also run on the fake driver)


def _laid_out_for_b(weight_scale):
    """The weight scales laid out for scaled_mm's b = weight.T: () as is,
    (N, 1) -> (1, N), 128x128 blocks transposed."""
    return weight_scale if len(weight_scale.shape) == 0 else weight_scale.T


def fp8_pieces(x, weight, weight_scale, bias, input_scale, granularity):
    """[(name, call)]: the work of _C.linear_layer(x, weight, weight_scale,
    bias, input_scale, granularity, None, "fp8") for a C-contiguous 2-D x,
    as the two calls that compute it alone:

    - "activation quantize": x to float8_e4m3fn, saturating: fp8q.cast
      with input_scale as its scale when given, else fp8q.quantize per
      token (1x128 blocks for "block" weights): the layer's quantize, on the
      same kernels;
    - "FP8 GEMM": fp8q.scaled_mm of those codes (computed once here) and
      weight.T with the scales laid out for it, the bias, and x's dtype out:
      the layer's product, with its bits.

    Each call returns its result; both run on the current stream for torch
    tensors."""
    if input_scale is not None:
        quantize = functools.partial(fp8q.cast, x, "float8_e4m3fn",
                                     scale=input_scale, saturate=True)
        codes, scale_a = quantize(), input_scale
    else:
        quantize = functools.partial(
            fp8q.quantize, x, "float8_e4m3fn",
            granularity=ACTIVATION_GRANULARITY[granularity])
        quantized = quantize()
        codes, scale_a = quantized.data, quantized.scale
    gemm = functools.partial(
        fp8q.scaled_mm, codes, weight.T, scale_a,
        _laid_out_for_b(weight_scale), bias=bias,
        out_dtype=fp8q.asarray(x).dtype)
    return [("activation quantize", quantize), ("FP8 GEMM", gemm)]


def weight_only_piece(x, weight, weight_scale, bias, granularity):
    """("weight-only product", call): _C.layer_gemv on the layer's tensors,
    what few tokens take (the call returns None where its kernels do not
    take x)."""
    return ("weight-only product", functools.partial(
        _C.layer_gemv, x, weight, weight_scale, bias, granularity, None))


def weight_decode_piece(x, weight, weight_scale, granularity):
    """("W8A16 weight decode", call): _C.layer_weight on the layer's
    tensors, the weight decoded into x's dtype: what a weight-only layer's
    forward multiplies by (torch's GEMM) above the weight-only product's
    token counts (kernels/cast.cuh: fp8q_cast_from_fp8_wide where
    in_features is a multiple of 16)."""
    return ("W8A16 weight decode", functools.partial(
        _C.layer_weight, x, weight, weight_scale, granularity, None))


def layer_call(x, weight, weight_scale, bias, input_scale, granularity,
               path=None):
    """The layer's one C call, on product `path` (None: as users get it;
    "fp8"; "weight-only")."""
    arguments = (x, weight, weight_scale, bias, input_scale, granularity,
                 None)
    if path is not None:
        arguments += (path,)
    return functools.partial(_C.linear_layer, *arguments)


# ---------------------------------------------------------------------------
# The GPU table


def _graphed(torch, function):
    """A replay of `function` captured in a CUDA graph (warmed on a side
    stream first, as torch.cuda.graph asks)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            function()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        function()
    return graph.replay


def _scaled_mm_torch(torch, codes, weight, weight_scale, bias, dtype):
    """torch._scaled_mm rowwise on the same codes, weight and bias (in the
    output dtype, as torch asks), or None where the scales are not
    rowwise."""
    from fp8q.torch import to_torch

    if tuple(weight_scale.shape) != (weight.shape[0], 1):
        return None
    return functools.partial(
        torch._scaled_mm, to_torch(codes.data), weight.T,
        scale_a=to_torch(codes.scale), scale_b=weight_scale.T.contiguous(),
        bias=None if bias is None else bias.to(dtype), out_dtype=dtype)


def _layer(torch, n, k):
    """(bf16 nn.Linear, fp8q.torch.Linear W8A8 with row scales) from one
    float layer, on the GPU."""
    import fp8q.torch as fpt

    torch.manual_seed(SEED)
    linear = torch.nn.Linear(k, n, device="cuda")
    layer = fpt.Linear.from_linear(linear, activations="e4m3")
    return linear.to(torch.bfloat16), layer


def _row(torch, linear, layer, x, repeats):
    """Every timed figure of one shape and token count, as a dict."""
    parameters = (x, layer.weight, layer.weight_scale, layer.bias, None,
                  "row")
    quantize, gemm = fp8_pieces(*parameters)
    theirs = _scaled_mm_torch(torch, quantize[1](), layer.weight,
                              layer.weight_scale, layer.bias, x.dtype)
    gemv = weight_only_piece(x, *parameters[1:4], "row")[1]
    auto = functools.partial(layer, x)
    timed = {"quantize": quantize[1], "gemm": gemm[1],
             "layer fp8": layer_call(*parameters, path="fp8"),
             "layer": auto, "bf16": functools.partial(linear, x)}
    if theirs is not None:
        timed["torch._scaled_mm"] = theirs
    if gemv() is not None:
        timed["weight-only"] = gemv
    timed["layer graphed"] = _graphed(torch, auto)
    timed["bf16 graphed"] = _graphed(torch, timed["bf16"])
    figures = dict(zip(timed, median_ms_cuda(torch, list(timed.values()),
                                             repeats)))
    if x.shape[0] <= HOST_MAX_TOKENS:
        figures["host layer"] = host_microseconds(torch, auto)
        figures["host bf16"] = host_microseconds(torch, timed["bf16"])
    return figures


def _decode_against_copy(torch, layer, repeats):
    """(decode ms, copy ms, bytes moved): weight_decode_piece on the layer's
    weight into bfloat16 against a device copy (torch copy_) moving the same
    bytes (the codes read plus the bfloat16 weight written)."""
    x = torch.empty(1, layer.weight.shape[1], device="cuda",
                    dtype=torch.bfloat16)
    _, decode = weight_decode_piece(x, layer.weight, layer.weight_scale,
                                    "row")
    moved = layer.weight.numel() * (1 + x.element_size())
    source = torch.empty(moved // 2, device="cuda", dtype=torch.uint8)
    destination = torch.empty_like(source)
    decode_ms, copy_ms = median_ms_cuda(
        torch, [decode, lambda: destination.copy_(source)], repeats)
    return decode_ms, copy_ms, moved


def _print_decode_against_copy(torch, repeats):
    """The W8A16 weight decode of each shape against the copy of its
    bytes, with issue 38's goal (0.9x the copy)."""
    print("W8A16 weight decode (row-scaled e4m3 -> bfloat16, what a "
          "weight-only layer runs before torch's GEMM above 64 tokens) "
          "against a device copy of the same bytes:")
    print()
    print("| N x K | decode ms | decode GB/s | copy ms | decode vs copy |")
    print("|---|---:|---:|---:|---:|")
    worst = None
    for n, k in SHAPES:
        _, layer = _layer(torch, n, k)
        with torch.inference_mode():
            decode_ms, copy_ms, moved = _decode_against_copy(torch, layer,
                                                             repeats)
        worst = min(worst or copy_ms / decode_ms, copy_ms / decode_ms)
        print(f"| {n} x {k} | {decode_ms:.4f} | {moved / decode_ms / 1e6:.0f}"
              f" | {copy_ms:.4f} | {copy_ms / decode_ms:.2f}x |")
    print()
    print(f"W8A16 weight decode: slowest {worst:.2f}x the copy (goal >= "
          f"{DECODE_GOAL}: {'met' if worst >= DECODE_GOAL else 'NOT met'})")
    print()


def _cell(figures, name, digits=4):
    value = figures.get(name)
    return "-" if value is None else f"{value:.{digits}f}"


def _print_kernels(torch, layer, x):
    """The kernels and copies one eager layer call runs, as torch's
    profiler (CUPTI) sees them: name, count per call, device us each."""
    from torch.profiler import ProfilerActivity, profile

    layer(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as profiler:
        for _ in range(PROFILED_CALLS):
            layer(x)
        torch.cuda.synchronize()
    print(f"Kernels and copies of one layer call ({x.shape[0]} tokens, "
          "torch.profiler):")
    print()
    print("| kernel or copy | per call | device us each |")
    print("|---|---:|---:|")
    for event in profiler.key_averages():
        total = getattr(event, "device_time_total", None)
        if total is None:
            total = getattr(event, "cuda_time_total", 0)
        if event.count == 0 or total <= 0:
            continue
        print(f"| {event.key[:90]} | {event.count / PROFILED_CALLS:g} | "
              f"{total / event.count:.2f} |")
    print()


NCU_SCRIPT = """
import torch, fp8q.torch as fpt
linear = torch.nn.Linear({k}, {n}, device="cuda")
layer = fpt.Linear.from_linear(linear, activations="e4m3")
x = torch.randn({m}, {k}, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    layer(x)
torch.cuda.synchronize()
"""


def _print_ncu_profile(n, k, m):
    """Nsight Compute's duration, DRAM and SM throughput of every kernel of
    three layer calls, where ncu is installed (one run, NCU_TIMEOUT)."""
    ncu = shutil.which("ncu")
    if ncu is None:
        print("ncu not installed: no Nsight Compute profile")
        return
    command = [ncu, "--csv", "--metrics",
               "gpu__time_duration.sum,"
               "dram__throughput.avg.pct_of_peak_sustained_elapsed,"
               "sm__throughput.avg.pct_of_peak_sustained_elapsed",
               sys.executable, "-c", NCU_SCRIPT.format(n=n, k=k, m=m)]
    try:
        completed = subprocess.run(command, capture_output=True, text=True,
                                   timeout=NCU_TIMEOUT,
                                   env=dict(os.environ))
    except subprocess.TimeoutExpired:
        print(f"ncu did not finish in {NCU_TIMEOUT} s")
        return
    lines = completed.stdout.splitlines()
    header = next((i for i, line in enumerate(lines)
                   if line.startswith('"ID"')), None)
    if completed.returncode != 0 or header is None:
        tail = (completed.stderr or completed.stdout).strip().splitlines()
        print(f"ncu failed (exit {completed.returncode}): "
              f"{tail[-1] if tail else 'no output'}")
        return
    print(f"ncu, {m} x {k} -> {n}, three layer calls:")
    print()
    print("| kernel | metric | value |")
    print("|---|---|---:|")
    for row in csv.DictReader(lines[header:]):
        print(f"| {row.get('Kernel Name', '?')[:70]} | "
              f"{row.get('Metric Name', '?')} ({row.get('Metric Unit', '')})"
              f" | {row.get('Metric Value', '?')} |")
    print()


def print_breakdown(repeats, tokens=None):
    """Runs the breakdown on the GPU and prints its markdown tables (see
    the module's text); says why where no GPU can be measured."""
    import torch

    reason = unavailable_reason(torch)
    if reason is not None:
        print(f"GPU breakdown not run: {reason}")
        return
    info = fp8q.info()["cuda"]["devices"][torch.cuda.current_device()]
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"fp8q {fp8q.__version__}; bfloat16 x, row-scaled e4m3 weights, "
          "per-token activation scales; CUDA-event medians (ms) of "
          f"{repeats} rounds; host us: wall time per eager call enqueued "
          f"without synchronisation (up to {HOST_MAX_TOKENS} tokens); the "
          "layer takes the weight-only product up to "
          f"{info['fp8_layer_weight_only_tokens']} tokens here "
          "(FP8Q_CUDA_FP8_LAYER_PATH: "
          f"{fp8q.info()['cuda']['switches']['FP8Q_CUDA_FP8_LAYER_PATH']})")
    print()
    print("| M | N x K | quantize | FP8 GEMM | torch._scaled_mm | weight-only "
          "| layer fp8 | layer | layer graphed | bf16 | bf16 graphed "
          "| layer vs bf16 | graphed vs bf16 graphed | host us layer / bf16 |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:"
          "|---|")
    crossovers = []
    for n, k in SHAPES:
        linear, layer = _layer(torch, n, k)
        last_weight_only = 0
        for m in tokens or TOKENS:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            with torch.inference_mode():
                figures = _row(torch, linear, layer, x, repeats)
            if figures.get("weight-only", float("inf")) < figures[
                    "layer fp8"]:
                last_weight_only = m
            host = (f"{figures['host layer']:.1f} / "
                    f"{figures['host bf16']:.1f}"
                    if "host layer" in figures else "-")
            print(f"| {m} | {n} x {k} | {_cell(figures, 'quantize')} | "
                  f"{_cell(figures, 'gemm')} | "
                  f"{_cell(figures, 'torch._scaled_mm')} | "
                  f"{_cell(figures, 'weight-only')} | "
                  f"{_cell(figures, 'layer fp8')} | "
                  f"{_cell(figures, 'layer')} | "
                  f"{_cell(figures, 'layer graphed')} | "
                  f"{_cell(figures, 'bf16')} | "
                  f"{_cell(figures, 'bf16 graphed')} | "
                  f"{figures['bf16'] / figures['layer']:.2f}x | "
                  f"{figures['bf16 graphed'] / figures['layer graphed']:.2f}x"
                  f" | {host} |")
        crossovers.append((n, k, last_weight_only))
    print()
    for n, k, m in crossovers:
        print(f"{n} x {k}: the weight-only product was faster than quantize "
              f"+ FP8 GEMM up to {m} tokens (the table in "
              "csrc/cuda/layer_path.c says "
              f"{info['fp8_layer_weight_only_tokens']})")
    print()
    _print_decode_against_copy(torch, repeats)
    n, k = SHAPES[0]
    linear, layer = _layer(torch, n, k)
    for m in (16, 8192):
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        with torch.inference_mode():
            _print_kernels(torch, layer, x)
    _print_ncu_profile(n, k, 16)
