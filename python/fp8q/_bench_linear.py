"""`python -m fp8q bench linear`: fp8q.torch.Linear (FP8 weights and
activations, row scales) against a bf16 nn.Linear and optimum-quanto's
qfloat8 QLinear when it is installed, in the same run (timing method as in
fp8q._bench). Needs torch. Results go to docs/benchmarks.md.
"""
import copy
import datetime
import platform

import fp8q
from fp8q import _info
from fp8q._bench import SEED, median_seconds

FULL_M = (16, 1024, 8192)
FULL_NK = (4096, 8192)
QUICK_M = (16, 1024)
QUICK_NK = (4096,)


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
