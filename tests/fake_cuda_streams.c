/*
 * fake_cuda_streams.c - the fake CUDA driver's memory, streams, events and
 * CUDA graph capture (tests/fake_cuda.h; the rest is in
 * tests/fake_cuda_driver.c).
 *
 * "Device memory" is host memory, listed so that the fake tells device from
 * host memory and graph allocations from others. Work runs when it is
 * queued, captured or not: a capture is a state of streams, not a graph
 * (replays are not modeled), so fp8q's calls during a capture compute what
 * they would eagerly and the log shows what a graph would hold.
 *
 * Capture follows NVIDIA's CUDA Driver API reference:
 *   cuStreamBeginCapture(stream, mode) starts a capture with a new id on a
 *     stream other than the legacy one (CUDA_ERROR_STREAM_CAPTURE_
 *     UNSUPPORTED, 900, for that one); cuStreamEndCapture on the stream
 *     that began it returns a fake graph handle, or NULL with
 *     CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901) when the capture was
 *     invalidated, or CUDA_ERROR_STREAM_CAPTURE_UNJOINED (904) when a stream
 *     that joined it was not joined back (on another stream of the capture:
 *     CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, 903);
 *   cuStreamIsCapturing and cuStreamGetCaptureInfo (the ABI cuGetProcAddress
 *     gives at CUDA 12.0, cuStreamGetCaptureInfo_v2's: status, and the id
 *     while ACTIVE; no graph nodes) report NONE, ACTIVE or INVALIDATED; for
 *     the legacy stream while a capture is active they fail with
 *     CUDA_ERROR_STREAM_CAPTURE_IMPLICIT (906) without invalidating it;
 *   the legacy stream: any other use while a capture is active fails with
 *     906 and invalidates it (every fake stream is a blocking one);
 *   cuStreamWaitEvent on a capturing stream: an event recorded in the same
 *     capture is a dependency within it; one recorded outside captures fails
 *     with CUDA_ERROR_STREAM_CAPTURE_ISOLATION (905), one of another capture
 *     with CUDA_ERROR_STREAM_CAPTURE_MERGE (902). On a stream not capturing,
 *     an event recorded in an active capture makes the stream join it (to
 *     be joined back: an event recorded on it, waited for on another stream
 *     of the capture); one recorded in a capture that is over fails with
 *     CUDA_ERROR_CAPTURED_EVENT (907);
 *   potentially unsafe calls - cuMemAlloc, cuMemFree, cuStreamSynchronize,
 *     cuEventQuery, cuEventSynchronize - fail with 900 while a capture not
 *     begun in CU_STREAM_CAPTURE_MODE_RELAXED is active (threads are not
 *     told apart: thread-local mode counts as global), and
 *     cuStreamSynchronize of a capturing stream fails in any mode;
 *   cuMemcpyAsync on a capturing stream from or to host memory (not a fake
 *     allocation) fails with 900;
 *   cuMemAllocAsync on a capturing stream makes a graph allocation, and
 *     cuMemFreeAsync on a capturing stream must be given one
 *     (CUDA_ERROR_INVALID_VALUE, 1, otherwise); graph allocations may be
 *     freed outside captures;
 *   any call queued on a stream whose capture was invalidated fails with
 *     901; cuEventQuery and cuEventSynchronize of an event last recorded in
 *     a capture fail with 907.
 * A refused call invalidates the captures it concerns, as the real driver
 * does.
 *
 * Timing: events made without CU_EVENT_DISABLE_TIMING (logged as
 * "cuEventCreate timing") read a fake GPU clock when recorded, and
 * cuEventElapsedTime returns the difference. Nothing advances that clock
 * but fakeCudaClockAdvance (found through cuGetProcAddress; not a driver
 * entry point), which the fake cuBLASLt calls with each product's cost.
 */
#define _POSIX_C_SOURCE 200809L /* the fakes are built on Linux */

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

typedef unsigned long long deviceptr_t;

/* Guards everything below: fp8q calls the driver from several threads. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------------------- */
/* Captures                                                                  */

#define ACTIVE 1      /* CU_STREAM_CAPTURE_STATUS_ACTIVE */
#define INVALIDATED 2 /* CU_STREAM_CAPTURE_STATUS_INVALIDATED */
#define RELAXED 2     /* CU_STREAM_CAPTURE_MODE_RELAXED */
#define MAX_CAPTURES 16
#define MAX_MEMBERS 64

typedef struct capture {
    unsigned long long id;
    void *origin; /* the stream that began it */
    int mode;
    int status; /* 0: a free slot */
} capture;

/* A stream in a capture: the one that began it, or one that joined. */
typedef struct member {
    void *stream;
    capture *of; /* NULL: a free slot */
    int pending; /* joined, not joined back yet */
} member;

static capture captures[MAX_CAPTURES];
static member members[MAX_MEMBERS];
static int graphs[MAX_CAPTURES]; /* graph handles point here */
static unsigned long long last_capture_id;

static int is_legacy(const void *stream)
{
    return stream == NULL || (uintptr_t)stream == 1;
}

static member *member_of(const void *stream)
{
    int index;
    for (index = 0; index < MAX_MEMBERS; index++) {
        if (members[index].of != NULL && members[index].stream == stream) {
            return &members[index];
        }
    }
    return NULL;
}

static capture *capture_of(const void *stream)
{
    const member *found = member_of(stream);
    return found != NULL ? found->of : NULL;
}

static capture *capture_by_id(unsigned long long id)
{
    int index;
    for (index = 0; index < MAX_CAPTURES; index++) {
        if (captures[index].status != 0 && captures[index].id == id) {
            return &captures[index];
        }
    }
    return NULL;
}

static int add_member(void *stream, capture *of, int pending)
{
    int index;
    for (index = 0; index < MAX_MEMBERS; index++) {
        if (members[index].of == NULL) {
            members[index].stream = stream;
            members[index].of = of;
            members[index].pending = pending;
            return 0;
        }
    }
    return -1;
}

static void invalidate(capture *target)
{
    if (target != NULL && target->status == ACTIVE) {
        target->status = INVALIDATED;
    }
}

static result_t refuse(const char *name, result_t result)
{
    char line[96];
    (void)snprintf(line, sizeof line, "refused %s %d", name, result);
    log_call(line);
    return result;
}

/* stream_check, with the lock held. */
static result_t check_stream(const char *name, void *stream)
{
    const capture *found;
    int index, refused = 0;
    if (is_legacy(stream)) {
        for (index = 0; index < MAX_CAPTURES; index++) {
            if (captures[index].status != 0) {
                invalidate(&captures[index]);
                refused = 1;
            }
        }
        return refused ? refuse(name, 906) : 0;
    }
    found = capture_of(stream);
    return found != NULL && found->status == INVALIDATED ? refuse(name, 901)
                                                         : 0;
}

result_t stream_check(const char *name, void *stream)
{
    result_t result;
    pthread_mutex_lock(&lock);
    result = check_stream(name, stream);
    pthread_mutex_unlock(&lock);
    return result;
}

/* A potentially unsafe call: refused while a capture that is not relaxed
 * is active. With the lock held. */
static result_t check_unsafe(const char *name)
{
    int index, refused = 0;
    for (index = 0; index < MAX_CAPTURES; index++) {
        if (captures[index].status == ACTIVE &&
            captures[index].mode != RELAXED) {
            invalidate(&captures[index]);
            refused = 1;
        }
    }
    return refused ? refuse(name, 900) : 0;
}

static result_t fake_stream_begin_capture(void *stream, int mode)
{
    int index;
    log_stream_call("cuStreamBeginCapture", stream);
    if (is_legacy(stream)) {
        return 900;
    }
    if (mode < 0 || mode > RELAXED) {
        return 1;
    }
    pthread_mutex_lock(&lock);
    index = 0;
    while (index < MAX_CAPTURES && captures[index].status != 0) {
        index++;
    }
    if (member_of(stream) != NULL || index == MAX_CAPTURES) {
        pthread_mutex_unlock(&lock);
        return 1;
    }
    captures[index].id = ++last_capture_id;
    captures[index].origin = stream;
    captures[index].mode = mode;
    captures[index].status = ACTIVE;
    if (add_member(stream, &captures[index], 0) < 0) {
        captures[index].status = 0;
        pthread_mutex_unlock(&lock);
        return 2;
    }
    pthread_mutex_unlock(&lock);
    return 0;
}

static result_t fake_stream_end_capture(void *stream, void **graph)
{
    capture *ended = NULL;
    result_t result = 0;
    int index;
    log_stream_call("cuStreamEndCapture", stream);
    *graph = NULL;
    pthread_mutex_lock(&lock);
    for (index = 0; index < MAX_CAPTURES; index++) {
        if (captures[index].status != 0 && captures[index].origin == stream) {
            ended = &captures[index];
            break;
        }
    }
    if (ended == NULL) {
        pthread_mutex_unlock(&lock);
        return member_of(stream) != NULL ? 903 : 1;
    }
    for (index = 0; index < MAX_MEMBERS; index++) {
        if (members[index].of == ended) {
            if (members[index].pending) {
                result = 904;
            }
            members[index].of = NULL;
        }
    }
    if (ended->status == INVALIDATED) {
        result = 901;
    }
    if (result == 0) {
        *graph = &graphs[ended - captures];
    }
    ended->status = 0;
    pthread_mutex_unlock(&lock);
    return result;
}

/* The status (and id while active) of `stream`. With the lock held. */
static result_t capture_status(void *stream, int *status,
                               unsigned long long *id)
{
    const capture *found;
    int index;
    *status = 0;
    if (is_legacy(stream)) {
        for (index = 0; index < MAX_CAPTURES; index++) {
            if (captures[index].status != 0) {
                return 906;
            }
        }
        return 0;
    }
    found = capture_of(stream);
    if (found != NULL) {
        *status = found->status;
        if (id != NULL && found->status == ACTIVE) {
            *id = found->id;
        }
    }
    return 0;
}

static result_t fake_stream_is_capturing(void *stream, int *status)
{
    result_t result;
    log_stream_call("cuStreamIsCapturing", stream);
    pthread_mutex_lock(&lock);
    result = capture_status(stream, status, NULL);
    pthread_mutex_unlock(&lock);
    return result;
}

static result_t fake_stream_get_capture_info(void *stream, int *status,
                                             unsigned long long *id,
                                             void **graph,
                                             const void ***dependencies,
                                             size_t *n_dependencies)
{
    result_t result;
    log_stream_call("cuStreamGetCaptureInfo", stream);
    if (status == NULL) {
        return 1;
    }
    pthread_mutex_lock(&lock);
    result = capture_status(stream, status, id);
    if (result == 0 && *status == ACTIVE && graph != NULL) {
        *graph = &graphs[capture_of(stream) - captures];
    }
    pthread_mutex_unlock(&lock);
    if (dependencies != NULL) {
        *dependencies = NULL;
    }
    if (n_dependencies != NULL) {
        *n_dependencies = 0;
    }
    return result;
}

/* ------------------------------------------------------------------------- */
/* Memory                                                                    */

typedef struct allocation {
    struct allocation *next;
    char *memory;
    size_t bytes;
    unsigned long long capture; /* a graph allocation of this capture, or 0 */
} allocation;

static allocation *allocations;

/* The allocation holding `address`, or NULL (host memory). With the lock
 * held. */
static allocation *find_allocation(uintptr_t address)
{
    allocation *found;
    for (found = allocations; found != NULL; found = found->next) {
        if (address >= (uintptr_t)found->memory &&
            address < (uintptr_t)found->memory + found->bytes) {
            return found;
        }
    }
    return NULL;
}

/* A new allocation on `stream` (NULL: cuMemAlloc's), with the lock held. */
static result_t allocate(deviceptr_t *pointer, size_t bytes, void *stream)
{
    const int error = setting("FAKE_CUDA_ALLOC_ERROR", 0);
    const capture *graph = stream != NULL ? capture_of(stream) : NULL;
    allocation *made;
    if (error != 0) {
        return error;
    }
    if (bytes == 0) {
        return 1; /* CUDA_ERROR_INVALID_VALUE, as the real driver */
    }
    made = (allocation *)malloc(sizeof *made);
    /* 256-byte aligned, as the real driver's allocations are (fp8q's
     * scratch memory and plan keys rely on it). */
    if (made == NULL ||
        (made->memory = (char *)aligned_alloc(256, (bytes + 255) / 256 * 256)) ==
            NULL) {
        free(made);
        return 2;
    }
    /* Poison, so that reading memory nobody wrote shows. */
    memset(made->memory, 0xA5, bytes);
    made->bytes = bytes;
    made->capture = graph != NULL ? graph->id : 0;
    made->next = allocations;
    allocations = made;
    *pointer = (deviceptr_t)(uintptr_t)made->memory;
    return 0;
}

/* Frees an allocation (unknown pointers are ignored), with the lock held. */
static void release(deviceptr_t pointer)
{
    allocation **link;
    for (link = &allocations; *link != NULL; link = &(*link)->next) {
        if ((uintptr_t)(*link)->memory == (uintptr_t)pointer) {
            allocation *gone = *link;
            *link = gone->next;
            free(gone->memory);
            free(gone);
            return;
        }
    }
}

static result_t fake_mem_alloc(deviceptr_t *pointer, size_t bytes)
{
    result_t result;
    log_call("cuMemAlloc");
    pthread_mutex_lock(&lock);
    result = check_unsafe("cuMemAlloc");
    if (result == 0) {
        result = allocate(pointer, bytes, NULL);
    }
    pthread_mutex_unlock(&lock);
    return result;
}

static result_t fake_mem_alloc_async(deviceptr_t *pointer, size_t bytes,
                                     void *stream)
{
    result_t result;
    log_stream_call("cuMemAllocAsync", stream);
    pthread_mutex_lock(&lock);
    result = check_stream("cuMemAllocAsync", stream);
    if (result == 0) {
        result = allocate(pointer, bytes, stream);
    }
    pthread_mutex_unlock(&lock);
    return result;
}

static result_t fake_mem_free(deviceptr_t pointer)
{
    result_t result;
    log_call("cuMemFree");
    pthread_mutex_lock(&lock);
    result = check_unsafe("cuMemFree");
    if (result == 0) {
        release(pointer);
    }
    pthread_mutex_unlock(&lock);
    return result;
}

static result_t fake_mem_free_async(deviceptr_t pointer, void *stream)
{
    capture *graph;
    const allocation *freed;
    result_t result;
    log_stream_call("cuMemFreeAsync", stream);
    pthread_mutex_lock(&lock);
    result = check_stream("cuMemFreeAsync", stream);
    graph = capture_of(stream);
    freed = find_allocation((uintptr_t)pointer);
    if (result == 0 && graph != NULL && (freed == NULL || freed->capture == 0)) {
        invalidate(graph);
        result = refuse("cuMemFreeAsync", 1);
    }
    if (result == 0) {
        release(pointer);
    }
    pthread_mutex_unlock(&lock);
    return result;
}

/* The one default pool of every device. */
static int default_pool;

static result_t fake_device_get_default_mem_pool(void **pool, int device)
{
    (void)device;
    log_call("cuDeviceGetDefaultMemPool");
    *pool = &default_pool;
    return 0;
}

static result_t fake_mem_pool_set_attribute(void *pool, int attribute,
                                            void *value)
{
    uint64_t threshold;
    char line[96];
    if (pool != &default_pool || attribute != 4) {
        return 1; /* fp8q sets only the default pool's release threshold */
    }
    memcpy(&threshold, value, sizeof threshold);
    (void)snprintf(line, sizeof line, "cuMemPoolSetAttribute %d %llu",
                   attribute, (unsigned long long)threshold);
    log_call(line);
    return setting("FAKE_CUDA_POOL_ERROR", 0);
}

static result_t fake_memcpy_async(deviceptr_t destination, deviceptr_t source,
                                  size_t bytes, void *stream)
{
    capture *graph;
    result_t result;
    int to_host;
    log_stream_call("cuMemcpyAsync", stream);
    pthread_mutex_lock(&lock);
    result = check_stream("cuMemcpyAsync", stream);
    graph = capture_of(stream);
    to_host = find_allocation((uintptr_t)destination) == NULL;
    if (result == 0 && graph != NULL &&
        (find_allocation((uintptr_t)destination) == NULL ||
         find_allocation((uintptr_t)source) == NULL)) {
        invalidate(graph);
        result = refuse("cuMemcpyAsync", 900);
    }
    pthread_mutex_unlock(&lock);
    if (result == 0) {
        memcpy((void *)(uintptr_t)destination,
               (const void *)(uintptr_t)source, bytes);
        if (to_host) {
            sleep_ms(setting("FAKE_CUDA_READ_DELAY_MS", 0));
        }
    }
    return result;
}

static result_t fake_memset_d8_async(deviceptr_t destination,
                                     unsigned char value, size_t count,
                                     void *stream)
{
    result_t result;
    log_stream_call("cuMemsetD8Async", stream);
    result = stream_check("cuMemsetD8Async", stream);
    if (result == 0) {
        memset((void *)(uintptr_t)destination, value, count);
    }
    return result;
}

static result_t fake_memset_d32_async(deviceptr_t destination,
                                      unsigned int value, size_t count,
                                      void *stream)
{
    const uint32_t word = value;
    result_t result;
    size_t index;
    log_stream_call("cuMemsetD32Async", stream);
    result = stream_check("cuMemsetD32Async", stream);
    for (index = 0; result == 0 && index < count; index++) {
        memcpy((char *)(uintptr_t)destination + 4 * index, &word, 4);
    }
    return result;
}

/* ------------------------------------------------------------------------- */
/* Streams and events                                                        */

typedef struct event {
    unsigned long long capture; /* last recorded in this capture, or 0 */
    void *stream;               /* ... on this stream */
    int timing;                 /* created without DISABLE_TIMING */
    int recorded;
    double clock_ms; /* the fake GPU clock when it was recorded */
} event;

/* The fake GPU's clock in milliseconds: nothing takes time except what
 * fakeCudaClockAdvance adds (the fake cuBLASLt's products, each its
 * algorithm's cost), so cuEventElapsedTime measures exactly that. */
static double clock_ms;

static void fake_clock_advance(double milliseconds)
{
    pthread_mutex_lock(&lock);
    clock_ms += milliseconds;
    pthread_mutex_unlock(&lock);
}

static result_t fake_stream_synchronize(void *stream)
{
    capture *graph;
    result_t result;
    log_stream_call("cuStreamSynchronize", stream);
    pthread_mutex_lock(&lock);
    result = check_stream("cuStreamSynchronize", stream);
    graph = capture_of(stream);
    if (result == 0 && graph != NULL) {
        invalidate(graph);
        result = refuse("cuStreamSynchronize", 900);
    }
    if (result == 0) {
        result = check_unsafe("cuStreamSynchronize");
    }
    pthread_mutex_unlock(&lock);
    return result;
}

/* cuStreamWaitEvent's capture rules (above), with the lock held. */
static result_t wait_event(void *stream, const event *waited)
{
    capture *graph = capture_of(stream);
    capture *recorded_in =
        waited->capture != 0 ? capture_by_id(waited->capture) : NULL;
    member *recorder;
    if (graph != NULL) {
        if (waited->capture == graph->id) {
            recorder = member_of(waited->stream);
            if (waited->stream != stream && recorder != NULL) {
                recorder->pending = 0; /* joined back */
            }
            return 0;
        }
        invalidate(graph);
        if (waited->capture == 0) {
            return refuse("cuStreamWaitEvent", 905);
        }
        invalidate(recorded_in);
        return refuse("cuStreamWaitEvent", 902);
    }
    if (waited->capture == 0) {
        return 0;
    }
    if (recorded_in == NULL || recorded_in->status != ACTIVE) {
        return refuse("cuStreamWaitEvent", 907);
    }
    return add_member(stream, recorded_in, 1) < 0 ? 2 : 0; /* joins it */
}

static result_t fake_stream_wait_event(void *stream, void *waited,
                                       unsigned int flags)
{
    result_t result;
    log_stream_call("cuStreamWaitEvent", stream);
    if (flags != 0) {
        return 1;
    }
    pthread_mutex_lock(&lock);
    result = check_stream("cuStreamWaitEvent", stream);
    if (result == 0) {
        result = wait_event(stream, (const event *)waited);
    }
    pthread_mutex_unlock(&lock);
    return result;
}

static result_t fake_event_create(void **made, unsigned int flags)
{
    log_call(flags == 0 ? "cuEventCreate timing" : "cuEventCreate");
    *made = calloc(1, sizeof(event));
    if (*made == NULL) {
        return 2;
    }
    /* fp8q asks for CU_EVENT_DISABLE_TIMING, or for a timing event (0) */
    ((event *)*made)->timing = flags == 0;
    return flags == 2 || flags == 0 ? 0 : 1;
}

static result_t fake_event_record(void *recorded, void *stream)
{
    event *target = (event *)recorded;
    const capture *graph;
    result_t result;
    log_stream_call("cuEventRecord", stream);
    pthread_mutex_lock(&lock);
    result = check_stream("cuEventRecord", stream);
    graph = capture_of(stream);
    if (result == 0) {
        target->capture = graph != NULL ? graph->id : 0;
        target->stream = stream;
        target->recorded = 1;
        target->clock_ms = clock_ms;
    }
    pthread_mutex_unlock(&lock);
    return result;
}

static result_t fake_event_destroy(void *destroyed)
{
    log_call("cuEventDestroy");
    free(destroyed);
    return 0;
}

/* cuEventQuery and cuEventSynchronize: the work is always done. */
static result_t finished_event(const char *name, const event *queried)
{
    result_t result;
    log_call(name);
    pthread_mutex_lock(&lock);
    result = check_unsafe(name);
    if (result == 0 && queried->capture != 0) {
        result = refuse(name, 907);
    }
    pthread_mutex_unlock(&lock);
    return result;
}

static result_t fake_event_query(void *queried)
{
    return finished_event("cuEventQuery", (const event *)queried);
}

static result_t fake_event_synchronize(void *queried)
{
    return finished_event("cuEventSynchronize", (const event *)queried);
}

/* cuEventElapsedTime: CUDA_ERROR_INVALID_HANDLE (400) for an event made
 * with CU_EVENT_DISABLE_TIMING or recorded in a capture,
 * CUDA_ERROR_NOT_READY (600) for one never recorded, as the real driver. */
static result_t fake_event_elapsed_time(float *milliseconds, void *start,
                                        void *end)
{
    const event *first = (const event *)start;
    const event *last = (const event *)end;
    result_t result = 0;
    log_call("cuEventElapsedTime");
    pthread_mutex_lock(&lock);
    if (!first->timing || !last->timing || first->capture != 0 ||
        last->capture != 0) {
        result = 400;
    }
    else if (!first->recorded || !last->recorded) {
        result = 600;
    }
    else {
        *milliseconds = (float)(last->clock_ms - first->clock_ms);
    }
    pthread_mutex_unlock(&lock);
    return result;
}

/* ------------------------------------------------------------------------- */
/* Entry points                                                              */

void *stream_entry_point(const char *name)
{
    static const struct {
        const char *name;
        void *function;
    } entries[] = {
        {"cuMemAlloc", FUNCTION(fake_mem_alloc)},
        {"cuMemFree", FUNCTION(fake_mem_free)},
        {"cuMemAllocAsync", FUNCTION(fake_mem_alloc_async)},
        {"cuMemFreeAsync", FUNCTION(fake_mem_free_async)},
        {"cuDeviceGetDefaultMemPool",
         FUNCTION(fake_device_get_default_mem_pool)},
        {"cuMemPoolSetAttribute", FUNCTION(fake_mem_pool_set_attribute)},
        {"cuMemcpyAsync", FUNCTION(fake_memcpy_async)},
        {"cuMemsetD8Async", FUNCTION(fake_memset_d8_async)},
        {"cuMemsetD32Async", FUNCTION(fake_memset_d32_async)},
        {"cuStreamSynchronize", FUNCTION(fake_stream_synchronize)},
        {"cuStreamWaitEvent", FUNCTION(fake_stream_wait_event)},
        {"cuStreamBeginCapture", FUNCTION(fake_stream_begin_capture)},
        {"cuStreamEndCapture", FUNCTION(fake_stream_end_capture)},
        {"cuStreamIsCapturing", FUNCTION(fake_stream_is_capturing)},
        {"cuStreamGetCaptureInfo", FUNCTION(fake_stream_get_capture_info)},
        {"cuEventCreate", FUNCTION(fake_event_create)},
        {"cuEventRecord", FUNCTION(fake_event_record)},
        {"cuEventDestroy", FUNCTION(fake_event_destroy)},
        {"cuEventQuery", FUNCTION(fake_event_query)},
        {"cuEventSynchronize", FUNCTION(fake_event_synchronize)},
        {"cuEventElapsedTime", FUNCTION(fake_event_elapsed_time)},
        /* Not the driver's: how the fake cuBLASLt makes its products take
         * time (tests/fake_cublaslt.c), void (double milliseconds). */
        {"fakeCudaClockAdvance", FUNCTION(fake_clock_advance)},
    };
    size_t index;
    for (index = 0; index < sizeof entries / sizeof entries[0]; index++) {
        if (strcmp(name, entries[index].name) == 0) {
            return entries[index].function;
        }
    }
    return NULL;
}
