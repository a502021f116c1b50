/*
 * scratch.c - each device's reused block of temporary device memory (see
 * scratch.h).
 */
#include <stdio.h>

#include "cuda/scratch.h"
#include "cuda/memory.h"
#include "platform.h"

typedef struct scratch_block {
    const fp8q_cuda_device *device; /* set at the first allocation */
    void *memory;
    size_t size;
    fp8q_cuda_shared_order order; /* recorded at each release */
    int held;
} scratch_block;

/* Blocks are allocated outside captures. */
static const fp8q_cuda_capture not_captured = {0, 0};

static fp8q_once lock_once = FP8Q_ONCE_INIT;
static fp8q_mutex *lock; /* guards `held` only */
static scratch_block blocks[FP8Q_SCRATCH_MAX_DEVICES];

/* Sizes grow to powers of two from 64 KiB, so a server's growing batch
 * sizes reallocate a few times, not at every new shape. */
#define SMALLEST_BLOCK ((size_t)64 << 10)

/* Marks the device's block held; 0 when another call holds it (or the
 * device has none). */
static int take_block(int device_index)
{
    int taken = 0;
    if (fp8q_mutex_create_once(&lock_once, &lock) == NULL ||
        device_index < 0 ||
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

/* Lets go of the block's memory, freed on `stream` after its last use,
 * or, when a captured graph holds its address, left allocated. */
static void drop_memory(scratch_block *block, fp8q_cu_stream stream)
{
    if (!block->order.captured) {
        fp8q_cuda_free(block->device, block->memory, &not_captured, stream);
    }
    block->memory = NULL;
    block->size = 0;
    block->order.captured = 0;
}

/* Orders `stream` (capturing as `capture` says) after the block's last
 * use and grows it to `bytes` (outside captures only). Called by its
 * holder. */
static fp8q_status prepare_block(const fp8q_cuda_device *device,
                                 scratch_block *block, size_t bytes,
                                 fp8q_cu_stream stream,
                                 const fp8q_cuda_capture *capture,
                                 fp8q_error *error)
{
    fp8q_cuda_capture allocated_in;
    size_t size = SMALLEST_BLOCK;
    char what[160];

    if (capture->capturing && block->size < bytes) {
        (void)snprintf(what, sizeof what,
                       "growing fp8q's scratch memory on CUDA device %d to "
                       "%llu bytes (%llu allocated)",
                       device->index, (unsigned long long)bytes,
                       (unsigned long long)block->size);
        return fp8q_cuda_capture_refuse(
            stream, capture, what,
            "run the same call once before the capture (as "
            "torch.cuda.graph's warm-up does), so that its scratch memory "
            "exists",
            error);
    }
    if (fp8q_cuda_shared_begin(device, &block->order, stream, capture,
                               error) != FP8Q_OK) {
        return error->status;
    }
    if (block->size >= bytes) {
        return FP8Q_OK;
    }
    while (size < bytes) {
        size *= 2;
    }
    drop_memory(block, stream); /* after its last use */
    if (fp8q_cuda_alloc(device, size, stream, &block->memory, &allocated_in,
                        error) != FP8Q_OK) {
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
    scratch->capture = not_captured;
    if (bytes == 0) {
        return FP8Q_OK;
    }
    if (!take_block(device->index)) {
        return fp8q_cuda_alloc(device, bytes, stream, &scratch->memory,
                               &scratch->capture, error);
    }
    if (fp8q_cuda_capture_query(device, stream, &scratch->capture, error) !=
            FP8Q_OK ||
        prepare_block(device, &blocks[device->index], bytes, stream,
                      &scratch->capture, error) != FP8Q_OK) {
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

    if (scratch->memory == NULL) {
        return;
    }
    if (!scratch->shared) {
        fp8q_cuda_free(device, scratch->memory, &scratch->capture, stream);
        scratch->memory = NULL;
        return;
    }
    block = &blocks[device->index];
    fp8q_error_clear(&ignored);
    if (fp8q_cuda_shared_end(device, &block->order, stream,
                             &scratch->capture, &ignored) != FP8Q_OK) {
        /* The next holder could not wait for this use: the block is not
         * reused (freed in this stream's order, after the use). */
        drop_memory(block, stream);
    }
    scratch->memory = NULL;
    give_block(device->index);
}

/* Frees a block its caller holds (fp8q_cuda_scratch_empty), unless a
 * captured graph holds its address. */
static fp8q_status empty_block(scratch_block *block, fp8q_error *error)
{
    fp8q_cuda_capture legacy;
    fp8q_cu_result result;

    if (block->memory == NULL || block->order.captured) {
        return FP8Q_OK; /* (nor is the driver loaded for it) */
    }
    if (fp8q_cuda_capture_query(block->device, NULL, &legacy, error) !=
        FP8Q_OK) {
        return error->status;
    }
    if (fp8q_cuda_context_enter(block->device, error) != FP8Q_OK) {
        return error->status;
    }
    result = fp8q_cuda_driver_load()->api.stream_wait_event(
        NULL, block->order.outside, 0);
    fp8q_cuda_context_leave();
    if (result != FP8Q_CUDA_SUCCESS) {
        return fp8q_cuda_fail(block->device, "cuStreamWaitEvent", result,
                              "before freeing fp8q's scratch memory", error);
    }
    drop_memory(block, NULL);
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
