/*
 * test_cast.c - fp8q_cast and fp8q_block_cast against per-element reference
 * conversions on the scalar codec: every dtype pair on strided views, scales
 * (scalar, broadcast, per block), special layouts, parallel runs and errors.
 */
#include <stdlib.h>
#include <string.h>

#include "core/cast.h"
#include "core/convert.h"
#include "core/float_codec.h"
#include "harness.h"
#include "helpers.h"

/* Fills a source buffer: random bit patterns for the narrow types (every
 * code, NaNs included); for float32 random values plus NaN and infinities. */
static void fill_source(fp8q_dtype dtype, void *data, int64_t count)
{
    if (dtype == FP8Q_FLOAT32) {
        float *values = (float *)data;
        fill_random_floats(values, count, 500.0f);
        if (count > 3) {
            values[0] = fp8q_bits_to_float(0x7FC00000u);
            values[1] = fp8q_bits_to_float(0xFF800000u);
            values[2] = fp8q_bits_to_float(0x7F800000u);
        }
    }
    else {
        fill_random_bytes(data, count * (int64_t)fp8q_dtype_itemsize(dtype));
    }
}

/* Counts elements of `destination` that differ from the reference cast of
 * `source` (with an optional scale view broadcast to the same shape). */
static int64_t count_mismatches(const fp8q_view *source,
                                const fp8q_view *destination,
                                const fp8q_view *scale, fp8q_scale_op op,
                                int saturate)
{
    int64_t index[FP8Q_MAX_DIMS] = {0};
    int64_t mismatches = 0;
    uint8_t expected[4];

    if (fp8q_view_size(source) == 0) {
        return 0;
    }
    do {
        const char *in = element_at(source, index);
        if (scale == NULL && source->dtype == destination->dtype) {
            memcpy(expected, in, fp8q_dtype_itemsize(source->dtype));
        }
        else {
            float value = reference_load(source->dtype, in);
            if (scale != NULL) {
                float factor;
                memcpy(&factor, element_at(scale, index), sizeof factor);
                value = op == FP8Q_SCALE_DIVIDE ? value / factor
                                                : value * factor;
            }
            reference_store(destination->dtype, value, saturate, expected);
        }
        if (!same_element(destination->dtype, expected,
                          element_at(destination, index))) {
            mismatches++;
        }
    } while (next_index(source->ndim, source->shape, index));
    return mismatches;
}

void test_cast_all_dtype_pairs(void)
{
    enum { ROWS = 5, COLS = 300 };
    const int64_t shape[2] = {ROWS, COLS};
    const int64_t source_strides[2] = {-2 * COLS, 2};
    static uint8_t source_storage[ROWS * 2 * COLS * 4];
    static uint8_t destination_storage[ROWS * COLS * 4];
    int source_type;
    int destination_type;
    int saturate;

    for (source_type = 0; source_type < FP8Q_DTYPE_COUNT; source_type++) {
        for (destination_type = 0; destination_type < FP8Q_DTYPE_COUNT;
             destination_type++) {
            for (saturate = 0; saturate < 2; saturate++) {
                const fp8q_dtype from = (fp8q_dtype)source_type;
                const fp8q_dtype to = (fp8q_dtype)destination_type;
                const size_t from_size = fp8q_dtype_itemsize(from);
                fp8q_view source;
                fp8q_view destination;
                fp8q_view contiguous_source;
                fp8q_error error;

                fill_source(from, source_storage, ROWS * 2 * COLS);
                memset(destination_storage, 0xCD, sizeof destination_storage);
                /* Every other column, rows in reverse. */
                source = make_view(source_storage + (ROWS - 1) * 2 * COLS *
                                                        from_size,
                                   from, 2, shape, source_strides);
                destination =
                    make_view(destination_storage, to, 2, shape, NULL);
                CHECK_OK(fp8q_cast(&source, &destination, NULL,
                                   FP8Q_SCALE_DIVIDE, saturate, &error),
                         &error);
                CHECK_INT(count_mismatches(&source, &destination, NULL,
                                           FP8Q_SCALE_DIVIDE, saturate),
                          0);

                /* Contiguous (the vectorised loops), odd length. */
                {
                    const int64_t flat[1] = {ROWS * COLS - 3};
                    contiguous_source =
                        make_view(source_storage, from, 1, flat, NULL);
                    destination = make_view(destination_storage, to, 1, flat,
                                            NULL);
                    CHECK_OK(fp8q_cast(&contiguous_source, &destination, NULL,
                                       FP8Q_SCALE_DIVIDE, saturate, &error),
                             &error);
                    CHECK_INT(count_mismatches(&contiguous_source,
                                               &destination, NULL,
                                               FP8Q_SCALE_DIVIDE, saturate),
                              0);
                }
            }
        }
    }
}

void test_cast_scaled(void)
{
    enum { ROWS = 6, COLS = 517 };
    const int64_t shape[2] = {ROWS, COLS};
    const int64_t row_scale_shape[2] = {ROWS, 1};
    const int64_t col_scale_shape[1] = {COLS};
    const int64_t col_scale_strides[1] = {-2};
    static float source_values[ROWS * COLS];
    static uint8_t destination_storage[ROWS * COLS * 4];
    static float scales[2 * COLS];
    static const fp8q_dtype targets[] = {
        FP8Q_FLOAT8_E4M3FN, FP8Q_FLOAT8_E5M2, FP8Q_FLOAT8_E4M3FNUZ,
        FP8Q_FLOAT8_E5M2FNUZ, FP8Q_FLOAT16, FP8Q_BFLOAT16, FP8Q_FLOAT32};
    size_t target;
    int layout;
    int64_t i;

    fill_random_floats(source_values, ROWS * COLS, 3000.0f);
    for (i = 0; i < 2 * COLS; i++) {
        /* Scales that are not powers of two make division matter. */
        scales[i] = 0.01f + harness_random_float(1.0f) * harness_random_float(
                                                             9.0f);
        scales[i] = scales[i] < 0 ? -scales[i] + 0.003f : scales[i] + 0.003f;
    }
    for (target = 0; target < sizeof targets / sizeof targets[0]; target++) {
        for (layout = 0; layout < 3; layout++) {
            const fp8q_scale_op op =
                layout == 1 ? FP8Q_SCALE_MULTIPLY : FP8Q_SCALE_DIVIDE;
            fp8q_view source =
                make_view(source_values, FP8Q_FLOAT32, 2, shape, NULL);
            fp8q_view destination = make_view(destination_storage,
                                              targets[target], 2, shape, NULL);
            fp8q_view scale;
            fp8q_view broadcast;
            fp8q_error error;

            if (layout == 0) {
                scale = make_view(scales, FP8Q_FLOAT32, 0, NULL, NULL);
            }
            else if (layout == 1) {
                scale = make_view(scales, FP8Q_FLOAT32, 2, row_scale_shape,
                                  NULL);
            }
            else {
                scale = make_view(scales + 2 * COLS - 1, FP8Q_FLOAT32, 1,
                                  col_scale_shape, col_scale_strides);
            }
            memset(destination_storage, 0xCD, sizeof destination_storage);
            CHECK_OK(fp8q_cast(&source, &destination, &scale, op, 1, &error),
                     &error);
            CHECK_OK(fp8q_view_broadcast_to(&scale, 2, shape, &broadcast,
                                            "scale", &error),
                     &error);
            CHECK_INT(count_mismatches(&source, &destination, &broadcast, op,
                                       1),
                      0);
        }
    }
}

/* Cases of test_cast_computed_nan: value op scale, and the expected float32
 * bits and float8_e4m3fn code. */
#define NAN_CASES 7
static const struct {
    uint32_t value, scale;
    fp8q_scale_op op;
    uint32_t float32_bits;
    uint8_t e4m3fn_code;
} nan_cases[NAN_CASES] = {
    {0x00000000u, 0x00000000u, FP8Q_SCALE_DIVIDE, 0x7FC00000u, 0x7F},
    {0x7F800000u, 0x7F800000u, FP8Q_SCALE_DIVIDE, 0x7FC00000u, 0x7F},
    {0xFF800000u, 0x7F800000u, FP8Q_SCALE_DIVIDE, 0x7FC00000u, 0x7F},
    {0x7F800000u, 0x00000000u, FP8Q_SCALE_MULTIPLY, 0x7FC00000u, 0x7F},
    {0x80000000u, 0xFF800000u, FP8Q_SCALE_MULTIPLY, 0x7FC00000u, 0x7F},
    {0xFFA12345u, 0x3F800000u, FP8Q_SCALE_DIVIDE, 0xFFE12345u, 0xFF},
    {0x3F800000u, 0xFFA00001u, FP8Q_SCALE_MULTIPLY, 0xFFE00001u, 0xFF},
};

/* Casts `source` (nan_cases repeated) with `scale` and `op` to float32 and
 * to float8_e4m3fn; checks the elements of case `only` (-1: of every case
 * of `op`). */
static void check_nan_casts(const fp8q_view *source, const fp8q_view *scale,
                            fp8q_scale_op op, int only)
{
    enum { MAX_COUNT = 64 };
    float results[MAX_COUNT];
    uint8_t codes[MAX_COUNT];
    const int64_t count = source->shape[0];
    fp8q_view destination;
    fp8q_error error;
    int64_t i;

    destination = make_view(results, FP8Q_FLOAT32, 1, source->shape, NULL);
    memset(results, 0xCD, sizeof results);
    CHECK_OK(fp8q_cast(source, &destination, scale, op, 1, &error), &error);
    destination = make_view(codes, FP8Q_FLOAT8_E4M3FN, 1, source->shape,
                            NULL);
    memset(codes, 0xCD, sizeof codes);
    CHECK_OK(fp8q_cast(source, &destination, scale, op, 1, &error), &error);
    for (i = 0; i < count; i++) {
        const int index = (int)(i % NAN_CASES);
        if (nan_cases[index].op == op && (only < 0 || index == only)) {
            CHECK_BITS(fp8q_float_to_bits(results[i]),
                       nan_cases[index].float32_bits);
            CHECK_INT(codes[i], nan_cases[index].e4m3fn_code);
        }
    }
}

/* A scaling whose result is NaN gives the same bits on every machine (and
 * on the GPU, tests/test_cuda_ops.py): a NaN computed from numbers (0/0,
 * inf/inf, inf*0) is the positive quiet NaN 0x7FC00000, not x86's
 * 0xFFC00000; a NaN operand comes out quieted, sign and payload kept. The
 * cases repeat past the first block of the vector loops (FP8Q_CONVERT_BLOCK,
 * 32 elements) into the scalar tail, with a scale per element and with one
 * scale. */
void test_cast_computed_nan(void)
{
    enum { COUNT = NAN_CASES * 5 };
    const int64_t shape[1] = {COUNT};
    float values[COUNT], scales[COUNT];
    fp8q_view source, scale;
    int index;
    int64_t i;

    for (i = 0; i < COUNT; i++) {
        values[i] = fp8q_bits_to_float(nan_cases[i % NAN_CASES].value);
        scales[i] = fp8q_bits_to_float(nan_cases[i % NAN_CASES].scale);
    }
    source = make_view(values, FP8Q_FLOAT32, 1, shape, NULL);
    scale = make_view(scales, FP8Q_FLOAT32, 1, shape, NULL);
    check_nan_casts(&source, &scale, FP8Q_SCALE_DIVIDE, -1);
    check_nan_casts(&source, &scale, FP8Q_SCALE_MULTIPLY, -1);
    for (index = 0; index < NAN_CASES; index++) {
        scale = make_view(&scales[index], FP8Q_FLOAT32, 0, NULL, NULL);
        check_nan_casts(&source, &scale, nan_cases[index].op, index);
    }
}

void test_cast_special_layouts(void)
{
    uint8_t codes[4] = {0x7D, 0xFF, 0x01, 0x7E};
    uint8_t copies[4];
    uint16_t halves[2] = {0x7C01, 0xFE01};
    uint16_t half_copies[2];
    char unaligned_storage[4 * 300 + 1];
    uint8_t bytes[300];
    float values[300];
    const int64_t four[1] = {4};
    const int64_t two[1] = {2};
    const int64_t n300[1] = {300};
    const int64_t reversed[1] = {-1};
    const int64_t broadcast_shape[2] = {3, 300};
    const int64_t broadcast_strides[2] = {0, 1};
    static uint8_t broadcast_out[3 * 300];
    fp8q_view source;
    fp8q_view destination;
    fp8q_error error;
    float scalar = 3.0f;
    float scale_value = 0.5f;
    uint8_t scalar_code = 0;
    fp8q_view scale;
    int64_t i;

    /* Same dtype: the bits are copied, NaN payloads included. */
    source = make_view(codes, FP8Q_FLOAT8_E5M2, 1, four, NULL);
    destination = make_view(copies, FP8Q_FLOAT8_E5M2, 1, four, NULL);
    CHECK_OK(fp8q_cast(&source, &destination, NULL, FP8Q_SCALE_DIVIDE, 1,
                       &error),
             &error);
    CHECK(memcmp(codes, copies, 4) == 0);
    source = make_view(halves, FP8Q_FLOAT16, 1, two, NULL);
    destination = make_view(half_copies, FP8Q_FLOAT16, 1, two, NULL);
    CHECK_OK(fp8q_cast(&source, &destination, NULL, FP8Q_SCALE_DIVIDE, 1,
                       &error),
             &error);
    CHECK(memcmp(halves, half_copies, sizeof halves) == 0);

    /* In place (source and destination the same view), scaled. */
    scale = make_view(&scale_value, FP8Q_FLOAT32, 0, NULL, NULL);
    for (i = 0; i < 300; i++) {
        values[i] = (float)i + 0.25f;
    }
    source = make_view(values, FP8Q_FLOAT32, 1, n300, NULL);
    CHECK_OK(fp8q_cast(&source, &source, &scale, FP8Q_SCALE_DIVIDE, 1,
                       &error),
             &error);
    for (i = 0; i < 300; i++) {
        CHECK_DOUBLE(values[i], 2.0 * (double)i + 0.5);
    }

    /* 0-d, with a 0-d scale. */
    source = make_view(&scalar, FP8Q_FLOAT32, 0, NULL, NULL);
    destination = make_view(&scalar_code, FP8Q_FLOAT8_E4M3FN, 0, NULL, NULL);
    CHECK_OK(fp8q_cast(&source, &destination, &scale, FP8Q_SCALE_DIVIDE, 1,
                       &error),
             &error);
    CHECK_BITS(scalar_code, fp8q_encode_e4m3fn(6.0f, 1));

    /* Empty. */
    {
        const int64_t empty[2] = {0, 3};
        source = make_view(values, FP8Q_FLOAT32, 2, empty, NULL);
        destination = make_view(bytes, FP8Q_FLOAT8_E4M3FN, 2, empty, NULL);
        CHECK_OK(fp8q_cast(&source, &destination, &scale, FP8Q_SCALE_DIVIDE,
                           1, &error),
                 &error);
    }

    /* A float32 source that is not 4-byte aligned, into a reversed output. */
    fill_random_floats(values, 300, 400.0f);
    memcpy(unaligned_storage + 1, values, sizeof values);
    source = make_view(unaligned_storage + 1, FP8Q_FLOAT32, 1, n300, NULL);
    destination = make_view(bytes + 299, FP8Q_FLOAT8_E4M3FN, 1, n300,
                            reversed);
    CHECK_OK(fp8q_cast(&source, &destination, NULL, FP8Q_SCALE_DIVIDE, 1,
                       &error),
             &error);
    for (i = 0; i < 300; i++) {
        CHECK_BITS(bytes[299 - i], fp8q_encode_e4m3fn(values[i], 1));
    }

    /* A broadcast (stride-0) source. */
    source = make_view(values, FP8Q_FLOAT32, 2, broadcast_shape,
                       broadcast_strides);
    destination = make_view(broadcast_out, FP8Q_FLOAT8_E5M2, 2,
                            broadcast_shape, NULL);
    CHECK_OK(fp8q_cast(&source, &destination, NULL, FP8Q_SCALE_DIVIDE, 0,
                       &error),
             &error);
    CHECK_INT(count_mismatches(&source, &destination, NULL, FP8Q_SCALE_DIVIDE,
                               0),
              0);
    CHECK(memcmp(broadcast_out, broadcast_out + 600, 300) == 0);
}

void test_cast_parallel_equals_serial(void)
{
    enum { ROWS = 2048, COLS = 1031 };
    const int64_t shape[2] = {ROWS, COLS};
    const int64_t scale_shape[2] = {ROWS, 1};
    float *values = (float *)malloc(sizeof(float) * ROWS * COLS);
    uint8_t *serial = (uint8_t *)malloc(ROWS * COLS);
    uint8_t *parallel = (uint8_t *)malloc(ROWS * COLS);
    float scales[ROWS];
    int with_scale;
    int64_t i;

    fill_random_floats(values, (int64_t)ROWS * COLS, 900.0f);
    for (i = 0; i < ROWS; i++) {
        scales[i] = 0.25f + (float)i / 7.0f;
    }
    for (with_scale = 0; with_scale < 2; with_scale++) {
        fp8q_view source = make_view(values, FP8Q_FLOAT32, 2, shape, NULL);
        fp8q_view scale =
            make_view(scales, FP8Q_FLOAT32, 2, scale_shape, NULL);
        fp8q_view destination;
        fp8q_error error;

        memset(serial, 0xCD, ROWS * COLS);
        memset(parallel, 0x5A, ROWS * COLS);
        fp8q_set_num_threads(1);
        destination =
            make_view(serial, FP8Q_FLOAT8_E4M3FN, 2, shape, NULL);
        CHECK_OK(fp8q_cast(&source, &destination, with_scale ? &scale : NULL,
                           FP8Q_SCALE_DIVIDE, 1, &error),
                 &error);
        fp8q_set_num_threads(4);
        destination =
            make_view(parallel, FP8Q_FLOAT8_E4M3FN, 2, shape, NULL);
        CHECK_OK(fp8q_cast(&source, &destination, with_scale ? &scale : NULL,
                           FP8Q_SCALE_DIVIDE, 1, &error),
                 &error);
        CHECK(memcmp(serial, parallel, ROWS * COLS) == 0);
        if (with_scale) {
            fp8q_view broadcast;
            CHECK_OK(fp8q_view_broadcast_to(&scale, 2, shape, &broadcast,
                                            "scale", &error),
                     &error);
            CHECK_INT(count_mismatches(&source, &destination, &broadcast,
                                       FP8Q_SCALE_DIVIDE, 1),
                      0);
        }
        else {
            CHECK_INT(count_mismatches(&source, &destination, NULL,
                                       FP8Q_SCALE_DIVIDE, 1),
                      0);
        }
    }
    fp8q_set_num_threads(0);
    free(values);
    free(serial);
    free(parallel);
}

void test_cast_errors(void)
{
    float values[65];
    uint8_t codes[65];
    uint16_t halves[13];
    const int64_t shape[2] = {5, 13};
    const int64_t wrong_shape[2] = {5, 12};
    const int64_t three[1] = {3};
    const int64_t thirteen[1] = {13};
    const int64_t zero_strides[2] = {0, 1};
    fp8q_view source = make_view(values, FP8Q_FLOAT32, 2, shape, NULL);
    fp8q_view destination =
        make_view(codes, FP8Q_FLOAT8_E4M3FN, 2, shape, NULL);
    fp8q_view scale = make_view(halves, FP8Q_FLOAT16, 1, thirteen, NULL);
    fp8q_view other;
    fp8q_error error;

    memset(values, 0, sizeof values);
    CHECK_ERROR(fp8q_cast(&source, &destination, &scale, FP8Q_SCALE_DIVIDE,
                          1, &error),
                &error, FP8Q_ERROR_TYPE, "scale", "float32", "float16");
    scale = make_view(values, FP8Q_FLOAT32, 1, three, NULL);
    CHECK_ERROR(fp8q_cast(&source, &destination, &scale, FP8Q_SCALE_DIVIDE,
                          1, &error),
                &error, FP8Q_ERROR_VALUE, "scale: shape (3,)", "(5, 13)",
                "axis 1");
    other = make_view(codes, FP8Q_FLOAT8_E4M3FN, 2, wrong_shape, NULL);
    CHECK_ERROR(fp8q_cast(&source, &other, NULL, FP8Q_SCALE_DIVIDE, 1,
                          &error),
                &error, FP8Q_ERROR_VALUE, "out", "(5, 13)", "(5, 12)");
    other = make_view(codes, FP8Q_FLOAT8_E4M3FN, 2, shape, zero_strides);
    CHECK_ERROR(fp8q_cast(&source, &other, NULL, FP8Q_SCALE_DIVIDE, 1,
                          &error),
                &error, FP8Q_ERROR_VALUE, "out", "stride 0", NULL);
    /* A NULL error pointer is allowed. */
    CHECK_INT(fp8q_cast(&source, &other, NULL, FP8Q_SCALE_DIVIDE, 1, NULL),
              FP8Q_ERROR_VALUE);
}

/* ------------------------------------------------------------------------- */
/* Block scales                                                              */

static int64_t count_block_mismatches(const fp8q_view *source,
                                      const fp8q_view *destination,
                                      const float *scales, int64_t n_cols,
                                      int64_t block_rows, int64_t block_cols,
                                      fp8q_scale_op op)
{
    int64_t index[2] = {0, 0};
    int64_t mismatches = 0;
    uint8_t expected[4];
    do {
        const float factor = scales[(index[0] / block_rows) * n_cols +
                                    index[1] / block_cols];
        float value = reference_load(source->dtype, element_at(source, index));
        value = op == FP8Q_SCALE_DIVIDE ? value / factor : value * factor;
        reference_store(destination->dtype, value, 1, expected);
        if (!same_element(destination->dtype, expected,
                          element_at(destination, index))) {
            mismatches++;
        }
    } while (next_index(2, source->shape, index));
    return mismatches;
}

void test_block_cast(void)
{
    static const int64_t cases[][4] = {
        /* rows, cols, block rows, block cols */
        {5, 7, 2, 3},     {4, 6, 2, 3},   {1, 300, 1, 128}, {7, 5, 100, 100},
        {300, 260, 128, 128}, {2048, 700, 1, 128},
    };
    size_t index;

    for (index = 0; index < sizeof cases / sizeof cases[0]; index++) {
        const int64_t rows = cases[index][0];
        const int64_t cols = cases[index][1];
        const int64_t block_rows = cases[index][2];
        const int64_t block_cols = cases[index][3];
        const int64_t shape[2] = {rows, cols};
        const int64_t transposed_strides[2] = {1, rows};
        const int64_t scale_shape[2] = {(rows + block_rows - 1) / block_rows,
                                        (cols + block_cols - 1) / block_cols};
        const int64_t n_scales = scale_shape[0] * scale_shape[1];
        float *values = (float *)malloc((size_t)(rows * cols) * sizeof(float));
        float *restored =
            (float *)malloc((size_t)(rows * cols) * sizeof(float));
        uint8_t *codes = (uint8_t *)malloc((size_t)(rows * cols));
        float *scales = (float *)malloc((size_t)n_scales * sizeof(float));
        fp8q_view source;
        fp8q_view destination;
        fp8q_view scale;
        fp8q_view back;
        fp8q_error error;
        int64_t i;
        int threads;

        fill_random_floats(values, rows * cols, 1000.0f);
        for (i = 0; i < n_scales; i++) {
            scales[i] = 0.1f + (float)(i % 13) * 0.37f;
        }
        scale = make_view(scales, FP8Q_FLOAT32, 2, scale_shape, NULL);
        for (threads = 1; threads <= 4; threads += 3) {
            fp8q_set_num_threads(threads);
            /* The source read transposed: element (i, j) at j * rows + i. */
            source = make_view(values, FP8Q_FLOAT32, 2, shape,
                               transposed_strides);
            destination =
                make_view(codes, FP8Q_FLOAT8_E4M3FN, 2, shape, NULL);
            memset(codes, 0xCD, (size_t)(rows * cols));
            CHECK_OK(fp8q_block_cast(&source, &destination, &scale,
                                     block_rows, block_cols,
                                     FP8Q_SCALE_DIVIDE, 1, &error),
                     &error);
            CHECK_INT(count_block_mismatches(&source, &destination, scales,
                                             scale_shape[1], block_rows,
                                             block_cols, FP8Q_SCALE_DIVIDE),
                      0);
            back = make_view(restored, FP8Q_FLOAT32, 2, shape, NULL);
            CHECK_OK(fp8q_block_cast(&destination, &back, &scale, block_rows,
                                     block_cols, FP8Q_SCALE_MULTIPLY, 1,
                                     &error),
                     &error);
            CHECK_INT(count_block_mismatches(&destination, &back, scales,
                                             scale_shape[1], block_rows,
                                             block_cols,
                                             FP8Q_SCALE_MULTIPLY),
                      0);
        }
        fp8q_set_num_threads(0);
        free(values);
        free(restored);
        free(codes);
        free(scales);
    }

    {   /* Errors. */
        float values[35];
        uint8_t codes[35];
        float scales[9];
        const int64_t shape[2] = {5, 7};
        const int64_t wrong[2] = {3, 2};
        const int64_t flat[1] = {35};
        fp8q_view source = make_view(values, FP8Q_FLOAT32, 2, shape, NULL);
        fp8q_view destination =
            make_view(codes, FP8Q_FLOAT8_E4M3FN, 2, shape, NULL);
        fp8q_view scale = make_view(scales, FP8Q_FLOAT32, 2, wrong, NULL);
        fp8q_view line = make_view(values, FP8Q_FLOAT32, 1, flat, NULL);
        fp8q_error error;

        CHECK_ERROR(fp8q_block_cast(&source, &destination, &scale, 2, 3,
                                    FP8Q_SCALE_DIVIDE, 1, &error),
                    &error, FP8Q_ERROR_VALUE, "expected shape (3, 3)",
                    "got (3, 2)", "(5, 7)");
        CHECK_ERROR(fp8q_block_cast(&source, &destination, &scale, 0, 3,
                                    FP8Q_SCALE_DIVIDE, 1, &error),
                    &error, FP8Q_ERROR_VALUE, ">= 1", NULL, NULL);
        CHECK_ERROR(fp8q_block_cast(&line, &destination, &scale, 2, 3,
                                    FP8Q_SCALE_DIVIDE, 1, &error),
                    &error, FP8Q_ERROR_VALUE, "2-D", NULL, NULL);
    }
}

/* The same checks on the baseline store loops, where the AVX2 ones are the
 * default (otherwise this repeats them on the same loops). */
/* Every code of every FP8 format through fp8q_load_float32, at every
 * alignment and run length up to 256 + 7 (so vector bodies and scalar tails
 * both run), bit for bit against the codec (NaNs included). */
void test_fp8_decode_all_codes(void)
{
    static const fp8q_dtype formats[4] = {
        FP8Q_FLOAT8_E4M3FN, FP8Q_FLOAT8_E5M2, FP8Q_FLOAT8_E4M3FNUZ,
        FP8Q_FLOAT8_E5M2FNUZ};
    uint8_t codes[256 + 16];
    float values[256 + 16];
    int format;
    int offset;

    for (format = 0; format < 4; format++) {
        for (offset = 0; offset < 8; offset++) {
            const int64_t count = 256 + offset;
            int64_t mismatches = 0;
            int64_t i;
            for (i = 0; i < count; i++) {
                codes[offset + i] = (uint8_t)(i * 167 + offset);
            }
            fp8q_load_float32(formats[format], (const char *)codes + offset,
                              1, values, count);
            for (i = 0; i < count; i++) {
                uint8_t element = codes[offset + i];
                float expected = reference_load(formats[format], &element);
                mismatches += fp8q_float_to_bits(values[i]) !=
                              fp8q_float_to_bits(expected);
            }
            CHECK_INT(mismatches, 0);
        }
    }
}

void test_cast_baseline_loops(void)
{
    fp8q_convert_allow_avx2(0);
    CHECK(!fp8q_convert_uses_avx2());
    test_cast_all_dtype_pairs();
    test_cast_scaled();
    test_cast_computed_nan();
    test_block_cast();
    test_fp8_decode_all_codes();
    fp8q_convert_allow_avx2(1);
}
