"""`python -m fp8q bench linear`: fp8q.torch.Linear (FP8 weights and
activations, row scales) against a bf16 nn.Linear and optimum-quanto's
qfloat8 QLinear when it is installed, in the same run, on the CPU (timing
method as in fp8q._cli._bench; there the wall time per call is the whole cost,
host included) and, where PyTorch and fp8q can use a GPU, on the GPU too
(the issue's whole sweep, CUDA-event medians, plus the host's time per
call of enqueueing HOST_CALLS calls without synchronisation for M <= 16,
with the verdict on issue 6's goals, then the W8A16 table of
fp8q._cli._bench_weight_only). `--glue` replaces the CPU sweep by
the per-call overhead on tiny shapes: fp8q.torch.Linear W8A8 and W8A16
against torch.nn.Linear in float32 and bfloat16, microseconds per call
(GLUE_CALLS calls per sample), with the verdict on issue 21's CPU goals.
Needs torch. Results go to docs/benchmarks.md; no test asserts timings.
"""
import copy
import datetime
import functools
import platform

import fp8q
from fp8q import _info
from fp8q._cli._bench import SEED, median_seconds
from fp8q._cli._bench_gpu import (HOST_CALLS, host_microseconds,
                                  median_ms_cuda, unavailable_reason)
from fp8q._cli._bench_weight_only import print_weight_only_benchmark

FULL_M = (16, 1024, 8192)
FULL_NK = (4096, 8192)
QUICK_M = (16, 1024)
QUICK_NK = (4096,)
GOAL_OF_BF16 = 1.3   # at M >= 4096, on H100/H200
GOAL_OF_QUANTO = 2.0
HOST_MAX_M = 16  # the host time is measured for M <= this
# --glue: (tokens, in_features, out_features), and calls per timed sample.
GLUE_SHAPES = ((1, 64, 64), (16, 64, 64), (1, 256, 256))
GLUE_CALLS = 2000
# Issue 21's CPU goals at GLUE_SHAPES[0]: at most this many times
# nn.Linear's time.
GLUE_GOALS = {"fp8q.torch.Linear W8A8": 4.0, "fp8q.torch.Linear W8A16": 3.0}


def _layers(torch, n, k):
    """(name, module) pairs to time, all from the same float weights and
    all taking bfloat16 inputs."""
    import fp8q.torch as fpt

    torch.manual_seed(SEED)
    linear = torch.nn.Linear(k, n)
    layers = [("fp8q.torch.Linear W8A8", fpt.Linear.from_linear(
        linear, activations="e4m3"))]
    try:
        from optimum import quanto
    except ImportError:
        quanto = None
    if quanto is not None:
        theirs = torch.nn.Sequential(copy.deepcopy(linear).to(torch.bfloat16))
        quanto.quantize(theirs, weights=quanto.qfloat8)
        quanto.freeze(theirs)
        layers.append(("optimum-quanto qfloat8 QLinear", theirs))
    return [("bf16 nn.Linear", linear.to(torch.bfloat16))] + layers


def print_gpu_linear_benchmark(repeats):
    """The issue's whole sweep on the GPU, and the verdict on its goals."""
    import torch

    reason = unavailable_reason(torch)
    if reason is not None:
        print(f"GPU linear benchmark not run: {reason}")
        return
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; "
          "bfloat16 inputs, CUDA-event medians; host us: wall time per call "
          f"of enqueueing {HOST_CALLS} calls without synchronisation "
          f"(M <= {HOST_MAX_M})")
    print()
    print("| M | N = K | layer | ms | TFLOP/s | speed vs bf16 | host us |")
    print("|---:|---:|---|---:|---:|---:|---:|")
    worst_bf16 = worst_quanto = None
    for nk in FULL_NK:
        layers = [(name, module.to("cuda"))
                  for name, module in _layers(torch, nk, nk)]
        for m in FULL_M:
            x = torch.randn(m, nk, device="cuda", dtype=torch.bfloat16)
            calls = [functools.partial(module, x) for _, module in layers]
            with torch.inference_mode():
                ms = median_ms_cuda(torch, calls, repeats)
                host = [f"{host_microseconds(torch, function):.1f}"
                        if m <= HOST_MAX_M else "-" for function in calls]
            for (name, _), value, host_us in zip(layers, ms, host):
                print(f"| {m} | {nk} | {name} | {value:.3f} | "
                      f"{2.0 * m * nk * nk / value / 1e9:.1f} | "
                      f"{ms[0] / value:.2f}x | {host_us} |")
            if m >= 4096:
                ratio = ms[0] / ms[1]
                worst_bf16 = ratio if worst_bf16 is None else min(worst_bf16,
                                                                  ratio)
            if len(ms) > 2:
                ratio = ms[2] / ms[1]
                worst_quanto = (ratio if worst_quanto is None
                                else min(worst_quanto, ratio))
    print()
    print(f"fp8q.torch.Linear vs bf16 at M >= 4096: slowest {worst_bf16:.2f}x "
          f"(goal >= {GOAL_OF_BF16}: "
          f"{'met' if worst_bf16 >= GOAL_OF_BF16 else 'NOT met'})")
    if worst_quanto is None:
        print("optimum-quanto not installed: its goal not measured")
    else:
        print(f"fp8q.torch.Linear vs optimum-quanto: slowest {worst_quanto:.2f}x "
              f"(goal >= {GOAL_OF_QUANTO}: "
              f"{'met' if worst_quanto >= GOAL_OF_QUANTO else 'NOT met'})")
    print_weight_only_benchmark(repeats)


def _print_cpu_header(torch):
    """The machine and software line of the CPU tables."""
    print(f"fp8q {fp8q.__version__} on {_info.cpu_model()}, torch "
          f"{torch.__version__} ({torch.get_num_threads()} threads), Python "
          f"{platform.python_version()}, "
          f"{datetime.date.today().isoformat()}")


def print_linear_benchmark(full, repeats):
    """Runs the CPU sweep and prints a markdown table: milliseconds (wall
    time per call, the whole cost on the CPU) and TFLOP/s per layer and
    shape, and each layer's speed relative to bf16."""
    import torch

    m_values, nk_values = (FULL_M, FULL_NK) if full else (QUICK_M, QUICK_NK)
    _print_cpu_header(torch)
    print(f"inputs in bfloat16; median of {repeats} interleaved repeats "
          "after a warm-up")
    print()
    print("| M | N = K | layer | ms | TFLOP/s | speed vs bf16 |")
    print("|---:|---:|---|---:|---:|---:|")
    for nk in nk_values:
        layers = _layers(torch, nk, nk)
        for m in m_values:
            x = torch.randn(m, nk, generator=torch.Generator().manual_seed(
                SEED)).to(torch.bfloat16)
            with torch.inference_mode():
                seconds = median_seconds(
                    [functools.partial(module, x) for _, module in layers],
                    repeats)
            for (name, _), value in zip(layers, seconds):
                print(f"| {m} | {nk} | {name} | {value * 1e3:.2f} | "
                      f"{2.0 * m * nk * nk / value / 1e12:.4f} | "
                      f"{seconds[0] / value:.2f}x |")


def _glue_layers(torch, in_features, out_features, dtype):
    """(name, module) pairs for one glue row group: torch.nn.Linear in
    `dtype` and fp8q.torch.Linear W8A8 and W8A16 quantized from it."""
    import fp8q.torch as fpt

    torch.manual_seed(SEED)
    linear = torch.nn.Linear(in_features, out_features).to(dtype)
    return [("torch.nn.Linear", linear),
            ("fp8q.torch.Linear W8A8", fpt.Linear.from_linear(
                linear, activations="e4m3")),
            ("fp8q.torch.Linear W8A16", fpt.Linear.from_linear(
                linear, activations=None))]


def print_glue_benchmark(repeats):
    """The per-call overhead on tiny CPU shapes (GLUE_SHAPES), where the
    product is negligible and the time is what surrounds it: microseconds
    per call (the median of `repeats` samples of GLUE_CALLS back-to-back
    calls each, layers taking turns, under torch.inference_mode()) of
    torch.nn.Linear and fp8q.torch.Linear W8A8 and W8A16 in float32 and
    bfloat16, each fp8q layer's time as a multiple of nn.Linear's (same
    shape and dtype), and the verdict on issue 21's goals at 64 -> 64 with
    one token (GLUE_GOALS)."""
    import torch

    _print_cpu_header(torch)
    print(f"us per call: median of {repeats} interleaved samples of "
          f"{GLUE_CALLS} calls each, after a warm-up, under "
          "torch.inference_mode()")
    print()
    print("| tokens | in -> out | dtype | layer | us per call "
          "| time / nn.Linear's |")
    print("|---:|---|---|---|---:|---:|")
    goal_ratios = []
    for tokens, in_features, out_features in GLUE_SHAPES:
        for dtype in (torch.float32, torch.bfloat16):
            layers = _glue_layers(torch, in_features, out_features, dtype)
            x = torch.randn(tokens, in_features,
                            generator=torch.Generator().manual_seed(SEED)
                            ).to(dtype)
            with torch.inference_mode():
                seconds = median_seconds(
                    [functools.partial(module, x) for _, module in layers],
                    repeats, calls=GLUE_CALLS)
            dtype_name = str(dtype).removeprefix("torch.")
            for (name, _), value in zip(layers, seconds):
                ratio = value / seconds[0]
                print(f"| {tokens} | {in_features} -> {out_features} "
                      f"| {dtype_name} | {name} | {value * 1e6:.2f} "
                      f"| {ratio:.2f}x |")
                if ((tokens, in_features, out_features) == GLUE_SHAPES[0]
                        and name in GLUE_GOALS):
                    goal_ratios.append((name, dtype_name, ratio))
    print()
    tokens, in_features, out_features = GLUE_SHAPES[0]
    for name, dtype_name, ratio in goal_ratios:
        goal = GLUE_GOALS[name]
        print(f"{name} ({in_features} -> {out_features}, {tokens} token, "
              f"{dtype_name}): {ratio:.2f}x nn.Linear's time (goal <= "
              f"{goal:g}x: {'met' if ratio <= goal else 'NOT met'})")
    print()
    _print_torch_argument_costs(torch, repeats)


def _print_torch_argument_costs(torch, repeats):
    """The same per-call cost for fp8q's own functions given torch tensors
    (each argument crosses through DLPack: the C exchange API where torch
    has one): fp8q.asarray, casts (with a Python float scale too), a
    quantize and a dequantize (fp8q.quantize passes eight arguments by
    name to its C half) and a tensorwise scaled_mm into out= on tiny
    float32 / FP8 CPU tensors."""
    generator = torch.Generator().manual_seed(SEED)
    x = torch.randn(16, 64, generator=generator)
    a = x.to(torch.float8_e4m3fn)
    b = torch.randn(64, 64, generator=generator).to(torch.float8_e4m3fn).T
    scale_a, scale_b = torch.tensor(0.5), torch.tensor(0.25)
    out = torch.empty(16, 64, dtype=torch.bfloat16)
    quantized = fp8q.quantize(x)
    calls = [("fp8q.asarray(x), x 16 x 64 float32",
              functools.partial(fp8q.asarray, x)),
             ("fp8q.cast(x, \"e4m3\")",
              functools.partial(fp8q.cast, x, "e4m3")),
             ("fp8q.cast(x, \"e4m3\", scale=2.0)",
              lambda: fp8q.cast(x, "e4m3", scale=2.0)),
             ("fp8q.quantize(x)", functools.partial(fp8q.quantize, x)),
             ("QTensor.dequantize()", quantized.dequantize),
             ("fp8q.scaled_mm(a, b, scale_a, scale_b, out=out), "
              "16 x 64 x 64 tensorwise",
              functools.partial(fp8q.scaled_mm, a, b, scale_a, scale_b,
                                out=out))]
    seconds = median_seconds([call for _, call in calls], repeats,
                             calls=GLUE_CALLS)
    print("| fp8q call on torch CPU tensors | us per call |")
    print("|---|---:|")
    for (name, _), value in zip(calls, seconds):
        print(f"| {name} | {value * 1e6:.2f} |")
