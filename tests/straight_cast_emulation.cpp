/*
 * straight_cast_emulation.cpp - runs the straight casts of kernels/cast.cu
 * (kernels/straight_cast.cuh: the loops of fp8q_cast_to_fp8 and
 * fp8q_cast_from_fp8) on the host, each thread of a grid in turn, and
 * compares every element with csrc/core/float_codec.h's cast of it (the
 * CPU's function, with the scale addressing of kernels/cast.cuh computed
 * by plain division), and the amax with the largest magnitude.
 *
 * What it checks is the loops: vectors, the two in flight, the grid-stride
 * step, the run's tail, unaligned runs, the row tracker and the row and
 * block scale addressing, the fallbacks for non-finite codes and scales,
 * and infinity_to_nan (one scale, to FP8): an infinity gives the format's
 * NaN code with its own sign (whatever the scale's), every other element
 * the codec's cast. And fp8q_cast_from_fp8_wide's loop
 * (wide_from_fp8_thread): every one of the 256 codes of each format in
 * every position of a 16-code vector, each scaling, grids of one thread to
 * one vector a thread, its takes and its grid.
 * The conversions run through cuda_fp8.h / cuda_fp16.h's host code here,
 * not the GPU's instructions (tests/cuda_fp8_emulation.cpp checks those
 * against the codec under emulation, tests/test_cuda_ops.py on a GPU).
 * Built and run by tests/test_cuda_fp8_emulation.py:
 *
 *     g++ -O2 -I/usr/local/cuda/include -Icsrc -Ikernels \
 *         tests/straight_cast_emulation.cpp -o straight && ./straight
 *
 * Prints one line per case group and exits 1 on any mismatch.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "core/float_codec.h"
#include "cast_emulation.h"
#include "host_random.h"
#include "straight_cast.cuh"

static host_random generator = {0x9E3779B97F4A7C15ull};

/* A source element of dtype S: any FP8 code; a float of any magnitude
 * (with the specials now and then). */
static void fill_source(std::vector<uint8_t> &bytes, int64_t count, int dtype)
{
    for (int64_t i = 0; i < count; i++) {
        const uint32_t r = generator.next();
        const float x = random_value(generator, r);
        switch (dtype) {
        case FP8Q_FLOAT32: memcpy(&bytes[(size_t)i * 4], &x, 4); break;
        case FP8Q_FLOAT16: {
            const uint16_t h = fp8q_encode_float16(x);
            memcpy(&bytes[(size_t)i * 2], &h, 2);
            break;
        }
        case FP8Q_BFLOAT16: {
            const uint16_t b = fp8q_encode_bfloat16(x);
            memcpy(&bytes[(size_t)i * 2], &b, 2);
            break;
        }
        default: bytes[(size_t)i] = (uint8_t)r; break;
        }
    }
}

/* One layout of the run: rows x row_length elements, the scale groups
 * block_rows x block_cols (scale_cols groups a row), or one scale, or none. */
struct layout {
    int64_t rows, row_length;
    int scaling; /* straight_scaling */
    int64_t block_rows, block_cols;
};

static uint64_t mismatches, elements_checked, infinities_checked;

/* The arguments of a run of `shape` from source to destination (dtypes S
 * and D), scaled by `scales` as shape.scaling says (multiplying from FP8,
 * dividing to it), saturating, with the launch's fast divisors. */
static fp8q_cast_args layout_args(const layout &shape, const void *source, void *destination,
                                  const float *scales, int S, int D)
{
    const int64_t scale_cols = (shape.row_length + shape.block_cols - 1) / shape.block_cols;
    const int to_fp8 = D == FP8Q_FLOAT8_E4M3FN || D == FP8Q_FLOAT8_E5M2;
    fp8q_cast_args args;
    memset(&args, 0, sizeof args);
    args.source = source;
    args.destination = destination;
    args.count = shape.rows * shape.row_length;
    args.row_length = shape.row_length;
    args.scale_block_rows = shape.block_rows;
    args.scale_block_cols = shape.block_cols;
    args.source_dtype = S;
    args.destination_dtype = D;
    args.saturate = 1;
    args.scale_op = to_fp8 ? FP8Q_SCALE_DIVIDE : FP8Q_SCALE_MULTIPLY;
    if (shape.scaling != STRAIGHT_NO_SCALE) {
        args.scale = scales;
    }
    set_scale_addressing(args,
                         shape.scaling == STRAIGHT_PER_ROW     ? 1
                         : shape.scaling == STRAIGHT_PER_BLOCK ? scale_cols
                                                               : 0,
                         shape.scaling == STRAIGHT_PER_BLOCK ? 1 : 0);
    return args;
}

/* The scale of element i of a run of `shape` (by plain division). */
static float layout_scale(const layout &shape, const float *scales, int64_t i)
{
    const int64_t scale_cols = (shape.row_length + shape.block_cols - 1) / shape.block_cols;
    const int64_t row = i / shape.row_length, column = i % shape.row_length;
    if (shape.scaling == STRAIGHT_ONE_SCALE) {
        return scales[0];
    }
    if (shape.scaling == STRAIGHT_PER_ROW) {
        return scales[(size_t)row];
    }
    return scales[(size_t)((row / shape.block_rows) * scale_cols + column / shape.block_cols)];
}

/* INFINITY_NAN: args.infinity_to_nan set (one scale, to FP8 only), and an
 * infinite element expected as the format's NaN code with its sign. */
template <int S, int D, int SCALING, bool INFINITY_NAN = false>
static void run_case(const layout &shape, int64_t threads, int misaligned)
{
    const int64_t count = shape.rows * shape.row_length;
    const size_t in_size = itemsize(S), out_size = itemsize(D);
    const int64_t scale_rows = (shape.rows + shape.block_rows - 1) / shape.block_rows;
    const int64_t scale_cols = (shape.row_length + shape.block_cols - 1) / shape.block_cols;
    /* 16 bytes of room in front so that a misaligned run can start there. */
    std::vector<uint8_t> source((size_t)count * in_size + 16);
    std::vector<uint8_t> destination((size_t)count * out_size + 16, 0xA5);
    std::vector<float> scales((size_t)(scale_rows * scale_cols));
    const size_t offset_in = misaligned ? in_size : 0, offset_out = misaligned ? out_size : 0;
    std::vector<uint8_t> run_source((size_t)count * in_size);
    fill_source(run_source, count, S);
    memcpy(&source[offset_in], run_source.data(), run_source.size());
    for (size_t g = 0; g < scales.size(); g++) {
        scales[g] = interesting_scale(generator);
    }

    fp8q_cast_args args =
        layout_args(shape, &source[offset_in], &destination[offset_out], scales.data(), S, D);
    args.infinity_to_nan = INFINITY_NAN;
    const int to_fp8 = D == FP8Q_FLOAT8_E4M3FN || D == FP8Q_FLOAT8_E5M2;
    uint32_t amax_bits = 0u;
    if (to_fp8) {
        args.amax_bits = &amax_bits;
    }
    const int takes = to_fp8 ? fp8q_cast_to_fp8_takes(&args) : fp8q_cast_from_fp8_takes(&args);
    if (!takes || straight_scaling_of(args) != SCALING) {
        printf("layout not taken: S %d D %d scaling %d\n", S, D, SCALING);
        mismatches++;
        return;
    }

    uint32_t amax = 0u;
    for (int64_t first = 0; first < threads; first++) {
        const uint32_t thread_amax =
            straight_cast_thread<S, D, SCALING, INFINITY_NAN>(args, first, threads);
        amax = thread_amax > amax ? thread_amax : amax;
    }

    uint32_t expected_amax = 0u;
    for (int64_t i = 0; i < count; i++) {
        float value = codec_load(args.source, i, S);
        const uint32_t magnitude = fp8q_float_to_bits(value) & 0x7FFFFFFFu;
        const bool nan_code = INFINITY_NAN && isinf(value);
        const float source_value = value;
        expected_amax = magnitude > expected_amax ? magnitude : expected_amax;
        if (SCALING != STRAIGHT_NO_SCALE) {
            const float s = layout_scale(shape, scales.data(), i);
            value = fp8q_scaling_result(to_fp8 ? value / s : value * s, value, s);
        }
        const uint32_t got = element_bits(args.destination, i, D);
        const uint32_t want = nan_code ? codec_store_bits(copysignf(NAN, source_value), D, 1)
                                       : codec_store_bits(value, D, 1);
        infinities_checked += nan_code;
        if (got != want) {
            if (mismatches < 10) {
                printf("  mismatch: S %d D %d scaling %d threads %lld misaligned %d element %lld:"
                       " 0x%X, codec 0x%X\n",
                       S, D, SCALING, (long long)threads, misaligned, (long long)i, got, want);
            }
            mismatches++;
        }
        elements_checked++;
    }
    /* Nothing written outside the run. */
    for (size_t b = 0; b < offset_out; b++) {
        mismatches += destination[b] != 0xA5;
    }
    for (size_t b = offset_out + (size_t)count * out_size; b < destination.size(); b++) {
        mismatches += destination[b] != 0xA5;
    }
    if (to_fp8 && amax != expected_amax) {
        printf("  amax: S %d D %d scaling %d: 0x%08X, expected 0x%08X\n", S, D, SCALING, amax,
               expected_amax);
        mismatches++;
    }
}

/* Every grid size and alignment for one (S, D, scaling) and its layouts. */
template <int S, int D, int SCALING, bool INFINITY_NAN = false>
static void run_layouts(const layout *layouts, int n)
{
    static const int64_t grids[] = {1, 3, 32, 257};
    for (int l = 0; l < n; l++) {
        for (size_t g = 0; g < sizeof grids / sizeof grids[0]; g++) {
            for (int misaligned = 0; misaligned < 2; misaligned++) {
                run_case<S, D, SCALING, INFINITY_NAN>(layouts[l], grids[g], misaligned);
            }
        }
    }
}

/* Every scaling a straight kernel takes for (S, D), each over a few
 * layouts: runs with a tail, rows of one vector and of many, and (from FP8
 * only) blocks of vectors, 128 x 128 blocks among them. */
template <int S, int D> static void run_scalings(void)
{
    constexpr bool TO_FP8 = D == FP8Q_FLOAT8_E4M3FN || D == FP8Q_FLOAT8_E5M2;
    const int64_t vector = cast_vectors<S, D>::VECTOR;
    const layout whole[] = {{1, 1, STRAIGHT_NO_SCALE, 1, 1}, {1, 1003, STRAIGHT_NO_SCALE, 1, 1},
                            {7, 96, STRAIGHT_NO_SCALE, 1, 1}};
    const layout one[] = {{1, 1003, STRAIGHT_ONE_SCALE, 1, 1}, {5, 64, STRAIGHT_ONE_SCALE, 1, 1}};
    const layout rows[] = {{9, vector, STRAIGHT_PER_ROW, 1, 1},
                           {13, 5 * vector, STRAIGHT_PER_ROW, 1, 1},
                           {3, 64 * vector, STRAIGHT_PER_ROW, 1, 1}};
    const layout blocks[] = {{9, 6 * vector, STRAIGHT_PER_BLOCK, 2, 2 * vector},
                             {5, 4 * vector, STRAIGHT_PER_BLOCK, 3, vector},
                             {300, 160, STRAIGHT_PER_BLOCK, 128, 128},
                             {6, 8 * vector, STRAIGHT_PER_BLOCK, 1, 8 * vector}};
    for (int repeat = 0; repeat < 4; repeat++) {
        run_layouts<S, D, STRAIGHT_NO_SCALE>(whole, 3);
        run_layouts<S, D, STRAIGHT_ONE_SCALE>(one, 2);
        run_layouts<S, D, STRAIGHT_PER_ROW>(rows, 3);
        if constexpr (TO_FP8) {
            run_layouts<S, D, STRAIGHT_ONE_SCALE, true>(one, 2);
        }
        else {
            run_layouts<S, D, STRAIGHT_PER_BLOCK>(blocks, 4);
        }
    }
}

/* ------------------------------------------------------------------------- */
/* fp8q_cast_from_fp8_wide (wide_from_fp8_thread)                            */

static uint64_t wide_mismatches, wide_codes_seen[2][256];

/* One layout through the wide loop, every thread of a grid of `threads`:
 * every element the codec's code * scale, nothing written outside the
 * run. every_code: the codes run 0, 1, ..., 255, 0, ... (each of the 256
 * in every position of a vector), else random bytes. */
template <int S, int D, int SCALING>
static void run_wide_case(const layout &shape, int64_t threads, int every_code)
{
    const int64_t count = shape.rows * shape.row_length;
    const size_t out_size = itemsize(D);
    const int64_t scale_rows = (shape.rows + shape.block_rows - 1) / shape.block_rows;
    const int64_t scale_cols = (shape.row_length + shape.block_cols - 1) / shape.block_cols;
    /* 16-byte aligned storage with 16 bytes of poison on either side. */
    std::vector<uint64_t> source_words((size_t)(count / 8 + 2));
    std::vector<uint64_t> destination_words((size_t)(count * (int64_t)out_size / 8 + 4));
    uint8_t *source = (uint8_t *)source_words.data();
    uint8_t *destination_bytes = (uint8_t *)destination_words.data();
    std::vector<float> scales((size_t)(scale_rows * scale_cols));
    memset(destination_bytes, 0xA5, destination_words.size() * 8);
    uint8_t *destination = destination_bytes + 16;
    std::vector<uint8_t> codes((size_t)count);
    fill_source(codes, count, S);
    for (int64_t i = 0; i < count; i++) {
        source[i] = every_code ? (uint8_t)(i % 256) : codes[(size_t)i];
        wide_codes_seen[S == FP8Q_FLOAT8_E5M2][source[i]] = 1;
    }
    for (size_t g = 0; g < scales.size(); g++) {
        scales[g] = interesting_scale(generator);
    }

    const fp8q_cast_args args = layout_args(shape, source, destination, scales.data(), S, D);
    if (!fp8q_cast_from_fp8_wide_takes(&args) || straight_scaling_of(args) != SCALING) {
        printf("wide layout not taken: S %d D %d scaling %d\n", S, D, SCALING);
        wide_mismatches++;
        return;
    }
    for (int64_t first = 0; first < threads; first++) {
        wide_from_fp8_thread<S, D, SCALING>(args, first, threads);
    }
    for (int64_t i = 0; i < count; i++) {
        float value = codec_load(args.source, i, S);
        if (SCALING != STRAIGHT_NO_SCALE) {
            const float s = layout_scale(shape, scales.data(), i);
            value = fp8q_scaling_result(value * s, value, s);
        }
        const uint32_t got = element_bits(args.destination, i, D);
        const uint32_t want = codec_store_bits(value, D, 1);
        if (got != want) {
            if (wide_mismatches < 10) {
                printf("  wide mismatch: S %d D %d scaling %d threads %lld element %lld:"
                       " 0x%X, codec 0x%X\n",
                       S, D, SCALING, (long long)threads, (long long)i, got, want);
            }
            wide_mismatches++;
        }
        elements_checked++;
    }
    for (size_t b = 0; b < 16; b++) {
        wide_mismatches += destination_bytes[b] != 0xA5;
    }
    for (size_t b = 16 + (size_t)count * out_size; b < destination_words.size() * 8; b++) {
        wide_mismatches += destination_bytes[b] != 0xA5;
    }
}

/* Each layout of `layouts` (one scaling) through the wide loop on grids
 * of 1 and 3 threads and of one vector a thread (fp8q_cast_wide_blocks'
 * grid, blocks of 32 here). */
template <int S, int D, int SCALING, size_t N>
static void run_wide_layouts(const layout (&layouts)[N], int every_code)
{
    for (const layout &l : layouts) {
        const int64_t one_vector_a_thread =
            (int64_t)fp8q_cast_wide_blocks(l.rows * l.row_length, 32) * 32;
        for (int64_t threads : {(int64_t)1, (int64_t)3, one_vector_a_thread}) {
            run_wide_case<S, D, SCALING>(l, threads, every_code);
        }
    }
}

/* Every scaling the wide kernel takes for (S, D), over runs of one vector
 * and of many, rows of 16 to 4096 codes, and blocks of 16 and 128 x 128
 * codes; every code in every vector position, then random codes. */
template <int S, int D> static void run_wide_scalings(void)
{
    const layout whole[] = {{1, 16, STRAIGHT_NO_SCALE, 1, 1}, {1, 4096, STRAIGHT_NO_SCALE, 1, 1},
                            {3, 48, STRAIGHT_NO_SCALE, 1, 1}};
    const layout one[] = {{1, 1024, STRAIGHT_ONE_SCALE, 1, 1}, {5, 64, STRAIGHT_ONE_SCALE, 1, 1}};
    const layout rows[] = {{9, 16, STRAIGHT_PER_ROW, 1, 1},
                           {13, 80, STRAIGHT_PER_ROW, 1, 1},
                           {3, 4096, STRAIGHT_PER_ROW, 1, 1}};
    const layout blocks[] = {{9, 96, STRAIGHT_PER_BLOCK, 2, 32},
                             {5, 64, STRAIGHT_PER_BLOCK, 3, 16},
                             {300, 272, STRAIGHT_PER_BLOCK, 128, 128},
                             {6, 128, STRAIGHT_PER_BLOCK, 1, 128}};
    for (int every_code = 1; every_code >= 0; every_code--) {
        run_wide_layouts<S, D, STRAIGHT_NO_SCALE>(whole, every_code);
        run_wide_layouts<S, D, STRAIGHT_ONE_SCALE>(one, every_code);
        run_wide_layouts<S, D, STRAIGHT_PER_ROW>(rows, every_code);
        run_wide_layouts<S, D, STRAIGHT_PER_BLOCK>(blocks, every_code);
    }
}

/* The wide kernel's takes: unaligned pointers, counts and row lengths off
 * the 16-code vector, and blocks narrower than a vector go to
 * fp8q_cast_from_fp8 instead. */
static void check_wide_takes(void)
{
    alignas(16) static uint8_t codes[64];
    alignas(16) static uint16_t values[64];
    static float scale[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    fp8q_cast_args args;
    memset(&args, 0, sizeof args);
    args.source = codes;
    args.destination = values;
    args.count = 64;
    args.row_length = 32;
    args.scale_block_rows = 1;
    args.scale_block_cols = 32;
    args.source_dtype = FP8Q_FLOAT8_E4M3FN;
    args.destination_dtype = FP8Q_BFLOAT16;
    args.saturate = 1;
    args.scale_op = FP8Q_SCALE_MULTIPLY;
    args.scale = scale;
    args.scale_row_stride = 1;
    const int taken = fp8q_cast_from_fp8_wide_takes(&args);
    fp8q_cast_args other = args;
    other.source = codes + 16;
    other.count = 48;
    other.row_length = 16;
    const int taken_offset = fp8q_cast_from_fp8_wide_takes(&other);
    other = args;
    other.source = codes + 8;
    other.count = 56;
    const int unaligned_source = fp8q_cast_from_fp8_wide_takes(&other);
    other = args;
    other.destination = values + 1;
    const int unaligned_destination = fp8q_cast_from_fp8_wide_takes(&other);
    other = args;
    other.row_length = 8;
    other.scale_block_cols = 8;
    const int short_rows = fp8q_cast_from_fp8_wide_takes(&other);
    other = args;
    other.scale_row_stride = 8;
    other.scale_col_stride = 1;
    other.scale_block_cols = 8;
    const int narrow_blocks = fp8q_cast_from_fp8_wide_takes(&other);
    other = args;
    other.scale = NULL;
    other.count = 40;
    const int tail = fp8q_cast_from_fp8_wide_takes(&other);
    if (!taken || !taken_offset || unaligned_source || unaligned_destination || short_rows ||
        narrow_blocks || tail || !fp8q_cast_from_fp8_takes(&other)) {
        printf("  wide takes: %d %d %d %d %d %d %d\n", taken, taken_offset, unaligned_source,
               unaligned_destination, short_rows, narrow_blocks, tail);
        wide_mismatches++;
    }
    if (fp8q_cast_wide_blocks(1, 256) != 1 || fp8q_cast_wide_blocks(4096, 256) != 1 ||
        fp8q_cast_wide_blocks(4097, 256) != 2 || fp8q_cast_wide_blocks((int64_t)1 << 26, 256) != 16384 ||
        fp8q_cast_wide_blocks((int64_t)1 << 50, 256) != 0x7FFFFFFFu) {
        printf("  wide grid wrong\n");
        wide_mismatches++;
    }
}

int main(void)
{
    run_scalings<FP8Q_FLOAT32, FP8Q_FLOAT8_E4M3FN>();
    run_scalings<FP8Q_FLOAT32, FP8Q_FLOAT8_E5M2>();
    run_scalings<FP8Q_FLOAT16, FP8Q_FLOAT8_E4M3FN>();
    run_scalings<FP8Q_FLOAT16, FP8Q_FLOAT8_E5M2>();
    run_scalings<FP8Q_BFLOAT16, FP8Q_FLOAT8_E4M3FN>();
    run_scalings<FP8Q_BFLOAT16, FP8Q_FLOAT8_E5M2>();
    printf("fp8q_cast_to_fp8's loop: %llu mismatches\n", (unsigned long long)mismatches);
    printf("infinities cast with infinity_to_nan: %llu\n",
           (unsigned long long)infinities_checked);
    if (infinities_checked == 0) {
        mismatches++;
    }
    const uint64_t to_fp8_mismatches = mismatches;
    mismatches = 0;
    run_scalings<FP8Q_FLOAT8_E4M3FN, FP8Q_FLOAT32>();
    run_scalings<FP8Q_FLOAT8_E4M3FN, FP8Q_FLOAT16>();
    run_scalings<FP8Q_FLOAT8_E4M3FN, FP8Q_BFLOAT16>();
    run_scalings<FP8Q_FLOAT8_E5M2, FP8Q_FLOAT32>();
    run_scalings<FP8Q_FLOAT8_E5M2, FP8Q_FLOAT16>();
    run_scalings<FP8Q_FLOAT8_E5M2, FP8Q_BFLOAT16>();
    printf("fp8q_cast_from_fp8's loop: %llu mismatches\n", (unsigned long long)mismatches);
    check_wide_takes();
    run_wide_scalings<FP8Q_FLOAT8_E4M3FN, FP8Q_FLOAT32>();
    run_wide_scalings<FP8Q_FLOAT8_E4M3FN, FP8Q_FLOAT16>();
    run_wide_scalings<FP8Q_FLOAT8_E4M3FN, FP8Q_BFLOAT16>();
    run_wide_scalings<FP8Q_FLOAT8_E5M2, FP8Q_FLOAT32>();
    run_wide_scalings<FP8Q_FLOAT8_E5M2, FP8Q_FLOAT16>();
    run_wide_scalings<FP8Q_FLOAT8_E5M2, FP8Q_BFLOAT16>();
    uint64_t codes_seen = 0;
    for (int f = 0; f < 2; f++) {
        for (int c = 0; c < 256; c++) {
            codes_seen += wide_codes_seen[f][c];
        }
    }
    if (codes_seen != 512) {
        wide_mismatches++;
    }
    printf("fp8q_cast_from_fp8_wide's loop: %llu mismatches\n",
           (unsigned long long)wide_mismatches);
    printf("codes decoded by the wide loop: %llu of 512\n", (unsigned long long)codes_seen);
    printf("elements checked: %llu\n", (unsigned long long)elements_checked);
    return to_fp8_mismatches != 0 || mismatches != 0 || wide_mismatches != 0;
}
