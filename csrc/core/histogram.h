/*
 * histogram.h - histograms of |x| on a power-of-two bin grid, the statistics
 * behind the histogram calibrator.
 *
 * Bin k counts the values with k * w <= |x| < (k + 1) * w, where the bin
 * width w = 2^bin_exponent is the smallest power of two that puts the largest
 * value seen inside the last bin (amax < n_bins * w). When a larger value
 * arrives the width doubles as often as needed and each group of adjacent
 * bins folds into one: nothing is dropped or interpolated. Because the grid
 * depends only on the largest value, histograms of two halves of some data,
 * merged, are exactly the histogram of all of it, in any order.
 */
#ifndef FP8Q_CORE_HISTOGRAM_H
#define FP8Q_CORE_HISTOGRAM_H

#include <stdint.h>

#include "core/histogram_bins.h"
#include "core/status.h"
#include "core/view.h"

#define FP8Q_HISTOGRAM_MAX_BINS ((int64_t)1 << 16)

typedef struct fp8q_histogram {
    int64_t n_bins;   /* in [1, FP8Q_HISTOGRAM_MAX_BINS] */
    int64_t *counts;  /* n_bins counts; memory owned by the caller */
    int bin_exponent; /* bin width 2^bin_exponent, or FP8Q_HISTOGRAM_NO_RANGE */
    float amax;       /* largest finite |x| seen (0 before any) */
} fp8q_histogram;

/* An empty histogram over caller-owned `counts` (zeroed here). */
void fp8q_histogram_init(fp8q_histogram *histogram, int64_t n_bins,
                         int64_t *counts);

/* Bin width 2^bin_exponent as a double, or 0 with no range yet. */
double fp8q_histogram_bin_width(const fp8q_histogram *histogram);

/* Sum of the counts. */
int64_t fp8q_histogram_total(const fp8q_histogram *histogram);

/*
 * Counts |x| of every element of `source` (any dtype, any strides) and raises
 * amax. NaN and +-infinity are never counted: with skip_nonfinite they are
 * skipped and their number is written to *n_nonfinite; without it the first
 * pass finds them and the call fails with FP8Q_ERROR_VALUE before changing
 * anything. With skip_zeros, exact zeros are not counted. Two passes over
 * the data (finite amax, then counts), multithreaded for large inputs.
 */
fp8q_status fp8q_histogram_add(fp8q_histogram *histogram,
                               const fp8q_view *source, int skip_zeros,
                               int skip_nonfinite, int64_t *n_nonfinite,
                               fp8q_error *error);

/* Widens the bins, if needed, so that `value` (finite, >= 0) falls inside
 * the last bin; amax is unchanged. For agreeing on a common grid before
 * summing counts elsewhere (e.g. an all_reduce). FP8Q_ERROR_VALUE for a
 * negative or non-finite value. */
fp8q_status fp8q_histogram_cover(fp8q_histogram *histogram, float value,
                                 fp8q_error *error);

/* Adds `other`'s counts into `histogram` (both re-binned onto the wider of
 * the two grids) and raises amax. FP8Q_ERROR_VALUE, nothing changed, when
 * the bin counts differ or the merged total would pass INT64_MAX. */
fp8q_status fp8q_histogram_merge(fp8q_histogram *histogram,
                                 const fp8q_histogram *other,
                                 fp8q_error *error);

/*
 * Checks a histogram assembled from outside (a loaded state): n_bins in
 * range, counts >= 0 with a total of at most INT64_MAX, amax finite and
 * >= 0, and a grid consistent with amax:
 * without a range only bin 0 may count and amax is 0; with one, amax lies in
 * the last bin's range or below, bin_exponent is the smallest that holds it
 * (or larger, after fp8q_histogram_cover), amax's own bin counts at least
 * one value and no bin above it counts any.
 * FP8Q_ERROR_VALUE saying what is inconsistent.
 */
fp8q_status fp8q_histogram_check(const fp8q_histogram *histogram,
                                 fp8q_error *error);

#endif /* FP8Q_CORE_HISTOGRAM_H */
