/*
 * histogram_calibrator.c - the histogram calibrator's state below the
 * binding (calibrator.h): a histogram of |x| on a power-of-two grid
 * (histogram.h), its table of ops for the calibrator base (a batch counted
 * into a histogram of its own, then merged exactly), its settings, the
 * amax searches (histogram_threshold.h) and a loaded state's check.
 */
#include <math.h>
#include <string.h>

#include "core/calibrator.h"
#include "core/histogram_threshold.h"
#include "platform.h"

/* A zeroed histogram of n_bins over new counts. */
static fp8q_status new_histogram(fp8q_histogram *histogram, int64_t n_bins,
                                 fp8q_error *error)
{
    int64_t *counts =
        (int64_t *)fp8q_aligned_alloc((size_t)n_bins * sizeof(int64_t));

    if (counts == NULL) {
        return fp8q_fail(error, FP8Q_ERROR_MEMORY,
                         "out of memory for %lld histogram bins",
                         (long long)n_bins);
    }
    fp8q_histogram_init(histogram, n_bins, counts);
    return FP8Q_OK;
}

fp8q_status fp8q_histogram_calibrator_setup(fp8q_histogram_calibrator *self,
                                            int64_t bins, int skip_zeros,
                                            fp8q_error *error)
{
    fp8q_histogram histogram;
    fp8q_status status;

    if (bins < 1 || bins > FP8Q_HISTOGRAM_MAX_BINS) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "bins: expected 1 to %lld, got %lld",
                         (long long)FP8Q_HISTOGRAM_MAX_BINS, (long long)bins);
    }
    status = new_histogram(&histogram, bins, error);
    if (status == FP8Q_OK) {
        fp8q_aligned_free(self->histogram.counts);
        self->histogram = histogram;
        self->skip_zeros = skip_zeros;
        self->base.channel_axis = FP8Q_CALIB_PER_TENSOR;
        self->base.nonfinite_count = 0;
        self->base.settings_version++;
    }
    return status;
}

/* The counts (the state itself is the caller's). */
static void histogram_free(void *state)
{
    fp8q_aligned_free(((fp8q_histogram_calibrator *)state)->histogram.counts);
}

/* An empty CUDA x adds nothing (an empty CPU x is counted: nothing); the
 * settings recorded for histogram_count. */
static fp8q_status histogram_admit(const void *state, fp8q_calib_batch *batch,
                                   int *counted, fp8q_error *error)
{
    const fp8q_histogram_calibrator *self =
        (const fp8q_histogram_calibrator *)state;

    (void)error;
    *counted = !batch->on_device || fp8q_view_size(batch->x) != 0;
    batch->room.counted.n_bins = self->histogram.n_bins;
    batch->room.counted.skip_zeros = self->skip_zeros;
    batch->room.counted.counts_address = (uintptr_t)self->histogram.counts;
    return FP8Q_OK;
}

/* The batch counted into a histogram of its own (batch->partial), whose
 * counts start half a page away from self's (mod 4096), so that the loop
 * that merges them into self's never loads from an address whose low 12
 * bits match a store in flight (4K aliasing). */
static fp8q_status histogram_count(fp8q_calib_batch *batch, fp8q_error *error)
{
    const int64_t n_bins = batch->room.counted.n_bins;
    fp8q_histogram *counted = &batch->room.counted.histogram;
    char *block = (char *)fp8q_aligned_alloc((size_t)n_bins *
                                                 sizeof(int64_t) +
                                             4096u);

    batch->room.counted.block = block;
    batch->partial = block != NULL ? counted : NULL;
    if (block == NULL) {
        return fp8q_fail(error, FP8Q_ERROR_MEMORY,
                         "out of memory for %lld histogram bins",
                         (long long)n_bins);
    }
    fp8q_histogram_init(
        counted, n_bins,
        (int64_t *)(void *)(block +
                            ((batch->room.counted.counts_address + 2048u -
                              (uintptr_t)block) &
                             (4095u & ~(uintptr_t)63u))));
    return fp8q_histogram_add(counted, batch->x,
                              batch->room.counted.skip_zeros,
                              batch->skip_nonfinite, &batch->n_nonfinite,
                              error);
}

static fp8q_status histogram_absorb(void *state, const fp8q_calib_batch *batch,
                                    fp8q_error *error)
{
    return fp8q_histogram_merge(
        &((fp8q_histogram_calibrator *)state)->histogram,
        (const fp8q_histogram *)batch->partial, error);
}

static void histogram_release(fp8q_calib_batch *batch)
{
    if (batch->partial != NULL) {
        fp8q_aligned_free(batch->room.counted.block);
        batch->partial = NULL;
    }
}

/* The counts added on the wider grid; FP8Q_ERROR_VALUE, nothing changed,
 * when skip_zeros differs. */
static fp8q_status histogram_merge(void *state, const void *other,
                                   fp8q_error *error)
{
    fp8q_histogram_calibrator *self = (fp8q_histogram_calibrator *)state;
    const fp8q_histogram_calibrator *theirs =
        (const fp8q_histogram_calibrator *)other;

    if (theirs->skip_zeros != self->skip_zeros) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "other: calibrators differ in skip_zeros and "
                         "cannot be merged");
    }
    return fp8q_histogram_merge(&self->histogram, &theirs->histogram, error);
}

/* No counts, no range. */
static void histogram_reset(void *state)
{
    fp8q_histogram *histogram =
        &((fp8q_histogram_calibrator *)state)->histogram;
    fp8q_histogram_init(histogram, histogram->n_bins, histogram->counts);
}

/* The largest |x| counted. */
static int64_t histogram_amax(const void *state, float *amax)
{
    const fp8q_histogram *histogram =
        &((const fp8q_histogram_calibrator *)state)->histogram;

    if (fp8q_histogram_total(histogram) == 0) {
        return 0;
    }
    if (amax != NULL) {
        *amax = histogram->amax;
    }
    return 1;
}

const fp8q_calib_kind fp8q_histogram_calibrator_ops = {
    histogram_admit, histogram_count, histogram_absorb, histogram_release,
    histogram_merge, histogram_reset, histogram_amax,   histogram_free,
};

fp8q_status fp8q_calib_method_parse(const char *name,
                                    fp8q_calib_method *method,
                                    fp8q_error *error)
{
    static const char *const names[] = {"max", "percentile", "entropy",
                                        "mse"};
    int index;

    for (index = 0; index < 4; index++) {
        if (strcmp(name, names[index]) == 0) {
            *method = (fp8q_calib_method)index;
            return FP8Q_OK;
        }
    }
    return fp8q_fail(error, FP8Q_ERROR_VALUE,
                     "method: expected \"max\", \"percentile\", \"entropy\" "
                     "or \"mse\", got \"%s\"",
                     name);
}

fp8q_status fp8q_histogram_calibrator_snapshot(
    const fp8q_histogram_calibrator *self, fp8q_histogram *snapshot,
    fp8q_error *error)
{
    const fp8q_histogram *source = &self->histogram;
    fp8q_status status;

    if (fp8q_histogram_total(source) == 0) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "HistogramCalibrator.compute_amax: no values "
                         "counted yet; call update() with data first");
    }
    status = new_histogram(snapshot, source->n_bins, error);
    if (status == FP8Q_OK) {
        memcpy(snapshot->counts, source->counts,
               (size_t)source->n_bins * sizeof(int64_t));
        snapshot->bin_exponent = source->bin_exponent;
        snapshot->amax = source->amax;
    }
    return status;
}

fp8q_status fp8q_calib_threshold(const fp8q_histogram *histogram,
                                 fp8q_calib_method method, double percentile,
                                 fp8q_dtype target, float *amax,
                                 fp8q_error *error)
{
    switch (method) {
    case FP8Q_CALIB_PERCENTILE:
        return fp8q_threshold_percentile(histogram, percentile, amax, error);
    case FP8Q_CALIB_ENTROPY:
        return fp8q_threshold_entropy(histogram, target, amax, error);
    case FP8Q_CALIB_MSE:
        return fp8q_threshold_mse(histogram, target, amax, error);
    case FP8Q_CALIB_MAX:
        break;
    }
    *amax = histogram->amax;
    return FP8Q_OK;
}

int fp8q_histogram_width_exponent(double bin_width, int *exponent)
{
    if (bin_width == 0.0) {
        *exponent = FP8Q_HISTOGRAM_NO_RANGE;
        return 1;
    }
    if (!(bin_width > 0.0 && bin_width <= 1e300) ||
        frexp(bin_width, exponent) != 0.5) {
        return 0;
    }
    *exponent -= 1;
    return 1;
}

fp8q_status fp8q_histogram_calibrator_load(fp8q_histogram_calibrator *self,
                                           const int64_t *counts,
                                           int64_t n_bins, int bin_exponent,
                                           float amax, fp8q_error *error)
{
    fp8q_histogram loaded;
    fp8q_status status;

    if (n_bins != self->histogram.n_bins) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "state: counts has %lld bins, this calibrator %lld",
                         (long long)n_bins,
                         (long long)self->histogram.n_bins);
    }
    loaded.n_bins = n_bins;
    loaded.counts = (int64_t *)(uintptr_t)counts;
    loaded.bin_exponent = bin_exponent;
    loaded.amax = amax;
    status = fp8q_histogram_check(&loaded, error);
    if (status != FP8Q_OK) {
        char message[FP8Q_ERROR_MESSAGE_SIZE];
        memcpy(message, error->message, sizeof message);
        return fp8q_fail(error, status, "state: %s", message);
    }
    memcpy(self->histogram.counts, counts, (size_t)n_bins * sizeof(int64_t));
    self->histogram.bin_exponent = bin_exponent;
    self->histogram.amax = amax;
    return FP8Q_OK;
}
