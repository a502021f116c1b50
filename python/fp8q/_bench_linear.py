"""`python -m fp8q bench linear`: fp8q.torch.Linear (FP8 weights and
activations, row scales) against a bf16 nn.Linear and optimum-quanto's
qfloat8 QLinear when it is installed, in the same run, on the CPU (timing
method as in fp8q._bench) and, where PyTorch and fp8q can use a GPU, on
the GPU too (the issue's whole sweep, CUDA-event medians as in
fp8q._bench_cast_gpu, with the verdict on issue 6's goals). Needs torch.
Results go to docs/benchmarks.md.
"""
import copy
import datetime
import platform

import fp8q
from fp8q import _info
from fp8q._bench import SEED, median_seconds
from fp8q._bench_gpu import median_ms_cuda, unavailable_reason

FULL_M = (16, 1024, 8192)
FULL_NK = (4096, 8192)
QUICK_M = (16, 1024)
QUICK_NK = (4096,)
GOAL_OF_BF16 = 1.3   # at M >= 4096, on H100/H200
GOAL_OF_QUANTO = 2.0


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
          "bfloat16 inputs, CUDA-event medians")
    print()
    print("| M | N = K | layer | ms | TFLOP/s | speed vs bf16 |")
    print("|---:|---:|---|---:|---:|---:|")
    worst_bf16 = worst_quanto = None
    for nk in FULL_NK:
        layers = [(name, module.to("cuda"))
                  for name, module in _layers(torch, nk, nk)]
        for m in FULL_M:
            x = torch.randn(m, nk, device="cuda", dtype=torch.bfloat16)

            def call(module):
                def run():
                    with torch.inference_mode():
                        return module(x)
                return run

            ms = median_ms_cuda(torch, [call(module) for _, module in layers],
                                repeats)
            for (name, _), value in zip(layers, ms):
                print(f"| {m} | {nk} | {name} | {value:.3f} | "
                      f"{2.0 * m * nk * nk / value / 1e9:.1f} | "
                      f"{ms[0] / value:.2f}x |")
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


def print_linear_benchmark(full, repeats):
    """Runs the sweep and prints a markdown table: milliseconds and TFLOP/s
    per layer and shape, and each layer's speed relative to bf16."""
    import torch

    m_values, nk_values = (FULL_M, FULL_NK) if full else (QUICK_M, QUICK_NK)
    print(f"fp8q {fp8q.__version__} on {_info.cpu_model()}, torch "
          f"{torch.__version__} ({torch.get_num_threads()} threads), Python "
          f"{platform.python_version()}, "
          f"{datetime.date.today().isoformat()}")
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

            def call(module):
                def run():
                    with torch.inference_mode():
                        return module(x)
                return run

            seconds = median_seconds([call(module) for _, module in layers],
                                     repeats)
            for (name, _), value in zip(layers, seconds):
                print(f"| {m} | {nk} | {name} | {value * 1e3:.2f} | "
                      f"{2.0 * m * nk * nk / value / 1e12:.4f} | "
                      f"{seconds[0] / value:.2f}x |")
