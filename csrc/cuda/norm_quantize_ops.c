/*
 * norm_quantize_ops.c - the fused norm + per-token quantize's launch on a
 * GPU (norm_quantize_ops.h): its grid, checked arguments and
 * fp8q_cuda_launch_kernel.
 */
#include "norm_quantize.cuh"
#include "cuda/launch.h"
#include "cuda/norm_quantize_ops.h"

/* fp8q_cuda_device's occupancy figures are for blocks of
 * FP8Q_CUDA_THREADS_PER_BLOCK threads; the kernel's grid uses them. */
#if FP8Q_CUDA_THREADS_PER_BLOCK != FP8Q_NORM_QUANTIZE_THREADS
#error "the norm quantize kernel's grid assumes the occupancy's block size"
#endif

fp8q_status fp8q_cuda_norm_quantize(const fp8q_cuda_device *device,
                                    const fp8q_norm_quantize_args *args,
                                    fp8q_cu_stream stream, fp8q_error *error)
{
    const fp8q_status status = fp8q_norm_quantize_check(args, error);

    if (status != FP8Q_OK || args->n_rows == 0) {
        return status;
    }
    return fp8q_cuda_launch_kernel(
        device, FP8Q_KERNEL_NORM_QUANTIZE,
        (unsigned int)(args->n_rows < FP8Q_NORM_QUANTIZE_MAX_GRID
                           ? args->n_rows
                           : FP8Q_NORM_QUANTIZE_MAX_GRID),
        1u, FP8Q_NORM_QUANTIZE_THREADS, args, stream, error);
}
