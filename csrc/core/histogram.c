/*
 * histogram.c - |x| histograms on a power-of-two grid (see histogram.h).
 *
 * The bin rule (floor(|x| * 2^-bin_exponent) in double, the covering
 * exponent, widening by 2^shift as bin >> shift) is core/histogram_bins.h,
 * shared with the GPU's kernels/calibrate.cu. Large inputs are split into slices, each counted by
 * one thread into its own partial histogram; the partials are summed after.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "core/amax.h"
#include "core/convert.h"
#include "core/histogram.h"
#include "platform.h"

/* float32 values staged per step of a run (L1-sized). */
#define STAGE 512

/* ------------------------------------------------------------------------- */
/* Grid                                                                      */

void fp8q_histogram_init(fp8q_histogram *histogram, int64_t n_bins,
                         int64_t *counts)
{
    histogram->n_bins = n_bins;
    histogram->counts = counts;
    histogram->bin_exponent = FP8Q_HISTOGRAM_NO_RANGE;
    histogram->amax = 0.0f;
    memset(counts, 0, (size_t)n_bins * sizeof *counts);
}

double fp8q_histogram_bin_width(const fp8q_histogram *histogram)
{
    if (histogram->bin_exponent == FP8Q_HISTOGRAM_NO_RANGE) {
        return 0.0;
    }
    return ldexp(1.0, histogram->bin_exponent);
}

int64_t fp8q_histogram_total(const fp8q_histogram *histogram)
{
    int64_t total = 0;
    int64_t bin;
    for (bin = 0; bin < histogram->n_bins; bin++) {
        total += histogram->counts[bin];
    }
    return total;
}

/* Folds the counts onto the grid of width 2^exponent (>= the current). */
static void widen_to(fp8q_histogram *histogram, int exponent)
{
    int64_t bin;
    int shift;

    if (histogram->bin_exponent == FP8Q_HISTOGRAM_NO_RANGE) {
        histogram->bin_exponent = exponent; /* only bin 0 (zeros) counts */
        return;
    }
    shift = exponent - histogram->bin_exponent;
    if (shift <= 0) {
        return;
    }
    /* In place, ascending: bin >> shift <= bin, and never a bin not yet
     * visited, except bin itself. */
    for (bin = 1; bin < histogram->n_bins; bin++) {
        const int64_t target = fp8q_histogram_widened_bin(bin, shift);
        const int64_t count = histogram->counts[bin];
        histogram->counts[bin] = 0;
        histogram->counts[target] += count;
    }
    histogram->bin_exponent = exponent;
}

static int is_finite(float value)
{
    return value - value == 0.0f;
}

fp8q_status fp8q_histogram_cover(fp8q_histogram *histogram, float value,
                                 fp8q_error *error)
{
    if (!is_finite(value) || value < 0.0f) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "amax: expected a finite value >= 0, got %s",
                         fp8q_number((double)value).text);
    }
    widen_to(histogram,
             fp8q_histogram_covered_exponent(histogram->n_bins,
                                             histogram->bin_exponent, value));
    return FP8Q_OK;
}

/* ------------------------------------------------------------------------- */
/* Counting                                                                  */

typedef struct count_context {
    fp8q_dtype dtype;
    double inverse_width; /* 2^-bin_exponent */
    int skip_zeros;
    int64_t discard_bin;  /* n_bins: the slot for values not counted */
    int64_t *counts;      /* n_bins + 1 partial counts */
} count_context;

/* Counts one staged block by fp8q_histogram_bin (histogram_bins.h). Values
 * not counted (non-finite, zero with skip_zeros, or beyond the grid: a race
 * in the caller's code must not write outside the counts) go to the discard
 * slot, so the loop has no branch. */
static void count_values(const count_context *context, const float *values,
                         int64_t count)
{
    int64_t *counts = context->counts;
    int64_t i;
    for (i = 0; i < count; i++) {
        counts[fp8q_histogram_bin(values[i], context->inverse_width,
                                  context->discard_bin,
                                  context->skip_zeros)]++;
    }
}

/* fp8q_row_fn over the source alone. */
static void count_row(void *context, char *const *pointers,
                      const int64_t *byte_strides, int64_t count)
{
    const count_context *counting = (const count_context *)context;
    float values[STAGE];
    int64_t done;

    if (counting->dtype == FP8Q_FLOAT32 &&
        byte_strides[0] == (int64_t)sizeof(float) &&
        (uintptr_t)pointers[0] % sizeof(float) == 0) {
        count_values(counting, (const float *)pointers[0], count);
        return;
    }
    for (done = 0; done < count; done += STAGE) {
        const int64_t step = count - done < STAGE ? count - done : STAGE;
        fp8q_load_float32(counting->dtype,
                          pointers[0] + done * byte_strides[0],
                          byte_strides[0], values, step);
        count_values(counting, values, step);
    }
}

/* The source cut along `axis` into n_tasks slices, each counted into its own
 * block of partial counts. */
typedef struct count_job {
    const fp8q_view *source;
    int axis;
    int64_t n_tasks;
    count_context context; /* counts: n_tasks blocks of n_bins + 1 */
} count_job;

static void count_task(void *context, int64_t task_index)
{
    const count_job *job = (const count_job *)context;
    const int64_t extent = job->source->shape[job->axis];
    const int64_t slots = job->context.discard_bin + 1;
    count_context counting = job->context;
    fp8q_view slice;
    const fp8q_view *operands[1];

    counting.counts = job->context.counts + task_index * slots;
    fp8q_view_slice(job->source, job->axis,
                    extent * task_index / job->n_tasks,
                    extent * (task_index + 1) / job->n_tasks, &slice);
    operands[0] = &slice;
    fp8q_for_each_row(1, operands, count_row, &counting, 0, NULL);
}

/* Counts `source` into the histogram's current grid. */
static fp8q_status count_into(fp8q_histogram *histogram,
                              const fp8q_view *source, int skip_zeros,
                              fp8q_error *error)
{
    const int64_t size = fp8q_view_size(source);
    const int64_t slots = histogram->n_bins + 1;
    count_job job;
    int64_t task;
    int64_t bin;
    int threads;
    char *block;

    job.source = source;
    job.axis = fp8q_view_longest_axis(source);
    threads = fp8q_threads_for(size);
    job.n_tasks = 1;
    if (job.axis >= 0 && threads > 1) {
        const int64_t extent = source->shape[job.axis];
        job.n_tasks = extent < threads ? extent : threads;
    }
    job.context.dtype = source->dtype;
    job.context.inverse_width = ldexp(1.0, -histogram->bin_exponent);
    job.context.skip_zeros = skip_zeros;
    job.context.discard_bin = histogram->n_bins;
    /* 4 KiB more, to start the partial counts half a page away from the
     * histogram's (mod 4096): the loop that adds them into the histogram
     * then never loads from an address whose low 12 bits match a store
     * still in flight (4K aliasing, which halved its speed). */
    block = (char *)fp8q_aligned_alloc(
        (size_t)(job.n_tasks * slots) * sizeof(int64_t) + 4096u);
    job.context.counts =
        block == NULL
            ? NULL
            : (int64_t *)(void *)(block +
                                  (((uintptr_t)histogram->counts + 2048u -
                                    (uintptr_t)block) &
                                   (4095u & ~(uintptr_t)63u)));
    if (job.context.counts == NULL) {
        return fp8q_fail(error, FP8Q_ERROR_MEMORY,
                         "no memory for %" PRId64 " partial histograms of %"
                         PRId64 " bins",
                         job.n_tasks, histogram->n_bins);
    }
    memset(job.context.counts, 0,
           (size_t)(job.n_tasks * slots) * sizeof(int64_t));

    if (job.axis < 0) { /* 0-d: one element */
        const fp8q_view *operands[1];
        operands[0] = source;
        fp8q_for_each_row(1, operands, count_row, &job.context, 0, NULL);
    }
    else {
        fp8q_parallel_for(job.n_tasks, threads, count_task, &job);
    }
    for (task = 0; task < job.n_tasks; task++) {
        const int64_t *partial = job.context.counts + task * slots;
        for (bin = 0; bin < histogram->n_bins; bin++) {
            histogram->counts[bin] += partial[bin];
        }
    }
    fp8q_aligned_free(block);
    return FP8Q_OK;
}

fp8q_status fp8q_histogram_add(fp8q_histogram *histogram,
                               const fp8q_view *source, int skip_zeros,
                               int skip_nonfinite, int64_t *n_nonfinite,
                               fp8q_error *error)
{
    fp8q_view batch_amax_view;
    float batch_amax = 0.0f;
    fp8q_status status;
    int axis;

    *n_nonfinite = 0;
    if (fp8q_view_size(source) == 0) {
        return FP8Q_OK;
    }
    /* Pass 1: the finite amax, as a keepdims reduction over every axis. */
    batch_amax_view.data = &batch_amax;
    batch_amax_view.dtype = FP8Q_FLOAT32;
    batch_amax_view.ndim = source->ndim;
    for (axis = 0; axis < source->ndim; axis++) {
        batch_amax_view.shape[axis] = 1;
        batch_amax_view.strides[axis] = 0;
    }
    status = fp8q_amax_finite(source, &batch_amax_view, n_nonfinite, error);
    if (status != FP8Q_OK) {
        return status;
    }
    if (*n_nonfinite != 0 && !skip_nonfinite) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "x: %" PRId64 " of its %" PRId64 " values are NaN "
                         "or infinite (pass skip_nonfinite=True to skip and "
                         "count them)",
                         *n_nonfinite, fp8q_view_size(source));
    }

    /* Pass 2: widen the grid for the new amax, then count. */
    status = fp8q_histogram_cover(histogram, batch_amax, error);
    if (status != FP8Q_OK) {
        return status;
    }
    if (histogram->bin_exponent == FP8Q_HISTOGRAM_NO_RANGE) {
        /* Only zeros so far: they belong to bin 0 on any grid. */
        if (!skip_zeros) {
            histogram->counts[0] += fp8q_view_size(source) - *n_nonfinite;
        }
        return FP8Q_OK;
    }
    status = count_into(histogram, source, skip_zeros, error);
    if (status == FP8Q_OK && batch_amax > histogram->amax) {
        histogram->amax = batch_amax;
    }
    return status;
}

/* ------------------------------------------------------------------------- */
/* Merge and checks                                                          */

fp8q_status fp8q_histogram_merge(fp8q_histogram *histogram,
                                 const fp8q_histogram *other,
                                 fp8q_error *error)
{
    int64_t bin;
    int shift;

    if (other->n_bins != histogram->n_bins) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "other: cannot merge a histogram of %" PRId64
                         " bins into one of %" PRId64 " bins",
                         other->n_bins, histogram->n_bins);
    }
    /* Each total fits an int64 (fp8q_histogram_check), so every bin of
     * the sum does when the sum of the totals does. */
    if (fp8q_histogram_total(other) >
        INT64_MAX - fp8q_histogram_total(histogram)) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "other: the merged histogram would count more "
                         "than 2**63 - 1 values");
    }
    if (other->bin_exponent != FP8Q_HISTOGRAM_NO_RANGE &&
        (histogram->bin_exponent == FP8Q_HISTOGRAM_NO_RANGE ||
         other->bin_exponent > histogram->bin_exponent)) {
        widen_to(histogram, other->bin_exponent);
    }
    shift = other->bin_exponent == FP8Q_HISTOGRAM_NO_RANGE
                ? 0
                : histogram->bin_exponent - other->bin_exponent;
    for (bin = 0; bin < other->n_bins; bin++) {
        histogram->counts[fp8q_histogram_widened_bin(bin, shift)] +=
            other->counts[bin];
    }
    if (other->amax > histogram->amax) {
        histogram->amax = other->amax;
    }
    return FP8Q_OK;
}

fp8q_status fp8q_histogram_check(const fp8q_histogram *histogram,
                                 fp8q_error *error)
{
    const float amax = histogram->amax;
    int64_t last_allowed;
    int64_t bin, total;

    if (histogram->n_bins < 1 || histogram->n_bins > FP8Q_HISTOGRAM_MAX_BINS) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "counts: expected 1 to %" PRId64 " bins, got %" PRId64,
                         FP8Q_HISTOGRAM_MAX_BINS, histogram->n_bins);
    }
    for (bin = 0, total = 0; bin < histogram->n_bins; bin++) {
        if (histogram->counts[bin] < 0) {
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "counts: bin %" PRId64 " is negative (%" PRId64
                             ")",
                             bin, histogram->counts[bin]);
        }
        if (histogram->counts[bin] > INT64_MAX - total) {
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "counts: their total passes 2**63 - 1 at bin "
                             "%" PRId64,
                             bin);
        }
        total += histogram->counts[bin];
    }
    if (!is_finite(amax) || amax < 0.0f) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "amax: expected a finite value >= 0, got %s",
                         fp8q_number((double)amax).text);
    }
    if (histogram->bin_exponent == FP8Q_HISTOGRAM_NO_RANGE) {
        if (amax != 0.0f) {
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "bin_width: 0 (no range yet) but amax is %s",
                             fp8q_number((double)amax).text);
        }
        last_allowed = 0;
    }
    else {
        if (histogram->bin_exponent < FP8Q_HISTOGRAM_MIN_EXPONENT ||
            histogram->bin_exponent > FP8Q_HISTOGRAM_MAX_EXPONENT) {
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "bin_width: expected 2^e with e in [%d, %d], "
                             "got 2^%d",
                             FP8Q_HISTOGRAM_MIN_EXPONENT,
                             FP8Q_HISTOGRAM_MAX_EXPONENT,
                             histogram->bin_exponent);
        }
        if ((double)amax >=
            ldexp((double)histogram->n_bins, histogram->bin_exponent)) {
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "amax %s lies beyond the last bin (%" PRId64
                             " bins of width %s)",
                             fp8q_number((double)amax).text,
                             histogram->n_bins,
                             fp8q_number(fp8q_histogram_bin_width(histogram))
                                 .text);
        }
        last_allowed = (int64_t)ldexp((double)amax, -histogram->bin_exponent);
    }
    for (bin = last_allowed + 1; bin < histogram->n_bins; bin++) {
        if (histogram->counts[bin] != 0) {
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "counts: bin %" PRId64 " counts values above "
                             "amax %s (its bin is %" PRId64 ")",
                             bin, fp8q_number((double)amax).text,
                             last_allowed);
        }
    }
    if (amax > 0.0f && histogram->counts[last_allowed] == 0) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "counts: amax %s was counted in bin %" PRId64
                         ", which is empty",
                         fp8q_number((double)amax).text, last_allowed);
    }
    return FP8Q_OK;
}
