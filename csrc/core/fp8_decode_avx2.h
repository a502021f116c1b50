/*
 * fp8_decode_avx2.h - the AVX2 decoder of float8_e4m3fn and float8_e5m2,
 * eight codes at a time, bit for bit as the codec (core/float_codec.h,
 * fp8q_decode_fp8). Included only by the files built for AVX2
 * with F16C (convert_avx2.c, scaled_mm_avx2.c); empty elsewhere.
 */
#ifndef FP8Q_CORE_FP8_DECODE_AVX2_H
#define FP8Q_CORE_FP8_DECODE_AVX2_H

#include <stdint.h>

#include "platform.h"

#if defined(__AVX2__)
#include <immintrin.h>

/*
 * Eight codes to eight floats through float16, which holds every FP8 value:
 * an e5m2 code is the top byte of its float16; an e4m3fn code, with its
 * exponent and fraction moved down one bit, is the float16 of 2^-8 times
 * its value (subnormals included), scaled back exactly after the
 * conversion. NaN codes become the float16 quiet NaN with the code's sign,
 * hence the codec's float32 NaN.
 */
FP8Q_FORCE_INLINE __m256 fp8q_decode8_avx2(const uint8_t *codes,
                                          int is_e5m2)
{
    const __m128i code = _mm_loadl_epi64((const __m128i *)codes);
    const __m128i magnitude_mask = _mm_set1_epi16(0x7FFF);
    __m128i half;
    __m128i is_nan;

    if (is_e5m2) {
        half = _mm_unpacklo_epi8(_mm_setzero_si128(), code);
        /* Above the infinity 0x7C00: NaN codes, whatever their payload. */
        is_nan = _mm_cmpgt_epi16(_mm_and_si128(half, magnitude_mask),
                                 _mm_set1_epi16(0x7C00));
        half = _mm_blendv_epi8(
            half,
            _mm_or_si128(_mm_andnot_si128(magnitude_mask, half),
                         _mm_set1_epi16(0x7E00)),
            is_nan);
        return _mm256_cvtph_ps(half);
    }
    /* Sign-extended, shifted left 7: the sign lands in bits 15 and 14;
     * clearing bit 14 leaves S.0EEEE.MMM0000000. */
    half = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(code), 7),
                         _mm_set1_epi16((short)0xBFFF));
    /* The NaN codes S.1111.111 read 0x3F80: make them 0x7E00. */
    is_nan = _mm_cmpeq_epi16(_mm_and_si128(half, magnitude_mask),
                             _mm_set1_epi16(0x3F80));
    half = _mm_xor_si128(half, _mm_and_si128(is_nan, _mm_set1_epi16(0x4180)));
    return _mm256_mul_ps(_mm256_cvtph_ps(half), _mm256_set1_ps(256.0f));
}

#endif /* __AVX2__ */

#endif /* FP8Q_CORE_FP8_DECODE_AVX2_H */
