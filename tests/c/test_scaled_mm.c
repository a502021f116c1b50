/*
 * test_scaled_mm.c - scaled_mm's own product (core/scaled_mm.c): the AVX2 +
 * FMA kernels (few-rows dot products, packed panels in register tiles) and
 * the portable loop, over shapes that straddle their tiles, blocks and
 * crossovers, both formats, with and without blockwise scales, against a
 * double-precision reference; and the scaling-mode rules.
 */
#include <math.h>
#include <stdlib.h>

#include "core/convert.h"
#include "core/float_codec.h"
#include "core/scaled_mm.h"
#include "harness.h"
#include "helpers.h"

enum { MAX_ROWS = 20, MAX_DEPTH = 300, MAX_COLUMNS = 300, PADDING = 3 };

typedef struct product_case {
    int64_t rows;
    int64_t depth;
    int64_t columns;
    fp8q_dtype dtype; /* of b */
    int blockwise;
} product_case;

static double decode(fp8q_dtype dtype, uint8_t code)
{
    return (double)(dtype == FP8Q_FLOAT8_E5M2 ? fp8q_decode_e5m2(code)
                                               : fp8q_decode_e4m3fn(code));
}

/* Largest |product - reference| / (sum |a| |b| per output) over the
 * product of a (rows x depth float32) and b (depth x columns FP8 codes,
 * columns contiguous, PADDING codes between them), with blockwise scales
 * when asked. */
static double product_error(const product_case *test)
{
    static float a[MAX_ROWS * MAX_DEPTH];
    static uint8_t codes[MAX_COLUMNS * (MAX_DEPTH + PADDING)];
    static float product[MAX_ROWS * MAX_COLUMNS];
    static float block_scales[3 * 3]; /* (k blocks, n blocks) */
    const int64_t column_stride = test->depth + PADDING;
    const int64_t a_shape[2] = {test->rows, test->depth};
    const int64_t b_shape[2] = {test->depth, test->columns};
    const int64_t b_strides[2] = {1, column_stride};
    const int64_t product_shape[2] = {test->rows, test->columns};
    const int64_t scale_shape[2] = {(test->depth + 127) / 128,
                                    (test->columns + 127) / 128};
    fp8q_view a_view = make_view(a, FP8Q_FLOAT32, 2, a_shape, NULL);
    fp8q_view b_view = make_view(codes, test->dtype, 2, b_shape, b_strides);
    fp8q_view product_view =
        make_view(product, FP8Q_FLOAT32, 2, product_shape, NULL);
    fp8q_view scale_view =
        make_view(block_scales, FP8Q_FLOAT32, 2, scale_shape, NULL);
    fp8q_error error;
    double worst = 0.0;
    int64_t i, j, k;

    fill_random_floats(a, test->rows * test->depth, 4.0f);
    for (i = 0; i < test->columns * column_stride; i++) {
        /* Every finite code: no NaN (0x7F of e4m3fn, 0x7D-0x7F of e5m2) or
         * infinity (0x7C of e5m2), with either sign. */
        uint8_t code = (uint8_t)harness_random_below(256);
        if (test->dtype == FP8Q_FLOAT8_E5M2 && (code & 0x7Cu) == 0x7Cu) {
            code = (uint8_t)(code & 0xFBu);
        }
        if (test->dtype != FP8Q_FLOAT8_E5M2 && (code & 0x7Fu) == 0x7Fu) {
            code = (uint8_t)(code & 0xFEu);
        }
        codes[i] = code;
    }
    for (i = 0; i < scale_shape[0] * scale_shape[1]; i++) {
        block_scales[i] = ldexpf(1.0f + 0.25f * (float)i, (int)(i % 5) - 2);
    }
    for (i = 0; i < test->rows * test->columns; i++) {
        product[i] = NAN; /* poisoned: every element must be written */
    }
    CHECK(fp8q_scaled_mm_has_kernel(test->rows, test->depth, &b_view));
    CHECK_OK(fp8q_scaled_mm_product(&a_view, &b_view, &scale_view,
                                    test->blockwise
                                        ? FP8Q_SCALING_BLOCKWISE
                                        : FP8Q_SCALING_TENSORWISE,
                                    &product_view, &error),
             &error);
    for (i = 0; i < test->rows; i++) {
        for (j = 0; j < test->columns; j++) {
            double sum = 0.0;
            double magnitude = 0.0;
            for (k = 0; k < test->depth; k++) {
                double b = decode(test->dtype, codes[j * column_stride + k]);
                if (test->blockwise) {
                    b = (double)(float)(b * block_scales[k / 128 *
                                                             scale_shape[1] +
                                                         j / 128]);
                }
                sum += (double)a[i * test->depth + k] * b;
                magnitude += fabs((double)a[i * test->depth + k] * b);
            }
            {
                const double got =
                    (double)product[i * test->columns + j];
                const double relative =
                    got != got ? HUGE_VAL
                               : fabs(got - sum) / (magnitude + 1e-30);
                worst = relative > worst ? relative : worst;
            }
        }
    }
    return worst;
}

void test_scaled_mm_product(void)
{
    /* Rows: 1-8 take the few-rows kernel, more the panels (tiles of 6);
     * columns: partial panels of 16 (<= 8 and > 8 left) and more than one
     * block of 256; depths: tails of 8 and a second block of 256 rows. */
    static const product_case cases[] = {
        {1, 300, 45, FP8Q_FLOAT8_E4M3FN, 0},
        {1, 16, 8, FP8Q_FLOAT8_E4M3FN, 0},
        {3, 131, 7, FP8Q_FLOAT8_E5M2, 1},
        {5, 300, 300, FP8Q_FLOAT8_E4M3FN, 1},
        {8, 256, 40, FP8Q_FLOAT8_E5M2, 0},
        {9, 300, 45, FP8Q_FLOAT8_E4M3FN, 1},
        {13, 257, 300, FP8Q_FLOAT8_E5M2, 1},
        {16, 16, 8, FP8Q_FLOAT8_E4M3FN, 0},
        {20, 300, 264, FP8Q_FLOAT8_E4M3FN, 0},
        {20, 7, 17, FP8Q_FLOAT8_E5M2, 1},
    };
    size_t i;
    int pass;

    for (pass = 0; pass < 2; pass++) {
        /* pass 0: the default (AVX2 + FMA where present); pass 1: portable
         * (rows <= FP8Q_SCALED_MM_DOT_M only: more go to a BLAS). */
        fp8q_convert_allow_avx2(pass == 0);
        for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            if (pass == 1 && cases[i].rows > FP8Q_SCALED_MM_DOT_M) {
                continue;
            }
            /* float32 sums of at most 300 terms: within 300 * 2^-24. */
            CHECK(product_error(&cases[i]) < 300.0 * ldexp(1.0, -24));
        }
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
