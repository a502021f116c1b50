/*
 * norm_quantize.cu - the fused RMSNorm / LayerNorm + per-token FP8
 * quantize: one block per row, the row's statistics reduced over the block,
 * the normalised values written in x's dtype, their amax reduced, and the
 * float8_e4m3fn codes and the row's scale written in the same kernel, so
 * the FP8 layers after the norm read codes instead of quantizing x again.
 * Launch contract: kernels/norm_quantize.cuh; CPU reference and element
 * arithmetic: csrc/core/norm_quantize.c, csrc/core/norm_formula.h.
 */
#include "common.cuh"
#include "norm_quantize.cuh"
#include "core/norm_formula.h"
#include "core/scale_formula.h"

static_assert(sizeof(fp8q_norm_quantize_args) == 88,
              "fp8q_norm_quantize_args must match the host's layout");

/* The sum of `value` over the block of FP8Q_NORM_QUANTIZE_THREADS, in
 * every thread: each warp's by a butterfly of shuffles, then every thread
 * adds the warps' sums in warp order (the same bits in each). */
static __device__ float norm_block_sum(float value)
{
    __shared__ float warp_sum[FP8Q_NORM_QUANTIZE_THREADS / FP8Q_WARP_SIZE];
    float total = 0.0f;

    for (int lane_mask = FP8Q_WARP_SIZE / 2; lane_mask > 0; lane_mask /= 2) {
        value = __fadd_rn(value, __shfl_xor_sync(0xFFFFFFFFu, value, lane_mask));
    }
    if (threadIdx.x % FP8Q_WARP_SIZE == 0) {
        warp_sum[threadIdx.x / FP8Q_WARP_SIZE] = value;
    }
    __syncthreads();
#pragma unroll
    for (int w = 0; w < FP8Q_NORM_QUANTIZE_THREADS / FP8Q_WARP_SIZE; w++) {
        total = __fadd_rn(total, warp_sum[w]);
    }
    __syncthreads(); /* warp_sum is written again by the next call */
    return total;
}

/* The maximum of `bits` over the block, in every thread. */
static __device__ uint32_t norm_block_max_bits(uint32_t bits)
{
    __shared__ uint32_t largest;
    bits = block_max_bits(bits); /* the block's maximum in warp 0 */
    if (threadIdx.x == 0) {
        largest = bits;
    }
    __syncthreads();
    bits = largest;
    __syncthreads();
    return bits;
}

/* x[index] rounded into S's storage and back (float32: itself). */
template <int S> static __device__ __forceinline__ float norm_rounded(float value,
                                                                      void *normed,
                                                                      int64_t index)
{
    if constexpr (S == FP8Q_FLOAT32) {
        ((float *)normed)[index] = value;
        return value;
    }
    else if constexpr (S == FP8Q_FLOAT16) {
        const uint16_t code = fp8q_encode_float16(value);
        ((uint16_t *)normed)[index] = code;
        return fp8q_decode_float16(code);
    }
    else {
        const uint16_t code = fp8q_encode_bfloat16(value);
        ((uint16_t *)normed)[index] = code;
        return fp8q_decode_bfloat16(code);
    }
}

template <int S> static __device__ void norm_quantize_rows(const fp8q_norm_quantize_args &args)
{
    typedef typename dtype_traits<S>::storage source_t;
    const source_t *source = (const source_t *)args.source;
    const int64_t length = args.row_length;
    const float length_f = (float)length;

    for (int64_t row = blockIdx.x; row < args.n_rows; row += gridDim.x) {
        const int64_t first = row * length;
        float mean = 0.0f, partial = 0.0f;
        uint32_t amax = 0u;

        if (args.layer_norm) {
            for (int64_t c = threadIdx.x; c < length; c += blockDim.x) {
                partial = __fadd_rn(partial, dtype_traits<S>::load(source[first + c]));
            }
            mean = __fdiv_rn(norm_block_sum(partial), length_f);
            partial = 0.0f;
        }
        for (int64_t c = threadIdx.x; c < length; c += blockDim.x) {
            const float centred = __fsub_rn(dtype_traits<S>::load(source[first + c]), mean);
            partial = __fadd_rn(partial, __fmul_rn(centred, centred));
        }
        const float spread = __fdiv_rn(norm_block_sum(partial), length_f);
        const float inverse = fp8q_norm_inverse(spread, args.epsilon);

        for (int64_t c = threadIdx.x; c < length; c += blockDim.x) {
            const float value = fp8q_norm_value(
                dtype_traits<S>::load(source[first + c]), mean, inverse,
                float_element(args.weight, c, args.weight_dtype),
                args.bias != NULL ? float_element(args.bias, c, args.weight_dtype) : 0.0f,
                args.bias != NULL);
            const uint32_t bits =
                fp8q_float_to_bits(norm_rounded<S>(value, args.normed, first + c)) &
                0x7FFFFFFFu;
            amax = bits > amax ? bits : amax;
        }
        amax = norm_block_max_bits(amax);
        const float scale = fp8q_scale_from_amax(fp8q_bits_to_float(amax), args.max, 0);
        if (threadIdx.x == 0) {
            args.scale[row] = scale;
        }
        /* The elements this thread wrote above: no barrier needed. */
        for (int64_t c = threadIdx.x; c < length; c += blockDim.x) {
            const float value = dtype_traits<S>::load(((const source_t *)args.normed)[first + c]);
            args.codes[first + c] =
                fp8q_encode_e4m3fn(fp8q_scaling_result(value / scale, value, scale), 1);
        }
    }
}

extern "C" __global__ void __launch_bounds__(FP8Q_NORM_QUANTIZE_THREADS)
    fp8q_norm_quantize(const fp8q_norm_quantize_args args)
{
    call_for_float_dtype(args.source_dtype,
                         [&](auto source) { norm_quantize_rows<decltype(source)::value>(args); });
}
