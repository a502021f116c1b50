/*
 * amax.cuh - launch contracts of the amax kernels (kernels/amax.cu): the
 * largest |x| of a contiguous run, or of each row of one, as float32 bits.
 *
 * Plain C as well as CUDA C++: the host side (csrc/cuda/, plain C) includes
 * this header for the argument structs and kernel names, and launches the
 * kernels from the embedded fatbin through the driver API with
 * void *params[] = {&args}.
 *
 * Results are the bits of a non-negative float32 (max |float32(x)|, with any
 * NaN winning, as csrc/core/amax.c), stored through a uint32_t pointer so a
 * float32 device buffer can receive them directly. Every block must be a
 * multiple of 32 threads, at most 1024 (256 is a good choice); no dynamic
 * shared memory. Source pointers are device pointers aligned to their
 * element size.
 *
 * Kernel "fp8q_amax" (FP8Q_AMAX_KERNEL):
 *     __global__ void fp8q_amax(const fp8q_amax_args args);
 *   Raises *amax_bits with atomicMax to the run's maximum, so the host sets
 *   it first (cuMemsetD32Async to 0 for a fresh result; leaving an earlier
 *   value accumulates over several runs). grid: any size >= 1 (grid-stride
 *   loop), e.g. ceil(count / (block * 16)) capped at a few blocks per
 *   multiprocessor. A 16-byte aligned source is read in 16-byte vectors.
 *
 * Kernel "fp8q_amax_rows" (FP8Q_AMAX_ROWS_KERNEL):
 *     __global__ void fp8q_amax_rows(const fp8q_amax_rows_args args);
 *   The source is n_rows rows of row_length contiguous elements, each cut
 *   into segments of segment_length elements (the last one partial): the
 *   work items, n_rows * ceil(row_length / segment_length) of them in
 *   row-major order. Raises amax_bits[row] with atomicMax to the maximum of
 *   each of the row's segments, so the host clears the n_rows values first
 *   (an empty row stays 0). grid: any size >= 1; block b handles items b,
 *   b + grid, ... The host picks segment_length so that the items fill the
 *   device whatever the row count: one row of 16 M values is as many
 *   blocks as 16 M rows of one value (launch.c). A segment that starts
 *   16-byte aligned is read in 16-byte vectors; segment_length a multiple
 *   of 16 keeps every segment of an aligned row aligned.
 */
/*
 * Kernel "fp8q_amax_blocks" (FP8Q_AMAX_BLOCKS_KERNEL):
 *     __global__ void fp8q_amax_blocks(const fp8q_amax_blocks_args args);
 *   The source is n_rows rows of row_length contiguous elements, cut into
 *   blocks of block_rows x block_cols (edge blocks partial); writes
 *   amax_bits[(row / block_rows) * n_block_cols + column / block_cols] for
 *   every block (no need to clear it first), n_block_cols =
 *   ceil(row_length / block_cols). grid: any size >= 1; block b handles
 *   blocks b, b + grid, ... in row-major order (one block per output, up to
 *   65535 blocks, is the natural choice). One scale per column is blocks of
 *   n_rows x 1; one per 2-D tile, e.g. 128 x 128.
 */
/*
 * Kernel "fp8q_amax_columns" (FP8Q_AMAX_COLUMNS_KERNEL):
 *     __global__ void fp8q_amax_columns(const fp8q_amax_columns_args args);
 *   The source is n_rows rows of row_length contiguous elements; raises
 *   amax_bits[column] with atomicMax to each column's maximum, so the host
 *   clears the row_length values first. The work is cut into tiles of
 *   FP8Q_AMAX_COLUMNS_ROWS rows by blockDim.x columns; block b handles tiles
 *   b, b + grid, ..., thread t the tile's column t: a warp reads 32
 *   consecutive elements of a row (coalesced). grid: any size >= 1.
 */
/*
 * Kernel "fp8q_amax_finite_rows" (FP8Q_AMAX_FINITE_ROWS_KERNEL):
 *     __global__ void fp8q_amax_finite_rows(const fp8q_amax_finite_rows_args args);
 *   Calibration's amax (csrc/core/amax.c, fp8q_amax_finite): like
 *   fp8q_amax_rows (segments, amax_bits raised, so cleared first) over the
 *   finite values only (a row with none stays 0), and *nonfinite_count
 *   raised (atomicAdd) by the number of NaN and infinite values seen, so
 *   the host clears it first. grid and block as fp8q_amax_rows.
 */
#ifndef FP8Q_KERNELS_AMAX_CUH
#define FP8Q_KERNELS_AMAX_CUH

#include <stdint.h>

#define FP8Q_AMAX_KERNEL "fp8q_amax"
#define FP8Q_AMAX_ROWS_KERNEL "fp8q_amax_rows"
#define FP8Q_AMAX_BLOCKS_KERNEL "fp8q_amax_blocks"
#define FP8Q_AMAX_COLUMNS_KERNEL "fp8q_amax_columns"
#define FP8Q_AMAX_COLUMNS_ROWS 64
#define FP8Q_AMAX_FINITE_ROWS_KERNEL "fp8q_amax_finite_rows"

/* This file's kernels, X(fp8q_cuda_kernel value, name in the image)
 * each: csrc/registries.py collects every header's list into
 * cuda/kernel_list.h's FP8Q_CUDA_KERNEL_LIST. */
#define FP8Q_AMAX_KERNELS(X)                                      \
    X(FP8Q_KERNEL_AMAX, FP8Q_AMAX_KERNEL)                         \
    X(FP8Q_KERNEL_AMAX_ROWS, FP8Q_AMAX_ROWS_KERNEL)               \
    X(FP8Q_KERNEL_AMAX_BLOCKS, FP8Q_AMAX_BLOCKS_KERNEL)           \
    X(FP8Q_KERNEL_AMAX_COLUMNS, FP8Q_AMAX_COLUMNS_KERNEL)         \
    X(FP8Q_KERNEL_AMAX_FINITE_ROWS, FP8Q_AMAX_FINITE_ROWS_KERNEL)

/* 32 bytes (4 of them tail padding, the same for every 64-bit compiler). */
typedef struct fp8q_amax_args {
    const void *source;   /* count elements of source_dtype             */
    uint32_t *amax_bits;  /* one uint32 (float32 bits), raised          */
    int64_t count;        /* elements, >= 0                             */
    int32_t source_dtype; /* an fp8q_dtype value (core/dtype.h)         */
} fp8q_amax_args;

/* 48 bytes (4 of them tail padding). */
typedef struct fp8q_amax_rows_args {
    const void *source;     /* n_rows * row_length elements of source_dtype */
    uint32_t *amax_bits;    /* n_rows uint32 (float32 bits), raised         */
    int64_t n_rows;         /* >= 0                                         */
    int64_t row_length;     /* >= 0                                         */
    int64_t segment_length; /* >= 1, elements per work item                 */
    int32_t source_dtype;   /* an fp8q_dtype value                          */
} fp8q_amax_rows_args;

/* 56 bytes (4 of them tail padding). */
typedef struct fp8q_amax_blocks_args {
    const void *source;   /* n_rows * row_length elements of source_dtype */
    uint32_t *amax_bits;  /* one uint32 (float32 bits) per block, written */
    int64_t n_rows;       /* >= 0                                          */
    int64_t row_length;   /* >= 0                                          */
    int64_t block_rows;   /* >= 1                                          */
    int64_t block_cols;   /* >= 1                                          */
    int32_t source_dtype; /* an fp8q_dtype value                          */
} fp8q_amax_blocks_args;

/* 40 bytes (4 of them tail padding). */
typedef struct fp8q_amax_columns_args {
    const void *source;   /* n_rows * row_length elements of source_dtype */
    uint32_t *amax_bits;  /* row_length uint32 (float32 bits), raised     */
    int64_t n_rows;       /* >= 0                                          */
    int64_t row_length;   /* >= 0                                          */
    int32_t source_dtype; /* an fp8q_dtype value                          */
} fp8q_amax_columns_args;

/* 56 bytes (4 of them tail padding). */
typedef struct fp8q_amax_finite_rows_args {
    const void *source;        /* n_rows * row_length elements           */
    uint32_t *amax_bits;       /* n_rows uint32 (float32 bits), raised    */
    uint64_t *nonfinite_count; /* one uint64, 8-byte aligned, raised      */
    int64_t n_rows;            /* >= 0                                    */
    int64_t row_length;        /* >= 0                                    */
    int64_t segment_length;    /* >= 1, elements per work item            */
    int32_t source_dtype;      /* an fp8q_dtype value                     */
} fp8q_amax_finite_rows_args;

#endif /* FP8Q_KERNELS_AMAX_CUH */
