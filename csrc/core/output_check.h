/*
 * output_check.h - the checks of an operation's output argument (out=)
 * once it is viewed in place: its dtype, device, shape, writability and
 * that no two of its elements share an address, with messages naming the
 * function and the argument. csrc/python/output_arguments.c views the
 * object and raises what this returns.
 */
#ifndef FP8Q_CORE_OUTPUT_CHECK_H
#define FP8Q_CORE_OUTPUT_CHECK_H

#include <stdint.h>

#include "core/device_name.h"
#include "core/status.h"
#include "core/view.h"

/*
 * FP8Q_OK when `out` (on `place`, read-only when `readonly`) has `dtype`,
 * lives on `expected`, has the shape (ndim, shape) and is writable without
 * aliasing (fp8q_view_check_writable); else, in that order of checks,
 * FP8Q_ERROR_TYPE "FUNCTION: ARGUMENT= must have dtype D, got a tensor of
 * dtype E", or FP8Q_ERROR_VALUE "... must be on the inputs' device, cuda:0;
 * got a tensor on cpu", "... must have SHAPE_SOURCE (2, 3), got shape (3,
 * 2)", "... must be writable, got a read-only tensor", or the aliasing
 * refusal named "FUNCTION: ARGUMENT".
 */
fp8q_status fp8q_check_output(const fp8q_view *out, fp8q_place place,
                              int readonly, const char *function,
                              const char *argument, fp8q_dtype dtype,
                              fp8q_place expected, const char *shape_source,
                              int ndim, const int64_t *shape,
                              fp8q_error *error);

/* cast's amax_out=: FP8Q_OK when `amax` (on `place`, read-only when
 * `readonly`) is one writable float32 element on `expected` (x's device);
 * else FP8Q_ERROR_VALUE "cast: amax_out= must be a writable float32 tensor
 * of one element on cpu (x's device), got ..." naming the first problem
 * ("another dtype", "another number of elements", "a read-only tensor",
 * "a tensor on another device"). */
fp8q_status fp8q_check_amax_output(const fp8q_view *amax, fp8q_place place,
                                   int readonly, fp8q_place expected,
                                   fp8q_error *error);

#endif /* FP8Q_CORE_OUTPUT_CHECK_H */
