"""Scenarios of the kernels' launches on the fake CUDA driver, each run in a
fresh interpreter by tests/test_cuda_kernel_launches.py: every kernel's
grid grows with its input (a reduction launched on one block passed every
correctness test and ran 600x below memory speed on an H100), and the
weight-only product (kernels/gemv.cuh) computes what its contract says.
The fake device has 4 multiprocessors and, by default, room for 8 blocks
of 256 threads on each: 32 blocks fill it.
"""
import os

import ml_dtypes
import numpy as np

import fp8q
from fp8q import _C
from fake_gpu_scenarios import calls
from helpers import FP8_NAMES

FULL_DEVICE = 32


def launches(action):
    """The (kernel, grid, block) launches `action()` makes (grid: the
    grid's x dimension)."""
    return [launch[:3] for launch in grid_launches(action)]


def grid_launches(action):
    """The (kernel, grid x, block, grid y) launches `action()` makes: the
    fake driver logs "NAME GRID BLOCK", and " GRID_Y" past a grid y of 1."""
    path = os.environ["FAKE_CUDA_LAUNCH_LOG"]
    with open(path, "a", encoding="utf-8"):
        pass
    with open(path, encoding="utf-8") as log:
        before = len(log.readlines())
    action()
    with open(path, encoding="utf-8") as log:
        lines = log.readlines()[before:]
    return [(fields[0], int(fields[1]), int(fields[2]),
             int(fields[3]) if len(fields) > 3 else 1)
            for fields in (line.split() for line in lines)]


def grid_of(kernel, action):
    """The largest grid of `kernel` among action's launches."""
    grids = [grid for name, grid, _ in launches(action) if name == kernel]
    assert grids, f"{kernel} was not launched"
    return max(grids)


def on_gpu(shape, dtype="float32", seed=0):
    rng = np.random.default_rng(seed)
    return fp8q.asarray(rng.standard_normal(shape).astype(np.float32),
                        dtype=dtype, device="cuda")


def grids_grow_with_the_input():
    """Per kernel, a small input takes few blocks and a large one fills the
    device, whatever its row count: one row of 4 M values as much as many
    rows."""
    def per_tensor_calibration(x):
        return lambda: fp8q.calib.MaxCalibrator().update(x)

    def histogram(x):
        return lambda: fp8q.calib.HistogramCalibrator().update(x)

    def row_scaled_cast(rows, cols, saturate=True):
        x = on_gpu((rows, cols))
        scale = fp8q.asarray(np.full((rows, 1), 0.5, np.float32),
                             device="cuda")
        return lambda: fp8q.cast(x, "float8_e4m3fn", scale=scale,
                                 saturate=saturate)

    def dequantize(rows, cols):
        q = fp8q.quantize(on_gpu((rows, cols)), granularity="row")
        return lambda: q.dequantize("bfloat16")

    def gemv(n, m=1):
        x = on_gpu((m, 64), "bfloat16")
        weight = on_gpu((n, 64), "float8_e4m3fn")
        scale = fp8q.asarray(np.ones((n, 1), np.float32), device="cuda")
        return lambda: _C.layer_gemv(x, weight, scale, None, "row", None)

    cases = [
        ("fp8q_cast_uniform",
         lambda size: (lambda x: lambda: fp8q.cast(
             x, "float8_e4m3fn", saturate=False))(on_gpu((size,)))),
        ("fp8q_cast", lambda size: row_scaled_cast(4, size // 4, False)),
        ("fp8q_cast_to_fp8",
         lambda size: (lambda x: lambda: fp8q.cast(x, "float8_e4m3fn"))(
             on_gpu((size,)))),
        ("fp8q_cast_to_fp8", lambda size: row_scaled_cast(4, size // 4)),
        ("fp8q_cast_from_fp8", lambda size: dequantize(4, size // 4 + 8)),
        ("fp8q_cast_from_fp8_wide", lambda size: dequantize(4, size // 4)),
        ("fp8q_amax", lambda size: (lambda x: lambda: fp8q.amax(x))(
            on_gpu((size,)))),
        ("fp8q_amax_rows",
         lambda size: (lambda x: lambda: fp8q.amax(x, axis=1))(
             on_gpu((2, size // 2)))),
        ("fp8q_amax_finite_rows",
         lambda size: per_tensor_calibration(on_gpu((1, size)))),
        ("fp8q_histogram_count",
         lambda size: histogram(on_gpu((1, size)))),
        ("fp8q_quantize_rows",
         lambda size: (lambda x: lambda: fp8q.quantize(
             x, "float8_e4m3fn", granularity="row"))(
                 on_gpu((size // 256, 256)))),
        ("fp8q_quantize_rows_warps",
         lambda size: (lambda x: lambda: fp8q.quantize(
             x, "float8_e4m3fn", granularity="row"))(
                 on_gpu((size // 2048, 2048), "bfloat16"))),
        ("fp8q_gemv_fp8_1", lambda size: gemv(size // 512)),
        ("fp8q_gemv_fp8_tc16", lambda size: gemv(size // 2048, m=16)),
        ("fp8q_gemv_fp8_tc64", lambda size: gemv(size // 2048, m=64)),
    ]
    for kernel, make in cases:
        small = grid_of(kernel, make(4096))
        large = grid_of(kernel, make(1 << 22))
        assert small < FULL_DEVICE, (kernel, small)
        assert large >= FULL_DEVICE, (kernel, small, large)


def row_quantize_holds_the_device():
    """fp8q_quantize_rows runs one block per row up to the blocks the device
    holds at once (its threads per multiprocessor: 8 x 256 here), and no
    more: beyond, each block quantizes several rows, loading the next
    while it quantizes one. fp8q_quantize_rows_warps (float16 / bfloat16
    rows of whole 16-byte vectors to saturating E4M3FN / E5M2) runs blocks
    of R rows of G warps (G = ceil(length / 2048), R = 8 // G), one block per
    R rows up to the blocks the device holds at once."""
    cases = [((16, 256), 16, 32),      # fewer rows than resident blocks
             ((4096, 256), 256, 32),   # 4 x 2048 / 32 resident blocks
             ((300, 4096), 32, 256),   # 4 x 2048 / 256
             ((100, 16384), 8, 1024)]  # 4 x 2048 / 1024
    for shape, grid, block in cases:
        x = on_gpu(shape)
        launched = [(g, b) for name, g, b in launches(
            lambda: fp8q.quantize(x, granularity="row"))
            if name == "fp8q_quantize_rows"]
        assert launched == [(grid, block)], (shape, launched)
    warp_cases = [((16, 256), 2, 256),       # G 1, R 8: 2 blocks
                  ((4096, 256), 32, 256),    # 512 blocks' rows, 32 resident
                  ((300, 4096), 32, 256),    # G 2, R 4
                  ((10, 6144), 5, 192),      # G 3, R 2, 40 resident
                  ((100, 16384), 32, 256),   # G 8, R 1
                  ((7, 16384), 7, 256)]
    for shape, grid, block in warp_cases:
        x = on_gpu(shape, "bfloat16")
        launched = [(name, g, b) for name, g, b in launches(
            lambda: fp8q.quantize(x, granularity="row"))
            if name.startswith("fp8q_quantize_rows")]
        assert launched == [("fp8q_quantize_rows_warps", grid, block)], (
            shape, launched)


def casts_take_the_fp8_kernel_where_it_applies():
    """fp8q_cast_to_fp8 runs the saturating float -> E4M3FN / E5M2 casts
    with no scale or divisors constant over its vectors, fp8q_cast_from_fp8
    the E4M3FN / E5M2 -> float casts and dequantizes whose scales are
    constant over its vectors (kernels/cast.cuh), every other cast runs the
    generic kernels, a cast between equal dtypes without a scale copies the
    bits in one pass (a device-to-device copy, no kernel, for a contiguous
    input; fp8q_transpose for a transposed matrix), and each gives the
    CPU's bits."""
    rng = np.random.default_rng(0)
    values = (rng.standard_normal((8, 64)) * 100).astype(np.float32)
    values[0, :4] = [np.nan, -np.inf, 1e30, -0.0]
    row_scales = rng.uniform(0.5, 2.0, (8, 1)).astype(np.float32)
    column_scales = rng.uniform(0.5, 2.0, (1, 64)).astype(np.float32)
    one_scale = np.float32(0.75)
    cases = [
        ("float32", "float8_e4m3fn", None, {}, "fp8q_cast_to_fp8"),
        ("bfloat16", "float8_e5m2", None, {}, "fp8q_cast_to_fp8"),
        ("float16", "float8_e4m3fn", one_scale, {}, "fp8q_cast_to_fp8"),
        ("bfloat16", "float8_e4m3fn", row_scales, {}, "fp8q_cast_to_fp8"),
        ("float32", "float8_e5m2", row_scales, {}, "fp8q_cast_to_fp8"),
        ("float32", "float8_e4m3fn", column_scales, {}, "fp8q_cast"),
        ("float32", "float8_e4m3fn", None, {"saturate": False},
         "fp8q_cast_uniform"),
        ("float32", "float8_e4m3fnuz", None, {}, "fp8q_cast_uniform"),
        ("float8_e4m3fn", "float8_e5m2", None, {}, "fp8q_cast_uniform"),
        ("float32", "bfloat16", None, {}, "fp8q_cast_uniform"),
        ("float8_e4m3fn", "bfloat16", None, {}, "fp8q_cast_from_fp8_wide"),
        ("float8_e5m2", "float32", None, {}, "fp8q_cast_from_fp8_wide"),
        ("float8_e4m3fnuz", "float32", None, {}, "fp8q_cast_uniform"),
        ("float32", "float32", None, {}, None),
        ("float8_e5m2", "float8_e5m2", None, {"saturate": False}, None),
    ]
    for source_dtype, dtype, scale, options, kernel in cases:
        host = fp8q.asarray(values, dtype=source_dtype)
        host_scale = None if scale is None else fp8q.asarray(scale)
        x = fp8q.asarray(values, dtype=source_dtype, device="cuda")
        device_scale = None if scale is None else fp8q.asarray(
            scale, device="cuda")
        result = []
        names = [name for name, _, _ in launches(lambda: result.append(
            fp8q.cast(x, dtype, scale=device_scale, **options)))]
        assert names == ([] if kernel is None else [kernel]), (
            source_dtype, dtype, options, names)
        expected = fp8q.cast(host, dtype, scale=host_scale, **options)
        assert bytes(memoryview(result[0].cpu())) == bytes(
            memoryview(expected)), (source_dtype, dtype, options)
    # Every code of each FP8 format, NaN payloads among them, through a
    # transposed view: the transpose kernel alone moves the bits.
    codes = fp8q.asarray(np.arange(256, dtype=np.uint8).reshape(16, 16))
    for dtype in FP8_NAMES:
        host = codes.view(dtype)
        x = host.to("cuda")
        result = []
        names = [name for name, _, _ in launches(lambda: result.append(
            fp8q.cast(x.T, dtype)))]
        assert names == ["fp8q_transpose"], (dtype, names)
        assert bytes(memoryview(result[0].cpu())) == bytes(
            memoryview(fp8q.asarray(host.numpy().T))), dtype
        # In place (out= x itself): nothing to move, nothing launched or
        # copied (a copy onto itself is undefined for cuMemcpyAsync).
        before = len(calls())
        assert launches(lambda: fp8q.cast(x, dtype, out=x)) == []
        assert "cuMemcpyAsync" not in calls()[before:], dtype
        assert bytes(memoryview(x.cpu())) == bytes(memoryview(host)), dtype

    # Dequantize: the scales' groups must hold whole vectors (8 codes, 4
    # for float32) for fp8q_cast_from_fp8, whole 16-code vectors (rows of
    # a multiple of 16 codes, blocks too) for fp8q_cast_from_fp8_wide. NaN
    # and infinity codes, and an infinite and a zero scale, among them.
    wide = "fp8q_cast_from_fp8_wide"
    for cols, granularity, kernel in ((264, "tensor", wide),
                                      (264, "row", "fp8q_cast_from_fp8"),
                                      (264, (128, 128), "fp8q_cast_from_fp8"),
                                      (264, (1, 8), "fp8q_cast_from_fp8"),
                                      (272, "row", wide),
                                      (272, (128, 128), wide),
                                      (272, (1, 16), wide),
                                      (272, (1, 8), "fp8q_cast_from_fp8"),
                                      (264, "col", "fp8q_cast"),
                                      (264, (3, 5), "fp8q_cast")):
        values = (rng.standard_normal((256, cols)) * 10).astype(np.float32)
        for source_dtype in ("float8_e4m3fn", "float8_e5m2"):
            q = fp8q.quantize(fp8q.asarray(values), source_dtype,
                              granularity=granularity)
            codes = np.array(q.data.view("uint8"))
            codes[3, :4] = [0x7F, 0xFF, 0x7C, 0xFC]
            scale = np.array(q.scale)
            if scale.size > 1:
                scale.reshape(-1)[-2:] = [np.inf, 0.0]
            host = fp8q.QTensor(fp8q.asarray(codes).view(source_dtype),
                                fp8q.asarray(scale), granularity)
            on_gpu = host.to("cuda")
            for dtype in ("float32", "float16", "bfloat16"):
                result = []
                names = [name for name, _, _ in launches(
                    lambda: result.append(on_gpu.dequantize(dtype)))]
                assert names == [kernel], (granularity, dtype, names)
                assert bytes(memoryview(result[0].cpu())) == bytes(
                    memoryview(host.dequantize(dtype))), (granularity, dtype)


def wide_decode_takes_one_vector_a_thread():
    """fp8q_cast_from_fp8_wide's grid is one 16-code vector a thread in
    blocks of 256 (ceil(codes / 4096) blocks, past the 32 that fill the
    fake device), not capped like the grid-stride kernels'; a run with a
    tail (a count that is not a multiple of 16) goes to fp8q_cast_from_fp8,
    each with the CPU's bits. (Unaligned runs: straight_cast_emulation.cpp
    checks that the wide kernel's takes refuse them.)"""
    rng = np.random.default_rng(38)
    for rows, cols in ((1, 16), (3, 4096), (64, 4096), (1000, 272)):
        codes = fp8q.asarray(rng.integers(0, 256, (rows, cols), np.uint8))
        on_gpu = codes.view("float8_e4m3fn").to("cuda")
        scale = fp8q.asarray(rng.uniform(0.5, 2.0, (rows, 1)).astype(
            np.float32))
        q = fp8q.QTensor(on_gpu, scale.to("cuda"), "row")
        result = []
        launched = launches(lambda: result.append(q.dequantize("bfloat16")))
        assert launched == [("fp8q_cast_from_fp8_wide",
                             -(-rows * cols // 4096), 256)], launched
        host = fp8q.QTensor(codes.view("float8_e4m3fn"), scale, "row")
        assert bytes(memoryview(result[0].cpu())) == bytes(
            memoryview(host.dequantize("bfloat16")))
    for count, kernel in ((4100, "fp8q_cast_from_fp8"),
                          (4096, "fp8q_cast_from_fp8_wide")):
        codes = fp8q.asarray(rng.integers(0, 256, (count,), np.uint8)).view(
            "float8_e4m3fn")
        on_gpu = codes.to("cuda")
        result = []
        names = [name for name, _, _ in launches(
            lambda: result.append(fp8q.cast(on_gpu, "float16")))]
        assert names == [kernel], (count, names)
        assert bytes(memoryview(result[0].cpu())) == bytes(
            memoryview(fp8q.cast(codes, "float16")))


def layer_weight_decodes_with_the_wide_kernel():
    """The W8A16 layer's weight decode above the weight-only kernels'
    token counts (_C.layer_weight, what fp8q.torch's forward multiplies by
    torch's GEMM) is one fp8q_cast_from_fp8_wide launch of one 16-code
    vector a thread for row, tensor and 128 x 128 block scales when
    in_features is a multiple of 16 (tensor scales: the weight a whole
    number of 16-code vectors), fp8q_cast_from_fp8 otherwise, each
    with the CPU's bits; a second call launches the same and allocates
    its result from the stream-ordered pool (no cuMemAlloc, no
    synchronisation)."""
    rng = np.random.default_rng(380)
    for k, kernel in ((272, "fp8q_cast_from_fp8_wide"),
                      (264, "fp8q_cast_from_fp8")):
        weight = rng.standard_normal((300, k)).astype(np.float32)
        for name, blocks in (("row", "row"), ("tensor", "tensor"),
                             ("block", (128, 128))):
            host = fp8q.quantize(weight, granularity=blocks)
            w = host.to("cuda")
            for dtype in ("bfloat16", "float16", "float32"):
                x = fp8q.asarray(rng.standard_normal((100, k)).astype(
                    np.float32), dtype=dtype)
                on_gpu = x.to("cuda")
                expected = _C.layer_weight(x, host.data, host.scale, name,
                                           None)
                # One scale for the whole weight needs whole vectors only
                # (300 x 264 codes are 4950 of them).
                taken = "fp8q_cast_from_fp8_wide" if name == "tensor" else (
                    kernel)
                for repeat in range(2):
                    before = len(calls())
                    result = []
                    launched = launches(lambda: result.append(
                        _C.layer_weight(on_gpu, w.data, w.scale, name,
                                        None)))
                    blocks_wide = -(-300 * k // 4096)
                    assert [launched_name for launched_name, _, _ in launched] == [
                        taken], (k, name, dtype, launched)
                    if taken == "fp8q_cast_from_fp8_wide":
                        assert launched[0][1:] == (blocks_wide, 256), launched
                    driver = calls()[before:]
                    assert driver.count("cuMemAllocAsync") == 1, driver
                    assert not set(driver) & {
                        "cuMemAlloc", "cuCtxSynchronize", "refused",
                        "cuStreamSynchronize", "cuEventSynchronize"}, driver
                    assert bytes(memoryview(result[0].cpu())) == bytes(
                        memoryview(expected)), (k, name, dtype, repeat)


def reference_product(x, codes, scale, granularity, bias):
    """x . dequantize(codes)^T + bias in float64."""
    weight = np.asarray(fp8q.cast(codes.cpu(), "float32")).astype(np.float64)
    scale = np.asarray(scale.cpu()).astype(np.float64)
    if granularity == "block":
        scale = np.repeat(np.repeat(scale, 128, axis=0), 128, axis=1)
        scale = scale[:weight.shape[0], :weight.shape[1]]
    y = np.asarray(fp8q.cast(x.cpu(), "float32")).astype(np.float64) @ (
        weight * scale).T
    if bias is not None:
        y = y + np.asarray(fp8q.cast(bias.cpu(), "float32")).astype(np.float64)
    return y


# The result's rounding into x's dtype, relative (doubled for slack).
OUTPUT_ULP = {"float32": 2.0 ** -23, "float16": 2.0 ** -10,
              "bfloat16": 2.0 ** -7}


def check_gemv_products(rng, n, k, token_counts, x_dtypes, bias_dtypes,
                        unit_roundoff, declined=lambda m, granularity: False):
    """_C.layer_gemv on random operands for every token count, scale
    granularity, x dtype, weight format and bias dtype given, against the
    float64 reference: within k * unit_roundoff of it (float32
    accumulation) plus the output's rounding; None where declined(m,
    granularity)."""
    for m in token_counts:
        for granularity, scale_shape in (("tensor", ()), ("row", (n, 1)),
                                         ("block", (-(-n // 128),
                                                    -(-k // 128)))):
            for x_dtype in x_dtypes:
                for weight_dtype in ("float8_e4m3fn", "float8_e5m2"):
                    for bias_dtype in bias_dtypes:
                        key = (m, granularity, x_dtype, weight_dtype,
                               bias_dtype)
                        x = fp8q.asarray(rng.standard_normal((m, k)).astype(
                            np.float32), dtype=x_dtype, device="cuda")
                        codes = fp8q.asarray(
                            (rng.standard_normal((n, k)) * 8).astype(
                                np.float32), dtype=weight_dtype,
                            device="cuda")
                        scale = fp8q.asarray(rng.uniform(
                            0.01, 0.1, scale_shape).astype(np.float32),
                            device="cuda")
                        bias = None if bias_dtype is None else fp8q.asarray(
                            rng.standard_normal(n).astype(np.float32),
                            dtype=bias_dtype, device="cuda")
                        y = _C.layer_gemv(x, codes, scale, bias, granularity,
                                          None)
                        if declined(m, granularity):
                            assert y is None, key
                            continue
                        assert y.device == "cuda:0" and y.shape == (m, n), key
                        assert y.dtype == x_dtype, key
                        expected = reference_product(x, codes, scale,
                                                     granularity, bias)
                        got = np.asarray(fp8q.cast(y.cpu(), "float32"))
                        magnitude = np.abs(expected).max()
                        assert np.abs(got - expected).max() <= (
                            OUTPUT_ULP[x_dtype] + k * unit_roundoff
                        ) * magnitude, key


def gemv_matches_the_reference():
    """_C.layer_gemv on the GPU: the product of its contract for 1 to 8
    tokens (the CUDA-core kernels), every scale granularity, x and bias
    dtype, both weight formats, odd N and K not a multiple of 128; within
    float32 accumulation plus the output's rounding of the float64
    reference."""
    check_gemv_products(np.random.default_rng(5), 37, 272, (1, 2, 3, 5, 8),
                        ("float32", "float16", "bfloat16"),
                        (None, "float32", "bfloat16"), 2.0 ** -23)


def tensor_core_gemv_matches_the_reference():
    """_C.layer_gemv for 9 to 64 float16 / bfloat16 tokens (the tensor-core
    kernels of kernels/gemv.cuh): every scale granularity (block scales up
    to 16 tokens, declined beyond), both weight formats, a bias or none, N
    not a multiple of the 32 weight rows a block takes and K ending in half
    a 32-value chunk; within float32 accumulation with twice the unit
    roundoff (the tensor cores may truncate) plus the output's rounding of
    the float64 reference."""
    check_gemv_products(
        np.random.default_rng(6), 70, 272, (9, 13, 16, 17, 40, 64),
        ("float16", "bfloat16"), (None, "bfloat16"), 2.0 ** -22,
        declined=lambda m, granularity: granularity == "block" and m > 16)


def expected_splits(m, n, k, multiprocessors=4, blocks_per_sm=8,
                    tensor_cores=True):
    """kernels/gemv.cuh's split of k as cuda/launch.h documents it, on the
    fake device (4 multiprocessors, 2048 / 256 blocks each unless told
    otherwise). Tensor cores: 1 where ceil(n / 32) blocks fill it, else
    enough splits to, at most 16, k // 1024 and k // (32 m), recounted so
    that none is empty (each split ceil(k / splits) rounded up to 128
    values). CUDA cores: the whole copies of ceil(n / 4) blocks that fit in
    it (1 below 2), at most 16, k // 4096 and k // (32 m)."""
    blocks = -(-n // (32 if tensor_cores else 4))
    full = multiprocessors * blocks_per_sm
    if blocks >= full:
        return 1
    splits = min(-(-full // blocks) if tensor_cores else full // blocks, 16,
                 k // (1024 if tensor_cores else 4096), k // (32 * m))
    if splits <= 1:
        return 1
    if not tensor_cores:
        return splits
    span = -(-(-(-k // splits)) // 128) * 128
    return -(-k // span)


def check_split_launches(m, n, k, dtype, tile, rng, occupancy=8):
    """One row-scaled _C.layer_gemv of m x k random `dtype` x by an n x k
    E4M3 weight on the kernel "fp8q_gemv_fp8_" + tile, called twice: the
    same bits both times, within float32 accumulation of the float64
    reference. On the fake driver (`occupancy` blocks a multiprocessor) the
    launches too: the product on ceil(n / 32) (tensor cores) or ceil(n /
    4) (CUDA cores) x expected_splits blocks, then, split,
    fp8q_gemv_fp8_reduce over the m x n outputs (the fake driver refuses
    a scratch not 16-byte aligned and a reduce before the product's sums).
    Returns the splits (None on a GPU)."""
    tensor_cores = tile.startswith("tc")
    x = fp8q.asarray(rng.standard_normal((m, k)).astype(np.float32),
                     dtype=dtype, device="cuda")
    codes = fp8q.asarray(rng.standard_normal((n, k)).astype(np.float32),
                         dtype="float8_e4m3fn", device="cuda")
    scale = fp8q.asarray(rng.uniform(0.5, 1.0, (n, 1)).astype(
        np.float32), device="cuda")
    results = []
    splits = None

    def call():
        results.append(_C.layer_gemv(x, codes, scale, None, "row", None))
    if "FAKE_CUDA_LAUNCH_LOG" in os.environ:  # the fake driver
        splits = expected_splits(m, n, k, blocks_per_sm=occupancy,
                                 tensor_cores=tensor_cores)
        expected = [(f"fp8q_gemv_fp8_{tile}",
                     -(-n // (32 if tensor_cores else 4)), 256, splits)]
        if splits > 1:
            expected.append(("fp8q_gemv_fp8_reduce",
                             min(-(-m * n // 256), 4 * occupancy), 256, 1))
        assert grid_launches(call) == expected, (m, n, k, expected)
    else:  # a GPU
        call()
    call()
    first = np.asarray(results[0].cpu()).view(np.uint8)
    assert (first == np.asarray(results[1].cpu()).view(np.uint8)).all()
    reference = reference_product(x, codes, scale, "row", None)
    got = np.asarray(fp8q.cast(results[0].cpu(), "float32"))
    assert np.abs(got - reference).max() <= (
        OUTPUT_ULP[dtype] + k * (2.0 ** -22 if tensor_cores else 2.0 ** -23)
    ) * np.abs(reference).max(), (m, n, k, tile)
    return splits


def split_gemv_matches_the_reference():
    """The weight-only kernels with k split over the grid's y dimension
    (few weight rows, long k: kernels/gemv.cuh "Split k"): the tensor-core
    kernels and the CUDA-core ones (1 to 8 tokens, every splits-th block
    step of 4096 values a split), every scale granularity, x dtype, both
    weight formats, a bias or none, K ending inside a 128-value block,
    against float64 within float32's unit roundoff per term (twice it on
    the tensor cores); the same bits from a second call (the splits' sums
    are added in split order). On the fake driver the launches too
    (check_split_launches): no split (and no reduce) where the blocks fill
    the device, where fewer than two copies of a CUDA-core grid fit in it,
    or where k is too short to split."""
    check_gemv_products(
        np.random.default_rng(8), 40, 3088, (9, 16, 40),
        ("float16", "bfloat16"), (None, "bfloat16"), 2.0 ** -22,
        declined=lambda m, granularity: granularity == "block" and m > 16)
    # 1 to 8 tokens on the CUDA cores: 10 blocks of 4 weight rows, k =
    # 3 x 4096 + 16 in 3 splits (the last one's last step 16 values).
    check_gemv_products(
        np.random.default_rng(10), 40, 3 * 4096 + 16, (1, 2, 3, 5, 8),
        ("float32", "float16", "bfloat16"), (None, "bfloat16"), 2.0 ** -23)
    rng = np.random.default_rng(9)
    for m, n, k, dtype, tile, splits in (
            (16, 40, 3088, "bfloat16", "tc16", None),
            (40, 40, 8192, "float16", "tc64", None),
            (9, 70, 1024 * 40, "bfloat16", "tc16", None),
            (16, 1024, 3088, "float16", "tc16", 1),
            (4, 40, 3088, "bfloat16", "4", 1),
            (1, 40, 4 * 4096 + 16, "float32", "1", 3),
            (2, 13, 9 * 4096, "bfloat16", "2", 8),
            (3, 40, 2 * 4096 + 16, "float16", "4", 2),
            (8, 40, 3 * 4096 + 16, "float32", "8", 3),
            (1, 80, 4 * 4096, "float32", "1", 1),
            (1, 128, 4 * 4096, "float32", "1", 1),
            (2, 40, 4096 + 2048, "float16", "2", 1)):
        # splits: the CUDA cores' by hand (None: expected_splits alone).
        got = check_split_launches(m, n, k, dtype, tile, rng)
        assert splits is None or got in (None, splits), (m, n, k, tile, got)


def narrow_gemv_splits_on_the_cuda_cores():
    """Narrow layers (N of 256 to 1024 weight rows) at 1, 2, 4, 5 and 8
    tokens on the CUDA cores, on a fake device of 4 x 64 = 256 resident
    blocks (run with FAKE_CUDA_OCCUPANCY=64, a stand-in for an H100's 132
    x 4 blocks of fp8q_gemv_fp8_1): ceil(N / 4) = 64 blocks split k = 3 x
    4096 + 16 in 3 (4 copies fit, k allows 3), 128 blocks in 2, 256 blocks
    (a full device) not at all; each product then the reduce, the same
    bits twice, within float32 accumulation of float64
    (check_split_launches). On a GPU, the products only (the splits its
    occupancy gives)."""
    rng = np.random.default_rng(11)
    k = 3 * 4096 + 16
    for n, splits in ((256, 3), (512, 2), (1024, 1)):
        for m, dtype, tile in ((1, "bfloat16", "1"), (2, "float16", "2"),
                               (4, "bfloat16", "4"), (5, "bfloat16", "8"),
                               (8, "float32", "8")):
            got = check_split_launches(m, n, k, dtype, tile, rng,
                                       occupancy=64)
            assert got in (None, splits), (m, n, got, splits)  # None: a GPU


def gemv_decodes_every_code():
    """Each weight-only kernel decodes every finite E4M3FN and E5M2 code
    exactly: with one-hot rows of x, output (t, r) is weight row r's code at
    the column row t of x selects, decoded, times a scale of 1 (exact in
    every x dtype: float16 and bfloat16 hold every FP8 value). The NaN and
    infinity codes have rows of their own, each giving NaN (an infinity
    times the zeros of x is NaN too). The CUDA-core kernels (1 to 8 tokens)
    and the tensor-core ones (8 to 64), both also with the codes repeated
    along a long k, split over the grid (gemv.cuh "Split k": a k of 4096
    on the tensor cores; 3 x 4096 on the CUDA cores, in 3 splits on the
    fake device and on a GPU); below 8 tokens the one-hot columns move over
    calls until every one of a row's 8 codes is read, the first row's in
    the last split."""
    every = np.arange(256, dtype=np.uint8)
    for dtype in ("float8_e4m3fn", "float8_e5m2"):
        values = np.asarray(fp8q.cast(fp8q.asarray(every).view(dtype),
                                      "float32"))
        finite = every[np.isfinite(values)]
        finite = np.concatenate([finite, np.zeros(-len(finite) % 8,
                                                  np.uint8)])
        specials = every[~np.isfinite(values)]
        codes = np.concatenate([np.tile(finite.reshape(-1, 8), (1, 4)),
                                np.repeat(specials[:, None], 32, axis=1)])
        n = codes.shape[0]
        weight = fp8q.asarray(codes).view(dtype).to("cuda")
        decoded = np.asarray(fp8q.cast(fp8q.asarray(codes).view(dtype),
                                       "float32"))
        decoded[len(finite) // 8:] = np.nan
        scale = fp8q.asarray(np.ones((n, 1), np.float32), device="cuda")
        # The same codes repeated along a k of 4096 (the tensor-core
        # kernels split it) and of 3 x 4096 (the CUDA-core kernels split it
        # in 3: ceil(n / 4) = 9 or 10 blocks), the one-hot columns reaching
        # into every split.
        wide = {width: fp8q.asarray(np.tile(codes, (1, width // 32))).view(
            dtype).to("cuda") for width in (4096, 3 * 4096)}
        wide[32] = weight
        cuda_core_split = 3 * 4096
        for m, x_dtypes, width in ((1, ("float32", "float16", "bfloat16"), 32),
                                   (2, ("bfloat16",), 32), (3, ("float16",), 32),
                                   (5, ("float32", "bfloat16"), 32),
                                   (8, ("float16",), 32),
                                   (16, ("float16", "bfloat16"), 32),
                                   (64, ("float16", "bfloat16"), 32),
                                   (1, ("float32", "float16", "bfloat16"),
                                    cuda_core_split),
                                   (2, ("bfloat16",), cuda_core_split),
                                   (3, ("float16",), cuda_core_split),
                                   (5, ("float32",), cuda_core_split),
                                   (8, ("float32",), cuda_core_split),
                                   (8, ("bfloat16",), 4096),
                                   (16, ("float16", "bfloat16"), 4096),
                                   (64, ("float16", "bfloat16"), 4096)):
            for shift in range(0, 8, m) if m < 8 else (0,):
                # Row t of x reads column (t + shift) % 32 of the codes, in
                # the last 32 of k for t = 0, spread over k for the others.
                columns = (np.arange(m) + shift) % 32 + 32 * (
                    (np.arange(m) * 37 + width // 32 - 1) % (width // 32))
                one_hot = np.zeros((m, width), np.float32)
                one_hot[np.arange(m), columns] = 1.0
                expected = decoded[:, columns % 32].T
                for x_dtype in x_dtypes:
                    x = fp8q.asarray(one_hot, dtype=x_dtype, device="cuda")
                    results = []

                    def call():
                        results.append(_C.layer_gemv(
                            x, wide[width], scale, None, "row", None))
                    if (width == cuda_core_split and
                            "FAKE_CUDA_LAUNCH_LOG" in os.environ):
                        assert [launch[3] for launch in grid_launches(call)
                                if launch[0] != "fp8q_gemv_fp8_reduce"
                                ] == [3], (dtype, m, x_dtype)
                    else:
                        call()
                    y = np.asarray(fp8q.cast(results[0].cpu(), "float32"))
                    same = (y == expected) | (np.isnan(y) & np.isnan(expected))
                    assert same.all(), (dtype, m, x_dtype, width,
                                        np.argwhere(~same)[:4].tolist())


def tensor_cores_follow_the_device():
    """On compute capability 7.5 (the fake driver's FAKE_CUDA_CC): 9 to 64
    float16 tokens run on the tensor cores, bfloat16 ones are declined
    (bfloat16 WMMA needs 8.0), as are float32 ones everywhere."""
    weight = on_gpu((16, 32), "float8_e4m3fn")
    scale = fp8q.asarray(np.ones((16, 1), np.float32), device="cuda")
    assert _C.layer_gemv(on_gpu((12, 32), "float16"), weight, scale, None,
                         "row", None).shape == (12, 16)
    for dtype in ("bfloat16", "float32"):
        assert _C.layer_gemv(on_gpu((12, 32), dtype), weight, scale, None,
                             "row", None) is None, dtype


def gemv_declines_what_it_does_not_take():
    """None (the caller's general path) for float32 x past 8 tokens, any x
    past 64, K not a multiple of 16, CPU tensors; an error for a wrong
    scale shape."""
    weight = on_gpu((16, 32), "float8_e4m3fn")
    scale = fp8q.asarray(np.ones((16, 1), np.float32), device="cuda")
    assert _C.layer_gemv(on_gpu((9, 32)), weight, scale, None, "row",
                         None) is None
    assert _C.layer_gemv(on_gpu((65, 32), "bfloat16"), weight, scale, None,
                         "row", None) is None
    assert _C.layer_gemv(on_gpu((2, 24)), on_gpu((16, 24), "float8_e4m3fn"),
                         scale, None, "row", None) is None
    assert _C.layer_gemv(on_gpu((2, 32)).cpu(), weight.cpu(), scale.cpu(),
                         None, "row", None) is None
    assert _C.layer_gemv(on_gpu((2, 32)), weight, scale, None, "row",
                         None).shape == (2, 16)
    try:
        _C.layer_gemv(on_gpu((2, 32)), weight,
                      fp8q.asarray(np.ones((3, 1), np.float32),
                                   device="cuda"), None, "row", None)
    except ValueError as error:
        assert "weight_scale" in str(error), error
    else:
        raise AssertionError("a wrong scale shape was accepted")


def linear_weight_only_runs_every_row():
    """fp8q.linear(weight_only=True) on the GPU: any number of tokens, in
    launches of up to 64 rows on the tensor cores (float16 / bfloat16, from
    8 rows; 16 rows with block scales), 8 on the CUDA cores (float32) and
    the smallest tile for the rest (the kernels checked on the fake
    driver's launch log); the product of the contract against float64."""
    rng = np.random.default_rng(7)
    n, k = 40, 256
    cases = [
        ("row", "bfloat16", 70, ["fp8q_gemv_fp8_tc64", "fp8q_gemv_fp8_8"]),
        ((128, 128), "bfloat16", 70,
         ["fp8q_gemv_fp8_tc16"] * 4 + ["fp8q_gemv_fp8_8"]),
        ("tensor", "float32", 20,
         ["fp8q_gemv_fp8_8", "fp8q_gemv_fp8_8", "fp8q_gemv_fp8_4"]),
        ("row", "float16", 9, ["fp8q_gemv_fp8_tc16"]),
        ("row", "bfloat16", 8, ["fp8q_gemv_fp8_tc16"]),
        ("tensor", "float32", 8, ["fp8q_gemv_fp8_8"]),
        ("row", "bfloat16", 0, []),
    ]
    for granularity, dtype, m, kernels in cases:
        key = (granularity, dtype, m)
        w = fp8q.quantize(rng.standard_normal((n, k)).astype(np.float32),
                          granularity=granularity).to("cuda")
        x = fp8q.asarray(rng.standard_normal((m, k)).astype(np.float32),
                         dtype=dtype, device="cuda")
        if "FAKE_CUDA_LAUNCH_LOG" in os.environ:  # the fake driver
            results = []
            names = [name for name, _, _ in launches(lambda: results.append(
                fp8q.linear(x, w, weight_only=True)))]
            assert names == kernels, (key, names)
            y = results[0]
        else:  # a GPU
            y = fp8q.linear(x, w, weight_only=True)
        assert y.device == "cuda:0" and y.shape == (m, n), key
        assert y.dtype == dtype, key
        if m == 0:
            continue
        expected = reference_product(
            x, w.data, w.scale,
            "block" if granularity == (128, 128) else granularity, None)
        got = np.asarray(fp8q.cast(y.cpu(), "float32"))
        assert np.abs(got - expected).max() <= (
            OUTPUT_ULP[dtype] + k * 2.0 ** -22) * np.abs(expected).max(), key
    # in_features not a multiple of 16: the kernels do not take it.
    w = fp8q.quantize(rng.standard_normal((n, 40)).astype(np.float32),
                      granularity="row").to("cuda")
    x = fp8q.asarray(rng.standard_normal((3, 40)).astype(np.float32),
                     device="cuda")
    try:
        fp8q.linear(x, w, weight_only=True)
    except ValueError as error:
        assert str(error) == (
            "linear: weight_only=True on a GPU needs in_features (K = 40) a "
            "multiple of 16 and 16-byte aligned x and w; use "
            "weight_only=False (x quantized) for this shape"), error
    else:
        raise AssertionError("K = 40 was taken by the weight-only kernels")


def linear_without_input_features_gives_the_bias():
    """fp8q.linear with K = 0 on the GPU: both products give the bias
    (float16 here, rounded into the result's dtype) in every row, on x's
    device, as on the CPU."""
    w = fp8q.quantize(np.zeros((3, 0), np.float32),
                      granularity="row").to("cuda")
    bias = np.array([0.1, -2.0, 5.0], np.float16)
    for weight_only in (False, True):
        x = fp8q.asarray(np.zeros((4, 0), np.float32), dtype="bfloat16",
                         device="cuda")
        y = fp8q.linear(x, w, bias=fp8q.asarray(bias, device="cuda"),
                        weight_only=weight_only)
        assert y.device == "cuda:0" and y.dtype == "bfloat16", weight_only
        got = np.asarray(fp8q.cast(y.cpu(), "float32"))
        want = bias.astype(np.float32).astype(ml_dtypes.bfloat16)
        assert np.array_equal(got, np.broadcast_to(
            want.astype(np.float32), (4, 3))), (weight_only, got)


def norm_quantize_runs_a_block_per_row():
    """fp8q_norm_quantize (kernels/norm_quantize.cuh) runs one block of 256
    threads per row, so its grid grows with the rows (a small input takes
    few blocks, many rows fill the device); it normalises within float32
    rounding of the CPU reference (its sums run in another order) and its
    codes and scales are exactly fp8q.quantize of what it wrote."""
    for rows, layer_norm in ((3, False), (40, True), (1000, False)):
        rng = np.random.default_rng(rows)
        host = (rng.standard_normal((rows, 320)) * 2).astype(np.float32)
        weight = (rng.random(320) + 0.5).astype(np.float32)
        bias = rng.standard_normal(320).astype(np.float32)

        def run(device):
            x = fp8q.asarray(host, dtype="bfloat16", device=device)
            normed = fp8q.asarray(np.zeros_like(host), dtype="bfloat16",
                                  device=device)
            codes = fp8q.asarray(np.zeros(host.shape, np.uint8)).view(
                "float8_e4m3fn").to(device)
            scale = fp8q.asarray(np.zeros((rows, 1), np.float32),
                                 device=device)
            _C.norm_quantize(
                x, fp8q.asarray(weight, device=device),
                fp8q.asarray(bias, device=device) if layer_norm else None,
                normed, codes, scale, 1e-5, layer_norm, None)
            return [np.asarray(fp8q.cast(t.cpu(), "float32")
                               if t.dtype.name != "float32" else t.cpu())
                    for t in (normed, codes, scale)]

        launched = launches(lambda: run("cuda"))
        assert launched == [("fp8q_norm_quantize", rows, 256)], launched
        gpu_normed, gpu_codes, gpu_scale = run("cuda")
        cpu_normed = run("cpu")[0]
        assert np.allclose(gpu_normed, cpu_normed, rtol=2.0 ** -7, atol=0)
        again = fp8q.quantize(fp8q.asarray(gpu_normed, dtype="bfloat16"),
                              "float8_e4m3fn", granularity="row")
        assert np.array_equal(np.asarray(fp8q.cast(again.data, "float32")),
                              gpu_codes)
        assert np.array_equal(np.asarray(again.scale), gpu_scale)
    assert rows >= FULL_DEVICE
