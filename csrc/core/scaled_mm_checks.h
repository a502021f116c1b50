/*
 * scaled_mm_checks.h - the argument checks of fp8q.scaled_mm that are pure
 * shape and dtype logic on views (the binding, csrc/python/scaled_mm.c,
 * imports the objects, checks devices and raises what these return). Each
 * message starts "scaled_mm: " and names the argument, as the Python
 * function's errors do (docs/scaled_mm.md). FP8Q_ERROR_TYPE maps to
 * TypeError, FP8Q_ERROR_VALUE to ValueError.
 */
#ifndef FP8Q_CORE_SCALED_MM_CHECKS_H
#define FP8Q_CORE_SCALED_MM_CHECKS_H

#include <stdint.h>

#include "core/device_name.h"
#include "core/status.h"
#include "core/view.h"

/* The result dtypes scaled_mm produces, as its messages list them. */
#define FP8Q_SCALED_MM_OUT_DTYPES "bfloat16, float16, float32 or float8_e4m3fn"

/* Nonzero when `dtype` is one of FP8Q_SCALED_MM_OUT_DTYPES. */
int fp8q_scaled_mm_out_dtype_ok(fp8q_dtype dtype);

/* The result's dtype, given as out_dtype (`given`) or taken from out=:
 * FP8Q_ERROR_TYPE unless one of FP8Q_SCALED_MM_OUT_DTYPES ("scaled_mm:
 * out_dtype must be ..., got float8_e5m2", or "scaled_mm: out= must have
 * dtype ..., got uint8" when taken from out=). */
fp8q_status fp8q_scaled_mm_check_out_dtype(int given, fp8q_dtype dtype,
                                           fp8q_error *error);

/* An FP8 matrix operand named `name` ("a" or "b"): FP8Q_ERROR_TYPE unless
 * float8_e4m3fn or float8_e5m2 ("scaled_mm: a must be float8_e4m3fn or
 * float8_e5m2 (quantize it first, e.g. with fp8q.quantize), got float32"),
 * else FP8Q_ERROR_VALUE unless 2-D ("scaled_mm: a must be a matrix (2
 * dimensions), got shape (5,)"). */
fp8q_status fp8q_scaled_mm_check_matrix(const fp8q_view *operand,
                                        const char *name, fp8q_error *error);

/* a (M, K) and b (K', N), each already a checked matrix: FP8Q_ERROR_TYPE
 * when both are float8_e5m2, else FP8Q_ERROR_VALUE when K != K' ("scaled_mm:
 * a is (4, 5) and b is (4, 3): a's columns must equal b's rows"). */
fp8q_status fp8q_scaled_mm_check_pair(const fp8q_view *a, const fp8q_view *b,
                                      fp8q_error *error);

/* bias for a result of n columns: FP8Q_ERROR_TYPE unless float32, float16
 * or bfloat16, else FP8Q_ERROR_VALUE unless of shape (n,). */
fp8q_status fp8q_scaled_mm_check_bias(const fp8q_view *bias, int64_t n,
                                      fp8q_error *error);

/* scale_result for a result of `out_dtype`: FP8Q_ERROR_VALUE unless
 * out_dtype is float8_e4m3fn ("scaled_mm: scale_result applies to an FP8
 * result ...") or, when `scale_result` is not NULL, unless it holds exactly
 * one value. Its dtype (float32) and values are the caller's to check. */
fp8q_status fp8q_scaled_mm_check_scale_result(const fp8q_view *scale_result,
                                              fp8q_dtype out_dtype,
                                              fp8q_error *error);

/* amax_out: FP8Q_ERROR_VALUE unless one writable (`readonly` 0) float32
 * element of any shape, the message saying what it is instead ("got a
 * read-only float32 tensor of shape (1,)"). */
fp8q_status fp8q_scaled_mm_check_amax_out(const fp8q_view *amax_out,
                                          int readonly, fp8q_error *error);

/* `name`'s device `place` against a's, `a_place`: FP8Q_OK when they are
 * the same, or when `host_allowed` and `place` is the CPU (the value is
 * then copied over); else FP8Q_ERROR_VALUE ("scaled_mm: b is on cpu, but a
 * is on cuda:0; b must be on cuda:0 (tensor.to(...))", " or the CPU"
 * added where the host is allowed). */
fp8q_status fp8q_scaled_mm_check_place(const char *name, fp8q_place place,
                                       fp8q_place a_place, int host_allowed,
                                       fp8q_error *error);

/* The start of amax_out's refusal, before what was given. */
#define FP8Q_SCALED_MM_AMAX_OUT_RULE                                        \
    "scaled_mm: amax_out= must be one writable float32 element on a's "    \
    "device (e.g. numpy.zeros(1, numpy.float32) for CPU operands), got "

#endif /* FP8Q_CORE_SCALED_MM_CHECKS_H */
