/*
 * amax.h - maximum absolute value reductions (NaN propagates).
 */
#ifndef FP8Q_CORE_AMAX_H
#define FP8Q_CORE_AMAX_H

#include "core/status.h"
#include "core/view.h"

/*
 * destination = max |source| over the reduced axes, as float32. destination
 * has source's ndim, extent 1 on every reduced axis and source's extent on
 * every kept axis (NumPy keepdims layout; any strides). A NaN anywhere in a
 * group makes that group's result NaN; an empty group gives 0. Multithreaded
 * for large inputs (each thread reduces its own part or its own partial
 * result; no two threads write one element). FP8Q_ERROR_TYPE for a
 * non-float32 destination, FP8Q_ERROR_VALUE for a shape that is not the
 * keepdims shape or a stride-0 destination axis of extent > 1.
 */
fp8q_status fp8q_amax(const fp8q_view *source, const fp8q_view *destination,
                      fp8q_error *error);

/* *amax = max |source| over all of source as fp8q_amax computes it (NaN
 * when source holds a NaN, 0 when it is empty): amax points to one float32
 * of host memory. */
fp8q_status fp8q_amax_all(const fp8q_view *source, float *amax,
                          fp8q_error *error);

/*
 * fp8q_amax over the finite values only: NaN and +-infinity are skipped and
 * their number is written to *n_nonfinite (a group with no finite value gives
 * 0). For calibration, where non-finite inputs are counted, not propagated.
 */
fp8q_status fp8q_amax_finite(const fp8q_view *source,
                             const fp8q_view *destination,
                             int64_t *n_nonfinite, fp8q_error *error);

/*
 * Block amax of a 2-D source (M, N): destination is float32 of shape
 * (ceil(M / block_rows), ceil(N / block_cols)); edge blocks may be partial.
 */
fp8q_status fp8q_block_amax(const fp8q_view *source, int64_t block_rows,
                            int64_t block_cols, const fp8q_view *destination,
                            fp8q_error *error);

#endif /* FP8Q_CORE_AMAX_H */
