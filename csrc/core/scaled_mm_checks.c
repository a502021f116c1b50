/*
 * scaled_mm_checks.c - scaled_mm's shape and dtype checks on views (see
 * scaled_mm_checks.h).
 */
#include "core/scaled_mm_checks.h"

int fp8q_scaled_mm_out_dtype_ok(fp8q_dtype dtype)
{
    return dtype == FP8Q_BFLOAT16 || dtype == FP8Q_FLOAT16 ||
           dtype == FP8Q_FLOAT32 || dtype == FP8Q_FLOAT8_E4M3FN;
}

fp8q_status fp8q_scaled_mm_check_out_dtype(int given, fp8q_dtype dtype,
                                           fp8q_error *error)
{
    if (fp8q_scaled_mm_out_dtype_ok(dtype)) {
        return FP8Q_OK;
    }
    return fp8q_fail(error, FP8Q_ERROR_TYPE,
                     "scaled_mm: %s " FP8Q_SCALED_MM_OUT_DTYPES ", got %s",
                     given ? "out_dtype must be" : "out= must have dtype",
                     fp8q_dtype_name(dtype));
}

fp8q_status fp8q_scaled_mm_check_matrix(const fp8q_view *operand,
                                        const char *name, fp8q_error *error)
{
    char shape[FP8Q_SHAPE_TEXT_SIZE];

    if (operand->dtype != FP8Q_FLOAT8_E4M3FN &&
        operand->dtype != FP8Q_FLOAT8_E5M2) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE,
                         "scaled_mm: %s must be float8_e4m3fn or float8_e5m2 "
                         "(quantize it first, e.g. with fp8q.quantize), got "
                         "%s",
                         name, fp8q_dtype_name(operand->dtype));
    }
    if (operand->ndim != 2) {
        fp8q_format_shape(shape, sizeof shape, operand->ndim, operand->shape);
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "scaled_mm: %s must be a matrix (2 dimensions), got "
                         "shape %s",
                         name, shape);
    }
    return FP8Q_OK;
}

fp8q_status fp8q_scaled_mm_check_pair(const fp8q_view *a, const fp8q_view *b,
                                      fp8q_error *error)
{
    if (a->dtype == FP8Q_FLOAT8_E5M2 && b->dtype == FP8Q_FLOAT8_E5M2) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE,
                         "scaled_mm: a and b cannot both be float8_e5m2 (FP8 "
                         "matrix multiplies need at least one float8_e4m3fn "
                         "operand, as the hardware does)");
    }
    if (a->shape[1] != b->shape[0]) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "scaled_mm: a is (%lld, %lld) and b is (%lld, %lld): "
                         "a's columns must equal b's rows",
                         (long long)a->shape[0], (long long)a->shape[1],
                         (long long)b->shape[0], (long long)b->shape[1]);
    }
    return FP8Q_OK;
}

fp8q_status fp8q_scaled_mm_check_bias(const fp8q_view *bias, int64_t n,
                                      fp8q_error *error)
{
    char shape[FP8Q_SHAPE_TEXT_SIZE];

    if (bias->dtype != FP8Q_FLOAT32 && bias->dtype != FP8Q_FLOAT16 &&
        bias->dtype != FP8Q_BFLOAT16) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE,
                         "scaled_mm: bias must be float32, float16 or "
                         "bfloat16, got %s",
                         fp8q_dtype_name(bias->dtype));
    }
    if (bias->ndim != 1 || bias->shape[0] != n) {
        fp8q_format_shape(shape, sizeof shape, bias->ndim, bias->shape);
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "scaled_mm: bias must be a vector of N = %lld values "
                         "(one per column of the result), got shape %s",
                         (long long)n, shape);
    }
    return FP8Q_OK;
}

fp8q_status fp8q_scaled_mm_check_scale_result(const fp8q_view *scale_result,
                                              fp8q_dtype out_dtype,
                                              fp8q_error *error)
{
    if (out_dtype != FP8Q_FLOAT8_E4M3FN) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "scaled_mm: scale_result applies to an FP8 result "
                         "(out_dtype=\"float8_e4m3fn\"), but the result is %s",
                         fp8q_dtype_name(out_dtype));
    }
    if (scale_result != NULL && fp8q_view_size(scale_result) != 1) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "scaled_mm: scale_result must be one float32 value, "
                         "got %lld values",
                         (long long)fp8q_view_size(scale_result));
    }
    return FP8Q_OK;
}

fp8q_status fp8q_scaled_mm_check_amax_out(const fp8q_view *amax_out,
                                          int readonly, fp8q_error *error)
{
    char shape[FP8Q_SHAPE_TEXT_SIZE];

    if (amax_out->dtype == FP8Q_FLOAT32 && fp8q_view_size(amax_out) == 1 &&
        !readonly) {
        return FP8Q_OK;
    }
    fp8q_format_shape(shape, sizeof shape, amax_out->ndim, amax_out->shape);
    return fp8q_fail(error, FP8Q_ERROR_VALUE,
                     FP8Q_SCALED_MM_AMAX_OUT_RULE "%s%s tensor of shape %s",
                     readonly ? "a read-only " : "a ",
                     fp8q_dtype_name(amax_out->dtype), shape);
}

fp8q_status fp8q_scaled_mm_check_place(const char *name, fp8q_place place,
                                       fp8q_place a_place, int host_allowed,
                                       fp8q_error *error)
{
    char expected[32], received[32];

    if ((place.type == a_place.type && place.index == a_place.index) ||
        (host_allowed && place.type == FP8Q_DEVICE_CPU)) {
        return FP8Q_OK;
    }
    fp8q_device_format(a_place.type, a_place.index, expected,
                       sizeof expected);
    fp8q_device_format(place.type, place.index, received, sizeof received);
    return fp8q_fail(error, FP8Q_ERROR_VALUE,
                     "scaled_mm: %s is on %s, but a is on %s; %s must be on "
                     "%s%s (tensor.to(...))",
                     name, received, expected, name, expected,
                     host_allowed && a_place.type != FP8Q_DEVICE_CPU
                         ? " or the CPU"
                         : "");
}
