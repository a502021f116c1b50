/*
 * op_call.c - runs an fp8q_op_call on the CPU or its GPU (cuda/op_call.h).
 */
#include <string.h>

#include "cuda/op_call.h"

#include "core/amax.h"
#include "core/cast.h"
#include "cuda/norm_quantize_ops.h"
#include "cuda/ops.h"

void fp8q_op_call_init(fp8q_op_call *call, fp8q_op_kind kind,
                       const fp8q_view *x, const fp8q_view *out,
                       fp8q_cu_stream stream)
{
    memset(call, 0, sizeof *call);
    call->kind = kind;
    call->x = x;
    call->out = out;
    call->stream = stream;
}

/* The call on the CPU, csrc/core's functions. */
static fp8q_status run_on_cpu(const fp8q_op_call *call, fp8q_error *error)
{
    fp8q_status status;

    switch (call->kind) {
    case FP8Q_OP_CAST:
        /* The amax first: out may be x itself (an in-place cast). */
        status = call->amax != NULL
                     ? fp8q_amax_all(call->x, (float *)call->amax, error)
                     : FP8Q_OK;
        return status != FP8Q_OK
                   ? status
                   : fp8q_cast(call->x, call->out, call->scale,
                               FP8Q_SCALE_DIVIDE, call->saturate, error);
    case FP8Q_OP_AMAX:
        return fp8q_amax(call->x, call->out, error);
    case FP8Q_OP_QUANTIZE:
        return fp8q_quantize(call->x, call->out, call->scale, call->options,
                             error);
    case FP8Q_OP_DEQUANTIZE:
        return fp8q_dequantize(call->x, call->scale, call->granularity,
                               call->out, error);
    default:
        return fp8q_norm_quantize(call->norm, error);
    }
}

/* The call on its GPU, its inputs C-contiguous where the kernels need it. */
static fp8q_status run_on_gpu(const fp8q_op_call *call, fp8q_error *error)
{
    const fp8q_cuda_device *device = call->device;

    switch (call->kind) {
    case FP8Q_OP_CAST:
        return fp8q_cuda_cast(device, call->x, call->scale, call->out,
                              (uint32_t *)call->amax, call->saturate,
                              call->stream, error);
    case FP8Q_OP_AMAX:
        return fp8q_cuda_amax(device, call->x, call->reduce,
                              (uint32_t *)call->out->data, call->stream,
                              error);
    case FP8Q_OP_QUANTIZE:
        return fp8q_cuda_quantize(device, call->x, call->options, call->out,
                                  call->scale, call->stream, error);
    case FP8Q_OP_DEQUANTIZE:
        return fp8q_cuda_dequantize(device, call->x, call->scale,
                                    call->granularity, call->out,
                                    call->stream, error);
    default:
        return fp8q_cuda_norm_quantize(device, call->norm, call->stream,
                                       error);
    }
}

fp8q_status fp8q_op_run(const fp8q_op_call *call, fp8q_error *error)
{
    fp8q_cuda_buffer buffers[2]; /* gathered x, gathered dequantize scale */
    fp8q_view x, scale;
    fp8q_op_call gathered = *call;
    fp8q_status status;

    if (call->device == NULL) {
        return run_on_cpu(call, error);
    }
    if (call->kind != FP8Q_OP_QUANTIZE && call->kind != FP8Q_OP_DEQUANTIZE) {
        return run_on_gpu(call, error);
    }
    /* quantize and dequantize read C-contiguous inputs: strided ones are
     * gathered into temporaries first, released once the call is queued. */
    memset(buffers, 0, sizeof buffers);
    status = fp8q_cuda_contiguous(call->device, call->x, call->stream,
                                  &buffers[0], &x, error);
    gathered.x = &x;
    if (status == FP8Q_OK && call->kind == FP8Q_OP_DEQUANTIZE) {
        status = fp8q_cuda_contiguous(call->device, call->scale, call->stream,
                                      &buffers[1], &scale, error);
        gathered.scale = &scale;
    }
    if (status == FP8Q_OK) {
        status = run_on_gpu(&gathered, error);
    }
    fp8q_cuda_buffer_release(&buffers[0], call->stream);
    fp8q_cuda_buffer_release(&buffers[1], call->stream);
    return status;
}
