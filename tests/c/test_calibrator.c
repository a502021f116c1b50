/*
 * test_calibrator.c - the calibrator base below the binding
 * (core/calibrator.h): the channel axis of a batch, the max calibrator's
 * settings, count/absorb with NaN/inf refused or counted, channel checks,
 * merge, rows and load, the GPU fold, reset; the histogram calibrator's
 * count/absorb against a one-pass histogram, merge, snapshot, methods and
 * load checks; a batch counted under settings changed before its absorb
 * (counted again). Oracles: hand-computed maxima and fp8q_histogram_add.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/calibrator.h"
#include "core/float_codec.h"
#include "harness.h"
#include "helpers.h"
#include "platform.h"

/* One CPU batch through a calibrator, as the binding runs it. */
static fp8q_status update(const fp8q_calib_kind *kind, void *state,
                          const fp8q_view *x, int skip_nonfinite,
                          fp8q_error *error)
{
    fp8q_calib_batch batch;
    fp8q_status status;
    int counted = 0;

    status = fp8q_calibrator_batch((const fp8q_calibrator *)state, x, 0,
                                   skip_nonfinite, &batch, error);
    if (status == FP8Q_OK) {
        status = kind->admit(state, &batch, &counted, error);
    }
    if (status != FP8Q_OK || !counted) {
        return status;
    }
    status = kind->count(&batch, error);
    if (status != FP8Q_OK) {
        kind->release(&batch);
        return status;
    }
    return fp8q_calibrator_absorb(kind, state, &batch, error);
}

void test_calibrator_max(void)
{
    const fp8q_calib_kind *kind = &fp8q_max_calibrator_ops;
    float values[2 * 3] = {1.0f, -5.0f, 2.0f, -3.0f, 0.5f, 4.0f};
    /* Column maxima of values, then of the second batch (NaN skipped). */
    const float expected_rows[2 * 3] = {3.0f, 5.0f, 4.0f, 9.0f, 5.0f, 4.0f};
    const int64_t shape[2] = {2, 3};
    const int64_t three_rows[2] = {3, 3};
    fp8q_view x = make_view(values, FP8Q_FLOAT32, 2, shape, NULL);
    fp8q_max_calibrator max, other;
    fp8q_calib_batch batch;
    fp8q_error error;
    float *amax = NULL;
    float *rows = NULL;
    int64_t n_channels, filled;
    int per_channel;

    memset(&max, 0, sizeof max);
    memset(&other, 0, sizeof other);
    /* Settings: the constructor's checks, in order. */
    CHECK_ERROR(fp8q_calib_channel_axis_check(FP8Q_MAX_DIMS, &error), &error,
                FP8Q_ERROR_VALUE, NULL, NULL, NULL);
    {
        char expected[80];
        (void)snprintf(expected, sizeof expected,
                       "channel_axis: expected an axis in [%d, %d], got %d",
                       -FP8Q_MAX_DIMS, FP8Q_MAX_DIMS - 1, FP8Q_MAX_DIMS);
        CHECK(strcmp(error.message, expected) == 0);
    }
    CHECK_ERROR(fp8q_calib_channel_axis_check(-FP8Q_MAX_DIMS - 1, &error),
                &error, FP8Q_ERROR_VALUE, "channel_axis: expected", NULL,
                NULL);
    CHECK_OK(fp8q_calib_channel_axis_check(-FP8Q_MAX_DIMS, &error), &error);
    CHECK_OK(fp8q_calib_channel_axis_check(FP8Q_MAX_DIMS - 1, &error),
             &error);
    CHECK_ERROR(fp8q_max_calibrator_check(1, 0, "max", &error), &error,
                FP8Q_ERROR_VALUE, "history_len: expected 1 to", "got 0",
                NULL);
    CHECK_ERROR(fp8q_max_calibrator_check(1, 2, "mean", &error), &error,
                FP8Q_ERROR_VALUE, "algo: expected", "\"mean\"", NULL);
    CHECK_ERROR(fp8q_max_calibrator_check(0, 1, "most_recent", &error),
                &error, FP8Q_ERROR_VALUE, "needs a window", NULL, NULL);
    CHECK_ERROR(fp8q_max_calibrator_setup(&max, 0, 1, 3, "max", 0.5, &error),
                &error, FP8Q_ERROR_VALUE, "cannot be combined", NULL, NULL);
    CHECK(max.history.entries == NULL); /* nothing changed */

    /* Per channel (axis -1: the 3 columns), a window of 2. */
    CHECK_OK(fp8q_max_calibrator_setup(&max, -1, 1, 2, "max", -1.0, &error),
             &error);
    CHECK_INT(fp8q_max_calibrator_channels(&max, 0), -1);
    CHECK_OK(fp8q_calibrator_batch(&max.base, &x, 0, 0, &batch, &error),
             &error);
    CHECK_INT(batch.channel_dimension, 1);
    CHECK_INT(batch.n_channels, 3);
    max.base.channel_axis = 2;
    CHECK_ERROR(fp8q_calibrator_batch(&max.base, &x, 0, 0, &batch, &error),
                &error, FP8Q_ERROR_VALUE, "channel_axis=2 is out of range",
                "2 dimensions", NULL);
    max.base.channel_axis = -1;
    CHECK_OK(update(kind, &max, &x, 0, &error), &error);
    CHECK_INT(fp8q_max_calibrator_channels(&max, 0), 3);
    CHECK_OK(fp8q_calibrator_amax(kind, &max, &amax, &n_channels,
                                  &per_channel, &error),
             &error);
    CHECK_INT(n_channels * per_channel, 3);
    CHECK(memcmp(amax, expected_rows, sizeof(float) * 3) == 0);
    fp8q_aligned_free(amax);

    /* NaN refused (nothing recorded, nothing counted), then skipped. */
    values[4] = fp8q_bits_to_float(0x7FC00000u);
    values[0] = 9.0f;
    CHECK_ERROR(update(kind, &max, &x, 0, &error), &error, FP8Q_ERROR_VALUE,
                "1 of its 6 values are NaN or infinite", "skip_nonfinite",
                NULL);
    CHECK_INT(max.base.nonfinite_count, 0);
    CHECK_INT(max.history.filled, 1);
    CHECK_OK(update(kind, &max, &x, 1, &error), &error);
    CHECK_INT(max.base.nonfinite_count, 1);
    CHECK_INT(max.history.filled, 2);

    /* Rows, oldest first. */
    CHECK_OK(fp8q_max_calibrator_rows(&max, &rows, &filled, &n_channels,
                                      &error),
             &error);
    CHECK_INT(filled * n_channels, 6);
    CHECK(memcmp(rows, expected_rows, sizeof expected_rows) == 0);

    /* Another channel count is refused. */
    {
        const int64_t wide_shape[2] = {1, 6};
        fp8q_view wide = make_view(values, FP8Q_FLOAT32, 2, wide_shape,
                                   NULL);
        CHECK_ERROR(update(kind, &max, &wide, 1, &error), &error,
                    FP8Q_ERROR_VALUE, "has 6 entries",
                    "has seen 3 channels", NULL);
    }

    /* Load the rows into another calibrator, then merge: equal ages take
     * the maximum and the NaN/inf counts add up. The rows' shape first:
     * (rows, channels), at most history_len rows. */
    CHECK_OK(fp8q_max_calibrator_setup(&other, -1, 1, 2, "max", -1.0,
                                       &error),
             &error);
    CHECK_ERROR(fp8q_max_calibrator_rows_shape(&other, 2, three_rows, &filled,
                                               &n_channels, &error),
                &error, FP8Q_ERROR_VALUE,
                "amax_history must have 2 dimensions and at most 2 rows "
                "((rows, channels)), got 2 dimensions and 3 rows",
                NULL, NULL);
    CHECK_ERROR(fp8q_max_calibrator_rows_shape(&other, 1, three_rows, &filled,
                                               &n_channels, &error),
                &error, FP8Q_ERROR_VALUE, "got 1 dimensions and 3 rows", NULL,
                NULL);
    CHECK_OK(fp8q_max_calibrator_rows_shape(&other, 2, shape, &filled,
                                            &n_channels, &error),
             &error);
    CHECK_INT(filled, 2);
    CHECK_INT(n_channels, 3);
    rows[0] = 7.0f;
    CHECK_OK(fp8q_max_calibrator_load(&other, rows, 1, 3, &error), &error);
    other.base.nonfinite_count = 4;
    fp8q_aligned_free(rows);
    CHECK_OK(fp8q_calibrator_merge(kind, &max, &other, &error), &error);
    CHECK_INT(max.base.nonfinite_count, 5);
    CHECK_OK(fp8q_calibrator_amax(kind, &max, &amax, &n_channels,
                                  &per_channel, &error),
             &error);
    CHECK_DOUBLE(amax[0], 9.0); /* the window's maximum */
    fp8q_aligned_free(amax);

    /* Reset: per channel the channel count opens again. */
    fp8q_calibrator_reset(kind, &max);
    CHECK_INT(max.base.nonfinite_count, 0);
    CHECK_INT(fp8q_max_calibrator_channels(&max, 0), -1);
    CHECK_INT(fp8q_max_calibrator_channels(
                  &max, FP8Q_CALIB_MAX_STATE_HEADER + 2 * 3 * sizeof(float)),
              3);
    CHECK_OK(fp8q_calibrator_amax(kind, &max, &amax, &n_channels,
                                  &per_channel, &error),
             &error);
    CHECK(amax == NULL);
    kind->free(&max);
    kind->free(&other);
}

void test_calibrator_max_fold(void)
{
    const fp8q_calib_kind *kind = &fp8q_max_calibrator_ops;
    const float ring[2] = {2.0f, 6.0f};
    const float first[1] = {4.0f};
    fp8q_max_calibrator max;
    fp8q_error error;
    float amax[1];

    /* A running maximum (per tensor): the device's newest entry pushed. */
    memset(&max, 0, sizeof max);
    CHECK_OK(fp8q_max_calibrator_setup(&max, FP8Q_CALIB_PER_TENSOR, 0, 1,
                                       "max", -1.0, &error),
             &error);
    CHECK_INT(max.history.running_max, 1);
    CHECK_OK(fp8q_max_calibrator_load(&max, first, 1, 1, &error), &error);
    CHECK_OK(fp8q_max_calibrator_fold(&max, ring, 1, 1, 1, &error), &error);
    CHECK_INT(kind->amax(&max, amax), 1);
    CHECK_DOUBLE(amax[0], 6.0);
    /* An empty device state changes nothing. */
    CHECK_OK(fp8q_max_calibrator_fold(&max, ring, 0, 0, 1, &error), &error);
    CHECK_INT(max.history.filled, 1);
    kind->free(&max);
    memset(&max, 0, sizeof max);

    /* A window: the device's ring becomes the host's. */
    CHECK_OK(fp8q_max_calibrator_setup(&max, FP8Q_CALIB_PER_TENSOR, 1, 2,
                                       "most_recent", -1.0, &error),
             &error);
    CHECK_OK(fp8q_max_calibrator_fold(&max, ring, 2, 0, 1, &error), &error);
    CHECK_INT(kind->amax(&max, amax), 1);
    CHECK_DOUBLE(amax[0], 2.0); /* the newest, at position 0 */
    kind->free(&max);
}

void test_calibrator_histogram(void)
{
    const fp8q_calib_kind *kind = &fp8q_histogram_calibrator_ops;
    enum { N = 1000, BINS = 128 };
    static float values[N];
    static int64_t reference_counts[BINS];
    const int64_t half = N / 2;
    const int64_t rest = N - N / 2;
    fp8q_histogram_calibrator histogram, other;
    fp8q_histogram reference, snapshot;
    fp8q_view all, first, second;
    fp8q_calib_method method;
    fp8q_error error;
    float amax;
    int64_t n;
    int exponent;

    fill_random_floats(values, N, 100.0f);
    values[17] = fp8q_bits_to_float(0x7F800000u); /* +inf */
    all = make_view(values, FP8Q_FLOAT32, 1, (const int64_t[]){N}, NULL);
    first = make_view(values, FP8Q_FLOAT32, 1, &half, NULL);
    second = make_view(values + half, FP8Q_FLOAT32, 1, &rest, NULL);
    fp8q_histogram_init(&reference, BINS, reference_counts);
    CHECK_OK(fp8q_histogram_add(&reference, &all, 0, 1, &n, &error),
             &error);

    memset(&histogram, 0, sizeof histogram);
    memset(&other, 0, sizeof other);
    CHECK_ERROR(fp8q_histogram_calibrator_setup(&histogram, 0, 0, &error),
                &error, FP8Q_ERROR_VALUE, "bins: expected 1 to", "got 0",
                NULL);
    CHECK_OK(fp8q_histogram_calibrator_setup(&histogram, BINS, 0, &error),
             &error);
    CHECK_OK(fp8q_histogram_calibrator_setup(&other, BINS, 0, &error),
             &error);
    CHECK_ERROR(fp8q_histogram_calibrator_snapshot(&histogram, &snapshot,
                                                   &error),
                &error, FP8Q_ERROR_VALUE, "no values counted yet", NULL,
                NULL);
    CHECK_ERROR(update(kind, &histogram, &first, 0, &error), &error,
                FP8Q_ERROR_VALUE, NULL, NULL, NULL);
    CHECK_INT(fp8q_histogram_total(&histogram.histogram), 0);
    CHECK_OK(update(kind, &histogram, &first, 1, &error), &error);
    CHECK_OK(update(kind, &other, &second, 1, &error), &error);
    CHECK_INT(histogram.base.nonfinite_count, 1);
    /* Different skip_zeros: refused, nothing merged. */
    other.skip_zeros = 1;
    CHECK_ERROR(fp8q_calibrator_merge(kind, &histogram, &other, &error),
                &error, FP8Q_ERROR_VALUE,
                "other: calibrators differ in skip_zeros and cannot be "
                "merged",
                NULL, NULL);
    CHECK_INT(histogram.base.nonfinite_count, 1);
    CHECK_INT(fp8q_histogram_total(&histogram.histogram), half - 1);
    other.skip_zeros = 0;
    /* Two halves merged: the one-pass histogram. */
    CHECK_OK(fp8q_calibrator_merge(kind, &histogram, &other, &error),
             &error);
    CHECK_INT(histogram.base.nonfinite_count, 1);
    CHECK(memcmp(histogram.histogram.counts, reference_counts,
                 sizeof reference_counts) == 0);
    CHECK_INT(histogram.histogram.bin_exponent, reference.bin_exponent);
    CHECK_BITS(fp8q_float_to_bits(histogram.histogram.amax),
               fp8q_float_to_bits(reference.amax));

    /* Methods and the snapshot's searches. */
    CHECK_ERROR(fp8q_calib_method_parse("median", &method, &error), &error,
                FP8Q_ERROR_VALUE, "method: expected", "\"median\"", NULL);
    CHECK_OK(fp8q_calib_method_parse("percentile", &method, &error),
             &error);
    CHECK_INT(method, FP8Q_CALIB_PERCENTILE);
    CHECK_OK(fp8q_histogram_calibrator_snapshot(&histogram, &snapshot,
                                                &error),
             &error);
    CHECK_OK(fp8q_calib_threshold(&snapshot, FP8Q_CALIB_MAX, 99.0,
                                  FP8Q_FLOAT8_E4M3FN, &amax, &error),
             &error);
    CHECK_BITS(fp8q_float_to_bits(amax), fp8q_float_to_bits(reference.amax));
    CHECK_OK(fp8q_calib_threshold(&snapshot, FP8Q_CALIB_PERCENTILE, 50.0,
                                  FP8Q_FLOAT8_E4M3FN, &amax, &error),
             &error);
    CHECK(amax > 0.0f && amax <= reference.amax);
    fp8q_aligned_free(snapshot.counts);

    /* Load: another bin count, an inconsistent grid, then a good one. */
    CHECK_ERROR(fp8q_histogram_calibrator_load(&other, reference_counts, 64,
                                               reference.bin_exponent,
                                               reference.amax, &error),
                &error, FP8Q_ERROR_VALUE, "state: counts has 64 bins",
                "this calibrator 128", NULL);
    CHECK_ERROR(fp8q_histogram_calibrator_load(
                    &other, reference_counts, BINS,
                    reference.bin_exponent, reference.amax * 4.0f, &error),
                &error, FP8Q_ERROR_VALUE, "state: ", NULL, NULL);
    fp8q_calibrator_reset(kind, &other);
    CHECK_INT(fp8q_histogram_total(&other.histogram), 0);
    CHECK_OK(fp8q_histogram_calibrator_load(&other, reference_counts, BINS,
                                            reference.bin_exponent,
                                            reference.amax, &error),
             &error);
    CHECK_INT(fp8q_histogram_total(&other.histogram),
              fp8q_histogram_total(&reference));
    kind->free(&histogram);
    kind->free(&other);

    /* A state's bin width: 0 (no range) or a power of two in double's
     * normal range up to 1e300; nothing else. */
    CHECK_INT(fp8q_histogram_width_exponent(0.0, &exponent), 1);
    CHECK_INT(exponent, FP8Q_HISTOGRAM_NO_RANGE);
    CHECK_INT(fp8q_histogram_width_exponent(0.25, &exponent), 1);
    CHECK_INT(exponent, -2);
    CHECK_INT(fp8q_histogram_width_exponent(1024.0, &exponent), 1);
    CHECK_INT(exponent, 10);
    CHECK_INT(fp8q_histogram_width_exponent(ldexp(1.0, 996), &exponent), 1);
    CHECK_INT(exponent, 996);
    CHECK_INT(fp8q_histogram_width_exponent(ldexp(1.0, 997), &exponent), 0);
    CHECK_INT(fp8q_histogram_width_exponent(3.0, &exponent), 0);
    CHECK_INT(fp8q_histogram_width_exponent(-0.5, &exponent), 0);
    CHECK_INT(fp8q_histogram_width_exponent(nan(""), &exponent), 0);
    CHECK_INT(fp8q_histogram_width_exponent(HUGE_VAL, &exponent), 0);
}

/* A batch admitted and counted, then the calibrator reconfigured (as by
 * another thread's __init__ while the batch is counted without the lock),
 * then absorbed: it is counted again under the new settings. */
void test_calibrator_reconfigured_while_counting(void)
{
    float values[2 * 3] = {1.0f, -5.0f, 0.0f, -3.0f, 0.5f, 4.0f};
    const int64_t shape[2] = {2, 3};
    fp8q_view x = make_view(values, FP8Q_FLOAT32, 2, shape, NULL);
    const fp8q_calib_kind *max_kind = &fp8q_max_calibrator_ops;
    const fp8q_calib_kind *histogram_kind = &fp8q_histogram_calibrator_ops;
    fp8q_histogram_calibrator histogram;
    fp8q_max_calibrator max;
    fp8q_calib_batch batch;
    fp8q_error error;
    float amax[3];
    int counted = 0;

    /* Max: made per tensor, absorbed per channel along axis 1. */
    memset(&max, 0, sizeof max);
    CHECK_OK(fp8q_max_calibrator_setup(&max, FP8Q_CALIB_PER_TENSOR, 0, 1,
                                       "max", -1.0, &error),
             &error);
    CHECK_OK(fp8q_calibrator_batch(&max.base, &x, 0, 0, &batch, &error),
             &error);
    CHECK_OK(max_kind->admit(&max, &batch, &counted, &error), &error);
    CHECK_OK(max_kind->count(&batch, &error), &error);
    CHECK_OK(fp8q_max_calibrator_setup(&max, 1, 0, 1, "max", -1.0, &error),
             &error);
    CHECK_OK(fp8q_calibrator_absorb(max_kind, &max, &batch, &error),
             &error);
    CHECK_INT(max_kind->amax(&max, amax), 3);
    CHECK_DOUBLE(amax[0], 3.0);
    CHECK_DOUBLE(amax[1], 5.0);
    CHECK_DOUBLE(amax[2], 4.0);

    /* The batch made while a GPU state of 5 channels was kept (its size in
     * device_bytes), absorbed after a setup with a longer history (which
     * forgets the GPU state): 3 channels are fine, not "seen 2". */
    CHECK_OK(fp8q_max_calibrator_setup(&max, 1, 0, 1, "max", -1.0, &error),
             &error);
    CHECK_OK(fp8q_calibrator_batch(&max.base, &x, 0, 0, &batch, &error),
             &error);
    batch.device_bytes = FP8Q_CALIB_MAX_STATE_HEADER + 5 * sizeof(float);
    CHECK_OK(max_kind->admit(&max, &batch, &counted, &error), &error);
    CHECK_OK(max_kind->count(&batch, &error), &error);
    CHECK_OK(fp8q_max_calibrator_setup(&max, 1, 1, 2, "max", -1.0, &error),
             &error);
    CHECK_OK(fp8q_calibrator_absorb(max_kind, &max, &batch, &error),
             &error);
    CHECK_INT(max_kind->amax(&max, amax), 3);
    max_kind->free(&max);

    /* Histogram: counted with 64 bins, absorbed into 16 that skip zeros. */
    memset(&histogram, 0, sizeof histogram);
    CHECK_OK(fp8q_histogram_calibrator_setup(&histogram, 64, 0, &error),
             &error);
    CHECK_OK(fp8q_calibrator_batch(&histogram.base, &x, 0, 0, &batch, &error),
             &error);
    CHECK_OK(histogram_kind->admit(&histogram, &batch, &counted, &error),
             &error);
    CHECK_OK(histogram_kind->count(&batch, &error), &error);
    CHECK_INT(((const fp8q_histogram *)batch.partial)->n_bins, 64);
    CHECK_OK(fp8q_histogram_calibrator_setup(&histogram, 16, 1, &error),
             &error);
    CHECK_OK(fp8q_calibrator_absorb(histogram_kind, &histogram, &batch,
                                    &error),
             &error);
    CHECK_INT(histogram.histogram.n_bins, 16);
    CHECK_INT(fp8q_histogram_total(&histogram.histogram), 5); /* no zero */
    CHECK_DOUBLE(histogram.histogram.amax, 5.0);
    histogram_kind->free(&histogram);
}
