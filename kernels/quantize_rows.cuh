/*
 * quantize_rows.cuh - launch contract of the one-pass per-row (per-token)
 * quantize kernel (kernels/quantize_rows.cu): each row's amax, its scale
 * (csrc/core/scale_formula.h) and its FP8 codes in one kernel, the row held
 * in registers, so the input is read once. quantize(granularity="row") on
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
 */
#ifndef FP8Q_KERNELS_QUANTIZE_ROWS_CUH
#define FP8Q_KERNELS_QUANTIZE_ROWS_CUH

#include <stdint.h>

#define FP8Q_QUANTIZE_ROWS_KERNEL "fp8q_quantize_rows"
#define FP8Q_QUANTIZE_ROWS_PER_THREAD 16
#define FP8Q_QUANTIZE_ROWS_MAX_THREADS 1024
#define FP8Q_QUANTIZE_ROWS_MAX_LENGTH \
    (FP8Q_QUANTIZE_ROWS_PER_THREAD * FP8Q_QUANTIZE_ROWS_MAX_THREADS)

/* 64 bytes (4 of them tail padding). */
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
} fp8q_quantize_rows_args;

#endif /* FP8Q_KERNELS_QUANTIZE_ROWS_CUH */
