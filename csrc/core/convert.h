/*
 * convert.h - element-wise conversion of runs of any dtype through float32.
 *
 * Every dtype fp8q stores converts to float32 exactly, so any cast is "load to
 * float32, optionally divide or multiply by a float32 scale, store with one
 * rounding". These run-level loops are the only place that loops over the
 * scalar codec (core/float_codec.h); cast, amax and quantize are built on them.
 */
#ifndef FP8Q_CORE_CONVERT_H
#define FP8Q_CORE_CONVERT_H

#include <stdint.h>

#include "core/dtype.h"

/* Loads `count` elements of `dtype` starting at `source`, `byte_stride`
 * apart, into the contiguous float32 array `values` (exact). */
void fp8q_load_float32(fp8q_dtype dtype, const char *source,
                       int64_t byte_stride, float *values, int64_t count);

/* Stores `count` float32 values into `dtype` at `destination`, `byte_stride`
 * apart, rounding once (see core/float_codec.h; `saturate` applies to FP8). */
void fp8q_store_float32(fp8q_dtype dtype, const float *values,
                        char *destination, int64_t byte_stride, int64_t count,
                        int saturate);

/* values[i] = values[i] / scale (divide != 0) or values[i] * scale, in
 * place, for i < count, where scale is scales[i] (each != 0) or scales[0]:
 * correctly rounded float32, and a NaN result as fp8q_scaling_result gives
 * it (core/float_codec.h: the same bits on every CPU and on the GPU).
 * `scales` holds count floats (each != 0) or one, and does not overlap
 * `values`. */
void fp8q_scale_float32(float *values, const float *scales, int each,
                        int divide, int64_t count);

/* The store and scale loops compiled for AVX2 where the processor supports it
 * (the default, allow != 0), or the baseline loops (allow == 0), e.g. to
 * test both. The results are identical. The same switch governs the AVX2
 * FP8 decoder and scaled_mm's AVX2 + FMA dot products (whose sums may differ
 * by rounding). */
void fp8q_convert_allow_avx2(int allow);

/* Nonzero when the stores use the AVX2 loops. */
int fp8q_convert_uses_avx2(void);

#endif /* FP8Q_CORE_CONVERT_H */
