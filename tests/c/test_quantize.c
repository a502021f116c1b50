/*
 * test_quantize.c - scale shapes, the amax -> scale rule (power of two,
 * zero, subnormal, non-finite), quantize at every granularity against a
 * per-element reference, round trips through dequantize, given scales,
 * empty and 0-d inputs, and the error messages.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/float_codec.h"
#include "core/quantize.h"
#include "harness.h"
#include "helpers.h"

static fp8q_granularity granularity_of(fp8q_granularity_kind kind,
                                       int64_t block_rows, int64_t block_cols)
{
    fp8q_granularity granularity;
    granularity.kind = kind;
    granularity.block_rows = block_rows;
    granularity.block_cols = block_cols;
    return granularity;
}

void test_scale_shape(void)
{
    const int64_t shape[3] = {4, 5, 6};
    const int64_t matrix[2] = {300, 257};
    int64_t scale_shape[FP8Q_MAX_DIMS];
    int scale_ndim = -1;
    fp8q_granularity granularity;
    fp8q_error error;

    granularity = granularity_of(FP8Q_GRANULARITY_TENSOR, 0, 0);
    CHECK_OK(fp8q_scale_shape(&granularity, 3, shape, &scale_ndim,
                              scale_shape, &error),
             &error);
    CHECK_INT(scale_ndim, 0);
    granularity = granularity_of(FP8Q_GRANULARITY_ROW, 0, 0);
    CHECK_OK(fp8q_scale_shape(&granularity, 3, shape, &scale_ndim,
                              scale_shape, &error),
             &error);
    CHECK_INT(scale_ndim, 3);
    CHECK(scale_shape[0] == 4 && scale_shape[1] == 5 && scale_shape[2] == 1);
    granularity = granularity_of(FP8Q_GRANULARITY_COL, 0, 0);
    CHECK_OK(fp8q_scale_shape(&granularity, 3, shape, &scale_ndim,
                              scale_shape, &error),
             &error);
    CHECK(scale_shape[0] == 1 && scale_shape[1] == 1 && scale_shape[2] == 6);
    granularity = granularity_of(FP8Q_GRANULARITY_BLOCK, 128, 128);
    CHECK_OK(fp8q_scale_shape(&granularity, 2, matrix, &scale_ndim,
                              scale_shape, &error),
             &error);
    CHECK(scale_ndim == 2 && scale_shape[0] == 3 && scale_shape[1] == 3);
    /* Regression: (M + rows - 1) / rows overflowed for the largest blocks. */
    granularity = granularity_of(FP8Q_GRANULARITY_BLOCK, INT64_MAX, 1);
    CHECK_OK(fp8q_scale_shape(&granularity, 2, matrix, &scale_ndim,
                              scale_shape, &error),
             &error);
    CHECK(scale_ndim == 2 && scale_shape[0] == 1 && scale_shape[1] == 257);
    {   /* ... and fp8q_block_amax divided by zero: one block does it all. */
        float values[6] = {1.0f, -3.0f, 0.5f, 2.0f, 0.0f, -0.25f};
        float scale = 0.0f;
        uint8_t codes[6];
        const int64_t data_shape[2] = {2, 3};
        const int64_t one_block[2] = {1, 1};
        const fp8q_view source =
            make_view(values, FP8Q_FLOAT32, 2, data_shape, NULL);
        const fp8q_view destination =
            make_view(codes, FP8Q_FLOAT8_E4M3FN, 2, data_shape, NULL);
        const fp8q_view scales =
            make_view(&scale, FP8Q_FLOAT32, 2, one_block, NULL);
        fp8q_quantize_options options;

        options.granularity =
            granularity_of(FP8Q_GRANULARITY_BLOCK, INT64_MAX, INT64_MAX);
        options.compute_scale = 1;
        options.power_of_2 = 0;
        options.saturate = 1;
        CHECK_OK(fp8q_quantize(&source, &destination, &scales, &options,
                               &error),
                 &error);
        CHECK_BITS(fp8q_float_to_bits(scale),
                   fp8q_float_to_bits(3.0f / 448.0f));
        CHECK_INT(codes[1], fp8q_encode_e4m3fn(-3.0f / scale, 1));
    }

    CHECK_ERROR(fp8q_scale_shape(&granularity, 3, shape, &scale_ndim,
                                 scale_shape, &error),
                &error, FP8Q_ERROR_VALUE, "2-D", "3 dimensions", NULL);
    granularity = granularity_of(FP8Q_GRANULARITY_BLOCK, 1, 0);
    CHECK_ERROR(fp8q_scale_shape(&granularity, 2, matrix, &scale_ndim,
                                 scale_shape, &error),
                &error, FP8Q_ERROR_VALUE, ">= 1", "(1, 0)", NULL);
    granularity = granularity_of(FP8Q_GRANULARITY_ROW, 0, 0);
    CHECK_ERROR(fp8q_scale_shape(&granularity, 0, shape, &scale_ndim,
                                 scale_shape, &error),
                &error, FP8Q_ERROR_VALUE, "row", "0-d", NULL);
}

static int is_power_of_two(float value)
{
    const uint32_t bits = fp8q_float_to_bits(value);
    const uint32_t exponent = bits & 0x7F800000u;
    const uint32_t fraction = bits & 0x007FFFFFu;
    if (exponent != 0) {
        return fraction == 0;
    }
    return fraction != 0 && (fraction & (fraction - 1)) == 0;
}

void test_scales_from_amax(void)
{
    float amax[8] = {448.0f, 0.0f, 1.0f, 224.0f, 1e-40f, 3e3f, 1e-45f, 5.0f};
    float original[8];
    const int64_t eight[1] = {8};
    fp8q_view view = make_view(amax, FP8Q_FLOAT32, 1, eight, NULL);
    fp8q_error error;
    int64_t i;

    memcpy(original, amax, sizeof amax);
    CHECK_OK(fp8q_scales_from_amax(&view, FP8Q_FLOAT8_E4M3FN, 0, 0, &error),
             &error);
    CHECK_DOUBLE(amax[0], 1.0);
    CHECK_DOUBLE(amax[1], 1.0);              /* an all-zero group */
    CHECK_DOUBLE(amax[2], 1.0f / 448.0f);    /* float32 division */
    CHECK_DOUBLE(amax[3], 0.5);
    CHECK_DOUBLE(amax[4], 1e-40f / 448.0f);  /* subnormal scale */
    CHECK(amax[6] > 0.0f);                   /* never a zero scale */

    memcpy(amax, original, sizeof amax);
    CHECK_OK(fp8q_scales_from_amax(&view, FP8Q_FLOAT8_E5M2, 0, 1, &error),
             &error);
    for (i = 0; i < 8; i++) {
        const float exact = original[i] == 0.0f
                                ? 1.0f
                                : original[i] / 57344.0f;
        CHECK(is_power_of_two(amax[i]));
        if (exact > 0.0f) {
            /* Rounded up, by less than a factor of two. */
            CHECK(amax[i] >= exact);
            CHECK(amax[i] < 2.0f * exact || exact < 1e-44f);
        }
    }
    CHECK_DOUBLE(amax[0], 0.0078125); /* 448 / 57344 = 2^-7 exactly */
    CHECK_DOUBLE(amax[1], 1.0);
    CHECK_DOUBLE(amax[2], ldexp(1.0, -15)); /* 1/57344 = 2^-15.8 */
    CHECK_DOUBLE(amax[6], ldexp(1.0, -149));

    /* Subnormal scales round up on the subnormal grid. */
    {
        float tiny[3] = {3.0e-43f * 448.0f, 1e-41f * 448.0f,
                         1.1e-38f * 448.0f};
        const int64_t three[1] = {3};
        fp8q_view tiny_view = make_view(tiny, FP8Q_FLOAT32, 1, three, NULL);
        CHECK_OK(fp8q_scales_from_amax(&tiny_view, FP8Q_FLOAT8_E4M3FN, 0, 1,
                                       &error),
                 &error);
        for (i = 0; i < 3; i++) {
            CHECK(is_power_of_two(tiny[i]));
        }
        CHECK_DOUBLE(tiny[2], ldexp(1.0, -126)); /* up into the normals */
    }

    /* Non-finite amax: an error naming the group; nothing written. */
    memcpy(amax, original, sizeof amax);
    amax[5] = fp8q_bits_to_float(0x7FC00000u);
    CHECK_ERROR(fp8q_scales_from_amax(&view, FP8Q_FLOAT8_E4M3FN, 0, 0, &error),
                &error, FP8Q_ERROR_VALUE, "group 5", "nan", NULL);
    CHECK_DOUBLE(amax[0], 448.0);
    amax[5] = 1.0f;
    amax[7] = fp8q_bits_to_float(0x7F800000u);
    CHECK_ERROR(fp8q_scales_from_amax(&view, FP8Q_FLOAT8_E4M3FN, 0, 0, &error),
                &error, FP8Q_ERROR_VALUE, "group 7", "inf", NULL);
    CHECK_ERROR(fp8q_scales_from_amax(&view, FP8Q_FLOAT16, 0, 0, &error),
                &error, FP8Q_ERROR_TYPE, "FP8", "float16", NULL);

    /* margin: each unit doubles the headroom above amax. */
    {
        float margin_amax[2] = {448.0f, 3.0e38f};
        const int64_t two[1] = {2};
        fp8q_view margin_view = make_view(margin_amax, FP8Q_FLOAT32, 1, two,
                                          NULL);
        margin_amax[1] = 1.0f;
        CHECK_OK(fp8q_scales_from_amax(&margin_view, FP8Q_FLOAT8_E4M3FN, 3, 0,
                                       &error),
                 &error);
        CHECK_DOUBLE(margin_amax[0], 8.0);
        CHECK_DOUBLE(margin_amax[1], 8.0f / 448.0f);
        margin_amax[0] = 448.0f;
        CHECK_OK(fp8q_scales_from_amax(&margin_view, FP8Q_FLOAT8_E4M3FN, -2,
                                       0, &error),
                 &error);
        CHECK_DOUBLE(margin_amax[0], 0.25);
        /* A scale that overflows float32 is an error; nothing written. */
        margin_amax[0] = 3.0e38f;
        CHECK_ERROR(fp8q_scales_from_amax(&margin_view, FP8Q_FLOAT8_E4M3FN, 10,
                                          0, &error),
                    &error, FP8Q_ERROR_VALUE, "group 0", "overflows", NULL);
        CHECK_DOUBLE(margin_amax[0], 3.0e38f);
        CHECK_ERROR(fp8q_scales_from_amax(&margin_view, FP8Q_FLOAT8_E4M3FN, 65,
                                          0, &error),
                    &error, FP8Q_ERROR_VALUE, "margin", "65", NULL);
    }
}

/* ------------------------------------------------------------------------- */
/* Quantize                                                                  */

/* Checks q == fp8(x / s) element by element, where s is scale broadcast per
 * granularity, and that the scale equals amax / max per group (computed
 * here independently). */
static void check_quantized(const fp8q_view *source, const fp8q_view *codes,
                            const fp8q_view *scale,
                            const fp8q_granularity *granularity, float max)
{
    int64_t index[FP8Q_MAX_DIMS] = {0};
    int64_t n_scales = fp8q_view_size(scale);
    float *group_amax = (float *)calloc((size_t)(n_scales + 1),
                                        sizeof(float));
    int64_t code_mismatches = 0;
    int64_t scale_mismatches = 0;
    int64_t group;

    if (fp8q_view_size(source) > 0) {
        do {
            int64_t scale_index[FP8Q_MAX_DIMS] = {0};
            int64_t position = 0;
            float value = reference_load(source->dtype,
                                         element_at(source, index));
            float factor;
            uint8_t expected;
            int axis;

            /* Which group (C-order position in the scale view). */
            for (axis = 0; axis < scale->ndim; axis++) {
                if (granularity->kind == FP8Q_GRANULARITY_BLOCK) {
                    scale_index[axis] =
                        index[axis] / (axis == 0 ? granularity->block_rows
                                                 : granularity->block_cols);
                }
                else {
                    scale_index[axis] =
                        scale->shape[axis] == 1 ? 0 : index[axis];
                }
                position = position * scale->shape[axis] + scale_index[axis];
            }
            memcpy(&factor, element_at(scale, scale_index), sizeof factor);
            reference_store(codes->dtype, value / factor, 1, &expected);
            if (expected != *(uint8_t *)element_at(codes, index)) {
                code_mismatches++;
            }
            value = (float)fabs((double)value);
            if (value > group_amax[position]) {
                group_amax[position] = value;
            }
        } while (next_index(source->ndim, source->shape, index));
    }
    memset(index, 0, sizeof index);
    group = 0;
    if (n_scales > 0) {
        do {
            float actual;
            const float expected =
                group_amax[group] == 0.0f ? 1.0f : group_amax[group] / max;
            memcpy(&actual, element_at(scale, index), sizeof actual);
            if (actual != expected) {
                scale_mismatches++;
            }
            group++;
        } while (next_index(scale->ndim, scale->shape, index));
    }
    CHECK_INT(code_mismatches, 0);
    CHECK_INT(scale_mismatches, 0);
    free(group_amax);
}

void test_quantize_granularities(void)
{
    enum { ROWS = 37, COLS = 300 };
    const int64_t shape[2] = {ROWS, COLS};
    static float values[ROWS * COLS];
    static uint8_t codes[ROWS * COLS];
    static float scales[ROWS * COLS];
    static const fp8q_granularity_kind kinds[] = {
        FP8Q_GRANULARITY_TENSOR, FP8Q_GRANULARITY_ROW, FP8Q_GRANULARITY_COL,
        FP8Q_GRANULARITY_BLOCK, FP8Q_GRANULARITY_BLOCK};
    size_t kind;

    fill_random_floats(values, ROWS * COLS, 20.0f);
    for (kind = 0; kind < sizeof kinds / sizeof kinds[0]; kind++) {
        const fp8q_granularity granularity =
            kind == 3 ? granularity_of(kinds[kind], 1, 128)
                      : granularity_of(kinds[kind], 16, 32);
        fp8q_quantize_options options;
        int64_t scale_shape[FP8Q_MAX_DIMS];
        int scale_ndim;
        fp8q_view source = make_view(values, FP8Q_FLOAT32, 2, shape, NULL);
        fp8q_view destination =
            make_view(codes, FP8Q_FLOAT8_E4M3FN, 2, shape, NULL);
        fp8q_view scale;
        fp8q_error error;

        options.granularity = granularity;
        options.compute_scale = 1;
        options.power_of_2 = 0;
        options.saturate = 1;
        CHECK_OK(fp8q_scale_shape(&granularity, 2, shape, &scale_ndim,
                                  scale_shape, &error),
                 &error);
        scale = make_view(scales, FP8Q_FLOAT32, scale_ndim, scale_shape,
                          NULL);
        memset(codes, 0xCD, sizeof codes);
        CHECK_OK(fp8q_quantize(&source, &destination, &scale, &options,
                               &error),
                 &error);
        check_quantized(&source, &destination, &scale, &granularity, 448.0f);
    }
}

void test_quantize_round_trip(void)
{
    enum { ROWS = 64, COLS = 257 };
    const int64_t shape[2] = {ROWS, COLS};
    const int64_t scale_shape[2] = {ROWS, 1};
    static float values[ROWS * COLS];
    static float restored[ROWS * COLS];
    static uint8_t codes[ROWS * COLS];
    float scales[ROWS];
    static const fp8q_dtype targets[] = {
        FP8Q_FLOAT8_E4M3FN, FP8Q_FLOAT8_E5M2, FP8Q_FLOAT8_E4M3FNUZ,
        FP8Q_FLOAT8_E5M2FNUZ};
    size_t target;
    int power_of_2;

    fill_random_floats(values, ROWS * COLS, 5.0f);
    for (target = 0; target < 4; target++) {
        for (power_of_2 = 0; power_of_2 < 2; power_of_2++) {
            fp8q_finfo info;
            fp8q_quantize_options options;
            fp8q_view source =
                make_view(values, FP8Q_FLOAT32, 2, shape, NULL);
            fp8q_view destination =
                make_view(codes, targets[target], 2, shape, NULL);
            fp8q_view scale =
                make_view(scales, FP8Q_FLOAT32, 2, scale_shape, NULL);
            fp8q_view back = make_view(restored, FP8Q_FLOAT32, 2, shape, NULL);
            fp8q_error error;
            int64_t row;
            int64_t col;
            int64_t too_far = 0;

            fp8q_dtype_finfo(targets[target], &info);
            options.granularity = granularity_of(FP8Q_GRANULARITY_ROW, 0, 0);
            options.compute_scale = 1;
            options.power_of_2 = power_of_2;
            options.saturate = 1;
            CHECK_OK(fp8q_quantize(&source, &destination, &scale, &options,
                                   &error),
                     &error);
            CHECK_OK(fp8q_dequantize(&destination, &scale,
                                     &options.granularity, &back, &error),
                     &error);
            /* |x - x'| <= half an FP8 ulp of x / s, times s (plus the
             * subnormal spacing near zero). */
            for (row = 0; row < ROWS; row++) {
                const double bound_floor =
                    (double)scales[row] * info.smallest_subnormal;
                for (col = 0; col < COLS; col++) {
                    const double x = values[row * COLS + col];
                    const double error_size =
                        fabs(x - (double)restored[row * COLS + col]);
                    if (error_size > fabs(x) * info.eps / 2.0 * 1.0001 +
                                         bound_floor) {
                        too_far++;
                    }
                }
                if (power_of_2) {
                    CHECK(is_power_of_two(scales[row]));
                }
            }
            CHECK_INT(too_far, 0);
        }
    }
}

void test_quantize_given_scales(void)
{
    const int64_t shape[2] = {4, 3};
    const int64_t scale_shape[2] = {4, 1};
    float values[12] = {1, 2, 3, -4, 5, 6, 7, 8, 9, 10, 11, -448};
    uint8_t codes[12];
    float scales[4] = {1.0f, 0.5f, 2.0f, 3.0f};
    fp8q_quantize_options options;
    fp8q_view source = make_view(values, FP8Q_FLOAT32, 2, shape, NULL);
    fp8q_view destination =
        make_view(codes, FP8Q_FLOAT8_E4M3FN, 2, shape, NULL);
    fp8q_view scale = make_view(scales, FP8Q_FLOAT32, 2, scale_shape, NULL);
    fp8q_error error;
    int64_t i;

    options.granularity = granularity_of(FP8Q_GRANULARITY_ROW, 0, 0);
    options.compute_scale = 0;
    options.power_of_2 = 0;
    options.saturate = 1;
    CHECK_OK(fp8q_quantize(&source, &destination, &scale, &options, &error),
             &error);
    for (i = 0; i < 12; i++) {
        CHECK_BITS(codes[i],
                   fp8q_encode_e4m3fn(values[i] / scales[i / 3], 1));
    }
    CHECK_DOUBLE(scales[1], 0.5); /* given scales are left alone */

    scales[2] = 0.0f;
    CHECK_ERROR(fp8q_quantize(&source, &destination, &scale, &options,
                              &error),
                &error, FP8Q_ERROR_VALUE, "element 2", "finite and > 0",
                NULL);
    scales[2] = -1.0f;
    CHECK_ERROR(fp8q_quantize(&source, &destination, &scale, &options,
                              &error),
                &error, FP8Q_ERROR_VALUE, "element 2", "-1", NULL);
    scales[2] = 2.0f;
    scales[3] = fp8q_bits_to_float(0x7F800000u);
    CHECK_ERROR(fp8q_quantize(&source, &destination, &scale, &options,
                              &error),
                &error, FP8Q_ERROR_VALUE, "element 3", "inf", NULL);
}

void test_quantize_empty_and_scalar(void)
{
    float values[4] = {-3.5f, 0, 0, 0};
    uint8_t codes[4] = {0xCD, 0xCD, 0xCD, 0xCD};
    float scales[4] = {-1.0f, -1.0f, -1.0f, -1.0f};
    const int64_t empty[2] = {0, 4};
    const int64_t empty_scale[2] = {0, 1};
    const int64_t empty_cols[2] = {3, 0};
    const int64_t col_scale[2] = {3, 1};
    fp8q_quantize_options options;
    fp8q_view source;
    fp8q_view destination;
    fp8q_view scale;
    fp8q_error error;

    options.compute_scale = 1;
    options.power_of_2 = 0;
    options.saturate = 1;

    /* 0-d, tensor granularity. */
    options.granularity = granularity_of(FP8Q_GRANULARITY_TENSOR, 0, 0);
    source = make_view(values, FP8Q_FLOAT32, 0, NULL, NULL);
    destination = make_view(codes, FP8Q_FLOAT8_E4M3FN, 0, NULL, NULL);
    scale = make_view(scales, FP8Q_FLOAT32, 0, NULL, NULL);
    CHECK_OK(fp8q_quantize(&source, &destination, &scale, &options, &error),
             &error);
    CHECK_DOUBLE(scales[0], 3.5f / 448.0f);
    CHECK_BITS(codes[0], 0xFE); /* -448 */

    /* Empty tensor: scale 1. */
    scales[0] = -1.0f;
    source = make_view(values, FP8Q_FLOAT32, 2, empty, NULL);
    destination = make_view(codes, FP8Q_FLOAT8_E4M3FN, 2, empty, NULL);
    CHECK_OK(fp8q_quantize(&source, &destination, &scale, &options, &error),
             &error);
    CHECK_DOUBLE(scales[0], 1.0);

    /* Empty rows: no scales; rows of nothing: scale 1 each. */
    options.granularity = granularity_of(FP8Q_GRANULARITY_ROW, 0, 0);
    scale = make_view(scales, FP8Q_FLOAT32, 2, empty_scale, NULL);
    CHECK_OK(fp8q_quantize(&source, &destination, &scale, &options, &error),
             &error);
    source = make_view(values, FP8Q_FLOAT32, 2, empty_cols, NULL);
    destination = make_view(codes, FP8Q_FLOAT8_E4M3FN, 2, empty_cols, NULL);
    scale = make_view(scales, FP8Q_FLOAT32, 2, col_scale, NULL);
    CHECK_OK(fp8q_quantize(&source, &destination, &scale, &options, &error),
             &error);
    CHECK(scales[0] == 1.0f && scales[1] == 1.0f && scales[2] == 1.0f);

    /* Block granularity on an empty matrix. */
    options.granularity = granularity_of(FP8Q_GRANULARITY_BLOCK, 2, 2);
    {
        const int64_t block_scale[2] = {2, 0};
        scale = make_view(scales, FP8Q_FLOAT32, 2, block_scale, NULL);
    }
    CHECK_OK(fp8q_quantize(&source, &destination, &scale, &options, &error),
             &error);
}

void test_quantize_errors(void)
{
    const int64_t shape[2] = {4, 3};
    const int64_t wrong_scale[2] = {1, 4};
    const int64_t other_shape[2] = {3, 4};
    const int64_t row_scale[2] = {4, 1};
    float values[12];
    uint16_t halves[12];
    float scales[12];
    uint8_t codes[12];
    fp8q_quantize_options options;
    fp8q_view source = make_view(values, FP8Q_FLOAT32, 2, shape, NULL);
    fp8q_view destination =
        make_view(codes, FP8Q_FLOAT8_E4M3FN, 2, shape, NULL);
    fp8q_view scale = make_view(scales, FP8Q_FLOAT32, 2, wrong_scale, NULL);
    fp8q_view wrong;
    fp8q_error error;
    int64_t i;

    for (i = 0; i < 12; i++) {
        values[i] = (float)i;
    }
    options.granularity = granularity_of(FP8Q_GRANULARITY_ROW, 0, 0);
    options.compute_scale = 1;
    options.power_of_2 = 0;
    options.saturate = 1;
    CHECK_ERROR(fp8q_quantize(&source, &destination, &scale, &options,
                              &error),
                &error, FP8Q_ERROR_VALUE, "scale: expected shape (4, 1)",
                "\"row\"", "got (1, 4)");
    scale = make_view(scales, FP8Q_FLOAT32, 2, row_scale, NULL);
    wrong = make_view(halves, FP8Q_FLOAT16, 2, shape, NULL);
    CHECK_ERROR(fp8q_quantize(&source, &wrong, &scale, &options, &error),
                &error, FP8Q_ERROR_TYPE, "FP8", "float16", NULL);
    wrong = make_view(codes, FP8Q_FLOAT8_E4M3FN, 2, other_shape, NULL);
    CHECK_ERROR(fp8q_quantize(&source, &wrong, &scale, &options, &error),
                &error, FP8Q_ERROR_VALUE, "(4, 3)", "(3, 4)", NULL);
    wrong = make_view(halves, FP8Q_FLOAT16, 2, row_scale, NULL);
    CHECK_ERROR(fp8q_quantize(&source, &destination, &wrong, &options,
                              &error),
                &error, FP8Q_ERROR_TYPE, "scale", "float32", NULL);
    values[7] = fp8q_bits_to_float(0x7FC00000u);
    CHECK_ERROR(fp8q_quantize(&source, &destination, &scale, &options,
                              &error),
                &error, FP8Q_ERROR_VALUE, "group 2", "NaN or infinity", NULL);
    options.granularity = granularity_of(FP8Q_GRANULARITY_BLOCK, 0, 2);
    CHECK_ERROR(fp8q_quantize(&source, &destination, &scale, &options,
                              &error),
                &error, FP8Q_ERROR_VALUE, "block", ">= 1", NULL);
    CHECK_ERROR(fp8q_dequantize(&destination, &scale, &options.granularity,
                                &source, &error),
                &error, FP8Q_ERROR_VALUE, "block", ">= 1", NULL);
}
