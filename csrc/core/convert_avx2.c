/*
 * convert_avx2.c - the store loops of core/convert_loops.h compiled for AVX2,
 * and an AVX2 decoder of float8_e4m3fn and float8_e5m2.
 *
 * The build compiles this one file with -mavx2 (gcc, clang) or /arch:AVX2
 * (MSVC) on x86-64, so the branch-free codec loops run 8 lanes wide;
 * convert.c calls in here only when fp8q_cpu_has_avx2() says the processor
 * and the OS support AVX2. On other processors it is built like any other
 * file and never called. Results are identical to the baseline loops: the
 * decoder computes the codec's formula (core/float_codec.h,
 * fp8q_decode_fp8) eight codes at a time, and a C test compares all 256
 * codes of both formats with the codec.
 */
#include "core/convert_loops.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

void fp8q_store_float32_avx2(fp8q_dtype dtype, const float *values,
                             char *destination, int64_t byte_stride,
                             int64_t count, int saturate)
{
    store_float32_loops(dtype, values, destination, byte_stride, count,
                        saturate);
}

#if defined(__AVX2__)

/* Eight codes to eight floats: sign | (normal or subnormal magnitude), with
 * the format's infinity and NaN codes replaced, as fp8q_decode_fp8 does. */
static __m256 decode8(const uint8_t *codes, int is_e5m2)
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

void fp8q_load_fp8_avx2(const uint8_t *codes, float *values, int64_t count,
                        int is_e5m2)
{
    int64_t done = 0;
    for (; done + 8 <= count; done += 8) {
        _mm256_storeu_ps(values + done, decode8(codes + done, is_e5m2));
    }
    for (; done < count; done++) {
        values[done] = is_e5m2 ? fp8q_decode_e5m2(codes[done])
                               : fp8q_decode_e4m3fn(codes[done]);
    }
}

#else /* not built for AVX2: never called (fp8q_cpu_has_avx2() is 0) */

void fp8q_load_fp8_avx2(const uint8_t *codes, float *values, int64_t count,
                        int is_e5m2)
{
    int64_t i;
    for (i = 0; i < count; i++) {
        values[i] = is_e5m2 ? fp8q_decode_e5m2(codes[i])
                            : fp8q_decode_e4m3fn(codes[i]);
    }
}

#endif /* __AVX2__ */
