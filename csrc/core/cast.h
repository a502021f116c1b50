/*
 * cast.h - casts between any two dtypes, optionally with a float32 scale.
 */
#ifndef FP8Q_CORE_CAST_H
#define FP8Q_CORE_CAST_H

#include "core/status.h"
#include "core/view.h"

typedef enum fp8q_scale_op {
    FP8Q_SCALE_DIVIDE,  /* quantize:   value = float32(x) / scale */
    FP8Q_SCALE_MULTIPLY /* dequantize: value = float32(x) * scale */
} fp8q_scale_op;

/*
 * destination[i] = store(load(source[i]) op scale[i]), rounding once on store.
 * source and destination have the same shape (any dtypes, any strides; they
 * must not partially overlap; the very same view for both is fine). `scale`
 * is NULL (no scaling) or a float32 view broadcastable to that shape. The
 * division and multiplication are correctly rounded float32 operations. A
 * same-dtype cast without a scale copies the bits (NaN payloads kept).
 * FP8Q_ERROR_VALUE for mismatched shapes, an unbroadcastable scale, or a
 * destination with stride 0 on an axis of extent > 1; FP8Q_ERROR_TYPE for a
 * non-float32 scale. Multithreaded for large inputs.
 */
fp8q_status fp8q_cast(const fp8q_view *source, const fp8q_view *destination,
                      const fp8q_view *scale, fp8q_scale_op op, int saturate,
                      fp8q_error *error);

/*
 * The same for 2-D source/destination (M, N) with one scale per block of
 * block_rows x block_cols elements: scale is float32 of shape
 * (ceil(M / block_rows), ceil(N / block_cols)); element (i, j) uses
 * scale[i / block_rows, j / block_cols]. Edge blocks may be partial.
 */
fp8q_status fp8q_block_cast(const fp8q_view *source,
                            const fp8q_view *destination,
                            const fp8q_view *scale, int64_t block_rows,
                            int64_t block_cols, fp8q_scale_op op, int saturate,
                            fp8q_error *error);

#endif /* FP8Q_CORE_CAST_H */
