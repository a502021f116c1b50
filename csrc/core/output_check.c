/*
 * output_check.c - the checks of an output argument viewed in place
 * (output_check.h).
 */
#include <stdio.h>
#include <string.h>

#include "core/output_check.h"

fp8q_status fp8q_check_output(const fp8q_view *out, fp8q_place place,
                              int readonly, const char *function,
                              const char *argument, fp8q_dtype dtype,
                              fp8q_place expected, const char *shape_source,
                              int ndim, const int64_t *shape,
                              fp8q_error *error)
{
    char expected_text[FP8Q_SHAPE_TEXT_SIZE];
    char received_text[FP8Q_SHAPE_TEXT_SIZE];
    char name[64]; /* "function: argument", for the aliasing refusal */

    if (out->dtype != dtype) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE,
                         "%s: %s= must have dtype %s, got a tensor of dtype "
                         "%s",
                         function, argument, fp8q_dtype_name(dtype),
                         fp8q_dtype_name(out->dtype));
    }
    if (place.type != expected.type || place.index != expected.index) {
        fp8q_device_format(expected.type, expected.index, expected_text,
                           sizeof expected_text);
        fp8q_device_format(place.type, place.index, received_text,
                           sizeof received_text);
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: %s= must be on the inputs' device, %s; got a "
                         "tensor on %s",
                         function, argument, expected_text, received_text);
    }
    if (out->ndim != ndim ||
        memcmp(out->shape, shape, (size_t)ndim * sizeof(int64_t)) != 0) {
        fp8q_format_shape(expected_text, sizeof expected_text, ndim, shape);
        fp8q_format_shape(received_text, sizeof received_text, out->ndim,
                          out->shape);
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: %s= must have %s %s, got shape %s", function,
                         argument, shape_source, expected_text,
                         received_text);
    }
    if (readonly) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: %s= must be writable, got a read-only tensor",
                         function, argument);
    }
    if (fp8q_view_check_writable(out, argument, error) == FP8Q_OK) {
        return FP8Q_OK;
    }
    /* Checked again to word the refusal "function: argument"; a view that
     * passes formats no text. */
    (void)snprintf(name, sizeof name, "%s: %s", function, argument);
    return fp8q_view_check_writable(out, name, error);
}

fp8q_status fp8q_check_amax_output(const fp8q_view *amax, fp8q_place place,
                                   int readonly, fp8q_place expected,
                                   fp8q_error *error)
{
    const char *problem =
        amax->dtype != FP8Q_FLOAT32         ? "another dtype"
        : fp8q_view_size(amax) != 1         ? "another number of elements"
        : readonly                          ? "a read-only tensor"
        : place.type != expected.type ||
                place.index != expected.index
            ? "a tensor on another device"
            : NULL;
    char where[32];

    if (problem == NULL) {
        return FP8Q_OK;
    }
    fp8q_device_format(expected.type, expected.index, where, sizeof where);
    return fp8q_fail(error, FP8Q_ERROR_VALUE,
                     "cast: amax_out= must be a writable float32 tensor of "
                     "one element on %s (x's device), got %s",
                     where, problem);
}
