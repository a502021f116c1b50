/*
 * layer_checks.c - the layer call's checks on views (layer_checks.h).
 */
#include <stdint.h>
#include <string.h>

#include "core/layer_checks.h"
#include "core/op_checks.h"
#include "core/scaled_mm.h"

fp8q_status fp8q_layer_check_x(const char *caller, const fp8q_view *x,
                               int codes, fp8q_error *error)
{
    const fp8q_dtype dtype = x->dtype;

    if (codes ? dtype != FP8Q_FLOAT8_E4M3FN && dtype != FP8Q_FLOAT8_E5M2
              : dtype != FP8Q_FLOAT32 && dtype != FP8Q_FLOAT16 &&
                    dtype != FP8Q_BFLOAT16) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE, "%s: x must be %s, got %s",
                         caller,
                         codes ? "float8_e4m3fn or float8_e5m2 codes"
                               : "float32, float16 or bfloat16",
                         fp8q_dtype_name(dtype));
    }
    if (x->ndim == 0) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: x must have at least one axis (..., "
                         "in_features), got a 0-d tensor",
                         caller);
    }
    return FP8Q_OK;
}

fp8q_status fp8q_layer_check_place(const char *caller, fp8q_place x_place,
                                   fp8q_place place, const char *name,
                                   fp8q_error *error)
{
    char x_device[32], device[32];

    if (place.type == x_place.type && place.index == x_place.index) {
        return FP8Q_OK;
    }
    fp8q_device_format(x_place.type, x_place.index, x_device,
                       sizeof x_device);
    fp8q_device_format(place.type, place.index, device, sizeof device);
    return fp8q_fail(error, FP8Q_ERROR_VALUE,
                     "%s: x is on %s but the layer's %s is on %s; move one "
                     "of them (model.to(\"%s\"))",
                     caller, x_device, name, device,
                     x_place.type == FP8Q_DEVICE_CUDA ? "cuda" : "cpu");
}

fp8q_status fp8q_layer_check_weight(const char *caller,
                                    const fp8q_view *weight,
                                    fp8q_error *error)
{
    if ((weight->dtype != FP8Q_FLOAT8_E4M3FN &&
         weight->dtype != FP8Q_FLOAT8_E5M2) ||
        weight->ndim != 2) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE,
                         "%s: weight must be a 2-D float8_e4m3fn or "
                         "float8_e5m2 tensor, got %d-D %s",
                         caller, weight->ndim, fp8q_dtype_name(weight->dtype));
    }
    return FP8Q_OK;
}

fp8q_status fp8q_layer_check_bias(const char *caller, const fp8q_view *bias,
                                  int64_t out_features, fp8q_error *error)
{
    if (bias->dtype != FP8Q_FLOAT32 && bias->dtype != FP8Q_FLOAT16 &&
        bias->dtype != FP8Q_BFLOAT16) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE,
                         "%s: bias must be float32, float16 or bfloat16, got "
                         "%s",
                         caller, fp8q_dtype_name(bias->dtype));
    }
    if (bias->ndim != 1 || bias->shape[0] != out_features) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: bias must hold out_features = %lld values",
                         caller, (long long)out_features);
    }
    return FP8Q_OK;
}

fp8q_status fp8q_layer_check_input_scale(const char *caller,
                                         const fp8q_view *input_scale,
                                         fp8q_granularity_kind granularity,
                                         fp8q_error *error)
{
    if (input_scale->dtype != FP8Q_FLOAT32 ||
        fp8q_view_size(input_scale) != 1) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: input_scale must be one float32 value", caller);
    }
    if (granularity == FP8Q_GRANULARITY_BLOCK) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: a static input_scale needs \"row\" or "
                         "\"tensor\" weight scales, not \"block\"",
                         caller);
    }
    return FP8Q_OK;
}

fp8q_status fp8q_layer_check_features(const char *caller, const fp8q_view *x,
                                      int64_t in_features, fp8q_error *error)
{
    const int64_t k = x->shape[x->ndim - 1];
    char text[FP8Q_SHAPE_TEXT_SIZE];

    if (k != in_features) {
        fp8q_format_shape(text, sizeof text, x->ndim, x->shape);
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: x has shape %s, but the layer has %lld input "
                         "features (x's last axis)",
                         caller, text, (long long)in_features);
    }
    if (k == 0) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: in_features is 0 (the layer computes that case "
                         "in Python)",
                         caller);
    }
    return FP8Q_OK;
}

fp8q_status fp8q_layer_check_given(const char *caller, const char *name,
                                   const fp8q_view *view, fp8q_dtype dtype,
                                   int64_t rows, int64_t columns,
                                   int64_t alignment, fp8q_error *error)
{
    const int64_t last = view->ndim < 1 ? 0 : view->shape[view->ndim - 1];

    if (view->dtype != dtype) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: quantized %s must be %s, got %s", caller, name,
                         fp8q_dtype_name(dtype), fp8q_dtype_name(view->dtype));
    }
    if (view->ndim < 1 || last != columns ||
        fp8q_view_size(view) != rows * columns) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: quantized %s must have x's %lld rows of %lld "
                         "values (shape (..., %lld)), got %lld values with a "
                         "last axis of %lld",
                         caller, name, (long long)rows, (long long)columns,
                         (long long)columns, (long long)fp8q_view_size(view),
                         (long long)last);
    }
    if (!fp8q_view_is_contiguous(view)) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: quantized %s must be C-contiguous", caller,
                         name);
    }
    if ((uintptr_t)view->data % (uint64_t)alignment != 0) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: quantized %s must start on a %lld-byte "
                         "boundary (the FP8 GEMM reads it so)",
                         caller, name, (long long)alignment);
    }
    return FP8Q_OK;
}

fp8q_status fp8q_layer_check_given_allowed(const char *caller,
                                           int has_input_scale,
                                           fp8q_granularity_kind granularity,
                                           fp8q_error *error)
{
    if (!has_input_scale && granularity != FP8Q_GRANULARITY_BLOCK) {
        return FP8Q_OK;
    }
    return fp8q_fail(error, FP8Q_ERROR_VALUE,
                     "%s: quantized activations need dynamic per-token "
                     "scales (no input_scale, \"row\" or \"tensor\" "
                     "weight scales)",
                     caller);
}

fp8q_status fp8q_layer_weight_granularity(const char *caller,
                                          fp8q_granularity_kind kind,
                                          const fp8q_view *weight,
                                          const fp8q_view *scale,
                                          fp8q_granularity *granularity,
                                          fp8q_error *error)
{
    fp8q_error refusal;
    fp8q_status status;

    memset(granularity, 0, sizeof *granularity);
    granularity->kind = kind;
    if (kind == FP8Q_GRANULARITY_BLOCK) {
        granularity->block_rows = FP8Q_SCALED_MM_BLOCK;
        granularity->block_cols = FP8Q_SCALED_MM_BLOCK;
    }
    fp8q_error_clear(&refusal);
    status = fp8q_check_scale_shape(granularity, weight, scale, &refusal);
    if (status == FP8Q_OK) {
        return FP8Q_OK;
    }
    return fp8q_fail(error, status, "%s: weight_scale: %s", caller,
                     refusal.message);
}

fp8q_status fp8q_layer_refuse_weight_only(const char *caller, int64_t k,
                                          fp8q_error *error)
{
    return fp8q_fail(error, FP8Q_ERROR_VALUE,
                     "%s: weight_only=True on a GPU needs in_features (K = "
                     "%lld) a multiple of 16 and 16-byte aligned x and w; use "
                     "weight_only=False (x quantized) for this shape",
                     caller, (long long)k);
}

fp8q_status fp8q_layer_check_stream(const char *caller, int has_stream,
                                    int from_torch, int on_cpu,
                                    fp8q_error *error)
{
    if (!has_stream || !from_torch) {
        return fp8q_check_stream_on_cpu(caller, has_stream, on_cpu, error);
    }
    return fp8q_fail(error, FP8Q_ERROR_VALUE,
                     "%s: stream must be None for torch tensors: the call "
                     "runs on torch's current stream (choose it with "
                     "torch.cuda.stream(...))",
                     caller);
}

fp8q_status fp8q_layer_check_x_scale(const char *caller, fp8q_dtype dtype,
                                     fp8q_error *error)
{
    if (dtype == FP8Q_FLOAT32) {
        return FP8Q_OK;
    }
    return fp8q_fail(error, FP8Q_ERROR_TYPE,
                     "%s: x's scales must be float32, got %s", caller,
                     fp8q_dtype_name(dtype));
}
