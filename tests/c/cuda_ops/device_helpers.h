/*
 * device_helpers.h - what the C programs of tests/c/cuda_ops share: the
 * fake device they open, their failure count and report, and device
 * memory filled from and read back to the host (device_helpers.c).
 */
#ifndef FP8Q_TESTS_DEVICE_HELPERS_H
#define FP8Q_TESTS_DEVICE_HELPERS_H

#include <stddef.h>

#include "core/status.h"
#include "cuda/driver.h"

/* The device the program opened (fp8q_cuda_device_open), and the number
 * of failures reported so far. */
extern const fp8q_cuda_device *device;
extern int failures;

/* Prints "FAIL TEST: WHY[: error's message]" and counts a failure. */
void fail(const char *test, const char *why, const fp8q_error *error);

/* `bytes` of device memory holding `host` (NULL: left as allocated), or
 * NULL after a reported failure; never freed (the programs are short). */
void *on_device(const void *host, size_t bytes);

/* Copies `bytes` of device memory back to `host` (a failure reported). */
void to_host(void *host, const void *memory, size_t bytes);

/* The program's start: with argc == `n_args` (else prints "usage: USAGE"
 * and returns 2), the kernel folder argv[1] set and fake device 0 opened
 * into `device` (else a reported failure and 1); 0 when ready. */
int open_device(int argc, char **argv, int n_args, const char *usage);

#endif /* FP8Q_TESTS_DEVICE_HELPERS_H */
