/*
 * capture.h - CUDA graph capture as the GPU backend sees it: what the driver
 * says a stream is capturing, the error for work that cannot run while it
 * does, and the events that order memory every stream shares (the scratch
 * block, the cuBLASLt workspace) both outside and inside captures.
 *
 * While a stream captures, work queued on it is recorded into a graph
 * instead of running; waiting for it (synchronizing, copies from or to host
 * memory), cuMemAlloc, and ordering it after uncaptured work invalidate the
 * capture, so fp8q checks before it calls the driver (docs/architecture.md,
 * "CUDA graphs"). Call without holding Python's GIL.
 */
#ifndef FP8Q_CUDA_CAPTURE_H
#define FP8Q_CUDA_CAPTURE_H

#include <stdint.h>

#include "core/status.h"
#include "cuda/driver.h"

/* A stream's capture state, as cuStreamGetCaptureInfo reported it. */
typedef struct fp8q_cuda_capture {
    int capturing; /* nonzero: the stream is capturing a graph */
    uint64_t id;   /* that capture sequence's id (unique in the process) */
} fp8q_cuda_capture;

/*
 * Asks the driver whether `stream` (of `device`) is capturing a CUDA graph,
 * and which capture. Fails (FP8Q_ERROR_CUDA) when the stream's capture was
 * invalidated by an earlier error and not ended yet, and when `stream` is
 * the legacy default stream while a blocking stream (one created without
 * CU_STREAM_NON_BLOCKING) captures: the driver then refuses any use of the
 * legacy stream (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT), the query itself
 * without harm to the capture. Where the driver lacks
 * cuStreamGetCaptureInfo no stream is capturing.
 */
fp8q_status fp8q_cuda_capture_query(const fp8q_cuda_device *device,
                                    fp8q_cu_stream stream,
                                    fp8q_cuda_capture *capture,
                                    fp8q_error *error);

/* The FP8Q_ERROR_CUDA "<what> cannot run while stream 0x... is capturing a
 * CUDA graph (capture N): <remedy>", for a capturing stream. */
fp8q_status fp8q_cuda_capture_refuse(fp8q_cu_stream stream,
                                     const fp8q_cuda_capture *capture,
                                     const char *what, const char *remedy,
                                     fp8q_error *error);

/*
 * The ordering of memory that calls on any stream use in turn, one at a
 * time. Two events, created at first need: `outside`, recorded after each
 * use outside a capture and waited for by the next such use, and `inside`,
 * recorded after each use during a capture and waited for by the next use
 * in the same capture only. A use during a capture never waits for work
 * outside it (the driver refuses that dependency; see
 * fp8q_cuda_stream_wait in memory.h for why none is needed), and a use
 * outside a capture never waits for captured work (which runs only when
 * its graph is replayed, unordered with fp8q's other work: replays are the
 * caller's to order). Guarded by its owner's lock or holder flag.
 */
typedef struct fp8q_cuda_shared_order {
    fp8q_cu_event outside;
    fp8q_cu_event inside;
    uint64_t inside_capture; /* the capture `inside` was last recorded in */
    int inside_recorded;
    /* Nonzero once a capture used the memory: its graph holds the address,
     * so the memory must not be freed while the process runs (the owner
     * abandons it instead). */
    int captured;
} fp8q_cuda_shared_order;

/* Orders `stream` (capturing as `capture` says) before a use of the
 * memory, as above; a capturing use marks the memory captured. */
fp8q_status fp8q_cuda_shared_begin(const fp8q_cuda_device *device,
                                   fp8q_cuda_shared_order *order,
                                   fp8q_cu_stream stream,
                                   const fp8q_cuda_capture *capture,
                                   fp8q_error *error);

/* Records the end of a use on `stream` (capturing as `capture` says). */
fp8q_status fp8q_cuda_shared_end(const fp8q_cuda_device *device,
                                 fp8q_cuda_shared_order *order,
                                 fp8q_cu_stream stream,
                                 const fp8q_cuda_capture *capture,
                                 fp8q_error *error);

#endif /* FP8Q_CUDA_CAPTURE_H */
