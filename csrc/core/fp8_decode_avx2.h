/*
 * fp8_decode_avx2.h - the AVX2 decoder of float8_e4m3fn and float8_e5m2,
 * eight codes at a time, bit for bit as the codec (core/float_codec.h,
 * fp8q_decode_fp8). Included only by the files built for AVX2
 * (convert_avx2.c, scaled_mm_avx2.c); empty elsewhere.
 */
#ifndef FP8Q_CORE_FP8_DECODE_AVX2_H
#define FP8Q_CORE_FP8_DECODE_AVX2_H

#include <stdint.h>

#include "platform.h"

#if defined(__AVX2__)
#include <immintrin.h>

/* Eight codes to eight floats: sign | (normal or subnormal magnitude), with
 * the format's infinity and NaN codes replaced, as fp8q_decode_fp8 does. */
FP8Q_FORCE_INLINE __m256 fp8q_decode8_avx2(const uint8_t *codes,
                                          int is_e5m2)
{
    const __m256i code =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)codes));
    const __m256i magnitude = _mm256_and_si256(code, _mm256_set1_epi32(0x7F));
    const __m256i sign = _mm256_slli_epi32(
        _mm256_and_si256(code, _mm256_set1_epi32(0x80)), 24);
    /* e4m3fn: 3 fraction bits, bias 7; e5m2: 2 fraction bits, bias 15. */
    const int fraction_shift = is_e5m2 ? 21 : 20;
    const __m256i normal = _mm256_add_epi32(
        _mm256_sll_epi32(magnitude, _mm_cvtsi32_si128(fraction_shift)),
        _mm256_set1_epi32((is_e5m2 ? 112 : 120) << 23));
    /* Below the smallest normal (exponent field 0): fraction * 2^(1 - bias
     * - fraction bits), exact in float32. */
    const __m256 subnormal = _mm256_mul_ps(
        _mm256_cvtepi32_ps(magnitude),
        _mm256_set1_ps(is_e5m2 ? 1.52587890625e-05f : 0.001953125f));
    const __m256i is_subnormal =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(is_e5m2 ? 4 : 8), magnitude);
    __m256 value = _mm256_blendv_ps(_mm256_castsi256_ps(normal), subnormal,
                                    _mm256_castsi256_ps(is_subnormal));
    if (is_e5m2) {
        const __m256i is_infinity =
            _mm256_cmpeq_epi32(magnitude, _mm256_set1_epi32(0x7C));
        const __m256i is_nan =
            _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7C));
        value = _mm256_blendv_ps(
            value, _mm256_castsi256_ps(_mm256_set1_epi32(0x7F800000)),
            _mm256_castsi256_ps(is_infinity));
        value = _mm256_blendv_ps(
            value, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)),
            _mm256_castsi256_ps(is_nan));
    }
    else {
        const __m256i is_nan =
            _mm256_cmpeq_epi32(magnitude, _mm256_set1_epi32(0x7F));
        value = _mm256_blendv_ps(
            value, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)),
            _mm256_castsi256_ps(is_nan));
    }
    return _mm256_or_ps(value, _mm256_castsi256_ps(sign));
}

#endif /* __AVX2__ */

#endif /* FP8Q_CORE_FP8_DECODE_AVX2_H */
