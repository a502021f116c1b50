/*
 * gemv_common.cuh - what the weight-only product's kernels (gemv.cu on the
 * CUDA cores, gemv_tensor_cores.cu on the tensor cores) share past their
 * sums: the finishing of one output value (kernels/gemv.cuh's contract)
 * and where a block's sum goes (y, or, when k is split, the split's
 * partial sums for fp8q_gemv_fp8_reduce). They
 * decode four weight codes at a time with elements.cuh's decode4.
 */
#ifndef FP8Q_KERNELS_GEMV_COMMON_CUH
#define FP8Q_KERNELS_GEMV_COMMON_CUH

#include "common.cuh"
#include "gemv.cuh"

/* The float32 sum of output column `row` (a weight row) finished: times
 * the tensor's or the row's scale (block scales were applied inside the
 * sum), plus the bias, each one float32 rounding; the caller rounds the
 * result once into x's dtype. */
static __device__ __forceinline__ float finish_sum(const fp8q_gemv_fp8_args &args, float sum,
                                                   int64_t row)
{
    if (args.scale_kind == FP8Q_GEMV_SCALE_TENSOR) {
        sum = __fmul_rn(sum, args.scale[0]);
    }
    else if (args.scale_kind == FP8Q_GEMV_SCALE_ROW) {
        sum = __fmul_rn(sum, args.scale[row]);
    }
    if (args.bias != NULL) {
        sum = __fadd_rn(sum, float_element(args.bias, row, args.bias_dtype));
    }
    return sum;
}

/* Output (x_row, row) of the block's float32 sum: finished into y (x's
 * dtype X), or, when k is split, the split's raw sum into partial (the
 * tensor-core kernels; gemv.cu's CUDA-core kernels write the same places
 * through a split target kept in shared memory, which costs them no
 * register over their loop). */
template <int X>
static __device__ __forceinline__ void write_sum(const fp8q_gemv_fp8_args &args, int64_t x_row,
                                                 int64_t row, float sum)
{
    if (args.partial != NULL) {
        args.partial[((int64_t)blockIdx.y * args.m + x_row) * args.n + row] = sum;
    }
    else {
        ((typename dtype_traits<X>::storage *)args.y)[x_row * args.n + row] =
            dtype_traits<X>::store(finish_sum(args, sum, row), 0);
    }
}

#endif /* FP8Q_KERNELS_GEMV_COMMON_CUH */
