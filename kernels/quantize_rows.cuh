/*
 * quantize_rows.cuh - launch contract of the one-pass per-row (per-token)
 * quantize kernel (kernels/quantize_rows.cu): each row's amax, its scale
 * (csrc/core/scale_formula.h) and its FP8 codes in one kernel, the row held
 * in registers, so the input is read once; and its warp-per-row variant for
 * float16 / bfloat16 rows. quantize(granularity="row") on
 * CUDA uses it for float32 / float16 / bfloat16 rows of up to
 * FP8Q_QUANTIZE_ROWS_MAX_LENGTH elements (longer rows: amax, scale and cast
 * kernels in turn).
 *
 * Plain C as well as CUDA C++ (the host side includes it).
 *
 * Kernel "fp8q_quantize_rows" (FP8Q_QUANTIZE_ROWS_KERNEL):
 *     __global__ void fp8q_quantize_rows(const fp8q_quantize_rows_args args);
 *   The source is n_rows rows of row_length contiguous elements. For each
 *   row r:
 *     amax = max |load(source[r, c])| (float32 magnitude bits, NaN wins),
 *     scale[r] = fp8q_scale_from_amax(amax, max, power_of_2),
 *     destination[r, c] = encode(source[r, c] / scale[r], saturate)
 *   with the same load, correctly rounded division, NaN rule
 *   (fp8q_scaling_result) and encode as the cast kernel, so the results are
 *   bit-identical to the amax_rows + scales_from_amax + cast sequence and to
 *   csrc/core/quantize.c.
 *   block: a multiple of 32 threads, at most FP8Q_QUANTIZE_ROWS_MAX_THREADS,
 *   with block * FP8Q_QUANTIZE_ROWS_PER_THREAD >= row_length (each thread
 *   holds up to FP8Q_QUANTIZE_ROWS_PER_THREAD elements of the row); no
 *   dynamic shared memory. grid: any size >= 1; block b handles rows b,
 *   b + grid, ..., loading each row while it quantizes the one before
 *   (16-bit sources, saturating E4M3FN / E5M2), so the natural grid is the
 *   blocks the device holds at once, or one per row when there are fewer
 *   rows. row_length >= 1. Rows are read in 16-byte vectors when source and
 *   destination rows are aligned for them, element by element otherwise.
 *   (The block loop; it ignores warps_per_row.)
 *
 * Kernel "fp8q_quantize_rows_warps" (FP8Q_QUANTIZE_ROWS_WARPS_KERNEL), the
 *   same parameter and results, for the arguments
 *   fp8q_quantize_rows_warps_take accepts only (16-bit rows of a whole
 *   number of 16-byte vectors, to saturating E4M3FN / E5M2), with
 *   warps_per_row = G = fp8q_quantize_rows_warps_per_row(row_length). A
 *   row is held by G warps, FP8Q_QUANTIZE_ROWS_WARP_CHUNKS 16-byte vectors a
 *   thread; its amax is reduced by warp shuffles, and across the G warps
 *   through shared memory with one __syncthreads per row when G > 1 (none
 *   when G is 1). block: exactly R * G * 32 threads, R = the rows a block
 *   holds at once, FP8Q_QUANTIZE_ROWS_WARPS_PER_BLOCK / G (rounded down).
 *   grid: any size >= 1; block b handles rows b * R .. b * R + R - 1, then
 *   (b + grid) * R .., and so on, so the natural grid is ceil(n_rows / R)
 *   held to the blocks the device holds at once.
 */
#ifndef FP8Q_KERNELS_QUANTIZE_ROWS_CUH
#define FP8Q_KERNELS_QUANTIZE_ROWS_CUH

#include <stdint.h>

#include "core/dtype.h"

#define FP8Q_QUANTIZE_ROWS_KERNEL "fp8q_quantize_rows"
#define FP8Q_QUANTIZE_ROWS_WARPS_KERNEL "fp8q_quantize_rows_warps"

/* This file's kernels, X(fp8q_cuda_kernel value, name in the image)
 * each: csrc/registries.py collects every header's list into
 * cuda/kernel_list.h's FP8Q_CUDA_KERNEL_LIST. */
#define FP8Q_QUANTIZE_ROWS_KERNELS(X)                                   \
    X(FP8Q_KERNEL_QUANTIZE_ROWS, FP8Q_QUANTIZE_ROWS_KERNEL)             \
    X(FP8Q_KERNEL_QUANTIZE_ROWS_WARPS, FP8Q_QUANTIZE_ROWS_WARPS_KERNEL)

#define FP8Q_QUANTIZE_ROWS_PER_THREAD 16
#define FP8Q_QUANTIZE_ROWS_MAX_THREADS 1024
#define FP8Q_QUANTIZE_ROWS_MAX_LENGTH \
    (FP8Q_QUANTIZE_ROWS_PER_THREAD * FP8Q_QUANTIZE_ROWS_MAX_THREADS)
/* The warp loop: 16-byte vectors held a thread, warps a block. */
#define FP8Q_QUANTIZE_ROWS_WARP_CHUNKS 8
#define FP8Q_QUANTIZE_ROWS_WARPS_PER_BLOCK 8
/* Elements of a 16-bit row one warp of the warp loop holds (2048). */
#define FP8Q_QUANTIZE_ROWS_WARP_ELEMENTS \
    (32 * FP8Q_QUANTIZE_ROWS_WARP_CHUNKS * 8)

/* 64 bytes, no padding. */
typedef struct fp8q_quantize_rows_args {
    const void *source;        /* n_rows * row_length elements: float32,
                                  float16 or bfloat16                       */
    uint8_t *destination;      /* n_rows * row_length FP8 codes             */
    float *scale;              /* n_rows float32 scales, written            */
    int64_t n_rows;            /* >= 0                                      */
    int64_t row_length;        /* 1 .. FP8Q_QUANTIZE_ROWS_MAX_LENGTH        */
    int32_t source_dtype;      /* FP8Q_FLOAT32, FP8Q_FLOAT16, FP8Q_BFLOAT16 */
    int32_t destination_dtype; /* one of the four FP8 fp8q_dtype values     */
    float max;                 /* the format's largest finite value         */
    int32_t power_of_2;        /* nonzero: scales rounded up to powers of 2 */
    int32_t saturate;          /* nonzero: FP8 overflow saturates to +-max  */
    int32_t warps_per_row;     /* fp8q_quantize_rows_warps: G, 1 .. 8 (above);
                                  fp8q_quantize_rows ignores it             */
} fp8q_quantize_rows_args;

/* Nonzero when fp8q_quantize_rows_warps takes `args`: a float16 / bfloat16 source, a
 * saturating float8_e4m3fn / float8_e5m2 destination, rows of a multiple of
 * 8 elements (whole 16-byte vectors) up to FP8Q_QUANTIZE_ROWS_MAX_LENGTH, the
 * source 16-byte and the destination 8-byte aligned (so every row is). The
 * host's choice of loop and the fake driver's check. */
static inline int fp8q_quantize_rows_warps_take(const fp8q_quantize_rows_args *args)
{
    const int source_ok = args->source_dtype == FP8Q_FLOAT16 ||
                          args->source_dtype == FP8Q_BFLOAT16;
    const int destination_ok = args->destination_dtype == FP8Q_FLOAT8_E4M3FN ||
                               args->destination_dtype == FP8Q_FLOAT8_E5M2;
    return source_ok && destination_ok && args->saturate != 0 &&
           args->row_length >= 8 && args->row_length % 8 == 0 &&
           args->row_length <= FP8Q_QUANTIZE_ROWS_MAX_LENGTH &&
           (uintptr_t)args->source % 16u == 0 &&
           (uintptr_t)args->destination % 8u == 0;
}

/* G, the warps that hold a row of `row_length` elements in
 * fp8q_quantize_rows_warps:
 * ceil(row_length / FP8Q_QUANTIZE_ROWS_WARP_ELEMENTS), 1 to 8. */
static inline int fp8q_quantize_rows_warps_per_row(int64_t row_length)
{
    return (int)((row_length + FP8Q_QUANTIZE_ROWS_WARP_ELEMENTS - 1) /
                 FP8Q_QUANTIZE_ROWS_WARP_ELEMENTS);
}

#endif /* FP8Q_KERNELS_QUANTIZE_ROWS_CUH */
