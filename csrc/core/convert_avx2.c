/*
 * convert_avx2.c - the store and scale loops of core/convert_loops.h
 * compiled for AVX2, and an AVX2 decoder of float8_e4m3fn and float8_e5m2.
 *
 * The build compiles this one file with -mavx2 -mf16c (gcc, clang) or
 * /arch:AVX2 (MSVC) on x86-64, so the branch-free codec loops run 8 lanes
 * wide; convert.c calls in here only when fp8q_cpu_has_avx2() says the
 * processor and the OS support AVX2 (and F16C). On other processors it is
 * built like any other file and never called. Results are identical to the
 * baseline loops: the decoder (core/fp8_decode_avx2.h) gives the codec's
 * values (core/float_codec.h, fp8q_decode_fp8) eight codes at a time, and a
 * C test compares all 256 codes of both formats with the codec.
 */
#include "core/convert_loops.h"

#include "core/fp8_decode_avx2.h"

void fp8q_store_float32_avx2(fp8q_dtype dtype, const float *values,
                             char *destination, int64_t byte_stride,
                             int64_t count, int saturate)
{
    store_float32_loops(dtype, values, destination, byte_stride, count,
                        saturate);
}

void fp8q_scale_float32_avx2(float *values, const float *scales, int each,
                             int divide, int64_t count)
{
    scale_float32_loops(values, scales, each, divide, count);
}

#if defined(__AVX2__)

void fp8q_load_fp8_avx2(const uint8_t *codes, float *values, int64_t count,
                        int is_e5m2)
{
    int64_t done = 0;
    for (; done + 8 <= count; done += 8) {
        _mm256_storeu_ps(values + done,
                         fp8q_decode8_avx2(codes + done, is_e5m2));
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
