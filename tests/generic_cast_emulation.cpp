/*
 * generic_cast_emulation.cpp - runs the generic casts of kernels/cast.cu
 * (kernels/generic_cast.cuh: the loops of fp8q_cast and fp8q_cast_uniform)
 * on the host, each thread of a grid in turn, for every (source,
 * destination) pair of the 8 cast dtypes, and compares every element with
 * csrc/core/float_codec.h's cast of it (the scale addressing of
 * kernels/cast.cuh computed by plain division, the scaling by the host's
 * float32 division / multiplication), and the amax with the largest
 * magnitude read.
 *
 * What it checks is the loops and their run-time dispatch: the compact
 * loop (vectors of 8 elements moved as raw words, the source decoded and
 * the destination encoded by a switch on the dtype, the same-dtype copy,
 * the called scaling), the compiled pairs of fp8q_cast (float32 / float16 /
 * bfloat16 to E4M3FN / E5M2), the grid-stride step, the run's tail,
 * unaligned runs, one scale, row, column and block scales with vectors in
 * one group or straddling two, divide and multiply, saturating or not, and
 * that nothing outside the run is written. The conversions run through
 * cuda_fp8.h / cuda_fp16.h's host code here, not the GPU's instructions.
 *
 * With an argument FILE it also writes one case per pair, layout (the
 * 128 x 128 blocks' aside), operation and saturation to FILE (records: see
 * write_record) for tests/test_cuda_fp8_emulation.py to check against
 * ml_dtypes and NumPy, an oracle independent of the codec. Built and run by that test:
 *
 *     g++ -O2 -I/usr/local/cuda/include -Icsrc -Ikernels \
 *         tests/generic_cast_emulation.cpp -o generic && ./generic [FILE]
 *
 * Prints one "MUST ...: N mismatches" line per kernel and exits 1 on any
 * mismatch.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "core/float_codec.h"
#include "generic_cast.cuh"
#include "cast_emulation.h"
#include "host_random.h"

static host_random generator = {0x2545F4914F6CDD1Dull};

static const int DTYPES[] = {FP8Q_FLOAT32,       FP8Q_FLOAT16,         FP8Q_BFLOAT16,
                             FP8Q_UINT8,         FP8Q_FLOAT8_E4M3FN,   FP8Q_FLOAT8_E5M2,
                             FP8Q_FLOAT8_E4M3FNUZ, FP8Q_FLOAT8_E5M2FNUZ};

/* Source elements: any bit pattern of a 1-byte dtype; floats of any
 * magnitude with the specials now and then (random bit patterns too, so
 * NaN payloads travel through the same-dtype copy). */
static void fill_source(uint8_t *bytes, int64_t count, int dtype)
{
    for (int64_t i = 0; i < count; i++) {
        const uint32_t r = generator.next();
        const float x = random_value(generator, r);
        const uint32_t pattern = generator.next();
        switch (itemsize(dtype)) {
        case 4: {
            const uint32_t bits = r % 13 == 0 ? pattern : fp8q_float_to_bits(x);
            memcpy(&bytes[(size_t)i * 4], &bits, 4);
            break;
        }
        case 2: {
            const uint16_t half = r % 13 == 0 ? (uint16_t)pattern
                                  : dtype == FP8Q_FLOAT16 ? fp8q_encode_float16(x)
                                                          : fp8q_encode_bfloat16(x);
            memcpy(&bytes[(size_t)i * 2], &half, 2);
            break;
        }
        default: bytes[(size_t)i] = (uint8_t)r; break;
        }
    }
}

/* How a run finds its scales (kernels/cast.cuh's addressing). */
enum scaling { NO_SCALE, ONE_SCALE, PER_ROW, PER_COLUMN, PER_BLOCK };

/* One layout of a run: rows x row_length elements, the scale groups
 * block_rows x block_cols. */
struct layout {
    int64_t rows, row_length;
    int scaling;
    int64_t block_rows, block_cols;
};

static uint64_t mismatches[2], elements_checked[2];

/* Which loop ran a case: the kernel the host would launch for it. */
enum kernel { UNIFORM, INDEXED };

template <int S> struct compiled_to {
    const fp8q_cast_args &args;
    int64_t first, threads;
    uint32_t amax;
    template <int D> void run()
    {
        if constexpr ((S == FP8Q_FLOAT32 || S == FP8Q_FLOAT16 || S == FP8Q_BFLOAT16) &&
                      (D == FP8Q_FLOAT8_E4M3FN || D == FP8Q_FLOAT8_E5M2)) {
            amax = compiled_cast_thread<S, D, true>(args, first, threads);
        }
    }
};

struct compiled_from {
    const fp8q_cast_args &args;
    int64_t first, threads;
    uint32_t amax;
    template <int S> void run()
    {
        compiled_to<S> body = {args, first, threads, 0u};
        dispatch_dtype(args.destination_dtype, body);
        amax = body.amax;
    }
};

/* The loop `kernel_of` runs for args (as fp8q_cast and fp8q_cast_uniform
 * choose, kernels/cast.cu), every thread of a grid of `threads`; the
 * largest amax a thread returned. */
static uint32_t run_threads(int kernel_of, const fp8q_cast_args &args, int64_t threads)
{
    uint32_t amax = 0u;
    for (int64_t first = 0; first < threads; first++) {
        uint32_t thread_amax;
        if (kernel_of == UNIFORM) {
            thread_amax = compact_cast_thread<false>(args, first, threads);
        }
        else if (compiled_cast_pair(args.source_dtype, args.destination_dtype)) {
            compiled_from body = {args, first, threads, 0u};
            dispatch_dtype(args.source_dtype, body);
            thread_amax = body.amax;
        }
        else {
            thread_amax = compact_cast_thread<true>(args, first, threads);
        }
        amax = thread_amax > amax ? thread_amax : amax;
    }
    return amax;
}

/* The record of one case for the Python oracle: 11 int64 (source dtype,
 * destination dtype, scale operation, saturate, count, row_length,
 * block_rows, block_cols, row stride, column stride, number of scales),
 * then the scales (float32), the source and the destination bytes. */
static void write_record(FILE *file, const fp8q_cast_args &args, const float *scales,
                         int64_t n_scales)
{
    const int64_t header[11] = {args.source_dtype, args.destination_dtype, args.scale_op,
                                args.saturate,     args.count,             args.row_length,
                                args.scale_block_rows, args.scale_block_cols,
                                args.scale == NULL ? -1 : args.scale_row_stride,
                                args.scale_col_stride, n_scales};
    fwrite(header, sizeof header, 1, file);
    fwrite(scales, sizeof(float), (size_t)n_scales, file);
    fwrite(args.source, itemsize(args.source_dtype), (size_t)args.count, file);
    fwrite(args.destination, itemsize(args.destination_dtype), (size_t)args.count, file);
}

/* One case: S to D over `shape`, scaled by `op` (when scaled), saturate,
 * the amax asked for or not, on `threads` threads, the run misaligned by
 * one element or not; its record written to `dump` unless NULL. */
static void run_case(int S, int D, const layout &shape, int op, int saturate, int track_amax,
                     int64_t threads, int misaligned, FILE *dump)
{
    const int64_t count = shape.rows * shape.row_length;
    const size_t in_size = itemsize(S), out_size = itemsize(D);
    const int64_t scale_rows = (shape.rows + shape.block_rows - 1) / shape.block_rows;
    const int64_t scale_cols = (shape.row_length + shape.block_cols - 1) / shape.block_cols;
    /* 16-byte aligned storage with 16 bytes of poison in front (where a
     * misaligned run starts) and behind. */
    std::vector<uint64_t> source_words((size_t)(count * (int64_t)in_size / 8 + 5));
    std::vector<uint64_t> destination_words((size_t)(count * (int64_t)out_size / 8 + 5));
    uint8_t *source = (uint8_t *)source_words.data() + 16 + (misaligned ? in_size : 0);
    uint8_t *destination_bytes = (uint8_t *)destination_words.data();
    uint8_t *destination = destination_bytes + 16 + (misaligned ? out_size : 0);
    std::vector<float> scales((size_t)(scale_rows * scale_cols));
    memset(destination_bytes, 0xA5, destination_words.size() * 8);
    fill_source(source, count, S);
    for (size_t g = 0; g < scales.size(); g++) {
        scales[g] = interesting_scale(generator);
    }

    fp8q_cast_args args;
    memset(&args, 0, sizeof args);
    args.source = source;
    args.destination = destination;
    args.count = count;
    args.row_length = shape.row_length;
    args.scale_block_rows = shape.block_rows;
    args.scale_block_cols = shape.block_cols;
    args.source_dtype = S;
    args.destination_dtype = D;
    args.scale_op = op;
    args.saturate = saturate;
    if (shape.scaling != NO_SCALE) {
        args.scale = scales.data();
    }
    set_scale_addressing(args,
                         shape.scaling == PER_ROW     ? 1
                         : shape.scaling == PER_BLOCK ? scale_cols
                                                      : 0,
                         shape.scaling == PER_COLUMN || shape.scaling == PER_BLOCK ? 1 : 0);
    uint32_t amax_bits = 0u;
    if (track_amax) {
        args.amax_bits = &amax_bits;
    }
    const int kernel_of = fp8q_cast_uniform_takes(&args) ? UNIFORM : INDEXED;
    const uint32_t amax = run_threads(kernel_of, args, threads);

    uint32_t expected_amax = 0u;
    for (int64_t i = 0; i < count; i++) {
        const float value = codec_load(source, i, S);
        const uint32_t magnitude = fp8q_float_to_bits(value) & 0x7FFFFFFFu;
        expected_amax = magnitude > expected_amax ? magnitude : expected_amax;
        uint32_t want;
        if (shape.scaling == NO_SCALE) {
            want = S == D ? element_bits(source, i, S) : codec_store_bits(value, D, saturate);
        }
        else {
            const int64_t row = i / shape.row_length, column = i % shape.row_length;
            const int64_t group = (row / shape.block_rows) * args.scale_row_stride +
                                  (column / shape.block_cols) * args.scale_col_stride;
            const float s = scales[(size_t)group];
            const float scaled = fp8q_scaling_result(
                op == FP8Q_SCALE_MULTIPLY ? value * s : value / s, value, s);
            want = codec_store_bits(scaled, D, saturate);
        }
        const uint32_t got = element_bits(destination, i, D);
        if (got != want) {
            if (mismatches[kernel_of] < 10) {
                printf("  mismatch: kernel %d S %d D %d scaling %d op %d saturate %d threads "
                       "%lld misaligned %d element %lld: 0x%X, codec 0x%X\n",
                       kernel_of, S, D, shape.scaling, op, saturate, (long long)threads,
                       misaligned, (long long)i, got, want);
            }
            mismatches[kernel_of]++;
        }
        elements_checked[kernel_of]++;
    }
    /* Nothing written outside the run. */
    for (uint8_t *b = destination_bytes; b < destination; b++) {
        mismatches[kernel_of] += *b != 0xA5;
    }
    for (uint8_t *b = destination + count * (int64_t)out_size;
         b < destination_bytes + destination_words.size() * 8; b++) {
        mismatches[kernel_of] += *b != 0xA5;
    }
    if (track_amax && amax != expected_amax) {
        printf("  amax: kernel %d S %d D %d scaling %d: 0x%08X, expected 0x%08X\n", kernel_of, S,
               D, shape.scaling, amax, expected_amax);
        mismatches[kernel_of]++;
    }
    if (dump != NULL) {
        write_record(dump, args, scales.data(), (int64_t)scales.size());
    }
}

int main(int argc, char **argv)
{
    FILE *dump = argc > 1 ? fopen(argv[1], "wb") : NULL;
    if (argc > 1 && dump == NULL) {
        printf("cannot write %s\n", argv[1]);
        return 1;
    }
    /* Runs with a tail, rows of whole vectors and of odd lengths (vectors
     * straddling two scale groups), 128-wide blocks. */
    const layout layouts[] = {
        {1, 1, NO_SCALE, 1, 1},     {1, 1003, NO_SCALE, 1, 1},   {7, 96, NO_SCALE, 1, 1},
        {1, 1003, ONE_SCALE, 1, 1}, {5, 64, ONE_SCALE, 1, 1},    {13, 40, PER_ROW, 1, 1},
        {9, 13, PER_ROW, 1, 1},     {6, 24, PER_COLUMN, 1, 1},   {9, 48, PER_BLOCK, 2, 16},
        {5, 36, PER_BLOCK, 3, 12},  {130, 160, PER_BLOCK, 128, 128}, {7, 11, PER_BLOCK, 2, 3}};
    static const int64_t grids[] = {1, 3, 257};
    for (int s = 0; s < 8; s++) {
        for (int d = 0; d < 8; d++) {
            for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
                for (int op = 0; op < 2; op++) {
                    for (int saturate = 0; saturate < 2; saturate++) {
                        if (layouts[l].scaling == NO_SCALE && op == 1) {
                            continue; /* the operation is unused without a scale */
                        }
                        for (size_t g = 0; g < sizeof grids / sizeof grids[0]; g++) {
                            for (int misaligned = 0; misaligned < 2; misaligned++) {
                                const int first = g == 0 && misaligned == 0 && layouts[l].rows < 100;
                                run_case(DTYPES[s], DTYPES[d], layouts[l], op, saturate,
                                         (int)(generator.next() & 1u), grids[g], misaligned,
                                         first ? dump : NULL);
                            }
                        }
                    }
                }
            }
        }
    }
    if (dump != NULL) {
        fclose(dump);
    }
    printf("elements checked: %llu uniform, %llu indexed\n",
           (unsigned long long)elements_checked[UNIFORM],
           (unsigned long long)elements_checked[INDEXED]);
    printf("MUST fp8q_cast_uniform's loop: %llu mismatches\n",
           (unsigned long long)mismatches[UNIFORM]);
    printf("MUST fp8q_cast's loops: %llu mismatches\n", (unsigned long long)mismatches[INDEXED]);
    return mismatches[UNIFORM] + mismatches[INDEXED] == 0 ? 0 : 1;
}
