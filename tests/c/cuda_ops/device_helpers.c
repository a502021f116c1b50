/*
 * device_helpers.c - the fake device, failure reports and host <-> device
 * copies of the tests/c/cuda_ops programs (see device_helpers.h).
 */
#include <stdio.h>

#include "device_helpers.h"

#include "cuda/kernel_image.h"
#include "cuda/memory.h"

const fp8q_cuda_device *device;
int failures;

void fail(const char *test, const char *why, const fp8q_error *error)
{
    printf("FAIL %s: %s%s%s\n", test, why, error != NULL ? ": " : "",
           error != NULL ? error->message : "");
    failures++;
}

void *on_device(const void *host, size_t bytes)
{
    fp8q_cuda_capture capture;
    fp8q_error error;
    void *memory = NULL;

    fp8q_error_clear(&error);
    if (fp8q_cuda_alloc(device, bytes, NULL, &memory, &capture, &error) !=
            FP8Q_OK ||
        (host != NULL && fp8q_cuda_copy(device, memory, host, bytes, NULL, 1,
                                        &error) != FP8Q_OK)) {
        fail("setup", "device memory", &error);
        return NULL;
    }
    return memory;
}

void to_host(void *host, const void *memory, size_t bytes)
{
    fp8q_error error;

    fp8q_error_clear(&error);
    if (fp8q_cuda_copy(device, host, memory, bytes, NULL, 1, &error) !=
        FP8Q_OK) {
        fail("setup", "copy to the host", &error);
    }
}

int open_device(int argc, char **argv, int n_args, const char *usage)
{
    fp8q_error error;

    if (argc != n_args) {
        printf("usage: %s\n", usage);
        return 2;
    }
    fp8q_kernel_image_set_folder(argv[1]);
    fp8q_error_clear(&error);
    if (fp8q_cuda_device_open(0, &device, &error) != FP8Q_OK) {
        fail("setup", "no fake device", &error);
        return 1;
    }
    return 0;
}
