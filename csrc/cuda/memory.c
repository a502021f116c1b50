/*
 * memory.c - device memory, copies, fills and stream ordering through the
 * driver API, each inside the device's primary context (see memory.h).
 */
#include <stdint.h>
#include <stdio.h>

#include "cuda/memory.h"

/* The device pointer type of the driver for a host-side address. */
static fp8q_cu_deviceptr device_address(const void *pointer)
{
    return (fp8q_cu_deviceptr)(uintptr_t)pointer;
}

/* ------------------------------------------------------------------------- */
/* Allocation                                                                */

fp8q_status fp8q_cuda_alloc(const fp8q_cuda_device *device, size_t bytes,
                            fp8q_cu_stream stream, void **pointer,
                            fp8q_cuda_capture *capture, fp8q_error *error)
{
    const fp8q_cuda_api *api = &fp8q_cuda_driver_load()->api;
    fp8q_cu_deviceptr address = 0;
    fp8q_cu_result result;
    char what[128];

    *pointer = NULL;
    capture->capturing = 0;
    capture->id = 0;
    if (bytes == 0) {
        return FP8Q_OK;
    }
    if (fp8q_cuda_capture_query(device, stream, capture, error) != FP8Q_OK) {
        return error->status;
    }
    if (capture->capturing && !device->memory_pools) {
        (void)snprintf(what, sizeof what,
                       "allocating %llu bytes with cuMemAlloc (CUDA device "
                       "%d has no stream-ordered memory pool)",
                       (unsigned long long)bytes, device->index);
        return fp8q_cuda_capture_refuse(
            stream, capture, what,
            "allocate before the capture (pass out= where the call has it)",
            error);
    }
    if (fp8q_cuda_context_enter(device, error) != FP8Q_OK) {
        return error->status;
    }
    result = device->memory_pools ? api->mem_alloc_async(&address, bytes, stream)
                                  : api->mem_alloc(&address, bytes);
    fp8q_cuda_context_leave();
    if (result != FP8Q_CUDA_SUCCESS) {
        (void)snprintf(what, sizeof what, "allocating %llu bytes",
                       (unsigned long long)bytes);
        return fp8q_cuda_fail(device,
                              device->memory_pools ? "cuMemAllocAsync"
                                                   : "cuMemAlloc",
                              result, what, error);
    }
    *pointer = (void *)(uintptr_t)address;
    return FP8Q_OK;
}

void fp8q_cuda_free(const fp8q_cuda_device *device, void *pointer,
                    const fp8q_cuda_capture *allocated_in,
                    fp8q_cu_stream stream)
{
    const fp8q_cuda_api *api = &fp8q_cuda_driver_load()->api;
    fp8q_cuda_capture capture;
    fp8q_error ignored;

    if (pointer == NULL) {
        return;
    }
    fp8q_error_clear(&ignored);
    if (fp8q_cuda_capture_query(device, stream, &capture, &ignored) !=
            FP8Q_OK ||
        (capture.capturing &&
         !(allocated_in->capturing && allocated_in->id == capture.id))) {
        return; /* kept (memory.h) */
    }
    if (fp8q_cuda_context_enter(device, &ignored) != FP8Q_OK) {
        return;
    }
    if (device->memory_pools) {
        (void)api->mem_free_async(device_address(pointer), stream);
    }
    else {
        (void)api->mem_free(device_address(pointer));
    }
    fp8q_cuda_context_leave();
}

/* ------------------------------------------------------------------------- */
/* Copies and fills                                                          */

fp8q_status fp8q_cuda_copy(const fp8q_cuda_device *device, void *destination,
                           const void *source, size_t bytes,
                           fp8q_cu_stream stream, int synchronize,
                           fp8q_error *error)
{
    const fp8q_cuda_api *api = &fp8q_cuda_driver_load()->api;
    const char *call = "cuMemcpyAsync";
    fp8q_cu_result result = FP8Q_CUDA_SUCCESS;
    char what[128];

    if (bytes == 0 && !synchronize) {
        return FP8Q_OK;
    }
    if (synchronize) {
        fp8q_cuda_capture capture;
        if (fp8q_cuda_capture_query(device, stream, &capture, error) !=
            FP8Q_OK) {
            return error->status;
        }
        if (capture.capturing) {
            (void)snprintf(what, sizeof what,
                           "copying %llu bytes between host memory and the "
                           "GPU (which waits for the stream)",
                           (unsigned long long)bytes);
            return fp8q_cuda_capture_refuse(
                stream, &capture, what,
                "pass scales, bias and other operands as tensors already on "
                "the GPU, or copy them before the capture",
                error);
        }
    }
    if (fp8q_cuda_context_enter(device, error) != FP8Q_OK) {
        return error->status;
    }
    if (bytes > 0) {
        result = api->memcpy_async(device_address(destination),
                                   device_address(source), bytes, stream);
    }
    if (result == FP8Q_CUDA_SUCCESS && synchronize) {
        call = "cuStreamSynchronize";
        result = api->stream_synchronize(stream);
    }
    fp8q_cuda_context_leave();
    if (result != FP8Q_CUDA_SUCCESS) {
        (void)snprintf(what, sizeof what, "copying %llu bytes",
                       (unsigned long long)bytes);
        return fp8q_cuda_fail(device, call, result, what, error);
    }
    return FP8Q_OK;
}

/* Sets `count` elements of `size` bytes (1 or 4) from `destination` to
 * `value` in the stream's order (cuMemsetD8Async, cuMemsetD32Async). */
static fp8q_status fill(const fp8q_cuda_device *device, void *destination,
                        uint32_t value, int size, size_t count,
                        fp8q_cu_stream stream, fp8q_error *error)
{
    const fp8q_cuda_api *api = &fp8q_cuda_driver_load()->api;
    fp8q_cu_result result;
    char what[96];

    if (count == 0) {
        return FP8Q_OK;
    }
    if (fp8q_cuda_context_enter(device, error) != FP8Q_OK) {
        return error->status;
    }
    result = size == 1 ? api->memset_d8_async(device_address(destination),
                                              (unsigned char)value, count,
                                              stream)
                       : api->memset_d32_async(device_address(destination),
                                               value, count, stream);
    fp8q_cuda_context_leave();
    if (result != FP8Q_CUDA_SUCCESS) {
        (void)snprintf(what, sizeof what, "filling %llu %s",
                       (unsigned long long)count,
                       size == 1 ? "bytes" : "4-byte words");
        return fp8q_cuda_fail(device,
                              size == 1 ? "cuMemsetD8Async"
                                        : "cuMemsetD32Async",
                              result, what, error);
    }
    return FP8Q_OK;
}

fp8q_status fp8q_cuda_fill(const fp8q_cuda_device *device, void *destination,
                           unsigned char byte, size_t bytes,
                           fp8q_cu_stream stream, fp8q_error *error)
{
    return fill(device, destination, byte, 1, bytes, stream, error);
}

fp8q_status fp8q_cuda_fill_words(const fp8q_cuda_device *device,
                                 void *destination, uint32_t word,
                                 size_t count, fp8q_cu_stream stream,
                                 fp8q_error *error)
{
    return fill(device, destination, word, 4, count, stream, error);
}

fp8q_status fp8q_cuda_zero(const fp8q_cuda_device *device, void *destination,
                           size_t bytes, fp8q_cu_stream stream,
                           fp8q_error *error)
{
    return fp8q_cuda_fill(device, destination, 0, bytes, stream, error);
}

/* ------------------------------------------------------------------------- */
/* Streams                                                                   */

fp8q_status fp8q_cuda_synchronize(const fp8q_cuda_device *device,
                                  fp8q_cu_stream stream, fp8q_error *error)
{
    fp8q_cuda_capture capture;
    fp8q_cu_result result;

    if (fp8q_cuda_capture_query(device, stream, &capture, error) != FP8Q_OK) {
        return error->status;
    }
    if (capture.capturing) {
        return fp8q_cuda_capture_refuse(
            stream, &capture, "waiting for the stream's work",
            "synchronize after the capture ends", error);
    }
    if (fp8q_cuda_context_enter(device, error) != FP8Q_OK) {
        return error->status;
    }
    result = fp8q_cuda_driver_load()->api.stream_synchronize(stream);
    fp8q_cuda_context_leave();
    if (result != FP8Q_CUDA_SUCCESS) {
        return fp8q_cuda_fail(device, "cuStreamSynchronize", result,
                              "waiting for a stream", error);
    }
    return FP8Q_OK;
}

/* The legacy default stream has two spellings. */
static fp8q_cu_stream canonical_stream(fp8q_cu_stream stream)
{
    return stream == NULL ? FP8Q_CU_STREAM_LEGACY : stream;
}

fp8q_cu_stream fp8q_cuda_last_use_stream(fp8q_cu_stream stream)
{
    return stream == FP8Q_CU_STREAM_PER_THREAD ? FP8Q_CU_STREAM_LEGACY
                                               : stream;
}

/* The rule of fp8q_cuda_stream_wait (memory.h) during captures: 1 when
 * `consumer` must wait for `producer`, 0 when it must not, -1 with *error
 * set when it cannot run. */
static int capture_rule(const fp8q_cuda_device *device,
                        fp8q_cu_stream producer, fp8q_cu_stream consumer,
                        fp8q_error *error)
{
    fp8q_cuda_capture consumer_capture;
    fp8q_cuda_capture producer_capture;

    if (fp8q_cuda_capture_query(device, consumer, &consumer_capture,
                                error) != FP8Q_OK) {
        return -1;
    }
    /* (Asked about while a blocking stream captures, the legacy stream,
     * which never captures, would fail.) */
    if (consumer_capture.capturing &&
        canonical_stream(producer) == FP8Q_CU_STREAM_LEGACY) {
        return 0;
    }
    if (fp8q_cuda_capture_query(device, producer, &producer_capture,
                                error) != FP8Q_OK) {
        return -1;
    }
    if (consumer_capture.capturing && producer_capture.capturing &&
        producer_capture.id != consumer_capture.id) {
        (void)fp8q_fail(error, FP8Q_ERROR_CUDA,
                        "stream 0x%llx is capturing a CUDA graph (capture "
                        "%llu) and the memory was last used on stream "
                        "0x%llx, which is capturing another graph (capture "
                        "%llu): one capture cannot be ordered after another "
                        "(that would invalidate both); use the tensor in "
                        "one capture at a time",
                        (unsigned long long)(uintptr_t)consumer,
                        (unsigned long long)consumer_capture.id,
                        (unsigned long long)(uintptr_t)producer,
                        (unsigned long long)producer_capture.id);
        return -1;
    }
    if (!consumer_capture.capturing && producer_capture.capturing) {
        (void)fp8q_cuda_capture_refuse(
            producer, &producer_capture,
            "using memory last used on that stream from another stream",
            "its work there runs only when the graph is replayed; use the "
            "tensor on the capturing stream, or after the capture ends",
            error);
        return -1;
    }
    return producer_capture.capturing == consumer_capture.capturing;
}

fp8q_status fp8q_cuda_stream_wait(const fp8q_cuda_device *device,
                                  fp8q_cu_stream producer,
                                  fp8q_cu_stream consumer, fp8q_error *error)
{
    const fp8q_cuda_api *api = &fp8q_cuda_driver_load()->api;
    fp8q_cu_event event = NULL;
    const char *call = "cuEventCreate";
    fp8q_cu_result result;
    int wait;

    if (canonical_stream(producer) == canonical_stream(consumer)) {
        return FP8Q_OK;
    }
    wait = capture_rule(device, producer, consumer, error);
    if (wait <= 0) {
        return wait < 0 ? error->status : FP8Q_OK;
    }
    if (fp8q_cuda_context_enter(device, error) != FP8Q_OK) {
        return error->status;
    }
    result = api->event_create(&event, FP8Q_CU_EVENT_DISABLE_TIMING);
    if (result == FP8Q_CUDA_SUCCESS) {
        call = "cuEventRecord";
        result = api->event_record(event, producer);
        if (result == FP8Q_CUDA_SUCCESS) {
            call = "cuStreamWaitEvent";
            result = api->stream_wait_event(consumer, event, 0);
        }
        /* The wait holds what it needs: the event may go at once. */
        (void)api->event_destroy(event);
    }
    fp8q_cuda_context_leave();
    if (result != FP8Q_CUDA_SUCCESS) {
        return fp8q_cuda_fail(device, call, result,
                              "ordering one stream after another", error);
    }
    return FP8Q_OK;
}
