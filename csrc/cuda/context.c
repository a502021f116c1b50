/*
 * context.c - the device's primary context made current around driver
 * calls, and the error of a failed driver call (see context.h). Below both
 * memory.c and capture.c, which each call it.
 */
#include "cuda/context.h"

fp8q_status fp8q_cuda_fail(const fp8q_cuda_device *device, const char *call,
                           fp8q_cu_result result, const char *what,
                           fp8q_error *error)
{
    char description[160];

    fp8q_cuda_describe_result(fp8q_cuda_driver_load(), result, description,
                              sizeof description);
    if (result == FP8Q_CUDA_ERROR_OUT_OF_MEMORY) {
        return fp8q_fail(error, FP8Q_ERROR_CUDA_MEMORY,
                         "out of memory on CUDA device %d %s: %s returned %s",
                         device->index, what, call, description);
    }
    return fp8q_fail(error, FP8Q_ERROR_CUDA,
                     "%s failed on CUDA device %d %s: %s", call,
                     device->index, what, description);
}

fp8q_status fp8q_cuda_context_enter(const fp8q_cuda_device *device,
                                    fp8q_error *error)
{
    const fp8q_cu_result result =
        fp8q_cuda_driver_load()->api.ctx_push_current(device->context);
    if (result != FP8Q_CUDA_SUCCESS) {
        return fp8q_cuda_fail(device, "cuCtxPushCurrent", result,
                              "making its primary context current", error);
    }
    return FP8Q_OK;
}

void fp8q_cuda_context_leave(void)
{
    fp8q_cu_context popped = NULL;
    (void)fp8q_cuda_driver_load()->api.ctx_pop_current(&popped);
}
