/*
 * gemv_common.cuh - what the weight-only product's kernels (gemv.cu on the
 * CUDA cores, gemv_tensor_cores.cu on the tensor cores) share: the decode
 * of four weight codes, and past their sums the finishing of one output
 * value (kernels/gemv.cuh's contract).
 */
#ifndef FP8Q_KERNELS_GEMV_COMMON_CUH
#define FP8Q_KERNELS_GEMV_COMMON_CUH

#include <cuda_fp16.h>

#include "common.cuh"
#include "gemv.cuh"

/* Whether fp8q_decode4_to_float16 is the fast decode of weight format W
 * here: always for E5M2 (a byte move), on sm_89+ for E4M3FN (the hardware
 * conversion); elsewhere the codec's product form is. */
template <int W> struct weight_decode {
    static constexpr bool E4M3 = W == FP8Q_FLOAT8_E4M3FN;
    static constexpr bool THROUGH_FLOAT16 = !E4M3 || FP8Q_HARDWARE_FP8;
};

/* The four weight values of `word` (byte k: value k) as float32, exact. */
template <int W> static __device__ __forceinline__ void decode4(uint32_t word, float out[4])
{
    if constexpr (weight_decode<W>::THROUGH_FLOAT16) {
        uint32_t pairs[2];
        fp8q_decode4_to_float16<weight_decode<W>::E4M3>(word, pairs);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            out[k] = __half2float(
                __ushort_as_half((unsigned short)(pairs[k / 2] >> (16 * (k % 2)))));
        }
    }
    else {
#pragma unroll
        for (int k = 0; k < 4; k++) {
            out[k] = dtype_traits<W>::load((uint8_t)(word >> (8 * k)));
        }
    }
}

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

#endif /* FP8Q_KERNELS_GEMV_COMMON_CUH */
