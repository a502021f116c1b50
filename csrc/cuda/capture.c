/*
 * capture.c - CUDA graph capture for the GPU backend: the driver's capture
 * state of a stream, the refusal of what cannot run during a capture, and
 * the ordering of shared memory in and out of captures (see capture.h).
 */
#include <stdio.h>

#include "cuda/capture.h"
#include "cuda/context.h"

fp8q_status fp8q_cuda_capture_query(const fp8q_cuda_device *device,
                                    fp8q_cu_stream stream,
                                    fp8q_cuda_capture *capture,
                                    fp8q_error *error)
{
    const fp8q_cuda_api *api = &fp8q_cuda_driver_load()->api;
    fp8q_cu_stream_capture_status status = FP8Q_CU_STREAM_CAPTURE_STATUS_NONE;
    uint64_t id = 0;
    fp8q_cu_result result;

    capture->capturing = 0;
    capture->id = 0;
    if (api->stream_get_capture_info == NULL) {
        return FP8Q_OK;
    }
    /* (The legacy stream is the current context's.) */
    if (fp8q_cuda_context_enter(device, error) != FP8Q_OK) {
        return error->status;
    }
    result = api->stream_get_capture_info(stream, &status, &id, NULL, NULL,
                                          NULL);
    fp8q_cuda_context_leave();
    if (result == FP8Q_CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) {
        return fp8q_fail(error, FP8Q_ERROR_CUDA,
                         "the legacy default stream (stream=None) cannot be "
                         "used on CUDA device %d while a blocking stream "
                         "captures a CUDA graph "
                         "(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT): pass the "
                         "capturing stream, e.g. "
                         "stream=torch.cuda.current_stream()",
                         device->index);
    }
    if (result != FP8Q_CUDA_SUCCESS) {
        return fp8q_cuda_fail(device, "cuStreamGetCaptureInfo", result,
                              "asking whether a stream captures a CUDA graph",
                              error);
    }
    if (status == FP8Q_CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
        return fp8q_fail(error, FP8Q_ERROR_CUDA,
                         "stream 0x%llx of CUDA device %d is in a CUDA graph "
                         "capture that an earlier error invalidated: end "
                         "that capture (cuStreamEndCapture; torch.cuda.graph "
                         "ends it when its block exits) before using the "
                         "stream again",
                         (unsigned long long)(uintptr_t)stream,
                         device->index);
    }
    capture->capturing = status == FP8Q_CU_STREAM_CAPTURE_STATUS_ACTIVE;
    capture->id = capture->capturing ? id : 0;
    return FP8Q_OK;
}

fp8q_status fp8q_cuda_capture_refuse(fp8q_cu_stream stream,
                                     const fp8q_cuda_capture *capture,
                                     const char *what, const char *remedy,
                                     fp8q_error *error)
{
    return fp8q_fail(error, FP8Q_ERROR_CUDA,
                     "%s cannot run while stream 0x%llx is capturing a CUDA "
                     "graph (capture %llu): %s",
                     what, (unsigned long long)(uintptr_t)stream,
                     (unsigned long long)capture->id, remedy);
}

/* Creates *event at first need. */
static fp8q_cu_result made_event(const fp8q_cuda_api *api,
                                 fp8q_cu_event *event)
{
    fp8q_cu_result result;
    if (*event != NULL) {
        return FP8Q_CUDA_SUCCESS;
    }
    result = api->event_create(event, FP8Q_CU_EVENT_DISABLE_TIMING);
    if (result != FP8Q_CUDA_SUCCESS) {
        *event = NULL;
    }
    return result;
}

fp8q_status fp8q_cuda_shared_begin(const fp8q_cuda_device *device,
                                   fp8q_cuda_shared_order *order,
                                   fp8q_cu_stream stream,
                                   const fp8q_cuda_capture *capture,
                                   fp8q_error *error)
{
    const fp8q_cuda_api *api = &fp8q_cuda_driver_load()->api;
    const char *call = "cuStreamWaitEvent";
    fp8q_cu_result result = FP8Q_CUDA_SUCCESS;

    if (capture->capturing) {
        order->captured = 1;
        if (!order->inside_recorded || order->inside_capture != capture->id) {
            return FP8Q_OK; /* no use earlier in this capture */
        }
    }
    if (fp8q_cuda_context_enter(device, error) != FP8Q_OK) {
        return error->status;
    }
    if (capture->capturing) {
        result = api->stream_wait_event(stream, order->inside, 0);
    }
    else if (order->outside == NULL) {
        /* No use yet to wait for: the event is made for the first end. */
        call = "cuEventCreate";
        result = made_event(api, &order->outside);
    }
    else {
        result = api->stream_wait_event(stream, order->outside, 0);
    }
    fp8q_cuda_context_leave();
    if (result != FP8Q_CUDA_SUCCESS) {
        return fp8q_cuda_fail(device, call, result,
                              "ordering memory shared by fp8q's calls",
                              error);
    }
    return FP8Q_OK;
}

fp8q_status fp8q_cuda_shared_end(const fp8q_cuda_device *device,
                                 fp8q_cuda_shared_order *order,
                                 fp8q_cu_stream stream,
                                 const fp8q_cuda_capture *capture,
                                 fp8q_error *error)
{
    const fp8q_cuda_api *api = &fp8q_cuda_driver_load()->api;
    fp8q_cu_event *event = capture->capturing ? &order->inside
                                              : &order->outside;
    const char *call = "cuEventCreate";
    fp8q_cu_result result;

    if (fp8q_cuda_context_enter(device, error) != FP8Q_OK) {
        return error->status;
    }
    result = made_event(api, event);
    if (result == FP8Q_CUDA_SUCCESS) {
        call = "cuEventRecord";
        result = api->event_record(*event, stream);
    }
    fp8q_cuda_context_leave();
    if (result != FP8Q_CUDA_SUCCESS) {
        return fp8q_cuda_fail(device, call, result,
                              "after a use of memory shared by fp8q's calls",
                              error);
    }
    if (capture->capturing) {
        order->inside_capture = capture->id;
        order->inside_recorded = 1;
    }
    return FP8Q_OK;
}
