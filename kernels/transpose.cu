/*
 * transpose.cu - the transpose kernel: 32 x 32 tiles staged in shared
 * memory, so that both the reads of the source rows and the writes of the
 * destination rows are coalesced. Launch contract: kernels/transpose.cuh.
 */
#include "common.cuh"
#include "transpose.cuh"

static_assert(sizeof(fp8q_transpose_args) == 40, "fp8q_transpose_args must match the host's layout");

template <typename T> static __device__ __noinline__ void transpose_run(const fp8q_transpose_args args)
{
    /* One padding column keeps the column reads free of bank conflicts. */
    __shared__ T tile[FP8Q_TRANSPOSE_TILE][FP8Q_TRANSPOSE_TILE + 1];
    constexpr int ROWS_PER_PASS = FP8Q_TRANSPOSE_THREADS / FP8Q_TRANSPOSE_TILE;
    const T *source = (const T *)args.source;
    T *destination = (T *)args.destination;
    const int lane = threadIdx.x % FP8Q_TRANSPOSE_TILE;
    const int first = threadIdx.x / FP8Q_TRANSPOSE_TILE;
    const int64_t tile_cols = (args.cols + FP8Q_TRANSPOSE_TILE - 1) / FP8Q_TRANSPOSE_TILE;
    const int64_t tile_rows = (args.rows + FP8Q_TRANSPOSE_TILE - 1) / FP8Q_TRANSPOSE_TILE;
    int64_t t;

    for (t = blockIdx.x; t < tile_rows * tile_cols; t += gridDim.x) {
        const int64_t row0 = (t / tile_cols) * FP8Q_TRANSPOSE_TILE;
        const int64_t col0 = (t % tile_cols) * FP8Q_TRANSPOSE_TILE;
        int i;
        for (i = first; i < FP8Q_TRANSPOSE_TILE; i += ROWS_PER_PASS) {
            const int64_t row = row0 + i, col = col0 + lane;
            if (row < args.rows && col < args.cols) {
                tile[i][lane] = source[row * args.cols + col];
            }
        }
        __syncthreads();
        for (i = first; i < FP8Q_TRANSPOSE_TILE; i += ROWS_PER_PASS) {
            const int64_t col = col0 + i, row = row0 + lane;
            if (row < args.rows && col < args.cols) {
                destination[col * args.rows + row] = tile[lane][i];
            }
        }
        __syncthreads();
    }
}

extern "C" __global__ void fp8q_transpose(const fp8q_transpose_args args)
{
    call_for_element_size(args.element_size,
                          [&](auto element) { transpose_run<typename decltype(element)::type>(args); });
}
