/*
 * test_view.c - view layout queries, broadcasting and its messages, and the
 * row iterator: every element visited once on contiguous, strided,
 * negative-stride, zero-stride, 0-d and empty views, coalescing, and the
 * parallel split; empty views whose other extents overflow int64, and
 * outputs whose elements alias each other.
 */
#include <stdlib.h>
#include <string.h>

#include "core/view.h"
#include "harness.h"
#include "helpers.h"
#include "platform.h"

void test_view_layout(void)
{
    float data[64];
    const int64_t shape[3] = {2, 3, 4};
    const int64_t transposed_strides[2] = {1, 3};
    const int64_t reversed_strides[2] = {-4, 1};
    const int64_t shape_2d[2] = {3, 4};
    const int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 30};
    const int64_t negative[2] = {3, -1};
    char text[64];
    fp8q_view view;
    fp8q_error error;
    int64_t low;
    int64_t high;

    CHECK_OK(fp8q_view_init_contiguous(&view, data, FP8Q_FLOAT32, 3, shape,
                                       &error),
             &error);
    CHECK_INT(view.strides[0], 12);
    CHECK_INT(view.strides[2], 1);
    CHECK_INT(fp8q_view_size(&view), 24);
    CHECK(fp8q_view_is_contiguous(&view));
    fp8q_view_byte_extent(&view, &low, &high);
    CHECK_INT(low, 0);
    CHECK_INT(high, 96);

    view = make_view(data, FP8Q_FLOAT32, 2, shape_2d, transposed_strides);
    CHECK(!fp8q_view_is_contiguous(&view));
    view = make_view(data + 8, FP8Q_FLOAT32, 2, shape_2d, reversed_strides);
    fp8q_view_byte_extent(&view, &low, &high);
    CHECK_INT(low, -32);
    CHECK_INT(high, 16);

    /* 0-d: one element; empty: zero elements and no extent. */
    CHECK_OK(fp8q_view_init_contiguous(&view, data, FP8Q_FLOAT16, 0, NULL,
                                       &error),
             &error);
    CHECK_INT(fp8q_view_size(&view), 1);
    CHECK(fp8q_view_is_contiguous(&view));
    fp8q_view_byte_extent(&view, &low, &high);
    CHECK_INT(high - low, 2);
    {
        const int64_t empty_shape[2] = {0, 5};
        view = make_view(data, FP8Q_FLOAT32, 2, empty_shape, NULL);
        CHECK_INT(fp8q_view_size(&view), 0);
        fp8q_view_byte_extent(&view, &low, &high);
        CHECK_INT(high - low, 0);
    }

    CHECK_ERROR(fp8q_view_init_contiguous(&view, data, FP8Q_FLOAT32, 17,
                                          shape, &error),
                &error, FP8Q_ERROR_VALUE, "17", NULL, NULL);
    CHECK_ERROR(fp8q_view_init_contiguous(&view, data, FP8Q_FLOAT32, 2,
                                          negative, &error),
                &error, FP8Q_ERROR_VALUE, "-1", "axis 1", NULL);
    CHECK_ERROR(fp8q_view_init_contiguous(&view, data, FP8Q_FLOAT32, 2, huge,
                                          &error),
                &error, FP8Q_ERROR_VALUE, "too large", NULL, NULL);

    {
        const int64_t bad_shape[2] = {3, -2};
        const fp8q_view *operands[1];
        view = make_view(data, FP8Q_FLOAT32, 2, bad_shape, NULL);
        operands[0] = &view;
        CHECK_ERROR(fp8q_for_each_row(1, operands, NULL, NULL, 0, &error),
                    &error, FP8Q_ERROR_VALUE, "-2", "axis 1", NULL);
    }

    fp8q_format_shape(text, sizeof text, 0, NULL);
    CHECK(strcmp(text, "()") == 0);
    fp8q_format_shape(text, sizeof text, 1, shape);
    CHECK(strcmp(text, "(2,)") == 0);
    fp8q_format_shape(text, sizeof text, 3, shape);
    CHECK(strcmp(text, "(2, 3, 4)") == 0);
    fp8q_format_shape(text, 5, 3, shape);
    CHECK(strlen(text) == 4);
}

void test_broadcast(void)
{
    float data[16];
    const int64_t column_shape[2] = {3, 1};
    const int64_t target[3] = {2, 3, 4};
    fp8q_view view = make_view(data, FP8Q_FLOAT32, 2, column_shape, NULL);
    fp8q_view out;
    fp8q_error error;

    CHECK_OK(fp8q_view_broadcast_to(&view, 3, target, &out, "scale", &error),
             &error);
    CHECK_INT(out.ndim, 3);
    CHECK_INT(out.shape[0], 2);
    CHECK_INT(out.strides[0], 0);
    CHECK_INT(out.strides[1], 1);
    CHECK_INT(out.strides[2], 0);
    CHECK(out.data == data);

    /* In place, and a 0-d view broadcast anywhere. */
    CHECK_OK(fp8q_view_broadcast_to(&view, 3, target, &view, "scale", &error),
             &error);
    CHECK_INT(view.shape[2], 4);
    CHECK_INT(view.strides[1], 1);
    view = make_view(data, FP8Q_FLOAT32, 0, NULL, NULL);
    CHECK_OK(fp8q_view_broadcast_to(&view, 3, target, &out, "scale", &error),
             &error);
    CHECK_INT(out.strides[0] | out.strides[1] | out.strides[2], 0);
}

void test_broadcast_errors(void)
{
    float data[16];
    const int64_t three[1] = {3};
    const int64_t target[2] = {4, 5};
    const int64_t big[3] = {2, 4, 5};
    fp8q_view view = make_view(data, FP8Q_FLOAT32, 1, three, NULL);
    fp8q_view out;
    fp8q_error error;

    CHECK_ERROR(fp8q_view_broadcast_to(&view, 2, target, &out, "scale",
                                       &error),
                &error, FP8Q_ERROR_VALUE, "scale: shape (3,)", "(4, 5)",
                "axis 1 has extent 3, expected 5 or 1");
    view = make_view(data, FP8Q_FLOAT32, 3, big, NULL);
    CHECK_ERROR(fp8q_view_broadcast_to(&view, 2, target, &out, "weight",
                                       &error),
                &error, FP8Q_ERROR_VALUE, "weight", "(2, 4, 5)",
                "more dimensions");
    CHECK_ERROR(fp8q_view_broadcast_to(&view, 20, target, &out, "x", &error),
                &error, FP8Q_ERROR_VALUE, "x:", "20", NULL);
}

/* ------------------------------------------------------------------------- */
/* Row iteration                                                             */

/* Counts visits per element of a float32 buffer (operand 0), and checks that
 * operand 1 (a float32 buffer of element numbers, maybe broadcast) always
 * arrives in step with operand 0. */
typedef struct visit_log {
    float *base;
    int64_t *visits;
    int64_t n_runs;
    int64_t longest_run;
    int mismatches;
} visit_log;

static void log_row(void *context, char *const *pointers,
                    const int64_t *byte_strides, int64_t count)
{
    visit_log *log = (visit_log *)context;
    int64_t i;
    log->n_runs++;
    if (count > log->longest_run) {
        log->longest_run = count;
    }
    for (i = 0; i < count; i++) {
        float value;
        float expected;
        const float *element =
            (const float *)(pointers[0] + i * byte_strides[0]);
        memcpy(&value, element, sizeof value);
        memcpy(&expected, pointers[1] + i * byte_strides[1], sizeof expected);
        log->visits[element - log->base]++;
        if (value != expected) {
            log->mismatches++;
        }
    }
}

/* Walks `view` (over `storage` of `n_storage` floats holding 0, 1, 2, ...)
 * together with a contiguous copy of its values, and checks every element of
 * the view is visited exactly once and nothing else is touched. */
static void check_visits(const fp8q_view *view, float *storage,
                         int64_t n_storage, visit_log *log)
{
    const int64_t size = fp8q_view_size(view);
    float *expected = (float *)malloc((size_t)(size > 0 ? size : 1) *
                                      sizeof(float));
    int64_t *expected_visits =
        (int64_t *)calloc((size_t)n_storage, sizeof(int64_t));
    int64_t index[FP8Q_MAX_DIMS] = {0};
    const fp8q_view *operands[2];
    fp8q_view copy;
    fp8q_error error;
    int64_t position = 0;
    int64_t element;

    for (element = 0; element < n_storage; element++) {
        storage[element] = (float)element;
    }
    if (size > 0) {
        do {
            const float *address = (const float *)element_at(view, index);
            expected[position++] = *address;
            expected_visits[address - storage]++;
        } while (next_index(view->ndim, view->shape, index));
    }
    copy = make_view(expected, FP8Q_FLOAT32, view->ndim, view->shape, NULL);
    memset(log, 0, sizeof *log);
    log->base = storage;
    log->visits = (int64_t *)calloc((size_t)n_storage, sizeof(int64_t));
    operands[0] = view;
    operands[1] = &copy;
    CHECK_OK(fp8q_for_each_row(2, operands, log_row, log, 0, &error), &error);
    CHECK_INT(log->mismatches, 0);
    CHECK(memcmp(log->visits, expected_visits,
                 (size_t)n_storage * sizeof(int64_t)) == 0);
    free(log->visits);
    free(expected_visits);
    free(expected);
}

void test_for_each_row_visits(void)
{
    static float storage[4096];
    visit_log log;
    fp8q_view view;

    {   /* Contiguous 3-D: one run. */
        const int64_t shape[3] = {4, 5, 6};
        view = make_view(storage, FP8Q_FLOAT32, 3, shape, NULL);
        check_visits(&view, storage, 4096, &log);
        CHECK_INT(log.n_runs, 1);
        CHECK_INT(log.longest_run, 120);
    }
    {   /* Strided columns and a reversed axis. */
        const int64_t shape[2] = {7, 9};
        const int64_t strides[2] = {-40, 3};
        view = make_view(storage + 6 * 40, FP8Q_FLOAT32, 2, shape, strides);
        check_visits(&view, storage, 4096, &log);
        CHECK_INT(log.n_runs, 7);
    }
    {   /* Transposed, against a C-ordered copy: the operands disagree on
         * the best order, so C order is kept. */
        const int64_t shape[2] = {9, 7};
        const int64_t strides[2] = {1, 9};
        view = make_view(storage, FP8Q_FLOAT32, 2, shape, strides);
        check_visits(&view, storage, 4096, &log);
        CHECK_INT(log.n_runs, 9);
    }
    {   /* Broadcast (zero stride) operand 0 against a full copy. */
        const int64_t shape[3] = {3, 4, 5};
        const int64_t strides[3] = {0, 5, 1};
        view = make_view(storage, FP8Q_FLOAT32, 3, shape, strides);
        check_visits(&view, storage, 4096, &log);
        CHECK_INT(log.mismatches, 0);
    }
    {   /* Fully reversed 1-D, and a 5-D view with extents of 1. */
        const int64_t shape[1] = {100};
        const int64_t strides[1] = {-1};
        const int64_t shape_5d[5] = {1, 3, 1, 4, 1};
        const int64_t strides_5d[5] = {999, 8, -5, 2, 7};
        view = make_view(storage + 99, FP8Q_FLOAT32, 1, shape, strides);
        check_visits(&view, storage, 4096, &log);
        view = make_view(storage + 10, FP8Q_FLOAT32, 5, shape_5d, strides_5d);
        check_visits(&view, storage, 4096, &log);
    }
    {   /* 0-d and empty. */
        const int64_t empty_shape[2] = {3, 0};
        view = make_view(storage + 17, FP8Q_FLOAT32, 0, NULL, NULL);
        check_visits(&view, storage, 4096, &log);
        CHECK_INT(log.n_runs, 1);
        view = make_view(storage, FP8Q_FLOAT32, 2, empty_shape, NULL);
        check_visits(&view, storage, 4096, &log);
        CHECK_INT(log.n_runs, 0);
    }
}

void test_for_each_row_coalescing(void)
{
    static float storage[4096];
    visit_log log;
    fp8q_view view;
    {   /* A (4, 5, 6) window of a (4, 5, 12) array: rows of 6 only. */
        const int64_t shape[3] = {4, 5, 6};
        const int64_t strides[3] = {60, 12, 1};
        view = make_view(storage, FP8Q_FLOAT32, 3, shape, strides);
        check_visits(&view, storage, 4096, &log);
        CHECK_INT(log.n_runs, 20);
        CHECK_INT(log.longest_run, 6);
    }
    {   /* Every other plane of a contiguous (8, 5, 6): planes of 30. */
        const int64_t shape[3] = {4, 5, 6};
        const int64_t strides[3] = {60, 6, 1};
        view = make_view(storage, FP8Q_FLOAT32, 3, shape, strides);
        check_visits(&view, storage, 4096, &log);
        CHECK_INT(log.n_runs, 4);
        CHECK_INT(log.longest_run, 30);
    }
}

static void count_run(void *context, char *const *pointers,
                      const int64_t *byte_strides, int64_t count)
{
    int64_t *runs = (int64_t *)context;
    (void)pointers;
    runs[0]++;
    runs[1] = count;
    runs[2] = byte_strides[0];
}

void test_for_each_row_axis_order(void)
{
    static float storage[64];
    const int64_t shape[2] = {9, 7};
    const int64_t transposed[2] = {1, 9};
    const int64_t reversed[3] = {-1, 9, 3};
    const int64_t shape_3d[3] = {3, 7, 3};
    const fp8q_view *operands[1];
    int64_t runs[3] = {0, 0, 0};
    fp8q_view view;
    fp8q_error error;

    /* Alone, a transposed (F-ordered) view is walked as one run. */
    view = make_view(storage, FP8Q_FLOAT32, 2, shape, transposed);
    operands[0] = &view;
    CHECK_OK(fp8q_for_each_row(1, operands, count_run, runs, 0, &error),
             &error);
    CHECK_INT(runs[0], 1);
    CHECK_INT(runs[1], 63);
    CHECK_INT(runs[2], 4);
    /* The smallest stride moves inside even when it is negative. */
    runs[0] = 0;
    view = make_view(storage + 2, FP8Q_FLOAT32, 3, shape_3d, reversed);
    CHECK_OK(fp8q_for_each_row(1, operands, count_run, runs, 0, &error),
             &error);
    CHECK_INT(runs[0], 21);
    CHECK_INT(runs[2], -4);
}

/* The longest and shortest run calls got. */
typedef struct run_lengths {
    int64_t longest;
    int64_t shortest;
} run_lengths;

/* Marks elements of a uint8 buffer: each must be marked exactly once;
 * *context (unless NULL, as from several threads) keeps the run lengths. */
static void mark_row(void *context, char *const *pointers,
                     const int64_t *byte_strides, int64_t count)
{
    run_lengths *lengths = (run_lengths *)context;
    int64_t i;

    if (lengths != NULL) {
        lengths->longest =
            count > lengths->longest ? count : lengths->longest;
        lengths->shortest =
            count < lengths->shortest ? count : lengths->shortest;
    }
    for (i = 0; i < count; i++) {
        pointers[0][i * byte_strides[0]] += 1;
    }
}

void test_for_each_row_parallel(void)
{
    const int64_t n = 3 * 1024 * 1024 + 77;
    uint8_t *marks = (uint8_t *)calloc((size_t)n, 1);
    const fp8q_view *operands[1];
    fp8q_view view;
    fp8q_error error;
    int64_t i;
    int all_once = 1;
    int layout;

    /* Four threads, then one: the same marks; on one thread no call
     * longer than the 2**20 elements between two interrupt polls (view.c
     * polls between the pieces of a long row), and pieces of a row even,
     * so that threads share them evenly. */
    for (layout = 0; layout < 8; layout++) {
        run_lengths lengths = {0, INT64_MAX};
        /* One long run, a few long rows, many short rows, reversed. */
        const int shape_kind = layout % 4;
        const int64_t rows = shape_kind == 0 ? 1 : shape_kind == 1 ? 3 : 1000;
        const int64_t shape[2] = {rows, n / rows};
        const int64_t strides[2] = {
            shape_kind == 3 ? -(n / rows) : n / rows, 1};
        char *origin = shape_kind == 3
                           ? (char *)marks + (rows - 1) * (n / rows)
                           : (char *)marks;
        memset(marks, 0, (size_t)n);
        view = make_view(origin, FP8Q_UINT8, 2, shape, strides);
        operands[0] = &view;
        fp8q_set_num_threads(layout < 4 ? 4 : 1);
        CHECK_OK(
            fp8q_for_each_row(1, operands, mark_row,
                              layout < 4 ? NULL : &lengths, 1, &error),
            &error);
        if (layout >= 4) {
            /* Rows in order coalesce into one run of over 2**20, cut into
             * 4 pieces; reversed rows of 3145 stay whole. */
            CHECK(lengths.longest <= ((int64_t)1 << 20));
            CHECK(lengths.shortest * 2 > lengths.longest);
        }
        for (i = 0; i < rows * (n / rows); i++) {
            all_once = all_once && marks[i] == 1;
        }
        for (; i < n; i++) {
            all_once = all_once && marks[i] == 0;
        }
        CHECK(all_once);
    }
    fp8q_set_num_threads(0);
    free(marks);
}

void test_thread_settings(void)
{
    const int original = fp8q_num_threads();
    CHECK(original >= 1);
    fp8q_set_num_threads(3);
    CHECK_INT(fp8q_num_threads(), 3);
    CHECK_INT(fp8q_threads_for(FP8Q_PARALLEL_MIN_ELEMENTS - 1), 1);
    CHECK_INT(fp8q_threads_for(FP8Q_PARALLEL_MIN_ELEMENTS * 2), 2);
    CHECK_INT(fp8q_threads_for(FP8Q_PARALLEL_MIN_ELEMENTS * 100), 3);
    fp8q_set_num_threads(0);
    CHECK_INT(fp8q_num_threads(), original);
    fp8q_set_num_threads(-5);
    CHECK_INT(fp8q_num_threads(), original);
}

void test_view_checks_and_blocks(void)
{
    static float storage[16];
    const int64_t shape[2] = {3, 4};
    const int64_t other[2] = {4, 3};
    const int64_t huge_shape[2] = {INT64_C(1) << 62, 4};
    const int64_t huge_strides[2] = {4, 1};
    const int64_t wide_shape[2] = {2, 2};
    const int64_t wide_strides[2] = {INT64_C(1) << 61, INT64_C(1) << 61};
    const int64_t lowest_stride[1] = {INT64_MIN};
    const int64_t three[1] = {3};
    const int64_t grid[2] = {1, 1};
    fp8q_view view;
    fp8q_view blocks;
    fp8q_error error;

    /* Layout checks: int64 byte offsets must hold every element. */
    view = make_view(storage, FP8Q_FLOAT32, 2, shape, NULL);
    CHECK_OK(fp8q_view_check_layout(&view, "x", &error), &error);
    view.strides[0] = -4;
    CHECK_OK(fp8q_view_check_layout(&view, "x", &error), &error);
    view = make_view(storage, FP8Q_FLOAT32, 2, huge_shape, huge_strides);
    CHECK_ERROR(fp8q_view_check_layout(&view, "x", &error), &error,
                FP8Q_ERROR_VALUE, "x: shape (4611686018427387904, 4)",
                "64-bit", NULL);
    view = make_view(storage, FP8Q_FLOAT32, 2, wide_shape, wide_strides);
    CHECK_ERROR(fp8q_view_check_layout(&view, "x", &error), &error,
                FP8Q_ERROR_VALUE, "64-bit", NULL, NULL);
    view = make_view(storage, FP8Q_UINT8, 1, three, lowest_stride);
    CHECK_ERROR(fp8q_view_check_layout(&view, "x", &error), &error,
                FP8Q_ERROR_VALUE, "64-bit", NULL, NULL);
    view.shape[0] = 1; /* a byte stride is formed even for extent 1 */
    CHECK_ERROR(fp8q_view_check_layout(&view, "x", &error), &error,
                FP8Q_ERROR_VALUE, "64-bit", NULL, NULL);
    view.shape[0] = -1;
    CHECK_ERROR(fp8q_view_check_layout(&view, "x", &error), &error,
                FP8Q_ERROR_VALUE, "x: shape extents must be >= 0", NULL,
                NULL);
    view.shape[0] = 0; /* empty: only the byte strides must exist */
    CHECK_ERROR(fp8q_view_check_layout(&view, "x", &error), &error,
                FP8Q_ERROR_VALUE, "64-bit", NULL, NULL);
    view.strides[0] = INT64_MAX;
    CHECK_OK(fp8q_view_check_layout(&view, "x", &error), &error);

    /* Same shape. */
    view = make_view(storage, FP8Q_FLOAT32, 2, shape, NULL);
    blocks = make_view(storage, FP8Q_FLOAT32, 2, other, NULL);
    CHECK_OK(fp8q_view_check_same_shape(&view, &view, "out", &error), &error);
    CHECK_ERROR(fp8q_view_check_same_shape(&view, &blocks, "out", &error),
                &error, FP8Q_ERROR_VALUE, "out: expected shape (3, 4)",
                "got (4, 3)", NULL);

    /* Writable outputs: no stride 0 on an axis of extent > 1. */
    CHECK_OK(fp8q_view_check_writable(&view, "out", &error), &error);
    view.strides[0] = 0;
    CHECK_ERROR(fp8q_view_check_writable(&view, "out", &error), &error,
                FP8Q_ERROR_VALUE, "out: axis 0 (extent 3, stride 0)",
                "revisits", NULL);
    view.shape[0] = 1;
    CHECK_OK(fp8q_view_check_writable(&view, "out", &error), &error);
    view = make_view(storage, FP8Q_FLOAT32, 2, shape, NULL);

    /* Block counts never overflow, even for the largest blocks. */
    CHECK_INT(fp8q_block_count(0, 5), 0);
    CHECK_INT(fp8q_block_count(10, 5), 2);
    CHECK_INT(fp8q_block_count(11, 5), 3);
    CHECK_INT(fp8q_block_count(7, INT64_MAX), 1);
    CHECK_INT(fp8q_block_count(INT64_MAX, INT64_MAX), 1);
    CHECK_INT(fp8q_block_count(INT64_MAX, 1), INT64_MAX);
    blocks = make_view(storage + 12, FP8Q_FLOAT32, 2, grid, NULL);
    CHECK_OK(fp8q_view_check_block_grid(&view, INT64_MAX, INT64_MAX, &blocks,
                                        "scale", &error),
             &error);
    CHECK_ERROR(fp8q_view_check_block_grid(&view, 2, INT64_MAX, &blocks,
                                           "scale", &error),
                &error, FP8Q_ERROR_VALUE, "scale: expected shape (2, 1)",
                "got (1, 1)", NULL);
}

/* fp8q_units_fn that counts how often each unit is visited. */
static void count_units(void *context, int64_t first, int64_t end)
{
    int64_t unit;
    for (unit = first; unit < end; unit++) {
        fp8q_atomic_fetch_add_i64(&((volatile int64_t *)context)[unit], 1);
    }
}

void test_for_each_unit_range(void)
{
    static volatile int64_t visits[1000];
    const int64_t counts[4] = {1, 7, 64, 1000};
    int saved = fp8q_num_threads();
    int index;
    int64_t unit;

    fp8q_set_num_threads(4);
    for (index = 0; index < 4; index++) {
        const int64_t n_units = counts[index];
        for (unit = 0; unit < n_units; unit++) {
            visits[unit] = 0;
        }
        /* Enough elements for 4 threads. */
        fp8q_for_each_unit_range(n_units, 4 * FP8Q_PARALLEL_MIN_ELEMENTS,
                                 count_units, (void *)visits);
        for (unit = 0; unit < n_units; unit++) {
            CHECK_INT(visits[unit], 1);
        }
        fp8q_for_each_unit_range(n_units, 1, count_units, (void *)visits);
        for (unit = 0; unit < n_units; unit++) {
            CHECK_INT(visits[unit], 2);
        }
    }
    fp8q_for_each_unit_range(0, 1, count_units, (void *)visits);
    fp8q_set_num_threads(saved);
}

void test_view_empty_extents_never_overflow(void)
{
    float data[4];
    const int64_t huge_after_zero[3] = {0, INT64_C(1) << 62, 4};
    const int64_t zero_last[3] = {INT64_C(1) << 62, 4, 0};
    const int64_t huge_empty[3] = {2, INT64_MAX, 0};
    fp8q_view view;
    fp8q_error error;

    /* (0, 2**62, 4): the stride of axis 0 (2**64 elements) cannot exist. */
    CHECK_OK(fp8q_view_init_contiguous(&view, data, FP8Q_FLOAT32, 3,
                                       huge_after_zero, &error),
             &error);
    CHECK_INT(view.strides[2], 1);
    CHECK_INT(view.strides[1], 4);
    CHECK_INT(view.strides[0], 0);
    CHECK_INT(fp8q_view_size(&view), 0);
    CHECK_OK(fp8q_view_check_layout(&view, "x", &error), &error);

    /* (2**62, 4, 0): no elements, so not too large. */
    CHECK_OK(fp8q_view_init_contiguous(&view, data, FP8Q_FLOAT32, 3,
                                       zero_last, &error),
             &error);
    CHECK_INT(view.strides[0], 4);
    CHECK_INT(view.strides[1], 1);
    CHECK_INT(view.strides[2], 1);
    CHECK_INT(fp8q_view_size(&view), 0);
    CHECK(fp8q_view_is_contiguous(&view));

    /* An empty capsule's layout: the size is 0, never a wrapped product. */
    view = make_view(data, FP8Q_UINT8, 3, huge_empty, NULL);
    CHECK_INT(fp8q_view_size(&view), 0);
    CHECK_OK(fp8q_view_check_layout(&view, "x", &error), &error);
    CHECK_OK(fp8q_view_check_writable(&view, "out", &error), &error);
}

void test_view_self_overlap(void)
{
    float data[64];
    const int64_t rows[2] = {4, 4};
    const int64_t overlapping_rows[2] = {2, 1}; /* rows 2 apart, 4 long */
    const int64_t transposed[2] = {1, 4};
    const int64_t reversed[2] = {-4, -1};
    const int64_t interleaved_shape[2] = {3, 2};
    const int64_t interleaved[2] = {2, 3}; /* distinct, but not provably */
    const int64_t single_row_shape[2] = {1, 4};
    const int64_t any_stride[2] = {1, 1};
    fp8q_view view;
    fp8q_error error;

    view = make_view(data, FP8Q_FLOAT32, 2, rows, NULL);
    CHECK_OK(fp8q_view_check_writable(&view, "out", &error), &error);
    view = make_view(data, FP8Q_FLOAT32, 2, rows, transposed);
    CHECK_OK(fp8q_view_check_writable(&view, "out", &error), &error);
    view = make_view(data + 15, FP8Q_FLOAT32, 2, rows, reversed);
    CHECK_OK(fp8q_view_check_writable(&view, "out", &error), &error);
    view = make_view(data, FP8Q_FLOAT32, 2, single_row_shape, any_stride);
    CHECK_OK(fp8q_view_check_writable(&view, "out", &error), &error);

    view = make_view(data, FP8Q_FLOAT32, 2, rows, overlapping_rows);
    CHECK_ERROR(fp8q_view_check_writable(&view, "out", &error), &error,
                FP8Q_ERROR_VALUE, "out: axis 0 (extent 4, stride 2)",
                "revisits", NULL);
    view = make_view(data, FP8Q_FLOAT32, 2, interleaved_shape, interleaved);
    CHECK_ERROR(fp8q_view_check_writable(&view, "out", &error), &error,
                FP8Q_ERROR_VALUE, "out: axis 1 (extent 2, stride 3)", NULL,
                NULL);
}
