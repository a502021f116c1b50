/*
 * status.h - how every fp8q C function reports failure.
 *
 * Functions return an fp8q_status; when it is not FP8Q_OK they have written a
 * human-readable message (naming the argument, what was expected and what was
 * received) into the caller's fp8q_error. The Python binding maps the status
 * to an exception class; nothing in the library aborts or exits. Numbers in
 * messages go through fp8q_number, so that they read the same everywhere.
 */
#ifndef FP8Q_CORE_STATUS_H
#define FP8Q_CORE_STATUS_H

typedef enum fp8q_status {
    FP8Q_OK = 0,
    FP8Q_ERROR_TYPE,    /* unsupported dtype or kind of object: TypeError   */
    FP8Q_ERROR_VALUE,   /* bad shape, scale, value or option: ValueError    */
    FP8Q_ERROR_BUFFER,  /* memory layout / export problem: BufferError      */
    FP8Q_ERROR_MEMORY,  /* allocation failed: MemoryError                   */
    FP8Q_ERROR_RUNTIME, /* anything else: RuntimeError                      */
    FP8Q_ERROR_CUDA,    /* CUDA driver, device or kernel image problem:
                           fp8q.CudaError (a RuntimeError)                */
    FP8Q_ERROR_CUDA_MEMORY, /* out of GPU memory: fp8q.CudaOutOfMemoryError
                               (a CudaError and a MemoryError)           */
    FP8Q_ERROR_INTERRUPTED  /* the caller's interrupt check stopped the
                               loops (platform.h); set by the binding, which
                               raises what the check raised
                               (KeyboardInterrupt for Ctrl-C)            */
} fp8q_status;

/* Room for the longest message: two shapes at FP8Q_SHAPE_TEXT_SIZE and
 * their sentence (a reshape's refusal), or a layout refusal (a shape and
 * its strides) after a caller's prefix (a DLPack import's), whole. */
#define FP8Q_ERROR_MESSAGE_SIZE 1024

typedef struct fp8q_error {
    fp8q_status status;
    char message[FP8Q_ERROR_MESSAGE_SIZE];
} fp8q_error;

/* Records `status` and a printf-style message in `error` (which may be NULL)
 * and returns `status`, so callers can write `return fp8q_fail(...)`. */
fp8q_status fp8q_fail(fp8q_error *error, fp8q_status status,
                      const char *format, ...);

/* Resets `error` to FP8Q_OK with an empty message (before a call that may
 * fill it). */
void fp8q_error_clear(fp8q_error *error);

/* Room for any double as fp8q_number writes it. */
#define FP8Q_NUMBER_TEXT_SIZE 32

/* A number as text, returned by value so that it can be an argument of the
 * message it is for: fp8q_fail(error, ..., "got %s", fp8q_number(x).text)
 * (the array lives until the end of that full expression, C11 6.2.4). */
typedef struct fp8q_number_text {
    char text[FP8Q_NUMBER_TEXT_SIZE];
} fp8q_number_text;

/* `value` as fp8q's messages write numbers: printf's "%g" where it is
 * finite, and "nan", "-nan", "inf" or "-inf" (by the sign bit) otherwise,
 * the same with every C runtime (printf itself writes a negative NaN as
 * "-nan" with glibc, "-nan(ind)" with the UCRT and "nan" with msvcrt). */
fp8q_number_text fp8q_number(double value);

#endif /* FP8Q_CORE_STATUS_H */
