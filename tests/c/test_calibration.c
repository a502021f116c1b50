/*
 * test_calibration.c - the calibration core: fp8q_amax_finite, the
 * power-of-two histogram (counts against a brute-force reference, widening,
 * merge equal to one pass, checks), the threshold searches' contracts, and
 * the amax history (window, most recent, momentum, merge).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/amax.h"
#include "core/amax_history.h"
#include "core/float_codec.h"
#include "core/histogram.h"
#include "core/histogram_bins.h"
#include "core/histogram_threshold.h"
#include "core/view.h"
#include "harness.h"
#include "helpers.h"

#define BINS 64

/* ------------------------------------------------------------------------- */
/* fp8q_amax_finite                                                          */

void test_amax_finite(void)
{
    enum { ROWS = 300, COLS = 1000 };
    static float values[ROWS * COLS];
    float per_row[ROWS];
    float expected[ROWS];
    const int64_t shape[2] = {ROWS, COLS};
    const int64_t row_shape[2] = {ROWS, 1};
    fp8q_view source = make_view(values, FP8Q_FLOAT32, 2, shape, NULL);
    fp8q_view destination;
    fp8q_error error;
    int64_t n_nonfinite;
    int64_t planted = 0;
    int64_t row;
    int64_t col;

    fill_random_floats(values, ROWS * COLS, 1000.0f);
    for (row = 0; row < ROWS; row += 7) {
        values[row * COLS + (row * 13) % COLS] =
            fp8q_bits_to_float(row % 2 ? 0x7FC00000u : 0xFF800000u);
        planted++;
    }
    values[5 * COLS + 5] = fp8q_bits_to_float(0x7F800000u); /* +inf */
    planted++;
    for (row = 0; row < ROWS; row++) {
        expected[row] = 0.0f;
        for (col = 0; col < COLS; col++) {
            const float magnitude = (float)fabs((double)values[row * COLS + col]);
            if (magnitude <= 3.40282347e38f && magnitude > expected[row]) {
                expected[row] = magnitude;
            }
        }
    }
    /* Large enough to run in parallel. */
    destination = make_view(per_row, FP8Q_FLOAT32, 2, row_shape, NULL);
    CHECK_OK(fp8q_amax_finite(&source, &destination, &n_nonfinite, &error),
             &error);
    CHECK_INT(n_nonfinite, planted);
    for (row = 0; row < ROWS; row++) {
        CHECK_BITS(fp8q_float_to_bits(per_row[row]),
                   fp8q_float_to_bits(expected[row]));
    }
    /* Kept axis along the rows: the per-element path counts too. */
    {
        static float per_column[COLS];
        const int64_t column_shape[2] = {1, COLS};
        destination = make_view(per_column, FP8Q_FLOAT32, 2, column_shape,
                                NULL);
        CHECK_OK(fp8q_amax_finite(&source, &destination, &n_nonfinite,
                                  &error),
                 &error);
        CHECK_INT(n_nonfinite, planted);
        CHECK(per_column[5] <= 3.40282347e38f);
    }
}

/* ------------------------------------------------------------------------- */
/* Histogram                                                                 */

/* The histogram of `values` by the definition: the smallest power-of-two
 * width w with amax < BINS * w, bin floor(|x| / w), found by comparisons. */
static int reference_histogram(const float *values, int64_t count,
                               int skip_zeros, int64_t *counts)
{
    double amax = 0.0;
    double width;
    int exponent = -200;
    int64_t i;

    for (i = 0; i < count; i++) {
        amax = fabs((double)values[i]) > amax ? fabs((double)values[i]) : amax;
    }
    while (!(amax < ldexp((double)BINS, exponent))) {
        exponent++;
    }
    width = ldexp(1.0, exponent);
    memset(counts, 0, BINS * sizeof *counts);
    for (i = 0; i < count; i++) {
        const double magnitude = fabs((double)values[i]);
        int64_t bin = 0;
        if (skip_zeros && magnitude == 0.0) {
            continue;
        }
        while ((double)(bin + 1) * width <= magnitude) {
            bin++;
        }
        counts[bin]++;
    }
    return exponent;
}

static void add_values(fp8q_histogram *histogram, const float *values,
                       int64_t count, int skip_zeros)
{
    const int64_t shape[1] = {count};
    fp8q_view view = make_view((void *)values, FP8Q_FLOAT32, 1, shape, NULL);
    fp8q_error error;
    int64_t n_nonfinite = -1;
    CHECK_OK(fp8q_histogram_add(histogram, &view, skip_zeros, 0,
                                &n_nonfinite, &error),
             &error);
    CHECK_INT(n_nonfinite, 0);
}

/* One value through both bin rules; 1 when they agree. */
static int same_bin(float value, double inverse_width, int64_t n_bins,
                    int skip_zeros)
{
    return fp8q_histogram_bin_float(value, (float)inverse_width, n_bins,
                                    skip_zeros) ==
           fp8q_histogram_bin(value, inverse_width, n_bins, skip_zeros);
}

/* The kernels' float32 bin rule gives the double rule's bin on every grid
 * where fp8q_histogram_float_rule_applies: every bfloat16 pattern (both
 * signs, zeros, subnormals, infinities, NaN) and the float32 values
 * nearest the grid's edges and the bins' boundaries, for every bin
 * exponent from -140 to 128 and bin counts up to 2^24 + 1 where it
 * applies. */
void test_histogram_float_rule(void)
{
    static const int64_t bin_counts[] = {1, 7, 2048, (int64_t)1 << 24,
                                         ((int64_t)1 << 24) + 1};
    static const int64_t multiples[] = {0, 1, 2, 3};
    uint64_t mismatches = 0;
    int exponent;
    size_t b, m;
    uint32_t pattern;
    int step;

    CHECK(fp8q_histogram_float_rule_applies(FP8Q_HISTOGRAM_NO_RANGE, 64));
    CHECK(fp8q_histogram_float_rule_applies(-127, (int64_t)1 << 24));
    CHECK(!fp8q_histogram_float_rule_applies(-128, 64));
    CHECK(!fp8q_histogram_float_rule_applies(0, ((int64_t)1 << 24) + 1));
    for (pattern = 0; pattern < 0x10000u; pattern++) {
        const float value = fp8q_bits_to_float(pattern << 16);
        mismatches += !same_bin(value, 0.0, 64, 0) +
                      !same_bin(value, 0.0, 64, 1);
    }
    for (exponent = -140; exponent <= 128; exponent++) {
        const double inverse_width = ldexp(1.0, -exponent);
        for (b = 0; b < sizeof bin_counts / sizeof bin_counts[0]; b++) {
            const int64_t n_bins = bin_counts[b];
            const int skip_zeros = (exponent + (int)b) % 2 != 0;
            if (!fp8q_histogram_float_rule_applies(exponent, n_bins)) {
                continue;
            }
            for (pattern = 0; pattern < 0x10000u; pattern += b == 2 ? 1 : 7) {
                mismatches += !same_bin(fp8q_bits_to_float(pattern << 16),
                                        inverse_width, n_bins, skip_zeros);
            }
            /* The edges of bins 0 to 3, of the last bins, of the grid and
             * of float32's normal range on this grid, and a few float32
             * steps either way. */
            for (m = 0; m < sizeof multiples / sizeof multiples[0]; m++) {
                const double edges[] = {
                    ldexp((double)multiples[m], exponent),
                    ldexp((double)(n_bins - (int64_t)multiples[m]), exponent),
                    ldexp((double)(n_bins + (int64_t)multiples[m]), exponent),
                    ldexp(1.0, -126 + (int)multiples[m]) * 1.0};
                size_t e;
                for (e = 0; e < sizeof edges / sizeof edges[0]; e++) {
                    float value = (float)edges[e];
                    if (!(fabsf(value) <= 3.40282347e38f)) {
                        continue;
                    }
                    for (step = 0; step < 4; step++) {
                        value = nextafterf(value, 0.0f);
                    }
                    for (step = 0; step < 9; step++) {
                        mismatches += !same_bin(value, inverse_width, n_bins,
                                                skip_zeros) +
                                      !same_bin(-value, inverse_width, n_bins,
                                                skip_zeros);
                        value = nextafterf(value, INFINITY);
                    }
                }
            }
        }
    }
    CHECK_INT(mismatches, 0);
}

void test_histogram_counts(void)
{
    enum { COUNT = 5000 };
    static float values[COUNT];
    int64_t counts[BINS];
    int64_t expected[BINS];
    fp8q_histogram histogram;
    int skip_zeros;
    int bin;

    for (skip_zeros = 0; skip_zeros < 2; skip_zeros++) {
        int exponent;
        fill_random_floats(values, COUNT, 37.0f); /* zeros, subnormals too */
        exponent = reference_histogram(values, COUNT, skip_zeros, expected);
        fp8q_histogram_init(&histogram, BINS, counts);
        add_values(&histogram, values, COUNT, skip_zeros);
        CHECK_INT(histogram.bin_exponent, exponent);
        for (bin = 0; bin < BINS; bin++) {
            CHECK_INT(counts[bin], expected[bin]);
        }
    }
    /* A value exactly at a power of two starts the next grid: 8 with 64
     * bins needs w = 2^-2 (8 < 16) not 2^-3 (8 == 8). */
    {
        const float eight[2] = {8.0f, 0.125f};
        fp8q_histogram_init(&histogram, BINS, counts);
        add_values(&histogram, eight, 2, 0);
        CHECK_INT(histogram.bin_exponent, -2);
        CHECK_INT(counts[32], 1);
        CHECK_INT(counts[0], 1);
    }
}

void test_histogram_merge_equals_one_pass(void)
{
    enum { COUNT = 4000 };
    static float values[COUNT];
    int64_t whole_counts[BINS];
    int64_t first_counts[BINS];
    int64_t second_counts[BINS];
    fp8q_histogram whole;
    fp8q_histogram first;
    fp8q_histogram second;
    fp8q_error error;
    int64_t i;
    int bin;

    fill_random_floats(values, COUNT, 3.0f);
    for (i = COUNT / 2; i < COUNT; i++) {
        values[i] *= 5000.0f; /* the second half is much larger */
    }
    fp8q_histogram_init(&whole, BINS, whole_counts);
    add_values(&whole, values, COUNT, 0);

    /* Sequential updates: the grid widens mid-way. */
    fp8q_histogram_init(&first, BINS, first_counts);
    add_values(&first, values, COUNT / 2, 0);
    add_values(&first, values + COUNT / 2, COUNT / 2, 0);
    CHECK_INT(first.bin_exponent, whole.bin_exponent);
    for (bin = 0; bin < BINS; bin++) {
        CHECK_INT(first_counts[bin], whole_counts[bin]);
    }

    /* Merging the halves, in both orders. */
    fp8q_histogram_init(&first, BINS, first_counts);
    fp8q_histogram_init(&second, BINS, second_counts);
    add_values(&first, values, COUNT / 2, 0);
    add_values(&second, values + COUNT / 2, COUNT / 2, 0);
    CHECK_OK(fp8q_histogram_merge(&first, &second, &error), &error);
    CHECK_INT(first.bin_exponent, whole.bin_exponent);
    CHECK_BITS(fp8q_float_to_bits(first.amax), fp8q_float_to_bits(whole.amax));
    for (bin = 0; bin < BINS; bin++) {
        CHECK_INT(first_counts[bin], whole_counts[bin]);
    }
    fp8q_histogram_init(&first, BINS, first_counts);
    add_values(&first, values, COUNT / 2, 0);
    CHECK_OK(fp8q_histogram_merge(&second, &first, &error), &error);
    for (bin = 0; bin < BINS; bin++) {
        CHECK_INT(second_counts[bin], whole_counts[bin]);
    }

    /* Different bin counts do not merge. */
    {
        int64_t other_counts[BINS / 2];
        fp8q_histogram other;
        fp8q_histogram_init(&other, BINS / 2, other_counts);
        CHECK_ERROR(fp8q_histogram_merge(&whole, &other, &error), &error,
                    FP8Q_ERROR_VALUE, "32 bins", "64 bins", NULL);
    }
}

void test_histogram_zeros_nonfinite_and_checks(void)
{
    int64_t counts[BINS];
    fp8q_histogram histogram;
    fp8q_error error;
    float values[6] = {0.0f, -0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    const int64_t six[1] = {6};
    fp8q_view view = make_view(values, FP8Q_FLOAT32, 1, six, NULL);
    int64_t n_nonfinite;

    /* Zeros alone: counted in bin 0, no range yet. */
    fp8q_histogram_init(&histogram, BINS, counts);
    add_values(&histogram, values, 6, 0);
    CHECK_INT(histogram.bin_exponent, FP8Q_HISTOGRAM_NO_RANGE);
    CHECK_INT(counts[0], 6);
    CHECK_OK(fp8q_histogram_check(&histogram, &error), &error);
    add_values(&histogram, values, 6, 1);
    CHECK_INT(counts[0], 6);

    /* Non-finite values: an error that changes nothing, or skipped. */
    values[2] = fp8q_bits_to_float(0x7FC00000u);
    values[3] = 3.0f;
    values[4] = fp8q_bits_to_float(0xFF800000u);
    CHECK_ERROR(fp8q_histogram_add(&histogram, &view, 0, 0, &n_nonfinite,
                                   &error),
                &error, FP8Q_ERROR_VALUE, "2 of its 6", "skip_nonfinite",
                NULL);
    CHECK_INT(histogram.bin_exponent, FP8Q_HISTOGRAM_NO_RANGE);
    CHECK_INT(fp8q_histogram_total(&histogram), 6);
    CHECK_OK(fp8q_histogram_add(&histogram, &view, 0, 1, &n_nonfinite,
                                &error),
             &error);
    CHECK_INT(n_nonfinite, 2);
    CHECK_INT(fp8q_histogram_total(&histogram), 10);
    CHECK_DOUBLE(histogram.amax, 3.0);
    CHECK_OK(fp8q_histogram_check(&histogram, &error), &error);

    /* cover() widens without counting. */
    CHECK_OK(fp8q_histogram_cover(&histogram, 1000.0f, &error), &error);
    CHECK_INT(histogram.bin_exponent, 4); /* 1000 < 64 * 16 */
    CHECK_DOUBLE(histogram.amax, 3.0);
    CHECK_INT(counts[0], 10);
    CHECK_OK(fp8q_histogram_check(&histogram, &error), &error);
    CHECK_ERROR(fp8q_histogram_cover(&histogram, -1.0f, &error), &error,
                FP8Q_ERROR_VALUE, "amax", NULL, NULL);

    /* Inconsistent states are refused. */
    histogram.amax = 2000.0f;
    CHECK_ERROR(fp8q_histogram_check(&histogram, &error), &error,
                FP8Q_ERROR_VALUE, "beyond the last bin", NULL, NULL);
    histogram.amax = 3.0f;
    counts[BINS - 1] = 1;
    CHECK_ERROR(fp8q_histogram_check(&histogram, &error), &error,
                FP8Q_ERROR_VALUE, "above amax", NULL, NULL);
    counts[BINS - 1] = -1;
    CHECK_ERROR(fp8q_histogram_check(&histogram, &error), &error,
                FP8Q_ERROR_VALUE, "negative", NULL, NULL);
}

/* ------------------------------------------------------------------------- */
/* Threshold searches                                                        */

void test_histogram_thresholds(void)
{
    enum { COUNT = 20000 };
    static float values[COUNT];
    int64_t counts[2048];
    fp8q_histogram histogram;
    fp8q_error error;
    const int64_t shape[1] = {COUNT};
    fp8q_view view = make_view(values, FP8Q_FLOAT32, 1, shape, NULL);
    int64_t n_nonfinite;
    float amax;
    int64_t i;

    /* Empty: every search refuses. */
    fp8q_histogram_init(&histogram, 2048, counts);
    CHECK_ERROR(fp8q_threshold_percentile(&histogram, 99.0, &amax, &error),
                &error, FP8Q_ERROR_VALUE, "no values", NULL, NULL);
    CHECK_ERROR(fp8q_threshold_mse(&histogram, FP8Q_FLOAT8_E4M3FN, &amax,
                                   &error),
                &error, FP8Q_ERROR_VALUE, "no values", NULL, NULL);

    /* Uniform values 0, 1, ..., COUNT - 1. */
    for (i = 0; i < COUNT; i++) {
        values[i] = (float)i;
    }
    CHECK_OK(fp8q_histogram_add(&histogram, &view, 0, 0, &n_nonfinite,
                                &error),
             &error);
    CHECK_OK(fp8q_threshold_percentile(&histogram, 50.0, &amax, &error),
             &error);
    CHECK(fabs((double)amax - 10000.0) <= fp8q_histogram_bin_width(&histogram));
    CHECK_OK(fp8q_threshold_percentile(&histogram, 100.0, &amax, &error),
             &error);
    CHECK_DOUBLE(amax, COUNT - 1); /* capped at the exact amax */
    CHECK_ERROR(fp8q_threshold_percentile(&histogram, 0.0, &amax, &error),
                &error, FP8Q_ERROR_VALUE, "percentile", NULL, NULL);

    CHECK_OK(fp8q_threshold_mse(&histogram, FP8Q_FLOAT8_E4M3FN, &amax,
                                &error),
             &error);
    CHECK(amax <= (float)(COUNT - 1) && amax > (float)(COUNT - 1) / 2.0f);
    CHECK_OK(fp8q_threshold_entropy(&histogram, FP8Q_FLOAT8_E5M2, &amax,
                                    &error),
             &error);
    CHECK(amax > 0.0f && amax <= (float)(COUNT - 1));
    CHECK_ERROR(fp8q_threshold_entropy(&histogram, FP8Q_FLOAT16, &amax,
                                       &error),
                &error, FP8Q_ERROR_TYPE, "FP8", NULL, NULL);

    /* A point mass far above the bulk: entropy clips it (all its mass
     * lands in the last kept bin), MSE keeps it (clipping 1000 costs more
     * than FP8 rounding saves). */
    for (i = 0; i < COUNT; i++) {
        values[i] = (float)(i % 100) * 0.01f;
    }
    values[0] = 1000.0f;
    fp8q_histogram_init(&histogram, 2048, counts);
    CHECK_OK(fp8q_histogram_add(&histogram, &view, 0, 0, &n_nonfinite,
                                &error),
             &error);
    CHECK_OK(fp8q_threshold_mse(&histogram, FP8Q_FLOAT8_E4M3FN, &amax,
                                &error),
             &error);
    CHECK_DOUBLE(amax, 1000.0);
}

/* ------------------------------------------------------------------------- */
/* Amax history                                                              */

void test_amax_history(void)
{
    float entries[3 * 2];
    float other_entries[3 * 2];
    float out[2];
    fp8q_amax_history history;
    fp8q_amax_history other;
    fp8q_error error;
    const float batches[4][2] = {{1.0f, 8.0f}, {4.0f, 2.0f}, {3.0f, 1.0f},
                                 {2.0f, 0.5f}};

    fp8q_amax_history_init(&history, 2, 3, -1.0, 0, entries);
    fp8q_amax_history_push(&history, batches[0]);
    fp8q_amax_history_push(&history, batches[1]);
    fp8q_amax_history_reduce(&history, 0, out);
    CHECK_DOUBLE(out[0], 4.0);
    CHECK_DOUBLE(out[1], 8.0);
    fp8q_amax_history_push(&history, batches[2]);
    fp8q_amax_history_push(&history, batches[3]); /* drops batch 0 */
    CHECK_INT(history.filled, 3);
    fp8q_amax_history_reduce(&history, 0, out);
    CHECK_DOUBLE(out[0], 4.0);
    CHECK_DOUBLE(out[1], 2.0);
    fp8q_amax_history_reduce(&history, 1, out);
    CHECK_DOUBLE(out[0], 2.0);
    CHECK_DOUBLE(out[1], 0.5);
    CHECK_DOUBLE(fp8q_amax_history_entry(&history, 2)[0], 4.0);

    /* Merge: equal ages take the maximum; the fuller history's older
     * entries are kept. */
    fp8q_amax_history_init(&other, 2, 3, -1.0, 0, other_entries);
    fp8q_amax_history_push(&other, batches[0]);
    CHECK_OK(fp8q_amax_history_merge(&other, &history, &error), &error);
    CHECK_INT(other.filled, 3);
    CHECK_DOUBLE(fp8q_amax_history_entry(&other, 0)[0], 2.0);
    CHECK_DOUBLE(fp8q_amax_history_entry(&other, 0)[1], 8.0);
    CHECK_DOUBLE(fp8q_amax_history_entry(&other, 2)[0], 4.0);

    /* Momentum: the first batch as is, then the float32 of the double
     * average. */
    fp8q_amax_history_init(&history, 2, 1, 0.9, 0, entries);
    fp8q_amax_history_push(&history, batches[0]);
    fp8q_amax_history_push(&history, batches[1]);
    fp8q_amax_history_reduce(&history, 0, out);
    CHECK_BITS(fp8q_float_to_bits(out[0]),
               fp8q_float_to_bits((float)(0.9 * 1.0 + (1.0 - 0.9) * 4.0)));
    CHECK_BITS(fp8q_float_to_bits(out[1]),
               fp8q_float_to_bits((float)(0.9 * 8.0 + (1.0 - 0.9) * 2.0)));
    CHECK_ERROR(fp8q_amax_history_merge(&history, &other, &error), &error,
                FP8Q_ERROR_VALUE, "history_len", NULL, NULL);

    /* Running max: one entry, the maximum of every batch. */
    fp8q_amax_history_init(&history, 2, 1, -1.0, 1, entries);
    fp8q_amax_history_push(&history, batches[0]);
    fp8q_amax_history_push(&history, batches[1]);
    fp8q_amax_history_push(&history, batches[3]);
    CHECK_INT(history.filled, 1);
    fp8q_amax_history_reduce(&history, 0, out);
    CHECK_DOUBLE(out[0], 4.0);
    CHECK_DOUBLE(out[1], 8.0);
    CHECK_ERROR(fp8q_amax_history_merge(&history, &other, &error), &error,
                FP8Q_ERROR_VALUE, "running max", NULL, NULL);
}
