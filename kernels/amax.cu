/*
 * amax.cu - amax kernels: max |x| over a contiguous run (every block reduces
 * its part, then one atomicMax on the float32 bits per block), over each
 * row of a contiguous 2-D run (rows cut into segments that fill the device,
 * one atomicMax per segment), over each 2-D block of
 * one (one CUDA block per output), over each column of one (tiles of
 * rows x blockDim columns, atomicMax per column), and calibration's
 * finite-only amax per row with a count of the rest. Launch contracts:
 * kernels/amax.cuh.
 *
 * The maximum is taken over float32 magnitude bits, so NaN propagates the
 * same way as in csrc/core/amax.c and the result is order-independent.
 */
#include "amax.cuh"
#include "common.cuh"

static_assert(sizeof(fp8q_amax_args) == 32, "fp8q_amax_args must match the host's layout");
static_assert(sizeof(fp8q_amax_rows_args) == 48, "fp8q_amax_rows_args must match the host's layout");
static_assert(sizeof(fp8q_amax_blocks_args) == 56,
              "fp8q_amax_blocks_args must match the host's layout");
static_assert(sizeof(fp8q_amax_columns_args) == 40,
              "fp8q_amax_columns_args must match the host's layout");
static_assert(sizeof(fp8q_amax_finite_rows_args) == 56,
              "fp8q_amax_finite_rows_args must match the host's layout");

/* ------------------------------------------------------------------------- */
/* Whole run                                                                 */

template <int S> static __device__ __noinline__ void amax_run(const fp8q_amax_args args)
{
    typedef typename dtype_traits<S>::storage source_t;
    constexpr int VECTOR = 16 / sizeof(source_t);
    typedef packed<source_t, VECTOR> source_vector;

    const source_t *source = (const source_t *)args.source;
    const int64_t n_vectors = is_aligned16(source) ? args.count / VECTOR : 0;
    uint32_t amax = 0u;
    int64_t v, i;

    for (v = global_thread_index(); v < n_vectors; v += global_thread_count()) {
        const source_vector in = ((const source_vector *)source)[v];
#pragma unroll
        for (int k = 0; k < VECTOR; k++) {
            amax = max(amax, magnitude_bits(dtype_traits<S>::load(in.values[k])));
        }
    }
    for (i = n_vectors * VECTOR + global_thread_index(); i < args.count; i += global_thread_count()) {
        amax = max(amax, magnitude_bits(dtype_traits<S>::load(source[i])));
    }
    block_raise_max_bits(args.amax_bits, amax);
}

extern "C" __global__ void fp8q_amax(const fp8q_amax_args args)
{
    call_for_dtype(args.source_dtype, [&](auto source) { amax_run<decltype(source)::value>(args); });
}

/* ------------------------------------------------------------------------- */
/* Per row, in segments (fp8q_amax_rows, and fp8q_amax_finite_rows for     */
/* calibration)                                                              */

/* Folds one value into a thread's maximum; with FINITE, NaN and infinity
 * are counted instead (a float32 magnitude at or above infinity's bits). */
template <bool FINITE>
static __device__ __forceinline__ void fold_magnitude(float value, uint32_t &amax,
                                                      unsigned long long &nonfinite)
{
    const uint32_t bits = magnitude_bits(value);
    if (FINITE) {
        const int finite = bits < 0x7F800000u;
        amax = max(amax, finite ? bits : 0u);
        nonfinite += !finite;
    }
    else {
        amax = max(amax, bits);
    }
}

/* The work items of kernels/amax.cuh's row kernels: segment s of row r
 * raises amax_bits[r]; 16-byte vectors where the segment starts aligned,
 * four of them in flight per thread. */
template <int S, bool FINITE>
static __device__ __noinline__ void amax_segments_run(const void *source, uint32_t *amax_bits,
                                                      uint64_t *nonfinite_count, int64_t n_rows,
                                                      int64_t row_length, int64_t segment_length)
{
    typedef typename dtype_traits<S>::storage source_t;
    constexpr int VECTOR = 16 / sizeof(source_t);
    typedef packed<source_t, VECTOR> source_vector;
    const int64_t per_row = (row_length + segment_length - 1) / segment_length;
    unsigned long long nonfinite = 0u;
    int64_t item, v, i;

    for (item = blockIdx.x; item < n_rows * per_row; item += gridDim.x) {
        const int64_t row = item / per_row;
        const int64_t first = (item - row * per_row) * segment_length;
        const int64_t length = min(segment_length, row_length - first);
        const source_t *segment = (const source_t *)source + row * row_length + first;
        const int64_t n_vectors = is_aligned16(segment) ? length / VECTOR : 0;
        uint32_t amax = 0u;

#pragma unroll 4
        for (v = threadIdx.x; v < n_vectors; v += blockDim.x) {
            const source_vector in = ((const source_vector *)segment)[v];
#pragma unroll
            for (int k = 0; k < VECTOR; k++) {
                fold_magnitude<FINITE>(dtype_traits<S>::load(in.values[k]), amax, nonfinite);
            }
        }
        for (i = n_vectors * VECTOR + threadIdx.x; i < length; i += blockDim.x) {
            fold_magnitude<FINITE>(dtype_traits<S>::load(segment[i]), amax, nonfinite);
        }
        amax = block_max_bits(amax);
        if (threadIdx.x == 0 && amax != 0u) {
            atomicMax(amax_bits + row, amax);
        }
    }
    if (FINITE && nonfinite != 0u) { /* rare in calibration data: one atomic per thread */
        atomicAdd((unsigned long long *)nonfinite_count, nonfinite);
    }
}

extern "C" __global__ void fp8q_amax_rows(const fp8q_amax_rows_args args)
{
    call_for_dtype(args.source_dtype, [&](auto source) {
        amax_segments_run<decltype(source)::value, false>(args.source, args.amax_bits, NULL,
                                                          args.n_rows, args.row_length,
                                                          args.segment_length);
    });
}

extern "C" __global__ void fp8q_amax_finite_rows(const fp8q_amax_finite_rows_args args)
{
    call_for_dtype(args.source_dtype, [&](auto source) {
        amax_segments_run<decltype(source)::value, true>(args.source, args.amax_bits,
                                                         args.nonfinite_count, args.n_rows,
                                                         args.row_length, args.segment_length);
    });
}

/* ------------------------------------------------------------------------- */
/* Per 2-D block                                                             */

template <int S> static __device__ __noinline__ void amax_blocks_run(const fp8q_amax_blocks_args args)
{
    typedef typename dtype_traits<S>::storage source_t;
    const int64_t n_block_rows = (args.n_rows + args.block_rows - 1) / args.block_rows;
    const int64_t n_block_cols = (args.row_length + args.block_cols - 1) / args.block_cols;
    int64_t block, row, column;

    for (block = blockIdx.x; block < n_block_rows * n_block_cols; block += gridDim.x) {
        const int64_t first_row = (block / n_block_cols) * args.block_rows;
        const int64_t first_col = (block % n_block_cols) * args.block_cols;
        const int64_t rows_left = args.n_rows - first_row;
        const int64_t cols_left = args.row_length - first_col;
        const int64_t rows = args.block_rows < rows_left ? args.block_rows : rows_left;
        const int64_t cols = args.block_cols < cols_left ? args.block_cols : cols_left;
        const source_t *source = (const source_t *)args.source + first_row * args.row_length + first_col;
        /* The threads cover `lanes` consecutive columns of `rows_per_step`
         * rows at a time (reads along a row coalesced); the divisions are
         * once per block, not per element. */
        const int lanes = cols < (int64_t)blockDim.x ? (int)cols : (int)blockDim.x;
        const int rows_per_step = (int)blockDim.x / lanes;
        const int thread_row = (int)threadIdx.x / lanes;
        uint32_t amax = 0u;
        if (thread_row < rows_per_step) {
            for (row = thread_row; row < rows; row += rows_per_step) {
                for (column = (int)threadIdx.x % lanes; column < cols; column += lanes) {
                    amax = max(amax, magnitude_bits(dtype_traits<S>::load(
                                         source[row * args.row_length + column])));
                }
            }
        }
        amax = block_max_bits(amax);
        if (threadIdx.x == 0) {
            args.amax_bits[block] = amax;
        }
    }
}

extern "C" __global__ void fp8q_amax_blocks(const fp8q_amax_blocks_args args)
{
    call_for_dtype(args.source_dtype,
                   [&](auto source) { amax_blocks_run<decltype(source)::value>(args); });
}

/* ------------------------------------------------------------------------- */
/* Per column                                                                */

template <int S> static __device__ __noinline__ void amax_columns_run(const fp8q_amax_columns_args args)
{
    typedef typename dtype_traits<S>::storage source_t;
    const int64_t n_row_tiles = (args.n_rows + FP8Q_AMAX_COLUMNS_ROWS - 1) / FP8Q_AMAX_COLUMNS_ROWS;
    const int64_t n_col_tiles = (args.row_length + blockDim.x - 1) / blockDim.x;
    int64_t tile, row;

    for (tile = blockIdx.x; tile < n_row_tiles * n_col_tiles; tile += gridDim.x) {
        const int64_t row_tile = tile / n_col_tiles;
        const int64_t column = (tile - row_tile * n_col_tiles) * blockDim.x + threadIdx.x;
        const int64_t first_row = row_tile * FP8Q_AMAX_COLUMNS_ROWS;
        const int64_t last_row = min(first_row + FP8Q_AMAX_COLUMNS_ROWS, args.n_rows);
        const source_t *source = (const source_t *)args.source + column;
        uint32_t amax = 0u;
        if (column < args.row_length) {
            for (row = first_row; row < last_row; row++) {
                amax = max(amax, magnitude_bits(dtype_traits<S>::load(source[row * args.row_length])));
            }
            atomicMax(args.amax_bits + column, amax);
        }
    }
}

extern "C" __global__ void fp8q_amax_columns(const fp8q_amax_columns_args args)
{
    call_for_dtype(args.source_dtype,
                   [&](auto source) { amax_columns_run<decltype(source)::value>(args); });
}
