/*
 * gemv.cu - the weight-only FP8 product for few rows of x: each block owns
 * a few rows of the FP8 weight and its warps walk along k, every lane
 * reading 16 codes of each row with one 16-byte load (the weight is read
 * once, one byte a value) and the matching values of every row of x (small,
 * served from the caches); the codes are decoded in registers four at a
 * time (elements.cuh: decode4), multiplied into float32 sums with fused
 * multiply-adds, and the lanes' and warps' sums are added at the end
 * (shuffles, then shared memory). A grid of one row (partial NULL) takes
 * the whole of k and writes y; a grid of `splits` rows (partial set: the
 * host's run-time choice where a block per 4 weight rows leaves the GPU
 * idle) takes one split of k per grid row, the same loop from another
 * start with a longer stride, and writes its float32 sums to partial.
 * The end of the file holds fp8q_gemv_fp8_reduce, which adds every
 * kernel's split sums in split order. Launch contract: kernels/gemv.cuh.
 */
#include "common.cuh"
#include "gemv.cuh"
#include "gemv_common.cuh"
#include "gemv_pipeline.cuh"

static_assert(sizeof(fp8q_gemv_fp8_args) == 96, "fp8q_gemv_fp8_args must match the host's layout");

/* Blocks per multiprocessor the small tiles' launch bounds ask for: their
 * work is a stream of weight bytes, so occupancy (loads in flight) matters
 * more than registers; the 8-row tile is bound by its multiply-adds. */
#define GEMV_MIN_BLOCKS_1 4
#define GEMV_MIN_BLOCKS_2 3
#define GEMV_MIN_BLOCKS_4 2

/* Values of k a lane takes per step: one 16-byte load of codes per row. */
#define GEMV_LANE_K FP8Q_GEMV_LANE_K
/* ... handled in groups of 4: the x values of a group for every row of x
 * are loaded once and used for every weight row. */
#define GEMV_GROUP 4

/* Four consecutive values of x as float32 (a 16-byte load for float32, 8
 * bytes for float16 / bfloat16). */
template <int X>
static __device__ __forceinline__ void load_x4(const typename dtype_traits<X>::storage *x,
                                               float out[GEMV_GROUP])
{
    typedef packed<typename dtype_traits<X>::storage, GEMV_GROUP> x_vector;
    const x_vector in = *(const x_vector *)x;
#pragma unroll
    for (int j = 0; j < GEMV_GROUP; j++) {
        out[j] = dtype_traits<X>::load(in.values[j]);
    }
}

/* MT: rows of x held in registers (m <= MT; rows beyond m are skipped).
 * A block owns R weight rows; its warps split k (thread t takes the
 * GEMV_LANE_K values at t * GEMV_LANE_K of every block step of
 * FP8Q_GEMV_STEP values: gemv_pipeline.cuh's fp8q_gemv_thread_first and
 * _stride), so a block has warps x R 16-byte loads in flight per lane step
 * and the grid grows with N; the warps' sums meet in shared memory, added
 * in warp order.
 * Split k (partial set, gridDim.y splits): split blockIdx.y takes every
 * gridDim.y-th block step from its own on, the loop's start and stride
 * being the only change (its bound stays args.k, a kernel parameter: a
 * contiguous range of k instead cost registers that spilled
 * fp8q_gemv_fp8_1 on sm_75 and sm_80); unsplit, gridDim.y is 1: the same
 * loads, sums and bits as before the split existed. The block's sums go to
 * the split's slice of partial, whose address passes through shared memory
 * (split_sums) so that no register holds it over the loop (one did, and
 * spilled fp8q_gemv_fp8_4 on sm_100). */
template <int X, int W, int MT>
static __device__ __forceinline__ void gemv_run(const fp8q_gemv_fp8_args args)
{
    typedef typename dtype_traits<X>::storage x_t;
    constexpr int R = FP8Q_GEMV_WEIGHT_ROWS;
    constexpr int WARPS = FP8Q_GEMV_THREADS / FP8Q_WARP_SIZE;
    __shared__ float partial[WARPS][MT * R];
    __shared__ float *split_sums; /* NULL unsplit: write y */
    if (threadIdx.x == 0) {
        split_sums = args.partial != NULL
                         ? args.partial + (int64_t)blockIdx.y * args.m * args.n
                         : NULL;
    }
    const x_t *x = (const x_t *)args.x;
    const int lane = (int)threadIdx.x % FP8Q_WARP_SIZE;
    const int warp = (int)threadIdx.x / FP8Q_WARP_SIZE;
    const int64_t k_blocks = (args.k + FP8Q_GEMV_BLOCK - 1) / FP8Q_GEMV_BLOCK;
    const int block_scales = args.scale_kind == FP8Q_GEMV_SCALE_BLOCK;
    int64_t group;

    for (group = blockIdx.x; group * R < args.n; group += gridDim.x) {
        const int64_t first_row = group * R;
        float sums[MT][R];
        int64_t k0;

#pragma unroll
        for (int i = 0; i < MT; i++) {
#pragma unroll
            for (int r = 0; r < R; r++) {
                sums[i][r] = 0.0f;
            }
        }
        for (k0 = fp8q_gemv_thread_first(blockIdx.y, threadIdx.x); k0 < args.k;
             k0 += fp8q_gemv_thread_stride(gridDim.y)) {
            uint4 codes[R];
            float factor[R];
#pragma unroll
            for (int r = 0; r < R; r++) {
                const int64_t row = first_row + r;
                codes[r] = row < args.n ? *(const uint4 *)(args.weight + row * args.k + k0)
                                        : make_uint4(0u, 0u, 0u, 0u);
                factor[r] = block_scales && row < args.n
                                ? args.scale[(row / FP8Q_GEMV_BLOCK) * k_blocks +
                                             k0 / FP8Q_GEMV_BLOCK]
                                : 1.0f;
            }
#pragma unroll
            for (int g = 0; g < GEMV_LANE_K / GEMV_GROUP; g++) {
                float xs[MT][GEMV_GROUP];
#pragma unroll
                for (int i = 0; i < MT; i++) {
                    if (i < args.m) {
                        load_x4<X>(x + i * args.k + k0 + g * GEMV_GROUP, xs[i]);
                    }
                    else {
#pragma unroll
                        for (int j = 0; j < GEMV_GROUP; j++) {
                            xs[i][j] = 0.0f;
                        }
                    }
                }
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const uint32_t word = g == 0   ? codes[r].x
                                          : g == 1 ? codes[r].y
                                          : g == 2 ? codes[r].z
                                                   : codes[r].w;
                    float decoded[GEMV_GROUP];
                    decode4<W>(word, decoded);
#pragma unroll
                    for (int j = 0; j < GEMV_GROUP; j++) {
                        float w = decoded[j];
                        if (block_scales) {
                            w = __fmul_rn(w, factor[r]);
                        }
#pragma unroll
                        for (int i = 0; i < MT; i++) {
                            sums[i][r] = __fmaf_rn(xs[i][j], w, sums[i][r]);
                        }
                    }
                }
            }
        }

        /* The warp's sums, then the block's (warp order), then one lane per
         * output writes it (to y, or the split's sum to partial). */
#pragma unroll
        for (int i = 0; i < MT; i++) {
#pragma unroll
            for (int r = 0; r < R; r++) {
#pragma unroll
                for (int offset = FP8Q_WARP_SIZE / 2; offset > 0; offset /= 2) {
                    sums[i][r] += __shfl_xor_sync(0xFFFFFFFFu, sums[i][r], offset);
                }
            }
        }
        if (lane == 0) {
#pragma unroll
            for (int i = 0; i < MT; i++) {
#pragma unroll
                for (int r = 0; r < R; r++) {
                    partial[warp][i * R + r] = sums[i][r];
                }
            }
        }
        __syncthreads();
        if (warp == 0 && lane < MT * R) {
            const int i = lane / R;
            const int64_t row = first_row + lane % R;
            if (i < args.m && row < args.n) {
                float value = partial[0][lane];
                for (int w = 1; w < WARPS; w++) {
                    value += partial[w][lane];
                }
                float *const sums_out = split_sums; /* set before the barrier */
                if (sums_out != NULL) {
                    sums_out[i * args.n + row] = value;
                }
                else {
                    ((x_t *)args.y)[i * args.n + row] =
                        dtype_traits<X>::store(finish_sum(args, value, row), 0);
                }
            }
        }
        __syncthreads(); /* partial is reused by the next group */
    }
}

/* The weight's format, then x's dtype: 6 specialisations per kernel, one
 * kernel per rows-of-x tile (so the one-row kernel keeps the registers of
 * one row, and the occupancy that goes with them). */
template <int MT, int X> static __device__ __forceinline__ void gemv_weight(const fp8q_gemv_fp8_args &args)
{
    if (args.weight_dtype == FP8Q_FLOAT8_E4M3FN) {
        gemv_run<X, FP8Q_FLOAT8_E4M3FN, MT>(args);
    }
    else if (args.weight_dtype == FP8Q_FLOAT8_E5M2) {
        gemv_run<X, FP8Q_FLOAT8_E5M2, MT>(args);
    }
}

template <int MT> static __device__ __forceinline__ void gemv_tile(const fp8q_gemv_fp8_args &args)
{
    call_for_float_dtype(args.x_dtype, [&](auto x) { gemv_weight<MT, decltype(x)::value>(args); });
}

extern "C" __global__ void __launch_bounds__(FP8Q_GEMV_THREADS, GEMV_MIN_BLOCKS_1)
    fp8q_gemv_fp8_1(const fp8q_gemv_fp8_args args)
{
    gemv_tile<1>(args);
}

extern "C" __global__ void __launch_bounds__(FP8Q_GEMV_THREADS, GEMV_MIN_BLOCKS_2)
    fp8q_gemv_fp8_2(const fp8q_gemv_fp8_args args)
{
    gemv_tile<2>(args);
}

extern "C" __global__ void __launch_bounds__(FP8Q_GEMV_THREADS, GEMV_MIN_BLOCKS_4)
    fp8q_gemv_fp8_4(const fp8q_gemv_fp8_args args)
{
    gemv_tile<4>(args);
}

extern "C" __global__ void __launch_bounds__(FP8Q_GEMV_THREADS, 1)
    fp8q_gemv_fp8_8(const fp8q_gemv_fp8_args args)
{
    gemv_tile<8>(args);
}

/* ------------------------------------------------------------------------- */
/* Split k: the splits' sums added in split order, then finished            */

template <int X> static __device__ __forceinline__ void reduce_splits(const fp8q_gemv_fp8_args &args)
{
    const int64_t outputs = args.m * args.n;
    int64_t index;

    for (index = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; index < outputs;
         index += (int64_t)gridDim.x * blockDim.x) {
        float sum = args.partial[index];
        for (int split = 1; split < args.splits; split++) {
            sum = __fadd_rn(sum, args.partial[(int64_t)split * outputs + index]);
        }
        ((typename dtype_traits<X>::storage *)args.y)[index] =
            dtype_traits<X>::store(finish_sum(args, sum, index % args.n), 0);
    }
}

extern "C" __global__ void __launch_bounds__(FP8Q_GEMV_THREADS)
    fp8q_gemv_fp8_reduce(const fp8q_gemv_fp8_args args)
{
    call_for_float_dtype(args.x_dtype, [&](auto x) { reduce_splits<decltype(x)::value>(args); });
}
