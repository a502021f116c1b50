"""Shared calibrators, a shared CalibrationCache and fp8q's first-use
initialisation under 16 threads at once, against serial oracles.

Written for free-threaded CPython (.ci/free-threaded runs the suite with
PYTHON_GIL=0, where these threads really run Python and C in parallel), and
part of the normal suite too: on a GIL build the C calls still release the
GIL, so the C-level locking is exercised there as well. The last test checks
that importing fp8q leaves the GIL as the build has it: off on a
free-threaded interpreter (fp8q declares Py_MOD_GIL_NOT_USED), on otherwise.
"""
import subprocess
import sys
import sysconfig
import threading

import numpy as np
from helpers import run_threads

import fp8q

N_THREADS = 16
SEED = 20261127


def batches(count, shape):
    rng = np.random.default_rng(SEED)
    return [(rng.standard_normal(shape) *
             np.exp2(rng.integers(-6, 6, size=shape))).astype(np.float32)
            for _ in range(count)]


def test_shared_calibrators_under_sixteen_threads():
    """Many small updates from every thread into one per-tensor, one
    per-channel and one histogram calibrator, while other calls read them:
    the final state equals that of the same updates made serially."""
    data = batches(N_THREADS * 12, (5, 333))
    # A first batch that holds the largest |x| fixes the histogram's range,
    # so its counts do not depend on the order of the updates.
    widest = np.concatenate(data, axis=1)

    def fresh():
        calibrators = (fp8q.calib.MaxCalibrator(),
                       fp8q.calib.MaxCalibrator(channel_axis=0),
                       fp8q.calib.HistogramCalibrator(bins=256))
        calibrators[2].update(widest)
        return calibrators

    serial, shared = fresh(), fresh()
    for x in data:
        for calibrator in serial:
            calibrator.update(x)
    seen_amax = [[] for _ in range(N_THREADS)]

    def worker(index):
        for position in range(index, len(data), N_THREADS):
            for calibrator in shared:
                calibrator.update(data[position])
            # Readers racing the other threads' updates.
            seen_amax[index].append(float(shared[0].amax))
            shared[2].compute_amax("percentile", percentile=99.0)
            shared[1].state_dict()

    run_threads(N_THREADS, worker)
    assert float(shared[0].amax) == float(serial[0].amax) == \
        float(np.max(np.abs(widest)))
    assert np.array_equal(np.asarray(shared[1].amax), np.asarray(serial[1].amax))
    assert np.array_equal(np.asarray(shared[1].amax),
                          np.max(np.abs(widest), axis=1))
    assert np.array_equal(np.asarray(shared[2].counts),
                          np.asarray(serial[2].counts))
    assert shared[2].total_count == serial[2].total_count == 2 * widest.size
    # A running max only grows, whatever a thread saw it between updates.
    for values in seen_amax:
        assert values == sorted(values)


def test_settings_changed_while_other_threads_count():
    """__init__ called again with other settings (bins, skip_zeros,
    channel_axis) while the other threads' update() count their batches
    outside the calibrator's lock: a batch is absorbed only as counted
    under the settings it lands in (counted again when they changed
    meanwhile), so no update fails, the amax is per tensor or has the
    channels of the axis set, the histogram has the bins set, and what is
    counted adds up."""
    data = batches(30, (5, 4096))
    histogram = fp8q.calib.HistogramCalibrator(bins=64)
    max_calibrator = fp8q.calib.MaxCalibrator(channel_axis=0)
    settings = [(64, False, 0), (2048, True, None), (256, False, 1),
                (2048, False, None)]
    finished = []
    last = []
    changing = threading.Event()

    def worker(index):
        if index == 0:
            # Changes the settings until every other thread is done.
            step = 0
            while len(finished) < N_THREADS - 1:
                bins, skip_zeros, axis = settings[step % len(settings)]
                histogram.__init__(bins=bins, skip_zeros=skip_zeros)
                max_calibrator.__init__(channel_axis=axis)
                last[:] = [bins, axis]
                changing.set()
                step += 1
            return
        changing.wait()
        try:
            for x in data[(index - 1) % len(data)::N_THREADS - 1] * 120:
                histogram.update(x)
                max_calibrator.update(x)
                amax = max_calibrator.amax
                assert np.ndim(amax) == 0 or np.shape(amax) in ((5,), (4096,))
                assert len(histogram.state_dict()["counts"]) in (64, 256, 2048)
        finally:
            finished.append(index)

    run_threads(N_THREADS, worker)
    bins, axis = last
    assert histogram.bins == bins and max_calibrator.channel_axis == axis
    assert np.asarray(histogram.counts).sum() == histogram.total_count
    assert histogram.total_count % (5 * 4096) == 0
    widest = np.max(np.abs(np.stack(data)),
                    axis=None if axis is None else (0, 2 - axis))
    amax = max_calibrator.amax
    assert amax is None or np.all(np.asarray(amax) <= widest)


def test_shared_calibration_cache_under_sixteen_threads():
    """Every thread adds its own entries (add and add_calibrator) to one
    CalibrationCache while reading the others' by name: every entry is
    there at the end, with the amax it was given."""
    cache = fp8q.calib.CalibrationCache()
    data = batches(N_THREADS, (4, 257))
    per_thread = 20

    def worker(index):
        calibrator = fp8q.calib.MaxCalibrator()
        calibrator.update(data[index])
        for step in range(per_thread):
            cache.add(f"t{index}.plain{step}", float(index * 100 + step))
            cache.add_calibrator(f"t{index}.calib{step}", calibrator)
            other = f"t{(index + 1) % N_THREADS}.plain{step}"
            if other in cache:
                assert cache[other].amax == float(
                    ((index + 1) % N_THREADS) * 100 + step)
            len(cache)

    run_threads(N_THREADS, worker)
    assert len(cache) == N_THREADS * per_thread * 2
    for index in range(N_THREADS):
        expected = float(np.max(np.abs(data[index])))
        for step in range(per_thread):
            assert cache[f"t{index}.plain{step}"].amax == index * 100 + step
            assert cache[f"t{index}.calib{step}"].amax == expected


FIRST_USE = """
import sys, threading
import numpy as np
import fp8q
x = np.linspace(-500, 500, 4099, dtype=np.float32).reshape(1, 4099)
results = [None] * 16
barrier = threading.Barrier(16)
def first(index):
    barrier.wait()
    # The first calls of the process, all at once: CPU feature detection,
    # the thread pool's start, the conversion tables.
    cast = np.asarray(fp8q.cast(x, "e4m3").numpy()).tobytes()
    quantized = fp8q.quantize(x, "e5m2", granularity="row")
    results[index] = (cast, np.asarray(quantized.data.numpy()).tobytes(),
                      np.asarray(fp8q.amax(x).numpy()).tobytes())
threads = [threading.Thread(target=first, args=(i,)) for i in range(16)]
for thread in threads: thread.start()
for thread in threads: thread.join()
assert all(result == results[0] for result in results), "results differ"
serial = (np.asarray(fp8q.cast(x, "e4m3").numpy()).tobytes(),
          np.asarray(fp8q.quantize(x, "e5m2", granularity="row").data.numpy()).tobytes(),
          np.asarray(fp8q.amax(x).numpy()).tobytes())
assert results[0] == serial, "threaded first use differs from a serial call"
print("gil", getattr(sys, "_is_gil_enabled", lambda: True)())
"""


def test_first_use_from_sixteen_threads_and_the_gil():
    """A fresh interpreter whose first fp8q calls come from 16 threads at
    once gets the serial results; and after importing fp8q (and NumPy) the
    GIL is off exactly when the interpreter is free-threaded."""
    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    result = subprocess.run([sys.executable, "-c", FIRST_USE],
                            capture_output=True, text=True, timeout=300,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["gil", str(not free_threaded)], \
        result.stdout + result.stderr
