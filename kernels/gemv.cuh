/*
 * gemv.cuh - launch contract of the weight-only FP8 product for few rows
 * (kernels/gemv.cu): y = x . dequantize(weight)^T + bias, reading the FP8
 * codes and their scales straight from memory, so a W8A16 layer moves one
 * byte per weight instead of decoding the whole weight into a float copy
 * first. fp8q.torch's weight-only layers use it for small batches
 * (decode-shaped work); larger ones decode into a float weight and run a
 * float GEMM.
 *
 * Plain C as well as CUDA C++ (the host side includes it).
 *
 * Kernels "fp8q_gemv_fp8_1", "_2", "_4" and "_8" (FP8Q_GEMV_FP8_KERNEL_*):
 *     __global__ void fp8q_gemv_fp8_T(const fp8q_gemv_fp8_args args);
 *   The same function for 1 <= m <= T (the smallest T >= m keeps the
 *   fewest registers):
 *   For every row i < m of x and every row j < n of the weight:
 *     y[i, j] = store(sum_k x[i, k] * (decode(weight[j, k]) * s(j, k))
 *                     + bias[j])
 *   with decode the exact FP8 decode, the sum in float32 (fused multiply-
 *   adds, in an order of the kernel's choosing: within docs/numerics.md's
 *   float32 accumulation bound of the exact sum), s the weight's scale:
 *     FP8Q_GEMV_SCALE_TENSOR  scale[0]
 *     FP8Q_GEMV_SCALE_ROW     scale[j]
 *     FP8Q_GEMV_SCALE_BLOCK   scale[(j / 128) * ceil(k_total / 128) + k / 128]
 *   (tensor and row scales multiply the finished sum, block scales each
 *   decoded weight), bias optional (NULL: none), store the single rounding
 *   into x's dtype.
 *   x: m x k, C-contiguous, float32 / float16 / bfloat16, 16-byte aligned;
 *   weight: n x k FP8 codes, float8_e4m3fn or float8_e5m2, C-contiguous,
 *   16-byte aligned; k a multiple of 16; 1 <= m <= T;
 *   y: m x n in x's dtype, C-contiguous; bias: n values of bias_dtype
 *   (float32 / float16 / bfloat16).
 *   block: FP8Q_GEMV_THREADS threads, no dynamic shared memory; a block
 *   owns FP8Q_GEMV_WEIGHT_ROWS consecutive weight rows at a time, its
 *   warps splitting k. grid: any size >= 1; block b handles row groups b,
 *   b + grid, ... (ceil(n / FP8Q_GEMV_WEIGHT_ROWS) blocks, up to 65535, is
 *   the natural choice).
 *
 * Tensor-core kernels "fp8q_gemv_fp8_tc16" and "fp8q_gemv_fp8_tc64"
 * (kernels/gemv_tensor_cores.cu, FP8Q_GEMV_FP8_KERNEL_TC*):
 *     __global__ void fp8q_gemv_fp8_tcT(const fp8q_gemv_fp8_args args);
 *   The same product for 8 <= m <= T (T/4 < m for tc64, whose tile keeps
 *   more sums), float16 or bfloat16 x only, on the tensor cores: x and the
 *   decoded codes are multiplied exactly, their products summed in float32
 *   by the tensor cores (whose additions may truncate rather than round:
 *   the bound is that of float32 accumulation with twice the unit
 *   roundoff), the weight's scale as above except that block scales
 *   multiply the sum of each 32 values of k (one rounding per 32 products,
 *   not one per product). tc64 takes tensor and row scales only.
 *   x: 32-byte aligned (WMMA loads x's rows in place); float16 x needs
 *   compute capability 7.0+, bfloat16 8.0+ (the host checks: on older
 *   devices these kernels do nothing). Everything else as for the kernels
 *   above, with FP8Q_GEMV_TC_WEIGHT_ROWS weight rows a block:
 *   ceil(n / FP8Q_GEMV_TC_WEIGHT_ROWS) blocks is the natural grid.
 *
 * Split k (every kernel above; a run-time choice): with partial == NULL,
 *   gridDim.y must be 1 and the kernel writes y as described. With
 *   partial != NULL and splits >= 1, gridDim.y must equal splits: blocks
 *   (b, s) take only the values k of split s and write their float32
 *   sums, before any scale of the tensor or row and before the bias (block
 *   scales are applied inside them as above), to partial[(s * m + i) * n +
 *   j]; y is not touched. Split s's values of k:
 *     tensor-core kernels: [s * span, min(k_total, (s + 1) * span)) with
 *       span = fp8q_gemv_split_span(k_total, splits) (a multiple of
 *       FP8Q_GEMV_BLOCK);
 *     CUDA-core kernels: the block steps s, s + splits, s + 2 splits,
 *       ... below k_total, block step t being the values [t *
 *       FP8Q_GEMV_STEP, (t + 1) * FP8Q_GEMV_STEP) (4096 values, a
 *       multiple of FP8Q_GEMV_BLOCK; kernels/gemv_pipeline.cuh), so that
 *       no split of a k_total of at least splits x FP8Q_GEMV_STEP is
 *       empty. With gridDim.y 1 and partial NULL these kernels load, sum
 *       and round exactly as before the split existed (it changes only
 *       where a block's walk starts and its stride).
 *   Then "fp8q_gemv_fp8_reduce" (FP8Q_GEMV_FP8_KERNEL_REDUCE), with the
 *   same arguments, finishes each output: the splits' sums added in split
 *   order 0, 1, ... (one float32 rounding each: the same bits on every run
 *   and every grid), then the scale, the bias and the one rounding into
 *   x's dtype as above. The reduce kernel's block is FP8Q_GEMV_THREADS
 *   threads, any grid.x >= 1 (grid-stride over the m x n outputs), grid.y
 *   1; partial is 16-byte aligned (splits x m x n float32, written by the
 *   product kernel first, on the same stream). An empty split (no value of
 *   k_total) writes zeros.
 */
#ifndef FP8Q_KERNELS_GEMV_CUH
#define FP8Q_KERNELS_GEMV_CUH

#include <stdint.h>

#define FP8Q_GEMV_FP8_KERNEL_1 "fp8q_gemv_fp8_1"
#define FP8Q_GEMV_FP8_KERNEL_2 "fp8q_gemv_fp8_2"
#define FP8Q_GEMV_FP8_KERNEL_4 "fp8q_gemv_fp8_4"
#define FP8Q_GEMV_FP8_KERNEL_8 "fp8q_gemv_fp8_8"
#define FP8Q_GEMV_FP8_KERNEL_TC16 "fp8q_gemv_fp8_tc16"
#define FP8Q_GEMV_FP8_KERNEL_TC64 "fp8q_gemv_fp8_tc64"
#define FP8Q_GEMV_FP8_KERNEL_REDUCE "fp8q_gemv_fp8_reduce"

/* This file's kernels, X(fp8q_cuda_kernel value, name in the image)
 * each: csrc/registries.py collects every header's list into
 * cuda/kernel_list.h's FP8Q_CUDA_KERNEL_LIST. */
#define FP8Q_GEMV_KERNELS(X)                                      \
    X(FP8Q_KERNEL_GEMV_FP8_1, FP8Q_GEMV_FP8_KERNEL_1)             \
    X(FP8Q_KERNEL_GEMV_FP8_2, FP8Q_GEMV_FP8_KERNEL_2)             \
    X(FP8Q_KERNEL_GEMV_FP8_4, FP8Q_GEMV_FP8_KERNEL_4)             \
    X(FP8Q_KERNEL_GEMV_FP8_8, FP8Q_GEMV_FP8_KERNEL_8)             \
    X(FP8Q_KERNEL_GEMV_FP8_TC16, FP8Q_GEMV_FP8_KERNEL_TC16)       \
    X(FP8Q_KERNEL_GEMV_FP8_TC64, FP8Q_GEMV_FP8_KERNEL_TC64)       \
    X(FP8Q_KERNEL_GEMV_FP8_REDUCE, FP8Q_GEMV_FP8_KERNEL_REDUCE)

#define FP8Q_GEMV_MAX_ROWS 8
/* The tensor-core kernels: rows of x (at least, at most), rows with block
 * scales, weight rows a block. */
#define FP8Q_GEMV_TC_MIN_ROWS 8
#define FP8Q_GEMV_TC_MAX_ROWS 64
#define FP8Q_GEMV_TC_MAX_BLOCK_SCALED_ROWS 16
#define FP8Q_GEMV_TC_WEIGHT_ROWS 32
#define FP8Q_GEMV_THREADS 256
/* Weight rows per block (rows of x times these is at most 32). */
#define FP8Q_GEMV_WEIGHT_ROWS 4
#define FP8Q_GEMV_BLOCK 128
/* The CUDA-core kernels: values of k a thread loads a step (one 16-byte
 * load of codes a weight row), and a block's step over k (the unit of
 * their split, "Split k" above). */
#define FP8Q_GEMV_LANE_K 16
#define FP8Q_GEMV_STEP (FP8Q_GEMV_THREADS * FP8Q_GEMV_LANE_K)
/* The most splits of k (gridDim.y) a launch asks for. */
#define FP8Q_GEMV_MAX_SPLITS 16

enum fp8q_gemv_scale_kind {
    FP8Q_GEMV_SCALE_TENSOR = 0,
    FP8Q_GEMV_SCALE_ROW = 1,
    FP8Q_GEMV_SCALE_BLOCK = 2
};

/* 96 bytes: pointers, then 64-bit, then 32-bit fields. */
typedef struct fp8q_gemv_fp8_args {
    const void *x;          /* m x k, x_dtype                          */
    const uint8_t *weight;  /* n x k FP8 codes of weight_dtype         */
    const float *scale;     /* per scale_kind, above                   */
    const void *bias;       /* NULL or n values of bias_dtype          */
    void *y;                /* m x n, x_dtype, written                 */
    float *partial;         /* NULL, or splits x m x n sums (split k)  */
    int64_t m;              /* 1 .. the kernel's tile (at most 8)      */
    int64_t n;              /* >= 1                                    */
    int64_t k;              /* >= 16, a multiple of 16                 */
    int32_t x_dtype;        /* FP8Q_FLOAT32, FP8Q_FLOAT16, FP8Q_BFLOAT16 */
    int32_t weight_dtype;   /* FP8Q_FLOAT8_E4M3FN or FP8Q_FLOAT8_E5M2  */
    int32_t bias_dtype;     /* a float dtype; ignored without bias     */
    int32_t scale_kind;     /* an fp8q_gemv_scale_kind value           */
    int32_t splits;         /* splits of k with partial; else ignored  */
} fp8q_gemv_fp8_args;

/* Values of k a split takes when k_total values are cut into `splits`
 * (>= 1): ceil(k_total / splits) rounded up to a multiple of
 * FP8Q_GEMV_BLOCK (so a split never cuts a block scale's 128 values nor a
 * kernel's chunk). The same function on the host and in the kernels. */
#ifdef __CUDACC__
__host__ __device__
#endif
static inline int64_t fp8q_gemv_split_span(int64_t k_total, int32_t splits)
{
    const int64_t per_split = (k_total + splits - 1) / splits;
    return (per_split + FP8Q_GEMV_BLOCK - 1) / FP8Q_GEMV_BLOCK * FP8Q_GEMV_BLOCK;
}

#endif /* FP8Q_KERNELS_GEMV_CUH */
