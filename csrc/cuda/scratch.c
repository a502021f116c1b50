/*
 * scratch.c - each device's reused block of temporary device memory (see
 * scratch.h).
 */
#include "cuda/scratch.h"
#include "cuda/memory.h"
#include "platform.h"

typedef struct scratch_block {
    const fp8q_cuda_device *device; /* set at the first allocation */
    void *memory;
    size_t size;
    fp8q_cu_event last_use; /* recorded at each release */
    int held;
} scratch_block;

static fp8q_once lock_once = FP8Q_ONCE_INIT;
static fp8q_mutex *lock; /* guards `held` only */
static scratch_block blocks[FP8Q_SCRATCH_MAX_DEVICES];

/* Sizes grow to powers of two from 64 KiB, so a server's growing batch
 * sizes reallocate a few times, not at every new shape. */
#define SMALLEST_BLOCK ((size_t)64 << 10)

static void create_lock(void *unused)
{
    (void)unused;
    lock = fp8q_mutex_create();
}

/* Marks the device's block held; 0 when another call holds it (or the
 * device has none). */
static int take_block(int device_index)
{
    int taken = 0;
    fp8q_once_run(&lock_once, create_lock, NULL);
    if (lock == NULL || device_index < 0 ||
        device_index >= FP8Q_SCRATCH_MAX_DEVICES) {
        return 0;
    }
    fp8q_mutex_lock(lock);
    if (!blocks[device_index].held) {
        blocks[device_index].held = 1;
        taken = 1;
    }
    fp8q_mutex_unlock(lock);
    return taken;
}

static void give_block(int device_index)
{
    fp8q_mutex_lock(lock);
    blocks[device_index].held = 0;
    fp8q_mutex_unlock(lock);
}

/* Orders `stream` after the block's last use and grows it to `bytes`.
 * Called by its holder. */
static fp8q_status prepare_block(const fp8q_cuda_device *device,
                                 scratch_block *block, size_t bytes,
                                 fp8q_cu_stream stream, fp8q_error *error)
{
    const fp8q_cuda_api *api = &fp8q_cuda_driver_load()->api;
    const char *call = "cuEventCreate";
    fp8q_cu_result result = FP8Q_CUDA_SUCCESS;
    size_t size = SMALLEST_BLOCK;

    if (fp8q_cuda_context_enter(device, error) != FP8Q_OK) {
        return error->status;
    }
    if (block->last_use == NULL) {
        result = api->event_create(&block->last_use,
                                   FP8Q_CU_EVENT_DISABLE_TIMING);
        if (result != FP8Q_CUDA_SUCCESS) {
            block->last_use = NULL;
        }
    }
    else {
        /* (Never recorded yet: waiting for it waits for nothing.) */
        call = "cuStreamWaitEvent";
        result = api->stream_wait_event(stream, block->last_use, 0);
    }
    fp8q_cuda_context_leave();
    if (result != FP8Q_CUDA_SUCCESS) {
        return fp8q_cuda_fail(device, call, result,
                              "ordering fp8q's scratch memory", error);
    }
    if (block->size >= bytes) {
        return FP8Q_OK;
    }
    while (size < bytes) {
        size *= 2;
    }
    fp8q_cuda_free(device, block->memory, stream); /* after its last use */
    block->memory = NULL;
    block->size = 0;
    if (fp8q_cuda_alloc(device, size, stream, &block->memory, error) !=
        FP8Q_OK) {
        return error->status;
    }
    block->size = size;
    block->device = device;
    return FP8Q_OK;
}

size_t fp8q_cuda_scratch_rounded(size_t bytes)
{
    return (bytes + FP8Q_SCRATCH_ALIGNMENT - 1) / FP8Q_SCRATCH_ALIGNMENT *
           FP8Q_SCRATCH_ALIGNMENT;
}

fp8q_status fp8q_cuda_scratch_acquire(const fp8q_cuda_device *device,
                                      size_t bytes, fp8q_cu_stream stream,
                                      fp8q_cuda_scratch *scratch,
                                      fp8q_error *error)
{
    scratch->device = device;
    scratch->memory = NULL;
    scratch->shared = 0;
    if (bytes == 0) {
        return FP8Q_OK;
    }
    if (!take_block(device->index)) {
        return fp8q_cuda_alloc(device, bytes, stream, &scratch->memory,
                               error);
    }
    if (prepare_block(device, &blocks[device->index], bytes, stream,
                      error) != FP8Q_OK) {
        give_block(device->index);
        return error->status;
    }
    scratch->memory = blocks[device->index].memory;
    scratch->shared = 1;
    return FP8Q_OK;
}

void fp8q_cuda_scratch_release(fp8q_cuda_scratch *scratch,
                               fp8q_cu_stream stream)
{
    const fp8q_cuda_device *device = scratch->device;
    scratch_block *block;
    fp8q_error ignored;
    int recorded = 0;

    if (scratch->memory == NULL) {
        return;
    }
    if (!scratch->shared) {
        fp8q_cuda_free(device, scratch->memory, stream);
        scratch->memory = NULL;
        return;
    }
    block = &blocks[device->index];
    fp8q_error_clear(&ignored);
    if (fp8q_cuda_context_enter(device, &ignored) == FP8Q_OK) {
        recorded = fp8q_cuda_driver_load()->api.event_record(
                       block->last_use, stream) == FP8Q_CUDA_SUCCESS;
        fp8q_cuda_context_leave();
    }
    if (!recorded) {
        /* The next holder could not wait for this use: the block is not
         * reused (freed in this stream's order, after the use). */
        fp8q_cuda_free(device, block->memory, stream);
        block->memory = NULL;
        block->size = 0;
    }
    scratch->memory = NULL;
    give_block(device->index);
}

/* Frees a block its caller holds (fp8q_cuda_scratch_empty). */
static fp8q_status empty_block(scratch_block *block, fp8q_error *error)
{
    fp8q_cu_result result;

    if (block->memory == NULL) {
        return FP8Q_OK; /* (nor is the driver loaded for it) */
    }
    if (fp8q_cuda_context_enter(block->device, error) != FP8Q_OK) {
        return error->status;
    }
    result = fp8q_cuda_driver_load()->api.stream_wait_event(
        NULL, block->last_use, 0);
    fp8q_cuda_context_leave();
    if (result != FP8Q_CUDA_SUCCESS) {
        return fp8q_cuda_fail(block->device, "cuStreamWaitEvent", result,
                              "before freeing fp8q's scratch memory", error);
    }
    fp8q_cuda_free(block->device, block->memory, NULL);
    block->memory = NULL;
    block->size = 0;
    return FP8Q_OK;
}

fp8q_status fp8q_cuda_scratch_empty(int device_index, fp8q_error *error)
{
    int index;
    for (index = 0; index < FP8Q_SCRATCH_MAX_DEVICES; index++) {
        fp8q_status status;
        if ((device_index >= 0 && index != device_index) ||
            !take_block(index)) {
            continue;
        }
        status = empty_block(&blocks[index], error);
        give_block(index);
        if (status != FP8Q_OK) {
            return status;
        }
    }
    return FP8Q_OK;
}
