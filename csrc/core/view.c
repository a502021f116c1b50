/*
 * view.c - strided views: layout queries, NumPy broadcasting, and the row
 * iterator (dimension coalescing, axis ordering, parallel splitting) that
 * every element-wise core operation runs on. Also the threading policy.
 */
#define _CRT_SECURE_NO_WARNINGS /* MSVC: getenv is fine here */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/view.h"
#include "platform.h"

/* ------------------------------------------------------------------------- */
/* Layout                                                                    */

int64_t fp8q_view_size(const fp8q_view *view)
{
    int64_t size = 1;
    int axis;
    /* An extent of 0 is looked for first: the other extents of an empty view
     * may multiply beyond int64 (only non-empty layouts are bounded). */
    for (axis = 0; axis < view->ndim; axis++) {
        if (view->shape[axis] == 0) {
            return 0;
        }
    }
    for (axis = 0; axis < view->ndim; axis++) {
        size *= view->shape[axis];
    }
    return size;
}

int fp8q_view_is_contiguous(const fp8q_view *view)
{
    int64_t expected_stride = 1;
    int axis;

    if (fp8q_view_size(view) == 0) {
        return 1;
    }
    for (axis = view->ndim - 1; axis >= 0; axis--) {
        if (view->shape[axis] != 1) {
            if (view->strides[axis] != expected_stride) {
                return 0;
            }
            expected_stride *= view->shape[axis];
        }
    }
    return 1;
}

fp8q_status fp8q_shape_check_extents(int ndim, const int64_t *shape,
                                     const char *prefix, fp8q_error *error)
{
    int axis;

    for (axis = 0; axis < ndim; axis++) {
        if (shape[axis] < 0) {
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "%sextents must be >= 0, got %" PRId64
                             " at axis %d",
                             prefix, shape[axis], axis);
        }
    }
    return FP8Q_OK;
}

fp8q_status fp8q_view_init_contiguous(fp8q_view *view, void *data,
                                      fp8q_dtype dtype, int ndim,
                                      const int64_t *shape, fp8q_error *error)
{
    const int64_t itemsize = (int64_t)fp8q_dtype_itemsize(dtype);
    int64_t stride = 1;
    int64_t size = 1;
    int axis;

    if (itemsize == 0) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE, "invalid dtype code %d",
                         (int)dtype);
    }
    if (ndim < 0 || ndim > FP8Q_MAX_DIMS) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "a tensor has between 0 and %d dimensions, got %d",
                         FP8Q_MAX_DIMS, ndim);
    }
    if (fp8q_shape_check_extents(ndim, shape, "shape ", error) != FP8Q_OK) {
        return FP8Q_ERROR_VALUE;
    }
    /* Check the byte size for overflow before storing anything; a tensor
     * with no elements is never too large. */
    for (axis = 0; axis < ndim; axis++) {
        if (shape[axis] == 0) {
            size = 0;
        }
    }
    for (axis = 0; axis < ndim && size != 0; axis++) {
        if (size > INT64_MAX / itemsize / shape[axis]) {
            char text[256];
            fp8q_format_shape(text, sizeof text, ndim, shape);
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "a tensor of shape %s and dtype %s is too large",
                             text, fp8q_dtype_name(dtype));
        }
        size *= shape[axis];
    }
    view->data = data;
    view->dtype = dtype;
    view->ndim = ndim;
    /* Extents of 0 count as 1 (as in NumPy and PyTorch). Only an empty view
     * can reach a stride whose byte offset int64 cannot hold; it addresses
     * no element, so that stride and the ones outside it are 0. */
    for (axis = ndim - 1; axis >= 0; axis--) {
        const int64_t extent = shape[axis] > 0 ? shape[axis] : 1;
        view->shape[axis] = shape[axis];
        view->strides[axis] = stride;
        if (stride > INT64_MAX / itemsize / extent) {
            stride = 0;
        }
        else {
            stride *= extent;
        }
    }
    return FP8Q_OK;
}

fp8q_status fp8q_view_check_layout(const fp8q_view *view,
                                   const char *argument_name,
                                   fp8q_error *error)
{
    const int64_t itemsize = (int64_t)fp8q_dtype_itemsize(view->dtype);
    int64_t size = itemsize; /* bytes of the elements */
    int64_t span = itemsize; /* bytes from the lowest to the highest one */
    int empty = 0;
    int axis;

    if (itemsize == 0) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE, "%s: invalid dtype code %d",
                         argument_name, (int)view->dtype);
    }
    if (view->ndim < 0 || view->ndim > FP8Q_MAX_DIMS) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: a tensor has between 0 and %d dimensions, got "
                         "%d",
                         argument_name, FP8Q_MAX_DIMS, view->ndim);
    }
    for (axis = 0; axis < view->ndim; axis++) {
        if (view->shape[axis] < 0) {
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "%s: shape extents must be >= 0, got %" PRId64
                             " at axis %d",
                             argument_name, view->shape[axis], axis);
        }
    }
    for (axis = 0; axis < view->ndim; axis++) {
        empty = empty || view->shape[axis] == 0;
    }
    for (axis = 0; axis < view->ndim; axis++) {
        const int64_t extent = view->shape[axis];
        const int64_t stride = view->strides[axis];
        const int64_t step = stride == INT64_MIN ? 0
                             : stride < 0        ? -stride
                                                 : stride;

        /* Byte strides (and their magnitudes) are formed for every axis,
         * even of extent 0 or 1; INT64_MIN has no magnitude. */
        if (stride == INT64_MIN || step > INT64_MAX / itemsize) {
            break;
        }
        if (empty) {
            continue;
        }
        if (size > INT64_MAX / extent) {
            break;
        }
        size *= extent;
        if (extent > 1) {
            if (step * itemsize > (INT64_MAX - span) / (extent - 1)) {
                break;
            }
            span += (extent - 1) * step * itemsize;
        }
    }
    if (axis < view->ndim) {
        char shape_text[256];
        char strides_text[256];
        fp8q_format_shape(shape_text, sizeof shape_text, view->ndim,
                          view->shape);
        fp8q_format_shape(strides_text, sizeof strides_text, view->ndim,
                          view->strides);
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: shape %s with strides %s of %s elements spans "
                         "more bytes than a 64-bit offset holds",
                         argument_name, shape_text, strides_text,
                         fp8q_dtype_name(view->dtype));
    }
    return FP8Q_OK;
}

fp8q_status fp8q_view_check_same_shape(const fp8q_view *expected,
                                       const fp8q_view *received,
                                       const char *argument_name,
                                       fp8q_error *error)
{
    int same = expected->ndim == received->ndim;
    int axis;

    for (axis = 0; same && axis < expected->ndim; axis++) {
        same = expected->shape[axis] == received->shape[axis];
    }
    if (!same) {
        char expected_text[256];
        char received_text[256];
        fp8q_format_shape(expected_text, sizeof expected_text, expected->ndim,
                          expected->shape);
        fp8q_format_shape(received_text, sizeof received_text,
                          received->ndim, received->shape);
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: expected shape %s (the input's), got %s",
                         argument_name, expected_text, received_text);
    }
    return FP8Q_OK;
}

/* |stride| of `axis`, for a view that passed fp8q_view_check_layout. */
static int64_t stride_magnitude(const fp8q_view *view, int axis)
{
    return view->strides[axis] < 0 ? -view->strides[axis]
                                   : view->strides[axis];
}

fp8q_status fp8q_view_check_writable(const fp8q_view *view,
                                     const char *argument_name,
                                     fp8q_error *error)
{
    int axes[FP8Q_MAX_DIMS]; /* the axes of extent > 1, by growing |stride| */
    int n_axes = 0;
    int64_t span = 0; /* elements spanned by the axes placed so far, - 1 */
    fp8q_status status;
    int index;

    if (fp8q_view_size(view) == 0) {
        return FP8Q_OK; /* no element is written at all */
    }
    status = fp8q_view_check_layout(view, argument_name, error);
    if (status != FP8Q_OK) {
        return status;
    }
    for (index = 0; index < view->ndim; index++) {
        int place;
        if (view->shape[index] == 1) {
            continue;
        }
        place = n_axes++;
        while (place > 0 && stride_magnitude(view, axes[place - 1]) >
                                stride_magnitude(view, index)) {
            axes[place] = axes[place - 1];
            place--;
        }
        axes[place] = index;
    }
    /* Distinct elements are guaranteed when every axis steps past all that
     * the smaller-stride axes span; fp8q refuses what it cannot prove. */
    for (index = 0; index < n_axes; index++) {
        const int axis = axes[index];
        const int64_t step = stride_magnitude(view, axis);
        if (step <= span) {
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "%s: axis %d (extent %" PRId64 ", stride %" PRId64
                             ") revisits elements already reached, so several "
                             "results would land on one element",
                             argument_name, axis, view->shape[axis],
                             view->strides[axis]);
        }
        span += step * (view->shape[axis] - 1);
    }
    return FP8Q_OK;
}

void fp8q_view_byte_extent(const fp8q_view *view, int64_t *low, int64_t *high)
{
    const int64_t itemsize = (int64_t)fp8q_dtype_itemsize(view->dtype);
    int64_t lowest = 0;
    int64_t highest = 0;
    int axis;

    if (fp8q_view_size(view) == 0) {
        *low = 0;
        *high = 0;
        return;
    }
    for (axis = 0; axis < view->ndim; axis++) {
        const int64_t span = (view->shape[axis] - 1) * view->strides[axis];
        if (span < 0) {
            lowest += span;
        }
        else {
            highest += span;
        }
    }
    *low = lowest * itemsize;
    *high = (highest + 1) * itemsize;
}

void fp8q_format_shape(char *buffer, size_t buffer_size, int ndim,
                       const int64_t *shape)
{
    size_t used;
    int axis;

    if (buffer_size == 0) {
        return;
    }
    snprintf(buffer, buffer_size, "(");
    for (axis = 0; axis < ndim; axis++) {
        used = strlen(buffer);
        snprintf(buffer + used, buffer_size - used, "%s%" PRId64,
                 axis == 0 ? "" : ", ", shape[axis]);
    }
    used = strlen(buffer);
    snprintf(buffer + used, buffer_size - used, ndim == 1 ? ",)" : ")");
    buffer[buffer_size - 1] = '\0';
}

/* ------------------------------------------------------------------------- */
/* 2-D blocks                                                                */

void fp8q_view_slice(const fp8q_view *view, int axis, int64_t first,
                     int64_t end, fp8q_view *out)
{
    *out = *view;
    out->data = (char *)view->data + first * view->strides[axis] *
                                         (int64_t)fp8q_dtype_itemsize(
                                             view->dtype);
    out->shape[axis] = end - first;
}

int fp8q_view_longest_axis(const fp8q_view *view)
{
    int longest = -1;
    int axis;
    for (axis = 0; axis < view->ndim; axis++) {
        if (longest < 0 || view->shape[axis] > view->shape[longest]) {
            longest = axis;
        }
    }
    return longest;
}

int64_t fp8q_block_count(int64_t extent, int64_t block)
{
    return extent == 0 ? 0 : (extent - 1) / block + 1;
}

char *fp8q_view_element_2d(const fp8q_view *view, int64_t row, int64_t col)
{
    return (char *)view->data +
           (row * view->strides[0] + col * view->strides[1]) *
               (int64_t)fp8q_dtype_itemsize(view->dtype);
}

fp8q_status fp8q_view_check_block_grid(const fp8q_view *source,
                                       int64_t block_rows, int64_t block_cols,
                                       const fp8q_view *blocks,
                                       const char *blocks_name,
                                       fp8q_error *error)
{
    int64_t expected[2];

    if (source->ndim != 2) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "blocks need 2-D input, got %d dimensions",
                         source->ndim);
    }
    if (block_rows < 1 || block_cols < 1) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "block: extents must be >= 1, got (%" PRId64
                         ", %" PRId64 ")",
                         block_rows, block_cols);
    }
    if (blocks->dtype != FP8Q_FLOAT32) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE,
                         "%s: expected dtype float32, got %s", blocks_name,
                         fp8q_dtype_name(blocks->dtype));
    }
    expected[0] = fp8q_block_count(source->shape[0], block_rows);
    expected[1] = fp8q_block_count(source->shape[1], block_cols);
    if (blocks->ndim != 2 || blocks->shape[0] != expected[0] ||
        blocks->shape[1] != expected[1]) {
        char expected_text[256];
        char received_text[256];
        fp8q_format_shape(expected_text, sizeof expected_text, 2, expected);
        fp8q_format_shape(received_text, sizeof received_text, blocks->ndim,
                          blocks->shape);
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: expected shape %s for blocks of (%" PRId64
                         ", %" PRId64 ") over shape (%" PRId64 ", %" PRId64
                         "), got %s",
                         blocks_name, expected_text, block_rows, block_cols,
                         source->shape[0], source->shape[1], received_text);
    }
    return FP8Q_OK;
}

/* ------------------------------------------------------------------------- */
/* Broadcasting                                                              */

fp8q_status fp8q_view_broadcast_to(const fp8q_view *in, int ndim,
                                   const int64_t *shape, fp8q_view *out,
                                   const char *argument_name,
                                   fp8q_error *error)
{
    const fp8q_view source = *in; /* `out` may be `in` */
    const int leading = ndim - source.ndim;
    char source_text[256];
    char target_text[256];
    int axis;

    if (ndim < 0 || ndim > FP8Q_MAX_DIMS) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: cannot broadcast to %d dimensions (at most %d)",
                         argument_name, ndim, FP8Q_MAX_DIMS);
    }
    if (leading < 0) {
        fp8q_format_shape(source_text, sizeof source_text, source.ndim,
                          source.shape);
        fp8q_format_shape(target_text, sizeof target_text, ndim, shape);
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: shape %s cannot be broadcast to shape %s: it "
                         "has more dimensions (%d > %d)",
                         argument_name, source_text, target_text,
                         source.ndim, ndim);
    }
    for (axis = 0; axis < source.ndim; axis++) {
        const int64_t extent = source.shape[axis];
        const int64_t target = shape[axis + leading];
        if (extent != target && extent != 1) {
            fp8q_format_shape(source_text, sizeof source_text, source.ndim,
                              source.shape);
            fp8q_format_shape(target_text, sizeof target_text, ndim, shape);
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "%s: shape %s cannot be broadcast to shape %s: "
                             "axis %d has extent %" PRId64
                             ", expected %" PRId64 " or 1",
                             argument_name, source_text, target_text,
                             axis + leading, extent, target);
        }
    }
    out->data = source.data;
    out->dtype = source.dtype;
    out->ndim = ndim;
    for (axis = 0; axis < ndim; axis++) {
        const int source_axis = axis - leading;
        out->shape[axis] = shape[axis];
        if (source_axis < 0 || source.shape[source_axis] != shape[axis]) {
            out->strides[axis] = 0;
        }
        else {
            out->strides[axis] = source.strides[source_axis];
        }
    }
    return FP8Q_OK;
}

/* ------------------------------------------------------------------------- */
/* Threading policy                                                          */

/* 0 until first use (or after fp8q_set_num_threads(0)), then the count. */
static volatile int64_t configured_threads = 0;

/* FP8Q_NUM_THREADS as a positive count, or 0 when unset or malformed. */
static int64_t threads_from_environment(void)
{
    const char *text = getenv("FP8Q_NUM_THREADS");
    int64_t value = 0;

    if (text == NULL || *text == '\0') {
        return 0;
    }
    for (; *text != '\0'; text++) {
        if (*text < '0' || *text > '9' || value > FP8Q_MAX_THREADS) {
            return 0;
        }
        value = value * 10 + (*text - '0');
    }
    return value <= FP8Q_MAX_THREADS ? value : 0;
}

int fp8q_num_threads(void)
{
    int64_t threads = fp8q_atomic_load_i64(&configured_threads);
    if (threads < 1) {
        threads = threads_from_environment();
        if (threads < 1) {
            threads = fp8q_cpu_count();
        }
        fp8q_atomic_store_i64(&configured_threads, threads);
    }
    return (int)threads;
}

void fp8q_set_num_threads(int n)
{
    const int64_t threads =
        n < 1 ? 0 : (n > FP8Q_MAX_THREADS ? FP8Q_MAX_THREADS : n);
    fp8q_atomic_store_i64(&configured_threads, threads);
}

int fp8q_threads_for(int64_t n_elements)
{
    const int64_t useful = n_elements / FP8Q_PARALLEL_MIN_ELEMENTS;
    const int available = fp8q_num_threads();
    if (useful < 1) {
        return 1;
    }
    return useful < available ? (int)useful : available;
}

/* Elements a loop runs between two polls of fp8q_interrupt_poll: about a
 * millisecond of work, a multiple of 64 (pieces of a row stay whole cache
 * lines). */
#define ELEMENTS_PER_POLL ((int64_t)1 << 20)

/* A range of units per task of fp8q_for_each_unit_range. */
typedef struct unit_ranges {
    fp8q_units_fn run;
    void *context;
    int64_t n_units;
    int64_t units_per_task;
    int64_t units_per_poll;
} unit_ranges;

/* ranges->run over [first, end) in steps of units_per_poll, polling for an
 * interrupt after each. */
static void run_polled(const unit_ranges *ranges, int64_t first, int64_t end)
{
    while (first < end) {
        const int64_t step = end - first < ranges->units_per_poll
                                 ? end - first
                                 : ranges->units_per_poll;
        ranges->run(ranges->context, first, first + step);
        first += step;
        if (fp8q_interrupt_poll(ELEMENTS_PER_POLL)) {
            return;
        }
    }
}

static void unit_range_task(void *context, int64_t task_index)
{
    const unit_ranges *ranges = (const unit_ranges *)context;
    const int64_t first = task_index * ranges->units_per_task;
    const int64_t end = ranges->n_units - first < ranges->units_per_task
                            ? ranges->n_units
                            : first + ranges->units_per_task;
    run_polled(ranges, first, end);
}

void fp8q_for_each_unit_range(int64_t n_units, int64_t n_elements,
                              fp8q_units_fn run, void *context)
{
    const int threads = fp8q_threads_for(n_elements);
    const int64_t elements_per_unit =
        n_units > 0 ? n_elements / n_units + 1 : 1;
    unit_ranges ranges;
    int64_t n_tasks = (int64_t)threads * 4; /* balances uneven progress */

    if (n_units <= 0) {
        return;
    }
    ranges.run = run;
    ranges.context = context;
    ranges.n_units = n_units;
    ranges.units_per_poll = ELEMENTS_PER_POLL / elements_per_unit + 1;
    if (threads <= 1 || n_units == 1) {
        run_polled(&ranges, 0, n_units);
        return;
    }
    if (n_tasks > n_units) {
        n_tasks = n_units;
    }
    ranges.units_per_task = (n_units - 1) / n_tasks + 1;
    n_tasks = (n_units - 1) / ranges.units_per_task + 1;
    fp8q_parallel_for(n_tasks, threads, unit_range_task, &ranges);
}

/* ------------------------------------------------------------------------- */
/* Row iteration                                                             */

/*
 * The iteration space after coalescing: `n_outer` outer axes and one inner
 * run of `inner_count` elements. Work is cut into units (a row, or a piece of
 * a row when there are too few rows to share out), and units into tasks.
 */
typedef struct row_walk {
    int n_operands;
    int n_outer;
    int64_t outer_shape[FP8Q_MAX_DIMS];
    int64_t outer_byte_strides[FP8Q_MAX_OPERANDS][FP8Q_MAX_DIMS];
    int64_t inner_count;
    int64_t inner_byte_strides[FP8Q_MAX_OPERANDS];
    char *base[FP8Q_MAX_OPERANDS];
    int64_t pieces_per_row;
    int64_t piece_length;
    int64_t units_per_task;
    int64_t n_units;
    fp8q_row_fn row;
    void *context;
} row_walk;

/* Calls walk->row for units [first_unit, end_unit), in order. */
static void walk_units(const row_walk *walk, int64_t first_unit,
                       int64_t end_unit)
{
    int64_t index[FP8Q_MAX_DIMS];
    int64_t offsets[FP8Q_MAX_OPERANDS];
    char *pointers[FP8Q_MAX_OPERANDS];
    int64_t row = first_unit / walk->pieces_per_row;
    int64_t piece = first_unit % walk->pieces_per_row;
    int64_t unpolled = 0;
    int64_t unit;
    int axis;
    int k;

    for (k = 0; k < walk->n_operands; k++) {
        offsets[k] = 0;
    }
    for (axis = walk->n_outer - 1; axis >= 0; axis--) {
        index[axis] = row % walk->outer_shape[axis];
        row /= walk->outer_shape[axis];
        for (k = 0; k < walk->n_operands; k++) {
            offsets[k] += index[axis] * walk->outer_byte_strides[k][axis];
        }
    }
    for (unit = first_unit; unit < end_unit; unit++) {
        const int64_t start = piece * walk->piece_length;
        const int64_t remaining = walk->inner_count - start;
        const int64_t count =
            remaining < walk->piece_length ? remaining : walk->piece_length;

        for (k = 0; k < walk->n_operands; k++) {
            pointers[k] = walk->base[k] + offsets[k] +
                          start * walk->inner_byte_strides[k];
        }
        walk->row(walk->context, pointers, walk->inner_byte_strides, count);
        /* A poll follows every ELEMENTS_PER_POLL elements or so (a piece
         * holds at most that many). */
        unpolled += count;
        if (unpolled >= ELEMENTS_PER_POLL) {
            if (fp8q_interrupt_poll(unpolled)) {
                return;
            }
            unpolled = 0;
        }

        if (++piece < walk->pieces_per_row) {
            continue;
        }
        piece = 0;
        /* Odometer step over the outer axes. */
        for (axis = walk->n_outer - 1; axis >= 0; axis--) {
            index[axis]++;
            for (k = 0; k < walk->n_operands; k++) {
                offsets[k] += walk->outer_byte_strides[k][axis];
            }
            if (index[axis] < walk->outer_shape[axis]) {
                break;
            }
            for (k = 0; k < walk->n_operands; k++) {
                offsets[k] -= walk->outer_shape[axis] *
                              walk->outer_byte_strides[k][axis];
            }
            index[axis] = 0;
        }
    }
}

/* Cuts each of the walk's n_rows rows into `pieces` pieces of one length
 * in whole cache lines (64 elements; the last piece shorter), each of them
 * cut again into as few equal ones as hold at most ELEMENTS_PER_POLL
 * elements (the walk polls between pieces), so that pieces stay even for
 * the threads; one unit a piece. */
static void cut_rows(row_walk *walk, int64_t n_rows, int64_t pieces)
{
    int64_t length =
        ((walk->inner_count + pieces - 1) / pieces + 63) / 64 * 64;
    const int64_t parts =
        (length + ELEMENTS_PER_POLL - 1) / ELEMENTS_PER_POLL;

    length = ((length + parts - 1) / parts + 63) / 64 * 64;
    walk->piece_length = length;
    walk->pieces_per_row = (walk->inner_count + length - 1) / length;
    walk->n_units = n_rows * walk->pieces_per_row;
}

static void walk_task(void *context, int64_t task_index)
{
    const row_walk *walk = (const row_walk *)context;
    const int64_t first = task_index * walk->units_per_task;
    const int64_t end = first + walk->units_per_task;
    walk_units(walk, first, end < walk->n_units ? end : walk->n_units);
}

static int64_t magnitude_of(int64_t value)
{
    return value < 0 ? -value : value;
}

/* Nonzero when axis `outer` should move inside axis `inner`: every operand
 * that moves along both steps less along `outer`, and one strictly less. */
static int should_swap(int n_operands,
                       int64_t (*strides)[FP8Q_MAX_DIMS], int outer,
                       int inner)
{
    int strictly_better = 0;
    int k;
    for (k = 0; k < n_operands; k++) {
        const int64_t outer_step = magnitude_of(strides[k][outer]);
        const int64_t inner_step = magnitude_of(strides[k][inner]);
        if (outer_step == 0 || inner_step == 0) {
            continue;
        }
        if (outer_step > inner_step) {
            return 0;
        }
        if (outer_step < inner_step) {
            strictly_better = 1;
        }
    }
    return strictly_better;
}

fp8q_status fp8q_for_each_row(int n_operands, const fp8q_view *const *views,
                              fp8q_row_fn row, void *context, int parallel,
                              fp8q_error *error)
{
    row_walk walk;
    int64_t shape[FP8Q_MAX_DIMS];
    int64_t strides[FP8Q_MAX_OPERANDS][FP8Q_MAX_DIMS];
    int64_t n_rows = 1;
    int64_t threads = 1;
    int ndim;
    int n_axes = 0;
    int axis;
    int k;

    if (n_operands < 1 || n_operands > FP8Q_MAX_OPERANDS) {
        return fp8q_fail(error, FP8Q_ERROR_RUNTIME,
                         "fp8q_for_each_row takes 1 to %d operands, got %d",
                         FP8Q_MAX_OPERANDS, n_operands);
    }
    ndim = views[0]->ndim;
    if (ndim < 0 || ndim > FP8Q_MAX_DIMS) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "a tensor has between 0 and %d dimensions, got %d",
                         FP8Q_MAX_DIMS, ndim);
    }
    if (fp8q_shape_check_extents(ndim, views[0]->shape, "shape ", error) !=
        FP8Q_OK) {
        return FP8Q_ERROR_VALUE;
    }
    for (k = 1; k < n_operands; k++) {
        int same = views[k]->ndim == ndim;
        for (axis = 0; same && axis < ndim; axis++) {
            same = views[k]->shape[axis] == views[0]->shape[axis];
        }
        if (!same) {
            char expected[256];
            char received[256];
            fp8q_format_shape(expected, sizeof expected, ndim,
                              views[0]->shape);
            fp8q_format_shape(received, sizeof received, views[k]->ndim,
                              views[k]->shape);
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "operand %d has shape %s, expected %s", k,
                             received, expected);
        }
    }
    if (fp8q_view_size(views[0]) == 0) {
        return FP8Q_OK;
    }

    /* Drop extents of 1, then order the axes so that the smallest strides
     * are innermost (stable: C order wins whenever operands disagree). */
    for (axis = 0; axis < ndim; axis++) {
        if (views[0]->shape[axis] == 1) {
            continue;
        }
        shape[n_axes] = views[0]->shape[axis];
        for (k = 0; k < n_operands; k++) {
            strides[k][n_axes] =
                views[k]->strides[axis] *
                (int64_t)fp8q_dtype_itemsize(views[k]->dtype);
        }
        n_axes++;
    }
    for (axis = 1; axis < n_axes; axis++) {
        int position = axis;
        while (position > 0 &&
               should_swap(n_operands, strides, position - 1, position)) {
            const int64_t extent = shape[position];
            shape[position] = shape[position - 1];
            shape[position - 1] = extent;
            for (k = 0; k < n_operands; k++) {
                const int64_t stride = strides[k][position];
                strides[k][position] = strides[k][position - 1];
                strides[k][position - 1] = stride;
            }
            position--;
        }
    }

    /* Merge an axis into its outer neighbour wherever every operand steps
     * over the inner axis exactly once per outer step. */
    walk.n_outer = 0;
    walk.inner_count = 1;
    for (k = 0; k < n_operands; k++) {
        walk.inner_byte_strides[k] =
            (int64_t)fp8q_dtype_itemsize(views[k]->dtype);
        walk.base[k] = (char *)views[k]->data;
    }
    for (axis = 0; axis < n_axes; axis++) {
        int mergeable = axis > 0;
        for (k = 0; mergeable && k < n_operands; k++) {
            mergeable = walk.inner_byte_strides[k] ==
                        shape[axis] * strides[k][axis];
        }
        if (mergeable) {
            walk.inner_count *= shape[axis];
        }
        else {
            if (axis > 0) {
                walk.outer_shape[walk.n_outer] = walk.inner_count;
                for (k = 0; k < n_operands; k++) {
                    walk.outer_byte_strides[k][walk.n_outer] =
                        walk.inner_byte_strides[k];
                }
                walk.n_outer++;
                n_rows *= walk.inner_count;
            }
            walk.inner_count = shape[axis];
        }
        for (k = 0; k < n_operands; k++) {
            walk.inner_byte_strides[k] = strides[k][axis];
        }
    }

    walk.n_operands = n_operands;
    walk.row = row;
    walk.context = context;
    cut_rows(&walk, n_rows, 1);
    walk.units_per_task = walk.n_units;

    if (parallel) {
        threads = fp8q_threads_for(n_rows * walk.inner_count);
    }
    if (threads <= 1) {
        walk_units(&walk, 0, walk.n_units);
        return FP8Q_OK;
    }

    {
        /* A few tasks per thread balance uneven progress. Too few rows to
         * go round: cut each row into more pieces. */
        const int64_t target_tasks = threads * 4;
        int64_t n_tasks;
        if (n_rows < target_tasks) {
            cut_rows(&walk, n_rows, (target_tasks + n_rows - 1) / n_rows);
        }
        n_tasks = walk.n_units < target_tasks ? walk.n_units : target_tasks;
        walk.units_per_task = (walk.n_units + n_tasks - 1) / n_tasks;
        n_tasks =
            (walk.n_units + walk.units_per_task - 1) / walk.units_per_task;
        fp8q_parallel_for(n_tasks, (int)threads, walk_task, &walk);
    }
    return FP8Q_OK;
}
