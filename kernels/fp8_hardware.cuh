/*
 * fp8_hardware.cuh - the saturating float32 -> E4M3FN / E5M2 encodes of
 * csrc/core/float_codec.h through cuda_fp8.h's conversion, which is one
 * cvt.rn.satfinite instruction on sm_89 and newer (FP8Q_HARDWARE_FP8).
 *
 * Where they are the same function (kernels/README.md, "Hardware FP8
 * conversion", has the argument): cvt.rn.satfinite rounds the float32 once
 * to nearest-even and clamps finite overflow and +-inf to +-max, exactly as
 * fp8q_encode_e4m3fn / fp8q_encode_e5m2 with saturate; it returns one NaN
 * code without the input's sign, so NaN is fixed up here to the codec's
 * (sign | 0x7F for E4M3FN, sign | 0x7E for E5M2). Not used for: the
 * non-saturating modes (no hardware instruction: cuda_fp8.h emulates them
 * in software), the fnuz formats (no hardware conversion at all), sm_75 to
 * sm_86 (FP8Q_HARDWARE_FP8 is 0 there and in host code).
 *
 * Four at a time (fp8q_hardware_encode4): two paired conversions and one
 * fix-up of the four NaN codes with 32-bit integer operations, for the
 * vector loops of fp8q_cast_to_fp8 (kernels/cast.cu). And the other way,
 * four codes to float16 (fp8q_decode4_to_float16) for the weight-only
 * products (kernels/gemv_common.cuh).
 *
 * Division by a scale (fp8q_quotient_codes4): the codes of RN(x / s) from
 * x * RN(1 / s) when that provably gives them, without the division; the
 * caller divides exactly where it does not (kernels/README.md, "FP8 codes
 * of a quotient without the division", has the proof).
 *
 * __host__ __device__ so that tests/cuda_fp8_emulation.cpp can run these
 * very functions on the host against the codec (through cuda_fp8.h's host
 * emulation of the instruction; the GPU itself is tested by
 * tests/test_cuda_ops.py).
 */
#ifndef FP8Q_KERNELS_FP8_HARDWARE_CUH
#define FP8Q_KERNELS_FP8_HARDWARE_CUH

#include <cuda_fp8.h>
#include <math.h>
#include <stdint.h>

#include "core/float_codec.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define FP8Q_HARDWARE_FP8 1
#else
#define FP8Q_HARDWARE_FP8 0
#endif

/* `code` from cuda_fp8.h, or the codec's NaN of `value`'s sign. */
static __host__ __device__ __forceinline__ uint8_t fp8q_fix_nan(uint8_t code, float value,
                                                                uint32_t nan_code)
{
    const uint32_t bits = fp8q_float_to_bits(value);
    return (bits & 0x7FFFFFFFu) > 0x7F800000u ? (uint8_t)(((bits >> 24) & 0x80u) | nan_code)
                                               : code;
}

/* fp8q_encode_e4m3fn(value, 1). */
static __host__ __device__ __forceinline__ uint8_t fp8q_hardware_encode_e4m3fn(float value)
{
    return fp8q_fix_nan(__nv_cvt_float_to_fp8(value, __NV_SATFINITE, __NV_E4M3), value, 0x7Fu);
}

/* fp8q_encode_e5m2(value, 1). */
static __host__ __device__ __forceinline__ uint8_t fp8q_hardware_encode_e5m2(float value)
{
    return fp8q_fix_nan(__nv_cvt_float_to_fp8(value, __NV_SATFINITE, __NV_E5M2), value, 0x7Eu);
}

/* ------------------------------------------------------------------------- */
/* Four values at a time                                                     */

/* Bit 7 set in each byte of `codes` that is a NaN code of a saturating
 * E4M3FN (E4M3 true: low 7 bits 0x7F) or E5M2 (low 7 bits above 0x7B, the
 * largest finite code) conversion; 0 in every other bit. No carry crosses
 * a byte: each byte's low 7 bits plus at most 4 stay below 0x100. */
template <bool E4M3>
static __host__ __device__ __forceinline__ uint32_t fp8q_nan_bytes(uint32_t codes)
{
    const uint32_t to_bit_7 = E4M3 ? 0x01010101u : 0x04040404u;
    return ((codes & 0x7F7F7F7Fu) + to_bit_7) & 0x80808080u;
}

/* Byte k: the saturating conversion of value[k] (two paired conversions),
 * which is the codec's code except for a NaN (fp8q_fix_nan). */
template <bool E4M3>
static __host__ __device__ __forceinline__ uint32_t fp8q_hardware_encode4_raw(const float value[4])
{
    const __nv_fp8_interpretation_t format = E4M3 ? __NV_E4M3 : __NV_E5M2;
    return (uint32_t)__nv_cvt_float2_to_fp8x2(make_float2(value[0], value[1]), __NV_SATFINITE,
                                              format) |
           (uint32_t)__nv_cvt_float2_to_fp8x2(make_float2(value[2], value[3]), __NV_SATFINITE,
                                              format)
               << 16;
}

/* `codes` (four saturating E4M3FN or E5M2 codes, byte k from value k) with
 * every NaN code replaced by the codec's NaN with the sign of
 * sign_source[k]: sign | 0x7F (E4M3FN) or sign | 0x7E (E5M2). */
template <bool E4M3>
static __host__ __device__ __forceinline__ uint32_t fp8q_fix_nan4(uint32_t codes,
                                                               const float sign_source[4])
{
    const uint32_t nan = fp8q_nan_bytes<E4M3>(codes);
    const uint32_t nan_low_bits = nan - (nan >> 7); /* 0x7F in each NaN byte */
    const uint32_t signs = ((fp8q_float_to_bits(sign_source[0]) >> 24) & 0x80u) |
                           ((fp8q_float_to_bits(sign_source[1]) >> 16) & 0x8000u) |
                           ((fp8q_float_to_bits(sign_source[2]) >> 8) & 0x800000u) |
                           (fp8q_float_to_bits(sign_source[3]) & 0x80000000u);
    const uint32_t nan_codes = E4M3 ? 0x7F7F7F7Fu : 0x7E7E7E7Eu;
    return (codes & ~(nan | nan_low_bits)) | (nan_low_bits & nan_codes) | (signs & nan);
}

/* Byte k of the result: the codec's saturating code of value[k]. Valid for
 * any float32. */
template <bool E4M3>
static __host__ __device__ __forceinline__ uint32_t fp8q_hardware_encode4(const float value[4])
{
    return fp8q_fix_nan4<E4M3>(fp8q_hardware_encode4_raw<E4M3>(value), value);
}

/* a * b, a / b, a + b and a - b rounded once, never contracted: the
 * device's intrinsics, the host's operators (the host programs of tests/). */
static __host__ __device__ __forceinline__ float fp8q_multiply_rn(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

static __host__ __device__ __forceinline__ float fp8q_divide_rn(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}

static __host__ __device__ __forceinline__ float fp8q_add_rn(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

static __host__ __device__ __forceinline__ float fp8q_subtract_rn(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

/* How fp8q_quotient_codes4 may use a reciprocal. */
enum {
    FP8Q_RECIPROCAL_UNUSABLE = 0, /* divide                                */
    FP8Q_RECIPROCAL_NEAREST = 1,  /* RN(1 / s): bracket the quotient       */
    FP8Q_RECIPROCAL_EXACT = 2     /* s a power of two: x * (1 / s) = x / s */
};

/* RN(1 / divisor) into *reciprocal; how fp8q_quotient_codes4 may use it:
 * UNUSABLE unless it and `divisor` are normal float32 numbers (finite,
 * nonzero, not subnormal); EXACT when divisor is a power of two. */
static __host__ __device__ __forceinline__ int fp8q_quotient_reciprocal(float divisor,
                                                                       float *reciprocal)
{
#if defined(__CUDA_ARCH__)
    *reciprocal = __frcp_rn(divisor);
#else
    *reciprocal = 1.0f / divisor;
#endif
    const uint32_t d = fp8q_float_to_bits(divisor) & 0x7FFFFFFFu;
    const uint32_t r = fp8q_float_to_bits(*reciprocal) & 0x7FFFFFFFu;
    if (d < 0x00800000u || d >= 0x7F800000u || r < 0x00800000u || r >= 0x7F800000u) {
        return FP8Q_RECIPROCAL_UNUSABLE;
    }
    return (d & 0x007FFFFFu) == 0u ? FP8Q_RECIPROCAL_EXACT : FP8Q_RECIPROCAL_NEAREST;
}

/* With `encode4` a saturating encode of four values that is the codec's
 * except perhaps in NaN codes (fp8q_hardware_encode4_raw, or the codec:
 * monotone in each value), and `reciprocal` of kind `usage` from
 * fp8q_quotient_reciprocal (not UNUSABLE): stores into *codes the codes of
 * RN(x[k] / s) (NaN: the codec's, with x[k]'s sign, as
 * fp8q_scaling_result) and returns nonzero, or returns 0 (only for NEAREST,
 * and rarely: a quotient within 2^-20 of a rounding boundary, a NaN, an
 * infinity, a -0) and then the caller must divide. EXACT: x * reciprocal is
 * the quotient itself. NEAREST: each quotient is bracketed by q -+ |q|
 * 2^-20 with q = RN(x * reciprocal); equal codes at both ends are the code
 * of everything between. */
template <bool E4M3, typename Encode4>
static __host__ __device__ __forceinline__ int fp8q_quotient_codes4(const float x[4],
                                                                    float reciprocal, int usage,
                                                                    Encode4 encode4,
                                                                    uint32_t *codes)
{
    float low[4], high[4];
    int k;
    if (usage == FP8Q_RECIPROCAL_EXACT) {
        for (k = 0; k < 4; k++) {
            low[k] = fp8q_multiply_rn(x[k], reciprocal);
        }
        *codes = fp8q_fix_nan4<E4M3>(encode4(low), x);
        return 1;
    }
    for (k = 0; k < 4; k++) {
        const float q = fp8q_multiply_rn(x[k], reciprocal);
        const float margin = fp8q_multiply_rn(fabsf(q), 0x1p-20f);
        low[k] = fp8q_subtract_rn(q, margin);
        high[k] = fp8q_add_rn(q, margin);
    }
    *codes = encode4(low);
    return *codes == encode4(high) && fp8q_nan_bytes<E4M3>(*codes) == 0u;
}

/* ------------------------------------------------------------------------- */
/* Decoding to float16, four at a time                                       */

/* The FP8 values of `codes` (byte k: value k; E4M3FN where E4M3, else E5M2)
 * as float16 bits: pairs[0] holds values 0 (low half) and 1, pairs[1]
 * values 2 and 3. Exact: float16 holds every E4M3FN and E5M2 value;
 * infinities stay infinities and a NaN stays a NaN (not its sign or
 * payload for E4M3FN). E5M2 is float16's top byte; E4M3FN is two
 * cvt.rn.f16x2.e4m3x2 conversions on sm_89+ (cuda_fp8.h emulates them in
 * software elsewhere, where the kernels decode with the codec instead). */
template <bool E4M3>
static __host__ __device__ __forceinline__ void fp8q_decode4_to_float16(uint32_t codes,
                                                                       uint32_t pairs[2])
{
    if (E4M3) {
        const __half2_raw low =
            __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(codes & 0xFFFFu), __NV_E4M3);
        const __half2_raw high =
            __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(codes >> 16), __NV_E4M3);
        pairs[0] = (uint32_t)low.x | (uint32_t)low.y << 16;
        pairs[1] = (uint32_t)high.x | (uint32_t)high.y << 16;
    }
    else {
        pairs[0] = (codes & 0xFFu) << 8 | (codes & 0xFF00u) << 16;
        pairs[1] = (codes & 0xFF0000u) >> 8 | (codes & 0xFF000000u);
    }
}

#endif /* FP8Q_KERNELS_FP8_HARDWARE_CUH */
