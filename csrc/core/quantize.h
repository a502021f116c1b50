/*
 * quantize.h - scaled FP8 quantization and dequantization by granularity.
 *
 * Scale convention (DESIGN.md): scale is the float32 dequantization scale,
 * x ~= q * scale. quantize computes q = fp8(float32(x) / scale);
 * dequantize computes float32(q) * scale, rounded once to the output dtype.
 */
#ifndef FP8Q_CORE_QUANTIZE_H
#define FP8Q_CORE_QUANTIZE_H

#include <stdint.h>

#include "core/status.h"
#include "core/view.h"

typedef enum fp8q_granularity_kind {
    FP8Q_GRANULARITY_TENSOR, /* scale shape ()                            */
    FP8Q_GRANULARITY_ROW,    /* x.shape[:-1] + (1,)                       */
    FP8Q_GRANULARITY_COL,    /* (1,) * (ndim - 1) + (x.shape[-1],)        */
    FP8Q_GRANULARITY_BLOCK   /* 2-D x: (ceil(M / rows), ceil(N / cols))   */
} fp8q_granularity_kind;

typedef struct fp8q_granularity {
    fp8q_granularity_kind kind;
    int64_t block_rows; /* FP8Q_GRANULARITY_BLOCK only, >= 1 */
    int64_t block_cols;
} fp8q_granularity;

/* Computes the scale shape for data of shape (ndim, shape). Fails with
 * FP8Q_ERROR_VALUE for a block granularity on non-2-D data, a block extent
 * < 1, or row/col granularity on 0-d data. */
fp8q_status fp8q_scale_shape(const fp8q_granularity *granularity, int ndim,
                             const int64_t *shape, int *scale_ndim,
                             int64_t *scale_shape, fp8q_error *error);

/* FP8Q_OK when `scale` is float32 (FP8Q_ERROR_TYPE otherwise) of exactly
 * the granularity's scale shape for `data`'s shape (FP8Q_ERROR_VALUE naming
 * the expected and received shapes otherwise). */
fp8q_status fp8q_check_scale_shape(const fp8q_granularity *granularity,
                                   const fp8q_view *data,
                                   const fp8q_view *scale, fp8q_error *error);

/* The dtype= of quantize (an FP8 format) or, with `dequantize`, of
 * dequantize (float32, float16 or bfloat16): FP8Q_ERROR_VALUE "quantize:
 * dtype= must be an FP8 format (...), got D" otherwise. */
fp8q_status fp8q_check_quantize_dtype(int dequantize, fp8q_dtype dtype,
                                      fp8q_error *error);

/* FP8Q_ERROR_VALUE for quantize's given scale= whose shape (`given`) does
 * not broadcast to the scale shape (scale_ndim, scale_shape) of
 * granularity=`granularity_text` (as repr() shows it) for x: "quantize:
 * scale= must have shape S (the scale shape of granularity=G for x of
 * shape X) or broadcast to it, got shape Y". */
fp8q_status fp8q_refuse_scale_shape(const char *granularity_text,
                                    const fp8q_view *x, int scale_ndim,
                                    const int64_t *scale_shape,
                                    const fp8q_view *given,
                                    fp8q_error *error);

/*
 * Turns amax values into scales in place (float32 view, any strides) with
 * fp8q_scale_from_amax (core/scale_formula.h, shared with the GPU):
 * scale = float32(amax) / float32(finfo(target).max * 2^-margin), 1.0 where
 * amax is 0, rounded up to a power of two when power_of_2 != 0 (exactly, on
 * the bits; subnormal scales round up on the subnormal grid). A positive
 * amax so small that the division underflows to 0 gets the smallest positive
 * float32 (2^-149), so a scale is never 0. margin is in
 * [-FP8Q_SCALE_MARGIN_LIMIT, FP8Q_SCALE_MARGIN_LIMIT]; each unit doubles the
 * headroom above amax (TransformerEngine's margin). Fails with
 * FP8Q_ERROR_VALUE naming the first group (flat C-order index) whose amax is
 * NaN, infinite or negative or whose scale would overflow float32, before
 * writing anything; FP8Q_ERROR_TYPE for a non-FP8 target.
 */
#define FP8Q_SCALE_MARGIN_LIMIT 64
fp8q_status fp8q_scales_from_amax(const fp8q_view *amax, fp8q_dtype target,
                                  int margin, int power_of_2,
                                  fp8q_error *error);

/* FP8Q_OK when every value of the float32 view `scale` (any strides) is
 * finite and > 0; else FP8Q_ERROR_VALUE naming `argument_name` and the first
 * bad value by flat C-order index (FP8Q_ERROR_TYPE for a non-float32
 * view). */
fp8q_status fp8q_check_scale_values(const fp8q_view *scale,
                                    const char *argument_name,
                                    fp8q_error *error);

typedef struct fp8q_quantize_options {
    fp8q_granularity granularity;
    int compute_scale; /* nonzero: compute `scale` from amax; zero: use it */
    int power_of_2;    /* with compute_scale */
    int saturate;
    /* Nonzero: infinities quantize to the format's NaN code (with their
     * sign) instead of saturating, as a NaN does. Only the GPU quantize
     * with a given tensor scale into float8_e4m3fn / float8_e5m2 takes it
     * (csrc/python/ops_cuda.c; the torch layer's static input scale, whose
     * non-finite tokens must give NaN rows); fp8q_quantize does not read
     * it (the CPU layer flags non-finite rows itself, core/activation.h). */
    int infinity_to_nan;
} fp8q_quantize_options;

/*
 * Quantizes `source` (any dtype) into the FP8 view `destination` (same
 * shape). `scale` is a float32 view of exactly the granularity's scale shape
 * (fp8q_scale_shape; any strides): written when options->compute_scale, read
 * otherwise, in which case every value must be finite and > 0
 * (FP8Q_ERROR_VALUE naming the first bad one, by flat C-order index, and its
 * value). Tensor, row and col scales come from fp8q_amax and fp8q_cast with
 * the scale broadcast; block scales from fp8q_block_amax and
 * fp8q_block_cast.
 */
fp8q_status fp8q_quantize(const fp8q_view *source,
                          const fp8q_view *destination,
                          const fp8q_view *scale,
                          const fp8q_quantize_options *options,
                          fp8q_error *error);

/* destination = float32(data) * scale with the granularity's broadcast,
 * rounded once into destination's dtype. */
fp8q_status fp8q_dequantize(const fp8q_view *data, const fp8q_view *scale,
                            const fp8q_granularity *granularity,
                            const fp8q_view *destination, fp8q_error *error);

#endif /* FP8Q_CORE_QUANTIZE_H */
