/*
 * layer_checks.h - the argument checks of an fp8q.torch.Linear forward
 * (and of fp8q.linear, the same entry) that are pure shape, dtype and
 * device logic on views: csrc/python/layer_call.c and linear_layer.c
 * import the tensors and raise what these return. Every message starts
 * with `caller`, the entry's name ("fp8q.torch.Linear" or "linear").
 * FP8Q_ERROR_TYPE maps to TypeError, FP8Q_ERROR_VALUE to ValueError.
 */
#ifndef FP8Q_CORE_LAYER_CHECKS_H
#define FP8Q_CORE_LAYER_CHECKS_H

#include <stdint.h>

#include "core/device_name.h"
#include "core/quantize.h"
#include "core/status.h"
#include "core/view.h"

/* x: FP8Q_ERROR_TYPE unless float32, float16 or bfloat16 (with `codes`,
 * fp8q.linear's QTensor x: float8_e4m3fn or float8_e5m2), else
 * FP8Q_ERROR_VALUE when 0-d ("x must have at least one axis (...,
 * in_features), got a 0-d tensor"). */
fp8q_status fp8q_layer_check_x(const char *caller, const fp8q_view *x,
                               int codes, fp8q_error *error);

/* FP8Q_ERROR_VALUE when the layer's tensor `name` is on `place` rather
 * than x's ("x is on cuda:0 but the layer's weight is on cpu; move one of
 * them (model.to(\"cuda\"))"). */
fp8q_status fp8q_layer_check_place(const char *caller, fp8q_place x_place,
                                   fp8q_place place, const char *name,
                                   fp8q_error *error);

/* weight: FP8Q_ERROR_TYPE unless a 2-D float8_e4m3fn or float8_e5m2
 * tensor. */
fp8q_status fp8q_layer_check_weight(const char *caller,
                                    const fp8q_view *weight,
                                    fp8q_error *error);

/* bias: FP8Q_ERROR_TYPE unless float32, float16 or bfloat16, else
 * FP8Q_ERROR_VALUE unless of shape (out_features,). */
fp8q_status fp8q_layer_check_bias(const char *caller, const fp8q_view *bias,
                                  int64_t out_features, fp8q_error *error);

/* input_scale (a static activation scale): FP8Q_ERROR_VALUE unless one
 * float32 value, or when the weight scales are `granularity`
 * FP8Q_GRANULARITY_BLOCK (a static scale needs "row" or "tensor"
 * weights). Its value is the caller's to check. */
fp8q_status fp8q_layer_check_input_scale(const char *caller,
                                         const fp8q_view *input_scale,
                                         fp8q_granularity_kind granularity,
                                         fp8q_error *error);

/* x (..., K) against the weight's in_features: FP8Q_OK when K equals it
 * and is not 0; else FP8Q_ERROR_VALUE ("x has shape (2, 5), but the layer
 * has 4 input features (x's last axis)", or for K = 0 "in_features is 0
 * (the layer computes that case in Python)"). x has at least one axis. */
fp8q_status fp8q_layer_check_features(const char *caller, const fp8q_view *x,
                                      int64_t in_features, fp8q_error *error);

/*
 * Activations the call is given already quantized (fp8q.torch.Linear's
 * quantized=(codes, scale)), `name` "codes" or "scale": FP8Q_ERROR_VALUE
 * unless `view` has `dtype`, a last axis of `columns` and rows * columns
 * values (x's rows, any leading shape), is C-contiguous and starts on an
 * `alignment`-byte boundary (16 for codes: the FP8 GEMM reads them so).
 */
fp8q_status fp8q_layer_check_given(const char *caller, const char *name,
                                   const fp8q_view *view, fp8q_dtype dtype,
                                   int64_t rows, int64_t columns,
                                   int64_t alignment, fp8q_error *error);

/* Whether the call may take activations given already quantized per token
 * (quantized=(codes, scale)): FP8Q_ERROR_VALUE when it has a static
 * input_scale (`has_input_scale`) or "block" weight scales (`granularity`),
 * which need other activation scales. */
fp8q_status fp8q_layer_check_given_allowed(const char *caller,
                                           int has_input_scale,
                                           fp8q_granularity_kind granularity,
                                           fp8q_error *error);

/* The weight scales' granularity: `kind`, with 128x128 blocks
 * (FP8Q_SCALED_MM_BLOCK) for FP8Q_GRANULARITY_BLOCK (block extents 0
 * for the other kinds), into *granularity;
 * then core/quantize.h's fp8q_check_scale_shape of `scale` against
 * `weight`, its message (when it refuses) prefixed by
 * "CALLER: weight_scale: ". */
fp8q_status fp8q_layer_weight_granularity(const char *caller,
                                          fp8q_granularity_kind kind,
                                          const fp8q_view *weight,
                                          const fp8q_view *scale,
                                          fp8q_granularity *granularity,
                                          fp8q_error *error);

/* stream= of the call: FP8Q_ERROR_VALUE when one is given (`has_stream`)
 * for torch tensors (`from_torch`: the call runs on torch's current
 * stream) or for x on the CPU (`on_cpu`, fp8q_check_stream_on_cpu). */
fp8q_status fp8q_layer_check_stream(const char *caller, int has_stream,
                                    int from_torch, int on_cpu,
                                    fp8q_error *error);

/* fp8q.linear's x_scale (its QTensor x's scales): FP8Q_ERROR_TYPE unless
 * `dtype` is float32. */
fp8q_status fp8q_layer_check_x_scale(const char *caller, fp8q_dtype dtype,
                                     fp8q_error *error);

/* fp8q.linear(weight_only=True) on a GPU whose weight-only kernels do not
 * take the call (in_features `k`): always FP8Q_ERROR_VALUE, saying what
 * they need and what to use instead. */
fp8q_status fp8q_layer_refuse_weight_only(const char *caller, int64_t k,
                                          fp8q_error *error);

#endif /* FP8Q_CORE_LAYER_CHECKS_H */
