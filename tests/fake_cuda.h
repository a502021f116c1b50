/*
 * fake_cuda.h - what the two files of the fake CUDA driver share:
 * tests/fake_cuda_driver.c (devices, contexts, kernel images, kernels run
 * on the host, cuGetProcAddress) and tests/fake_cuda_streams.c (memory,
 * streams, events and CUDA graph capture). tests/fake_gpu.py compiles both
 * into one library, on Linux with gcc or clang; only cuGetProcAddress_v2
 * is exported, as from the real driver.
 */
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H

#define FAKE_HIDDEN __attribute__((visibility("hidden")))

typedef int result_t;

/* A function as cuGetProcAddress hands it out. */
#define FUNCTION(function) ((void *)(uintptr_t)(function))

/* The integer value of environment variable `name`, or `fallback`. */
FAKE_HIDDEN int setting(const char *name, int fallback);

/* Appends `name` as a line to FAKE_CUDA_LOG, when set. */
FAKE_HIDDEN void log_call(const char *name);
/* Sleeps `milliseconds` (nothing for 0 or less). */
FAKE_HIDDEN void sleep_ms(int milliseconds);

/* Logs "name stream", the stream as a decimal handle (0 for NULL). */
FAKE_HIDDEN void log_stream_call(const char *name, const void *stream);

/* Checks a call named `name` that queues work on `stream` (kernel launches
 * included) against the capture state: 0 to go on, or the CUresult the
 * real driver refuses it with (logged "refused NAME RESULT", the captures
 * concerned invalidated). */
FAKE_HIDDEN result_t stream_check(const char *name, void *stream);

/* The entry point of tests/fake_cuda_streams.c called `name` (a driver
 * API name, as cuGetProcAddress is asked), or NULL. */
FAKE_HIDDEN void *stream_entry_point(const char *name);

#endif /* FAKE_CUDA_H */
