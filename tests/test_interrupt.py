"""Long CPU calls stop on Ctrl-C, and repeated elements cost nothing.

A subprocess starts an fp8q call over 2**40 elements of an overlapping view
(memory of 2**21 floats), gets SIGINT after ~0.5 s, and must leave with
KeyboardInterrupt within seconds, its fp8q still working afterwards (the
child starts with SIGINT ignored, as under `nohup` or a background job of a
non-interactive shell, and installs Python's Ctrl-C handler itself: the
result does not depend on how the suite was started). A
broadcast (zero-stride) view's amax reads each distinct element once: the
answer is instant and equals the amax of the distinct elements.
"""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import fp8q
import fp8q.calib

PROGRAM = r'''
import signal, sys
import numpy as np
import fp8q
import fp8q.calib

# Python's Ctrl-C handler, installed here: CPython installs it at start-up
# only when SIGINT is not ignored, and it is ignored in a process started
# from a background job of a non-interactive shell (as CI may be).
signal.signal(signal.SIGINT, signal.default_int_handler)
small = np.random.default_rng(8).standard_normal(1 << 21).astype(np.float32)
# 2**40 elements, row i = small[i : i + 2**20] (no stride of 0).
big = np.lib.stride_tricks.as_strided(small, shape=(1 << 20, 1 << 20),
                                      strides=(4, 4), writeable=False)
calls = {
    "amax": lambda: fp8q.amax(big),
    "amax_axis0": lambda: fp8q.amax(big, axis=0),
    "cast": lambda: fp8q.cast(big[:1 << 11], "e4m3"),
    "calibrate": lambda: fp8q.calib.MaxCalibrator().update(big),
    "histogram": lambda: fp8q.calib.HistogramCalibrator().update(big),
}
print("ready", flush=True)
try:
    calls[sys.argv[1]]()
except KeyboardInterrupt:
    # Nothing stays stopped: the next calls (threads included) work.
    expected = np.abs(small).max()
    assert float(np.asarray(fp8q.amax(small))) == expected
    rows = np.asarray(fp8q.amax(small.reshape(1 << 10, -1), axis=1))
    assert np.array_equal(rows, np.abs(small.reshape(1 << 10, -1)).max(1))
    print("KeyboardInterrupt", flush=True)
    sys.exit(3)
print("finished", flush=True)
'''


# Starts argv[1:] with SIGINT ignored (exec keeps an ignored disposition):
# the state a background job of a non-interactive shell starts in, made the
# same on every run whatever state this test process inherited.
IGNORING_SIGINT = ("import os, signal, sys\n"
                   "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                   "os.execv(sys.argv[1], sys.argv[1:])\n")


def run_and_interrupt(call):
    """Starts the program on `call` (SIGINT ignored at its start, see
    IGNORING_SIGINT), sends SIGINT after 0.5 s; returns its exit status,
    output and the seconds it took to stop after the signal."""
    process = subprocess.Popen([sys.executable, "-c", IGNORING_SIGINT,
                                sys.executable, "-c", PROGRAM, call],
                               stdout=subprocess.PIPE, text=True,
                               env=dict(os.environ))
    try:
        assert process.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        sent = time.monotonic()
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
        return process.returncode, output, time.monotonic() - sent
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.skipif(sys.platform == "win32",
                    reason="SIGINT to a child process is POSIX only")
@pytest.mark.parametrize("call", ["amax", "amax_axis0", "cast", "calibrate",
                                  "histogram"])
def test_ctrl_c_stops_a_long_call(call):
    returncode, output, seconds = run_and_interrupt(call)
    assert (returncode, output.strip()) == (3, "KeyboardInterrupt"), output
    # Checked every 50 ms; generous for a loaded 2-core machine.
    assert seconds < 5, seconds


def test_a_signal_handler_that_does_not_raise_lets_the_call_finish():
    program = r'''
import signal, threading
import numpy as np
import fp8q
import fp8q.calib
calls = []
signal.signal(signal.SIGINT, lambda number, frame: calls.append(number))
small = np.arange(1 << 15, dtype=np.float32)
big = np.lib.stride_tricks.as_strided(small, shape=(1 << 14, 1 << 14),
                                      strides=(4, 4), writeable=False)
threading.Timer(0.05, signal.raise_signal, (signal.SIGINT,)).start()
print(float(np.asarray(fp8q.amax(big))), calls)
'''
    output = subprocess.run([sys.executable, "-c", program], check=True,
                            capture_output=True, text=True).stdout
    # max over i, j of (i + j): the handler ran, the result is whole.
    assert output.split()[0] == str(float((1 << 14) * 2 - 2))


@pytest.mark.parametrize("axis", [None, 0, (0, 2), 2])
def test_zero_stride_axes_are_read_once(axis):
    rng = np.random.default_rng(40)
    distinct = rng.standard_normal((1, 7, 1)).astype(np.float32)
    distinct[0, 3, 0] = -9.5  # the largest magnitude, negative
    # 2**40 elements: axes 0 and 2 repeat (stride 0), reduced or kept.
    huge = np.broadcast_to(distinct, (1 << 20, 7, 1 << 20))
    # CPU time of this process (every thread's), not wall-clock time: other
    # processes on a loaded machine do not count. Reading the 2**40 elements
    # would take hours; the distinct ones take microseconds.
    started = time.process_time()
    result = np.asarray(fp8q.amax(huge, axis=axis, keepdims=True))
    assert time.process_time() - started < 2
    # NumPy's amax of the distinct values, repeated along the kept axes.
    expected = np.broadcast_to(np.abs(distinct).max(axis=axis, keepdims=True),
                               result.shape)
    assert np.array_equal(result, expected)


def test_zero_stride_amax_keeps_nan_and_counts_nonfinite_exactly():
    values = np.array([[1.0, np.nan, -np.inf, 2.0]], np.float32)
    repeated = np.broadcast_to(values, (1 << 30, 4))
    assert np.isnan(np.asarray(fp8q.amax(repeated)))
    assert np.array_equal(np.asarray(fp8q.amax(repeated, axis=0)),
                          np.array([1.0, np.nan, np.inf, 2.0], np.float32),
                          equal_nan=True)
    calibrator = fp8q.calib.MaxCalibrator()
    with pytest.raises(ValueError, match=f"{2 << 30} of its {4 << 30} "):
        calibrator.update(repeated)
    calibrator.update(repeated, skip_nonfinite=True)
    assert calibrator.amax == 2.0
    assert calibrator.nonfinite_count == 2 << 30
