"""`python -m fp8q bench calib`: CPU throughput of the calibrators' update()
against the NumPy code that does the same job, measured in the same run
(timing method and table as in fp8q._cli._bench).

Peers: `np.abs(x).max()` for MaxCalibrator.update, and
`np.histogram(np.abs(x), bins, range=(0, amax))` after `np.abs(x).max()` for
HistogramCalibrator.update (the same two passes: range, then counts).
GB/s counts the float32 bytes read once. Also reports the time of each
compute_amax method on the resulting histogram. Results go to
docs/benchmarks.md; no test asserts timings.
"""
import datetime
import platform
import time

import numpy as np

import fp8q
from fp8q import _info, calib
from fp8q._cli._bench import SEED, _Row, _Table, _with_threads

HISTOGRAM_BINS = 2048
ACCEPTANCE_GB_PER_S_PER_CORE = 1.0


def measure(x, repeats):
    """Times the updates on the float32 array x; returns the filled
    fp8q._cli._bench._Table."""
    threads = fp8q.get_num_threads()
    table = _Table(repeats)
    max_calibrator = calib.MaxCalibrator()
    histogram_calibrator = calib.HistogramCalibrator(HISTOGRAM_BINS)
    histogram = f"histogram of abs(x), {HISTOGRAM_BINS} bins"

    def numpy_histogram():
        magnitude = np.abs(x)
        return np.histogram(magnitude, HISTOGRAM_BINS,
                            range=(0.0, float(magnitude.max())))

    table.measure_group([
        _Row("numpy-amax", "amax", "np.abs(x).max()", 1,
             lambda: np.abs(x).max(), x.nbytes),
    ] + [
        _Row(f"max-{count}", "amax", "MaxCalibrator.update", count,
             _with_threads(count, lambda: max_calibrator.update(x)),
             x.nbytes, [("numpy-amax", "NumPy speed")])
        for count in sorted({1, threads})
    ])
    table.measure_group([
        _Row("numpy-histogram", histogram, "np.abs + np.histogram", 1,
             numpy_histogram, x.nbytes),
    ] + [
        _Row(f"histogram-{count}", histogram, "HistogramCalibrator.update",
             count,
             _with_threads(count, lambda: histogram_calibrator.update(x)),
             x.nbytes, [("numpy-histogram", "NumPy speed")])
        for count in sorted({1, threads})
    ])
    return table, histogram_calibrator


def print_calib_benchmark(size, repeats):
    """Runs the benchmark and prints it as markdown, the compute_amax times,
    and the verdict on the criterion (single-thread histogram update >= 1
    GB/s of float32)."""
    x = np.random.default_rng(SEED).standard_normal(size, dtype=np.float32)
    table, histogram_calibrator = measure(x, repeats)
    print(f"fp8q {fp8q.__version__} on {_info.cpu_model()} "
          f"({fp8q.get_num_threads()} threads), Python "
          f"{platform.python_version()}, NumPy {np.__version__}, "
          f"{datetime.date.today().isoformat()}")
    print(f"{size} float32 elements from N(0, 1), median of {repeats} "
          "interleaved repeats after a warm-up")
    print()
    print(table.markdown())
    print()
    for method in ("percentile", "entropy", "mse"):
        start = time.perf_counter()
        amax = histogram_calibrator.compute_amax(method)
        elapsed = time.perf_counter() - start
        print(f"compute_amax({method!r}) on {HISTOGRAM_BINS} bins: "
              f"{elapsed * 1e3:.2f} ms (amax {amax:.6g})")
    row = table.by_key["histogram-1"]
    rate = row.moved / row.seconds / 1e9
    verdict = "met" if rate >= ACCEPTANCE_GB_PER_S_PER_CORE else "NOT met"
    print()
    print(f"single-thread HistogramCalibrator.update: {rate:.2f} GB/s "
          f"(criterion >= {ACCEPTANCE_GB_PER_S_PER_CORE:g} GB/s per core: "
          f"{verdict})")
