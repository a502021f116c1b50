"""`python -m fp8q bench gemm`: fp8q.scaled_mm on the CPU against NumPy's
float32 matmul of the already-dequantized operands, measured in the same run
(timing method as in fp8q._cli._bench).

Operands: a (M, K) and the weight w (N, K) drawn from N(0, 1), quantized to
float8_e4m3fn with row scales (a per row, w per output feature), b = w.T (the
column-major fast path). fp8q.scaled_mm(a, b, scale_a, scale_b,
out_dtype="float32") is timed whole (decoding, the float32 product,
epilogue); the peer is `a_deq @ b_deq` on float32 arrays prepared
beforehand, i.e. the float32 GEMM alone. TFLOP/s counts 2 * M * N * K.

Two measurements per shape, both reported: interleaved (the two take turns
within every round, as in fp8q._cli._bench), and settled (each timed in its own
block after a pause of SETTLE_SECONDS). They differ on small machines
because OpenBLAS's idle threads keep spinning for a while after each NumPy
product and take processor time from whatever runs next; the settled one is
what a program that calls only one of them sees. Results go to
docs/benchmarks.md; no test asserts timings.
"""
import datetime
import platform
import time

import numpy as np

import fp8q
from fp8q import _info
from fp8q._cli._bench import SEED, median_seconds

# The sweep (M x (N, K)); the default is its CPU-sized part.
FULL_M = (1, 16, 64, 256, 1024, 4096, 8192)
FULL_NK = ((4096, 4096), (14336, 4096), (4096, 14336), (8192, 8192))
QUICK_M = (1, 16, 64, 256, 1024)
QUICK_NK = ((4096, 4096), (14336, 4096))
ACCEPTANCE_RATIO = 0.8
SETTLE_SECONDS = 0.5


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


def _settled_seconds(function, repeats):
    """Median seconds of `function` timed alone, after a pause that lets
    other libraries' idle threads stop spinning."""
    time.sleep(SETTLE_SECONDS)
    return median_seconds([function], repeats)[0]


def measure(shapes, repeats):
    """Times every (m, n, k); returns rows (m, n, k, fp8q s, numpy s,
    settled fp8q s, settled numpy s)."""
    rows = []
    for m, n, k in shapes:
        a, b, scale_a, scale_b, a_deq, b_deq = _operands(m, n, k)

        def ours():
            return fp8q.scaled_mm(a, b, scale_a, scale_b,
                                  out_dtype="float32")

        def peer():
            return a_deq @ b_deq

        fp8q_seconds, numpy_seconds = median_seconds([ours, peer], repeats)
        rows.append((m, n, k, fp8q_seconds, numpy_seconds,
                     _settled_seconds(ours, repeats),
                     _settled_seconds(peer, repeats)))
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
          f"matmul of the dequantized operands; medians of {repeats} "
          "repeats after a warm-up, interleaved and settled (each alone "
          f"after a {SETTLE_SECONDS:g} s pause)")
    print()
    print("| M | N | K | fp8q ms | fp8q TFLOP/s | NumPy ms | NumPy TFLOP/s "
          "| fp8q / NumPy, interleaved | settled: fp8q ms | NumPy ms "
          "| fp8q / NumPy, settled |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst = worst_settled = None
    for m, n, k, ours, peer, ours_alone, peer_alone in rows:
        flops = 2.0 * m * n * k
        ratio = peer / ours
        settled = peer_alone / ours_alone
        worst = ratio if worst is None else min(worst, ratio)
        worst_settled = (settled if worst_settled is None
                         else min(worst_settled, settled))
        print(f"| {m} | {n} | {k} | {ours * 1e3:.2f} | "
              f"{flops / ours / 1e12:.4f} | {peer * 1e3:.2f} | "
              f"{flops / peer / 1e12:.4f} | {ratio:.2f}x | "
              f"{ours_alone * 1e3:.2f} | {peer_alone * 1e3:.2f} | "
              f"{settled:.2f}x |")
    print()
    for name, value in (("interleaved", worst), ("settled", worst_settled)):
        verdict = "met" if value >= ACCEPTANCE_RATIO else "NOT met"
        print(f"slowest fp8q.scaled_mm / NumPy ratio, {name}: {value:.2f}x "
              f"(criterion >= {ACCEPTANCE_RATIO:g}x at every shape: "
              f"{verdict})")
