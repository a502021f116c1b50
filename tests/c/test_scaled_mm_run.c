/*
 * test_scaled_mm_run.c - core/scaled_mm_run.c, the CPU scaled matmul and
 * weight-only product run from views: the result, amax_out and an FP8
 * result's scale_result against a double-precision reference, with b in
 * the layout core's kernel takes (columns contiguous) and in the one it
 * hands to the caller's sgemm (a test sgemm here, counted).
 */
#include <math.h>
#include <string.h>

#include "core/float_codec.h"
#include "core/scaled_mm_run.h"
#include "harness.h"
#include "helpers.h"

enum { ROWS = 5, DEPTH = 70, COLUMNS = 9 };

static int sgemm_calls;

/* product = a @ b in float32 sums, any strides (the test's sgemm). */
static fp8q_status test_sgemm(void *context, const fp8q_view *a,
                              const fp8q_view *b, const fp8q_view *product,
                              fp8q_error *error)
{
    const float *x = (const float *)a->data;
    const float *y = (const float *)b->data;
    float *z = (float *)product->data;
    int64_t i, j, p;

    (void)context;
    (void)error;
    sgemm_calls++;
    for (i = 0; i < a->shape[0]; i++) {
        for (j = 0; j < b->shape[1]; j++) {
            float sum = 0.0f;
            for (p = 0; p < a->shape[1]; p++) {
                sum += x[i * a->strides[0] + p * a->strides[1]] *
                       y[p * b->strides[0] + j * b->strides[1]];
            }
            z[i * product->strides[0] + j * product->strides[1]] = sum;
        }
    }
    return FP8Q_OK;
}

/* Random e4m3fn codes, never NaN. */
static void random_codes(uint8_t *codes, int count)
{
    int i;

    for (i = 0; i < count; i++) {
        codes[i] = (uint8_t)harness_random_below(256);
        if ((codes[i] & 0x7F) == 0x7F) {
            codes[i] = 0x38; /* 1.0 */
        }
    }
}

void test_scaled_mm_run(void)
{
    static uint8_t a_codes[ROWS * DEPTH], b_codes[DEPTH * COLUMNS];
    static float out[ROWS * COLUMNS];
    float scale_a[ROWS], scale_b[COLUMNS], bias[COLUMNS], amax = 0.0f;
    uint8_t out8[ROWS * COLUMNS];
    const int64_t a_shape[2] = {ROWS, DEPTH}, b_shape[2] = {DEPTH, COLUMNS};
    const int64_t out_shape[2] = {ROWS, COLUMNS};
    const int64_t scale_a_shape[2] = {ROWS, 1}, scale_b_shape[2] = {1, COLUMNS};
    const int64_t column_major[2] = {1, DEPTH};
    const int64_t bias_shape[1] = {COLUMNS};
    fp8q_view a, b, sa, sb, bias_view, out_view, amax_view, out8_view;
    fp8q_scaled_mm_run_call call;
    fp8q_error error;
    int layout, i, j, p;

    random_codes(a_codes, ROWS * DEPTH);
    random_codes(b_codes, DEPTH * COLUMNS);
    for (i = 0; i < ROWS; i++) {
        scale_a[i] = 0.25f + 0.125f * (float)i;
    }
    for (j = 0; j < COLUMNS; j++) {
        scale_b[j] = 0.5f + 0.0625f * (float)j;
        bias[j] = (float)j - 4.0f;
    }
    a = make_view(a_codes, FP8Q_FLOAT8_E4M3FN, 2, a_shape, NULL);
    sa = make_view(scale_a, FP8Q_FLOAT32, 2, scale_a_shape, NULL);
    sb = make_view(scale_b, FP8Q_FLOAT32, 2, scale_b_shape, NULL);
    bias_view = make_view(bias, FP8Q_FLOAT32, 1, bias_shape, NULL);
    out_view = make_view(out, FP8Q_FLOAT32, 2, out_shape, NULL);
    amax_view = make_view(&amax, FP8Q_FLOAT32, 0, bias_shape, NULL);
    out8_view = make_view(out8, FP8Q_FLOAT8_E4M3FN, 2, out_shape, NULL);
    /* layout 0: b C-contiguous (the caller's sgemm); 1: the same values
     * with columns contiguous (b = w.T, core's kernel where it has one). */
    for (layout = 0; layout < 2; layout++) {
        static uint8_t transposed[DEPTH * COLUMNS];
        double largest = 0.0;
        for (p = 0; p < DEPTH; p++) {
            for (j = 0; j < COLUMNS; j++) {
                transposed[j * DEPTH + p] = b_codes[p * COLUMNS + j];
            }
        }
        b = layout == 0 ? make_view(b_codes, FP8Q_FLOAT8_E4M3FN, 2, b_shape,
                                    NULL)
                        : make_view(transposed, FP8Q_FLOAT8_E4M3FN, 2,
                                    b_shape, column_major);
        memset(&call, 0, sizeof call);
        call.a = &a;
        call.b = &b;
        call.scale_a = &sa;
        call.scale_b = &sb;
        call.bias = &bias_view;
        call.amax_out = &amax_view;
        call.out = &out_view;
        call.mode = FP8Q_SCALING_ROWWISE;
        call.scale_result = 1.0f;
        call.out_is_new = layout;
        call.sgemm = test_sgemm;
        sgemm_calls = 0;
        CHECK_OK(fp8q_scaled_mm_run(&call, &error), &error);
        CHECK_INT(sgemm_calls,
                  fp8q_scaled_mm_has_kernel(ROWS, DEPTH, &b) ? 0 : 1);
        for (i = 0; i < ROWS; i++) {
            for (j = 0; j < COLUMNS; j++) {
                double sum = 0.0, magnitude = 0.0;
                for (p = 0; p < DEPTH; p++) {
                    const double term =
                        (double)fp8q_decode_e4m3fn(a_codes[i * DEPTH + p]) *
                        (double)fp8q_decode_e4m3fn(b_codes[p * COLUMNS + j]);
                    sum += term;
                    magnitude += fabs(term);
                }
                sum = sum * scale_a[i] * scale_b[j] + bias[j];
                magnitude = magnitude * scale_a[i] * scale_b[j] + 8.0;
                CHECK(fabs(out[i * COLUMNS + j] - sum) <=
                      DEPTH * 1.2e-7 * magnitude);
                if (fabs(out[i * COLUMNS + j]) > largest) {
                    largest = fabs(out[i * COLUMNS + j]);
                }
            }
        }
        CHECK_DOUBLE(amax, largest);
        /* An FP8 result: the float32 product / scale_result, rounded once
         * (saturating) to e4m3fn. */
        call.out = &out8_view;
        call.amax_out = NULL;
        call.scale_result = 0.5f;
        call.out_is_new = 1;
        CHECK_OK(fp8q_scaled_mm_run(&call, &error), &error);
        for (i = 0; i < ROWS * COLUMNS; i++) {
            CHECK_BITS(out8[i], fp8q_encode_e4m3fn(out[i] / 0.5f, 1));
        }
    }
}

void test_weight_only_run(void)
{
    static uint8_t weight[COLUMNS * DEPTH];
    static float x[ROWS * DEPTH], out[ROWS * COLUMNS];
    float scale[COLUMNS], bias[COLUMNS];
    const int64_t x_shape[2] = {ROWS, DEPTH}, weight_shape[2] = {COLUMNS, DEPTH};
    const int64_t out_shape[2] = {ROWS, COLUMNS};
    const int64_t scale_shape[2] = {COLUMNS, 1}, bias_shape[1] = {COLUMNS};
    fp8q_view x_view, weight_view, scale_view, bias_view, out_view;
    fp8q_granularity granularity;
    fp8q_error error;
    int i, j, p;

    random_codes(weight, COLUMNS * DEPTH);
    for (i = 0; i < ROWS * DEPTH; i++) {
        x[i] = harness_random_float(4.0f);
    }
    for (j = 0; j < COLUMNS; j++) {
        scale[j] = 0.125f * (float)(j + 1);
        bias[j] = 0.5f * (float)j;
    }
    memset(&granularity, 0, sizeof granularity);
    granularity.kind = FP8Q_GRANULARITY_ROW;
    x_view = make_view(x, FP8Q_FLOAT32, 2, x_shape, NULL);
    weight_view = make_view(weight, FP8Q_FLOAT8_E4M3FN, 2, weight_shape, NULL);
    scale_view = make_view(scale, FP8Q_FLOAT32, 2, scale_shape, NULL);
    bias_view = make_view(bias, FP8Q_FLOAT32, 1, bias_shape, NULL);
    out_view = make_view(out, FP8Q_FLOAT32, 2, out_shape, NULL);
    sgemm_calls = 0;
    CHECK_OK(fp8q_weight_only_run(&x_view, &weight_view, &scale_view,
                                  &granularity, &bias_view, &out_view,
                                  test_sgemm, NULL, &error),
             &error);
    CHECK_INT(sgemm_calls, 1);
    for (i = 0; i < ROWS; i++) {
        for (j = 0; j < COLUMNS; j++) {
            double sum = 0.0, magnitude = 0.0;
            for (p = 0; p < DEPTH; p++) {
                /* w * scale rounded once to float32, as documented. */
                const double term =
                    (double)x[i * DEPTH + p] *
                    (double)(float)(fp8q_decode_e4m3fn(weight[j * DEPTH + p]) *
                                    scale[j]);
                sum += term;
                magnitude += fabs(term);
            }
            CHECK(fabs(out[i * COLUMNS + j] - (sum + bias[j])) <=
                  DEPTH * 1.2e-7 * (magnitude + fabs(bias[j])) + 1e-6);
        }
    }
}
