/*
 * memory.h - device memory and stream ordering for the GPU backend:
 * stream-ordered allocation, copies between host and device, fills, stream
 * synchronisation and making one stream wait for another.
 *
 * Every function takes a device opened by fp8q_cuda_device_open, makes its
 * primary context current for the duration of the call (and restores the
 * caller's), and reports driver failures as FP8Q_ERROR_CUDA (out of memory
 * as FP8Q_ERROR_CUDA_MEMORY) naming the device, the driver call and its
 * result.
 * Streams are driver handles: NULL or FP8Q_CU_STREAM_LEGACY is the legacy
 * default stream. Call without holding Python's GIL.
 */
#ifndef FP8Q_CUDA_MEMORY_H
#define FP8Q_CUDA_MEMORY_H

#include <stddef.h>

#include <stdint.h>

#include "core/status.h"
#include "cuda/capture.h"
#include "cuda/context.h"
#include "cuda/driver.h"

/*
 * Allocates `bytes` of device memory, ordered on `stream`: from the device's
 * default memory pool (cuMemAllocAsync) where the device has one, else with
 * cuMemAlloc. The memory is usable by work on `stream` at once, and by other
 * streams once they are ordered after it. 0 bytes gives *pointer = NULL and
 * no call. The driver aligns the memory for 16-byte vector accesses.
 * *capture is `stream`'s capture state: while the stream captures a CUDA
 * graph the allocation is the graph's (a memory node: its address is fixed
 * for the graph's life, its memory mapped while a replay runs and until it
 * is freed), and fp8q_cuda_free must be given that state back. A device
 * without a memory pool cannot allocate during a capture (cuMemAlloc would
 * invalidate it): FP8Q_ERROR_CUDA saying so, before any allocation.
 */
fp8q_status fp8q_cuda_alloc(const fp8q_cuda_device *device, size_t bytes,
                            fp8q_cu_stream stream, void **pointer,
                            fp8q_cuda_capture *capture, fp8q_error *error);

/*
 * Frees memory from fp8q_cuda_alloc (allocated while `stream` was in the
 * capture state `allocated_in`), ordered on `stream` (the stream of its last
 * use): the memory returns to the pool when the stream's earlier work is
 * done. NULL is ignored. While `stream` captures a graph, only memory
 * allocated in that same capture is freed (a free node of the graph); other
 * memory is kept for the life of the process, since the graph may use it at
 * every replay and the driver refuses to free it in a capture. Memory is
 * kept too when `stream` cannot be used now (the legacy default stream
 * while a blocking stream captures). Failures cannot be reported (this runs
 * from destructors) and are ignored: they only leak.
 */
void fp8q_cuda_free(const fp8q_cuda_device *device, void *pointer,
                    const fp8q_cuda_capture *allocated_in,
                    fp8q_cu_stream stream);

/*
 * Copies `bytes` from `source` to `destination` (each host or device memory
 * of this device; the direction follows from the addresses), ordered on
 * `stream`. With `synchronize` nonzero, returns only when the copy (and all
 * earlier work on the stream) is done: required before reading a
 * device-to-host result, or before releasing the host side of a copy; such
 * a copy is refused (FP8Q_ERROR_CUDA, before any copy) while `stream`
 * captures a CUDA graph. Copies between device memory capture as graph
 * nodes.
 */
fp8q_status fp8q_cuda_copy(const fp8q_cuda_device *device, void *destination,
                           const void *source, size_t bytes,
                           fp8q_cu_stream stream, int synchronize,
                           fp8q_error *error);

/* Sets `bytes` bytes of device memory to `byte`, ordered on `stream`. */
fp8q_status fp8q_cuda_fill(const fp8q_cuda_device *device, void *destination,
                           unsigned char byte, size_t bytes,
                           fp8q_cu_stream stream, fp8q_error *error);

/* Sets `count` 4-byte words of device memory to `word` (e.g. a float32's
 * bits), ordered on `stream`. */
fp8q_status fp8q_cuda_fill_words(const fp8q_cuda_device *device,
                                 void *destination, uint32_t word,
                                 size_t count, fp8q_cu_stream stream,
                                 fp8q_error *error);

/* Sets `bytes` bytes of device memory to zero (the value 0 in every fp8q
 * dtype, and an amax's starting point), ordered on `stream`. */
fp8q_status fp8q_cuda_zero(const fp8q_cuda_device *device, void *destination,
                           size_t bytes, fp8q_cu_stream stream,
                           fp8q_error *error);

/* Waits until all work queued on `stream` is done; refused (FP8Q_ERROR_CUDA)
 * while `stream` captures a CUDA graph. */
fp8q_status fp8q_cuda_synchronize(const fp8q_cuda_device *device,
                                  fp8q_cu_stream stream, fp8q_error *error);

/*
 * The handle to remember as the stream of a memory's last use, for later
 * ordering and for the stream-ordered free: `stream` itself, except that the
 * per-thread default stream (a different stream on every thread, so a
 * handle that cannot be used from another thread, e.g. the one that frees
 * the memory) is remembered as the legacy default stream, whose work is
 * ordered after the earlier work of every blocking stream, the per-thread
 * ones included.
 */
fp8q_cu_stream fp8q_cuda_last_use_stream(fp8q_cu_stream stream);

/*
 * Orders `consumer` after the work queued so far on `producer` (an event
 * recorded on producer, waited for by consumer; the host does not wait).
 * Nothing to do when they are the same stream. The rule during CUDA graph
 * capture (the driver's capture state of each stream, cuda/capture.h):
 *   - consumer capturing, producer capturing the same graph: the event, as
 *     outside captures (a dependency inside the graph);
 *   - consumer capturing, producer not capturing (or the legacy default
 *     stream, which never captures): no wait. The driver refuses a
 *     captured wait for uncaptured work (CUDA_ERROR_STREAM_CAPTURE_
 *     ISOLATION, which invalidates the capture), and none is needed for
 *     work queued before the capture began when the device was
 *     synchronized then, as torch.cuda.graph does; work queued on another
 *     stream during the capture must be ordered before it by the caller,
 *     as in PyTorch;
 *   - consumer capturing, producer capturing another graph: FP8Q_ERROR_CUDA
 *     saying so, before any call that would invalidate either capture;
 *   - consumer not capturing, producer capturing: FP8Q_ERROR_CUDA (the
 *     producer's work runs only when its graph is replayed, and waiting for
 *     an event recorded in a capture would pull the consumer into it);
 *   - neither capturing: the event.
 */
fp8q_status fp8q_cuda_stream_wait(const fp8q_cuda_device *device,
                                  fp8q_cu_stream producer,
                                  fp8q_cu_stream consumer, fp8q_error *error);

#endif /* FP8Q_CUDA_MEMORY_H */
