/*
 * histogram_bins.h - the bin rule of fp8q's |x| histograms (histogram.h),
 * the one definition used by the CPU (csrc/core/histogram.c) and the GPU
 * (kernels/calibrate.cu), so that both count every value into the same bin.
 * Plain C that also compiles as CUDA C++ (functions are __host__ __device__
 * under nvcc), like float_codec.h.
 *
 * The grid: bin k counts k * w <= |x| < (k + 1) * w with w = 2^bin_exponent,
 * the smallest power of two that keeps the largest value inside the last
 * bin. The bin of a value is floor(|x| * 2^-bin_exponent) computed in
 * double, where scaling a float32 by a power of two is exact; widening the
 * grid by 2^shift moves bin k to k >> shift, exactly.
 */
#ifndef FP8Q_CORE_HISTOGRAM_BINS_H
#define FP8Q_CORE_HISTOGRAM_BINS_H

#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "core/float_codec.h"

/* bin_exponent before any nonzero value has been counted: every count, if
 * any, is of zeros, in bin 0. */
#define FP8Q_HISTOGRAM_NO_RANGE INT_MIN

/* Bin exponents a histogram may have: wide enough for any float32 amax with
 * any bin count (2^-149 / 2^16 to 2^128). */
#define FP8Q_HISTOGRAM_MIN_EXPONENT (-200)
#define FP8Q_HISTOGRAM_MAX_EXPONENT 128

/* The smallest exponent e with value < n_bins * 2^e (value > 0, finite). */
FP8Q_CODEC int fp8q_histogram_covering_exponent(int64_t n_bins, float value)
{
    int exponent;
    (void)frexp((double)value / (double)n_bins, &exponent);
    /* The division may round; settle e on exact comparisons. */
    while (exponent < FP8Q_HISTOGRAM_MAX_EXPONENT &&
           (double)value >= ldexp((double)n_bins, exponent)) {
        exponent++;
    }
    while ((double)value < ldexp((double)n_bins, exponent - 1)) {
        exponent--;
    }
    return exponent;
}

/* The bin exponent of a histogram of n_bins whose exponent is `exponent`
 * (or FP8Q_HISTOGRAM_NO_RANGE) once it covers `value` (finite, >= 0):
 * widened when value needs it, never narrowed; no range while only zeros
 * have been seen. */
FP8Q_CODEC int fp8q_histogram_covered_exponent(int64_t n_bins, int exponent,
                                               float value)
{
    int needed;
    if (!(value > 0.0f)) {
        return exponent;
    }
    needed = fp8q_histogram_covering_exponent(n_bins, value);
    return exponent == FP8Q_HISTOGRAM_NO_RANGE || needed > exponent
               ? needed
               : exponent;
}

/* The bin of `value` on the grid whose bins are 1 / inverse_width wide
 * (inverse_width = 2^-bin_exponent; 0 without a range, where every finite
 * value is a zero, in bin 0), or n_bins for a value that is not counted:
 * NaN, +-infinity, zero with skip_zeros, and a value beyond the grid
 * (which only data changing between the two passes can produce). */
FP8Q_CODEC int64_t fp8q_histogram_bin(float value, double inverse_width,
                                      int64_t n_bins, int skip_zeros)
{
    const float magnitude = fabsf(value);
    const int finite = magnitude <= 3.40282347e38f;
    const double scaled = (double)(finite ? magnitude : 0.0f) * inverse_width;
    const int counted = finite && scaled < (double)n_bins &&
                        !(skip_zeros && magnitude == 0.0f);
    return counted ? (int64_t)scaled : n_bins;
}

/* Nonzero when fp8q_histogram_bin_float gives fp8q_histogram_bin's bin of
 * every value on the grid of bin exponent `exponent` (or
 * FP8Q_HISTOGRAM_NO_RANGE) with n_bins bins: the inverse width 2^-exponent
 * is a float32 number (exponent >= -127; 0 without a range), and so is
 * n_bins (at most 2^24). */
FP8Q_CODEC int fp8q_histogram_float_rule_applies(int exponent, int64_t n_bins)
{
    return (exponent == FP8Q_HISTOGRAM_NO_RANGE || exponent >= -127) &&
           n_bins <= ((int64_t)1 << 24);
}

/* fp8q_histogram_bin in float32 arithmetic (inverse_width the float32
 * 2^-exponent, or 0), for a grid where fp8q_histogram_float_rule_applies:
 * the same bin for every value. A float32 times a power of two is exact
 * whenever the product is at least 2^-126 and finite, so from there on the
 * comparison with n_bins and the truncation see the double rule's value;
 * below 2^-126 both rules give bin 0 (the product is below 1, and rounding
 * it cannot reach 1); a product past float32's range is infinity here and
 * at least n_bins there: not counted by either. The kernels' cheaper rule
 * (kernels/calibrate.cu); the CPU keeps the double one. */
FP8Q_CODEC int64_t fp8q_histogram_bin_float(float value, float inverse_width,
                                            int64_t n_bins, int skip_zeros)
{
    const float magnitude = fabsf(value);
    const int finite = magnitude <= 3.40282347e38f;
    const float scaled = (finite ? magnitude : 0.0f) * inverse_width;
    const int counted = finite && scaled < (float)n_bins &&
                        !(skip_zeros && magnitude == 0.0f);
    return counted ? (int64_t)(int32_t)scaled : n_bins;
}

/* Where bin `bin` goes when the grid widens by 2^shift (shift >= 0). */
FP8Q_CODEC int64_t fp8q_histogram_widened_bin(int64_t bin, int shift)
{
    return shift >= 63 ? 0 : bin >> shift;
}

#endif /* FP8Q_CORE_HISTOGRAM_BINS_H */
