"""Scenarios of CUDA graph capture on the fake CUDA driver, each run in a
fresh interpreter by tests/test_cuda_fake_device.py (see tests/fake_gpu.py).
Each function raises AssertionError on failure.

The scenarios begin and end captures through the fake's own entry points
(ctypes, on the library fp8q loaded: one copy of its state per process),
and read its call log: what fp8q queued while a stream captured, and the
real driver's refusals the fake models (tests/fake_cuda_streams.c), each
logged as "refused NAME RESULT" and invalidating the capture. Replays are
not modeled: the fake runs captured work when it is queued.
"""
import ctypes
import os

import numpy as np

import fp8q
import fp8q.calib
from fake_gpu_scenarios import calls, close, expect, log_lines, operands
from helpers import same_bits

# Streams of the scenarios (any handle but 0, 1 and 2 is a stream to the
# fake).
CAPTURING = 11
OTHER = 7
SECOND_CAPTURE = 13

# Calls that must never be made while a stream captures (and the fake's
# "refused NAME RESULT" lines).
FORBIDDEN = {"cuMemAlloc", "cuMemFree", "cuStreamSynchronize",
             "cuEventQuery", "cuEventSynchronize", "refused"}


def driver_function(name, *argtypes):
    """The fake driver's entry point `name` (CUresult-returning)."""
    library = ctypes.CDLL(os.environ["FP8Q_CUDA_DRIVER"])
    lookup = library.cuGetProcAddress_v2
    lookup.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p),
                       ctypes.c_int, ctypes.c_uint64,
                       ctypes.POINTER(ctypes.c_int)]
    address = ctypes.c_void_p()
    status = ctypes.c_int()
    assert lookup(name.encode(), ctypes.byref(address), 12000, 0,
                  ctypes.byref(status)) == 0 and status.value == 0, name
    return ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(address.value)


def begin_capture(stream, mode=0):
    """cuStreamBeginCapture(stream, mode) (0: global mode); returns the log
    position where the capture starts."""
    begin = driver_function("cuStreamBeginCapture", ctypes.c_void_p,
                            ctypes.c_int)
    assert begin(stream, mode) == 0
    return len(log_lines())


def end_capture(stream):
    """cuStreamEndCapture(stream): (CUresult, graph handle or None)."""
    end = driver_function("cuStreamEndCapture", ctypes.c_void_p,
                          ctypes.POINTER(ctypes.c_void_p))
    graph = ctypes.c_void_p()
    result = end(stream, ctypes.byref(graph))
    return result, graph.value


def assert_valid_capture(stream, start):
    """Ends the capture begun on `stream` at log position `start`: a graph,
    not invalidated, and no forbidden call in between."""
    lines = log_lines()[start:]
    result, graph = end_capture(stream)
    forbidden = [line for line in lines if line.split()[0] in FORBIDDEN]
    assert forbidden == [], forbidden
    assert result == 0 and graph, (result, lines)


def work(lines):
    """The work queued in `lines` of the log: kernels, cuBLASLt products,
    fills, copies and allocations, by name."""
    names = [line.split()[0] for line in lines]
    return [name for name in names
            if name.startswith(("fp8q_", "cublasLtMatmul", "cuMemset",
                                "cuMemcpy", "cuMemAllocAsync"))]


def captured_like_eager(function):
    """Runs `function` (which queues on CAPTURING) once to warm up, once
    more eagerly, then once in a capture of CAPTURING; checks that the
    capture is valid and queues the same work as the eager call, and
    returns the eager and the captured results."""
    function()
    start = len(log_lines())
    eager = function()
    eager_work = work(log_lines()[start:])
    start = begin_capture(CAPTURING)
    captured = function()
    captured_work = work(log_lines()[start:])
    assert_valid_capture(CAPTURING, start)
    assert captured_work == eager_work, (captured_work, eager_work)
    return eager, captured


def on_gpu(tensor):
    """`tensor` on the GPU, last used on the legacy default stream."""
    return tensor.to("cuda")


# --------------------------------------------------------------------------
# The fake's model


def fake_models_the_driver():
    """The refusals the fake models, on its own entry points: what makes
    the other scenarios' valid captures mean something."""
    stream = ctypes.c_void_p
    synchronize = driver_function("cuStreamSynchronize", stream)
    create = driver_function("cuEventCreate", ctypes.POINTER(ctypes.c_void_p),
                             ctypes.c_uint)
    record = driver_function("cuEventRecord", ctypes.c_void_p, stream)
    wait = driver_function("cuStreamWaitEvent", stream, ctypes.c_void_p,
                           ctypes.c_uint)
    query = driver_function("cuEventQuery", ctypes.c_void_p)
    info = driver_function("cuStreamGetCaptureInfo", stream,
                           ctypes.POINTER(ctypes.c_int),
                           ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p,
                           ctypes.c_void_p, ctypes.c_void_p)
    is_capturing = driver_function("cuStreamIsCapturing", stream,
                                   ctypes.POINTER(ctypes.c_int))
    fill = driver_function("cuMemsetD8Async", ctypes.c_uint64,
                           ctypes.c_ubyte, ctypes.c_size_t, stream)
    memory = fp8q.zeros(16, "uint8", device="cuda", stream=CAPTURING)
    status, capture_id = ctypes.c_int(), ctypes.c_uint64()
    uncaptured, captured = ctypes.c_void_p(), ctypes.c_void_p()
    assert create(ctypes.byref(uncaptured), 2) == 0
    assert create(ctypes.byref(captured), 2) == 0
    assert record(uncaptured, OTHER) == 0

    # Status and id; the legacy stream cannot be asked while one captures.
    begin_capture(CAPTURING)
    assert info(CAPTURING, ctypes.byref(status), ctypes.byref(capture_id),
                None, None, None) == 0
    assert status.value == 1 and capture_id.value > 0
    assert is_capturing(OTHER, ctypes.byref(status)) == 0
    assert status.value == 0
    assert info(None, ctypes.byref(status), None, None, None, None) == 906
    assert end_capture(CAPTURING)[0] == 0  # (the query harmed nothing)
    # Each refusal, and the invalidated capture it leaves.
    refusals = [
        (lambda: synchronize(CAPTURING), 900),
        (lambda: synchronize(OTHER), 900),
        (lambda: wait(CAPTURING, uncaptured, 0), 905),
        (lambda: fill(memory.data_ptr, 0, 16, 1), 906),
        (lambda: fp8q.synchronize(stream=OTHER), "cuStreamSynchronize"),
    ]
    for refused, expected in refusals:
        begin_capture(CAPTURING)
        if isinstance(expected, int):
            assert refused() == expected, expected
        else:
            expect(fp8q.CudaError, expected, refused)
        assert is_capturing(CAPTURING, ctypes.byref(status)) == 0
        assert status.value == 2, expected
        assert end_capture(CAPTURING) == (901, None), expected
    # An event recorded in a capture: waited for in it, then refused.
    begin_capture(CAPTURING)
    assert record(captured, CAPTURING) == 0
    assert wait(CAPTURING, captured, 0) == 0
    assert end_capture(CAPTURING)[0] == 0
    assert query(captured) == 907
    assert wait(OTHER, captured, 0) == 907
    # A stream that joins a capture must be joined back.
    begin_capture(CAPTURING)
    assert record(captured, CAPTURING) == 0
    assert wait(SECOND_CAPTURE, captured, 0) == 0
    assert end_capture(CAPTURING) == (904, None)
    assert "refused cuStreamSynchronize 900" in log_lines()


# --------------------------------------------------------------------------
# Warm calls capture as they run


def scaled_mm_cases():
    """(granularity, k, n, out_dtype, scale_result on the host or None):
    one call, FP8 + epilogue, blockwise, padded K, padded N (FP8 result)."""
    return [("tensor", 64, 32, "bfloat16", None),
            ("tensor", 64, 32, "float8_e4m3fn", 0.3),
            ("row", 64, 32, "bfloat16", None),
            ("row", 64, 32, "float8_e4m3fn", 0.3),
            ("block", 256, 32, "bfloat16", None),
            ("row", 40, 32, "bfloat16", None),
            ("tensor", 64, 40, "float8_e4m3fn", 0.3),
            ("row", 4, 32, "float32", None)]


def warm_scaled_mm_captures():
    """A scaled_mm run once before the capture (same shapes, operands,
    scales, bias, scale_result and out on the GPU, last used on the legacy
    stream) captures without an allocation, a copy, a wait for uncaptured
    work or any refused call, queues what the eager call queues, and
    computes the same bits (the fake runs captured work at once)."""
    rng = np.random.default_rng(31)
    for granularity, k, n, out_dtype, scale_result in scaled_mm_cases():
        a, b, scale_a, scale_b = operands(rng, 8, k, n, granularity)
        arguments = (on_gpu(a), on_gpu(b.T).T, on_gpu(scale_a),
                     on_gpu(scale_b))
        keywords = {"bias": on_gpu(fp8q.asarray(
            rng.standard_normal(n).astype(np.float32)))}
        if scale_result is not None:
            keywords["scale_result"] = scale_result
            keywords["amax_out"] = fp8q.zeros(1, device="cuda")
        out = fp8q.empty((8, n), out_dtype, device="cuda")
        poison = on_gpu(fp8q.asarray(np.full((8, n), np.nan, np.float32)))

        def product():
            fp8q.scaled_mm(*arguments, out=out, stream=CAPTURING, **keywords)

        product()  # warm
        start = len(log_lines())
        product()
        eager_work = work(log_lines()[start:])
        eager = out.cpu(stream=CAPTURING).numpy().copy()
        fp8q.cast(poison, out_dtype, out=out, stream=CAPTURING)
        start = begin_capture(CAPTURING)
        product()
        lines = log_lines()[start:]
        assert_valid_capture(CAPTURING, start)
        case = (granularity, k, n, out_dtype)
        assert not any(line.startswith(("cuMemAllocAsync", "cuStreamWaitEvent"))
                       for line in lines), (case, lines)
        assert work(lines) == eager_work, (case, work(lines), eager_work)
        assert same_bits(out.cpu(stream=CAPTURING).numpy(), eager), case
        expected = fp8q.scaled_mm(
            a, b, scale_a, scale_b, out_dtype=out_dtype,
            bias=keywords["bias"].cpu(),
            **({"scale_result": scale_result} if scale_result else {}))
        assert close(out, expected, out_dtype), case


def warm_layer_calls_capture():
    """fp8q.torch's one-call forward (_C.linear_layer for W8A8 per token, in
    blocks and static; _C.layer_weight for W8A16) on a capturing stream,
    warm, captures as it runs eagerly: the same work, no forbidden call,
    the same bits; so does _C.layer_gemv with k split over the grid (its
    scratch a graph allocation), on the tensor cores (16 tokens) and on the
    CUDA cores (1 token); the W8A16 decode is
    fp8q_cast_from_fp8_wide's launch."""
    rng = np.random.default_rng(33)
    x = on_gpu(fp8q.asarray(rng.standard_normal((2, 8, 256)).astype(
        np.float32)))
    bias = on_gpu(fp8q.asarray(rng.standard_normal(96).astype(np.float32)))
    input_scale = on_gpu(fp8q.asarray(np.float32(0.02)))
    weight = rng.standard_normal((96, 256)).astype(np.float32)
    cases = []
    for name, blocks in (("row", "row"), ("tensor", "tensor"),
                         ("block", (128, 128))):
        w = fp8q.quantize(on_gpu(fp8q.asarray(weight)), granularity=blocks)
        cases.append(lambda w=w, name=name: fp8q._C.linear_layer(
            x, w.data, w.scale, bias, None, name, CAPTURING))
        cases.append(lambda w=w, name=name: fp8q._C.layer_weight(
            x, w.data, w.scale, name, CAPTURING))
        if name != "block":
            cases.append(lambda w=w, name=name: fp8q._C.linear_layer(
                x, w.data, w.scale, bias, input_scale, name, CAPTURING))
    # The weight-only product with k split over the grid (16 float16
    # tokens, 40 weight rows, K = 4096: kernels/gemv.cuh "Split k"), whose
    # scratch for the splits' sums is allocated and dropped in the capture.
    x16 = on_gpu(fp8q.asarray(rng.standard_normal((16, 4096)).astype(
        np.float32), dtype="float16"))
    w16 = fp8q.quantize(on_gpu(fp8q.asarray(rng.standard_normal(
        (40, 4096)).astype(np.float32))), granularity="row")
    cases.append(lambda: fp8q._C.layer_gemv(x16, w16.data, w16.scale, None,
                                            "row", CAPTURING))
    # The CUDA-core kernels' split (1 bfloat16 token, 40 weight rows, K =
    # 4 x 4096: 3 splits on the fake device), the same scratch.
    x1 = on_gpu(fp8q.asarray(rng.standard_normal((1, 4 * 4096)).astype(
        np.float32), dtype="bfloat16"))
    w1 = fp8q.quantize(on_gpu(fp8q.asarray(rng.standard_normal(
        (40, 4 * 4096)).astype(np.float32))), granularity="row")
    cases.append(lambda: fp8q._C.layer_gemv(x1, w1.data, w1.scale, None,
                                            "row", CAPTURING))
    for function in cases:
        eager, captured = captured_like_eager(function)
        assert same_bits(captured.cpu(stream=CAPTURING).numpy(),
                         eager.cpu(stream=CAPTURING).numpy())
    # The 1-token product split on the CUDA cores: its kernel, then the
    # reduce, captured.
    start = begin_capture(CAPTURING)
    cases[-1]()
    kernels = [name for name in work(log_lines()[start:])
               if name.startswith("fp8q_")]
    assert kernels == ["fp8q_gemv_fp8_1", "fp8q_gemv_fp8_reduce"], kernels
    assert_valid_capture(CAPTURING, start)
    # The W8A16 weight decode (in_features 256: 16 codes a thread) is the
    # wide kernel, its decoded weight a graph allocation of the capture.
    layer_weight = cases[1]
    start = begin_capture(CAPTURING)
    layer_weight()
    assert work(log_lines()[start:]) == ["cuMemAllocAsync",
                                         "fp8q_cast_from_fp8_wide"], (
        work(log_lines()[start:]))
    assert_valid_capture(CAPTURING, start)


def warm_cast_and_quantize_capture():
    """cast (with out=, a GPU scale and amax_out, and without out=) and
    quantize (per tensor, per row in one pass and by groups, blocks, a given
    GPU scale) capture as they run eagerly. Their new results are graph
    allocations: freed in the graph when dropped during the capture, and
    by cuMemFreeAsync after it (allowed: graph memory may be freed outside
    its graph)."""
    rng = np.random.default_rng(32)
    x = on_gpu(fp8q.asarray(rng.standard_normal((64, 256)).astype(
        np.float32)))
    scale = on_gpu(fp8q.asarray(np.float32(0.25)))
    out = fp8q.empty((64, 256), "e4m3", device="cuda")
    amax = fp8q.zeros(1, device="cuda")

    def cast_into_out():
        fp8q.cast(x, "e4m3", scale=scale, out=out, amax_out=amax,
                  stream=CAPTURING)
        return out

    captured_like_eager(cast_into_out)
    cases = [lambda: fp8q.cast(x, "e5m2", scale=scale, stream=CAPTURING)]
    for granularity in ("tensor", "row", "col", (1, 128), (128, 128)):
        cases.append(lambda granularity=granularity: fp8q.quantize(
            x, granularity=granularity, stream=CAPTURING))
    row_scales = on_gpu(fp8q.asarray(np.full((64, 1), 0.5, np.float32)))
    cases.append(lambda: fp8q.quantize(x, granularity="row",
                                       scale=row_scales, stream=CAPTURING))
    for function in cases:
        eager, captured = captured_like_eager(function)
        pairs = ([(eager, captured)] if isinstance(eager, fp8q.Tensor)
                 else [(eager.data, captured.data),
                       (eager.scale, captured.scale)])
        for expected, got in pairs:
            assert same_bits(got.cpu(stream=CAPTURING).numpy(),
                             expected.cpu(stream=CAPTURING).numpy())
    # Results dropped during the capture are freed there, in the graph.
    start = begin_capture(CAPTURING)
    fp8q.quantize(x, granularity="row", stream=CAPTURING)
    fp8q.amax(x, axis=-1, stream=CAPTURING)
    made = log_lines()[start:]
    assert_valid_capture(CAPTURING, start)
    allocated = [line for line in made if line.startswith("cuMemAllocAsync")]
    freed = [line for line in made if line.startswith("cuMemFreeAsync")]
    assert allocated == [f"cuMemAllocAsync {CAPTURING}"] * 3, made
    assert freed == [f"cuMemFreeAsync {CAPTURING}"] * 3, made


def uncaptured_work_is_not_waited_for():
    """A tensor last used on another stream that is not capturing (or on
    the legacy stream) is used in the capture without a wait: the driver
    would refuse one with CUDA_ERROR_STREAM_CAPTURE_ISOLATION (the failure
    seen on an H100). Then it is last used on the capturing stream."""
    rng = np.random.default_rng(33)
    a, b, scale_a, scale_b = operands(rng, 8, 64, 32, "row")
    a, b = a.to("cuda", stream=OTHER), b.T.to("cuda", stream=OTHER).T
    scales = (scale_a.to("cuda", stream=OTHER),
              scale_b.to("cuda", stream=OTHER))
    out = fp8q.empty((8, 32), "bfloat16", device="cuda", stream=OTHER)
    fp8q.scaled_mm(a, b, *scales, out=out, stream=OTHER)  # warm
    x = fp8q.asarray(np.ones((4, 8), np.float32), device="cuda")  # legacy
    start = begin_capture(CAPTURING)
    fp8q.scaled_mm(a, b, *scales, out=out, stream=CAPTURING)
    fp8q.cast(x, "e4m3", stream=CAPTURING)
    lines = log_lines()[start:]
    assert_valid_capture(CAPTURING, start)
    assert not any(line.startswith("cuStreamWaitEvent") or
                   line in ("cuEventRecord 7", "cuEventRecord 1")
                   for line in lines), lines
    # After the capture, a use on another stream waits for the capturing
    # stream (no longer capturing) as usual.
    start = len(log_lines())
    fp8q.amax(out, stream=OTHER)
    lines = log_lines()[start:]
    assert f"cuEventRecord {CAPTURING}" in lines, lines
    assert f"cuStreamWaitEvent {OTHER}" in lines, lines


def forked_streams_of_one_capture_are_ordered():
    """Within one capture, a tensor last used on a stream that joined the
    capture (forked from it by an event, as torch does) is ordered with an
    event, which joins that stream back: the capture ends valid."""
    create = driver_function("cuEventCreate", ctypes.POINTER(ctypes.c_void_p),
                             ctypes.c_uint)
    record = driver_function("cuEventRecord", ctypes.c_void_p,
                             ctypes.c_void_p)
    wait = driver_function("cuStreamWaitEvent", ctypes.c_void_p,
                           ctypes.c_void_p, ctypes.c_uint)
    x = fp8q.asarray(np.ones((4, 8), np.float32), device="cuda")
    y = fp8q.cast(x, "e4m3", stream=CAPTURING)  # warm
    fork = ctypes.c_void_p()
    assert create(ctypes.byref(fork), 2) == 0
    start = begin_capture(CAPTURING)
    assert record(fork, CAPTURING) == 0
    assert wait(SECOND_CAPTURE, fork, 0) == 0  # joins the capture
    fp8q.cast(x, "e4m3", out=y, stream=SECOND_CAPTURE)
    fp8q.amax(y, stream=CAPTURING)  # waits for SECOND_CAPTURE's cast
    lines = log_lines()[start:]
    assert_valid_capture(CAPTURING, start)
    assert f"cuEventRecord {SECOND_CAPTURE}" in lines, lines
    assert f"cuStreamWaitEvent {CAPTURING}" in lines, lines


# --------------------------------------------------------------------------
# What cannot run in a capture is refused before it breaks the capture


def expect_refusal(message, function, *args, **keywords):
    """`function` raises fp8q.CudaError saying `message` (after scaled_mm's
    "scaled_mm (... path: ...): " where it is one) while CAPTURING
    captures, and the capture stays valid."""
    start = begin_capture(CAPTURING)
    try:
        function(*args, **keywords)
    except fp8q.CudaError as error:
        said = str(error).split("): ", 1)[-1] if str(error).startswith(
            "scaled_mm (") else str(error)
        assert said.startswith(message), (str(error), message)
    else:
        raise AssertionError(f"{function.__name__} did not raise")
    assert_valid_capture(CAPTURING, start)


def cold_calls_are_refused():
    """A call that would create the cuBLASLt workspace, grow the scratch
    block, copy from host memory or wait for the stream raises a clear
    fp8q.CudaError before any of it, and the capture stays valid."""
    rng = np.random.default_rng(34)
    capturing = f"stream 0x{CAPTURING:x} is capturing a CUDA graph"
    a, b, host_scale_a, scale_b = operands(rng, 8, 64, 32, "row")
    arguments = (on_gpu(a), on_gpu(b.T).T, on_gpu(host_scale_a),
                 on_gpu(scale_b))
    out = fp8q.empty((8, 32), "bfloat16", device="cuda")
    expect_refusal("growing fp8q's scratch memory on CUDA device 0 to ",
                   fp8q.scaled_mm, *arguments, out=out, stream=CAPTURING)
    # The scratch block made (64 KiB) by a GPU histogram, not the workspace.
    fp8q.calib.HistogramCalibrator().update(
        on_gpu(fp8q.asarray(np.ones((8, 64), np.float32))))
    expect_refusal("creating the cuBLASLt handle and workspace of CUDA device "
                   f"0 cannot run while {capturing} (capture ",
                   fp8q.scaled_mm, *arguments, out=out, stream=CAPTURING)
    fp8q.scaled_mm(*arguments, out=out, stream=CAPTURING)  # warm
    a, b, scale_a, scale_b = operands(rng, 64, 64, 512, "row")
    big = (on_gpu(a), on_gpu(b.T).T, on_gpu(scale_a), on_gpu(scale_b))
    expect_refusal("growing fp8q's scratch memory on CUDA device 0 to ",
                   fp8q.scaled_mm, *big,
                   out=fp8q.empty((64, 512), "bfloat16", device="cuda"),
                   stream=CAPTURING)
    x = on_gpu(fp8q.asarray(np.ones((4, 8), np.float32)))
    expect_refusal("copying 4 bytes between host memory and the GPU (which "
                   f"waits for the stream) cannot run while {capturing}",
                   fp8q.cast, x, "e4m3", scale=np.float32(0.5),
                   stream=CAPTURING)
    expect_refusal("copying 32 bytes between host memory and the GPU",
                   fp8q.scaled_mm, *arguments[:2], host_scale_a, arguments[3],
                   out=out, stream=CAPTURING)
    expect_refusal("copying 128 bytes between host memory and the GPU",
                   fp8q.asarray, np.ones((4, 8), np.float32), device="cuda",
                   stream=CAPTURING)
    expect_refusal("copying 128 bytes between host memory and the GPU",
                   x.cpu, stream=CAPTURING)
    expect_refusal(f"waiting for the stream's work cannot run while "
                   f"{capturing}", fp8q.synchronize, stream=CAPTURING)
    # The warm product still captures after all these refusals.
    start = begin_capture(CAPTURING)
    fp8q.scaled_mm(*arguments, out=out, stream=CAPTURING)
    assert_valid_capture(CAPTURING, start)


def streams_that_cannot_be_ordered_are_refused():
    """Memory last used in a capture, used from a stream outside it or in
    another capture, and the legacy stream while a stream captures: clear
    errors, before the calls that would pull a stream into the capture,
    merge two captures or invalidate one."""
    x = fp8q.asarray(np.ones((4, 8), np.float32), device="cuda")
    y = fp8q.cast(x, "e4m3", stream=CAPTURING)
    start = begin_capture(CAPTURING)
    fp8q.amax(y, stream=CAPTURING)
    expect(fp8q.CudaError, "using memory last used on that stream from "
           f"another stream cannot run while stream 0x{CAPTURING:x} is "
           "capturing a CUDA graph", fp8q.amax, y, stream=OTHER)
    second = begin_capture(SECOND_CAPTURE)
    expect(fp8q.CudaError, f"stream 0x{SECOND_CAPTURE:x} is capturing a CUDA "
           "graph (capture ", fp8q.amax, y, stream=SECOND_CAPTURE)
    assert_valid_capture(SECOND_CAPTURE, second)
    expect(fp8q.CudaError, "the legacy default stream (stream=None) cannot "
           "be used on CUDA device 0 while a blocking stream captures",
           fp8q.amax, y)
    assert_valid_capture(CAPTURING, start)
    # After the capture, every stream may use it again.
    assert fp8q.amax(y, stream=OTHER).cpu(stream=OTHER).numpy() == 1


def memory_a_graph_uses_is_kept():
    """Memory allocated before a capture and dropped during it, last used
    there, is kept (the graph may read it; the driver refuses to free it in
    the capture), and so is the scratch block a capture used:
    fp8q.empty_cache() leaves it alone."""
    rng = np.random.default_rng(35)
    a, b, scale_a, scale_b = operands(rng, 8, 64, 32, "row")
    arguments = (on_gpu(a), on_gpu(b.T).T, on_gpu(scale_a), on_gpu(scale_b))
    out = fp8q.empty((8, 32), "bfloat16", device="cuda")
    fp8q.scaled_mm(*arguments, out=out, stream=CAPTURING)
    x = fp8q.asarray(np.ones((4, 8), np.float32), device="cuda")
    start = begin_capture(CAPTURING)
    fp8q.scaled_mm(*arguments, out=out, stream=CAPTURING)
    kept = fp8q.amax(x, stream=CAPTURING)
    del x
    lines = log_lines()[start:]
    assert_valid_capture(CAPTURING, start)
    assert not any(line.startswith("cuMemFree") for line in lines), lines
    del kept  # (a graph allocation, freed after its graph)
    before = len(log_lines())
    fp8q.empty_cache()
    assert not any(line.startswith(("cuMemFree", "cuStreamWaitEvent"))
                   for line in log_lines()[before:]), log_lines()[before:]


def without_memory_pools_nothing_is_allocated_in_a_capture():
    """With FAKE_CUDA_NO_POOLS (cuMemAlloc, which a capture refuses): a call
    that would allocate a result is refused; with out= it captures."""
    x = on_gpu(fp8q.asarray(np.ones((4, 8), np.float32)))
    out = fp8q.empty((4, 8), "e4m3", device="cuda")
    fp8q.cast(x, "e4m3", out=out, stream=CAPTURING)
    expect_refusal("allocating 32 bytes with cuMemAlloc (CUDA device 0 has "
                   "no stream-ordered memory pool) cannot run while stream "
                   f"0x{CAPTURING:x} is capturing a CUDA graph",
                   fp8q.cast, x, "e4m3", stream=CAPTURING)
    start = begin_capture(CAPTURING)
    fp8q.cast(x, "e4m3", out=out, stream=CAPTURING)
    assert_valid_capture(CAPTURING, start)


def without_capture_info():
    """Without cuStreamGetCaptureInfo (FAKE_CUDA_MISSING) fp8q takes no
    stream for capturing: eager work runs as before."""
    x = on_gpu(fp8q.asarray(np.ones((4, 8), np.float32)))
    assert fp8q.amax(fp8q.cast(x, "e4m3", stream=OTHER),
                     stream=CAPTURING).cpu().numpy() == 1
    assert "cuStreamGetCaptureInfo" not in calls()
