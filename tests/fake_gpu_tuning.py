"""Scenarios of the GEMM tuner (csrc/cuda/matmul.h, "Algorithm choice") and
of block scales read in place by the one cuBLASLt call, on
the fake CUDA driver and cuBLASLt, each run in a fresh interpreter by
tests/test_cuda_gemm_tuning.py (see tests/fake_gpu.py). Each function
raises AssertionError on failure.

The fake cuBLASLt offers FAKE_CUBLASLT_ALGO_COSTS's algorithms (ids 1, 2,
...; the heuristic's order) and each product with algorithm N advances the
fake driver's clock, which its timing events read, by cost N; every
product it runs is logged to FAKE_CUBLASLT_ALGO_LOG as "ID FAST
run|refused". So the log shows which algorithm each product used, and the
tuner's choice is checked against the costs set here.
"""
import os

import numpy as np

import fp8q
from fake_gpu_capture import CAPTURING, assert_valid_capture, begin_capture
from fake_gpu_scenarios import close, log_lines, operands

# Each candidate's products while it is timed: one warm-up, then the
# timed repeats (csrc/cuda/matmul.h, FP8Q_MATMUL_TIMED_REPEATS = 3).
RUNS_PER_CANDIDATE = 4


def algo_log():
    """The fake cuBLASLt's products so far as (id, fast, run|refused)."""
    path = os.environ["FAKE_CUBLASLT_ALGO_LOG"]
    if not os.path.exists(path):
        return []
    with open(path) as log:
        return [(int(words[0]), int(words[1]), words[2])
                for words in (line.split() for line in log)]


def ids_since(start):
    """The algorithm ids of the products run since log entry `start`."""
    return [entry[0] for entry in algo_log()[start:] if entry[2] == "run"]


def timed():
    return fp8q._C._cublaslt_info()["candidates_timed"]


def product(rng, m, k=64, n=32, **keywords):
    """One rowwise scaled_mm on the fake GPU (one cuBLASLt call on sm_90),
    checked against the CPU's result."""
    a, b, scale_a, scale_b = operands(rng, m, k, n, "row")
    expected = fp8q.scaled_mm(a, b, scale_a, scale_b, out_dtype="float32")
    got = fp8q.scaled_mm(a.to("cuda"), b.T.to("cuda").T, scale_a.to("cuda"),
                         scale_b.to("cuda"), out_dtype="float32", **keywords)
    assert close(got, expected, "float32"), (m, k, n)


def the_fastest_candidate_is_timed_once_and_kept():
    """Costs 30, 10, 20 us: the first product of a key runs each candidate
    once to warm up and three times timed, then the product with the
    fastest (id 2); later products of that key run id 2 only; a new m of
    the same M bucket takes id 2 without timing; another bucket is timed
    anew."""
    rng = np.random.default_rng(61)
    start = len(algo_log())
    product(rng, 5)
    assert ids_since(start) == ([1] * RUNS_PER_CANDIDATE +
                                [2] * RUNS_PER_CANDIDATE +
                                [3] * RUNS_PER_CANDIDATE + [2]), algo_log()
    assert timed() == 3
    for m in (5, 5, 7, 8):  # 7 and 8: M bucket 8, as 5's
        start = len(algo_log())
        product(rng, m)
        assert ids_since(start) == [2], (m, algo_log()[start:])
    assert timed() == 3
    start = len(algo_log())
    product(rng, 9)  # bucket 16
    assert ids_since(start) == ([1] * RUNS_PER_CANDIDATE +
                                [2] * RUNS_PER_CANDIDATE +
                                [3] * RUNS_PER_CANDIDATE + [2]), algo_log()
    assert timed() == 6
    # Another N: another key, timed itself.
    start = len(algo_log())
    product(rng, 5, n=48)
    assert ids_since(start)[-1] == 2 and timed() == 9, algo_log()[start:]


def a_refused_candidate_is_skipped():
    """cuBLASLt refuses algorithm 2 (the cheapest) at run time although the
    heuristic offers it: the tuner skips it, keeps id 3 (20 us against
    30), and the product is not taken for refused (one cuBLASLt call,
    the CPU's result)."""
    rng = np.random.default_rng(62)
    start = len(algo_log())
    product(rng, 5)
    entries = algo_log()[start:]
    assert entries.count((2, 0, "refused")) == 1, entries
    assert ids_since(start) == ([1] * RUNS_PER_CANDIDATE +
                                [3] * RUNS_PER_CANDIDATE + [3]), entries
    start = len(algo_log())
    product(rng, 5)
    assert algo_log()[start:] == [(3, 0, "run")]
    assert timed() == 2


def never_timed_while_capturing():
    """A key first seen inside a CUDA graph capture runs the heuristic's
    first algorithm once, with no timing event, no synchronization and no
    elapsed-time query (the capture stays valid); the first product of
    that key after the capture times the candidates."""
    rng = np.random.default_rng(63)
    product(rng, 3, k=32, n=16)  # the device's handle and workspace
    a, b, scale_a, scale_b = [t.to("cuda") for t in
                              operands(rng, 5, 64, 32, "row")]
    gb = b.T.contiguous().T
    out = fp8q.empty((5, 32), "float32", device="cuda")
    timed_before = timed()
    start_algos = len(algo_log())
    start = begin_capture(CAPTURING)
    fp8q.scaled_mm(a, gb, scale_a, scale_b, out_dtype="float32", out=out,
                   stream=CAPTURING)
    captured = log_lines()[start:]
    assert_valid_capture(CAPTURING, start)
    assert ids_since(start_algos) == [1], algo_log()[start_algos:]
    assert not [line for line in captured
                if line.startswith(("cuEventCreate timing",
                                    "cuEventSynchronize",
                                    "cuEventElapsedTime"))], captured
    assert timed() == timed_before
    start_algos = len(algo_log())
    fp8q.scaled_mm(a, gb, scale_a, scale_b, out_dtype="float32", out=out,
                   stream=CAPTURING)
    assert ids_since(start_algos)[-1] == 2, algo_log()[start_algos:]
    assert timed() == timed_before + 3


def tuning_switched_off():
    """FP8Q_CUDA_GEMM_TUNING=0: the heuristic's first algorithm for every
    product, none timed, no timing event made."""
    rng = np.random.default_rng(64)
    start = len(algo_log())
    for m in (5, 5, 9):
        product(rng, m)
    assert ids_since(start) == [1, 1, 1], algo_log()[start:]
    assert timed() == 0
    assert not [line for line in log_lines()
                if line.startswith(("cuEventCreate timing",
                                    "cuEventElapsedTime"))]
    assert fp8q.info()["cuda"]["switches"]["FP8Q_CUDA_GEMM_TUNING"] is False


def fast_accumulation_reaches_the_descriptor():
    """use_fast_accum=True sets cuBLASLt's FAST_ACCUM on the product's
    descriptor (the fake logs it with every product); False, the default,
    leaves it 0. The two are separate plans, each timed once."""
    rng = np.random.default_rng(65)
    for fast in (False, True, False, True):
        start = len(algo_log())
        product(rng, 5, use_fast_accum=fast)
        entries = algo_log()[start:]
        assert entries and all(entry[1] == int(fast) for entry in entries), \
            (fast, entries)
    assert timed() == 6
    start = len(algo_log())
    product(rng, 5)
    assert algo_log()[start:] == [(2, 0, "run")]


def weight_block_scales_are_read_in_place():
    """Block scale_b given as a weight's own (N/128, K/128) scales
    transposed, as fp8q.torch's layer passes them: with K/128 a multiple of
    4 the one cuBLASLt call reads them where they are (one kernel, a's
    scales transposed; no copy of scale_b, no allocation), otherwise they
    are laid out in scratch memory without a per-call copy tensor; the
    results are the CPU's either way."""
    rng = np.random.default_rng(66)
    m, n = 5, 160
    for k, kernels in ((512, 1), (384, 3)):
        a, b, scale_a, scale_b = operands(rng, m, k, n, "block")
        expected = fp8q.scaled_mm(a, b, scale_a, scale_b,
                                  out_dtype="float32")
        ga, gb = a.to("cuda"), b.T.to("cuda").T
        ga_scale = scale_a.to("cuda")
        weight_scale = scale_b.T.contiguous().to("cuda")  # (N/128, K/128)
        out = fp8q.empty((m, n), "float32", device="cuda")
        for _ in range(2):  # the second call: plan and scratch warm
            start = len(log_lines())
            fp8q.scaled_mm(ga, gb, ga_scale, weight_scale.T,
                           out_dtype="float32", out=out)
            work = [line.split()[0] for line in log_lines()[start:]]
            assert close(out, expected, "float32"), k
        launched = [name for name in work if name.startswith("fp8q_")]
        assert len(launched) == kernels, (k, work)
        assert "cuMemAllocAsync" not in work and "cuMemAlloc" not in work, \
            (k, work)


def choices_are_saved():
    """fp8q.gemm_tuning.save after one tuned product: the file holds this
    process's key (the fake's GPU name, compute capability, driver,
    cuBLASLt and fp8q versions) and one choice, algorithm 2."""
    import fp8q.gemm_tuning
    path = os.environ["TUNING_FILE"]
    product(np.random.default_rng(67), 5)
    assert timed() == 3
    assert fp8q.gemm_tuning.save(path) == 1
    with open(path) as file:
        lines = file.read().splitlines()
    # (The fake names device i "FAKE_CUDA_NAME i".)
    assert lines[1:7] == ["format 1",
                          f"gpu {os.environ['FAKE_CUDA_NAME']} 0",
                          "compute_capability 9.0", "driver 13.0",
                          "cublaslt 13.10.0", f"fp8q {fp8q.__version__}"], \
        lines
    choice, = [line for line in lines if line.startswith("choice ")]
    # M bucket 8, N 32, K 64, ..., algorithm id 2 in the first byte.
    assert choice.split()[1:4] == ["8", "32", "64"], choice
    assert choice.split()[-1] == "02" + "0" * 126, choice


def saved_choices_are_loaded():
    """A new process loads the file: the same product runs algorithm 2 at
    once, nothing timed; a missing file with missing_ok loads nothing."""
    import fp8q.gemm_tuning
    assert fp8q.gemm_tuning.load(os.environ["TUNING_FILE"] + ".absent",
                                 missing_ok=True) == 0
    assert fp8q.gemm_tuning.load(os.environ["TUNING_FILE"]) == 1
    for line in ("8 32 64 4 4 0 2 -1 0 0 0 256 256 256 02", "nonsense",
                 "7 32 64 4 4 0 2 -1 0 0 0 256 256 256 " + "0" * 128):
        try:
            fp8q._C._gemm_tuning_import(0, [line])
        except ValueError as error:
            assert "not a GEMM tuning choice" in str(error), str(error)
        else:
            raise AssertionError(f"{line!r} taken")
    start = len(algo_log())
    product(np.random.default_rng(68), 6)
    assert algo_log()[start:] == [(2, 0, "run")], algo_log()[start:]
    assert timed() == 0


def another_gpus_choices_are_refused():
    """On another GPU model (FAKE_CUDA_NAME differs) load raises ValueError
    naming both keys and uses nothing: the product is timed here."""
    import fp8q.gemm_tuning
    path = os.environ["TUNING_FILE"]
    try:
        fp8q.gemm_tuning.load(path)
    except ValueError as error:
        message = str(error)
    else:
        raise AssertionError("no ValueError")
    assert "was saved for GPU 'Fake H100 0'" in message, message
    assert f"here is GPU '{os.environ['FAKE_CUDA_NAME']} 0'" in message, \
        message
    assert "not used" in message, message
    start = len(algo_log())
    product(np.random.default_rng(69), 5)
    assert ids_since(start)[-1] == 2 and timed() == 3, algo_log()[start:]


def a_bad_line_loads_nothing():
    """A saved file with one line that is no choice: load raises
    ValueError naming the file and uses nothing (the good choice before
    the bad line was added): the product is timed here."""
    import fp8q.gemm_tuning
    path = os.environ["TUNING_FILE"]
    damaged = path + ".damaged"
    with open(path) as file:
        text = file.read()
    with open(damaged, "w") as file:
        file.write(text + "choice nonsense\n")
    try:
        fp8q.gemm_tuning.load(damaged)
    except ValueError as error:
        message = str(error)
    else:
        raise AssertionError("no ValueError")
    assert message.startswith(f"fp8q.gemm_tuning.load: {damaged}: not a "
                              "GEMM tuning choice"), message
    assert message.endswith("nothing was loaded"), message
    start = len(algo_log())
    product(np.random.default_rng(69), 5)
    assert timed() == 3, algo_log()[start:]
