/*
 * op_checks.c - quantize's, dequantize's and cast's argument checks on
 * dtypes and views, and every operation's stream= check (op_checks.h).
 */
#include "core/op_checks.h"

#include "core/view_layout.h"

fp8q_status fp8q_check_stream_on_cpu(const char *caller, int has_stream,
                                     int on_cpu, fp8q_error *error)
{
    if (!has_stream || !on_cpu) {
        return FP8Q_OK;
    }
    return fp8q_fail(error, FP8Q_ERROR_VALUE,
                     "%s: stream= applies to CUDA tensors; this call runs on "
                     "the CPU (pass stream=None)",
                     caller);
}

fp8q_status fp8q_check_dequantize_data(fp8q_dtype dtype, fp8q_error *error)
{
    if (fp8q_dtype_is_fp8(dtype)) {
        return FP8Q_OK;
    }
    return fp8q_fail(error, FP8Q_ERROR_TYPE,
                     "dequantize: data must have an FP8 dtype, got %s",
                     fp8q_dtype_name(dtype));
}

fp8q_status fp8q_check_quantize_transpose(int transpose, int ndim,
                                          fp8q_error *error)
{
    if (!transpose || ndim == 2) {
        return FP8Q_OK;
    }
    return fp8q_fail(error, FP8Q_ERROR_VALUE,
                     "quantize: transpose=True needs a 2-D x (M, N), got %d "
                     "dimensions",
                     ndim);
}

fp8q_status fp8q_check_amax_out_apart(const char *function,
                                      const fp8q_view *amax,
                                      const fp8q_view *const *views,
                                      const char *const *names, int count,
                                      fp8q_error *error)
{
    int i;

    for (i = 0; i < count; i++) {
        if (views[i] != NULL && fp8q_view_spans_overlap(amax, views[i])) {
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "%s: amax_out= must not share memory with %s",
                             function, names[i]);
        }
    }
    return FP8Q_OK;
}

fp8q_status fp8q_check_cast_scale(int has_scale, fp8q_dtype dtype,
                                  fp8q_error *error)
{
    if (!has_scale || fp8q_dtype_is_fp8(dtype)) {
        return FP8Q_OK;
    }
    return fp8q_fail(error, FP8Q_ERROR_VALUE,
                     "cast: scale= is only allowed when dtype= is an FP8 "
                     "format (it divides before rounding to FP8), got "
                     "dtype=%s; to multiply FP8 data by its scale use "
                     "fp8q.dequantize",
                     fp8q_dtype_name(dtype));
}

fp8q_status fp8q_check_cast_overlap(const fp8q_view *x,
                                    const fp8q_view *scale,
                                    const fp8q_view *out, fp8q_error *error)
{
    if (fp8q_view_overlaps_unsafely(x, out)) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "cast: out= must not overlap x in memory (except as "
                         "the very same elements of the same itemsize), got "
                         "a partially overlapping tensor");
    }
    if (scale != NULL && fp8q_view_overlaps_unsafely(scale, out)) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "cast: out= must not overlap scale= in memory");
    }
    return FP8Q_OK;
}
