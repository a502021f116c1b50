"""`python -m fp8q bench gemm`: fp8q.scaled_mm on the CPU against NumPy's
float32 matmul of the already-dequantized operands, measured in the same run
(timing method as in fp8q._bench).

Operands: a (M, K) and the weight w (N, K) drawn from N(0, 1), quantized to
float8_e4m3fn with row scales (a per row, w per output feature), b = w.T (the
column-major fast path). fp8q.scaled_mm(a, b, scale_a, scale_b,
out_dtype="float32") is timed whole (decoding, the float32 product,
epilogue); the peer is `a_deq @ b_deq` on float32 arrays prepared
beforehand, i.e. the float32 GEMM alone. TFLOP/s counts 2 * M * N * K.
Results go to docs/benchmarks.md; no test asserts timings.
"""
import datetime
import platform

import numpy as np

import fp8q
from fp8q import _info
from fp8q._bench import SEED, median_seconds

# The sweep (M x (N, K)); the default is its CPU-sized part.
FULL_M = (1, 16, 64, 256, 1024, 4096, 8192)
FULL_NK = ((4096, 4096), (14336, 4096), (4096, 14336), (8192, 8192))
QUICK_M = (1, 16, 64, 256, 1024)
QUICK_NK = ((4096, 4096), (14336, 4096))
ACCEPTANCE_RATIO = 0.8


def _operands(m, n, k):
    """(a, b, scale_a, scale_b, a_deq, b_deq) for one shape."""
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((m, k), dtype=np.float32)
    w = rng.standard_normal((n, k), dtype=np.float32)
    qa = fp8q.quantize(x, "float8_e4m3fn", granularity="row")
    qw = fp8q.quantize(w, "float8_e4m3fn", granularity="row")
    a_deq = qa.dequantize().numpy()
    b_deq = np.ascontiguousarray(qw.dequantize().numpy().T)
    return (qa.data, qw.data.T, qa.scale, qw.scale.T, a_deq, b_deq)


def measure(shapes, repeats):
    """Times every (m, n, k); returns rows (m, n, k, fp8q s, numpy s)."""
    rows = []
    for m, n, k in shapes:
        a, b, scale_a, scale_b, a_deq, b_deq = _operands(m, n, k)
        fp8q_seconds, numpy_seconds = median_seconds([
            lambda: fp8q.scaled_mm(a, b, scale_a, scale_b,
                                   out_dtype="float32"),
            lambda: a_deq @ b_deq,
        ], repeats)
        rows.append((m, n, k, fp8q_seconds, numpy_seconds))
    return rows


def print_gemm_benchmark(full, repeats):
    """Runs the sweep (full: the issue's; else the CPU-sized part) and
    prints a markdown table and the verdict on the CPU criterion
    (fp8q.scaled_mm >= 0.8x NumPy's float32 matmul at every shape)."""
    m_values, nk_values = (FULL_M, FULL_NK) if full else (QUICK_M, QUICK_NK)
    shapes = [(m, n, k) for n, k in nk_values for m in m_values]
    rows = measure(shapes, repeats)
    print(f"fp8q {fp8q.__version__} on {_info.cpu_model()} "
          f"({fp8q.get_num_threads()} fp8q threads), Python "
          f"{platform.python_version()}, NumPy {np.__version__}, "
          f"{datetime.date.today().isoformat()}")
    print(f"scaled_mm(e4m3fn, row scales, float32 out) vs NumPy float32 "
          f"matmul of the dequantized operands; median of {repeats} "
          "interleaved repeats after a warm-up")
    print()
    print("| M | N | K | fp8q ms | fp8q TFLOP/s | NumPy ms | NumPy TFLOP/s "
          "| fp8q / NumPy speed |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst = None
    for m, n, k, ours, peer in rows:
        flops = 2.0 * m * n * k
        ratio = peer / ours
        worst = ratio if worst is None else min(worst, ratio)
        print(f"| {m} | {n} | {k} | {ours * 1e3:.2f} | "
              f"{flops / ours / 1e12:.4f} | {peer * 1e3:.2f} | "
              f"{flops / peer / 1e12:.4f} | {ratio:.2f}x |")
    print()
    verdict = "met" if worst >= ACCEPTANCE_RATIO else "NOT met"
    print(f"slowest fp8q.scaled_mm / NumPy ratio: {worst:.2f}x (criterion "
          f">= {ACCEPTANCE_RATIO:g}x at every shape: {verdict})")
