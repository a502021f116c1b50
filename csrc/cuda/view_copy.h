/*
 * view_copy.h - copies of a view's elements between the host and a GPU or
 * within a GPU, for fp8q.Tensor.to / .cpu and the binding's moves of
 * scales (csrc/python/device.c allocates the result tensor and orders the
 * stream; this decides how the elements get there and holds the
 * temporaries a strided source needs). Call without holding Python's GIL.
 */
#ifndef FP8Q_CUDA_VIEW_COPY_H
#define FP8Q_CUDA_VIEW_COPY_H

#include "core/status.h"
#include "core/view.h"
#include "cuda/driver.h"

/*
 * Copies the elements of `source` into `destination`, a C-contiguous run of
 * as many elements of its dtype. Each is host memory (`*_on_host` nonzero)
 * or device memory of `device`, not both host memory; the work is ordered
 * on `stream`, which the caller has ordered after the memory's earlier
 * uses. A C-contiguous source is copied as bytes; a strided one is gathered
 * first: on the GPU for a device source (straight into a device
 * destination, else into a temporary there), on the host (core's bit copy,
 * multithreaded, interruptible) into a temporary host block for a host
 * source. A copy from or to the host is done when this returns (the host
 * memory may be pinned and released right after); one within the GPU is
 * queued. Failures as cuda/memory.h's and cuda/ops.h's.
 */
fp8q_status fp8q_cuda_copy_view(const fp8q_cuda_device *device,
                                const fp8q_view *source, int source_on_host,
                                void *destination, int destination_on_host,
                                fp8q_cu_stream stream, fp8q_error *error);

#endif /* FP8Q_CUDA_VIEW_COPY_H */
