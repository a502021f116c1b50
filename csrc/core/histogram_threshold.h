/*
 * histogram_threshold.h - choosing a calibration amax from a histogram of |x|
 * (core/histogram.h): percentile, entropy (KL divergence) and MSE searches.
 * docs/calibration.md states each method exactly; the results never exceed
 * the histogram's exact amax. Each fails with FP8Q_ERROR_VALUE on a histogram
 * that has counted nothing.
 */
#ifndef FP8Q_CORE_HISTOGRAM_THRESHOLD_H
#define FP8Q_CORE_HISTOGRAM_THRESHOLD_H

#include "core/dtype.h"
#include "core/histogram.h"
#include "core/status.h"

/* The upper edge of the first bin at which the running count reaches
 * percentile% of the total (running >= percentile / 100 * total, in
 * double, as NumPy's "inverted_cdf" percentile ranks; percentile in
 * (0, 100]), capped at amax. */
fp8q_status fp8q_threshold_percentile(const fp8q_histogram *histogram,
                                      double percentile, float *amax,
                                      fp8q_error *error);

/*
 * TensorRT's EntropyCalibration2 search with the candidate distribution
 * quantized to the FP8 grid of `target`: for every candidate edge i * w
 * (i from the number of non-negative finite values of the format up to the
 * last counted bin + 1), the divergence KL(P || Q) between the histogram
 * clipped at the edge (outliers added to the last kept bin) and the same
 * bins merged by the FP8 code of their centre and spread back evenly over
 * their nonzero bins. Returns the edge of the first smallest divergence,
 * capped at amax (amax itself when there are too few bins to search).
 */
fp8q_status fp8q_threshold_entropy(const fp8q_histogram *histogram,
                                   fp8q_dtype target, float *amax,
                                   fp8q_error *error);

/*
 * Among the candidates amax * 2^(-k / FP8Q_MSE_CANDIDATES), k = 0 ..
 * FP8Q_MSE_CANDIDATES - 1 (from amax down to just above amax / 2), the
 * largest whose expected squared error of quantizing the histogram to
 * `target` with scale candidate / finfo.max (saturating; each bin's values
 * spread evenly over the bin) is within a factor 1 + FP8Q_MSE_TOLERANCE of
 * the smallest: the model's differences below that are within its own
 * accuracy, so they do not justify clipping.
 */
#define FP8Q_MSE_CANDIDATES 128
#define FP8Q_MSE_TOLERANCE 0.01
fp8q_status fp8q_threshold_mse(const fp8q_histogram *histogram,
                               fp8q_dtype target, float *amax,
                               fp8q_error *error);

#endif /* FP8Q_CORE_HISTOGRAM_THRESHOLD_H */
