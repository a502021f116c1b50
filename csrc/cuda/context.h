/*
 * context.h - the floor below memory.c and capture.c: making a device's
 * primary context current around driver calls, and the FP8Q_ERROR_CUDA of
 * a failed driver call.
 */
#ifndef FP8Q_CUDA_CONTEXT_H
#define FP8Q_CUDA_CONTEXT_H

#include "core/status.h"
#include "cuda/driver.h"

/*
 * Makes the device's primary context current on this thread for driver
 * calls made by the caller (kernel launches, captures); pair with
 * fp8q_cuda_context_leave. FP8Q_ERROR_CUDA when the driver refuses.
 */
fp8q_status fp8q_cuda_context_enter(const fp8q_cuda_device *device,
                                    fp8q_error *error);
void fp8q_cuda_context_leave(void);

/* The FP8Q_ERROR_CUDA (FP8Q_ERROR_CUDA_MEMORY for out of memory) describing a
 * failed driver call `call` on `device`, with `what` (e.g. "copying 64
 * bytes") for context. */
fp8q_status fp8q_cuda_fail(const fp8q_cuda_device *device, const char *call,
                           fp8q_cu_result result, const char *what,
                           fp8q_error *error);

#endif /* FP8Q_CUDA_CONTEXT_H */
