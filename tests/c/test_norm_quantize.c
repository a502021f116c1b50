/*
 * test_norm_quantize.c - the CPU reference of the fused norm + per-token
 * quantize (core/norm_quantize.h) on rows whose results are exact: RMSNorm
 * of a constant row, LayerNorm of a two-value row with a bias, a float16
 * source, a zero row (scale 1), a NaN row (NaN scale, NaN codes, other rows
 * untouched), the refusals of fp8q_norm_quantize_check, and the call
 * described from views (fp8q_norm_quantize_describe). Run natively
 * and under Wine (sqrtf and the divisions are the C runtime's).
 */
#include <math.h>
#include <string.h>

#include "core/float_codec.h"
#include "core/norm_quantize.h"
#include "harness.h"
#include "helpers.h"

#define LENGTH 4

static fp8q_norm_quantize_args rows_args(const void *source, int32_t dtype,
                                         const float *weight, void *normed,
                                         uint8_t *codes, float *scale,
                                         int64_t n_rows)
{
    /* In the struct's order: no bias, RMSNorm, epsilon 0, e4m3fn's max. */
    const fp8q_norm_quantize_args args = {
        source, weight, NULL, normed, codes,  scale, n_rows,
        LENGTH, dtype,  FP8Q_FLOAT32, 0, 0.0f, 448.0f, 0};

    return args;
}

void test_norm_quantize(void)
{
    /* Row 0: RMSNorm of 2s is 1 (1 / sqrt(4)); times weight. Row 1: a
     * NaN. Row 2: zeros (with epsilon 1: 0, scale 1, codes 0; with epsilon
     * 0 it is 0 * infinity, NaN, as torch's rsqrt gives too). */
    const float source[3 * LENGTH] = {2, 2, -2, 2, 1, NAN, 1, 1,
                                      0, 0, 0, 0};
    const float weight[LENGTH] = {1, 0.5f, 2, -4};
    const float bias[LENGTH] = {0.25f, 0.25f, 0.25f, 0.25f};
    const float two_values[LENGTH] = {1, 3, 1, 3};
    uint16_t half_source[LENGTH];
    uint16_t half_normed[LENGTH];
    float normed[3 * LENGTH];
    uint8_t codes[3 * LENGTH];
    float scale[3];
    fp8q_norm_quantize_args args;
    fp8q_error error;
    int c;

    args = rows_args(source, FP8Q_FLOAT32, weight, normed, codes, scale, 2);
    CHECK_OK(fp8q_norm_quantize(&args, &error), &error);
    CHECK(isnan(scale[1]));
    CHECK_INT(codes[LENGTH + 1] & 0x7F, 0x7F); /* a NaN code */
    args = rows_args(source + 2 * LENGTH, FP8Q_FLOAT32, weight,
                     normed + 2 * LENGTH, codes + 2 * LENGTH, scale + 2, 1);
    args.epsilon = 1.0f;
    CHECK_OK(fp8q_norm_quantize(&args, &error), &error);
    CHECK_DOUBLE(normed[0], 1.0);
    CHECK_DOUBLE(normed[1], 0.5);
    CHECK_DOUBLE(normed[2], -2.0);
    CHECK_DOUBLE(normed[3], -4.0);
    CHECK_DOUBLE(scale[0], (double)(4.0f / 448.0f));
    CHECK_INT(codes[3], 0xFE); /* -4 / scale = -448: e4m3fn's -max */
    CHECK_INT(codes[0], fp8q_encode_e4m3fn(1.0f / (4.0f / 448.0f), 1));
    CHECK_DOUBLE(scale[2], 1.0);
    for (c = 0; c < LENGTH; c++) {
        /* +-0: the weight -4 gives -0 (code 0x80). */
        CHECK_INT(codes[2 * LENGTH + c], weight[c] < 0 ? 0x80 : 0);
    }

    /* LayerNorm of 1, 3, 1, 3: mean 2, variance 1, so -1, 1, ...; then
     * times weight plus bias. */
    args = rows_args(two_values, FP8Q_FLOAT32, weight, normed, codes, scale,
                     1);
    args.layer_norm = 1;
    args.bias = bias;
    CHECK_OK(fp8q_norm_quantize(&args, &error), &error);
    CHECK_DOUBLE(normed[0], -0.75);
    CHECK_DOUBLE(normed[1], 0.75);
    CHECK_DOUBLE(normed[2], -1.75);
    CHECK_DOUBLE(normed[3], -3.75);

    /* A float16 row: normed is float16, codes from its values. */
    for (c = 0; c < LENGTH; c++) {
        half_source[c] = fp8q_encode_float16(source[c]);
    }
    args = rows_args(half_source, FP8Q_FLOAT16, weight, half_normed, codes,
                     scale, 1);
    CHECK_OK(fp8q_norm_quantize(&args, &error), &error);
    CHECK_BITS(half_normed[1], fp8q_encode_float16(0.5f));
    CHECK_INT(codes[3], 0xFE);

    /* Refusals. */
    args = rows_args(source, FP8Q_FLOAT8_E4M3FN, weight, normed, codes,
                     scale, 1);
    CHECK(fp8q_norm_quantize(&args, &error) == FP8Q_ERROR_TYPE);
    args = rows_args(source, FP8Q_FLOAT32, weight, normed, codes, scale, 1);
    args.epsilon = -1.0f;
    CHECK(fp8q_norm_quantize(&args, &error) == FP8Q_ERROR_VALUE);
    args.epsilon = 0.0f;
    args.row_length = 0;
    CHECK(fp8q_norm_quantize(&args, &error) == FP8Q_ERROR_VALUE);
}

/* The argument block from views (x (2, 3, 4) float16, weight and bias
 * float32): every field, then each view that does not fit refused with
 * the message naming it, in the order weight, bias, normed, codes, scale,
 * and an x with no last axis. */
void test_norm_quantize_describe(void)
{
    static uint16_t x_data[24], normed_data[24];
    static uint8_t codes_data[24];
    static float weight_data[4], bias_data[4], scale_data[6];
    const int64_t x_shape[3] = {2, 3, 4}, vector[1] = {4};
    const int64_t scale_shape[3] = {2, 3, 1}, short_vector[1] = {3};
    fp8q_view x = make_view(x_data, FP8Q_FLOAT16, 3, x_shape, NULL);
    fp8q_view weight = make_view(weight_data, FP8Q_FLOAT32, 1, vector, NULL);
    fp8q_view bias = make_view(bias_data, FP8Q_FLOAT32, 1, vector, NULL);
    fp8q_view normed = make_view(normed_data, FP8Q_FLOAT16, 3, x_shape, NULL);
    fp8q_view codes =
        make_view(codes_data, FP8Q_FLOAT8_E4M3FN, 3, x_shape, NULL);
    fp8q_view scale =
        make_view(scale_data, FP8Q_FLOAT32, 3, scale_shape, NULL);
    fp8q_view wrong;
    fp8q_norm_quantize_args args;
    fp8q_error error;

    memset(&args, 0x5A, sizeof args);
    CHECK_OK(fp8q_norm_quantize_describe(&x, &weight, &bias, &normed, &codes,
                                         &scale, 0.5f, 1, &args, &error),
             &error);
    CHECK(args.source == x_data && args.weight == weight_data &&
          args.bias == bias_data && args.normed == normed_data &&
          args.codes == codes_data && args.scale == scale_data);
    CHECK_INT(args.n_rows, 6);
    CHECK_INT(args.row_length, 4);
    CHECK_INT(args.source_dtype, FP8Q_FLOAT16);
    CHECK_INT(args.weight_dtype, FP8Q_FLOAT32);
    CHECK_INT(args.layer_norm, 1);
    CHECK_DOUBLE(args.epsilon, 0.5);
    CHECK_DOUBLE(args.max, 448.0);
    CHECK_INT(args.reserved, 0);
    CHECK_OK(fp8q_norm_quantize_check(&args, &error), &error);
    CHECK_OK(fp8q_norm_quantize_describe(&x, &weight, NULL, &normed, &codes,
                                         &scale, 0.0f, 0, &args, &error),
             &error);
    CHECK(args.bias == NULL);
    wrong = make_view(weight_data, FP8Q_FLOAT32, 1, short_vector, NULL);
    CHECK_ERROR(fp8q_norm_quantize_describe(&x, &wrong, &bias, &normed,
                                            &codes, &scale, 0.0f, 0, &args,
                                            &error),
                &error, FP8Q_ERROR_VALUE,
                "norm_quantize: weight must hold 4 float32 values, got 3 "
                "float32",
                NULL, NULL);
    wrong = make_view(bias_data, FP8Q_FLOAT16, 1, vector, NULL);
    CHECK_ERROR(fp8q_norm_quantize_describe(&x, &weight, &wrong, &normed,
                                            &codes, &scale, 0.0f, 0, &args,
                                            &error),
                &error, FP8Q_ERROR_VALUE,
                "norm_quantize: bias must hold 4 float32 values, got 4 "
                "float16",
                NULL, NULL);
    CHECK_ERROR(fp8q_norm_quantize_describe(&x, &weight, &bias, &codes,
                                            &codes, &scale, 0.0f, 0, &args,
                                            &error),
                &error, FP8Q_ERROR_VALUE,
                "norm_quantize: normed must hold 24 float16 values", NULL,
                NULL);
    CHECK_ERROR(fp8q_norm_quantize_describe(&x, &weight, &bias, &normed,
                                            &normed, &scale, 0.0f, 0, &args,
                                            &error),
                &error, FP8Q_ERROR_VALUE,
                "norm_quantize: codes must hold 24 float8_e4m3fn values",
                NULL, NULL);
    CHECK_ERROR(fp8q_norm_quantize_describe(&x, &weight, &bias, &normed,
                                            &codes, &weight, 0.0f, 0, &args,
                                            &error),
                &error, FP8Q_ERROR_VALUE,
                "norm_quantize: scale must hold 6 float32 values, got 4 "
                "float32",
                NULL, NULL);
    wrong = make_view(x_data, FP8Q_FLOAT16, 0, NULL, NULL);
    CHECK_ERROR(fp8q_norm_quantize_describe(&wrong, &weight, &bias, &normed,
                                            &codes, &scale, 0.0f, 0, &args,
                                            &error),
                &error, FP8Q_ERROR_VALUE,
                "norm_quantize: x must have a last axis of at least 1 "
                "element",
                NULL, NULL);
}
