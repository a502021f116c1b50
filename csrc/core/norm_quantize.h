/*
 * norm_quantize.h - the fused RMSNorm / LayerNorm + per-token FP8 quantize:
 * its argument block (shared with kernels/norm_quantize.cuh, whose kernel
 * reads the same struct) and its CPU reference.
 *
 * For each row r of x (n_rows rows of row_length contiguous elements):
 *   mean    = 0 (RMSNorm) or float32(sum(x) / row_length) (LayerNorm)
 *   spread  = float32(sum(x^2) / row_length) (RMSNorm) or
 *             float32(sum((x - mean)^2) / row_length) (LayerNorm)
 *   inverse = fp8q_norm_inverse(spread, epsilon)
 *   normed[r, c] = dtype(fp8q_norm_value(x, mean, inverse, weight[c],
 *                                        bias[c]))     (x's dtype)
 *   scale[r], codes[r, :] = fp8q.quantize(normed[r, :], "float8_e4m3fn",
 *                                         granularity="row")
 * with core/norm_formula.h's float32 arithmetic and scale_formula.h's scale
 * (amax / 448; 1 for a zero row); codes round to nearest even and
 * saturate. A row holding NaN or infinity has a NaN amax (NaN wins), hence a
 * NaN scale and NaN codes: its row of any product is NaN (the GPU quantize's
 * contract, kernels/quantize_rows.cuh). The reductions run in float64 on
 * the CPU (in this order: c = 0, 1, ...), in float32 on the GPU (a tree per
 * row), so normed may differ between them by float32's summation error in
 * the statistics (a few ulps of the mean and spread for ordinary rows;
 * LayerNorm's mean can cancel, and a row with |x| above about 1.8e19
 * overflows the GPU's float32 spread to infinity, giving a zero row with
 * scale 1 where the CPU gives finite values, as a float32 RMSNorm in torch
 * would); codes and scale are always exactly the quantize of normed.
 */
#ifndef FP8Q_CORE_NORM_QUANTIZE_H
#define FP8Q_CORE_NORM_QUANTIZE_H

#include <stdint.h>

#include "core/dtype.h"

/* 88 bytes, no padding (kernels/norm_quantize.cu asserts it). */
typedef struct fp8q_norm_quantize_args {
    const void *source; /* x: n_rows * row_length float32 / float16 /
                           bfloat16 elements, C-contiguous               */
    const void *weight; /* row_length elements of weight_dtype         */
    const void *bias;   /* NULL, or row_length elements of weight_dtype */
    void *normed;       /* n_rows * row_length elements of source_dtype */
    uint8_t *codes;     /* n_rows * row_length float8_e4m3fn codes      */
    float *scale;       /* n_rows float32 dequantization scales         */
    int64_t n_rows;     /* >= 0                                         */
    int64_t row_length; /* >= 1                                         */
    int32_t source_dtype; /* FP8Q_FLOAT32, FP8Q_FLOAT16, FP8Q_BFLOAT16  */
    int32_t weight_dtype; /* the same three                             */
    int32_t layer_norm;   /* 0: RMSNorm; nonzero: LayerNorm             */
    float epsilon;        /* added to the spread, >= 0                  */
    float max;            /* float8_e4m3fn's largest value, 448         */
    int32_t reserved;     /* 0                                          */
} fp8q_norm_quantize_args;

#ifndef __CUDACC__
#include "core/device_name.h"
#include "core/status.h"
#include "core/view.h"

/*
 * *args for the call on C-contiguous views: x (..., K), weight (K values,
 * float32 / float16 / bfloat16), bias (NULL or K values of weight's
 * dtype), normed (x's dtype and size), codes (float8_e4m3fn, x's size) and
 * scale (float32, one per row), with `epsilon` and `layer_norm`; the views'
 * devices and layouts are the caller's to check. FP8Q_ERROR_VALUE
 * "norm_quantize: x must have a last axis of at least 1 element", or
 * "norm_quantize: NAME must hold N DTYPE values, got N' DTYPE'" for the
 * first of weight, bias, normed, codes and scale that does not fit (the
 * dtypes themselves are fp8q_norm_quantize_check's), or "norm_quantize:
 * OUTPUT must not share memory with OTHER" for an output whose bytes meet
 * an input's or another output's (fp8q_view_spans_overlap).
 */
fp8q_status fp8q_norm_quantize_describe(
    const fp8q_view *x, const fp8q_view *weight, const fp8q_view *bias,
    const fp8q_view *normed, const fp8q_view *codes, const fp8q_view *scale,
    float epsilon, int layer_norm, fp8q_norm_quantize_args *args,
    fp8q_error *error);

/* A tensor argument `name` of the binding's call (its device `place`,
 * `readonly`): FP8Q_ERROR_VALUE "norm_quantize: NAME is not on x's device"
 * when `x_place` (NULL for x itself) differs, "... must be C-contiguous"
 * (so no two elements share an address), or for an `output` "... is an
 * output and must be writable, got a read-only tensor". */
fp8q_status fp8q_norm_quantize_check_tensor(const char *name,
                                            const fp8q_view *view,
                                            fp8q_place place, int readonly,
                                            const fp8q_place *x_place,
                                            int output, fp8q_error *error);

/* FP8Q_OK when args describes a call the op takes: the dtypes above, a
 * row_length >= 1, n_rows >= 0, a finite epsilon >= 0, non-NULL pointers
 * where rows exist (bias aside); else FP8Q_ERROR_TYPE (a dtype) or
 * FP8Q_ERROR_VALUE naming the problem. */
fp8q_status fp8q_norm_quantize_check(const fp8q_norm_quantize_args *args,
                                     fp8q_error *error);

/* The CPU reference of the contract above (fp8q_norm_quantize_check
 * first). Never fails on the values: non-finite rows give NaN scales. */
fp8q_status fp8q_norm_quantize(const fp8q_norm_quantize_args *args,
                               fp8q_error *error);
#endif

#endif /* FP8Q_CORE_NORM_QUANTIZE_H */
