/*
 * cast_emulation.h - what the host programs that run the cast kernels'
 * loops share (tests/straight_cast_emulation.cpp,
 * tests/generic_cast_emulation.cpp): element sizes and bits of the cast
 * dtypes, the codec's decode and encode of one element of any of them,
 * random values with specials, scales that exercise every path of a scaled cast, and the scale strides
 * and fast divisors of a launch.
 */
#ifndef FP8Q_TESTS_CAST_EMULATION_H
#define FP8Q_TESTS_CAST_EMULATION_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "cast.cuh"
#include "core/dtype.h"
#include "core/fast_divide.h"
#include "core/float_codec.h"
#include "host_random.h"

/* Bytes an element of cast dtype `dtype` takes. */
static size_t itemsize(int dtype)
{
    return dtype == FP8Q_FLOAT32 ? 4 : dtype == FP8Q_FLOAT16 || dtype == FP8Q_BFLOAT16 ? 2 : 1;
}

/* The bits of element i of `data` (elements of `dtype`). */
static uint32_t element_bits(const void *data, int64_t i, int dtype)
{
    switch (itemsize(dtype)) {
    case 4: return ((const uint32_t *)data)[i];
    case 2: return ((const uint16_t *)data)[i];
    default: return ((const uint8_t *)data)[i];
    }
}

/* The codec's decode and encode of one element of any cast dtype. */
static float codec_load(const void *data, int64_t i, int dtype)
{
    const uint32_t bits = element_bits(data, i, dtype);
    switch (dtype) {
    case FP8Q_FLOAT32: return fp8q_bits_to_float(bits);
    case FP8Q_FLOAT16: return fp8q_decode_float16((uint16_t)bits);
    case FP8Q_BFLOAT16: return fp8q_decode_bfloat16((uint16_t)bits);
    case FP8Q_UINT8: return (float)bits;
    case FP8Q_FLOAT8_E4M3FN: return fp8q_decode_e4m3fn((uint8_t)bits);
    case FP8Q_FLOAT8_E5M2: return fp8q_decode_e5m2((uint8_t)bits);
    case FP8Q_FLOAT8_E4M3FNUZ: return fp8q_decode_e4m3fnuz((uint8_t)bits);
    default: return fp8q_decode_e5m2fnuz((uint8_t)bits);
    }
}

static uint32_t codec_store_bits(float value, int dtype, int saturate)
{
    switch (dtype) {
    case FP8Q_FLOAT32: return fp8q_float_to_bits(value);
    case FP8Q_FLOAT16: return fp8q_encode_float16(value);
    case FP8Q_BFLOAT16: return fp8q_encode_bfloat16(value);
    case FP8Q_UINT8: return fp8q_encode_uint8(value);
    case FP8Q_FLOAT8_E4M3FN: return fp8q_encode_e4m3fn(value, saturate);
    case FP8Q_FLOAT8_E5M2: return fp8q_encode_e5m2(value, saturate);
    case FP8Q_FLOAT8_E4M3FNUZ: return fp8q_encode_e4m3fnuz(value, saturate);
    default: return fp8q_encode_e5m2fnuz(value, saturate);
    }
}

/* Scales that exercise every path: ordinary, powers of two, products that
 * overflow or become subnormal, zero, negative and non-finite ones. */
static float interesting_scale(host_random &generator)
{
    static const float fixed[] = {1.0f,  0.375f, 0x1p-6f, 3.0f,  1e30f,     1e-30f,
                                  0.0f, -2.5f,  INFINITY, NAN,  1e-41f, 448.0f / 1000.0f};
    const uint32_t pick = generator.next() % 24;
    if (pick < sizeof fixed / sizeof fixed[0]) {
        return fixed[pick];
    }
    return ldexpf(1.0f + (float)(generator.next() % 1000) / 1000.0f,
                  (int)(generator.next() % 40) - 20);
}

/* A float32 of any magnitude from the random word r (r / 2^31 times 2^-30
 * to 2^29), or now and then (r % 97 == 0) a special: NaN, infinity, zero
 * or a subnormal; draws further words from `generator`. */
static float random_value(host_random &generator, uint32_t r)
{
    float x = ldexpf((float)(int32_t)r / 2147483648.0f, (int)(generator.next() % 60) - 30);
    if (r % 97 == 0) {
        static const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f};
        x = specials[generator.next() % 7];
    }
    return x;
}

/* args' scale strides (in scales; both 0: one scale for the run), and the
 * fast divisors fp8q_cuda_launch_cast makes from its row length and block
 * extents. */
static void set_scale_addressing(fp8q_cast_args &args, int64_t row_stride, int64_t col_stride)
{
    args.scale_row_stride = row_stride;
    args.scale_col_stride = col_stride;
    args.by_row_length = fp8q_fast_divisor_make((uint64_t)args.row_length);
    args.by_block_rows = fp8q_fast_divisor_make((uint64_t)args.scale_block_rows);
    args.by_block_cols = fp8q_fast_divisor_make((uint64_t)args.scale_block_cols);
}

#endif /* FP8Q_TESTS_CAST_EMULATION_H */
