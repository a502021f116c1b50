/*
 * test_codec.c - dtype names (and NumPy's extension names) and limits, and
 * the scalar codec: hand-computed values, round trips over all 256 codes,
 * and an independent brute-force nearest-value oracle on random and
 * tie-making float32 inputs.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/dtype.h"
#include "core/float_codec.h"
#include "harness.h"

/* ------------------------------------------------------------------------- */
/* Formats, described independently of the codec                            */

typedef struct fp8_format {
    fp8q_dtype dtype;
    int mantissa_bits;
    int exponent_bias;
    uint32_t max_code;
    int kind;
    uint8_t overflow_code; /* saturate == 0, before the sign */
    uint8_t nan_code;      /* before the sign */
} fp8_format;

static const fp8_format formats[4] = {
    {FP8Q_FLOAT8_E4M3FN, 3, 7, 0x7E, FP8Q_FP8_KIND_FN, 0x7F, 0x7F},
    {FP8Q_FLOAT8_E5M2, 2, 15, 0x7B, FP8Q_FP8_KIND_IEEE, 0x7C, 0x7E},
    {FP8Q_FLOAT8_E4M3FNUZ, 3, 8, 0x7F, FP8Q_FP8_KIND_FNUZ, 0x80, 0x80},
    {FP8Q_FLOAT8_E5M2FNUZ, 2, 16, 0x7F, FP8Q_FP8_KIND_FNUZ, 0x80, 0x80},
};

static uint8_t encode(const fp8_format *format, float value, int saturate)
{
    switch (format->dtype) {
    case FP8Q_FLOAT8_E4M3FN:
        return fp8q_encode_e4m3fn(value, saturate);
    case FP8Q_FLOAT8_E5M2:
        return fp8q_encode_e5m2(value, saturate);
    case FP8Q_FLOAT8_E4M3FNUZ:
        return fp8q_encode_e4m3fnuz(value, saturate);
    default:
        return fp8q_encode_e5m2fnuz(value, saturate);
    }
}

static float decode(const fp8_format *format, uint8_t code)
{
    switch (format->dtype) {
    case FP8Q_FLOAT8_E4M3FN:
        return fp8q_decode_e4m3fn(code);
    case FP8Q_FLOAT8_E5M2:
        return fp8q_decode_e5m2(code);
    case FP8Q_FLOAT8_E4M3FNUZ:
        return fp8q_decode_e4m3fnuz(code);
    default:
        return fp8q_decode_e5m2fnuz(code);
    }
}

/* Magnitude of positive code `code` from the textbook formula; also valid
 * for max_code + 1, the first value past the largest finite one. */
static double magnitude_of_code(const fp8_format *format, uint32_t code)
{
    const uint32_t exponent = code >> format->mantissa_bits;
    const uint32_t fraction = code & ((1u << format->mantissa_bits) - 1u);
    const double unit = ldexp(1.0, -format->mantissa_bits);
    if (exponent == 0) {
        return fraction * unit * ldexp(1.0, 1 - format->exponent_bias);
    }
    return (1.0 + fraction * unit) *
           ldexp(1.0, (int)exponent - format->exponent_bias);
}

/* Round to nearest, ties to the even code, by search over every code. */
static uint8_t brute_force_encode(const fp8_format *format, float value,
                                  int saturate)
{
    const uint32_t past_max = format->max_code + 1;
    const uint8_t sign = signbit(value) ? 0x80 : 0x00;
    const double magnitude = fabs((double)value);
    uint32_t low = 0;
    uint32_t high = past_max;
    uint32_t code;

    if (value != value) {
        return format->kind == FP8Q_FP8_KIND_FNUZ
                   ? format->nan_code
                   : (uint8_t)(sign | format->nan_code);
    }
    if (magnitude >= magnitude_of_code(format, past_max)) {
        code = past_max;
    }
    else {
        /* Largest code whose magnitude is <= the input. */
        while (high - low > 1) {
            const uint32_t middle = (low + high) / 2;
            if (magnitude_of_code(format, middle) <= magnitude) {
                low = middle;
            }
            else {
                high = middle;
            }
        }
        {
            const double below = magnitude - magnitude_of_code(format, low);
            const double above =
                magnitude_of_code(format, low + 1) - magnitude;
            code = below < above ? low
                   : above < below ? low + 1
                   : (low % 2 == 0 ? low : low + 1);
        }
    }
    if (code == past_max) {
        if (saturate) {
            code = format->max_code;
        }
        else {
            return format->kind == FP8Q_FP8_KIND_FNUZ
                       ? format->overflow_code
                       : (uint8_t)(sign | format->overflow_code);
        }
    }
    if (format->kind == FP8Q_FP8_KIND_FNUZ && code == 0) {
        return 0;
    }
    return (uint8_t)(sign | code);
}

/* ------------------------------------------------------------------------- */
/* Names and limits                                                          */

void test_dtype_names(void)
{
    static const char *const names[] = {
        "float32",       "float16",     "bfloat16",        "uint8",
        "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
    };
    static const size_t sizes[] = {4, 2, 2, 1, 1, 1, 1, 1};
    fp8q_dtype dtype;
    int index;

    for (index = 0; index < FP8Q_DTYPE_COUNT; index++) {
        CHECK(strcmp(fp8q_dtype_name((fp8q_dtype)index), names[index]) == 0);
        CHECK_INT(fp8q_dtype_itemsize((fp8q_dtype)index), sizes[index]);
        CHECK(fp8q_dtype_from_name(names[index], &dtype));
        CHECK_INT(dtype, index);
        CHECK_INT(fp8q_dtype_is_fp8((fp8q_dtype)index), index >= 4);
        CHECK_INT(fp8q_dtype_is_float((fp8q_dtype)index), index != 3);
    }
    CHECK(strcmp(fp8q_dtype_name(FP8Q_DTYPE_COUNT), "invalid") == 0);
    CHECK(fp8q_dtype_from_name("e4m3", &dtype) && dtype == FP8Q_FLOAT8_E4M3FN);
    CHECK(fp8q_dtype_from_name("e5m2", &dtype) && dtype == FP8Q_FLOAT8_E5M2);
    CHECK(fp8q_dtype_from_name("bf16", &dtype) && dtype == FP8Q_BFLOAT16);
    CHECK(fp8q_dtype_from_name("fp16", &dtype) && dtype == FP8Q_FLOAT16);
    CHECK(fp8q_dtype_from_name("half", &dtype) && dtype == FP8Q_FLOAT16);
    CHECK(fp8q_dtype_from_name("fp32", &dtype) && dtype == FP8Q_FLOAT32);
    CHECK(fp8q_dtype_from_name("torch.float8_e4m3fnuz", &dtype) &&
          dtype == FP8Q_FLOAT8_E4M3FNUZ);
    CHECK(fp8q_dtype_from_name("torch.bfloat16", &dtype) &&
          dtype == FP8Q_BFLOAT16);
    CHECK(!fp8q_dtype_from_name("float64", &dtype));
    CHECK(!fp8q_dtype_from_name("E4M3", &dtype));
    CHECK(!fp8q_dtype_from_name("torch.", &dtype));
    CHECK(!fp8q_dtype_from_name(NULL, &dtype));

    /* NumPy extension dtypes: bfloat16 and the FP8 ones, by exact canonical
     * name and matching itemsize only. */
    for (index = 0; index < FP8Q_DTYPE_COUNT; index++) {
        const int extension = index == FP8Q_BFLOAT16 || index >= 4;

        CHECK_INT(fp8q_dtype_is_numpy_extension((fp8q_dtype)index),
                  extension);
        dtype = FP8Q_DTYPE_COUNT;
        CHECK_INT(fp8q_dtype_from_numpy_extension(names[index], sizes[index],
                                                  &dtype),
                  extension);
        CHECK_INT(dtype, extension ? index : FP8Q_DTYPE_COUNT);
        CHECK(!fp8q_dtype_from_numpy_extension(names[index], 3, &dtype));
    }
    dtype = FP8Q_DTYPE_COUNT;
    CHECK(!fp8q_dtype_from_numpy_extension("e4m3", 1, &dtype));
    CHECK(!fp8q_dtype_from_numpy_extension("bf16", 2, &dtype));
    CHECK(!fp8q_dtype_from_numpy_extension("torch.bfloat16", 2, &dtype));
    CHECK(!fp8q_dtype_from_numpy_extension("float8_e4m3", 1, &dtype));
    CHECK(!fp8q_dtype_from_numpy_extension("int4", 1, &dtype));
    CHECK_INT(dtype, FP8Q_DTYPE_COUNT);
}

void test_finfo(void)
{
    fp8q_finfo info;
    size_t index;

    CHECK(fp8q_dtype_finfo(FP8Q_FLOAT8_E4M3FN, &info));
    CHECK_DOUBLE(info.max, 448.0);
    CHECK_DOUBLE(info.tiny, ldexp(1.0, -6));
    CHECK_DOUBLE(info.smallest_subnormal, ldexp(1.0, -9));
    CHECK_DOUBLE(info.eps, 0.125);
    CHECK_INT(info.bits, 8);
    CHECK(!info.has_infinity && info.has_negative_zero);

    CHECK(fp8q_dtype_finfo(FP8Q_FLOAT8_E5M2, &info));
    CHECK_DOUBLE(info.max, 57344.0);
    CHECK_DOUBLE(info.tiny, ldexp(1.0, -14));
    CHECK_DOUBLE(info.smallest_subnormal, ldexp(1.0, -16));
    CHECK_DOUBLE(info.eps, 0.25);
    CHECK(info.has_infinity && info.has_negative_zero);

    CHECK(fp8q_dtype_finfo(FP8Q_FLOAT8_E4M3FNUZ, &info));
    CHECK_DOUBLE(info.max, 240.0);
    CHECK_DOUBLE(info.tiny, ldexp(1.0, -7));
    CHECK_DOUBLE(info.smallest_subnormal, ldexp(1.0, -10));
    CHECK(!info.has_infinity && !info.has_negative_zero);

    CHECK(fp8q_dtype_finfo(FP8Q_FLOAT8_E5M2FNUZ, &info));
    CHECK_DOUBLE(info.max, 57344.0);
    CHECK_DOUBLE(info.tiny, ldexp(1.0, -15));
    CHECK_DOUBLE(info.smallest_subnormal, ldexp(1.0, -17));

    CHECK(fp8q_dtype_finfo(FP8Q_FLOAT16, &info));
    CHECK_DOUBLE(info.max, 65504.0);
    CHECK_DOUBLE(info.smallest_subnormal, ldexp(1.0, -24));
    CHECK_DOUBLE(info.eps, ldexp(1.0, -10));

    CHECK(fp8q_dtype_finfo(FP8Q_BFLOAT16, &info));
    CHECK_DOUBLE(info.max, ldexp(255.0, 120));
    CHECK_DOUBLE(info.tiny, ldexp(1.0, -126));
    CHECK_DOUBLE(info.smallest_subnormal, ldexp(1.0, -133));
    CHECK_DOUBLE(info.eps, ldexp(1.0, -7));

    CHECK(fp8q_dtype_finfo(FP8Q_FLOAT32, &info));
    CHECK_DOUBLE(info.max, FLT_MAX);
    CHECK_DOUBLE(info.tiny, FLT_MIN);
    CHECK_DOUBLE(info.smallest_subnormal, ldexp(1.0, -149));
    CHECK_DOUBLE(info.eps, FLT_EPSILON);

    CHECK(!fp8q_dtype_finfo(FP8Q_UINT8, &info));

    /* The limits are the codec's largest, smallest normal and smallest
     * subnormal codes. */
    for (index = 0; index < 4; index++) {
        const fp8_format *format = &formats[index];
        CHECK(fp8q_dtype_finfo(format->dtype, &info));
        CHECK_DOUBLE(decode(format, (uint8_t)format->max_code), info.max);
        CHECK_DOUBLE(decode(format, (uint8_t)(1u << format->mantissa_bits)),
                     info.tiny);
        CHECK_DOUBLE(decode(format, 1), info.smallest_subnormal);
    }
}

/* ------------------------------------------------------------------------- */
/* The codec                                                                 */

void test_codec_hand_values(void)
{
    const float inf = fp8q_bits_to_float(0x7F800000u);
    const float nan = fp8q_bits_to_float(0x7FC00000u);

    /* E4M3FN: 448 is the largest value, 2^-9 the smallest. */
    CHECK_BITS(fp8q_encode_e4m3fn(448.0f, 1), 0x7E);
    CHECK_BITS(fp8q_encode_e4m3fn(-448.0f, 0), 0xFE);
    CHECK_BITS(fp8q_encode_e4m3fn(1.0f, 1), 0x38);
    CHECK_BITS(fp8q_encode_e4m3fn(0.001953125f, 1), 0x01);  /* 2^-9 */
    CHECK_BITS(fp8q_encode_e4m3fn(0.015625f, 1), 0x08);     /* 2^-6 */
    CHECK_BITS(fp8q_encode_e4m3fn(-0.0f, 1), 0x80);
    /* Ties go to the even code. */
    CHECK_BITS(fp8q_encode_e4m3fn(1.0625f, 1), 0x38);  /* 1 | 1.125 */
    CHECK_BITS(fp8q_encode_e4m3fn(1.1875f, 1), 0x3A);  /* 1.125 | 1.25 */
    CHECK_BITS(fp8q_encode_e4m3fn(0.0009765625f, 1), 0x00); /* 2^-10 */
    CHECK_BITS(fp8q_encode_e4m3fn(0.0029296875f, 1), 0x02); /* 3 * 2^-10 */
    CHECK_BITS(fp8q_encode_e4m3fn(0.0009765626f, 1), 0x01); /* past tie */
    /* Overflow: 464 ties down to 448; beyond it saturates or is NaN. */
    CHECK_BITS(fp8q_encode_e4m3fn(464.0f, 0), 0x7E);
    CHECK_BITS(fp8q_encode_e4m3fn(464.1f, 0), 0x7F);
    CHECK_BITS(fp8q_encode_e4m3fn(464.1f, 1), 0x7E);
    CHECK_BITS(fp8q_encode_e4m3fn(inf, 1), 0x7E);
    CHECK_BITS(fp8q_encode_e4m3fn(-inf, 1), 0xFE);
    CHECK_BITS(fp8q_encode_e4m3fn(-inf, 0), 0xFF);
    CHECK_BITS(fp8q_encode_e4m3fn(nan, 1), 0x7F);
    CHECK_BITS(fp8q_encode_e4m3fn(-nan, 1), 0xFF);
    CHECK_DOUBLE(fp8q_decode_e4m3fn(0x7E), 448.0);
    CHECK_DOUBLE(fp8q_decode_e4m3fn(0x01), 0.001953125);
    CHECK_BITS(fp8q_float_to_bits(fp8q_decode_e4m3fn(0xFF)), 0xFFC00000u);

    /* E5M2: IEEE-like, with infinities. */
    CHECK_BITS(fp8q_encode_e5m2(57344.0f, 1), 0x7B);
    CHECK_BITS(fp8q_encode_e5m2(61440.0f, 1), 0x7B);  /* tie to inf */
    CHECK_BITS(fp8q_encode_e5m2(61440.0f, 0), 0x7C);
    CHECK_BITS(fp8q_encode_e5m2(61439.0f, 0), 0x7B);
    CHECK_BITS(fp8q_encode_e5m2(inf, 0), 0x7C);
    CHECK_BITS(fp8q_encode_e5m2(-inf, 0), 0xFC);
    CHECK_BITS(fp8q_encode_e5m2(nan, 0), 0x7E);
    CHECK_BITS(fp8q_encode_e5m2(0.0000152587890625f, 1), 0x01); /* 2^-16 */
    CHECK_DOUBLE(fp8q_decode_e5m2(0x7C), inf);
    CHECK_DOUBLE(fp8q_decode_e5m2(0xFB), -57344.0);

    /* fnuz: no -0, the single NaN 0x80, bias one larger. */
    CHECK_BITS(fp8q_encode_e4m3fnuz(240.0f, 1), 0x7F);
    CHECK_BITS(fp8q_encode_e4m3fnuz(-0.0f, 1), 0x00);
    CHECK_BITS(fp8q_encode_e4m3fnuz(-0.0001f, 1), 0x00);
    CHECK_BITS(fp8q_encode_e4m3fnuz(-nan, 1), 0x80);
    CHECK_BITS(fp8q_encode_e4m3fnuz(1000.0f, 0), 0x80);
    CHECK_BITS(fp8q_encode_e4m3fnuz(-1000.0f, 1), 0xFF);
    CHECK_BITS(fp8q_encode_e4m3fnuz(0.0009765625f, 1), 0x01); /* 2^-10 */
    CHECK_BITS(fp8q_encode_e5m2fnuz(57344.0f, 1), 0x7F);
    CHECK_BITS(fp8q_encode_e5m2fnuz(inf, 0), 0x80);
    CHECK_BITS(fp8q_encode_e5m2fnuz(0.00000762939453125f, 1), 0x01);
    CHECK_BITS(fp8q_float_to_bits(fp8q_decode_e4m3fnuz(0x80)), 0xFFC00000u);
    CHECK_DOUBLE(fp8q_decode_e5m2fnuz(0x00), 0.0);
}

void test_codec_round_trips(void)
{
    size_t index;
    for (index = 0; index < 4; index++) {
        const fp8_format *format = &formats[index];
        uint32_t code;
        for (code = 0; code < 256; code++) {
            const float value = decode(format, (uint8_t)code);
            const uint32_t magnitude_code = code & 0x7F;
            const int is_nan = value != value;
            if (format->kind == FP8Q_FP8_KIND_FNUZ && code == 0x80) {
                CHECK(is_nan);
                continue;
            }
            if (format->kind == FP8Q_FP8_KIND_FN && magnitude_code == 0x7F) {
                CHECK(is_nan);
                CHECK_BITS(encode(format, value, 1), code);
                continue;
            }
            if (format->kind == FP8Q_FP8_KIND_IEEE && magnitude_code > 0x7C) {
                CHECK(is_nan);
                CHECK_BITS(encode(format, value, 1), (code & 0x80) | 0x7E);
                continue;
            }
            if (format->kind == FP8Q_FP8_KIND_IEEE && magnitude_code == 0x7C) {
                CHECK_DOUBLE(fabs((double)value), HUGE_VAL);
                CHECK_BITS(encode(format, value, 0), code);
                continue;
            }
            /* Every finite code decodes to the textbook value and encodes
             * back to itself. */
            CHECK_DOUBLE(fabs((double)value),
                         magnitude_of_code(format, magnitude_code));
            CHECK_INT(signbit(value) != 0, (code & 0x80) != 0);
            CHECK_BITS(encode(format, value, 1), code);
            CHECK_BITS(encode(format, value, 0), code);
        }
    }
}

/* A float32 near the format's grid: random points, exact midpoints between
 * neighbouring codes, and their float32 neighbours. */
static float interesting_input(const fp8_format *format)
{
    const uint64_t kind = harness_random_below(8);
    const float sign = harness_random_below(2) ? -1.0f : 1.0f;
    if (kind == 0) {
        return harness_random_bits_float();
    }
    if (kind <= 3) {
        const uint32_t code =
            (uint32_t)harness_random_below(format->max_code + 1);
        const double middle = (magnitude_of_code(format, code) +
                               magnitude_of_code(format, code + 1)) /
                              2.0;
        uint32_t bits = fp8q_float_to_bits((float)middle);
        if (kind == 2 && bits > 0) {
            bits--;
        }
        if (kind == 3) {
            bits++;
        }
        return sign * fp8q_bits_to_float(bits);
    }
    {
        const int exponent =
            (int)harness_random_below(40) - format->exponent_bias - 8;
        const float mantissa = 1.0f + (float)harness_random_below(1u << 23) /
                                          8388608.0f;
        return sign * (float)ldexp((double)mantissa, exponent);
    }
}

void test_codec_against_brute_force(void)
{
    size_t index;
    for (index = 0; index < 4; index++) {
        const fp8_format *format = &formats[index];
        int mismatches = 0;
        int trial;
        for (trial = 0; trial < 200000; trial++) {
            const float value = interesting_input(format);
            const int saturate = trial % 2;
            const uint8_t expected =
                brute_force_encode(format, value, saturate);
            const uint8_t actual = encode(format, value, saturate);
            if (actual != expected && mismatches++ < 5) {
                CHECK_BITS(actual, expected);
                CHECK_BITS(fp8q_float_to_bits(value), 0); /* shows input */
            }
        }
        CHECK_INT(mismatches, 0);
    }
}

/* The product-form decodes equal the codec's on every code, bit for bit. */
void test_codec_decode_by_product(void)
{
    uint32_t code;
    for (code = 0; code < 256; code++) {
        CHECK_BITS(fp8q_float_to_bits(fp8q_decode_e4m3fn_by_product((uint8_t)code)),
                   fp8q_float_to_bits(fp8q_decode_e4m3fn((uint8_t)code)));
        CHECK_BITS(fp8q_float_to_bits(fp8q_decode_e5m2_by_product((uint8_t)code)),
                   fp8q_float_to_bits(fp8q_decode_e5m2((uint8_t)code)));
    }
}

void test_float16_bfloat16_uint8(void)
{
    const float inf = fp8q_bits_to_float(0x7F800000u);
    const float nan = fp8q_bits_to_float(0x7FC00000u);
    uint32_t code;

    CHECK_BITS(fp8q_encode_float16(1.0f), 0x3C00);
    CHECK_BITS(fp8q_encode_float16(65504.0f), 0x7BFF);
    CHECK_BITS(fp8q_encode_float16(65519.0f), 0x7BFF);
    CHECK_BITS(fp8q_encode_float16(65520.0f), 0x7C00); /* tie -> inf */
    CHECK_BITS(fp8q_encode_float16(-inf), 0xFC00);
    CHECK_BITS(fp8q_encode_float16(5.9604644775390625e-8f), 0x0001);
    CHECK_BITS(fp8q_encode_float16(2.98023223876953125e-8f), 0x0000); /* tie */
    CHECK_BITS(fp8q_encode_float16(1.00048828125f), 0x3C00); /* 1 + 2^-11 */
    CHECK_BITS(fp8q_encode_float16(1.00146484375f), 0x3C02); /* 1+3*2^-11 */
    CHECK((fp8q_encode_float16(nan) & 0x7FFF) > 0x7C00);

    CHECK_BITS(fp8q_encode_bfloat16(1.0f), 0x3F80);
    CHECK_BITS(fp8q_encode_bfloat16(1.00390625f), 0x3F80);  /* tie, even */
    CHECK_BITS(fp8q_encode_bfloat16(1.01171875f), 0x3F82);  /* tie, even */
    CHECK_BITS(fp8q_encode_bfloat16(-nan), 0xFFC0);
    CHECK_BITS(fp8q_encode_bfloat16(fp8q_bits_to_float(0x7F800001u)), 0x7FC0);

    /* Every float16 and bfloat16 code survives a trip through float32. */
    for (code = 0; code < 65536; code++) {
        const float half = fp8q_decode_float16((uint16_t)code);
        const float brain = fp8q_decode_bfloat16((uint16_t)code);
        if (half == half) {
            CHECK_BITS(fp8q_encode_float16(half), code);
        }
        if (brain == brain) {
            CHECK_BITS(fp8q_encode_bfloat16(brain), code);
        }
    }

    CHECK_INT(fp8q_encode_uint8(3.7f), 3);
    CHECK_INT(fp8q_encode_uint8(-1.0f), 0);
    CHECK_INT(fp8q_encode_uint8(300.0f), 255);
    CHECK_INT(fp8q_encode_uint8(nan), 0);
    CHECK_INT(fp8q_encode_uint8(inf), 255);
}
