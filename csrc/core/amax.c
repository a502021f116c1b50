/*
 * amax.c - max |x| reductions over axes (NumPy keepdims layout) and over 2-D
 * blocks, as float32, with NaN propagating, or skipping and counting NaN and
 * infinity (the calibrators' "finite amax").
 *
 * The maximum is taken over the float32 bits with the sign cleared, compared
 * as int32: for non-negative floats the bit order is the value order, and
 * every NaN lies above infinity, so a NaN anywhere wins without a branch.
 * The finite variant maps every magnitude >= infinity's bits to 0 and counts
 * it, also without a branch.
 * Parallel reductions give each task its own part of the output, or its own
 * partial result that is combined afterwards; no two threads write one place.
 */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "core/amax.h"
#include "core/convert.h"
#include "platform.h"

/* float32 values staged per step of a run (L1-sized). */
#define STAGE 512

/* ------------------------------------------------------------------------- */
/* Run kernels                                                               */

FP8Q_FORCE_INLINE int32_t magnitude_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return (int32_t)(bits & 0x7FFFFFFFu);
}

/* Largest magnitude of `count` values and `best`. Called with constant
 * counts, the loop vectorises under gcc -O2 (see convert.c). */
FP8Q_FORCE_INLINE int32_t block_max_bits(const float *values, int64_t count,
                                         int32_t best)
{
    int64_t i;
    for (i = 0; i < count; i++) {
        const int32_t magnitude = magnitude_bits(values[i]);
        best = magnitude > best ? magnitude : best;
    }
    return best;
}

#define INFINITY_BITS 0x7F800000

/* block_max_bits over the finite values only; adds the number of NaN and
 * infinite values to *nonfinite. */
FP8Q_FORCE_INLINE int32_t block_max_finite_bits(const float *values,
                                                int64_t count, int32_t best,
                                                int64_t *nonfinite)
{
    int32_t skipped = 0;
    int64_t i;
    for (i = 0; i < count; i++) {
        const int32_t magnitude = magnitude_bits(values[i]);
        const int32_t is_nonfinite = magnitude >= INFINITY_BITS;
        const int32_t kept = is_nonfinite ? 0 : magnitude;
        skipped += is_nonfinite;
        best = kept > best ? kept : best;
    }
    *nonfinite += skipped;
    return best;
}

/* What one reduction run needs: the source dtype, and whether NaN and
 * infinity are skipped (counted in n_nonfinite) or propagate. */
typedef struct amax_context {
    fp8q_dtype dtype;
    int skip_nonfinite;
    int64_t n_nonfinite;
} amax_context;

static int32_t max_magnitude_bits(amax_context *context, const float *values,
                                  int64_t count, int32_t best)
{
    if (context->skip_nonfinite) {
        for (; count >= STAGE; count -= STAGE, values += STAGE) {
            best = block_max_finite_bits(values, STAGE, best,
                                         &context->n_nonfinite);
        }
        return block_max_finite_bits(values, count, best,
                                     &context->n_nonfinite);
    }
    for (; count >= STAGE; count -= STAGE, values += STAGE) {
        best = block_max_bits(values, STAGE, best);
    }
    for (; count >= 16; count -= 16, values += 16) {
        best = block_max_bits(values, 16, best);
    }
    return block_max_bits(values, count, best);
}

/* Largest magnitude (as bits) of a run of any dtype. */
static int32_t run_amax_bits(amax_context *context, const char *source,
                             int64_t byte_stride, int64_t count)
{
    float values[STAGE];
    int32_t best = 0;
    int64_t done;

    if (context->dtype == FP8Q_FLOAT32 &&
        byte_stride == (int64_t)sizeof(float) &&
        (uintptr_t)source % sizeof(float) == 0) {
        return max_magnitude_bits(context, (const float *)source, count, 0);
    }
    for (done = 0; done < count; done += STAGE) {
        const int64_t step = count - done < STAGE ? count - done : STAGE;
        fp8q_load_float32(context->dtype, source + done * byte_stride,
                          byte_stride, values, step);
        best = max_magnitude_bits(context, values, step, best);
    }
    return best;
}

/* Raises the float32 accumulator at `destination` to `magnitude`. */
static void raise_to(char *destination, int32_t magnitude)
{
    float current;
    memcpy(&current, destination, sizeof current);
    if (magnitude > magnitude_bits(current)) {
        memcpy(destination, &magnitude, sizeof magnitude);
    }
}

/* fp8q_row_fn: operand 0 is the source, operand 1 the float32
 * accumulator: stride 0 for a reduced run, else one per element. `context`
 * is an amax_context. */
static void amax_row(void *context, char *const *pointers,
                     const int64_t *byte_strides, int64_t count)
{
    amax_context *run = (amax_context *)context;
    float values[STAGE];
    int64_t done;
    int64_t i;

    if (byte_strides[1] == 0) {
        raise_to(pointers[1],
                 run_amax_bits(run, pointers[0], byte_strides[0], count));
        return;
    }
    for (done = 0; done < count; done += STAGE) {
        const int64_t step = count - done < STAGE ? count - done : STAGE;
        char *accumulator = pointers[1] + done * byte_strides[1];
        fp8q_load_float32(run->dtype, pointers[0] + done * byte_strides[0],
                          byte_strides[0], values, step);
        for (i = 0; i < step; i++) {
            int32_t magnitude = magnitude_bits(values[i]);
            if (run->skip_nonfinite && magnitude >= INFINITY_BITS) {
                run->n_nonfinite++;
                magnitude = 0;
            }
            raise_to(accumulator + i * byte_strides[1], magnitude);
        }
    }
}

static void zero_row(void *context, char *const *pointers,
                     const int64_t *byte_strides, int64_t count)
{
    const float zero = 0.0f;
    int64_t i;
    (void)context;
    for (i = 0; i < count; i++) {
        memcpy(pointers[0] + i * byte_strides[0], &zero, sizeof zero);
    }
}

/* ------------------------------------------------------------------------- */
/* Checks                                                                    */

static fp8q_status check_output(const fp8q_view *destination,
                                fp8q_error *error)
{
    if (destination->dtype != FP8Q_FLOAT32) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE,
                         "out: amax results are float32, got dtype %s",
                         fp8q_dtype_name(destination->dtype));
    }
    return fp8q_view_check_writable(destination, "out", error);
}

/* ------------------------------------------------------------------------- */
/* Reduction over axes                                                       */

/*
 * The parallel plan: the source is cut along `axis` into n_tasks slices.
 * Along a kept axis each slice owns its outputs. Along a reduced axis each
 * task accumulates into its own zeroed copy of the output (`partials`, one
 * contiguous block of n_outputs per task), combined at the end.
 */
typedef struct amax_job {
    fp8q_view source;      /* the input */
    fp8q_view accumulator; /* the output, broadcast (stride 0) to source */
    int axis;
    int64_t n_tasks;
    float *partials;
    int64_t n_outputs;
    int skip_nonfinite;
    volatile int64_t n_nonfinite; /* summed atomically by the tasks */
} amax_job;

static void amax_task(void *context, int64_t task_index)
{
    amax_job *job = (amax_job *)context;
    const int64_t extent = job->source.shape[job->axis];
    const int64_t first = extent * task_index / job->n_tasks;
    const int64_t end = extent * (task_index + 1) / job->n_tasks;
    fp8q_view accumulator = job->accumulator;
    fp8q_view source;
    const fp8q_view *operands[2];
    amax_context run;

    run.dtype = job->source.dtype;
    run.skip_nonfinite = job->skip_nonfinite;
    run.n_nonfinite = 0;
    if (job->partials != NULL) {
        accumulator.data = job->partials + task_index * job->n_outputs;
    }
    fp8q_view_slice(&job->source, job->axis, first, end, &source);
    fp8q_view_slice(&accumulator, job->axis, first, end, &accumulator);
    operands[0] = &source;
    operands[1] = &accumulator;
    fp8q_for_each_row(2, operands, amax_row, &run, 0, NULL);
    if (run.n_nonfinite != 0) {
        fp8q_atomic_fetch_add_i64(&job->n_nonfinite, run.n_nonfinite);
    }
}

/* Picks the axis to cut and how many slices; returns 0 to run serially. */
static int plan_split(amax_job *job, int threads, const fp8q_view *destination)
{
    int kept_axis = -1;
    int reduced_axis = -1;
    int axis;

    for (axis = 0; axis < job->source.ndim; axis++) {
        const int64_t extent = job->source.shape[axis];
        if (extent < 2) {
            continue;
        }
        if (job->accumulator.strides[axis] == 0) {
            if (reduced_axis < 0 || extent > job->source.shape[reduced_axis]) {
                reduced_axis = axis;
            }
        }
        else if (kept_axis < 0 || extent > job->source.shape[kept_axis]) {
            kept_axis = axis;
        }
    }
    job->partials = NULL;
    if (kept_axis >= 0 && (reduced_axis < 0 ||
                           job->source.shape[kept_axis] >= threads)) {
        const int64_t extent = job->source.shape[kept_axis];
        job->axis = kept_axis;
        job->n_tasks = extent < threads * 4 ? extent : (int64_t)threads * 4;
        return 1;
    }
    if (reduced_axis < 0) {
        return 0;
    }
    job->axis = reduced_axis;
    job->n_tasks = job->source.shape[reduced_axis] < threads
                       ? job->source.shape[reduced_axis]
                       : threads;
    job->n_outputs = fp8q_view_size(destination);
    job->partials = (float *)fp8q_aligned_alloc(
        (size_t)(job->n_tasks * job->n_outputs) * sizeof(float));
    if (job->partials == NULL) {
        return 0; /* no memory for partials: reduce on this thread */
    }
    memset(job->partials, 0,
           (size_t)(job->n_tasks * job->n_outputs) * sizeof(float));
    /* Each task's partial output: C-contiguous over the kept axes. */
    {
        int64_t stride = 1;
        for (axis = job->source.ndim - 1; axis >= 0; axis--) {
            if (job->accumulator.strides[axis] != 0) {
                job->accumulator.strides[axis] = stride;
                stride *= job->source.shape[axis];
            }
        }
    }
    return 1;
}

/* Folds every task's partial output into the destination. */
static void combine_partials(const amax_job *job,
                             const fp8q_view *destination)
{
    fp8q_view partial;
    const fp8q_view *operands[2];
    amax_context run;
    int64_t task;

    run.dtype = FP8Q_FLOAT32;
    run.skip_nonfinite = 0; /* partials hold finite values or NaN only */
    run.n_nonfinite = 0;
    fp8q_view_init_contiguous(&partial, NULL, FP8Q_FLOAT32,
                              destination->ndim, destination->shape, NULL);
    operands[0] = &partial;
    operands[1] = destination;
    for (task = 0; task < job->n_tasks; task++) {
        partial.data = job->partials + task * job->n_outputs;
        fp8q_for_each_row(2, operands, amax_row, &run, 0, NULL);
    }
}

/* Reduces a checked, non-empty source into its zeroed destination. */
static fp8q_status reduce_views(const fp8q_view *source,
                                const fp8q_view *destination,
                                int skip_nonfinite, int64_t *n_nonfinite,
                                fp8q_error *error)
{
    amax_job job;
    const fp8q_view *operands[2];
    amax_context run;
    int threads;
    int axis;
    fp8q_status status;

    job.source = *source;
    job.accumulator = *destination;
    job.skip_nonfinite = skip_nonfinite;
    job.n_nonfinite = 0;
    for (axis = 0; axis < source->ndim; axis++) {
        job.accumulator.shape[axis] = source->shape[axis];
        if (destination->shape[axis] != source->shape[axis]) {
            job.accumulator.strides[axis] = 0;
        }
    }

    threads = fp8q_threads_for(fp8q_view_size(source));
    if (threads > 1 && plan_split(&job, threads, destination)) {
        fp8q_parallel_for(job.n_tasks, threads, amax_task, &job);
        if (job.partials != NULL) {
            combine_partials(&job, destination);
            fp8q_aligned_free(job.partials);
        }
        *n_nonfinite = fp8q_atomic_load_i64(&job.n_nonfinite);
        return FP8Q_OK;
    }
    operands[0] = &job.source;
    operands[1] = &job.accumulator;
    run.dtype = source->dtype;
    run.skip_nonfinite = skip_nonfinite;
    run.n_nonfinite = 0;
    status = fp8q_for_each_row(2, operands, amax_row, &run, 0, error);
    *n_nonfinite = run.n_nonfinite;
    return status;
}

/* fp8q_row_fn: copies float32 operand 0 to operand 1. */
static void copy_row(void *context, char *const *pointers,
                     const int64_t *byte_strides, int64_t count)
{
    int64_t i;
    (void)context;
    for (i = 0; i < count; i++) {
        memcpy(pointers[1] + i * byte_strides[1],
               pointers[0] + i * byte_strides[0], sizeof(float));
    }
}

/*
 * Repeated values change no maximum: every axis along which the source does
 * not move (stride 0, extent > 1) is read once. A reduced one is dropped; a
 * kept one is reduced at index 0 and that result copied along the axis. The
 * number of non-finite values skipped is scaled back by the repeats, so
 * results and counts equal those of the full walk, at the cost of the
 * distinct elements (a 2**40-element broadcast of one value takes one read).
 */
static fp8q_status reduce_without_repeats(const fp8q_view *source,
                                          const fp8q_view *destination,
                                          int skip_nonfinite,
                                          int64_t *n_nonfinite,
                                          fp8q_error *error)
{
    fp8q_view distinct_source = *source;
    fp8q_view first_results = *destination;
    fp8q_view spread;
    const fp8q_view *operands[2];
    int64_t repeats = 1;
    int kept_repeats = 0;
    int axis;
    fp8q_status status;

    for (axis = 0; axis < source->ndim; axis++) {
        if (source->strides[axis] != 0 || source->shape[axis] < 2) {
            continue;
        }
        repeats *= source->shape[axis];
        distinct_source.shape[axis] = 1;
        if (destination->shape[axis] != 1) {
            first_results.shape[axis] = 1;
            kept_repeats = 1;
        }
    }
    status = reduce_views(&distinct_source, &first_results, skip_nonfinite,
                          n_nonfinite, error);
    if (status != FP8Q_OK) {
        return status;
    }
    *n_nonfinite *= repeats;
    if (!kept_repeats) {
        return FP8Q_OK;
    }
    /* Each element reads the one at index 0 of its repeated axes (itself
     * there), so the serial walk may write in place. */
    spread = first_results;
    for (axis = 0; axis < destination->ndim; axis++) {
        if (first_results.shape[axis] != destination->shape[axis]) {
            spread.shape[axis] = destination->shape[axis];
            spread.strides[axis] = 0;
        }
    }
    operands[0] = &spread;
    operands[1] = destination;
    return fp8q_for_each_row(2, operands, copy_row, NULL, 0, error);
}

static fp8q_status reduce_amax(const fp8q_view *source,
                               const fp8q_view *destination,
                               int skip_nonfinite, int64_t *n_nonfinite,
                               fp8q_error *error)
{
    const fp8q_view *operands[1];
    int axis;
    fp8q_status status;

    status = check_output(destination, error);
    if (status != FP8Q_OK) {
        return status;
    }
    if (destination->ndim != source->ndim) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "out: expected %d dimensions (the input's, with "
                         "extent 1 on reduced axes), got %d",
                         source->ndim, destination->ndim);
    }
    for (axis = 0; axis < source->ndim; axis++) {
        if (destination->shape[axis] != source->shape[axis] &&
            destination->shape[axis] != 1) {
            char expected[256];
            char received[256];
            fp8q_format_shape(expected, sizeof expected, source->ndim,
                              source->shape);
            fp8q_format_shape(received, sizeof received, destination->ndim,
                              destination->shape);
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "out: shape %s does not fit the reduction of "
                             "shape %s: axis %d has extent %" PRId64
                             ", expected %" PRId64 " or 1",
                             received, expected, axis,
                             destination->shape[axis], source->shape[axis]);
        }
    }

    /* Empty groups keep this 0. */
    operands[0] = destination;
    status = fp8q_for_each_row(1, operands, zero_row, NULL, 1, error);
    if (status != FP8Q_OK || fp8q_view_size(source) == 0) {
        return status;
    }
    return reduce_without_repeats(source, destination, skip_nonfinite,
                                  n_nonfinite, error);
}

fp8q_status fp8q_amax(const fp8q_view *source, const fp8q_view *destination,
                      fp8q_error *error)
{
    int64_t n_nonfinite;
    return reduce_amax(source, destination, 0, &n_nonfinite, error);
}

fp8q_status fp8q_amax_all(const fp8q_view *source, float *amax,
                          fp8q_error *error)
{
    fp8q_view destination = *source;
    int axis;

    destination.dtype = FP8Q_FLOAT32;
    destination.data = amax;
    for (axis = 0; axis < source->ndim; axis++) {
        destination.shape[axis] = 1;
        destination.strides[axis] = 0;
    }
    return fp8q_amax(source, &destination, error);
}

fp8q_status fp8q_amax_finite(const fp8q_view *source,
                             const fp8q_view *destination,
                             int64_t *n_nonfinite, fp8q_error *error)
{
    *n_nonfinite = 0;
    return reduce_amax(source, destination, 1, n_nonfinite, error);
}

/* ------------------------------------------------------------------------- */
/* Block reduction                                                           */

/* Work units are blocks, numbered row-major; each writes its own output. */
typedef struct block_amax_job {
    const fp8q_view *source;
    const fp8q_view *destination;
    int64_t block_rows;
    int64_t block_cols;
    int64_t blocks_per_row;
} block_amax_job;

/* fp8q_units_fn: reduces blocks [first, end). */
static void block_amax_units(void *context, int64_t first, int64_t end)
{
    const block_amax_job *job = (const block_amax_job *)context;
    const fp8q_view *source = job->source;
    const int64_t itemsize = (int64_t)fp8q_dtype_itemsize(source->dtype);
    const int64_t col_byte_stride = source->strides[1] * itemsize;
    int64_t unit;

    for (unit = first; unit < end; unit++) {
        const int64_t block_row = unit / job->blocks_per_row;
        const int64_t block_col = unit % job->blocks_per_row;
        const int64_t row_begin = block_row * job->block_rows;
        const int64_t col = block_col * job->block_cols;
        const int64_t rows_left = source->shape[0] - row_begin;
        const int64_t cols_left = source->shape[1] - col;
        const int64_t n_rows =
            rows_left < job->block_rows ? rows_left : job->block_rows;
        const int64_t n_cols =
            cols_left < job->block_cols ? cols_left : job->block_cols;
        amax_context context;
        int32_t best = 0;
        int64_t row;
        float result;

        context.dtype = source->dtype;
        context.skip_nonfinite = 0;
        context.n_nonfinite = 0;
        for (row = row_begin; row < row_begin + n_rows; row++) {
            const char *run = fp8q_view_element_2d(source, row, col);
            const int32_t run_best =
                run_amax_bits(&context, run, col_byte_stride, n_cols);
            best = run_best > best ? run_best : best;
        }
        memcpy(&result, &best, sizeof result);
        memcpy(fp8q_view_element_2d(job->destination, block_row, block_col),
               &result, sizeof result);
    }
}

fp8q_status fp8q_block_amax(const fp8q_view *source, int64_t block_rows,
                            int64_t block_cols, const fp8q_view *destination,
                            fp8q_error *error)
{
    block_amax_job job;
    fp8q_status status;

    status = fp8q_view_check_block_grid(source, block_rows, block_cols,
                                        destination, "out", error);
    if (status != FP8Q_OK) {
        return status;
    }
    status = check_output(destination, error);
    if (status != FP8Q_OK) {
        return status;
    }
    if (fp8q_view_size(source) == 0) {
        return FP8Q_OK;
    }

    job.source = source;
    job.destination = destination;
    job.block_rows = block_rows;
    job.block_cols = block_cols;
    job.blocks_per_row = destination->shape[1];
    fp8q_for_each_unit_range(destination->shape[0] * job.blocks_per_row,
                             fp8q_view_size(source), block_amax_units, &job);
    return FP8Q_OK;
}
