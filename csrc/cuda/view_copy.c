/*
 * view_copy.c - a view's elements copied between the host and a GPU
 * (view_copy.h).
 */
#include <string.h>

#include "cuda/view_copy.h"

#include "core/cast.h"
#include "core/view_layout.h"
#include "cuda/memory.h"
#include "cuda/ops.h"
#include "platform.h"

fp8q_status fp8q_cuda_copy_view(const fp8q_cuda_device *device,
                                const fp8q_view *source, int source_on_host,
                                void *destination, int destination_on_host,
                                fp8q_cu_stream stream, fp8q_error *error)
{
    fp8q_cuda_buffer gathered; /* a strided device source, for the host */
    fp8q_view compact = *source;
    void *host = NULL;         /* a strided host source, gathered */
    fp8q_status status = FP8Q_OK;

    memset(&gathered, 0, sizeof gathered);
    if (fp8q_view_is_contiguous(source)) {
        /* copied as it is */
    }
    else if (!source_on_host && !destination_on_host) {
        return fp8q_cuda_gather(device, source, destination, stream, error);
    }
    else if (!source_on_host) {
        status = fp8q_cuda_contiguous(device, source, stream, &gathered,
                                      &compact, error);
    }
    else {
        status = fp8q_view_alloc_contiguous(&compact, source->dtype,
                                            source->ndim, source->shape,
                                            &host, error);
        /* Between equal dtypes fp8q_cast copies the bits. */
        if (status == FP8Q_OK) {
            status = fp8q_cast(source, &compact, NULL, FP8Q_SCALE_DIVIDE, 1,
                               error);
        }
    }
    if (status == FP8Q_OK) {
        status = fp8q_cuda_copy(device, destination, compact.data,
                                (size_t)fp8q_view_nbytes(source), stream,
                                source_on_host || destination_on_host, error);
    }
    fp8q_cuda_buffer_release(&gathered, stream);
    fp8q_aligned_free(host);
    return status;
}
