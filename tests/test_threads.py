"""Eight threads calling fp8q at once give exactly the serial results.

fp8q._C releases the GIL in every call that loops over data, and declares
Py_MOD_GIL_NOT_USED for free-threaded CPython (csrc/python/module.c), so
casts, quantize and scaled_mm run truly in parallel, and one calibrator
shared by every thread is updated concurrently (its methods lock it:
csrc/python/binding.h, FP8Q_LOCKED_*). On a GIL build this exercises the
same races in the C code (thread pool, once-initialisation, caches); on a
free-threaded one, the Python-level state too.
"""
import numpy as np
from helpers import run_threads

import fp8q

N_THREADS = 8
ROUNDS = 6


def work_items(rng):
    """Per round: inputs of every operation, with odd shapes."""
    items = []
    for round_index in range(ROUNDS):
        # m fixed: the per-channel calibrator keeps axis 0.
        m, k, n = 7, 4099 + 97 * round_index, 3 + 2 * round_index
        x = (rng.standard_normal((m, k)) *
             np.exp2(rng.integers(-8, 8, size=(m, k)))).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        items.append((x, b))
    return items


def run(items, calibrators, index):
    """Every operation on items[index % len]; returns the result bytes.
    Updates the shared calibrators with the same batch."""
    x, b = items[index % len(items)]
    results = []
    for dtype in ("e4m3", "e5m2", "e4m3fnuz", "bfloat16", "float16"):
        results.append(np.asarray(fp8q.cast(x, dtype).numpy()).tobytes())
    quantized = fp8q.quantize(x, "e4m3", granularity="row")
    results.append(np.asarray(quantized.data.numpy()).tobytes())
    results.append(np.asarray(quantized.scale.numpy()).tobytes())
    qb = fp8q.quantize(b.T.copy(), "e4m3", granularity="row")
    product = fp8q.scaled_mm(quantized.data, qb.data.T, quantized.scale,
                             qb.scale.T, out_dtype="float32")
    results.append(np.asarray(product.numpy()).tobytes())
    results.append(np.float32(fp8q.amax(x)).tobytes())
    for calibrator in calibrators:
        calibrator.update(x)
    return results


def calibrator_state(calibrators):
    per_tensor, per_channel, histogram = calibrators
    return (np.float32(per_tensor.amax).tobytes(),
            np.asarray(per_channel.amax).tobytes(),
            np.asarray(histogram.counts).tobytes(), histogram.bin_width,
            histogram.total_count,
            float(histogram.compute_amax("percentile", percentile=99.9)))


def new_calibrators():
    return (fp8q.calib.MaxCalibrator(),
            fp8q.calib.MaxCalibrator(channel_axis=0),
            fp8q.calib.HistogramCalibrator(bins=512))


def test_eight_threads_give_the_serial_results(rng, seed):
    items = work_items(rng)
    n_calls = N_THREADS * 4
    serial_calibrators = new_calibrators()
    # Every batch once up front: the histogram's range is then fixed, so
    # its counts do not depend on the order of the threaded updates.
    for x, _ in items:
        for calibrator in serial_calibrators:
            calibrator.update(x)
    shared = new_calibrators()
    for x, _ in items:
        for calibrator in shared:
            calibrator.update(x)
    serial = [run(items, serial_calibrators, index)
              for index in range(n_calls)]

    threaded = [None] * n_calls

    def worker(thread_index):
        for index in range(thread_index, n_calls, N_THREADS):
            threaded[index] = run(items, shared, index)

    run_threads(N_THREADS, worker)
    for index in range(n_calls):
        assert threaded[index] == serial[index], (index, f"seed={seed}")
    assert calibrator_state(shared) == calibrator_state(serial_calibrators), \
        f"seed={seed}"
