/*
 * test_scaled_mm.c - the few-rows product of scaled_mm (decode each column
 * of b, dot it with the rows of a) on both its kernels, the AVX2 + FMA dot
 * products and the portable loop, against a double-precision reference;
 * and the scaling-mode rules.
 */
#include <math.h>
#include <stdlib.h>

#include "core/convert.h"
#include "core/float_codec.h"
#include "core/scaled_mm.h"
#include "harness.h"
#include "helpers.h"

enum { ROWS = 7, DEPTH = 300, COLUMNS = 45 };

/* Largest |product - reference| / (sum |a| |b| per output) over the
 * product of a (ROWS x DEPTH float32) and b (DEPTH x COLUMNS e4m3fn codes,
 * columns contiguous), with blockwise scales when `blockwise`. */
static double small_m_error(int blockwise)
{
    static float a[ROWS * DEPTH];
    static uint8_t codes[COLUMNS * DEPTH]; /* b column j = codes[j * DEPTH] */
    static float product[ROWS * COLUMNS];
    float block_scales[3 * 1] = {0.5f, 2.0f, 0.125f}; /* (3 k-blocks, 1) */
    const int64_t a_shape[2] = {ROWS, DEPTH};
    const int64_t b_shape[2] = {DEPTH, COLUMNS};
    const int64_t b_strides[2] = {1, DEPTH};
    const int64_t product_shape[2] = {ROWS, COLUMNS};
    const int64_t scale_shape[2] = {3, 1};
    fp8q_view a_view = make_view(a, FP8Q_FLOAT32, 2, a_shape, NULL);
    fp8q_view b_view = make_view(codes, FP8Q_FLOAT8_E4M3FN, 2, b_shape,
                                 b_strides);
    fp8q_view product_view =
        make_view(product, FP8Q_FLOAT32, 2, product_shape, NULL);
    fp8q_view scale_view =
        make_view(block_scales, FP8Q_FLOAT32, 2, scale_shape, NULL);
    fp8q_error error;
    double worst = 0.0;
    int64_t i, j, k;

    fill_random_floats(a, ROWS * DEPTH, 4.0f);
    for (i = 0; i < COLUMNS * DEPTH; i++) {
        codes[i] = (uint8_t)(harness_random_below(256) & 0xF7u); /* no NaN */
        if ((codes[i] & 0x7Fu) == 0x7Fu) {
            codes[i] = 0x70u;
        }
    }
    for (i = 0; i < ROWS * COLUMNS; i++) {
        product[i] = NAN; /* poisoned: every element must be written */
    }
    CHECK_OK(fp8q_scaled_mm_small_m(&a_view, &b_view, &scale_view,
                                    blockwise ? FP8Q_SCALING_BLOCKWISE
                                              : FP8Q_SCALING_TENSORWISE,
                                    &product_view, &error),
             &error);
    for (i = 0; i < ROWS; i++) {
        for (j = 0; j < COLUMNS; j++) {
            double sum = 0.0;
            double magnitude = 0.0;
            for (k = 0; k < DEPTH; k++) {
                double b = (double)fp8q_decode_e4m3fn(codes[j * DEPTH + k]);
                if (blockwise) {
                    b = (double)(float)(b * block_scales[k / 128]);
                }
                sum += (double)a[i * DEPTH + k] * b;
                magnitude += fabs((double)a[i * DEPTH + k] * b);
            }
            {
                const double got = (double)product[i * COLUMNS + j];
                const double relative =
                    got != got ? HUGE_VAL
                               : fabs(got - sum) / (magnitude + 1e-30);
                worst = relative > worst ? relative : worst;
            }
        }
    }
    return worst;
}

void test_scaled_mm_small_m(void)
{
    int pass;
    for (pass = 0; pass < 2; pass++) {
        /* pass 0: the default (AVX2 + FMA where present); pass 1: portable */
        fp8q_convert_allow_avx2(pass == 0);
        /* float32 accumulation over 300 terms: well within 300 * 2^-24. */
        CHECK(small_m_error(0) < 300.0 * ldexp(1.0, -24));
        CHECK(small_m_error(1) < 300.0 * ldexp(1.0, -24));
    }
    fp8q_convert_allow_avx2(1);
}

void test_scaled_mm_modes(void)
{
    float scales[64];
    fp8q_view scale_a;
    fp8q_view scale_b;
    fp8q_scaling mode;
    fp8q_error error;
    const int64_t one[2] = {1, 1};
    const int64_t rows_a[2] = {5, 1};
    const int64_t row_b[2] = {1, 7};
    const int64_t blocks_a[2] = {5, 3};
    const int64_t blocks_b[2] = {3, 1};
    int i;

    for (i = 0; i < 64; i++) {
        scales[i] = 1.0f;
    }
    scale_a = make_view(scales, FP8Q_FLOAT32, 0, one, NULL);
    scale_b = make_view(scales, FP8Q_FLOAT32, 2, one, NULL);
    CHECK_OK(fp8q_scaled_mm_mode(5, 300, 7, &scale_a, &scale_b, &mode,
                                 &error), &error);
    CHECK_INT(mode, FP8Q_SCALING_TENSORWISE);
    scale_a = make_view(scales, FP8Q_FLOAT32, 2, rows_a, NULL);
    scale_b = make_view(scales, FP8Q_FLOAT32, 2, row_b, NULL);
    CHECK_OK(fp8q_scaled_mm_mode(5, 300, 7, &scale_a, &scale_b, &mode,
                                 &error), &error);
    CHECK_INT(mode, FP8Q_SCALING_ROWWISE);
    scale_a = make_view(scales, FP8Q_FLOAT32, 2, blocks_a, NULL);
    scale_b = make_view(scales, FP8Q_FLOAT32, 2, blocks_b, NULL);
    CHECK_OK(fp8q_scaled_mm_mode(5, 300, 7, &scale_a, &scale_b, &mode,
                                 &error), &error);
    CHECK_INT(mode, FP8Q_SCALING_BLOCKWISE);
    scale_b = make_view(scales, FP8Q_FLOAT32, 2, rows_a, NULL);
    CHECK_ERROR(fp8q_scaled_mm_mode(5, 300, 7, &scale_a, &scale_b, &mode,
                                    &error),
                &error, FP8Q_ERROR_VALUE, "(5, 3) and (5, 1)",
                "blockwise (5, 3) and (3, 1)", NULL);
}
