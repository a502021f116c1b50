/*
 * op_checks.h - the argument checks of fp8q.quantize, fp8q.dequantize and
 * fp8q.cast that need no Python object (the binding, csrc/python/
 * quantize_op.c and cast_op.c, raises what they report), and the stream=
 * check of every operation. Each returns FP8Q_OK, or a status and the
 * message the Python exception shows.
 */
#ifndef FP8Q_CORE_OP_CHECKS_H
#define FP8Q_CORE_OP_CHECKS_H

#include "core/status.h"
#include "core/view.h"

/* An operation's stream=: FP8Q_ERROR_VALUE when a stream was given
 * (`has_stream`: not None) and the operation runs on the CPU (`on_cpu`),
 * where no stream orders anything ("CALLER: stream= applies to CUDA
 * tensors; this call runs on the CPU (pass stream=None)"). */
fp8q_status fp8q_check_stream_on_cpu(const char *caller, int has_stream,
                                     int on_cpu, fp8q_error *error);

/* dequantize's data: FP8Q_ERROR_TYPE unless `dtype` is an FP8 format. */
fp8q_status fp8q_check_dequantize_data(fp8q_dtype dtype, fp8q_error *error);

/* quantize's transpose=: FP8Q_ERROR_VALUE when `transpose` is set and x has
 * `ndim` != 2 dimensions. */
fp8q_status fp8q_check_quantize_transpose(int transpose, int ndim,
                                          fp8q_error *error);

/* cast's scale=: FP8Q_ERROR_VALUE when `has_scale` and `dtype` (the cast's
 * dtype=) is not an FP8 format. */
fp8q_status fp8q_check_cast_scale(int has_scale, fp8q_dtype dtype,
                                  fp8q_error *error);

/* cast's out=: FP8Q_ERROR_VALUE when `out` overlaps x in memory other than
 * as the very same elements (fp8q_view_overlaps_unsafely), or overlaps
 * `scale` (the broadcast scale; may be NULL) at all unsafely. */
fp8q_status fp8q_check_cast_overlap(const fp8q_view *x,
                                    const fp8q_view *scale,
                                    const fp8q_view *out, fp8q_error *error);

/* An amax_out= (`amax`, one float32) apart from the operation's other
 * tensors: FP8Q_ERROR_VALUE "FUNCTION: amax_out= must not share memory
 * with NAME" for the first of views[0..count) (NULL ones skipped) whose
 * byte span meets amax's (fp8q_view_spans_overlap), names[i] naming it.
 * An amax written into an input would change what is read; into the
 * result, it would be overwritten or overwrite an element. */
fp8q_status fp8q_check_amax_out_apart(const char *function,
                                      const fp8q_view *amax,
                                      const fp8q_view *const *views,
                                      const char *const *names, int count,
                                      fp8q_error *error);

#endif
