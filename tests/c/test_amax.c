/*
 * test_amax.c - fp8q_amax over every combination of axes, NaN and infinity
 * propagation, all source dtypes on strided views, empty and 0-d inputs,
 * parallel against serial, block amax with partial edge blocks, and errors.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/amax.h"
#include "core/float_codec.h"
#include "harness.h"
#include "helpers.h"
#include "platform.h"

/* Reference: max |x| per group (NaN wins), written to a contiguous array of
 * the destination shape. */
static void reference_amax(const fp8q_view *source, int64_t reduced_mask,
                           float *result, int64_t n_results)
{
    int64_t index[FP8Q_MAX_DIMS] = {0};
    int64_t i;

    for (i = 0; i < n_results; i++) {
        result[i] = 0.0f;
    }
    if (fp8q_view_size(source) == 0) {
        return;
    }
    do {
        const float value =
            (float)fabs((double)reference_load(source->dtype,
                                               element_at(source, index)));
        int64_t position = 0;
        int axis;
        for (axis = 0; axis < source->ndim; axis++) {
            const int reduced = (int)((reduced_mask >> axis) & 1);
            position = position * (reduced ? 1 : source->shape[axis]) +
                       (reduced ? 0 : index[axis]);
        }
        if (value != value || result[position] != result[position]) {
            result[position] = fp8q_bits_to_float(0x7FC00000u);
        }
        else if (value > result[position]) {
            result[position] = value;
        }
    } while (next_index(source->ndim, source->shape, index));
}

/* Runs fp8q_amax into a contiguous keepdims destination (poisoned first)
 * and counts results that differ from the reference (NaN matches NaN). */
static int64_t amax_mismatches(const fp8q_view *source, int64_t reduced_mask,
                               float *out)
{
    int64_t shape[FP8Q_MAX_DIMS];
    int64_t n_results = 1;
    int64_t mismatches = 0;
    float *expected;
    fp8q_view destination;
    fp8q_error error;
    int axis;
    int64_t i;

    for (axis = 0; axis < source->ndim; axis++) {
        shape[axis] = (reduced_mask >> axis) & 1 ? 1 : source->shape[axis];
        n_results *= shape[axis];
    }
    expected = (float *)malloc((size_t)(n_results + 1) * sizeof(float));
    for (i = 0; i < n_results; i++) {
        out[i] = -12345.0f;
    }
    destination = make_view(out, FP8Q_FLOAT32, source->ndim, shape, NULL);
    CHECK_OK(fp8q_amax(source, &destination, &error), &error);
    reference_amax(source, reduced_mask, expected, n_results);
    for (i = 0; i < n_results; i++) {
        const int both_nan = out[i] != out[i] && expected[i] != expected[i];
        if (!both_nan && fp8q_float_to_bits(out[i]) !=
                             fp8q_float_to_bits(expected[i])) {
            mismatches++;
        }
    }
    free(expected);
    return mismatches;
}

void test_amax_axes(void)
{
    static float values[3 * 4 * 5];
    static float out[3 * 4 * 5];
    const int64_t shape[3] = {3, 4, 5};
    fp8q_view source = make_view(values, FP8Q_FLOAT32, 3, shape, NULL);
    int64_t mask;

    fill_random_floats(values, 60, 100.0f);
    for (mask = 0; mask < 8; mask++) {
        CHECK_INT(amax_mismatches(&source, mask, out), 0);
    }
    /* A hand-checked case: |-7| wins. */
    {
        float row[4] = {1.0f, -7.0f, 6.5f, -0.0f};
        const int64_t four[1] = {4};
        float result = -1.0f;
        const int64_t one[1] = {1};
        fp8q_view line = make_view(row, FP8Q_FLOAT32, 1, four, NULL);
        fp8q_view destination =
            make_view(&result, FP8Q_FLOAT32, 1, one, NULL);
        fp8q_error error;
        CHECK_OK(fp8q_amax(&line, &destination, &error), &error);
        CHECK_DOUBLE(result, 7.0);
    }
}

void test_amax_nan_and_inf(void)
{
    float values[24];
    float out[24];
    const int64_t shape[2] = {4, 6};
    fp8q_view source = make_view(values, FP8Q_FLOAT32, 2, shape, NULL);
    int64_t i;

    for (i = 0; i < 24; i++) {
        values[i] = (float)(i % 7) - 3.0f;
    }
    values[1 * 6 + 2] = fp8q_bits_to_float(0xFFC00001u); /* -NaN, payload */
    values[3 * 6 + 0] = fp8q_bits_to_float(0xFF800000u); /* -inf */
    CHECK_INT(amax_mismatches(&source, 2, out), 0);
    CHECK(out[1] != out[1]);
    CHECK_DOUBLE(out[3], HUGE_VAL);
    CHECK_DOUBLE(out[0], 3.0);
    CHECK_INT(amax_mismatches(&source, 1, out), 0);
    CHECK(out[2] != out[2]);
    CHECK_DOUBLE(out[0], HUGE_VAL);
    CHECK_INT(amax_mismatches(&source, 3, out), 0);
    CHECK(out[0] != out[0]);
}

void test_amax_dtypes_and_strides(void)
{
    enum { ROWS = 5, COLS = 600 };
    static uint8_t storage[ROWS * 2 * COLS * 4];
    static float out[ROWS * COLS];
    static float strided_out[2 * COLS];
    const int64_t shape[2] = {ROWS, COLS};
    const int64_t strides[2] = {-2 * COLS, 2};
    int type;

    for (type = 0; type < FP8Q_DTYPE_COUNT; type++) {
        const fp8q_dtype dtype = (fp8q_dtype)type;
        const size_t itemsize = fp8q_dtype_itemsize(dtype);
        fp8q_view source = make_view(storage + (ROWS - 1) * 2 * COLS *
                                                   itemsize,
                                     dtype, 2, shape, strides);
        int64_t mask;

        if (dtype == FP8Q_FLOAT32) {
            fill_random_floats((float *)storage, ROWS * 2 * COLS, 10.0f);
        }
        else {
            fill_random_bytes(storage, ROWS * 2 * COLS * (int64_t)itemsize);
        }
        for (mask = 0; mask < 4; mask++) {
            CHECK_INT(amax_mismatches(&source, mask, out), 0);
        }

        /* A strided destination: reduce axis 0 into every other float. */
        {
            const int64_t out_shape[2] = {1, COLS};
            const int64_t out_strides[2] = {0, -2};
            fp8q_view destination =
                make_view(strided_out + 2 * COLS - 2, FP8Q_FLOAT32, 2,
                          out_shape, out_strides);
            fp8q_error error;
            int64_t i;
            int64_t mismatches = 0;
            CHECK_OK(fp8q_amax(&source, &destination, &error), &error);
            amax_mismatches(&source, 1, out);
            for (i = 0; i < COLS; i++) {
                const float got = strided_out[2 * COLS - 2 - 2 * i];
                if (fp8q_float_to_bits(got) != fp8q_float_to_bits(out[i])) {
                    mismatches++;
                }
            }
            CHECK_INT(mismatches, 0);
        }
    }
}

void test_amax_empty_and_scalar(void)
{
    float values[8] = {-3.0f, 1, 2, 3, 4, 5, 6, 7};
    float out[8];
    const int64_t empty_rows[2] = {0, 5};
    const int64_t empty_cols[2] = {5, 0};
    fp8q_view source;
    fp8q_view destination;
    fp8q_error error;
    float result = -1.0f;
    int64_t i;

    source = make_view(values, FP8Q_FLOAT32, 2, empty_rows, NULL);
    CHECK_INT(amax_mismatches(&source, 1, out), 0);
    for (i = 0; i < 5; i++) {
        CHECK_DOUBLE(out[i], 0.0);
    }
    CHECK_INT(amax_mismatches(&source, 3, out), 0);
    CHECK_DOUBLE(out[0], 0.0);
    CHECK_INT(amax_mismatches(&source, 2, out), 0); /* (0, 1): nothing */
    source = make_view(values, FP8Q_FLOAT32, 2, empty_cols, NULL);
    CHECK_INT(amax_mismatches(&source, 2, out), 0);
    for (i = 0; i < 5; i++) {
        CHECK_DOUBLE(out[i], 0.0);
    }

    source = make_view(values, FP8Q_FLOAT32, 0, NULL, NULL);
    destination = make_view(&result, FP8Q_FLOAT32, 0, NULL, NULL);
    CHECK_OK(fp8q_amax(&source, &destination, &error), &error);
    CHECK_DOUBLE(result, 3.0);
}

void test_amax_parallel_equals_serial(void)
{
    static const int64_t cases[][4] = {
        /* ndim, shape..., reduced-axes mask in the last slot */
        {2, 1024, 1024, 1}, {2, 1024, 1024, 2}, {2, 1024, 1024, 3},
        {2, 4, 300000, 2},  {2, 2, 600000, 2},  {2, 600000, 2, 1},
        {2, 3, 400000, 1},
    };
    const int64_t n_max = 1200000;
    float *values = (float *)malloc((size_t)n_max * sizeof(float));
    float *serial = (float *)malloc((size_t)n_max * sizeof(float));
    float *parallel = (float *)malloc((size_t)n_max * sizeof(float));
    size_t index;

    fill_random_floats(values, n_max, 1000.0f);
    values[777777] = fp8q_bits_to_float(0x7FC00000u);
    for (index = 0; index < sizeof cases / sizeof cases[0]; index++) {
        const int64_t shape[2] = {cases[index][1], cases[index][2]};
        const int64_t mask = cases[index][3];
        fp8q_view source = make_view(values, FP8Q_FLOAT32, 2, shape, NULL);
        const int64_t n_results = (mask & 1 ? 1 : shape[0]) *
                                  (mask & 2 ? 1 : shape[1]);
        fp8q_set_num_threads(1);
        CHECK_INT(amax_mismatches(&source, mask, serial), 0);
        fp8q_set_num_threads(4);
        CHECK_INT(amax_mismatches(&source, mask, parallel), 0);
        CHECK(memcmp(serial, parallel, (size_t)n_results * sizeof(float)) ==
              0);
    }
    {   /* 3-D, reducing the outer and inner axes. */
        const int64_t shape[3] = {64, 64, 128};
        fp8q_view source = make_view(values, FP8Q_FLOAT32, 3, shape, NULL);
        fp8q_set_num_threads(1);
        CHECK_INT(amax_mismatches(&source, 5, serial), 0);
        fp8q_set_num_threads(4);
        CHECK_INT(amax_mismatches(&source, 5, parallel), 0);
        CHECK(memcmp(serial, parallel, 64 * sizeof(float)) == 0);
    }
    fp8q_set_num_threads(0);
    free(values);
    free(serial);
    free(parallel);
}

void test_block_amax(void)
{
    static const int64_t cases[][4] = {
        {5, 7, 2, 3},     {4, 6, 2, 3},       {1, 300, 1, 128},
        {7, 5, 100, 100}, {300, 260, 128, 128}, {2048, 700, 1, 128},
    };
    size_t index;

    for (index = 0; index < sizeof cases / sizeof cases[0]; index++) {
        const int64_t rows = cases[index][0];
        const int64_t cols = cases[index][1];
        const int64_t block_rows = cases[index][2];
        const int64_t block_cols = cases[index][3];
        const int64_t shape[2] = {rows, cols};
        const int64_t out_shape[2] = {(rows + block_rows - 1) / block_rows,
                                      (cols + block_cols - 1) / block_cols};
        const int64_t n_out = out_shape[0] * out_shape[1];
        uint16_t *values =
            (uint16_t *)malloc((size_t)(rows * cols) * sizeof(uint16_t));
        float *out = (float *)malloc((size_t)n_out * sizeof(float));
        float *expected = (float *)malloc((size_t)n_out * sizeof(float));
        fp8q_view source;
        fp8q_view destination;
        fp8q_error error;
        int64_t position[2] = {0, 0};
        int64_t i;
        int threads;

        /* bfloat16 data, NaN-free except one planted NaN. */
        for (i = 0; i < rows * cols; i++) {
            values[i] = fp8q_encode_bfloat16(harness_random_float(50.0f));
        }
        values[(rows * cols) / 2] = 0x7FC0;
        source = make_view(values, FP8Q_BFLOAT16, 2, shape, NULL);
        for (i = 0; i < n_out; i++) {
            expected[i] = 0.0f;
        }
        do {
            const int64_t block = (position[0] / block_rows) * out_shape[1] +
                                  position[1] / block_cols;
            const float value = (float)fabs((double)reference_load(
                FP8Q_BFLOAT16, element_at(&source, position)));
            if (value != value || expected[block] != expected[block]) {
                expected[block] = fp8q_bits_to_float(0x7FC00000u);
            }
            else if (value > expected[block]) {
                expected[block] = value;
            }
        } while (next_index(2, shape, position));

        for (threads = 1; threads <= 4; threads += 3) {
            int64_t mismatches = 0;
            fp8q_set_num_threads(threads);
            for (i = 0; i < n_out; i++) {
                out[i] = -1.0f;
            }
            destination = make_view(out, FP8Q_FLOAT32, 2, out_shape, NULL);
            CHECK_OK(fp8q_block_amax(&source, block_rows, block_cols,
                                     &destination, &error),
                     &error);
            for (i = 0; i < n_out; i++) {
                const int both_nan =
                    out[i] != out[i] && expected[i] != expected[i];
                if (!both_nan && out[i] != expected[i]) {
                    mismatches++;
                }
            }
            CHECK_INT(mismatches, 0);
        }
        fp8q_set_num_threads(0);
        free(values);
        free(out);
        free(expected);
    }
}

void test_amax_errors(void)
{
    float values[12];
    float out[12];
    uint16_t halves[12];
    const int64_t shape[2] = {3, 4};
    const int64_t wrong[2] = {3, 2};
    const int64_t flat[1] = {4};
    const int64_t zero_strides[2] = {0, 1};
    const int64_t keep_rows[2] = {3, 1};
    fp8q_view source = make_view(values, FP8Q_FLOAT32, 2, shape, NULL);
    fp8q_view destination;
    fp8q_error error;

    memset(values, 0, sizeof values);
    destination = make_view(halves, FP8Q_FLOAT16, 2, keep_rows, NULL);
    CHECK_ERROR(fp8q_amax(&source, &destination, &error), &error,
                FP8Q_ERROR_TYPE, "out", "float32", "float16");
    destination = make_view(out, FP8Q_FLOAT32, 1, flat, NULL);
    CHECK_ERROR(fp8q_amax(&source, &destination, &error), &error,
                FP8Q_ERROR_VALUE, "out", "2 dimensions", "got 1");
    destination = make_view(out, FP8Q_FLOAT32, 2, wrong, NULL);
    CHECK_ERROR(fp8q_amax(&source, &destination, &error), &error,
                FP8Q_ERROR_VALUE, "(3, 2)", "(3, 4)",
                "axis 1 has extent 2, expected 4 or 1");
    destination = make_view(out, FP8Q_FLOAT32, 2, shape, zero_strides);
    CHECK_ERROR(fp8q_amax(&source, &destination, &error), &error,
                FP8Q_ERROR_VALUE, "stride 0", NULL, NULL);
    destination = make_view(out, FP8Q_FLOAT32, 2, shape, NULL);
    CHECK_ERROR(fp8q_block_amax(&source, 2, 3, &destination, &error), &error,
                FP8Q_ERROR_VALUE, "expected shape (2, 2)", "got (3, 4)",
                NULL);
    CHECK_ERROR(fp8q_block_amax(&source, 2, 0, &destination, &error), &error,
                FP8Q_ERROR_VALUE, ">= 1", NULL, NULL);
}

/* ------------------------------------------------------------------------- */
/* Interrupts (platform.h) and repeated elements                            */

/* A check that stops the loops at its first call, counting its calls. */
static int stop_at_once(void *context)
{
    (*(int *)context)++;
    return 1;
}

static int never_stop(void *context)
{
    (*(int *)context)++;
    return 0;
}

/* 2**40 elements of an overlapping view (row i = memory[i .. i + 2**20)). */
static void overlapping_view(float *memory, fp8q_view *view)
{
    memset(view, 0, sizeof *view);
    view->data = memory;
    view->dtype = FP8Q_FLOAT32;
    view->ndim = 2;
    view->shape[0] = (int64_t)1 << 20;
    view->shape[1] = (int64_t)1 << 20;
    view->strides[0] = 1;
    view->strides[1] = 1;
}

void test_amax_interrupt(void)
{
    static float memory[(1 << 21) + 1];
    static const int thread_counts[] = {1, 4};
    fp8q_interrupt outer;
    fp8q_interrupt inner;
    fp8q_view source;
    fp8q_view destination;
    float result = -1.0f;
    int64_t one = 1;
    size_t config;
    int calls;
    int i;

    for (i = 0; i < (1 << 21) + 1; i++) {
        memory[i] = (float)(i % 1000) - 500.0f;
    }
    overlapping_view(memory, &source);
    for (config = 0; config < 2; config++) {
        const int64_t started = fp8q_monotonic_ns();

        fp8q_set_num_threads(thread_counts[config]);
        fp8q_view_init_contiguous(&destination, &result, FP8Q_FLOAT32, 0,
                                  &one, NULL);
        destination.ndim = 2;
        destination.shape[0] = destination.shape[1] = 1;
        calls = 0;
        fp8q_interrupt_begin(&outer, stop_at_once, &calls);
        CHECK_INT(fp8q_amax(&source, &destination, NULL), FP8Q_OK);
        CHECK_INT(fp8q_interrupt_end(&outer), 1);
        /* Stopped at the first check (after 50 ms), far from 2**40 reads;
         * the check ran on this thread only, once. */
        CHECK_INT(calls, 1);
        CHECK(fp8q_monotonic_ns() - started < (int64_t)5000000000);
    }
    fp8q_set_num_threads(0);

    /* Nothing installed: polling never stops anything. */
    CHECK_INT(fp8q_interrupt_poll((int64_t)1 << 40), 0);

    /* Nested: the inner interrupt hides the outer one, which comes back. */
    calls = 0;
    fp8q_interrupt_begin(&outer, never_stop, &calls);
    fp8q_interrupt_begin(&inner, stop_at_once, &calls);
    CHECK_INT(fp8q_interrupt_end(&inner), 0);
    CHECK_INT(fp8q_interrupt_poll(1), 0);
    CHECK_INT(fp8q_interrupt_end(&outer), 0);
    CHECK_INT(calls, 0);

    /* A check that never stops: the full result, the same as without. */
    source.shape[0] = (int64_t)1 << 12;
    calls = 0;
    result = -1.0f;
    fp8q_interrupt_begin(&outer, never_stop, &calls);
    CHECK_INT(fp8q_amax(&source, &destination, NULL), FP8Q_OK);
    CHECK_INT(fp8q_interrupt_end(&outer), 0);
    CHECK(result == 500.0f);
}

void test_amax_zero_strides(void)
{
    static const float values[3] = {1.5f, -7.25f, 3.0f};
    fp8q_view source;
    fp8q_view destination;
    float results[3];
    static float per_row[1 << 20];
    int64_t n_nonfinite = -1;
    float nan_value[1];
    int i;

    /* (2**40, 3) rows that repeat one row: read once, same answer. */
    memset(&source, 0, sizeof source);
    source.data = (void *)values;
    source.dtype = FP8Q_FLOAT32;
    source.ndim = 2;
    source.shape[0] = (int64_t)1 << 40;
    source.shape[1] = 3;
    source.strides[1] = 1;
    memset(&destination, 0, sizeof destination);
    destination.data = results;
    destination.dtype = FP8Q_FLOAT32;
    destination.ndim = 2;
    destination.shape[0] = 1;
    destination.shape[1] = 3;
    destination.strides[1] = 1;
    CHECK_INT(fp8q_amax(&source, &destination, NULL), FP8Q_OK);
    CHECK(results[0] == 1.5f && results[1] == 7.25f && results[2] == 3.0f);
    destination.shape[1] = 1;
    CHECK_INT(fp8q_amax(&source, &destination, NULL), FP8Q_OK);
    CHECK(results[0] == 7.25f);

    /* A kept repeated axis: each of its results is the one reduction. */
    source.shape[0] = 3;
    source.shape[1] = (int64_t)1 << 40;
    source.strides[0] = 1;
    source.strides[1] = 0;
    destination.shape[0] = 3;
    destination.shape[1] = 1;
    destination.strides[0] = 1;
    results[0] = results[1] = results[2] = -1.0f;
    CHECK_INT(fp8q_amax(&source, &destination, NULL), FP8Q_OK);
    CHECK(results[0] == 1.5f && results[1] == 7.25f && results[2] == 3.0f);
    /* (2**20, 3) repeating one row, reduced along axis 1: 2**20 equal
     * results, computed once and copied. */
    source.shape[0] = (int64_t)1 << 20;
    source.strides[0] = 0;
    source.shape[1] = 3;
    source.strides[1] = 1;
    destination.data = per_row;
    destination.shape[0] = (int64_t)1 << 20;
    destination.shape[1] = 1;
    destination.strides[0] = 1;
    for (i = 0; i < (1 << 20); i++) {
        per_row[i] = -1.0f;
    }
    CHECK_INT(fp8q_amax(&source, &destination, NULL), FP8Q_OK);
    for (i = 0; i < (1 << 20) && per_row[i] == 7.25f; i++) {
    }
    CHECK_INT(i, 1 << 20);
    destination.data = results;

    /* The finite count scales with the repeats. */
    nan_value[0] = NAN;
    source.data = nan_value;
    source.shape[0] = (int64_t)1 << 40;
    source.strides[0] = 0;
    source.shape[1] = 1;
    destination.shape[0] = 1;
    destination.shape[1] = 1;
    CHECK_INT(fp8q_amax_finite(&source, &destination, &n_nonfinite, NULL),
              FP8Q_OK);
    CHECK(n_nonfinite == (int64_t)1 << 40);
    CHECK(results[0] == 0.0f);
}

void test_amax_all(void)
{
    float values[24];
    const int64_t shape[2] = {3, 4};
    const int64_t strides[2] = {8, -2}; /* every other column, reversed */
    const int64_t empty[2] = {3, 0};
    fp8q_view source;
    fp8q_error error;
    float expected = 0.0f;
    float result = -1.0f;
    int64_t row, col;

    fill_random_floats(values, 24, 100.0f);
    source = make_view(values + 6, FP8Q_FLOAT32, 2, shape, strides);
    for (row = 0; row < 3; row++) {
        for (col = 0; col < 4; col++) {
            const float magnitude = (float)fabs(values[6 + 8 * row - 2 * col]);
            expected = magnitude > expected ? magnitude : expected;
        }
    }
    values[7] = 1e30f; /* not in the view */
    CHECK_OK(fp8q_amax_all(&source, &result, &error), &error);
    CHECK_DOUBLE(result, expected);

    values[6 + 8 * 2 - 2 * 3] = NAN; /* in the view */
    CHECK_OK(fp8q_amax_all(&source, &result, &error), &error);
    CHECK(result != result);

    source = make_view(values, FP8Q_FLOAT32, 2, empty, NULL);
    result = -1.0f;
    CHECK_OK(fp8q_amax_all(&source, &result, &error), &error);
    CHECK_DOUBLE(result, 0.0);
}
