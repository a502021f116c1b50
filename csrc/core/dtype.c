/*
 * dtype.c - names, aliases, sizes and exact numeric limits of fp8q's dtypes.
 */
#include <float.h>
#include <string.h>

#include "core/dtype.h"

/* ------------------------------------------------------------------------- */
/* Names and sizes                                                           */

static const char *const canonical_names[FP8Q_DTYPE_COUNT] = {
    "float32",       "float16",     "bfloat16",        "uint8",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
};

static const size_t itemsizes[FP8Q_DTYPE_COUNT] = {4, 2, 2, 1, 1, 1, 1, 1};

static int is_valid(fp8q_dtype dtype)
{
    return (int)dtype >= 0 && (int)dtype < (int)FP8Q_DTYPE_COUNT;
}

const char *fp8q_dtype_name(fp8q_dtype dtype)
{
    return is_valid(dtype) ? canonical_names[dtype] : "invalid";
}

size_t fp8q_dtype_itemsize(fp8q_dtype dtype)
{
    return is_valid(dtype) ? itemsizes[dtype] : 0;
}

int fp8q_dtype_is_fp8(fp8q_dtype dtype)
{
    return dtype == FP8Q_FLOAT8_E4M3FN || dtype == FP8Q_FLOAT8_E5M2 ||
           dtype == FP8Q_FLOAT8_E4M3FNUZ || dtype == FP8Q_FLOAT8_E5M2FNUZ;
}

int fp8q_dtype_is_float(fp8q_dtype dtype)
{
    return is_valid(dtype) && dtype != FP8Q_UINT8;
}

/* ------------------------------------------------------------------------- */
/* Parsing                                                                   */

typedef struct dtype_alias {
    const char *name;
    fp8q_dtype dtype;
} dtype_alias;

/* Short spellings users type, and torch's extra names ("torch.half"). */
static const dtype_alias aliases[] = {
    {"fp32", FP8Q_FLOAT32},
    {"fp16", FP8Q_FLOAT16},
    {"half", FP8Q_FLOAT16},
    {"bf16", FP8Q_BFLOAT16},
    {"e4m3", FP8Q_FLOAT8_E4M3FN},
    {"e4m3fn", FP8Q_FLOAT8_E4M3FN},
    {"e5m2", FP8Q_FLOAT8_E5M2},
    {"e4m3fnuz", FP8Q_FLOAT8_E4M3FNUZ},
    {"e5m2fnuz", FP8Q_FLOAT8_E5M2FNUZ},
};

int fp8q_dtype_from_name(const char *name, fp8q_dtype *dtype)
{
    static const char torch_prefix[] = "torch.";
    size_t index;

    if (name == NULL) {
        return 0;
    }
    if (strncmp(name, torch_prefix, sizeof torch_prefix - 1) == 0) {
        name += sizeof torch_prefix - 1;
    }
    for (index = 0; index < (size_t)FP8Q_DTYPE_COUNT; index++) {
        if (strcmp(name, canonical_names[index]) == 0) {
            *dtype = (fp8q_dtype)index;
            return 1;
        }
    }
    for (index = 0; index < sizeof aliases / sizeof aliases[0]; index++) {
        if (strcmp(name, aliases[index].name) == 0) {
            *dtype = aliases[index].dtype;
            return 1;
        }
    }
    return 0;
}

int fp8q_dtype_is_numpy_extension(fp8q_dtype dtype)
{
    return dtype == FP8Q_BFLOAT16 || fp8q_dtype_is_fp8(dtype);
}

int fp8q_dtype_from_numpy_extension(const char *name, size_t itemsize,
                                    fp8q_dtype *dtype)
{
    fp8q_dtype found;

    if (!fp8q_dtype_from_name(name, &found) ||
        strcmp(name, fp8q_dtype_name(found)) != 0 ||
        !fp8q_dtype_is_numpy_extension(found) ||
        itemsize != fp8q_dtype_itemsize(found)) {
        return 0;
    }
    *dtype = found;
    return 1;
}

/* ------------------------------------------------------------------------- */
/* Numeric limits                                                            */

/* 2^exponent, exactly (every power of two fp8q needs is a normal double). */
static double power_of_two(int exponent)
{
    double result = 1.0;
    for (; exponent > 0; exponent--) {
        result *= 2.0;
    }
    for (; exponent < 0; exponent++) {
        result *= 0.5;
    }
    return result;
}

/* The layout of each floating-point format, by dtype (bits 0: not a
 * floating-point format); `max` is listed because it depends on how the
 * format spends its top exponent. */
typedef struct float_format {
    int bits;
    int exponent_bits;
    int mantissa_bits;
    int exponent_bias;
    int has_infinity;
    int has_negative_zero;
    double max;
} float_format;

/* bfloat16's max, (2 - 2^-7) * 2^127, is 255 * 2^120 exactly. */
static const float_format float_formats[FP8Q_DTYPE_COUNT] = {
    {32, 8, 23, 127, 1, 1, FLT_MAX},               /* float32         */
    {16, 5, 10, 15, 1, 1, 65504.0},                /* float16         */
    {16, 8, 7, 127, 1, 1, 3.3895313892515355e+38}, /* bfloat16        */
    {0, 0, 0, 0, 0, 0, 0.0},                       /* uint8           */
    {8, 4, 3, 7, 0, 1, 448.0},                     /* float8_e4m3fn   */
    {8, 5, 2, 15, 1, 1, 57344.0},                  /* float8_e5m2     */
    {8, 4, 3, 8, 0, 0, 240.0},                     /* float8_e4m3fnuz */
    {8, 5, 2, 16, 0, 0, 57344.0}};                 /* float8_e5m2fnuz */

int fp8q_dtype_finfo(fp8q_dtype dtype, fp8q_finfo *info)
{
    const float_format *format;

    if ((unsigned)dtype >= FP8Q_DTYPE_COUNT ||
        float_formats[dtype].bits == 0) {
        return 0;
    }
    format = &float_formats[dtype];
    info->bits = format->bits;
    info->exponent_bits = format->exponent_bits;
    info->mantissa_bits = format->mantissa_bits;
    info->exponent_bias = format->exponent_bias;
    info->max = format->max;
    info->tiny = power_of_two(1 - format->exponent_bias);
    info->smallest_subnormal =
        power_of_two(1 - format->exponent_bias - format->mantissa_bits);
    info->eps = power_of_two(-format->mantissa_bits);
    info->has_infinity = format->has_infinity;
    info->has_negative_zero = format->has_negative_zero;
    return 1;
}
