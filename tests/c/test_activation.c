/*
 * test_activation.c - a layer's activations quantized with non-finite
 * tokens flagged (core/activation.h): the finite rows get exactly
 * fp8q_quantize's codes and scales (per row, per 1x128 block, static), the
 * flagged rows scale 1, and fp8q_fill_rows_nan writes the default NaN into
 * those rows only.
 */
#include <math.h>
#include <string.h>

#include "core/activation.h"
#include "core/float_codec.h"
#include "core/quantize.h"
#include "harness.h"
#include "helpers.h"

#define ROWS 9
#define COLS 300

/* x (ROWS, COLS) float32 with NaN in row 2 and -inf in row 6. */
static void poisoned_rows(float *x)
{
    fill_random_floats(x, ROWS * COLS, 1000.0f);
    x[2 * COLS + 17] = fp8q_bits_to_float(0x7FC00000u);
    x[6 * COLS + COLS - 1] = -INFINITY;
}

/* fp8q_quantize of row `row` alone at `block_cols` (per row when it is
 * COLS), into codes (COLS) and scales (its group count). */
static void quantize_row(const float *x, int64_t row, int64_t block_cols,
                         uint8_t *codes, float *scales)
{
    const int64_t shape[2] = {1, COLS};
    const int64_t groups[2] = {1, (COLS + block_cols - 1) / block_cols};
    fp8q_view source = make_view((void *)(x + row * COLS), FP8Q_FLOAT32, 2,
                                 shape, NULL);
    fp8q_view destination =
        make_view(codes, FP8Q_FLOAT8_E4M3FN, 2, shape, NULL);
    fp8q_view scale = make_view(scales, FP8Q_FLOAT32, 2, groups, NULL);
    fp8q_quantize_options options;
    fp8q_error error;

    memset(&options, 0, sizeof options);
    options.compute_scale = 1;
    options.saturate = 1;
    options.granularity.kind =
        block_cols == COLS ? FP8Q_GRANULARITY_ROW : FP8Q_GRANULARITY_BLOCK;
    options.granularity.block_rows = 1;
    options.granularity.block_cols = block_cols;
    CHECK_OK(fp8q_quantize(&source, &destination, &scale, &options, &error),
             &error);
}

static void check_dynamic(int64_t block_cols)
{
    static float x[ROWS * COLS];
    static uint8_t codes[ROWS * COLS];
    static uint8_t expected_codes[COLS];
    float scales[ROWS * 3];
    float expected_scales[3];
    uint8_t flags[ROWS];
    const int64_t shape[2] = {ROWS, COLS};
    const int64_t groups = (COLS + block_cols - 1) / block_cols;
    const int64_t scale_shape[2] = {ROWS, groups};
    fp8q_view source, destination, scale;
    fp8q_error error;
    int64_t n_nonfinite = -1;
    int64_t row, index;

    poisoned_rows(x);
    source = make_view(x, FP8Q_FLOAT32, 2, shape, NULL);
    destination = make_view(codes, FP8Q_FLOAT8_E4M3FN, 2, shape, NULL);
    scale = make_view(scales, FP8Q_FLOAT32, 2, scale_shape, NULL);
    CHECK_OK(fp8q_quantize_activations(&source, &destination, &scale,
                                       block_cols, NULL, flags, &n_nonfinite,
                                       &error),
             &error);
    CHECK_INT(n_nonfinite, 2);
    for (row = 0; row < ROWS; row++) {
        const int flagged = row == 2 || row == 6;
        CHECK_INT(flags[row], flagged);
        if (flagged) {
            for (index = 0; index < groups; index++) {
                CHECK_BITS(fp8q_float_to_bits(scales[row * groups + index]),
                           0x3F800000u);
            }
            continue;
        }
        quantize_row(x, row, block_cols, expected_codes, expected_scales);
        CHECK(memcmp(codes + row * COLS, expected_codes, COLS) == 0);
        CHECK(memcmp(scales + row * groups, expected_scales,
                     (size_t)groups * sizeof *scales) == 0);
    }
}

void test_quantize_activations_dynamic(void)
{
    check_dynamic(COLS); /* per token */
    check_dynamic(128);  /* 1 x 128 blocks */
}

void test_quantize_activations_static(void)
{
    static float x[ROWS * COLS];
    static uint8_t codes[ROWS * COLS];
    float row_amax[ROWS];
    uint8_t flags[ROWS];
    float given = 0.75f;
    const int64_t shape[2] = {ROWS, COLS};
    const int64_t amax_shape[2] = {ROWS, 1};
    fp8q_view source, destination, scale, amax;
    fp8q_error error;
    int64_t n_nonfinite = -1;
    int64_t index;

    poisoned_rows(x);
    source = make_view(x, FP8Q_FLOAT32, 2, shape, NULL);
    destination = make_view(codes, FP8Q_FLOAT8_E4M3FN, 2, shape, NULL);
    scale = make_view(&given, FP8Q_FLOAT32, 0, NULL, NULL);
    amax = make_view(row_amax, FP8Q_FLOAT32, 2, amax_shape, NULL);
    CHECK_OK(fp8q_quantize_activations(&source, &destination, &scale, 0,
                                       &amax, flags, &n_nonfinite, &error),
             &error);
    CHECK_INT(n_nonfinite, 2);
    CHECK(flags[2] == 1 && flags[6] == 1 && flags[0] == 0 && flags[8] == 0);
    for (index = 0; index < ROWS * COLS; index++) {
        if (index / COLS == 2 || index / COLS == 6) {
            continue;
        }
        CHECK_BITS(codes[index], fp8q_encode_e4m3fn(x[index] / given, 1));
    }
    /* A wrong amax workspace is refused, naming its shape. */
    amax.shape[0] = ROWS - 1;
    CHECK_ERROR(fp8q_quantize_activations(&source, &destination, &scale, 0,
                                          &amax, flags, &n_nonfinite, &error),
                &error, FP8Q_ERROR_VALUE, "amax view must be (9, 1)", NULL,
                NULL);
}

void test_fill_rows_nan(void)
{
    uint16_t out[4 * 5];
    const int64_t shape[2] = {4, 5};
    const uint8_t rows[4] = {0, 1, 0, 1};
    fp8q_view view;
    fp8q_error error;
    int index;

    for (index = 0; index < 20; index++) {
        out[index] = (uint16_t)(0x3F80 + index); /* finite bfloat16 */
    }
    view = make_view(out, FP8Q_BFLOAT16, 2, shape, NULL);
    CHECK_OK(fp8q_fill_rows_nan(&view, rows, &error), &error);
    for (index = 0; index < 20; index++) {
        CHECK_BITS(out[index], rows[index / 5] ? 0x7FC0u
                                               : (uint32_t)(0x3F80 + index));
    }
}
