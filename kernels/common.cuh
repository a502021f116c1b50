/*
 * common.cuh - device helpers shared by every kernel family: the dtype table
 * (storage type, load as float32, store from float32) built on the one scalar
 * codec csrc/core/float_codec.h, 16-byte packed vectors, grid-stride indices,
 * the scaling division / multiplication, saturating E4M3FN / E5M2 codes four
 * at a time (with the quotient shortcut of fp8_hardware.cuh) and a
 * block-wide maximum.
 *
 * Device code only; included by the family .cu files through
 * fp8q_kernels.cu. Every conversion goes through float_codec.h so that the
 * GPU's results are bit-identical to the CPU's.
 */
#ifndef FP8Q_KERNELS_COMMON_CUH
#define FP8Q_KERNELS_COMMON_CUH

#include <stdint.h>

#include "core/cast.h"
#include "core/dtype.h"
#include "core/float_codec.h"
#include "fp8_hardware.cuh"

/* The largest block any kernel accepts: block_max_bits keeps one slot per
 * warp in shared memory. */
#define FP8Q_MAX_BLOCK_THREADS 1024
#define FP8Q_WARP_SIZE 32

/* ------------------------------------------------------------------------- */
/* The dtype table                                                           */

/* dtype_traits<D>: storage type of fp8q_dtype D, its exact decode to float32
 * and its single rounding encode from float32. */
template <int D> struct dtype_traits;

template <> struct dtype_traits<FP8Q_FLOAT32> {
    typedef float storage;
    static __device__ __forceinline__ float load(float x) { return x; }
    static __device__ __forceinline__ float store(float x, int) { return x; }
};

template <> struct dtype_traits<FP8Q_FLOAT16> {
    typedef uint16_t storage;
    static __device__ __forceinline__ float load(uint16_t x) { return fp8q_decode_float16(x); }
    static __device__ __forceinline__ uint16_t store(float x, int) { return fp8q_encode_float16(x); }
};

template <> struct dtype_traits<FP8Q_BFLOAT16> {
    typedef uint16_t storage;
    static __device__ __forceinline__ float load(uint16_t x) { return fp8q_decode_bfloat16(x); }
    static __device__ __forceinline__ uint16_t store(float x, int) { return fp8q_encode_bfloat16(x); }
};

template <> struct dtype_traits<FP8Q_UINT8> {
    typedef uint8_t storage;
    static __device__ __forceinline__ float load(uint8_t x) { return (float)x; }
    static __device__ __forceinline__ uint8_t store(float x, int) { return fp8q_encode_uint8(x); }
};

/* E4M3FN and E5M2 saturate through the hardware conversion on sm_89+
 * (fp8_hardware.cuh: the same function as the codec there). */
template <> struct dtype_traits<FP8Q_FLOAT8_E4M3FN> {
    typedef uint8_t storage;
    /* The codec's decode in its product form: the same bits, fewer
     * instructions (float_codec.h). */
    static __device__ __forceinline__ float load(uint8_t x) { return fp8q_decode_e4m3fn_by_product(x); }
    static __device__ __forceinline__ uint8_t store(float x, int saturate)
    {
        return FP8Q_HARDWARE_FP8 && saturate ? fp8q_hardware_encode_e4m3fn(x)
                                             : fp8q_encode_e4m3fn(x, saturate);
    }
};

template <> struct dtype_traits<FP8Q_FLOAT8_E5M2> {
    typedef uint8_t storage;
    static __device__ __forceinline__ float load(uint8_t x) { return fp8q_decode_e5m2_by_product(x); }
    static __device__ __forceinline__ uint8_t store(float x, int saturate)
    {
        return FP8Q_HARDWARE_FP8 && saturate ? fp8q_hardware_encode_e5m2(x)
                                             : fp8q_encode_e5m2(x, saturate);
    }
};

template <> struct dtype_traits<FP8Q_FLOAT8_E4M3FNUZ> {
    typedef uint8_t storage;
    static __device__ __forceinline__ float load(uint8_t x) { return fp8q_decode_e4m3fnuz(x); }
    static __device__ __forceinline__ uint8_t store(float x, int saturate) { return fp8q_encode_e4m3fnuz(x, saturate); }
};

template <> struct dtype_traits<FP8Q_FLOAT8_E5M2FNUZ> {
    typedef uint8_t storage;
    static __device__ __forceinline__ float load(uint8_t x) { return fp8q_decode_e5m2fnuz(x); }
    static __device__ __forceinline__ uint8_t store(float x, int saturate) { return fp8q_encode_e5m2fnuz(x, saturate); }
};

/* Calls body.template operator()<D>() for the runtime dtype; an unknown
 * dtype does nothing (the host validates dtypes before launching). */
template <typename Body> __device__ __forceinline__ void dispatch_dtype(int dtype, Body &body)
{
    switch (dtype) {
    case FP8Q_FLOAT32: body.template run<FP8Q_FLOAT32>(); break;
    case FP8Q_FLOAT16: body.template run<FP8Q_FLOAT16>(); break;
    case FP8Q_BFLOAT16: body.template run<FP8Q_BFLOAT16>(); break;
    case FP8Q_UINT8: body.template run<FP8Q_UINT8>(); break;
    case FP8Q_FLOAT8_E4M3FN: body.template run<FP8Q_FLOAT8_E4M3FN>(); break;
    case FP8Q_FLOAT8_E5M2: body.template run<FP8Q_FLOAT8_E5M2>(); break;
    case FP8Q_FLOAT8_E4M3FNUZ: body.template run<FP8Q_FLOAT8_E4M3FNUZ>(); break;
    case FP8Q_FLOAT8_E5M2FNUZ: body.template run<FP8Q_FLOAT8_E5M2FNUZ>(); break;
    default: break;
    }
}

/* data[index] of float dtype `dtype` (float32, float16 or bfloat16) as
 * float32: for operands, such as a bias, whose dtype is a launch argument
 * beside a kernel's templated ones. */
static __device__ __forceinline__ float float_element(const void *data, int64_t index, int dtype)
{
    switch (dtype) {
    case FP8Q_FLOAT16: return dtype_traits<FP8Q_FLOAT16>::load(((const uint16_t *)data)[index]);
    case FP8Q_BFLOAT16: return dtype_traits<FP8Q_BFLOAT16>::load(((const uint16_t *)data)[index]);
    default: return ((const float *)data)[index];
    }
}

/* ------------------------------------------------------------------------- */
/* Packed vectors and indices                                                */

/* N elements of T moved as one 4-, 8- or 16-byte load or store. */
template <typename T, int N> struct alignas(sizeof(T) * N) packed {
    T values[N];
};

/* Nonzero when `pointer` may be accessed with 16-byte vectors. */
static __device__ __forceinline__ int is_aligned16(const void *pointer)
{
    return ((uintptr_t)pointer & 15u) == 0u;
}

static __device__ __forceinline__ int64_t global_thread_index(void)
{
    return (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
}

static __device__ __forceinline__ int64_t global_thread_count(void)
{
    return (int64_t)gridDim.x * blockDim.x;
}

/* ------------------------------------------------------------------------- */
/* Scaling                                                                   */

/* value / factor (FP8Q_SCALE_DIVIDE, quantizing) or value * factor
 * (FP8Q_SCALE_MULTIPLY), correctly rounded and never contracted; a NaN
 * result takes the CPU's bits (fp8q_scaling_result), not the GPU's
 * canonical NaN 0x7FFFFFFF. */
static __device__ __forceinline__ float apply_scale(float value, float factor, int multiply)
{
    return fp8q_scaling_result(multiply ? __fmul_rn(value, factor) : __fdiv_rn(value, factor),
                               value, factor);
}

static __device__ __forceinline__ float divide_by_scale(float value, float scale)
{
    return apply_scale(value, scale, 0);
}

/* ------------------------------------------------------------------------- */
/* Saturating E4M3FN / E5M2 codes, four at a time                            */

/* The saturating conversion of value[0..3], byte k for value[k]: on sm_89+
 * the paired conversions, the codec's codes except for NaN (RAW true) or
 * fixed up to them; elsewhere the codec. */
template <int D, bool RAW> struct saturating_encode4 {
    __device__ __forceinline__ uint32_t operator()(const float value[4]) const
    {
#if FP8Q_HARDWARE_FP8
        return RAW ? fp8q_hardware_encode4_raw<D == FP8Q_FLOAT8_E4M3FN>(value)
                   : fp8q_hardware_encode4<D == FP8Q_FLOAT8_E4M3FN>(value);
#else
        uint32_t codes = 0u;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            codes |= (uint32_t)dtype_traits<D>::store(value[k], 1) << (8 * k);
        }
        return codes;
#endif
    }
};

/* The codes of value[k] / divisor: the quotient shortcut where `usage`
 * (of `reciprocal`, from fp8q_quotient_reciprocal) allows and it gives
 * them (it declines every NaN code, so the raw conversion serves it), else
 * the exact division of the generic kernels. */
template <int D>
static __device__ __forceinline__ uint32_t quotient_codes4(const float value[4], float divisor,
                                                           float reciprocal, int usage)
{
    uint32_t codes;
    if (usage != FP8Q_RECIPROCAL_UNUSABLE &&
        fp8q_quotient_codes4<D == FP8Q_FLOAT8_E4M3FN>(value, reciprocal, usage,
                                                        saturating_encode4<D, true>(), &codes)) {
        return codes;
    }
    float quotient[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        quotient[k] = apply_scale(value[k], divisor, 0);
    }
    return saturating_encode4<D, false>()(quotient);
}

/* ------------------------------------------------------------------------- */
/* Maximum of float32 magnitudes, as bits                                    */

/* |value| as bits: for non-negative floats the unsigned bit order is the
 * value order and every NaN lies above infinity, so the largest bits win
 * with NaN propagating (the rule of csrc/core/amax.c). */
static __device__ __forceinline__ uint32_t magnitude_bits(float value)
{
    return fp8q_float_to_bits(value) & 0x7FFFFFFFu;
}

/* The maximum of `bits` over the block, valid in thread 0. Every thread of
 * the block must call it; blockDim.x must be a multiple of 32, at most
 * FP8Q_MAX_BLOCK_THREADS. */
static __device__ uint32_t block_max_bits(uint32_t bits)
{
    __shared__ uint32_t warp_max[FP8Q_MAX_BLOCK_THREADS / FP8Q_WARP_SIZE];
    const unsigned lane = threadIdx.x % FP8Q_WARP_SIZE;
    const unsigned warp = threadIdx.x / FP8Q_WARP_SIZE;
    int offset;

    for (offset = FP8Q_WARP_SIZE / 2; offset > 0; offset /= 2) {
        bits = max(bits, __shfl_xor_sync(0xFFFFFFFFu, bits, offset));
    }
    if (lane == 0) {
        warp_max[warp] = bits;
    }
    __syncthreads();
    if (warp == 0) {
        bits = lane < blockDim.x / FP8Q_WARP_SIZE ? warp_max[lane] : 0u;
        for (offset = FP8Q_WARP_SIZE / 2; offset > 0; offset /= 2) {
            bits = max(bits, __shfl_xor_sync(0xFFFFFFFFu, bits, offset));
        }
    }
    __syncthreads(); /* warp_max may be reused by a following call */
    return bits;
}

#endif /* FP8Q_KERNELS_COMMON_CUH */
