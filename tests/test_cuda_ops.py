"""fp8q's CUDA kernels on a real GPU: cast, amax, quantize and dequantize
bit-identical to the CPU path (itself checked against ml_dtypes and NumPy by
the rest of the suite), scaled_mm through cuBLASLt within the CPU path's
bounds and against torch._scaled_mm, and zero-copy DLPack exchange with
PyTorch CUDA tensors both ways.

Every test carries the `cuda` marker and skips, saying why, where fp8q
cannot use a GPU. .ci/gpu-check runs them on a GPU machine.
"""
import os

import numpy as np
import pytest

import fp8q
from helpers import (FP8_NAMES, OUTPUT_UNIT, fp8_matmul_error_bound,
                     same_bits, scaled_mm_operands)

pytestmark = pytest.mark.cuda

DTYPES = ["float32", "float16", "bfloat16", "uint8"] + FP8_NAMES
# scaled_mm's paths, as fp8q.info() and FP8Q_LOG name them.
ONE_CALL_PADDED_PATH = ("one cuBLASLt call on operands padded to multiples "
                        "of 16")
FP8_PATH = "cuBLASLt FP8 product + epilogue kernel"
BFLOAT16_PATH = "bfloat16 product of the decoded codes + epilogue kernel"
FLOAT32_PATH = "float32 product of block-scaled operands + epilogue kernel"


@pytest.fixture(scope="module", autouse=True)
def gpu():
    cuda = fp8q.info()["cuda"]
    if not cuda["available"]:
        pytest.skip(f"no usable CUDA GPU: {cuda['reason']}")


def every_16_bit_pattern(name):
    """All 65,536 codes of float16 or bfloat16, as an fp8q tensor."""
    codes = fp8q.asarray(np.arange(65536, dtype=np.uint16).view(np.float16))
    return codes if name == "float16" else codes.view(name)


def specials_and_random(rng, count):
    x = rng.standard_normal(count).astype(np.float32)
    x *= np.float32(2.0) ** rng.integers(-24, 24, size=count)
    x[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, 500.0, -60000.0]
    return x


@pytest.mark.parametrize("source", ["float16", "bfloat16"])
@pytest.mark.parametrize("target", FP8_NAMES + ["float32", "float16",
                                                "bfloat16", "uint8"])
def test_every_16_bit_input_matches_the_cpu(source, target):
    x = every_16_bit_pattern(source)
    gx = x.to("cuda")
    scales = [None, 0.375] if target in FP8_NAMES else [None]
    for scale in scales:
        for saturate in (True, False):
            expected = fp8q.cast(x, target, scale=scale, saturate=saturate)
            got = fp8q.cast(gx, target, scale=scale, saturate=saturate)
            assert same_bits(got.cpu().numpy(), expected.numpy()), (
                source, target, scale, saturate)


def float32_boundary_patterns(start=0, stop=1 << 16):
    """Every sign, exponent and top 7 fraction bits of float32, with the low
    16 bits around each FP8 rounding point (0, 1, 0x7FFF, 0x8000, 0x8001,
    0xFFFF): the inputs where a rounding or saturation rule shows."""
    high = np.arange(start, stop, dtype=np.uint32) << 16
    lows = np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF], np.uint32)
    return (high[:, None] | lows[None, :]).reshape(-1).view(np.float32)


@pytest.mark.parametrize("target", FP8_NAMES)
def test_float32_rounding_boundaries_match_the_cpu(target):
    """The saturating E4M3FN / E5M2 encodes are cuda_fp8.h's hardware
    conversion on sm_89+ (kernels/fp8_hardware.cuh); the rest the codec.
    FP8Q_EXHAUSTIVE=1 checks every float32 instead (minutes)."""
    chunks = ([float32_boundary_patterns()]
              if os.environ.get("FP8Q_EXHAUSTIVE") != "1" else
              (np.arange(first, first + (1 << 28), dtype=np.uint64).astype(
                  np.uint32).view(np.float32)
               for first in range(0, 1 << 32, 1 << 28)))
    for x in chunks:
        gx = fp8q.asarray(x, device="cuda")
        for saturate in (True, False):
            expected = fp8q.cast(x, target, saturate=saturate).numpy()
            got = fp8q.cast(gx, target, saturate=saturate).cpu().numpy()
            bad = np.flatnonzero(expected.view(np.uint8) != got.view(np.uint8))
            assert bad.size == 0, (
                target, saturate, bad.size,
                f"first input 0x{x.view(np.uint32)[bad[0]]:08X}: GPU "
                f"0x{got.view(np.uint8)[bad[0]]:02X}, CPU "
                f"0x{expected.view(np.uint8)[bad[0]]:02X}")


@pytest.mark.parametrize("source", DTYPES)
def test_every_dtype_pair_matches_the_cpu(source, rng):
    # Odd sizes and offsets: the 16-byte vector path, its tail, and the
    # element-by-element path of misaligned pointers.
    x = fp8q.asarray(specials_and_random(rng, 100_003), dtype=source)
    for target in DTYPES:
        expected = fp8q.cast(x, target)
        got = fp8q.cast(x.to("cuda"), target)
        assert same_bits(got.cpu().numpy(), expected.numpy()), (source,
                                                                target)


def test_scale_layouts_match_the_cpu(rng):
    x = specials_and_random(rng, 4 * 6 * 256).reshape(4, 6, 256)
    gx = fp8q.asarray(x, device="cuda")
    positive = lambda shape: (np.abs(rng.standard_normal(shape)) + 0.05  # noqa: E731
                              ).astype(np.float32)
    for shape in [(), (4, 6, 1), (256,), (4, 6, 256), (4, 1, 1), (4, 1, 256)]:
        scale = positive(shape)
        for target in FP8_NAMES:
            expected = fp8q.cast(x, target, scale=scale).numpy()
            for given in (scale, fp8q.asarray(scale, device="cuda")):
                got = fp8q.cast(gx, target, scale=given)
                assert same_bits(got.cpu().numpy(), expected), (shape, target)


def quotients_near_rounding_boundaries(rng, rows):
    """(x, scales): row r of x holds scales[r] times every E4M3FN and E5M2
    value and every midpoint between neighbours (the FP8 rounding
    boundaries), each moved 0 to 3 float32 steps either way, both signs,
    so that x / scales[r] lands on or next to a boundary (the steps below
    zero are NaN patterns)."""
    codes = np.arange(256, dtype=np.uint8)
    grid = []
    for name in ("float8_e4m3fn", "float8_e5m2"):
        values = fp8q.cast(fp8q.asarray(codes).view(name), "float32").numpy()
        values = np.unique(values[np.isfinite(values) & (values >= 0)])
        grid += [values, (values[:-1] + values[1:]) / 2, [values[-1] * 1.04]]
    grid = np.concatenate(grid).astype(np.float32)
    scales = np.concatenate([
        [0.375, 1 / 3, 448 / 1000, 2.0 ** -10, 1.0],
        rng.uniform(1, 2, rows - 5) * 2.0 ** rng.integers(-30, 30, rows - 5),
    ]).astype(np.float32)
    x = grid[None, :] * scales[:, None]
    bits = x.view(np.uint32)[:, :, None] + np.arange(-3, 4, dtype=np.int32
                                                     ).astype(np.uint32)
    x = bits.view(np.float32).reshape(rows, -1)
    x[:, ::2] *= -1
    return np.ascontiguousarray(x[:, :x.shape[1] // 8 * 8]), scales


@pytest.mark.parametrize("source", ["float32", "bfloat16", "float16"])
def test_quotients_near_rounding_boundaries_match_the_cpu(source, rng):
    """fp8q_cast_to_fp8 and the row quantize take the codes of x / s from
    x * RN(1 / s) where that provably gives them and divide elsewhere
    (kernels/fp8_hardware.cuh): on the quotients closest to each rounding
    boundary, per-row and per-tensor scales, the CPU's bits."""
    x, scales = quotients_near_rounding_boundaries(rng, 64)
    host = fp8q.asarray(x, dtype=source)
    device = host.to("cuda")
    for target in ("float8_e4m3fn", "float8_e5m2"):
        row_scales = scales[:, None]
        expected = fp8q.cast(host, target, scale=row_scales).numpy()
        got = fp8q.cast(device, target, scale=fp8q.asarray(
            row_scales, device="cuda")).cpu().numpy()
        assert same_bits(got, expected), (source, target, "row scales")
        for row in (0, 1, 7, 40):
            one_row = fp8q.asarray(x[row], dtype=source)
            expected = fp8q.cast(one_row, target, scale=scales[row]).numpy()
            got = fp8q.cast(one_row.to("cuda"), target,
                            scale=scales[row]).cpu().numpy()
            assert same_bits(got, expected), (source, target, scales[row])


def dequantize_scales(rng, count):
    """count float32 scales: ordinary ones, and those whose products
    overflow float16 / bfloat16 / float32, fall below their normal range or
    tie, and the non-finite, zero and negative ones (the straight kernel's
    element-by-element fallback)."""
    fixed = [1.0, 0.375, 2.0 ** -6, 1 / 3, 1e30, 1e36, 2.0 ** -20, 1e-30,
             1e-41, 0.0, -2.5, np.inf, -np.inf, np.nan]
    rest = rng.uniform(1, 2, count - len(fixed)) * 2.0 ** rng.integers(
        -30, 30, count - len(fixed))
    return np.concatenate([fixed, rest]).astype(np.float32)


@pytest.mark.parametrize("source", FP8_NAMES)
def test_dequantize_every_code_matches_the_cpu(source, rng):
    """fp8q_cast_from_fp8_wide (rows of 256 codes: 16 a thread) and
    fp8q_cast_from_fp8 (rows of 264, and 1 x 8 blocks: four codes decoded
    at a time, one float32 product, paired conversions on sm_80+), E4M3FN /
    E5M2 to float32 / float16 / bfloat16, on every code times scales of
    every kind, per tensor, per row and per block, and without a scale:
    the CPU's bits."""
    for width in (256, 264):
        dequantize_every_code(source, rng, width)


def dequantize_every_code(source, rng, width):
    rows = 64
    codes = np.tile(np.arange(256, dtype=np.uint8), (rows, 1))
    codes[1::2] = codes[1::2, ::-1]  # vectors mixing special codes and not
    codes = np.concatenate([codes, codes[:, :width - 256]], axis=1)
    data = fp8q.asarray(codes).view(source)
    scales = dequantize_scales(rng, rows)
    blocks = -(-width // 8)
    layouts = [("row", scales[:, None]),
               ((1, 8), rng.permutation(np.resize(
                   scales, rows * blocks)).reshape(rows, blocks).astype(
                       np.float32)),
               ((128, 128), np.resize(scales, (1, -(-width // 128))))]
    layouts += [("tensor", np.float32(s)) for s in scales[:16]]
    for granularity, scale in layouts:
        host = fp8q.QTensor(data, fp8q.asarray(scale), granularity)
        on_gpu = host.to("cuda")
        for dtype in ("float32", "float16", "bfloat16"):
            assert same_bits(on_gpu.dequantize(dtype).cpu().numpy(),
                             host.dequantize(dtype).numpy()), (
                granularity, dtype, scale if np.ndim(scale) == 0 else None)
    for dtype in ("float32", "float16", "bfloat16"):
        assert same_bits(fp8q.cast(data.to("cuda"), dtype).cpu().numpy(),
                         fp8q.cast(data, dtype).numpy()), dtype


@pytest.mark.parametrize("source", DTYPES)
def test_amax_matches_the_cpu(source, rng):
    values = specials_and_random(rng, 3 * 5000).reshape(3, 5000)
    values[0, :8] = 1.0  # row 0 without specials; NaN sits in no other row
    values[1:, :8] = rng.standard_normal((2, 8))
    values[2, 4999] = np.nan
    x = fp8q.asarray(values, dtype=source)
    gx = x.to("cuda")
    for axis in (None, -1, 0, (0, 1)):
        for keepdims in (False, True):
            expected = fp8q.amax(x, axis=axis, keepdims=keepdims).numpy()
            got = fp8q.amax(gx, axis=axis, keepdims=keepdims)
            assert got.device == "cuda:0"
            assert same_bits(got.cpu().numpy(), expected), (source, axis)


def test_cast_records_amax_in_the_same_pass(rng):
    x = fp8q.asarray(rng.standard_normal(1 << 20).astype(np.float32) * 7,
                     dtype="bfloat16")
    gx = x.to("cuda")
    amax = fp8q.zeros((), device="cuda")
    q = fp8q.cast(gx, "e4m3", scale=0.03125, amax_out=amax)
    assert same_bits(q.cpu().numpy(),
                     fp8q.cast(x, "e4m3", scale=0.03125).numpy())
    assert same_bits(amax.cpu().numpy(), fp8q.amax(x).numpy())


@pytest.mark.parametrize("granularity", ["tensor", "row", "col", (1, 128),
                                         (128, 128), (3, 5)])
@pytest.mark.parametrize("source", ["float32", "bfloat16", "float16"])
def test_quantize_and_dequantize_match_the_cpu(granularity, source, rng):
    x32 = (rng.standard_normal((300, 520)) * np.float32(2.0) **
           rng.integers(-8, 8, size=(300, 1))).astype(np.float32)
    x32[7] = 0.0
    x = fp8q.asarray(x32, dtype=source)
    gx = x.to("cuda")
    for target in FP8_NAMES:
        for power_of_2 in (False, True):
            expected = fp8q.quantize(x, target, granularity=granularity,
                                     power_of_2=power_of_2)
            got = fp8q.quantize(gx, target, granularity=granularity,
                                power_of_2=power_of_2)
            assert same_bits(got.scale.cpu().numpy(), expected.scale.numpy())
            assert same_bits(got.data.cpu().numpy(), expected.data.numpy())
            for dtype in ("float32", "bfloat16", "float16"):
                assert same_bits(got.dequantize(dtype).cpu().numpy(),
                                 expected.dequantize(dtype).numpy())


@pytest.mark.parametrize("source", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("row_length", [1, 7, 33, 1000, 4096, 8192, 16383,
                                        16384, 16385])
def test_one_pass_row_quantize_matches_the_cpu(source, row_length, rng):
    """The one-pass kernel (rows up to 16384) and the fallback beyond it:
    scales and codes bit-identical to the CPU, random and special values
    (the CPU refuses non-finite rows: those are checked against the cast
    with the GPU's scale)."""
    # Row magnitudes spread over 2^+-20 (2^+-8 for float16, whose range
    # ends at 65504: the data must fit the dtype under test).
    spread = 8 if source == "float16" else 20
    x32 = (rng.standard_normal((37, row_length)) * np.float32(2.0) **
           rng.integers(-spread, spread, size=(37, 1))).astype(np.float32)
    x32[3] = 0.0
    edge = np.array([1e-40, -0.0, 448.0, -57344.0], np.float32)
    x32[4, :edge.size] = edge[:row_length]
    x = fp8q.asarray(x32, dtype=source)
    gx = x.to("cuda")
    for target in FP8_NAMES:
        for power_of_2, saturate in ((False, True), (True, True),
                                     (False, False)):
            expected = fp8q.quantize(x, target, granularity="row",
                                     power_of_2=power_of_2, saturate=saturate)
            got = fp8q.quantize(gx, target, granularity="row",
                                power_of_2=power_of_2, saturate=saturate)
            key = (source, row_length, target, power_of_2, saturate)
            assert same_bits(got.scale.cpu().numpy(),
                             expected.scale.numpy()), key
            assert same_bits(got.data.cpu().numpy(),
                             expected.data.numpy()), key
    special = x32.copy()
    special[5, 0] = np.nan
    special[6, -1] = -np.inf
    got = fp8q.quantize(fp8q.asarray(special, dtype=source, device="cuda"),
                        granularity="row")
    scale = got.scale.cpu().numpy()
    assert np.isnan(scale[5, 0]) and np.isinf(scale[6, 0])
    finite = np.isfinite(scale[:, 0])
    expected = fp8q.cast(fp8q.asarray(special[finite], dtype=source), "e4m3",
                         scale=scale[finite])
    assert same_bits(got.data.cpu().numpy()[finite], expected.numpy())


@pytest.mark.parametrize("source", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("rows, row_length", [(3000, 4096), (40000, 37),
                                              (600, 16384)])
def test_row_quantize_of_more_rows_than_blocks_matches_the_cpu(
        source, rows, row_length, rng):
    """More rows than the device holds blocks: each block quantizes several
    rows, loading the next while it quantizes one (16-bit sources,
    kernels/quantize_rows_loop.cuh); scales and codes bit-identical to the
    CPU, for vector rows and element-by-element ones (37 elements)."""
    spread = 8 if source == "float16" else 20
    x32 = (rng.standard_normal((rows, row_length)) * np.float32(2.0) **
           rng.integers(-spread, spread, size=(rows, 1))).astype(np.float32)
    x32[7::11] = 0.0
    x = fp8q.asarray(x32, dtype=source)
    gx = x.to("cuda")
    for target, saturate in (("e4m3", True), ("e5m2", True),
                             ("e4m3", False)):
        expected = fp8q.quantize(x, target, granularity="row",
                                 saturate=saturate)
        got = fp8q.quantize(gx, target, granularity="row", saturate=saturate)
        key = (target, saturate)
        assert same_bits(got.scale.cpu().numpy(),
                         expected.scale.numpy()), key
        assert same_bits(got.data.cpu().numpy(), expected.data.numpy()), key


@pytest.mark.parametrize("channel_axis", [None, 0, -1])
@pytest.mark.parametrize("source", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("options", [{}, {"history_len": 3},
                                     {"history_len": 2, "algo": "most_recent"},
                                     {"momentum": 0.9}])
def test_max_calibrator_on_the_gpu_matches_the_cpu(channel_axis, source,
                                                   options, rng):
    """MaxCalibrator reduces CUDA batches on the GPU (finite amax per
    channel, non-finite values counted) and keeps its running maximum,
    window or moving average there: the same amax bits and counts as the
    CPU calibrator, over random and special values."""
    import fp8q.calib

    on_gpu = fp8q.calib.MaxCalibrator(channel_axis=channel_axis, **options)
    on_host = fp8q.calib.MaxCalibrator(channel_axis=channel_axis, **options)
    for _ in range(4):
        x = specials_and_random(rng, 257 * 1031).reshape(257, 1031)
        x[rng.integers(0, 257, 5), rng.integers(0, 1031, 5)] = np.nan
        data = fp8q.asarray(x, dtype=source)
        on_gpu.update(data.to("cuda"), skip_nonfinite=True)
        on_host.update(data, skip_nonfinite=True)
        assert same_bits(np.asarray(on_gpu.amax, np.float32),
                         np.asarray(on_host.amax, np.float32))
        assert on_gpu.nonfinite_count == on_host.nonfinite_count


@pytest.mark.parametrize("bins, skip_zeros", [(2048, False), (2048, True),
                                               (100, False), (8192, False)])
@pytest.mark.parametrize("source", ["float32", "bfloat16", "float16"])
def test_histogram_calibrator_on_the_gpu_matches_the_cpu(bins, skip_zeros,
                                                        source, rng):
    """HistogramCalibrator counts CUDA batches on the GPU (shared-memory bins
    up to 2048, global atomics beyond) into a state kept there: bit for bit
    the CPU calibrator's counts, grid and amax, over batches growing the
    range with zeros, subnormals, NaN and inf; a refused batch raises at the
    next read and the state keeps every other batch."""
    import fp8q.calib

    on_gpu = fp8q.calib.HistogramCalibrator(bins, skip_zeros)
    on_host = fp8q.calib.HistogramCalibrator(bins, skip_zeros)
    for index in range(4):
        x = specials_and_random(rng, 257 * 1031).reshape(257, 1031)
        x *= np.float32(2.0) ** (4 * index)
        x[rng.integers(0, 257, 50), rng.integers(0, 1031, 50)] = 0.0
        data = fp8q.asarray(x, dtype=source)
        on_gpu.update(data.to("cuda").T, skip_nonfinite=True)
        on_host.update(data.T, skip_nonfinite=True)
    on_gpu.update(data.to("cuda"))  # NaN/inf: refused on the GPU
    with pytest.raises(ValueError, match=r"update 5 .*skip_nonfinite=True"):
        on_gpu.counts
    assert np.array_equal(on_gpu.counts, on_host.counts)
    assert on_gpu.bin_width == on_host.bin_width
    assert on_gpu.amax == on_host.amax
    assert on_gpu.nonfinite_count == on_host.nonfinite_count


@pytest.mark.parametrize("bins", [2048, 65536])
def test_histogram_of_tiny_values_matches_the_cpu(bins, rng):
    """The count kernel takes bins in float32 where that is exact (bin
    exponents from -127 on, core/histogram_bins.h) and in double below:
    batches whose amax is subnormal or just above it, counted on the GPU,
    give the CPU calibrator's counts on grids on both sides."""
    import fp8q.calib

    on_gpu = fp8q.calib.HistogramCalibrator(bins)
    on_host = fp8q.calib.HistogramCalibrator(bins)
    for power in (-148, -140, -130, -120, -100):
        x = (np.abs(rng.standard_normal(40_000)) * np.float32(2.0) ** power
             ).astype(np.float32)
        on_gpu.update(fp8q.asarray(x, device="cuda"))
        on_host.update(x)
        assert np.array_equal(on_gpu.counts, on_host.counts), power
        assert on_gpu.bin_width == on_host.bin_width, power


def test_computed_nans_have_the_cpus_bits():
    """A group holding inf gets the scale inf, and inf / inf is a NaN
    computed on the GPU: it must take the CPU's bits (the positive quiet NaN
    0x7FC00000, code 0x7F), not the GPU's canonical 0x7FFFFFFF (nor x86's
    0xFFC00000, code 0xFF). csrc/core/float_codec.h, fp8q_scaling_result."""
    x = np.ones((3, 40), np.float32)
    x[1, 2] = np.nan
    x[2, 3] = np.inf
    x[2, 4] = -np.inf
    q = fp8q.quantize(fp8q.asarray(x, device="cuda"), granularity="row")
    codes = q.data.cpu().numpy().view(np.uint8)
    assert (codes[1] == 0x7F).all(), codes[1]
    assert codes[2, 3] == 0x7F and codes[2, 4] == 0x7F, codes[2]
    wide = q.dequantize("float32").cpu().numpy().view(np.uint32)
    assert wide[2, 3] == 0x7FC00000 and wide[2, 4] == 0x7FC00000


@pytest.mark.parametrize("shape", [(1, 1), (33, 65), (1024, 4096),
                                   (4096, 96)])
def test_quantize_transposed_matches_the_cpu(shape, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    expected = fp8q.quantize(x, granularity="row", transpose=True)
    got = fp8q.quantize(fp8q.asarray(x, device="cuda"), granularity="row",
                        transpose=True)
    assert same_bits(got.transposed.cpu().numpy(),
                     expected.transposed.numpy())


# --------------------------------------------------------------------------
# scaled_mm


@pytest.mark.parametrize("m, k, n", [(1, 16, 8), (7, 40, 24), (64, 512, 384),
                                     (300, 1024, 1040)])
@pytest.mark.parametrize("granularity", ["tensor", "row", "block"])
@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16",
                                       "float8_e4m3fn"])
def test_scaled_mm_matches_the_cpu(m, k, n, granularity, out_dtype, rng):
    a, b, scale_a, scale_b = scaled_mm_operands(rng, m, k, n, granularity)
    bias = rng.standard_normal(n).astype(np.float32)
    keywords = dict(out_dtype=out_dtype, bias=bias)
    if out_dtype == "float8_e4m3fn":
        keywords["scale_result"] = 0.5
    expected = np.asarray(fp8q.scaled_mm(a, b, scale_a, scale_b,
                                         **keywords).numpy(), np.float64)
    # Poisoned first: every element must be written.
    out = fp8q.asarray(np.full((m, n), np.nan, np.float32), dtype=out_dtype,
                       device="cuda")
    fp8q.scaled_mm(a.to("cuda"), b.T.to("cuda").T, scale_a, scale_b,
                   out=out, **keywords)
    assert_within_the_fp8_bound(out, expected, a, b, scale_a, scale_b,
                                keywords)


@pytest.mark.parametrize("granularity", ["tensor", "row", "block"])
@pytest.mark.parametrize("out_dtype, bias_dtype", [
    ("bfloat16", "bfloat16"), ("float16", "float16"),
    ("float32", "bfloat16"), ("float8_e4m3fn", "bfloat16"),
    ("float8_e4m3fn", "float16")])
def test_scaled_mm_in_one_cublaslt_call(granularity, out_dtype, bias_dtype,
                                        rng):
    """Shapes and types the one cuBLASLt call takes (docs/scaled_mm.md: K a
    multiple of 128 for block scales, a bias of cuBLASLt's type, amax of an
    FP8 result) against the CPU, within the FP8 tensor-core bound; on GPUs
    or cuBLASLt releases without the modes, the fallback paths answer."""
    import ml_dtypes
    m, k, n = 200, 1024, 384
    a, b, scale_a, scale_b = scaled_mm_operands(rng, m, k, n, granularity)
    bias = rng.standard_normal(n).astype(
        {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16}[bias_dtype])
    keywords = dict(out_dtype=out_dtype, bias=bias)
    fp8_out = out_dtype == "float8_e4m3fn"
    if fp8_out:
        keywords["scale_result"] = 0.5
    host_amax = np.zeros(1, np.float32)
    expected = np.asarray(fp8q.scaled_mm(
        a, b, scale_a, scale_b, **keywords,
        **({"amax_out": host_amax} if fp8_out else {})).numpy(), np.float64)
    amax = fp8q.asarray(np.full(1, np.nan, np.float32), device="cuda")
    out = fp8q.asarray(np.full((m, n), np.nan, np.float32), dtype=out_dtype,
                       device="cuda")
    fp8q.scaled_mm(a.to("cuda"), b.T.to("cuda").T, scale_a.to("cuda"),
                   scale_b.to("cuda"), out=out, **keywords,
                   **({"amax_out": amax} if fp8_out else {}))
    abs_products = assert_within_the_fp8_bound(out, expected, a, b, scale_a,
                                               scale_b, keywords)
    if fp8_out:
        got_amax = float(amax.cpu().numpy()[0])
        bound = fp8_matmul_error_bound(abs_products, k, "float32",
                                       host_amax)
        assert abs(got_amax - host_amax[0]) <= np.max(bound), (
            got_amax, host_amax[0])


@pytest.mark.parametrize("granularity, k", [("block", 384), ("block", 128),
                                             ("row", 1024),
                                             ("tensor", 1024)])
def test_scaled_mm_with_gpu_scale_result(granularity, k, rng):
    """A scale_result on the GPU (D's scale computed there; block scales
    of b padded to L4 = 4 for K = 384) against the CPU with the same host
    scale_result, within the FP8 bound; and the same bits as the GPU with
    the host scale_result (both round 1 / scale_result once)."""
    m, n = 64, 256
    a, b, scale_a, scale_b = scaled_mm_operands(rng, m, k, n, granularity)
    keywords = dict(out_dtype="float8_e4m3fn", scale_result=0.3)
    expected = np.asarray(fp8q.scaled_mm(a, b, scale_a, scale_b,
                                         **keywords).numpy(), np.float64)
    operands = (a.to("cuda"), b.T.to("cuda").T, scale_a.to("cuda"),
                scale_b.to("cuda"))
    on_gpu = fp8q.scaled_mm(*operands, out_dtype="float8_e4m3fn",
                            scale_result=fp8q.asarray(np.float32(0.3),
                                                      device="cuda"))
    on_host = fp8q.scaled_mm(*operands, **keywords)
    assert_within_the_fp8_bound(on_gpu, expected, a, b, scale_a, scale_b,
                                keywords)
    assert same_bits(on_gpu.cpu().numpy(), on_host.cpu().numpy())


def test_info_reports_the_paths_the_switches_choose():
    """The path of each scaling mode fp8q.info() reports for this GPU
    follows the switches (docs/scaled_mm.md, "Switches"; .ci/gpu-check runs
    the CUDA tests under each): the exact paths without FP8 tensor cores,
    under FP8Q_CUDA_NO_FP8_TENSOR_CORES=1 and FP8Q_CUDA_SCALED_MM_PATH=exact;
    the FP8 product + epilogue kernel for tensorwise and rowwise under
    =epilogue; tensorwise on padded operands under =padded; else tensorwise
    in one cuBLASLt call."""
    exact = {"tensorwise": "cuda: " + BFLOAT16_PATH,
             "rowwise": "cuda: " + BFLOAT16_PATH,
             "blockwise": "cuda: " + FLOAT32_PATH}
    cuda = fp8q.info()["cuda"]
    forced = cuda["switches"]["FP8Q_CUDA_SCALED_MM_PATH"]
    for device in cuda["devices"]:
        paths = device["ops"]["scaled_mm"]
        if (not device["native_fp8"] or forced == "exact" or
                cuda["switches"]["FP8Q_CUDA_NO_FP8_TENSOR_CORES"]):
            assert paths == exact, paths
        elif forced == "epilogue":
            assert paths == dict(exact, tensorwise="cuda: " + FP8_PATH,
                                 rowwise="cuda: " + FP8_PATH), paths
        elif forced == "padded":
            assert paths["tensorwise"] == "cuda: " + ONE_CALL_PADDED_PATH, (
                paths)
        else:
            assert paths["tensorwise"] == "cuda: one cuBLASLt call", paths


@pytest.mark.parametrize("single", ["scale_a", "scale_b"])
def test_rowwise_scales_with_one_single_side_match_the_cpu(single, rng):
    """Rowwise scales with one side a single value, repeated (what
    fp8q.linear passes for a tensorwise weight): cuBLASLt's rowwise mode
    would read M or N values there, so these take the epilogue kernel;
    within the FP8 bound of the CPU."""
    m, k, n = 64, 512, 384
    a, b, scale_a, scale_b = scaled_mm_operands(rng, m, k, n, "row")
    one = fp8q.asarray(np.float32(0.75))
    scales = (one, scale_b) if single == "scale_a" else (scale_a, one)
    keywords = dict(out_dtype="bfloat16")
    expected = np.asarray(fp8q.scaled_mm(a, b, *scales, **keywords).numpy(),
                          np.float64)
    out = fp8q.scaled_mm(a.to("cuda"), b.T.to("cuda").T,
                         *(scale.to("cuda") for scale in scales), **keywords)
    assert_within_the_fp8_bound(out, expected, a, b, *scales, keywords)


def absolute(codes):
    """|x| of FP8 codes (the sign bit cleared), as a tensor of their dtype."""
    host = codes.cpu() if hasattr(codes, "cpu") else codes
    bits = np.asarray(host.view("uint8").numpy()) & np.uint8(0x7F)
    return fp8q.asarray(np.ascontiguousarray(bits)).view(codes.dtype)


def assert_within_the_fp8_bound(out, expected, a, b, scale_a, scale_b,
                                keywords):
    """Every element of the GPU's `out` written, finite and within the FP8
    tensor-core bound (tests/helpers.py, docs/numerics.md) of the CPU's
    `expected` for scaled_mm(a, b, scale_a, scale_b, **keywords); sum |a||b|
    is the same product on the codes' absolute values, which is returned
    (before any scale_result)."""
    got = np.asarray(out.cpu().numpy(), np.float64)
    assert np.isfinite(got).all()
    abs_products = fp8q.scaled_mm(absolute(a), absolute(b), scale_a,
                                  scale_b, out_dtype="float32").numpy()
    scale = 1 / keywords.get("scale_result", 1.0)
    bound = fp8_matmul_error_bound(abs_products * scale, a.shape[1],
                                   keywords["out_dtype"], expected)
    assert np.all(np.abs(got - expected) <= bound), (
        np.max(np.abs(got - expected) / bound))
    return abs_products




@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this PyTorch has no CUDA")
    return torch


def test_torch_cuda_tensors_both_ways_zero_copy(torch):
    x = torch.randn(64, 128, device="cuda", dtype=torch.bfloat16)
    t = fp8q.from_dlpack(x)
    assert t.device == "cuda:0" and t.data_ptr == x.data_ptr()
    q = fp8q.cast(t, "e4m3", scale=0.5)
    back = torch.from_dlpack(q.view("uint8")).view(torch.float8_e4m3fn)
    assert back.device.type == "cuda"
    assert back.data_ptr() == q.data_ptr
    expected = (x.float() / 0.5).clamp(-448, 448).to(torch.float8_e4m3fn)
    assert torch.equal(back.view(torch.uint8), expected.view(torch.uint8))


def test_torch_streams(torch):
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        x = torch.randn(1 << 20, device="cuda")
    t = fp8q.from_dlpack(x, stream=stream)
    amax = fp8q.amax(t, stream=stream)
    stream.synchronize()
    assert float(amax.cpu().numpy()) == float(x.abs().max())
    # The legacy default stream, ordered after `stream` by fp8q.
    q = fp8q.cast(t, "e5m2")
    expected = x.to(torch.float8_e5m2)
    assert torch.equal(torch.from_dlpack(q.view("uint8")).cpu(),
                       expected.view(torch.uint8).cpu())


def test_scaled_mm_agrees_with_torch_scaled_mm(torch):
    import fp8q.torch as fpt

    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("torch._scaled_mm needs FP8 tensor cores (sm_89+)")
    generator = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(256, 1024, device="cuda", generator=generator)
    w = torch.randn(512, 1024, device="cuda", generator=generator)
    scale_x = x.abs().amax() / 448
    scale_w = w.abs().amax() / 448
    qx = (x / scale_x).to(torch.float8_e4m3fn)
    qw = (w / scale_w).to(torch.float8_e4m3fn)
    expected = torch._scaled_mm(qx, qw.t(), scale_a=scale_x, scale_b=scale_w,
                                out_dtype=torch.bfloat16)
    got = fp8q.scaled_mm(fp8q.from_dlpack(qx), fp8q.from_dlpack(qw).T,
                         fp8q.from_dlpack(scale_x), fp8q.from_dlpack(scale_w))
    ours = fpt.to_torch(got)
    # Both are FP8 tensor-core products of the same codes: each within the
    # bound of the exact result, so within twice of each other.
    abs_products = (qx.float().abs() @ qw.float().abs().t()) * (
        scale_x * scale_w)
    bound = 2 * fp8_matmul_error_bound(abs_products.cpu().double().numpy(),
                                       1024, "bfloat16",
                                       expected.float().cpu().numpy())
    difference = (ours.float() - expected.float()).abs().cpu().double()
    assert np.all(difference.numpy() <= bound)


def test_torch_offset_and_strided_views(torch):
    x = torch.randn(1001, device="cuda")[1:]  # 4-byte aligned, not 16
    t = fp8q.from_dlpack(x)
    assert same_bits(fp8q.cast(t, "e4m3").cpu().numpy(),
                     fp8q.cast(x.cpu().numpy(), "e4m3").numpy())
    m = torch.randn(32, 48, device="cuda").t()
    assert same_bits(fp8q.from_dlpack(m).cpu().numpy(), m.cpu().numpy())


# --------------------------------------------------------------------------
# fp8q.torch on the GPU


@pytest.mark.parametrize("activations", [None, "e4m3"])
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_quantized_model_on_the_gpu_matches_the_cpu(torch, activations,
                                                    dtype_name):
    import fp8q.torch as fpt

    dtype = getattr(torch, dtype_name)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                                torch.nn.Linear(512, 128)).to(dtype)
    fpt.quantize(model, activations=activations)
    x = torch.randn(4, 9, 256, dtype=dtype)
    last_inputs = []
    hook = model[2].register_forward_hook(
        lambda module, inputs, output: last_inputs.append(inputs[0]))
    with torch.no_grad():
        expected = model(x)
        model.to("cuda")
        got = model(x.to("cuda"))
    hook.remove()
    assert got.device.type == "cuda" and got.dtype == dtype
    # The last layer's input differs by the first layer's error, so each of
    # its elements may quantize (per token, e4m3) to the neighbouring code:
    # one rounding flip is up to 2^-3 of the element (6-12%), and the last
    # layer sums them weighted by |W|. Weight-only layers see the input's
    # own rounding (out dtype) instead. Then the FP8 product's own bound.
    hidden = last_inputs[0].double().abs().reshape(-1, 512)
    weight = (model[2].weight.float() * model[2].weight_scale).cpu()
    weight = weight.double().abs()
    flip = 2.0 ** -3 if activations else 2 * OUTPUT_UNIT[dtype_name]
    abs_products = (hidden @ weight.t()).numpy()
    expected64 = expected.double().reshape(-1, 128).numpy()
    bound = (flip * abs_products + fp8_matmul_error_bound(
        abs_products, 512, dtype_name, expected64))
    difference = (got.cpu().double() - expected.double()).abs()
    assert np.all(difference.reshape(-1, 128).numpy() <= bound)


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("poison", [float("nan"), float("inf")])
@pytest.mark.parametrize("tokens", [2, 6])
def test_nonfinite_token_on_the_gpu_gives_a_nonfinite_row_only(
        torch, static, poison, tokens):
    """W8A8 on the GPU gives a non-finite row for a non-finite token without
    a host wait (quantize + FP8 GEMM: a NaN row, through its NaN or
    infinite scale, or with a static scale the NaN code the quantize gives
    an infinity, infinity_to_nan; the weight-only product that few tokens
    take: what the float layer gives, NaN or +-inf); the others equal the
    batch without it. 2 and 6 tokens: on each side of the crossover where FP8
    tensor cores are used (csrc/cuda/layer_path.c; the batch without the
    token is on the same side)."""
    import fp8q.torch as fpt

    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(256, 128))
    fpt.quantize(model, activations="e4m3")
    if static:
        with fpt.calibrate(model), torch.no_grad():
            model(torch.randn(8, 256))
        fpt.freeze(model)
    model.to("cuda")
    x = torch.randn(tokens, 256, device="cuda")
    x[1, 17] = poison
    with torch.no_grad():
        y = model(x)
        kept = [row for row in range(tokens) if row != 1]
        assert not torch.isfinite(y[1]).any()
        device = fp8q.info()["cuda"]["devices"][x.device.index or 0]
        if poison != poison or (
                tokens > device["fp8_layer_weight_only_tokens"]):
            assert torch.isnan(y[1]).all()
        # cuBLASLt may pick another algorithm for one row fewer: equal
        # within the accumulation's error, not bit for bit.
        torch.testing.assert_close(y[kept], model(x[kept]), rtol=2e-2,
                                   atol=1e-3)


# ---------------------------------------------------------------------------
# The weight-only product (kernels/gemv.cuh) and the row kernels' segments


def test_weight_only_product_matches_the_reference():
    """_C.layer_gemv on the GPU: fake_gpu_kernels' scenarios (every tile,
    CUDA-core and tensor-core, k split over the grid or not, scale
    granularity, x, weight and bias dtype against float64), run on the real
    kernels."""
    import fake_gpu_kernels
    fake_gpu_kernels.gemv_matches_the_reference()
    fake_gpu_kernels.tensor_core_gemv_matches_the_reference()
    fake_gpu_kernels.split_gemv_matches_the_reference()
    fake_gpu_kernels.narrow_gemv_splits_on_the_cuda_cores()
    fake_gpu_kernels.gemv_decodes_every_code()
    fake_gpu_kernels.gemv_declines_what_it_does_not_take()
    fake_gpu_kernels.linear_weight_only_runs_every_row()


@pytest.mark.parametrize("shape", [(1, 1 << 22), (3, 1000003), (4096, 33)])
def test_segmented_row_amax_matches_the_cpu(shape):
    """Rows cut into segments (one row of 4 M values fills the GPU): the
    per-row amax and the calibrators' finite amax and non-finite count are
    the CPU's exactly."""
    import fp8q.calib
    rng = np.random.default_rng(9)
    x = specials_and_random(rng, shape[0] * shape[1]).reshape(shape)
    host = fp8q.asarray(x, dtype="bfloat16")
    gpu = host.to("cuda")
    assert same_bits(np.asarray(fp8q.amax(gpu, axis=1).cpu()),
                     np.asarray(fp8q.amax(host, axis=1)))
    for channel_axis in (None, 0):
        on_gpu = fp8q.calib.MaxCalibrator(channel_axis=channel_axis)
        on_host = fp8q.calib.MaxCalibrator(channel_axis=channel_axis)
        on_gpu.update(gpu, skip_nonfinite=True)
        on_host.update(host, skip_nonfinite=True)
        assert same_bits(np.asarray(on_gpu.amax, np.float32),
                         np.asarray(on_host.amax, np.float32))
        assert on_gpu.nonfinite_count == on_host.nonfinite_count
