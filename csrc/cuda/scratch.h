/*
 * scratch.h - one reused block of device memory per device for the
 * temporaries of GPU operations (scaled_mm's D scale, its block scales in
 * cuBLASLt's layouts, the float32 product of its epilogue paths), so that a
 * repeated call allocates nothing and never synchronizes.
 *
 * Like matmul.c's cuBLASLt workspace: allocated ordered on the caller's
 * stream at first use, grown when a call needs more (the old block freed in
 * the stream's order after its last use), otherwise kept; an event recorded
 * at each release orders the next holder's stream after the last use, so
 * two streams never share it at once. One holder at a time: a call that
 * finds it held gets a block of its own instead, freed at release (correct,
 * only slower), so no lock is held while the holder works. Call without
 * holding Python's GIL.
 *
 * CUDA graph capture (cuda/capture.h): a call on a capturing stream uses
 * the block only when it is already large enough (run the same call once
 * before the capture); growing it is refused with FP8Q_ERROR_CUDA before
 * any driver call. The graph then holds the block's address, so that block
 * is never freed: growth after the capture leaves it allocated and takes a
 * new one, and fp8q_cuda_scratch_empty keeps it. Its events order uses
 * within one capture (cuda/capture.h, fp8q_cuda_shared_order); replays of
 * the graph are not ordered with other calls that use the block.
 */
#ifndef FP8Q_CUDA_SCRATCH_H
#define FP8Q_CUDA_SCRATCH_H

#include <stddef.h>

#include "core/status.h"
#include "cuda/capture.h"
#include "cuda/driver.h"

/* Devices 0 to FP8Q_SCRATCH_MAX_DEVICES - 1 have a reused block. */
#define FP8Q_SCRATCH_MAX_DEVICES 64

typedef struct fp8q_cuda_scratch {
    const fp8q_cuda_device *device;
    void *memory; /* at least the bytes asked for; NULL for 0 bytes */
    int shared;   /* 1: the device's reused block; 0: this call's own */
    /* The stream's capture state when the memory was acquired (a call's
     * own memory is then a graph allocation). */
    fp8q_cuda_capture capture;
} fp8q_cuda_scratch;

/* Where the parts of a call's scratch memory start: the block itself is
 * 256-byte aligned, and so is each part placed at a multiple of
 * fp8q_cuda_scratch_rounded's sizes. */
#define FP8Q_SCRATCH_ALIGNMENT 256

/* `bytes` rounded up to a multiple of FP8Q_SCRATCH_ALIGNMENT. */
size_t fp8q_cuda_scratch_rounded(size_t bytes);

/* At least `bytes` of device memory usable on `stream` until
 * fp8q_cuda_scratch_release (also on failure, which leaves nothing to
 * release). */
fp8q_status fp8q_cuda_scratch_acquire(const fp8q_cuda_device *device,
                                      size_t bytes, fp8q_cu_stream stream,
                                      fp8q_cuda_scratch *scratch,
                                      fp8q_error *error);

/* Gives the memory back after the work queued on `stream` so far (which
 * must include every use of it). Failures cannot be reported (this runs on
 * error paths): the block is then simply not reused. */
void fp8q_cuda_scratch_release(fp8q_cuda_scratch *scratch,
                               fp8q_cu_stream stream);

/*
 * Frees the reused block of device `device_index` (-1: of every device),
 * in stream order after its last use (the legacy default stream waits for
 * the block's event, then frees it there), without synchronizing; the next
 * call that needs scratch memory allocates a new block. A block held by a
 * call at that moment is left alone, and so is one a CUDA graph captured. With a memory pool the memory goes
 * back to the device's default pool (memory.h), not to the system.
 * FP8Q_ERROR_CUDA when the driver refuses the wait (the block is then kept),
 * or when the legacy stream cannot be used (a blocking stream captures).
 */
fp8q_status fp8q_cuda_scratch_empty(int device_index, fp8q_error *error);

#endif /* FP8Q_CUDA_SCRATCH_H */
