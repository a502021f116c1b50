/*
 * convert_loops.h - the float32 -> any dtype store loops and the loops that
 * scale staged float32 values, shared by convert.c (compiled for the
 * baseline instruction set) and convert_avx2.c (the same loops compiled for
 * AVX2, chosen at run time).
 *
 * Each dtype gets its own loop with constant format arguments, so the
 * compiler folds the codec into straight-line, branch-free code, and each
 * loop has a contiguous variant that works in blocks of FP8Q_CONVERT_BLOCK
 * elements: a constant trip count and restrict-qualified pointers are what
 * lets gcc -O2 (whose "very cheap" cost model refuses loops that need a
 * scalar epilogue or alias checks) and clang vectorise them. gcc also needs
 * -fno-trapping-math to if-convert the codec's float addition; that flag
 * changes no result. The FP8 loop asks for one register of codes per
 * vector step (FP8Q_VECTORIZE_BYTES), which clang does not choose itself.
 * Only convert.c and convert_avx2.c include this file.
 */
#ifndef FP8Q_CORE_CONVERT_LOOPS_H
#define FP8Q_CORE_CONVERT_LOOPS_H

#include <stdint.h>
#include <string.h>

#include "core/dtype.h"
#include "core/float_codec.h"
#include "platform.h"

/* Elements per vectorised block: a multiple of every vector width (32
 * one-byte codes fill an AVX2 register), and small, so that short runs are
 * vectorised too; only the last FP8Q_CONVERT_BLOCK - 1 elements of a run
 * take the scalar loop. */
#define FP8Q_CONVERT_BLOCK 32

/* fp8q_store_float32 compiled for AVX2 (convert_avx2.c). */
void fp8q_store_float32_avx2(fp8q_dtype dtype, const float *values,
                             char *destination, int64_t byte_stride,
                             int64_t count, int saturate);

/* fp8q_scale_float32 compiled for AVX2 (convert_avx2.c). */
void fp8q_scale_float32_avx2(float *values, const float *scales, int each,
                             int divide, int64_t count);

/* Decodes `count` contiguous float8_e4m3fn (is_e5m2 == 0) or float8_e5m2
 * codes with AVX2 integer arithmetic, bit for bit as the codec
 * (convert_avx2.c; only called where the processor has AVX2). */
void fp8q_load_fp8_avx2(const uint8_t *codes, float *values, int64_t count,
                        int is_e5m2);

/* ------------------------------------------------------------------------- */
/* Stores from float32                                                       */

FP8Q_FORCE_INLINE void encode_fp8_block(const float *FP8Q_RESTRICT values,
                                        uint8_t *FP8Q_RESTRICT codes,
                                        int64_t count, int mantissa_bits,
                                        int exponent_bias, uint32_t max_code,
                                        int kind, int saturate)
{
    int64_t i;
    FP8Q_VECTORIZE_BYTES
    for (i = 0; i < count; i++) {
        codes[i] = fp8q_encode_fp8(values[i], mantissa_bits, exponent_bias,
                                   max_code, kind, saturate);
    }
}

FP8Q_FORCE_INLINE void store_fp8(const float *values, char *destination,
                                 int64_t byte_stride, int64_t count,
                                 int mantissa_bits, int exponent_bias,
                                 uint32_t max_code, int kind, int saturate)
{
    uint8_t *codes = (uint8_t *)destination;
    int64_t i;

    if (byte_stride == 1) {
        for (; count >= FP8Q_CONVERT_BLOCK; count -= FP8Q_CONVERT_BLOCK) {
            encode_fp8_block(values, codes, FP8Q_CONVERT_BLOCK, mantissa_bits,
                             exponent_bias, max_code, kind, saturate);
            values += FP8Q_CONVERT_BLOCK;
            codes += FP8Q_CONVERT_BLOCK;
        }
        encode_fp8_block(values, codes, count, mantissa_bits, exponent_bias,
                         max_code, kind, saturate);
        return;
    }
    for (i = 0; i < count; i++) {
        codes[i * byte_stride] = fp8q_encode_fp8(
            values[i], mantissa_bits, exponent_bias, max_code, kind, saturate);
    }
}

/* Stores into one FP8 format, with a separate inlined loop per saturation
 * mode; callers pass the format's codec arguments (those of the
 * fp8q_encode_<format> functions of float_codec.h) as constants, so every
 * codec argument is a compile-time constant inside the loops. */
FP8Q_FORCE_INLINE void store_fp8_format(const float *values, char *destination,
                                        int64_t byte_stride, int64_t count,
                                        int saturate, int mantissa_bits,
                                        int exponent_bias, uint32_t max_code,
                                        int kind)
{
    if (saturate) {
        store_fp8(values, destination, byte_stride, count, mantissa_bits,
                  exponent_bias, max_code, kind, 1);
    }
    else {
        store_fp8(values, destination, byte_stride, count, mantissa_bits,
                  exponent_bias, max_code, kind, 0);
    }
}

/* One float32 value encoded as float16 (is_bfloat16 == 0) or bfloat16.
 * Callers pass a constant is_bfloat16, so each inlined loop keeps a single
 * codec. */
FP8Q_FORCE_INLINE uint16_t encode_half(float value, int is_bfloat16)
{
    return is_bfloat16 ? fp8q_encode_bfloat16(value)
                       : fp8q_encode_float16(value);
}

FP8Q_FORCE_INLINE void encode_half_block(const float *FP8Q_RESTRICT values,
                                         char *FP8Q_RESTRICT destination,
                                         int64_t count, int is_bfloat16)
{
    int64_t i;
    for (i = 0; i < count; i++) {
        const uint16_t code = encode_half(values[i], is_bfloat16);
        memcpy(destination + 2 * i, &code, sizeof code);
    }
}

/* Stores float16 (is_bfloat16 == 0) or bfloat16 elements. */
FP8Q_FORCE_INLINE void store_half(const float *values, char *destination,
                                  int64_t byte_stride, int64_t count,
                                  int is_bfloat16)
{
    int64_t i;
    if (byte_stride == 2) {
        for (; count >= FP8Q_CONVERT_BLOCK; count -= FP8Q_CONVERT_BLOCK) {
            encode_half_block(values, destination, FP8Q_CONVERT_BLOCK,
                              is_bfloat16);
            values += FP8Q_CONVERT_BLOCK;
            destination += 2 * FP8Q_CONVERT_BLOCK;
        }
        encode_half_block(values, destination, count, is_bfloat16);
        return;
    }
    for (i = 0; i < count; i++) {
        const uint16_t code = encode_half(values[i], is_bfloat16);
        memcpy(destination + i * byte_stride, &code, sizeof code);
    }
}

FP8Q_FORCE_INLINE void encode_uint8_block(const float *FP8Q_RESTRICT values,
                                          uint8_t *FP8Q_RESTRICT bytes,
                                          int64_t count)
{
    int64_t i;
    for (i = 0; i < count; i++) {
        bytes[i] = fp8q_encode_uint8(values[i]);
    }
}

FP8Q_INLINE void store_uint8(const float *values, char *destination,
                             int64_t byte_stride, int64_t count)
{
    uint8_t *bytes = (uint8_t *)destination;
    int64_t i;
    if (byte_stride == 1) {
        for (; count >= FP8Q_CONVERT_BLOCK; count -= FP8Q_CONVERT_BLOCK) {
            encode_uint8_block(values, bytes, FP8Q_CONVERT_BLOCK);
            values += FP8Q_CONVERT_BLOCK;
            bytes += FP8Q_CONVERT_BLOCK;
        }
        encode_uint8_block(values, bytes, count);
        return;
    }
    for (i = 0; i < count; i++) {
        bytes[i * byte_stride] = fp8q_encode_uint8(values[i]);
    }
}

FP8Q_INLINE void store_float32(const float *values, char *destination,
                               int64_t byte_stride, int64_t count)
{
    int64_t i;
    if (byte_stride == (int64_t)sizeof(float)) {
        memmove(destination, values, (size_t)count * sizeof(float));
        return;
    }
    for (i = 0; i < count; i++) {
        memcpy(destination + i * byte_stride, &values[i], sizeof(float));
    }
}

/* store_fp8_format with a format's constants (float_codec.h). */
#define STORE_FP8(mantissa_bits, exponent_bias, max_code, kind)               \
    store_fp8_format(values, destination, byte_stride, count, saturate,      \
                     mantissa_bits, exponent_bias, max_code, kind)

FP8Q_INLINE void store_float32_loops(fp8q_dtype dtype, const float *values,
                                     char *destination, int64_t byte_stride,
                                     int64_t count, int saturate)
{
    switch (dtype) {
    case FP8Q_FLOAT32:
        store_float32(values, destination, byte_stride, count);
        break;
    case FP8Q_FLOAT16:
        store_half(values, destination, byte_stride, count, 0);
        break;
    case FP8Q_BFLOAT16:
        store_half(values, destination, byte_stride, count, 1);
        break;
    case FP8Q_UINT8:
        store_uint8(values, destination, byte_stride, count);
        break;
    case FP8Q_FLOAT8_E4M3FN: STORE_FP8(3, 7, 0x7Eu, FP8Q_FP8_KIND_FN); break;
    case FP8Q_FLOAT8_E5M2: STORE_FP8(2, 15, 0x7Bu, FP8Q_FP8_KIND_IEEE); break;
    case FP8Q_FLOAT8_E4M3FNUZ: STORE_FP8(3, 8, 0x7Fu, FP8Q_FP8_KIND_FNUZ); break;
    case FP8Q_FLOAT8_E5M2FNUZ: STORE_FP8(2, 16, 0x7Fu, FP8Q_FP8_KIND_FNUZ); break;
    default:
        break;
    }
}

#undef STORE_FP8

/* ------------------------------------------------------------------------- */
/* Scaling staged float32 values                                             */

/* A block is scaled with the plain operation; only a block whose results
 * hold a NaN goes through fp8q_scaling_result, which gives that NaN the same
 * bits on every CPU and GPU (finite and infinite results are already the
 * correctly rounded ones). `each` and `divide` are constants at every call
 * (scale_float32_loops), so each of the four uses is a loop of its own. */
FP8Q_FORCE_INLINE void scale_block(float *FP8Q_RESTRICT values,
                                   const float *FP8Q_RESTRICT scales,
                                   int each, int divide)
{
    float results[FP8Q_CONVERT_BLOCK];
    int has_nan = 0;
    int i;
    for (i = 0; i < FP8Q_CONVERT_BLOCK; i++) {
        const float scale = scales[each ? i : 0];
        results[i] = divide ? values[i] / scale : values[i] * scale;
    }
    for (i = 0; i < FP8Q_CONVERT_BLOCK; i++) {
        has_nan |= results[i] != results[i];
    }
    if (has_nan) {
        for (i = 0; i < FP8Q_CONVERT_BLOCK; i++) {
            results[i] = fp8q_scaling_result(results[i], values[i],
                                             scales[each ? i : 0]);
        }
    }
    memcpy(values, results, sizeof results);
}

FP8Q_FORCE_INLINE void scale_run(float *FP8Q_RESTRICT values,
                                 const float *FP8Q_RESTRICT scales, int each,
                                 int divide, int64_t count)
{
    int64_t i;
    for (; count >= FP8Q_CONVERT_BLOCK; count -= FP8Q_CONVERT_BLOCK) {
        scale_block(values, scales, each, divide);
        values += FP8Q_CONVERT_BLOCK;
        scales += each ? FP8Q_CONVERT_BLOCK : 0;
    }
    for (i = 0; i < count; i++) {
        const float scale = scales[each ? i : 0];
        values[i] = fp8q_scaling_result(
            divide ? values[i] / scale : values[i] * scale, values[i], scale);
    }
}

/* fp8q_scale_float32 (core/convert.h). */
FP8Q_INLINE void scale_float32_loops(float *values, const float *scales,
                                     int each, int divide, int64_t count)
{
    if (each) {
        if (divide) {
            scale_run(values, scales, 1, 1, count);
        }
        else {
            scale_run(values, scales, 1, 0, count);
        }
    }
    else if (divide) {
        scale_run(values, scales, 0, 1, count);
    }
    else {
        scale_run(values, scales, 0, 0, count);
    }
}

#endif /* FP8Q_CORE_CONVERT_LOOPS_H */
