/*
 * histogram_threshold.c - percentile, entropy and MSE amax searches over a
 * histogram of |x| (see histogram_threshold.h and docs/calibration.md).
 *
 * The FP8 grid of the target format comes from the one codec through
 * core/convert: bin centres are rounded to FP8 by fp8q_store_float32 and the
 * grid values are decoded by fp8q_load_float32, so these searches round
 * exactly as quantize does. Sums are in double, in bin order.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "core/convert.h"
#include "core/histogram_threshold.h"
#include "platform.h"

/* Codes 0x00..0x7F: the sign-bit-clear half of every FP8 format. */
#define POSITIVE_CODES 128

/* ------------------------------------------------------------------------- */
/* Shared                                                                    */

/* Index of the last bin that counts anything, or -1 for none. */
static int64_t last_counted_bin(const fp8q_histogram *histogram)
{
    int64_t bin;
    for (bin = histogram->n_bins - 1; bin >= 0; bin--) {
        if (histogram->counts[bin] != 0) {
            return bin;
        }
    }
    return -1;
}

static fp8q_status check_counted(const fp8q_histogram *histogram,
                                 fp8q_error *error)
{
    if (last_counted_bin(histogram) < 0) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "the histogram has counted no values yet: call "
                         "update() with data first");
    }
    return FP8Q_OK;
}

/* The upper edge of bin `bin` as float32, capped at the histogram's amax. */
static float capped_edge(const fp8q_histogram *histogram, int64_t bin)
{
    const double edge =
        ldexp((double)(bin + 1), histogram->bin_exponent);
    return edge < (double)histogram->amax ? (float)edge : histogram->amax;
}

/* The non-negative finite values of an FP8 format, ascending (codes 0x00
 * up to the largest finite one); returns how many. */
static int positive_grid(fp8q_dtype target, float *grid)
{
    uint8_t codes[POSITIVE_CODES];
    int count;
    int code;

    for (code = 0; code < POSITIVE_CODES; code++) {
        codes[code] = (uint8_t)code;
    }
    fp8q_load_float32(target, (const char *)codes, 1, grid, POSITIVE_CODES);
    for (count = 0; count < POSITIVE_CODES; count++) {
        if (!(grid[count] <= 3.40282347e38f)) {
            break; /* infinity or NaN: the finite values end here */
        }
    }
    return count;
}

static fp8q_status check_target(fp8q_dtype target, fp8q_error *error)
{
    if (!fp8q_dtype_is_fp8(target)) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE,
                         "dtype: expected an FP8 dtype, got %s",
                         fp8q_dtype_name(target));
    }
    return FP8Q_OK;
}

/* ------------------------------------------------------------------------- */
/* Percentile                                                                */

fp8q_status fp8q_threshold_percentile(const fp8q_histogram *histogram,
                                      double percentile, float *amax,
                                      fp8q_error *error)
{
    fp8q_status status;
    double needed;
    int64_t running = 0;
    int64_t bin;

    if (!(percentile > 0.0 && percentile <= 100.0)) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "percentile: expected a value in (0, 100], got %s",
                         fp8q_number(percentile).text);
    }
    status = check_counted(histogram, error);
    if (status != FP8Q_OK) {
        return status;
    }
    if (histogram->amax == 0.0f) {
        *amax = 0.0f;
        return FP8Q_OK;
    }
    needed = percentile / 100.0 * (double)fp8q_histogram_total(histogram);
    for (bin = 0; bin < histogram->n_bins - 1; bin++) {
        running += histogram->counts[bin];
        if ((double)running >= needed) {
            break;
        }
    }
    *amax = capped_edge(histogram, bin);
    return FP8Q_OK;
}

/* ------------------------------------------------------------------------- */
/* Entropy                                                                   */

/* Scratch for one search: per-bin FP8 codes, centres and the candidate
 * distribution, for up to n_bins bins. */
typedef struct entropy_scratch {
    float *centres;
    uint8_t *codes;
    double *expanded;
} entropy_scratch;

/*
 * KL(P || Q) for the candidate keeping bins [0, kept): P is the counts with
 * the outliers (bins >= kept) added to bin kept - 1; Q merges the kept bins
 * by the FP8 code of their centre scaled so that the edge maps to finfo.max,
 * and spreads each merged count evenly over that group's nonzero bins.
 * Infinite when P counts a bin that Q leaves empty.
 */
static double candidate_divergence(const fp8q_histogram *histogram,
                                   fp8q_dtype target, double format_max,
                                   int64_t kept, int64_t outliers,
                                   entropy_scratch *scratch)
{
    const int64_t *counts = histogram->counts;
    const double p_total = (double)fp8q_histogram_total(histogram);
    double q_total = 0.0;
    double divergence = 0.0;
    int64_t begin;
    int64_t bin;

    for (bin = 0; bin < kept; bin++) {
        scratch->centres[bin] =
            (float)(((double)bin + 0.5) * format_max / (double)kept);
    }
    fp8q_store_float32(target, scratch->centres, (char *)scratch->codes, 1,
                       kept, 1);

    /* Q: groups are runs of equal codes (the codes ascend with the bins). */
    for (begin = 0; begin < kept;) {
        int64_t end = begin;
        double group_count = 0.0;
        int64_t nonzero = 0;
        while (end < kept && scratch->codes[end] == scratch->codes[begin]) {
            group_count += (double)counts[end];
            nonzero += counts[end] != 0;
            end++;
        }
        for (bin = begin; bin < end; bin++) {
            scratch->expanded[bin] =
                counts[bin] != 0 ? group_count / (double)nonzero : 0.0;
        }
        q_total += group_count;
        begin = end;
    }

    for (bin = 0; bin < kept; bin++) {
        const double p_count =
            (double)counts[bin] + (bin == kept - 1 ? (double)outliers : 0.0);
        double p;
        double q;
        if (p_count == 0.0) {
            continue;
        }
        if (scratch->expanded[bin] == 0.0) {
            return HUGE_VAL;
        }
        p = p_count / p_total;
        q = scratch->expanded[bin] / q_total;
        divergence += p * log(p / q);
    }
    return divergence;
}

fp8q_status fp8q_threshold_entropy(const fp8q_histogram *histogram,
                                   fp8q_dtype target, float *amax,
                                   fp8q_error *error)
{
    float grid[POSITIVE_CODES];
    entropy_scratch scratch;
    fp8q_status status;
    int64_t last;
    int64_t levels;
    int64_t kept;
    int64_t outliers = 0;
    int64_t best_kept = -1;
    double best_divergence = HUGE_VAL;

    status = check_target(target, error);
    if (status == FP8Q_OK) {
        status = check_counted(histogram, error);
    }
    if (status != FP8Q_OK) {
        return status;
    }
    levels = positive_grid(target, grid);
    last = last_counted_bin(histogram);
    if (histogram->amax == 0.0f || last + 1 < levels) {
        *amax = histogram->amax; /* too few bins to search */
        return FP8Q_OK;
    }

    scratch.centres = (float *)fp8q_aligned_alloc(
        (size_t)(last + 1) * sizeof(float));
    scratch.codes = (uint8_t *)fp8q_aligned_alloc((size_t)(last + 1));
    scratch.expanded = (double *)fp8q_aligned_alloc(
        (size_t)(last + 1) * sizeof(double));
    if (scratch.centres == NULL || scratch.codes == NULL ||
        scratch.expanded == NULL) {
        fp8q_aligned_free(scratch.centres);
        fp8q_aligned_free(scratch.codes);
        fp8q_aligned_free(scratch.expanded);
        return fp8q_fail(error, FP8Q_ERROR_MEMORY,
                         "no memory for the entropy search over %" PRId64
                         " bins",
                         last + 1);
    }
    /* Candidates from the last counted bin down, so the outlier count is a
     * running sum; the first smallest divergence in ascending order wins. */
    for (kept = last + 1; kept >= levels; kept--) {
        const double divergence = candidate_divergence(
            histogram, target, grid[levels - 1], kept, outliers, &scratch);
        if (divergence <= best_divergence) {
            best_divergence = divergence;
            best_kept = kept;
        }
        outliers += histogram->counts[kept - 1];
    }
    fp8q_aligned_free(scratch.centres);
    fp8q_aligned_free(scratch.codes);
    fp8q_aligned_free(scratch.expanded);
    *amax = best_kept < 0 ? histogram->amax
                          : capped_edge(histogram, best_kept - 1);
    return FP8Q_OK;
}

/* ------------------------------------------------------------------------- */
/* MSE                                                                       */

/* Integral of (x - value)^2 over [low, high]. */
static double squared_error_integral(double low, double high, double value)
{
    const double a = low - value;
    const double b = high - value;
    return (b * b * b - a * a * a) / 3.0;
}

/*
 * Expected squared error of rounding the histogram's values to the grid
 * `grid * scale` (levels values, ascending, the last being finfo.max), with
 * saturation above the top. Bin k's values are taken as spread evenly over
 * [k w, min((k + 1) w, amax)] (a point at k w if that is empty).
 */
static double expected_error(const fp8q_histogram *histogram,
                             const float *grid, int levels, double scale,
                             int64_t last)
{
    const double width = fp8q_histogram_bin_width(histogram);
    double total = 0.0;
    int cell = 0; /* grid value whose rounding cell holds the bin's start */
    int64_t bin;

    for (bin = 0; bin <= last; bin++) {
        const double count = (double)histogram->counts[bin];
        const double low = (double)bin * width;
        double high = (double)(bin + 1) * width;
        double start;
        double integral = 0.0;

        if (count == 0.0) {
            continue;
        }
        if (high > (double)histogram->amax) {
            high = (double)histogram->amax;
        }
        /* Cell m holds [mid(m-1, m), mid(m, m+1)); the last is unbounded. */
        while (cell < levels - 1 &&
               low >= 0.5 * ((double)grid[cell] + (double)grid[cell + 1]) *
                          scale) {
            cell++;
        }
        if (high <= low) {
            const double miss = low - (double)grid[cell] * scale;
            total += count * miss * miss;
            continue;
        }
        start = low;
        for (;;) {
            const double value = (double)grid[cell] * scale;
            const double cell_end =
                cell < levels - 1
                    ? 0.5 * ((double)grid[cell] + (double)grid[cell + 1]) *
                          scale
                    : HUGE_VAL;
            const double end = cell_end < high ? cell_end : high;
            integral += squared_error_integral(start, end, value);
            if (end >= high) {
                break;
            }
            start = end;
            cell++;
        }
        /* The next bin starts at or after `high`, so at or after the start
         * of `cell`: the search above only moves forward. */
        total += count * integral / (high - low);
    }
    return total;
}

fp8q_status fp8q_threshold_mse(const fp8q_histogram *histogram,
                               fp8q_dtype target, float *amax,
                               fp8q_error *error)
{
    float grid[POSITIVE_CODES];
    float thresholds[FP8Q_MSE_CANDIDATES];
    double errors[FP8Q_MSE_CANDIDATES];
    double smallest = HUGE_VAL;
    fp8q_status status;
    int levels;
    int64_t last;
    int candidate;
    float best = 0.0f;

    status = check_target(target, error);
    if (status == FP8Q_OK) {
        status = check_counted(histogram, error);
    }
    if (status != FP8Q_OK) {
        return status;
    }
    if (histogram->amax == 0.0f) {
        *amax = 0.0f;
        return FP8Q_OK;
    }
    levels = positive_grid(target, grid);
    last = last_counted_bin(histogram);
    for (candidate = 0; candidate < FP8Q_MSE_CANDIDATES; candidate++) {
        float scale;
        thresholds[candidate] =
            (float)((double)histogram->amax *
                    exp2(-(double)candidate / FP8Q_MSE_CANDIDATES));
        /* The scale quantize would use for this amax (float32 division). */
        scale = thresholds[candidate] / grid[levels - 1];
        errors[candidate] = HUGE_VAL;
        if (scale > 0.0f) {
            errors[candidate] =
                expected_error(histogram, grid, levels, (double)scale, last);
        }
        smallest = errors[candidate] < smallest ? errors[candidate] : smallest;
    }
    /* The largest candidate within the tolerance of the smallest error. */
    for (candidate = 0; candidate < FP8Q_MSE_CANDIDATES; candidate++) {
        if (errors[candidate] <= smallest * (1.0 + FP8Q_MSE_TOLERANCE)) {
            best = thresholds[candidate];
            break;
        }
    }
    *amax = best > 0.0f ? best : histogram->amax;
    return FP8Q_OK;
}
