"""fork() and fp8q's process-wide state: a child forked while another thread
is inside a one-time CUDA initialisation (a slow fake driver's cuInit)
before the worker pool ever started runs parallel CPU operations, and so does
a child forked while the pool is running. POSIX only; each scenario runs in
a fresh interpreter (the driver loads once per process)."""
import os

import pytest

from fake_gpu import build_fake_driver, run_child

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork()")

# argv: the fake driver's log. Prints {"child": exit status, "same": bool}.
FORK_DURING_DRIVER_LOAD = r"""
import json, os, sys, threading, time
import numpy as np
import fp8q

log = sys.argv[1]
fp8q.set_num_threads(4)  # a parallel loop even on one processor

def open_device():
    try:
        fp8q._C._cuda_open_device(0)
    except fp8q.CudaError:
        pass  # this test is about the locks, not the fake's kernels

loader = threading.Thread(target=open_device)
loader.start()
deadline = time.monotonic() + 30
while not (os.path.exists(log) and "cuInit" in open(log).read()):
    assert time.monotonic() < deadline, "cuInit was never called"
    time.sleep(0.005)
x = np.linspace(-300, 300, 1 << 21, dtype=np.float32)
pid = os.fork()
if pid == 0:
    # The child: its first parallel CPU operation (starts the pool).
    same = fp8q.cast(x, "float8_e4m3fn").numpy().tobytes()
    serial = fp8q.cast(x[:1000], "float8_e4m3fn").numpy().tobytes()
    os._exit(0 if same[:1000] == serial else 3)
loader.join()
deadline = time.monotonic() + 30
while True:
    finished, status = os.waitpid(pid, os.WNOHANG)
    if finished:
        break
    if time.monotonic() > deadline:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        status = "hung"
        break
    time.sleep(0.01)
print(json.dumps({"child": status if status == "hung"
                  else os.waitstatus_to_exitcode(status)}))
"""

# Forks repeatedly while other threads run parallel casts; each child runs
# one too. Prints the children's exit statuses.
FORK_DURING_PARALLEL_LOOPS = r"""
import json, os, threading, time
import numpy as np
import fp8q

fp8q.set_num_threads(4)
x = np.linspace(-300, 300, 1 << 20, dtype=np.float32)
expected = fp8q.cast(x, "float8_e5m2").numpy().tobytes()
stop = threading.Event()

def busy():
    while not stop.is_set():
        fp8q.cast(x, "float8_e5m2")

threads = [threading.Thread(target=busy) for _ in range(2)]
for thread in threads:
    thread.start()
statuses = []
for _ in range(10):
    pid = os.fork()
    if pid == 0:
        ok = fp8q.cast(x, "float8_e5m2").numpy().tobytes() == expected
        os._exit(0 if ok else 3)
    deadline = time.monotonic() + 30
    while True:
        finished, status = os.waitpid(pid, os.WNOHANG)
        if finished:
            statuses.append(os.waitstatus_to_exitcode(status))
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            statuses.append("hung")
            break
        time.sleep(0.005)
stop.set()
for thread in threads:
    thread.join()
print(json.dumps(statuses))
"""


@pytest.fixture(scope="module")
def driver_path(tmp_path_factory):
    return build_fake_driver(tmp_path_factory.mktemp("fake-cuda-fork"))


def test_fork_during_a_slow_driver_load(driver_path, tmp_path):
    # Regression: the child inherited the once-lock held by the loading
    # thread and hung on its first parallel CPU operation.
    log = tmp_path / "calls.log"
    result = run_child(driver_path, FORK_DURING_DRIVER_LOAD, log,
                       log=log, init_delay_ms=1500)
    assert result == {"child": 0}


def test_fork_while_the_pool_runs(driver_path):
    assert run_child(driver_path, FORK_DURING_PARALLEL_LOOPS) == [0] * 10
