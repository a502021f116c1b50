"""Scenarios of CUDA tensors and operations, each run in a fresh interpreter
on the fake CUDA driver by tests/test_cuda_fake_device.py (see
tests/fake_gpu.py). Each function raises AssertionError on failure.

Results are compared with the CPU path, which the rest of the suite checks
against ml_dtypes and NumPy; the fake runs fp8q's kernels on the host from
their launch contracts, so these scenarios test what the host side asks for
and does, not the CUDA kernels.
"""
import copy
import os
import time

import numpy as np

import fp8q
import fp8q.calib
from helpers import FP8_NAMES, same_bits, scaled_mm_operands

DTYPES = ["float32", "float16", "bfloat16", "uint8"] + FP8_NAMES


def log_lines():
    """The fakes' call log so far, one call per line."""
    path = os.environ["FAKE_CUDA_LOG"]
    if not os.path.exists(path):
        return []
    with open(path) as log:
        return log.read().splitlines()


def calls():
    """The names of the calls logged so far."""
    return [line.split()[0] for line in log_lines()]


def mixed_values(rng, shape):
    """float32 data covering normals, subnormals, overflow and specials."""
    x = rng.standard_normal(shape).astype(np.float32)
    x *= np.float32(2.0) ** rng.integers(-20, 20, size=shape)
    flat = x.reshape(-1)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, 500.0,
                         -60000.0], np.float32)
    flat[: min(flat.size, specials.size)] = specials[: flat.size]
    return x


class Stream:
    """A stream object of the CUDA stream protocol."""

    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


class TorchLikeStream:
    def __init__(self, handle):
        self.cuda_stream = handle


# --------------------------------------------------------------------------
# Tensors


def round_trip_every_dtype():
    rng = np.random.default_rng(1)
    for name in DTYPES:
        host = fp8q.asarray(mixed_values(rng, (3, 5)), dtype=name)
        on_gpu = host.to("cuda")
        assert on_gpu.device == "cuda:0" and on_gpu.dtype == name
        assert on_gpu.shape == (3, 5) and on_gpu.is_contiguous()
        back = on_gpu.cpu()
        assert back.device == "cpu"
        assert same_bits(back.numpy(), host.numpy()), name
        assert same_bits(fp8q.asarray(host, device="cuda:0").cpu().numpy(),
                         host.numpy())
    # NaN payloads survive (a copy moves bits).
    payload = np.array([0x7FC12345, 0xFF800001], np.uint32).view(np.float32)
    assert same_bits(fp8q.asarray(payload).to(0).cpu().numpy(), payload)


def strided_inputs_are_gathered_on_the_gpu():
    """Operations take any strides; the copies stay on the GPU."""
    rng = np.random.default_rng(18)
    x = rng.standard_normal((6, 40)).astype(np.float32)
    gx = fp8q.asarray(x, device="cuda")
    before = len(log_lines())
    view = gx.T  # (40, 6), strided
    assert same_bits(fp8q.cast(view, "e4m3", scale=0.5).cpu().numpy(),
                     fp8q.cast(x.T, "e4m3", scale=0.5).numpy())
    for axis in (0, 1, None):
        assert same_bits(fp8q.amax(view, axis=axis).cpu().numpy(),
                         fp8q.amax(x.T, axis=axis).numpy()), axis
    x3 = x.reshape(4, 6, 10)
    g3 = gx.reshape((4, 6, 10))
    for axis in (0, 1, (0, 2)):
        assert same_bits(fp8q.amax(g3, axis=axis, keepdims=True).cpu().numpy(),
                         fp8q.amax(x3, axis=axis, keepdims=True).numpy()), axis
    q = fp8q.quantize(view, granularity="row")
    expected = fp8q.quantize(x.T, granularity="row")
    assert same_bits(q.data.cpu().numpy(), expected.data.numpy())
    assert same_bits(q.dequantize().cpu().numpy(),
                     expected.dequantize().numpy())
    # No device-to-host copy before the checks' own .cpu() calls.
    gathers = [line for line in log_lines()[before:]
               if line == "fp8q_gather"]
    assert gathers, "no gather on the GPU"
    # scaled_mm with b C-contiguous (not w.T): a transposed copy of b.
    a, b, scale_a, scale_b = operands(rng, 4, 64, 32, "row")
    expected = fp8q.scaled_mm(a, b, scale_a, scale_b, out_dtype="float32")
    got = fp8q.scaled_mm(a.to("cuda"), b.to("cuda"), scale_a, scale_b,
                         out_dtype="float32")
    assert close(got, expected, "float32")


def views_and_strided_copies():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    t = fp8q.asarray(x, device="cuda")
    assert t.T.device == "cuda:0" and not t.T.is_contiguous()
    assert same_bits(t.T.cpu().numpy(), x.T)
    assert same_bits(t.T.contiguous().cpu().numpy(), x.T)
    assert t.T.contiguous().device == "cuda:0"
    assert same_bits(t.reshape((6, 4)).cpu().numpy(), x.reshape(6, 4))
    assert same_bits(t.view("uint8").cpu().numpy(), x.view(np.uint8))
    assert t.to("cuda") is t and t.to("cuda", copy=True) is not t
    copied = t.copy()
    assert copied.device == "cuda:0" and copied.data_ptr != t.data_ptr
    assert same_bits(copied.cpu().numpy(), x)
    host = t.cpu()
    assert host.cpu() is host


def empty_and_zeros():
    for name in DTYPES:
        z = fp8q.zeros((2, 3), name, device="cuda:0")
        assert z.device == "cuda:0" and z.dtype == name
        assert not np.asarray(z.cpu().numpy(), np.float32).any()
    e = fp8q.empty(0, device="cuda")
    assert e.shape == (0,) and e.cpu().shape == (0,)
    assert "device='cuda:0'" in repr(fp8q.zeros(2, device="cuda"))


def memory_is_returned_on_the_last_stream():
    t = fp8q.empty((1024,), device="cuda", stream=Stream(7))
    fp8q.amax(t.view("uint8"), stream=Stream(9))
    del t
    lines = log_lines()
    assert "cuMemAllocAsync 7" in lines
    # amax's result is freed on stream 9, then the tensor (last used there).
    assert lines.count("cuMemFreeAsync 9") == 2, lines
    waits = [line for line in lines if line.startswith("cuStreamWaitEvent")]
    assert waits == ["cuStreamWaitEvent 9"], waits
    assert "cuEventRecord 7" in lines
    # The per-thread default stream (2) names another stream on every
    # thread: memory last used there is freed on the legacy stream (1),
    # which is ordered after it whichever thread frees it.
    before = len(log_lines())
    t = fp8q.empty((1024,), device="cuda", stream=2)
    del t
    memory_calls = [line for line in log_lines()[before:]
                    if line.startswith("cuMem")]
    assert memory_calls == ["cuMemAllocAsync 2", "cuMemFreeAsync 1"], (
        memory_calls)


def allocations_are_balanced():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    for _ in range(3):
        t = fp8q.asarray(x, device="cuda")
        q = fp8q.cast(t, "e4m3", scale=0.5)
        fp8q.amax(q, axis=-1).cpu()
        t.T.cpu()
        del t, q
    names = calls()
    allocations = names.count("cuMemAllocAsync")
    assert allocations > 0
    assert allocations == names.count("cuMemFreeAsync"), names


def memory_pool_keeps_its_memory():
    """The default pool's release threshold is set to keep every freed byte
    (as PyTorch's caching allocator does), once, before the first
    stream-ordered allocation."""
    t = fp8q.zeros(4, device="cuda")
    del t
    lines = log_lines()
    assert lines.count("cuMemPoolSetAttribute 4 18446744073709551615") == 1
    first_allocation = next(index for index, line in enumerate(lines)
                            if line.startswith("cuMemAlloc"))
    assert lines[first_allocation].startswith("cuMemAllocAsync "), lines
    assert lines.index("cuMemPoolSetAttribute 4 18446744073709551615") < (
        first_allocation)


def without_memory_pools():
    t = fp8q.zeros(4, device="cuda")
    del t
    names = calls()
    assert "cuMemAlloc" in names and "cuMemFree" in names
    assert "cuMemAllocAsync" not in names


def out_of_memory():
    assert issubclass(fp8q.CudaOutOfMemoryError, fp8q.CudaError)
    assert issubclass(fp8q.CudaOutOfMemoryError, MemoryError)
    try:
        fp8q.empty((1000,), device="cuda")
    except fp8q.CudaOutOfMemoryError as error:
        assert str(error).startswith(
            "out of memory on CUDA device 0 allocating 4000 bytes: "
            "cuMemAllocAsync returned CUDA_ERROR_OUT_OF_MEMORY"), str(error)
    else:
        raise AssertionError("no MemoryError")


# --------------------------------------------------------------------------
# Operations


def cast_matches_the_cpu():
    rng = np.random.default_rng(4)
    x32 = mixed_values(rng, (6, 40))
    for source in DTYPES:
        x = fp8q.asarray(x32, dtype=source)
        gx = x.to("cuda")
        for target in DTYPES:
            for saturate in (True, False):
                expected = fp8q.cast(x, target, saturate=saturate)
                got = fp8q.cast(gx, target, saturate=saturate)
                assert got.device == "cuda:0"
                assert same_bits(got.cpu().numpy(), expected.numpy()), (
                    source, target, saturate)


def grids_follow_occupancy():
    """Run with FAKE_CUDA_OCCUPANCY=1 and FAKE_CUDA_MAX_GRID=4 (the fake has
    4 multiprocessors): grid-stride kernels launch at most one block per
    multiprocessor, asked once per kernel when the device opens."""
    x = np.random.default_rng(22).standard_normal(1 << 16).astype(np.float32)
    gx = fp8q.asarray(x, device="cuda")
    assert same_bits(fp8q.cast(gx, "e4m3", scale=0.5).cpu().numpy(),
                     fp8q.cast(x, "e4m3", scale=0.5).numpy())
    assert same_bits(fp8q.amax(gx).cpu().numpy(), fp8q.amax(x).numpy())
    fp8q.cast(gx, "e5m2")
    asked = calls().count("cuOccupancyMaxActiveBlocksPerMultiprocessor")
    assert asked == len([line for line in calls() if line == "cuModuleGetFunction"])


def grids_beyond_occupancy_are_refused():
    """With FAKE_CUDA_OCCUPANCY=3 and FAKE_CUDA_MAX_GRID=4 the fake refuses
    the 12-block grid: the grid really is the occupancy's."""
    gx = fp8q.asarray(np.ones(1 << 16, np.float32), device="cuda")
    expect(fp8q.CudaError, "cuLaunchKernel failed", fp8q.cast, gx, "e4m3")


def cast_with_every_scale_layout():
    rng = np.random.default_rng(5)
    x = mixed_values(rng, (2, 3, 8))
    gx = fp8q.asarray(x, device="cuda")
    scales = [
        np.float32(0.25),
        np.array([[[0.5]]], np.float32),
        (np.abs(rng.standard_normal((2, 3, 1))) + 0.1).astype(np.float32),
        (np.abs(rng.standard_normal((8,))) + 0.1).astype(np.float32),
        (np.abs(rng.standard_normal((2, 3, 8))) + 0.1).astype(np.float32),
        (np.abs(rng.standard_normal((2, 1, 1))) + 0.1).astype(np.float32),
        (np.abs(rng.standard_normal((2, 1, 8))) + 0.1).astype(np.float32),
    ]
    for scale in scales:
        for target in FP8_NAMES:
            expected = fp8q.cast(x, target, scale=scale)
            on_host_scale = fp8q.cast(gx, target, scale=scale)
            on_gpu_scale = fp8q.cast(gx, target,
                                     scale=fp8q.asarray(scale, device="cuda"))
            for got in (on_host_scale, on_gpu_scale):
                assert same_bits(got.cpu().numpy(), expected.numpy()), (
                    np.shape(scale), target)


def cast_into_out_with_amax():
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    gx = fp8q.asarray(x, device="cuda")
    out = fp8q.empty((3, 4), "e5m2", device="cuda")
    amax = fp8q.asarray(np.float32(99.0), device="cuda")
    assert fp8q.cast(gx, "e5m2", out=out, scale=0.5, amax_out=amax) is out
    expected = fp8q.cast(x, "e5m2", scale=0.5).numpy()
    assert same_bits(out.cpu().numpy(), expected)
    assert amax.cpu().numpy() == 3.0
    expect(ValueError, "cast: amax_out= must be a writable float32 tensor of "
           "one element on cuda:0 (x's device), got a tensor on another "
           "device", fp8q.cast, gx, "e5m2", amax_out=np.zeros((), np.float32))


def amax_matches_the_cpu():
    rng = np.random.default_rng(6)
    x32 = mixed_values(rng, (3, 4, 50))
    x32[1, 2, 7] = np.nan
    for name in DTYPES:
        x = fp8q.asarray(x32, dtype=name)
        gx = x.to("cuda")
        for axis in (None, -1, (-2, -1), (0, 1, 2), 2, 0, (0, 1), 1):
            for keepdims in (False, True):
                expected = fp8q.amax(x, axis=axis, keepdims=keepdims).numpy()
                got = fp8q.amax(gx, axis=axis, keepdims=keepdims)
                assert got.device == "cuda:0" and got.dtype == "float32"
                assert same_bits(got.cpu().numpy(), expected), (name, axis)
    empty = fp8q.zeros((0, 3), device="cuda")
    assert fp8q.amax(empty).cpu().numpy() == 0
    assert fp8q.amax(empty, axis=-1).cpu().shape == (0,)


def synchronize_waits_for_the_stream():
    before = len(log_lines())
    fp8q.synchronize("cuda:0", stream=Stream(21))
    fp8q.synchronize()
    fp8q.synchronize("cpu")
    assert log_lines()[before:].count("cuStreamSynchronize 21") == 1
    assert log_lines()[before:].count("cuStreamSynchronize 0") == 1
    expect(fp8q.CudaError, "CUDA device 5 does not exist", fp8q.synchronize,
           5)


def streams_order_work():
    x = fp8q.asarray(np.ones(8, np.float32), device="cuda", stream=3)
    before = len(log_lines())
    y = fp8q.cast(x, "e4m3", stream=TorchLikeStream(5))
    lines = log_lines()[before:]
    assert "cuEventRecord 3" in lines and "cuStreamWaitEvent 5" in lines
    assert "cuMemAllocAsync 5" in lines
    before = len(lines) + before
    fp8q.amax(y, stream=Stream(5))
    lines = log_lines()[before:]
    assert not any(line.startswith("cuStreamWaitEvent") for line in lines)
    # The legacy default stream has two spellings: None and 1.
    z = fp8q.zeros(4, device="cuda")
    before = len(log_lines())
    fp8q.amax(z, stream=1)
    assert not any(line.startswith("cuStreamWaitEvent")
                   for line in log_lines()[before:])


GRANULARITIES = ["tensor", "row", "col", (1, 128), (128, 128), (3, 5)]


def quantize_matches_the_cpu():
    rng = np.random.default_rng(7)
    x32 = (rng.standard_normal((130, 260)) *
           np.float32(2.0) ** rng.integers(-6, 6, size=(130, 1))).astype(
               np.float32)
    x32[5, :] = 0.0  # an all-zero row: scale 1
    for source in ("float32", "bfloat16", "float16"):
        x = fp8q.asarray(x32, dtype=source)
        gx = x.to("cuda")
        for granularity in GRANULARITIES:
            for target in FP8_NAMES:
                for power_of_2 in (False, True):
                    expected = fp8q.quantize(x, target,
                                             granularity=granularity,
                                             power_of_2=power_of_2)
                    got = fp8q.quantize(gx, target, granularity=granularity,
                                        power_of_2=power_of_2)
                    assert got.device == "cuda:0"
                    assert got.scale.device == "cuda:0"
                    key = (source, granularity, target, power_of_2)
                    assert same_bits(got.scale.cpu().numpy(),
                                     expected.scale.numpy()), key
                    assert same_bits(got.data.cpu().numpy(),
                                     expected.data.numpy()), key
                    for dtype in ("float32", "bfloat16", "float16"):
                        assert same_bits(
                            got.dequantize(dtype).cpu().numpy(),
                            expected.dequantize(dtype).numpy()), (key, dtype)
    # 3-D rows and columns.
    x3 = rng.standard_normal((2, 3, 40)).astype(np.float32)
    for granularity in ("row", "col", "tensor"):
        expected = fp8q.quantize(x3, granularity=granularity)
        got = fp8q.quantize(fp8q.asarray(x3, device="cuda"),
                            granularity=granularity)
        assert same_bits(got.data.cpu().numpy(), expected.data.numpy())
        assert same_bits(got.scale.cpu().numpy(), expected.scale.numpy())


def quantize_rows_in_one_pass():
    """Row scales of float rows up to 16384 elements come from a one-pass
    kernel (amax, scale and codes at once): fp8q_quantize_rows_warps for
    float16 / bfloat16 rows of a multiple of 8 elements to saturating
    E4M3FN / E5M2, fp8q_quantize_rows for the rest; longer rows, other
    dtypes and empty inputs take the amax / scales / cast kernels. All
    match the CPU bit for bit."""
    rng = np.random.default_rng(21)
    cases = [((5, 1), "float32"), ((3, 33), "bfloat16"), ((2, 4, 1001), "float16"),
             ((4, 16384), "bfloat16"), ((2, 16384), "float32"),
             ((2, 16385), "bfloat16"), ((3, 40), "e4m3"), ((0, 8), "float32"),
             ((9, 2056), "float16"), ((5, 6144), "bfloat16")]
    for shape, source in cases:
        x = fp8q.asarray(mixed_values(rng, shape), dtype=source)
        finite = fp8q.asarray(rng.standard_normal(shape).astype(np.float32)
                              * 30, dtype=source)
        one_pass = (source in ("float32", "float16", "bfloat16")
                    and 0 < shape[-1] <= 16384 and 0 not in shape)
        for target in FP8_NAMES:
            for power_of_2, saturate in ((False, True), (True, False)):
                before = len(log_lines())
                got = fp8q.quantize(finite.to("cuda"), target,
                                    granularity="row", power_of_2=power_of_2,
                                    saturate=saturate)
                launched = [line for line in log_lines()[before:]
                            if line.startswith("fp8q_")]
                expected = fp8q.quantize(finite, target, granularity="row",
                                         power_of_2=power_of_2,
                                         saturate=saturate)
                key = (shape, source, target, power_of_2, saturate)
                warps = (source in ("float16", "bfloat16") and saturate
                         and shape[-1] % 8 == 0 and target in (
                             "float8_e4m3fn", "float8_e5m2"))
                if one_pass:
                    assert launched == [
                        "fp8q_quantize_rows_warps" if warps
                        else "fp8q_quantize_rows"], (key, launched)
                else:
                    assert not any(name.startswith("fp8q_quantize_rows")
                                   for name in launched), key
                assert same_bits(got.scale.cpu().numpy(),
                                 expected.scale.numpy()), key
                assert same_bits(got.data.cpu().numpy(),
                                 expected.data.numpy()), key
        if one_pass:
            # Non-finite values: the CPU refuses them, the GPU gives the row
            # a NaN or infinite scale; the codes follow the cast's rules.
            got = fp8q.quantize(x.to("cuda"), granularity="row")
            amax = fp8q.amax(x, axis=-1, keepdims=True).numpy()
            scale = got.scale.cpu().numpy()
            finite_rows = np.isfinite(amax)
            assert np.isnan(scale[np.isnan(amax)]).all()
            assert np.isinf(scale[np.isinf(amax)]).all()
            rows = np.broadcast_to(finite_rows, shape)
            expected = fp8q.cast(x.numpy(), "e4m3",
                                 scale=np.where(finite_rows, scale, 1))
            assert same_bits(got.data.cpu().numpy()[rows],
                             expected.numpy()[rows]), shape


def column_amax_reads_rows():
    """Column scales come from the per-column kernel (coalesced row reads,
    atomicMax into cleared amaxes), not one block per column."""
    rng = np.random.default_rng(23)
    for shape in ((300, 520), (1, 7), (65, 1), (2, 3, 40)):
        x = mixed_values(rng, shape)
        x[np.isnan(x) | np.isinf(x)] = 1.0
        before = len(log_lines())
        got = fp8q.quantize(fp8q.asarray(x, device="cuda"), granularity="col")
        launched = [line for line in log_lines()[before:]
                    if line.startswith("fp8q_")]
        assert launched[0] == "fp8q_amax_columns", launched
        expected = fp8q.quantize(x, granularity="col")
        assert same_bits(got.scale.cpu().numpy(), expected.scale.numpy())
        assert same_bits(got.data.cpu().numpy(), expected.data.numpy())
    # amax over leading axes reads the tensor in place with the same kernel:
    # no gather into a transposed copy first.
    x = mixed_values(rng, (3, 40, 70))
    for axis in (0, (0, 1)):
        before = len(log_lines())
        got = fp8q.amax(fp8q.asarray(x, device="cuda"), axis=axis)
        launched = [line for line in log_lines()[before:]
                    if line.startswith("fp8q_")]
        assert launched == ["fp8q_amax_columns"], (axis, launched)
        assert same_bits(got.cpu().numpy(), fp8q.amax(x, axis=axis).numpy())


def quantize_with_given_scales():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((6, 256)).astype(np.float32)
    gx = fp8q.asarray(x, device="cuda")
    row = (np.abs(rng.standard_normal((6, 1))) + 0.01).astype(np.float32)
    for granularity, scale in (("tensor", 0.01), ("row", row),
                               ("row", np.float32(0.02)),
                               ((1, 128), np.full((6, 2), 0.03, np.float32))):
        expected = fp8q.quantize(x, granularity=granularity, scale=scale)
        for given in (scale, fp8q.asarray(scale, device="cuda")):
            got = fp8q.quantize(gx, granularity=granularity, scale=given)
            assert same_bits(got.data.cpu().numpy(), expected.data.numpy())
            assert same_bits(got.scale.cpu().numpy(), expected.scale.numpy())
    # Host scales are checked; a broadcast GPU scale goes through the host.
    expect(ValueError, "scale: every value must be finite and > 0",
           fp8q.quantize, gx, granularity="row",
           scale=np.zeros((6, 1), np.float32))
    expect(ValueError, "scale: every value must be finite and > 0",
           fp8q.quantize, gx, granularity="row",
           scale=fp8q.zeros((1, 1), device="cuda"))
    expect(ValueError, "quantize: scale= must have shape (6, 1)",
           fp8q.quantize, gx, granularity="row",
           scale=np.ones((5, 1), np.float32))


def quantize_transposed():
    rng = np.random.default_rng(15)
    x = rng.standard_normal((45, 70)).astype(np.float32)
    expected = fp8q.quantize(x, granularity="row", transpose=True)
    got = fp8q.quantize(fp8q.asarray(x, device="cuda"), granularity="row",
                        transpose=True)
    assert got.transposed.device == "cuda:0"
    assert same_bits(got.transposed.cpu().numpy(),
                     expected.transposed.numpy())
    assert got.to("cpu").transposed.device == "cpu"


def qtensor_moves_and_dequantizes():
    x = np.linspace(-10, 10, 512, dtype=np.float32).reshape(4, 128)
    q = fp8q.quantize(x, granularity=(1, 128))
    g = q.to("cuda")
    assert g.device == "cuda:0" and "device='cuda:0'" in repr(g)
    assert g.to("cuda:0") is g
    assert same_bits(g.dequantize().cpu().numpy(), q.dequantize().numpy())
    back = g.to("cpu")
    assert same_bits(back.data.numpy(), q.data.numpy())
    # A host scale with GPU data moves over; its shape is checked first.
    assert same_bits(
        fp8q._C._dequantize(g.data, q.scale, (1, 128)).cpu().numpy(),
        q.dequantize().numpy())
    expect(ValueError, 'scale: expected shape (4, 1) for "block"',
           fp8q._C._dequantize, g.data, np.ones((4, 2), np.float32),
           (1, 256))


def quantize_empty_groups():
    """Groups with no elements get amax 0, scale 1, as on the CPU."""
    for shape, granularity in (((3, 0), "row"), ((0, 4), "col"),
                               ((0, 5), "tensor"), ((2, 0), (1, 128))):
        x = np.zeros(shape, np.float32)
        expected = fp8q.quantize(x, granularity=granularity)
        got = fp8q.quantize(fp8q.asarray(x, device="cuda"),
                            granularity=granularity)
        assert same_bits(got.scale.cpu().numpy(), expected.scale.numpy()), (
            shape, granularity)


def nonfinite_groups_on_the_gpu():
    x = np.ones((3, 8), np.float32)
    x[1, 2] = np.nan
    x[2, 3] = np.inf
    q = fp8q.quantize(fp8q.asarray(x, device="cuda"), granularity="row")
    scale = q.scale.cpu().numpy()
    assert scale[0, 0] == np.float32(1 / 448)
    assert np.isnan(scale[1, 0]) and np.isinf(scale[2, 0])
    # 1 / NaN keeps the scale's NaN; inf / inf is the computed NaN
    # 0x7FC00000, positive (x86 would give 0xFFC00000: code 0xFF).
    codes = q.data.cpu().numpy().view(np.uint8)
    assert (codes[1] == 0x7F).all() and codes[2, 3] == 0x7F, codes
    assert (np.delete(codes[2], 3) == 0).all(), codes


def linear_gives_a_nan_row_for_a_nonfinite_token():
    """A NaN or infinite token quantized per token (or in 1x128 blocks) on
    the GPU makes its own row of fp8q.linear NaN through its scale and codes,
    with no mask and no host wait (what fp8q.torch W8A8 relies on); the other
    rows are those of the batch without it."""
    rng = np.random.default_rng(31)
    weight = rng.standard_normal((256, 256)).astype(np.float32)
    x = rng.standard_normal((5, 256)).astype(np.float32)
    kept = [0, 1, 3, 4]
    for granularity in ("tensor", "row", (128, 128)):
        w = fp8q.quantize(fp8q.asarray(weight, device="cuda"),
                          granularity=granularity)
        for poison in (np.nan, np.inf, -np.inf):
            poisoned = x.copy()
            poisoned[2, 17] = poison
            got = fp8q.linear(fp8q.asarray(poisoned, device="cuda"), w)
            got = got.cpu().numpy()
            without = fp8q.linear(fp8q.asarray(x[kept], device="cuda"), w)
            assert np.isnan(got[2]).all(), (granularity, poison)
            assert same_bits(got[kept], without.cpu().numpy()), granularity


def linear_takes_a_bias_on_x_device_or_the_cpu():
    """fp8q.linear's bias is on x's device or the CPU (copied to x's device,
    as scaled_mm takes it, same bits); a CUDA bias next to CPU operands is a
    ValueError naming bias, not a silent copy."""
    rng = np.random.default_rng(41)
    weight = rng.standard_normal((32, 64)).astype(np.float32)
    host_bias = rng.standard_normal(32).astype(np.float32)
    x = rng.standard_normal((3, 64)).astype(np.float32)
    w = fp8q.quantize(fp8q.asarray(weight, device="cuda"), granularity="row")
    gx = fp8q.asarray(x, device="cuda")
    on_gpu = fp8q.linear(gx, w, bias=fp8q.asarray(host_bias, device="cuda"))
    from_host = fp8q.linear(gx, w, bias=host_bias)
    assert same_bits(from_host.cpu().numpy(), on_gpu.cpu().numpy())
    cpu_w = fp8q.quantize(weight, granularity="row")
    try:
        fp8q.linear(x, cpu_w, bias=fp8q.asarray(host_bias, device="cuda"))
    except ValueError as error:
        assert "bias is on cuda:0" in str(error), error
    else:
        raise AssertionError("a CUDA bias next to CPU operands was taken")


def linear_layer_is_fp8q_linear():
    """fp8q.torch's one-call forward (_C.linear_layer, _C.layer_weight)
    with fp8q CUDA tensors gives exactly fp8q.linear's and the
    QTensor.dequantize's bits on the GPU, per token, in blocks and with a
    static scale, a NaN token making its own row NaN; its result and
    temporaries are ordered on x's stream: no synchronization and no host
    copy."""
    rng = np.random.default_rng(37)
    weight = rng.standard_normal((160, 256)).astype(np.float32)
    bias = fp8q.asarray(rng.standard_normal(160).astype(np.float32),
                        device="cuda")
    x = rng.standard_normal((2, 3, 256)).astype(np.float32)
    x[1, 2, 5] = np.nan
    gx = fp8q.asarray(x, device="cuda")
    for name, blocks in (("tensor", "tensor"), ("row", "row"),
                         ("block", (128, 128))):
        w = fp8q.quantize(fp8q.asarray(weight, device="cuda"),
                          granularity=blocks)
        scale = w.scale
        expected = fp8q.linear(gx, w, bias=bias).cpu().numpy()
        before = len(log_lines())
        got = fp8q._C.linear_layer(gx, w.data, scale, bias, None, name, None)
        made = calls()[before:]
        got = got.cpu().numpy()
        assert got.shape == (2, 3, 160)
        assert same_bits(got, expected), name
        assert np.isnan(got[1, 2]).all() and np.isfinite(got[0]).all(), name
        for forbidden in ("cuStreamSynchronize", "cuMemcpyDtoH_v2",
                          "cuMemcpyHtoD_v2", "cuCtxSynchronize"):
            assert forbidden not in made, (name, made)
        dequantized = fp8q._C.layer_weight(gx, w.data, scale, name, None)
        assert same_bits(dequantized.cpu().numpy(),
                         w.dequantize("float32").cpu().numpy()), name
        if name == "block":
            continue
        input_scale = fp8q.asarray(np.float32(0.02), device="cuda")
        static = fp8q.quantize(gx, "float8_e4m3fn", scale=input_scale)
        expected = fp8q.linear(static, w, bias=bias,
                               out_dtype="float32").cpu().numpy()
        got = fp8q._C.linear_layer(gx, w.data, scale, bias, input_scale,
                                   name, None).cpu().numpy()
        assert same_bits(got, expected), name


def static_scale_layer_gives_nan_rows_for_infinities():
    """With a static input scale, the W8A8 layer's one call
    (_C.linear_layer) quantizes an infinity to the NaN code
    (fp8q_cast_to_fp8 with infinity_to_nan) instead of saturating it, so a
    token holding +inf or -inf gets an all-NaN row of the product by
    itself, with no masking pass after the call; the other rows keep the
    bits of fp8q.linear over the public static quantize, which still
    saturates infinities (0x7E / 0xFE)."""
    rng = np.random.default_rng(41)
    weight = rng.standard_normal((96, 256)).astype(np.float32)
    input_scale = fp8q.asarray(np.float32(0.02), device="cuda")
    for source in ("float32", "float16", "bfloat16"):
        x = rng.standard_normal((5, 256)).astype(np.float32)
        x[1, 7] = np.inf
        x[3, 200] = -np.inf
        gx = fp8q.asarray(x, dtype=source, device="cuda")
        static = fp8q.quantize(gx, "float8_e4m3fn", scale=input_scale)
        codes = static.data.cpu().numpy().view(np.uint8)
        assert codes[1, 7] == 0x7E and codes[3, 200] == 0xFE, source
        for name in ("tensor", "row"):
            w = fp8q.quantize(fp8q.asarray(weight, device="cuda"),
                              granularity=name)
            before = len(log_lines())
            got = fp8q._C.linear_layer(gx, w.data, w.scale, None,
                                       input_scale, name, None)
            launched = [line for line in log_lines()[before:]
                        if line.startswith("fp8q_")]
            assert launched[:1] == ["fp8q_cast_to_fp8"], (source, launched)
            got = got.cpu().numpy()
            values = got.astype(np.float32)
            assert np.isnan(values[[1, 3]]).all(), (source, name)
            assert np.isfinite(values[[0, 2, 4]]).all(), (source, name)
            expected = fp8q.linear(static, w, out_dtype=source).cpu().numpy()
            assert same_bits(got[[0, 2, 4]], expected[[0, 2, 4]]), (
                source, name)


# --------------------------------------------------------------------------
# scaled_mm


def matmul_log():
    """The cuBLASLt products of the fake's log, each as its words: A, B and
    D types, scaled or plain, and the fake's live descriptors and layouts."""
    return [line.split()[1:] for line in log_lines()
            if line.startswith("cublasLtMatmul ")]


def matmul_paths():
    """The cuBLASLt calls of the fake's log, as (A, B, D types, scaled)."""
    return [tuple(words[:4]) for words in matmul_log()]


def operands(rng, m, k, n, granularity):
    """scaled_mm operands on the CPU (b e5m2 for tensorwise scales)."""
    return scaled_mm_operands(rng, m, k, n, granularity,
                              "e5m2" if granularity == "tensor" else "e4m3")


def close(got, expected, out_dtype):
    got = np.asarray(got.cpu().numpy(), np.float64)
    expected = np.asarray(expected.numpy(), np.float64)
    if out_dtype == "float32":
        error = np.linalg.norm(got - expected) / max(np.linalg.norm(expected),
                                                     1e-30)
        return error <= 1e-5
    ulp = {"bfloat16": 2.0 ** -7, "float16": 2.0 ** -10,
           "float8_e4m3fn": 2.0 ** -3}[out_dtype]
    # Rounding of the result, plus the float32 sums' own rounding (their
    # order differs from the CPU's BLAS) near cancellations.
    return bool(np.all(np.abs(got - expected) <=
                       2 * ulp * np.abs(expected) +
                       1e-5 * np.abs(expected).max()))


def scaled_mm_matches_the_cpu():
    rng = np.random.default_rng(9)
    shapes = [(5, 64, 32), (1, 16, 16), (3, 40, 24), (7, 200, 136)]
    for m, k, n in shapes:
        for granularity in ("tensor", "row", "block"):
            a, b, scale_a, scale_b = operands(rng, m, k, n, granularity)
            ga, gb = a.to("cuda"), b.T.to("cuda").T
            bias = rng.standard_normal(n).astype(np.float32)
            for out_dtype in ("float32", "bfloat16", "float16",
                              "float8_e4m3fn"):
                for with_bias in (False, True):
                    keywords = dict(out_dtype=out_dtype)
                    if with_bias:
                        keywords["bias"] = bias
                    if out_dtype == "float8_e4m3fn":
                        keywords["scale_result"] = 0.25
                    expected = fp8q.scaled_mm(a, b, scale_a, scale_b,
                                              **keywords)
                    for scales in ((scale_a, scale_b),
                                   (scale_a.to("cuda"), scale_b.to("cuda"))):
                        got = fp8q.scaled_mm(ga, gb, *scales, **keywords)
                        assert got.device == "cuda:0"
                        assert close(got, expected, out_dtype), (
                            m, k, n, granularity, out_dtype, with_bias)


def scaled_mm_paths():
    """Which cuBLASLt product each case takes (docs/scaled_mm.md), as the
    fake logs it: cuBLASLt's A type (our b's), B type (our a's), D type."""
    rng = np.random.default_rng(10)
    native = os.environ.get("FAKE_CUDA_CC", "8.9") == "8.9"
    cases = [
        ("tensor", 64, 32, {}, ("29", "28", "14", "scaled")),
        ("tensor", 64, 32, {"out_dtype": "float32"},
         ("29", "28", "0", "scaled")),
        ("tensor", 64, 32, {"bias": np.ones(32, np.float32)},
         ("29", "28", "0", "plain")),
        ("row", 64, 32, {}, ("28", "28", "0", "plain")),
        # K % 16 != 0: zero-padded FP8 operands, where the padded product
        # has at most twice the multiply-adds; else the exact bfloat16 one.
        ("row", 40, 32, {}, ("28", "28", "0", "plain")),
        ("tensor", 64, 40, {}, ("29", "28", "0", "plain")),
        ("row", 4, 32, {}, ("14", "14", "0", "plain")),
        ("block", 256, 32, {}, ("0", "0", "0", "plain")),
    ]
    for granularity, k, n, keywords, path in cases:
        a, b, scale_a, scale_b = operands(rng, 4, k, n, granularity)
        before = len(matmul_paths())
        fp8q.scaled_mm(a.to("cuda"), b.T.to("cuda").T, scale_a, scale_b,
                       **keywords)
        taken = matmul_paths()[before:]
        if not native and path[0] in ("28", "29"):
            # No FP8 tensor cores: the codes go to bfloat16.
            path = ("14", "14", "0", "plain")
        assert taken == [path], (granularity, k, keywords, taken, path)


def scaled_mm_padded_matches_the_cpu():
    """K or N not multiples of 16 on a GPU with FP8 tensor cores: a and w
    are copied into zero-padded operands (the pad kernel) and cuBLASLt's
    FP8 product runs on them, its padded columns dropped before the
    epilogue (or, with only K padded, one cuBLASLt call on them); results
    as the CPU's, bit for bit where the epilogue path is (float32 sums of
    exact products: zeros along K add nothing). Where padding would more
    than double the work, the exact bfloat16 product."""
    rng = np.random.default_rng(24)
    for m, k, n, padded in ((5, 40, 24, True), (3, 4095, 16, True),
                            (2, 64, 100, True), (4, 4, 32, False),
                            (6, 60, 30, True)):
        for granularity in ("tensor", "row"):
            a, b, scale_a, scale_b = operands(rng, m, k, n, granularity)
            ga, gb = a.to("cuda"), b.T.to("cuda").T
            for out_dtype in ("float32", "bfloat16", "float8_e4m3fn"):
                keywords = dict(out_dtype=out_dtype,
                                bias=rng.standard_normal(n).astype(
                                    np.float32))
                expected = fp8q.scaled_mm(a, b, scale_a, scale_b, **keywords)
                before = len(log_lines())
                got = fp8q.scaled_mm(ga, gb, scale_a, scale_b, **keywords)
                made = calls()[before:]
                assert close(got, expected, out_dtype), (m, k, n, granularity,
                                                         out_dtype)
                assert ("fp8q_pad" in made) == padded, (m, k, n, made)
                taken = [tuple(words[:3]) for words in matmul_log()][-1]
                assert taken == (("29" if granularity == "tensor" else "28",
                                  "28", "0") if padded
                                 else ("14", "14", "0")), (m, k, n, taken)
                if out_dtype == "float32" and granularity == "row":
                    # The FP8 sums of exact products in k order, +0 for
                    # the padding: the bits of the bfloat16 path's sums.
                    exact = fp8q.scaled_mm(
                        ga, gb, scale_a, scale_b,
                        out=fp8q.empty((m, n), "float32", device="cuda"),
                        **keywords)
                    assert same_bits(exact.cpu().numpy(),
                                     got.cpu().numpy())
    # Only K unaligned, and the call fits one cuBLASLt call (tensorwise on
    # sm_89, no bias): that one call runs on the padded operands, with the
    # result, its type and the scales as they are; no epilogue kernel.
    d_types = {"float32": "0", "bfloat16": "14", "float8_e4m3fn": "28"}
    for m, k, n in ((3, 4095, 16), (5, 40, 32)):
        a, b, scale_a, scale_b = operands(rng, m, k, n, "tensor")
        ga, gb = a.to("cuda"), b.T.to("cuda").T
        for out_dtype in d_types:
            expected = fp8q.scaled_mm(a, b, scale_a, scale_b,
                                      out_dtype=out_dtype)
            before = len(log_lines())
            got = fp8q.scaled_mm(ga, gb, scale_a, scale_b,
                                 out_dtype=out_dtype)
            made = calls()[before:]
            assert "fp8q_pad" in made, (m, k, n, made)
            assert "fp8q_scaled_mm_epilogue" not in made, (m, k, n, made)
            assert matmul_log()[-1][2] == d_types[out_dtype], matmul_log()
            assert close(got, expected, out_dtype), (m, k, n, out_dtype)
    # The benchmark's switch: padding off, the exact bfloat16 path.
    a, b, scale_a, scale_b = operands(rng, 5, 40, 24, "row")
    assert fp8q._C._scaled_mm_padding(False) is True
    fp8q.scaled_mm(a.to("cuda"), b.T.to("cuda").T, scale_a, scale_b)
    assert fp8q._C._scaled_mm_padding(True) is False
    assert tuple(matmul_log()[-1][:3]) == ("14", "14", "0")


def plan_cache_is_bounded():
    """A server runs a new m with almost every batch: fp8q keeps the 256
    most recently used cuBLASLt plans (a descriptor and 4 layouts each), not
    one per m for ever, and a product of a forgotten shape still runs."""
    rng = np.random.default_rng(12)
    for m in range(1, 301):
        a, b, scale_a, scale_b = operands(rng, m, 32, 16, "tensor")
        fp8q.scaled_mm(a.to("cuda"), b.T.to("cuda").T, scale_a, scale_b,
                       out_dtype="float32")
    live = [int(words[4]) for words in matmul_log()]
    assert len(live) == 300, len(live)
    assert max(live) <= 256 * 5, max(live)
    assert live[100] == 101 * 5, live[100]  # below the bound: all kept
    a, b, scale_a, scale_b = operands(rng, 1, 32, 16, "tensor")
    expected = fp8q.scaled_mm(a, b, scale_a, scale_b, out_dtype="float32")
    got = fp8q.scaled_mm(a.to("cuda"), b.T.to("cuda").T, scale_a, scale_b,
                         out_dtype="float32")
    assert close(got, expected, "float32")


def scaled_mm_amax_and_out():
    rng = np.random.default_rng(11)
    a, b, scale_a, scale_b = operands(rng, 6, 64, 48, "row")
    ga, gb = a.to("cuda"), b.T.to("cuda").T
    amax = fp8q.zeros(1, device="cuda")
    out = fp8q.empty((6, 48), "e4m3", device="cuda")
    host_amax = np.zeros(1, np.float32)
    expected = fp8q.scaled_mm(a, b, scale_a, scale_b, out_dtype="e4m3",
                              scale_result=0.5, amax_out=host_amax)
    assert fp8q.scaled_mm(ga, gb, scale_a, scale_b, out_dtype="e4m3",
                          scale_result=fp8q.asarray(np.float32(0.5),
                                                    device="cuda"),
                          amax_out=amax, out=out) is out
    assert close(out, expected, "float8_e4m3fn")
    assert abs(float(amax.cpu().numpy()[0]) - host_amax[0]) <= (
        1e-5 * host_amax[0])
    # k = 0: the sums are empty, the result is the bias.
    empty_a = fp8q.zeros((3, 0), "e4m3", device="cuda")
    empty_b = fp8q.zeros((4, 0), "e4m3", device="cuda").T
    got = fp8q.scaled_mm(empty_a, empty_b, 1.0, 1.0, out_dtype="float32",
                         bias=np.arange(4, dtype=np.float32))
    assert same_bits(got.cpu().numpy(),
                     np.tile(np.arange(4, dtype=np.float32), (3, 1)))


def scaled_mm_errors():
    rng = np.random.default_rng(12)
    a, b, scale_a, scale_b = operands(rng, 4, 64, 32, "row")
    ga, gb = a.to("cuda"), b.T.to("cuda").T
    expect(ValueError, "scaled_mm: on CUDA, out= must be C-contiguous, got "
           "strides (1, 4) (pass a C-contiguous out, or none)",
           fp8q.scaled_mm, ga, gb, scale_a, scale_b,
           out=fp8q.empty((32, 4), "bfloat16", device="cuda").T)
    expect(ValueError, "scaled_mm: b is on cpu, but a is on cuda:0; b must "
           "be on cuda:0 (tensor.to(...))",
           fp8q.scaled_mm, ga, b, scale_a, scale_b)
    expect(ValueError, "scaled_mm: amax_out is on cpu, but a is on cuda:0; "
           "amax_out must be on cuda:0 (tensor.to(...))",
           fp8q.scaled_mm, ga, gb, scale_a, scale_b,
           amax_out=np.zeros(1, np.float32))
    expect(ValueError, "scaled_mm: out= must be on the inputs' device, "
           "cuda:0; got a tensor on cpu", fp8q.scaled_mm, ga, gb, scale_a,
           scale_b, out=fp8q.empty((4, 32), "bfloat16"))
    expect(ValueError, "scaled_mm: bias is on cuda:0, but a is on cpu; bias "
           "must be on cpu (tensor.to(...))", fp8q.scaled_mm, a, b, scale_a,
           scale_b, bias=fp8q.zeros(32, device="cuda"))
    expect(ValueError, "scaled_mm: scale_b is on cuda:0, but a is on cpu; "
           "scale_b must be on cpu (tensor.to(...))", fp8q.scaled_mm, a, b,
           scale_a, fp8q.asarray(scale_b, device="cuda"))


def cublaslt_failures_name_the_call():
    """cublasLtMatmul fails with a status that is no refusal
    (FAKE_CUBLASLT_MATMUL_STATUS: EXECUTION_FAILED, ALLOC_FAILED,
    INTERNAL_ERROR): fp8q.CudaError, nothing tried after it, whose text
    names scaled_mm's scaling mode and path, the cuBLASLt call, the status's
    name and number, and the product cuBLASLt ran (M, N, K, types)."""
    number = int(os.environ["FAKE_CUBLASLT_MATMUL_STATUS"])
    status = {3: "CUBLAS_STATUS_ALLOC_FAILED",
              13: "CUBLAS_STATUS_EXECUTION_FAILED",
              14: "CUBLAS_STATUS_INTERNAL_ERROR"}[number]
    sm90 = os.environ.get("FAKE_CUDA_CC", "8.9") >= "9.0"
    rng = np.random.default_rng(26)
    cases = [
        ("tensor", 64, 32, "tensorwise", "one cuBLASLt call",
         "M=4, N=32, K=64, a float8_e4m3fn, b float8_e5m2, result bfloat16, "
         "tensorwise scales (SCALAR_32F)"),
        ("row", 40, 24, "rowwise", "cuBLASLt FP8 product of operands padded "
         "to multiples of 16 + epilogue kernel",
         "M=4, N=32, K=48, a float8_e4m3fn, b float8_e4m3fn, result float32, "
         "unscaled"),
    ]
    if sm90:
        cases += [("row", 64, 32, "rowwise", "one cuBLASLt call",
                   "M=4, N=32, K=64, a float8_e4m3fn, b float8_e4m3fn, "
                   "result bfloat16, rowwise scales (OUTER_VEC_32F)"),
                  ("block", 256, 32, "blockwise", "one cuBLASLt call",
                   "M=4, N=32, K=256, a float8_e4m3fn, b float8_e4m3fn, "
                   "result bfloat16, blockwise scales (VEC128_32F x "
                   "BLK128x128_32F)")]
    else:
        cases += [("row", 64, 32, "rowwise", "cuBLASLt FP8 product + "
                   "epilogue kernel",
                   "M=4, N=32, K=64, a float8_e4m3fn, b float8_e4m3fn, "
                   "result float32, unscaled"),
                  ("block", 256, 32, "blockwise", "float32 product of "
                   "block-scaled operands + epilogue kernel",
                   "M=4, N=32, K=256, a float32, b float32, result float32, "
                   "unscaled")]
    for granularity, k, n, mode, path, problem in cases:
        a, b, scale_a, scale_b = operands(rng, 4, k, n, granularity)
        before = len(log_lines())
        try:
            fp8q.scaled_mm(a.to("cuda"), b.T.to("cuda").T, scale_a, scale_b)
        except fp8q.CudaError as error:
            assert str(error) == (
                f"scaled_mm ({mode} scaling, path: {path}): cublasLtMatmul "
                f"failed with {status} ({number}) on CUDA device 0 "
                f"({problem})"), str(error)
        else:
            raise AssertionError(f"{granularity}: no CudaError")
        made = calls()[before:]
        assert made.count("cublasLtMatmulFailed") == 1, made


def scaled_mm_without_an_algorithm():
    """No algorithm for the FP8 product, nor for the bfloat16 one it falls
    back to: the error names the last."""
    rng = np.random.default_rng(13)
    a, b, scale_a, scale_b = operands(rng, 4, 64, 32, "row")
    expect(fp8q.CudaError, "scaled_mm (rowwise scaling, path: bfloat16 "
           "product of the decoded codes + epilogue kernel): cuBLASLt has no "
           "algorithm for this matrix multiply on CUDA device 0 (M=4, N=32, "
           "K=64, a bfloat16, "
           "b bfloat16, result float32, unscaled)", fp8q.scaled_mm,
           a.to("cuda"), b.T.to("cuda").T, scale_a, scale_b,
           stream=Stream(5))
    # No product ran, but the workspace allocated on stream 5 got its event
    # there, so a product on another stream waits for the allocation.
    lines = log_lines()
    assert "cuEventRecord 5" in lines, lines


def scaled_mm_when_fp8_is_refused():
    """cuBLASLt without an FP8 algorithm: the emulated product instead,
    for the direct and the epilogue paths, with the CPU's results."""
    rng = np.random.default_rng(17)
    for granularity, keywords in (("tensor", {}),
                                  ("row", {"out_dtype": "float32"})):
        a, b, scale_a, scale_b = operands(rng, 4, 64, 32, granularity)
        expected = fp8q.scaled_mm(a, b, scale_a, scale_b, **keywords)
        got = fp8q.scaled_mm(a.to("cuda"), b.T.to("cuda").T, scale_a,
                             scale_b, **keywords)
        assert close(got, expected, keywords.get("out_dtype", "bfloat16"))
    assert matmul_paths() == [("14", "14", "0", "plain")] * 2


def heuristic_sees_the_scales():
    """cuBLASLt's heuristic is asked after the scale pointers are set, so
    the algorithm of a scaled product is chosen for a scaled problem (the
    fake logs the pointers' state at heuristic time last)."""
    rng = np.random.default_rng(18)
    for keywords in ({}, {"out_dtype": "float32"},
                     {"bias": np.ones(32, np.float32)}):
        a, b, scale_a, scale_b = operands(rng, 4, 64, 32, "tensor")
        fp8q.scaled_mm(a.to("cuda"), b.T.to("cuda").T, scale_a, scale_b,
                       **keywords)
    products = matmul_log()
    assert [words[3] for words in products] == ["scaled", "scaled",
                                                "plain"], products
    assert all(words[5] == words[3] for words in products), products


def scaled_mm_when_the_fp8_product_is_refused():
    """The heuristic offers an FP8 algorithm but cublasLtMatmul returns
    NOT_SUPPORTED: a refusal, not an error. The direct product falls back
    to the FP8 sums (refused too), then to the bfloat16 product, with the
    CPU's results. The refusal is remembered: a second call with the same
    operands and out (pointer alignments are part of a plan's key) does not
    try the direct product again."""
    rng = np.random.default_rng(19)
    a, b, scale_a, scale_b = operands(rng, 4, 64, 32, "tensor")
    expected = fp8q.scaled_mm(a, b, scale_a, scale_b)
    ga, gb = a.to("cuda"), b.T.to("cuda").T
    out = fp8q.empty((4, 32), "bfloat16", device="cuda")

    def refusals():
        return [line.split()[1:5] for line in log_lines()
                if line.startswith("cublasLtMatmulRefused ")]

    got = fp8q.scaled_mm(ga, gb, scale_a, scale_b, out=out)
    assert close(got, expected, "bfloat16")
    assert refusals() == [["29", "28", "14", "scaled"],
                          ["29", "28", "0", "plain"]], refusals()
    assert matmul_paths() == [("14", "14", "0", "plain")], matmul_paths()
    got = fp8q.scaled_mm(ga, gb, scale_a, scale_b, out=out)
    assert close(got, expected, "bfloat16")
    assert refusals().count(["29", "28", "14", "scaled"]) == 1, refusals()
    assert matmul_paths() == [("14", "14", "0", "plain")] * 2


def refused_products_are_not_prepared_again():
    """cublasLtMatmul refuses FP8 operands (FAKE_CUBLASLT_REFUSE_FP8_MATMUL):
    the first call tries each FP8 product its path offers (the one call, the
    FP8 sums, or the sums of zero-padded operands, padding them first), then
    runs the bfloat16 product. The refusals are remembered, so a second
    identical call goes straight to the bfloat16 product: no FP8 attempt,
    no pad launch, one scratch acquisition (one cuStreamWaitEvent and one
    cuEventRecord for it, one each for cuBLASLt's workspace), nothing
    allocated, with the CPU's results."""
    rng = np.random.default_rng(25)
    for granularity, k, n, out_dtype, padded in (
            ("tensor", 64, 32, "bfloat16", False),
            ("row", 64, 32, "float8_e4m3fn", False),
            ("row", 40, 24, "bfloat16", True),
            ("tensor", 64, 40, "float32", True)):
        a, b, scale_a, scale_b = operands(rng, 8, k, n, granularity)
        ga, gb = a.to("cuda"), b.T.to("cuda").T
        scales = (scale_a.to("cuda"), scale_b.to("cuda"))
        keywords = {}
        if out_dtype == "float8_e4m3fn":
            keywords = {"scale_result": fp8q.asarray(np.float32(0.5),
                                                     device="cuda"),
                        "amax_out": fp8q.zeros(1, device="cuda")}
        out = fp8q.empty((8, n), out_dtype, device="cuda")
        case = (granularity, k, n, out_dtype)
        before = len(log_lines())
        fp8q.scaled_mm(ga, gb, *scales, out=out, **keywords)
        made = calls()[before:]
        assert ("fp8q_pad" in made) == padded, (case, made)
        assert "cublasLtMatmulRefused" in made, (case, made)
        before = len(log_lines())
        fp8q.scaled_mm(ga, gb, *scales, out=out, **keywords)
        made = calls()[before:]
        assert "fp8q_pad" not in made, (case, made)
        assert "cublasLtMatmulRefused" not in made, (case, made)
        assert made.count("cublasLtMatmul") == 1, (case, made)
        assert tuple(matmul_log()[-1][:3]) == ("14", "14", "0"), case
        assert made.count("cuStreamWaitEvent") == 2, (case, made)
        assert made.count("cuEventRecord") == 2, (case, made)
        assert not [name for name in made
                    if name.startswith(("cuMemAlloc", "cuMemFree"))], made
        host_keywords = {"scale_result": np.float32(0.5)} if keywords else {}
        expected = fp8q.scaled_mm(a, b, scale_a, scale_b,
                                  out_dtype=out_dtype, **host_keywords)
        assert close(out, expected, out_dtype), case


def one_call_log():
    """The fake's cuBLASLt products as (A, B, D types, scale modes, bias
    type, D scale, amax)."""
    return [tuple(words[:3]) + tuple(words[6:]) for words in matmul_log()]


def scaled_mm_in_one_call():
    """On sm_90 with cuBLASLt 12.9+ (FAKE_CUDA_CC=9.0), every scaling mode,
    a bias of the type cuBLASLt takes for out_dtype, an FP8 result's scale
    and amax are one cuBLASLt product, with the CPU's results. Block scales
    are handed over in cuBLASLt's layouts (docs/scaled_mm.md)."""
    import ml_dtypes
    rng = np.random.default_rng(21)
    modes = {"tensor": "0,0", "row": "3,3", "block": "5,4"}
    lt_types = {"bfloat16": "14", "float16": "2", "float32": "0",
                "float8_e4m3fn": "28"}
    bias_types = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
    m, n = 5, 160
    # K = 384: block scales of b padded from 3 to 4 per row (L4).
    for granularity, k in (("tensor", 512), ("row", 512), ("block", 512),
                           ("block", 384), ("block", 128)):
        a, b, scale_a, scale_b = operands(rng, m, k, n, granularity)
        ga, gb = a.to("cuda"), b.T.to("cuda").T
        for out_dtype, bias_dtype in (("bfloat16", None),
                                      ("bfloat16", "bfloat16"),
                                      ("float16", "float16"),
                                      ("float32", "bfloat16"),
                                      ("float8_e4m3fn", "float16"),
                                      ("float8_e4m3fn", None)):
            keywords = dict(out_dtype=out_dtype)
            if bias_dtype is not None:
                keywords["bias"] = rng.standard_normal(n).astype(
                    bias_types[bias_dtype])
            fp8_out = out_dtype == "float8_e4m3fn"
            if fp8_out:
                keywords["scale_result"] = 0.25
            host_amax = np.zeros(1, np.float32)
            expected = fp8q.scaled_mm(
                a, b, scale_a, scale_b,
                **keywords, **({"amax_out": host_amax} if fp8_out else {}))
            for scales in ((scale_a, scale_b),
                           (scale_a.to("cuda"), scale_b.to("cuda"))):
                amax = fp8q.zeros(1, device="cuda")
                before = len(matmul_log())
                got = fp8q.scaled_mm(
                    ga, gb, *scales, **keywords,
                    **({"amax_out": amax} if fp8_out else {}))
                assert close(got, expected, out_dtype), (
                    granularity, out_dtype, bias_dtype)
                taken = one_call_log()[before:]
                expected_path = (
                    "29" if granularity == "tensor" else "28", "28",
                    lt_types[out_dtype], modes[granularity],
                    lt_types[bias_dtype] if bias_dtype else "-",
                    "dscale" if fp8_out else "-",
                    "amax" if fp8_out else "-")
                assert taken == [expected_path], (taken, expected_path)
                if fp8_out:
                    got_amax = float(amax.cpu().numpy()[0])
                    assert abs(got_amax - host_amax[0]) <= 1e-5 * host_amax[0]
                    # D's scale computed on the GPU from a GPU scale_result
                    # rounds as the host's 1 / scale_result does.
                    for scale_result in (0.3, 0.25):
                        on_host = fp8q.scaled_mm(
                            ga, gb, *scales,
                            **dict(keywords, scale_result=scale_result))
                        on_gpu = fp8q.scaled_mm(
                            ga, gb, *scales,
                            **dict(keywords, scale_result=fp8q.asarray(
                                np.float32(scale_result), device="cuda")))
                        assert same_bits(on_gpu.cpu().numpy(),
                                         on_host.cpu().numpy()), scale_result
    seen = fp8q.info()["cublaslt"]["scale_modes"]
    assert seen == {"0": {"accepted": ["tensorwise", "rowwise", "blockwise"],
                          "refused": []}}, seen


def scaled_mm_scale_modes_fall_back():
    """Rowwise and blockwise products where cuBLASLt lacks or refuses the
    scale modes (older cuBLASLt, refusal, or block scales it cannot read):
    the FP8 product + epilogue kernel (rowwise) or the float32 product of
    block-scaled operands, with the CPU's results."""
    rng = np.random.default_rng(22)
    for granularity, k, path in (("row", 64, ("28", "28", "0", "0,0")),
                                 ("block", 512, ("0", "0", "0", "0,0")),
                                 ("block", 384, ("0", "0", "0", "0,0"))):
        a, b, scale_a, scale_b = operands(rng, 4, k, 32, granularity)
        expected = fp8q.scaled_mm(a, b, scale_a, scale_b)
        before = len(matmul_log())
        got = fp8q.scaled_mm(a.to("cuda"), b.T.to("cuda").T, scale_a,
                             scale_b)
        assert close(got, expected, "bfloat16")
        taken = [words[:3] + (words[3],) for words in one_call_log()[before:]]
        # A refused one-call product is never logged as run.
        assert taken == [path], (granularity, k, taken)
    seen = fp8q._C._cublaslt_info()["scale_modes"]["0"]
    refused = (["rowwise", "blockwise"]
               if os.environ.get("FAKE_CUBLASLT_REFUSE_SCALE_MODES") else [])
    assert seen == {"accepted": ["unscaled"], "refused": refused}, seen


def cached_plan_allocates_nothing():
    """A product whose plan is cached, with its operands, scales, bias,
    scale_result and out on the GPU, allocates nothing, copies nothing and
    never synchronizes (so torch.cuda.graph can capture it): the second of
    two identical products makes only launches, fills, cuBLASLt calls and
    stream-ordering calls. Its temporaries (D's scale, block scales in
    cuBLASLt's layouts, the epilogue paths' float32 product) live in the
    device's reused scratch memory. One cuBLASLt call on sm_90 for every
    mode, an FP8 result with its D scale computed on the GPU from a GPU
    scale_result, the FP8 product + epilogue kernel (a float32 bias), the
    same of zero-padded operands (K or N not multiples of 16; with a
    float16 bias, converted to float32 there too), and the exact paths'
    decoded operands (blockwise float32 on sm_89; bfloat16 everywhere on
    sm_86)."""
    rng = np.random.default_rng(23)
    sm90 = os.environ.get("FAKE_CUDA_CC", "8.9") >= "9.0"
    cases = [("tensor", 64, "bfloat16", {}),
             ("tensor", 64, "float8_e4m3fn", {"scale_result": 0.3}),
             ("row", 64, "bfloat16", {"bias": np.float32}),
             ("row", 64, "float8_e4m3fn", {"scale_result": 0.3}),
             ("row", 40, "bfloat16", {}),
             ("tensor", 64, "float8_e4m3fn", {"scale_result": 0.3, "n": 40}),
             ("row", 64, "bfloat16", {"bias": np.float16, "n": 40}),
             ("row", 4, "float32", {})]
    if sm90:
        cases += [("row", 64, "float8_e4m3fn", {"scale_result": 0.3,
                                                 "bias": np.float16}),
                  ("block", 640, "float8_e4m3fn", {"scale_result": 0.3})]
    cases += [("block", 384, "bfloat16", {})]
    for granularity, k, out_dtype, extras in cases:
        n = extras.get("n", 32)
        a, b, scale_a, scale_b = operands(rng, 8, k, n, granularity)
        ga, gb = a.to("cuda"), b.T.to("cuda").T
        keywords = {}
        if "bias" in extras:
            keywords["bias"] = fp8q.asarray(
                rng.standard_normal(n).astype(extras["bias"]),
                device="cuda")
        if "scale_result" in extras:
            keywords["scale_result"] = fp8q.asarray(
                np.float32(extras["scale_result"]), device="cuda")
            keywords["amax_out"] = fp8q.zeros(1, device="cuda")
        scales = (scale_a.to("cuda"), scale_b.to("cuda"))
        out = fp8q.empty((8, n), out_dtype, device="cuda")
        fp8q.scaled_mm(ga, gb, *scales, out=out, **keywords)
        before = len(log_lines())
        fp8q.scaled_mm(ga, gb, *scales, out=out, **keywords)
        made = calls()[before:]
        assert made.count("cublasLtMatmul") == 1, made
        forbidden = [name for name in made
                     if name.startswith(("cuMemAlloc", "cuMemFree",
                                         "cuMemcpy", "cuStreamSynchronize",
                                         "cuCtxSynchronize",
                                         "cuEventSynchronize"))]
        assert forbidden == [], (granularity, k, out_dtype, extras, made)
        host_keywords = {key: value for key, value in keywords.items()
                         if key != "amax_out"}
        for key in ("bias", "scale_result"):
            if key in host_keywords:
                host_keywords[key] = host_keywords[key].cpu()
        expected = fp8q.scaled_mm(a, b, scale_a, scale_b,
                                  out_dtype=out_dtype, **host_keywords)
        assert close(out, expected, out_dtype), (granularity, k, out_dtype)


def scratch_memory_is_freed_on_request():
    """fp8q.empty_cache() frees the device's reused scratch block in stream
    order after its last use (the default stream waits for the block's
    event, then frees it), without synchronizing; the next product
    allocates a new one. Then a product is left for the exit to free: the
    number of log lines so far is printed (JSON) for the test to read the
    rest of the log after the interpreter's exit."""
    import json
    rng = np.random.default_rng(25)
    a, b, scale_a, scale_b = operands(rng, 4, 40, 24, "row")
    ga, gb = a.to("cuda"), b.T.to("cuda").T
    scales = (scale_a.to("cuda"), scale_b.to("cuda"))
    out = fp8q.empty((4, 24), "bfloat16", device="cuda")
    fp8q.scaled_mm(ga, gb, *scales, out=out)
    before = len(log_lines())
    fp8q.empty_cache()
    made = calls()[before:]
    # (Each step first asks whether the legacy stream can be used: it
    # cannot while a blocking stream captures a CUDA graph.)
    assert made == ["cuCtxPushCurrent", "cuStreamGetCaptureInfo",
                    "cuCtxPopCurrent", "cuCtxPushCurrent", "cuStreamWaitEvent",
                    "cuCtxPopCurrent", "cuCtxPushCurrent",
                    "cuStreamGetCaptureInfo", "cuCtxPopCurrent",
                    "cuCtxPushCurrent", "cuMemFreeAsync",
                    "cuCtxPopCurrent"], made
    before = len(log_lines())
    fp8q.empty_cache("cuda:0")
    fp8q.empty_cache(device="cpu")
    assert calls()[before:] == [], calls()[before:]
    fp8q.scaled_mm(ga, gb, *scales, out=out)
    assert "cuMemAllocAsync" in calls()[before:], calls()[before:]
    print(json.dumps(len(log_lines())))


def cublaslt_search_order():
    """Prints, as JSON, the places the failed cuBLASLt search tried, in
    order, or null when a real cuBLASLt was found (a machine with NVIDIA's
    libraries installed: the search stops there)."""
    import json
    info = fp8q._C._cublaslt_info()
    print(json.dumps(None if info["found"] else [
        line.split(" (")[0] for line in info["search"]]))


def scaled_mm_without_cublaslt():
    rng = np.random.default_rng(14)
    a, b, scale_a, scale_b = operands(rng, 4, 64, 32, "row")
    expect(fp8q.CudaError, "cuBLASLt not found: tried /nonexistent/"
           "libcublasLt.so.13", fp8q.scaled_mm, a.to("cuda"),
           b.T.to("cuda").T, scale_a, scale_b)


def calibrators_take_gpu_batches():
    rng = np.random.default_rng(16)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    for calibrator in (fp8q.calib.MaxCalibrator(),
                       fp8q.calib.HistogramCalibrator()):
        on_host = type(calibrator)()
        calibrator.update(fp8q.asarray(x, device="cuda"))
        on_host.update(x)
        assert calibrator.amax == on_host.amax


def calibrator_reconfigured_while_reducing_on_the_gpu():
    """__init__ with other settings (bins, skip_zeros) and reset() from one
    thread while six others update with a CUDA batch, reduced and ordered
    with the GIL released: a batch is folded in only under the settings it
    was reduced for and into the device state it ordered (dropped, ordered
    before the wipe, when a reset or __init__ overtook it; never started
    again for that, so the updates finish while the other thread keeps
    reconfiguring), so no update fails, hangs or crashes and the final
    counts are a whole number of copies of the batch's CPU histogram under
    the last settings."""
    import threading
    x = (np.random.default_rng(31).standard_normal((8, 512)) *
         3).astype(np.float32)
    data = fp8q.asarray(x).to("cuda")
    calibrator = fp8q.calib.HistogramCalibrator(bins=64)
    settings = [(64, False), (4096, True), (1, False), (2048, False)]
    finished, last, errors = [], [], []
    changing = threading.Event()

    def reconfigure():
        step = 0
        while len(finished) < 6:
            last[:] = settings[step % len(settings)]
            calibrator.__init__(*last)
            changing.set()
            calibrator.reset()
            step += 1

    def update():
        changing.wait()
        try:
            for _ in range(60):
                calibrator.update(data)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            finished.append(1)

    threads = [threading.Thread(target=reconfigure)] + [
        threading.Thread(target=update) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    on_host = fp8q.calib.HistogramCalibrator(*last)
    on_host.update(x)
    copies, rest = divmod(calibrator.total_count, on_host.total_count)
    assert rest == 0 and calibrator.bins == last[0], (copies, rest, last)
    assert np.array_equal(np.asarray(calibrator.counts),
                          copies * np.asarray(on_host.counts)), (copies, last)


def calibrator_reconfigured_while_an_old_state_is_read_back():
    """An update on cuda:1 first reads back the state pending on cuda:0
    (the GIL released, the copy slowed by FAKE_CUDA_READ_DELAY_MS); an
    __init__ with four times the bins from another thread meanwhile wipes
    the calibrator, so the update, sized and reduced for the old settings,
    is dropped (ordered before the wipe): nothing is folded into a state of
    the wrong size, and the calibrator holds no count afterwards."""
    import threading
    x = (np.random.default_rng(33).standard_normal((8, 512)) *
         3).astype(np.float32)
    calibrator = fp8q.calib.HistogramCalibrator(bins=2048)
    calibrator.update(fp8q.asarray(x).to("cuda:0"))
    on_second = fp8q.asarray(x).to("cuda:1")
    errors = []

    def update():
        try:
            calibrator.update(on_second)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    copies = calls().count("cuMemcpyAsync")
    updating = threading.Thread(target=update)
    updating.start()
    # The copy back is logged before it sleeps: wait for it, so that the
    # __init__ lands inside the read-back (not before the update or while
    # it reduces, which other rules order).
    waited = 0.0
    while calls().count("cuMemcpyAsync") == copies:
        assert waited < 60.0 and updating.is_alive(), "no read-back seen"
        time.sleep(0.005)
        waited += 0.005
    calibrator.__init__(bins=8192)
    assert updating.is_alive(), "the update ended before the __init__"
    updating.join()
    assert not errors, errors
    assert calibrator.bins == 8192
    assert calibrator.total_count == 0, calibrator.total_count
    assert not np.asarray(calibrator.counts).any()


def loaded_calibrator_takes_another_channel_count_on_the_gpu():
    """load_state_dict of an empty per-channel state forgets the device
    state of the old channel count with the rest: the next CUDA batch may
    have any channel count, as on the CPU."""
    calibrator = fp8q.calib.MaxCalibrator(channel_axis=0)
    calibrator.update(fp8q.asarray(np.ones((8, 4), np.float32)).to("cuda"))
    calibrator.load_state_dict(
        fp8q.calib.MaxCalibrator(channel_axis=0).state_dict())
    calibrator.update(fp8q.asarray(np.full((3, 4), 2.0, np.float32))
                      .to("cuda"))
    assert np.array_equal(np.asarray(calibrator.amax),
                          np.full(3, 2.0, np.float32))


def max_calibrator_reduces_on_the_gpu():
    """A CUDA batch's amax (per tensor or per channel, finite values only,
    non-finite ones counted) comes from the finite-amax kernel; the state
    and every result equal the CPU calibrator's. A batch with NaN/inf is
    refused on the device and the next read raises."""
    rng = np.random.default_rng(24)
    for channel_axis in (None, 0, -1, 1):
        for source in ("float32", "bfloat16", "float16", "e4m3"):
            on_gpu = fp8q.calib.MaxCalibrator(channel_axis=channel_axis)
            on_host = fp8q.calib.MaxCalibrator(channel_axis=channel_axis)
            for batch in range(3):
                x = (rng.standard_normal((6, 5, 33)) * 4).astype(np.float32)
                if batch == 1:  # non-finite values: refused, then skipped
                    x[2, 1, 7] = np.nan
                    x[4, :, 3] = -np.inf
                    x[0, 0, :] = np.nan
                data = fp8q.asarray(x, dtype=source)
                before = len(log_lines())
                if batch == 1:
                    on_gpu.update(data.to("cuda"))
                    expect(ValueError, "x: update 2 (a batch on cuda:0) "
                           "held ", getattr, on_gpu, "amax")
                on_gpu.update(data.to("cuda"), skip_nonfinite=batch == 1)
                on_host.update(data, skip_nonfinite=batch == 1)
                assert "fp8q_amax_finite_rows" in log_lines()[before:]
                key = (channel_axis, source, batch)
                assert same_bits(np.asarray(on_gpu.amax, np.float32),
                                 np.asarray(on_host.amax, np.float32)), key
                assert on_gpu.nonfinite_count == on_host.nonfinite_count, key
    before = len(log_lines())
    empty = fp8q.calib.MaxCalibrator()
    empty.update(fp8q.zeros((0, 3), device="cuda"))
    assert "fp8q_amax_finite_rows" not in log_lines()[before:]
    assert empty.nonfinite_count == 0
    # Only NaN, skipped: counted, nothing recorded, as on the CPU.
    only_nan = fp8q.calib.MaxCalibrator(channel_axis=0)
    only_nan.update(fp8q.asarray(np.full((3, 4), np.nan, np.float32),
                                 device="cuda"), skip_nonfinite=True)
    assert only_nan.amax is None and only_nan.nonfinite_count == 12
    assert only_nan.state_dict()["amax_history"].shape == (0, 0)


def calibration_batches(rng, count, shape=(7, 64)):
    """float32 batches with zeros, subnormals, values spanning many
    exponents (the range growing from batch to batch), NaN and inf."""
    batches = []
    for index in range(count):
        x = rng.standard_normal(shape).astype(np.float32)
        x *= np.float32(2.0) ** rng.integers(-30, 3 * index + 1, size=shape)
        flat = x.reshape(-1)
        flat[rng.integers(0, flat.size, 9)] = 0.0
        flat[rng.integers(0, flat.size, 3)] = np.float32(3e-42)
        flat[rng.integers(0, flat.size, 2)] = -np.float32(1e-45)
        batches.append(x)
    return batches


def device_calls(made):
    """The calls among `made` that copy, wait or allocate."""
    return [name for name in made
            if name.startswith(("cuMemAlloc", "cuMemFree", "cuMemcpy",
                                "cuStreamSynchronize", "cuCtxSynchronize",
                                "cuEventSynchronize"))]


def calibrators_keep_their_state_on_the_gpu():
    """N CUDA updates (after a first, which allocates the state) copy
    nothing back, never wait and allocate nothing: the state and the
    batch's temporaries stay on the GPU (the scratch memory reused). The
    first read settles the state with one copy back."""
    rng = np.random.default_rng(31)
    batches = [fp8q.asarray(x, device="cuda")
               for x in calibration_batches(rng, 5)]
    for make in (fp8q.calib.MaxCalibrator,
                 lambda: fp8q.calib.MaxCalibrator(channel_axis=0),
                 lambda: fp8q.calib.MaxCalibrator(history_len=3),
                 lambda: fp8q.calib.MaxCalibrator(channel_axis=0,
                                                  history_len=16,
                                                  algo="most_recent"),
                 lambda: fp8q.calib.MaxCalibrator(momentum=0.9),
                 lambda: fp8q.calib.MaxCalibrator(channel_axis=0,
                                                  momentum=0.99),
                 fp8q.calib.HistogramCalibrator):
        calibrator = make()
        calibrator.update(batches[0])
        before = len(log_lines())
        for batch in batches[1:]:
            calibrator.update(batch)
        made = calls()[before:]
        assert device_calls(made) == [], made
        assert made.count("fp8q_amax_finite_rows") == 4, made
        before = len(log_lines())
        calibrator.nonfinite_count
        assert calls()[before:].count("cuMemcpyAsync") == 1
        assert calls()[before:].count("cuStreamSynchronize") == 1
        before = len(log_lines())
        calibrator.nonfinite_count  # settled: nothing to bring back
        assert device_calls(calls()[before:]) == []


def max_calibrator_history_on_the_gpu_matches_the_cpu():
    """A window (history_len 1, 3, 16; algo max and most_recent) or a
    moving average (momentum 0.9, 0.99), per tensor and per channel, kept on
    the device over many batches: after every read the history equals the
    CPU calibrator's bit for bit, with a refused NaN batch (which pushes
    nothing) and CPU batches interleaved between the GPU ones."""
    seed = int(np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    batches = calibration_batches(rng, 24, shape=(5, 12))
    settings = [dict(history_len=n, algo=algo) for n in (1, 3, 16)
                for algo in ("max", "most_recent")]
    settings += [dict(momentum=m) for m in (0.9, 0.99)]
    for options in settings:
        for channel_axis in (None, 1):
            key = (seed, options, channel_axis)
            on_gpu = fp8q.calib.MaxCalibrator(channel_axis=channel_axis,
                                              **options)
            on_host = fp8q.calib.MaxCalibrator(channel_axis=channel_axis,
                                               **options)
            for index, x in enumerate(batches):
                if index == 9:  # refused on the device, raises at the read
                    poisoned = x.copy()
                    poisoned[0, 0] = np.nan
                    on_gpu.update(fp8q.asarray(poisoned, device="cuda"))
                if index % 7 == 4:
                    on_gpu.update(x)  # a CPU batch between GPU batches
                else:
                    on_gpu.update(fp8q.asarray(x, device="cuda"))
                on_host.update(x)
                if index % 5 == 2 or index == 9:
                    try:
                        state = on_gpu.state_dict()
                    except ValueError as error:
                        assert index == 9 and "update %d " % (index + 1) in \
                            str(error), (key, str(error))
                        state = on_gpu.state_dict()
                    else:
                        assert index != 9, key
                    expected = on_host.state_dict()
                    assert same_bits(state["amax_history"],
                                     expected["amax_history"]), (key, index)
            assert same_bits(np.asarray(on_gpu.amax, np.float32),
                             np.asarray(on_host.amax, np.float32)), key
            assert repr(on_gpu) == repr(on_host), key
    # A moving average's first batch is taken as is, also with no host
    # entry yet; skipped NaN/inf are counted.
    on_gpu = fp8q.calib.MaxCalibrator(momentum=0.5)
    x = np.float32([[1.0, np.nan], [-3.0, np.inf]])
    on_gpu.update(fp8q.asarray(x, device="cuda"), skip_nonfinite=True)
    assert on_gpu.amax == 3.0 and on_gpu.nonfinite_count == 2


def compare_histograms(on_gpu, on_host, key):
    assert np.array_equal(on_gpu.counts, on_host.counts), key
    assert on_gpu.bin_width == on_host.bin_width, key
    assert on_gpu.amax == on_host.amax, key
    assert on_gpu.total_count == on_host.total_count, key
    assert on_gpu.nonfinite_count == on_host.nonfinite_count, key


def histogram_calibrator_counts_on_the_gpu():
    """Counts bit-identical to the CPU calibrator's over batches growing the
    range, with zeros, subnormals, NaN/inf (skipped), fp32/fp16/bf16 and
    strided views, with and without skip_zeros, for bin counts held in
    shared memory or not (kernels/calibrate.cuh)."""
    seed = int(np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    for bins in (2048, 1, 100, 4096):
        for skip_zeros in (False, True):
            for source in ("float32", "float16", "bfloat16"):
                on_gpu = fp8q.calib.HistogramCalibrator(bins, skip_zeros)
                on_host = fp8q.calib.HistogramCalibrator(bins, skip_zeros)
                for index, x in enumerate(calibration_batches(rng, 4)):
                    if index == 2:
                        x[1, 3] = np.nan
                        x[4, 0] = -np.inf
                    data = fp8q.asarray(x, dtype=source)
                    view = data.T if index % 2 else data
                    before = len(log_lines())
                    on_gpu.update(view.to("cuda") if index % 2 else
                                  data.to("cuda").T, skip_nonfinite=True)
                    on_host.update(data.T, skip_nonfinite=True)
                    assert "fp8q_histogram_count" in log_lines()[before:]
                    compare_histograms(on_gpu, on_host,
                                       (seed, bins, skip_zeros, source,
                                        index))
                for method in ("percentile", "entropy", "mse"):
                    assert on_gpu.compute_amax(method) == \
                        on_host.compute_amax(method), (seed, method)
    # Only zeros, then a range; an empty batch records nothing.
    on_gpu = fp8q.calib.HistogramCalibrator()
    on_host = fp8q.calib.HistogramCalibrator()
    for x in (np.zeros(10, np.float32), np.zeros((0, 4), np.float32),
              np.float32([0.5, 0.0, 3.0])):
        on_gpu.update(fp8q.asarray(x, device="cuda"))
        on_host.update(x)
        compare_histograms(on_gpu, on_host, x.shape)


def deferred_nonfinite_error():
    """Batch 3 of 5 holds a NaN: its update returns, and the next read of
    the state raises naming update 3, its count and how many batches were
    refused, with the skip_nonfinite hint; the state keeps batches 1, 2, 4
    and 5, as the CPU's, and the error is raised once."""
    rng = np.random.default_rng(32)
    batches = calibration_batches(rng, 5)
    batches[2][0, :2] = np.nan
    batches[3][1, 1] = np.inf
    for make, read in ((fp8q.calib.MaxCalibrator, "amax"),
                       (lambda: fp8q.calib.MaxCalibrator(channel_axis=1),
                        "state_dict"),
                       (fp8q.calib.HistogramCalibrator, "counts")):
        on_gpu, on_host = make(), make()
        for index, x in enumerate(batches):
            on_gpu.update(fp8q.asarray(x, device="cuda"))
            if index not in (2, 3):
                on_host.update(x)
        try:
            value = getattr(on_gpu, read)
            if callable(value):
                value()
        except ValueError as error:
            message = str(error)
        else:
            raise AssertionError("no deferred error")
        assert message == (
            "x: update 3 (a batch on cuda:0) held 2 NaN or infinite values "
            "and was not recorded; 2 batches were refused for NaN/inf since "
            "the state was last read, every other batch is recorded (pass "
            "skip_nonfinite=True to skip and count them)"), \
            message
        assert same_bits(np.asarray(on_gpu.state_dict()[
            "amax_history" if "amax_history" in on_gpu.state_dict()
            else "counts"]), np.asarray(on_host.state_dict()[
                "amax_history" if "amax_history" in on_host.state_dict()
                else "counts"]))
        assert repr(on_gpu) == repr(on_host)


def device_state_is_settled_by_every_reader():
    """A CPU batch, merge, state_dict / load_state_dict, copy.deepcopy,
    extend_range and reset see (or drop) what the device holds; the results equal the CPU
    calibrator's for the same batches."""
    rng = np.random.default_rng(33)
    a, b, c = calibration_batches(rng, 3)
    for make in (fp8q.calib.MaxCalibrator,
                 lambda: fp8q.calib.MaxCalibrator(channel_axis=0),
                 fp8q.calib.HistogramCalibrator):
        on_gpu, on_host = make(), make()
        on_gpu.update(fp8q.asarray(a, device="cuda"))
        on_gpu.update(b)  # a CPU batch settles first
        on_gpu.update(fp8q.asarray(c, device="cuda"))
        for x in (a, b, c):
            on_host.update(x)
        state = on_gpu.state_dict()
        expected = on_host.state_dict()
        assert state.keys() == expected.keys()
        for key in state:
            assert same_bits(np.asarray(state[key]),
                             np.asarray(expected[key])), key
        # A copy of a calibrator holding a device state has its statistics.
        pending = make()
        pending.update(fp8q.asarray(a, device="cuda"))
        twin, single = copy.deepcopy(pending), make()
        single.update(a)
        assert repr(twin) == repr(single) == repr(pending)
        # Round trip, then merge of a calibrator holding a device state.
        loaded = make()
        loaded.update(fp8q.asarray(c, device="cuda"))
        loaded.load_state_dict(state)
        assert repr(loaded) == repr(on_host)
        other, other_host = make(), make()
        other.update(fp8q.asarray(a * 8, device="cuda"))
        other_host.update(a * 8)
        merged, merged_host = make(), make()
        merged.update(fp8q.asarray(b, device="cuda"))
        merged_host.update(b)
        merged.merge(other)
        merged_host.merge(other_host)
        assert repr(merged) == repr(merged_host)
        assert repr(other) == repr(other_host)
        # reset drops the device state and its record.
        dropped = make()
        dropped.update(fp8q.asarray(np.float32([np.nan, 1.0]),
                                    device="cuda"))
        dropped.reset()
        assert dropped.nonfinite_count == 0 and dropped.amax is None
    histogram = fp8q.calib.HistogramCalibrator()
    histogram.update(fp8q.asarray(a, device="cuda"))
    histogram.extend_range(1e6)
    expected = fp8q.calib.HistogramCalibrator()
    expected.update(a)
    expected.extend_range(1e6)
    assert np.array_equal(histogram.counts, expected.counts)
    assert histogram.bin_width == expected.bin_width


def calibrate_names_the_layer_of_a_refused_gpu_batch():
    """fp8q.torch.calibrate reads each layer's statistics when its block
    ends: a CUDA batch refused on the GPU raises there, naming the layer.
    (torch here has no CUDA: the CUDA batch is an fp8q tensor given to the
    layer's calibrator inside the block, as the forward hook would; the
    test that runs this skips without torch.)"""
    import torch
    import fp8q.torch as fpt
    torch.manual_seed(0)
    model = fpt.quantize(torch.nn.Sequential(torch.nn.Linear(32, 16)),
                         activations="e4m3")
    poisoned = np.ones((2, 32), np.float32)
    poisoned[1, 3] = np.nan
    try:
        with fpt.calibrate(model):
            with torch.no_grad():
                model(torch.ones(2, 32))
            model[0]._calibration[0].update(
                fp8q.asarray(poisoned, device="cuda"))
    except ValueError as error:
        message = str(error)
    else:
        raise AssertionError("no error at the end of calibrate")
    assert message.startswith("calibrate: the input of layer '0': x: update "
                              "2 (a batch on cuda:0) held 1 NaN"), message
    # The hint is one calibrate() takes too (skip_nonfinite=True), and the
    # incomplete statistics are not left on the layer for freeze() to use.
    assert message.endswith("(pass skip_nonfinite=True to skip and count "
                            "them)"), message
    assert not hasattr(model[0], "_calibration")


# --------------------------------------------------------------------------
# DLPack# --------------------------------------------------------------------------
# DLPack


class CudaProducer:
    """A DLPack producer of CUDA memory (an fp8q CUDA tensor underneath)
    that records the keywords it was called with."""

    def __init__(self, tensor):
        self.tensor = tensor
        self.calls = []

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, **keywords):
        self.calls.append(keywords)
        return self.tensor.__dlpack__(**keywords)


def dlpack_on_cuda():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = fp8q.asarray(x, device="cuda")
    assert t.__dlpack_device__() == (2, 0)
    shared = fp8q.from_dlpack(t)
    assert shared.device == "cuda:0" and shared.data_ptr == t.data_ptr
    producer = CudaProducer(t)
    imported = fp8q.from_dlpack(producer)
    assert producer.calls == [{"max_version": (1, 1), "stream": 1}]
    assert imported.data_ptr == t.data_ptr
    fp8q.from_dlpack(producer, stream=Stream(11))
    assert producer.calls[-1]["stream"] == 11
    assert same_bits(imported.cpu().numpy(), x)
    # Producer side: the consumer's stream waits for the tensor's last use.
    before = len(log_lines())
    t.__dlpack__(stream=12)
    lines = log_lines()[before:]
    assert "cuStreamWaitEvent 12" in lines
    before = len(log_lines())
    t.__dlpack__(stream=-1)
    assert log_lines()[before:] == []
    for bad, exception in ((0, ValueError), ("s", TypeError)):
        try:
            t.__dlpack__(stream=bad)
        except exception as error:
            assert str(error).startswith("stream: ")
        else:
            raise AssertionError(f"stream={bad!r} accepted")
    # Cross-device export only as a copy.
    host = fp8q.from_dlpack(t.__dlpack__(dl_device=(1, 0), copy=True))
    assert host.device == "cpu" and same_bits(host.numpy(), x)
    try:
        t.__dlpack__(dl_device=(1, 0))
    except BufferError as error:
        assert "only as a copy" in str(error)
    else:
        raise AssertionError("moved without copy=True")


# --------------------------------------------------------------------------
# Errors


def expect(exception, start, function, *args, **keywords):
    try:
        function(*args, **keywords)
    except exception as error:
        assert str(error).startswith(start), (str(error), start)
    else:
        raise AssertionError(f"{function.__name__} did not raise")


def errors_are_clear():
    t = fp8q.zeros((4, 6), device="cuda")
    w = fp8q.quantize(np.ones((8, 6), np.float32))
    expect(ValueError, "linear: x is on cuda:0 but w is on cpu; move one of "
           "them (.to(device)) so both are on the same device", fp8q.linear,
           t, w)
    expect(ValueError, "cast: out= on CUDA must be C-contiguous, got "
           "strides (1, 4)", fp8q.cast, t, "e4m3",
           out=fp8q.empty((6, 4), "e4m3", device="cuda").T)
    expect(ValueError, "cast: on CUDA, scale= must be one value, one per row",
           fp8q.cast, fp8q.zeros((2, 3, 4), device="cuda"), "e4m3",
           scale=np.ones((3, 4), np.float32))
    expect(ValueError, "cast: out= must be on the inputs' device, cuda:0; "
           "got a tensor on cpu", fp8q.cast, t, "e4m3",
           out=fp8q.empty((4, 6), "e4m3"))
    expect(TypeError, "the tensor is on cuda:0, and a NumPy array needs its "
           "values in host memory", t.numpy)
    expect(BufferError, "fp8q.Tensor: only CPU tensors", memoryview, t)
    expect(ValueError, "device: expected 'cpu', 'cuda', 'cuda:N'",
           fp8q.empty, 2, device="cuda:x")
    expect(ValueError, "device: a CUDA device index must be >= 0",
           fp8q.empty, 2, device=-1)
    expect(TypeError, "stream: expected None, an int stream handle",
           fp8q.empty, 2, device="cuda", stream="default")
    expect(ValueError, "stream: the int is not a stream handle",
           fp8q.empty, 2, device="cuda", stream=-5)
    expect(fp8q.CudaError, "CUDA device 3 does not exist (this process sees "
           "1: 0 to 0)", fp8q.empty, 2, device="cuda:3")
    expect(ValueError, "Unable to avoid copy while moving obj from cpu",
           fp8q.asarray, np.zeros(2, np.float32), device="cuda", copy=False)


def no_driver():
    expect(fp8q.CudaError, "no CUDA driver found: tried /nonexistent/libcuda",
           fp8q.empty, 2, device="cuda")
    # The CPU keeps working.
    assert fp8q.cast(np.ones(2, np.float32), "e4m3").device == "cpu"

