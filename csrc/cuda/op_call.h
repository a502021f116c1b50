/*
 * op_call.h - one call of fp8q's element-wise operations (cast, amax,
 * quantize, dequantize, the fused norm + quantize) run on the device that
 * holds its views: csrc/core on the CPU, cuda/ops.h (or
 * cuda/norm_quantize_ops.h) on a GPU. The binding fills an fp8q_op_call
 * from Python objects and runs it without the GIL; which code runs it is
 * decided here, below the binding.
 */
#ifndef FP8Q_CUDA_OP_CALL_H
#define FP8Q_CUDA_OP_CALL_H

#include "core/norm_quantize.h"
#include "core/quantize.h"
#include "core/status.h"
#include "core/view.h"
#include "cuda/driver.h"

typedef enum fp8q_op_kind {
    FP8Q_OP_CAST,
    FP8Q_OP_AMAX,
    FP8Q_OP_QUANTIZE,
    FP8Q_OP_DEQUANTIZE,
    FP8Q_OP_NORM_QUANTIZE
} fp8q_op_kind;

/* The operands of one call; the fields an operation does not name are
 * unused (zero them). */
typedef struct fp8q_op_call {
    fp8q_op_kind kind;
    /* NULL: every view is host memory and the CPU runs the call (csrc/core,
     * multithreaded, interruptible); else every view is device memory of
     * `device` and the call is queued on `stream` (cuda/ops.h), which the
     * caller has ordered after the memory's earlier uses. */
    const fp8q_cuda_device *device;
    fp8q_cu_stream stream;
    /* cast, amax, quantize: x; dequantize: the FP8 data. */
    const fp8q_view *x;
    /* cast: NULL or the divisor (on the CPU broadcast to x's shape, on a
     * GPU as fp8q_cuda_cast takes it); quantize: the scale output (holding
     * the given scale unless options->compute_scale); dequantize: the
     * granularity's scale. */
    const fp8q_view *scale;
    /* cast: out; amax: the keepdims destination; quantize: data;
     * dequantize: the result. */
    const fp8q_view *out;
    /* cast: NULL, or one float32 (host memory on the CPU, device memory on
     * a GPU) receiving max |x| over all of x, as fp8q_amax_all. */
    void *amax;
    const int *reduce;                    /* amax: the reduced axes     */
    const fp8q_quantize_options *options; /* quantize                   */
    const fp8q_granularity *granularity;  /* dequantize                 */
    const fp8q_norm_quantize_args *norm;  /* norm_quantize              */
    int saturate;                         /* cast                       */
} fp8q_op_call;

/* *call with every field zero but kind, x, out and stream. */
void fp8q_op_call_init(fp8q_op_call *call, fp8q_op_kind kind,
                       const fp8q_view *x, const fp8q_view *out,
                       fp8q_cu_stream stream);

/*
 * Runs `call`. On the CPU: cast is, with call->amax, fp8q_amax_all of x
 * (before an in-place cast changes it) then fp8q_cast (FP8Q_SCALE_DIVIDE);
 * amax is fp8q_amax; quantize fp8q_quantize;
 * dequantize fp8q_dequantize; norm_quantize fp8q_norm_quantize. On a GPU:
 * fp8q_cuda_cast, fp8q_cuda_amax, fp8q_cuda_quantize (x any strides: a
 * strided x is gathered into a C-contiguous temporary first),
 * fp8q_cuda_dequantize (data and scale likewise), fp8q_cuda_norm_quantize.
 * Returns what they return (FP8Q_ERROR_INTERRUPTED when the CPU loops were
 * stopped).
 */
fp8q_status fp8q_op_run(const fp8q_op_call *call, fp8q_error *error);

#endif /* FP8Q_CUDA_OP_CALL_H */
