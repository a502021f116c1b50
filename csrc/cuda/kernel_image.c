/*
 * kernel_image.c - finds, reads and checks the kernels' fatbin file beside
 * fp8q._C (see kernel_image.h).
 */
#include <stdio.h>
#include <string.h>

#include "cuda/kernel_image.h"
#include "platform.h"

/* The header nvcc and fatbinary write at the start of a fatbin (little
 * endian): magic, version, header size, then the bytes that follow it. */
#define FATBIN_MAGIC 0xBA55ED50u
#define FATBIN_HEADER_SIZE 16u

static fp8q_once folder_once = FP8Q_ONCE_INIT;
static char image_path[FP8Q_CUDA_PATH_SIZE];

static fp8q_once image_once = FP8Q_ONCE_INIT;
static unsigned char *image_data;
static size_t image_size;
static fp8q_error image_error;

static void store_folder(void *context)
{
    const char *folder = (const char *)context;
    const int length = snprintf(image_path, sizeof image_path, "%s/%s",
                                folder, FP8Q_KERNEL_IMAGE_FILE);
    if (length < 0 || (size_t)length >= sizeof image_path) {
        image_path[0] = '\0';
    }
}

void fp8q_kernel_image_set_folder(const char *folder)
{
    fp8q_once_run(&folder_once, store_folder, (void *)folder);
}

const char *fp8q_kernel_image_path(void)
{
    return image_path;
}

/* A little-endian unsigned integer of `n_bytes` bytes at `bytes`. */
static unsigned long long read_le(const unsigned char *bytes, int n_bytes)
{
    unsigned long long value = 0;
    int index;
    for (index = n_bytes - 1; index >= 0; index--) {
        value = (value << 8) | bytes[index];
    }
    return value;
}

/* Runs once: fills image_data and image_size, or image_error. */
static void read_image(void *unused)
{
    char reason[256];
    const char *wrong = NULL;

    (void)unused;
    fp8q_error_clear(&image_error);
    if (image_path[0] == '\0') {
        fp8q_fail(&image_error, FP8Q_ERROR_CUDA,
                  "fp8q's CUDA kernels (%s) cannot be found: the folder of "
                  "fp8q._C is unknown or its path too long",
                  FP8Q_KERNEL_IMAGE_FILE);
        return;
    }
    if (fp8q_file_read(image_path, &image_data, &image_size, reason,
                       sizeof reason) < 0) {
        fp8q_fail(&image_error, FP8Q_ERROR_CUDA,
                  "fp8q's CUDA kernels are missing: %s cannot be read (%s); "
                  "reinstall fp8q",
                  image_path, reason);
        return;
    }
    if (image_size < FATBIN_HEADER_SIZE ||
        read_le(image_data, 4) != FATBIN_MAGIC) {
        wrong = "it is not a CUDA fatbin";
    }
    else if (read_le(image_data + 6, 2) + read_le(image_data + 8, 8) !=
             image_size) {
        wrong = "its size is not the one its header gives (truncated?)";
    }
    if (wrong != NULL) {
        fp8q_fail(&image_error, FP8Q_ERROR_CUDA,
                  "fp8q's CUDA kernels are damaged: %s (%zu bytes): %s; "
                  "reinstall fp8q",
                  image_path, image_size, wrong);
        fp8q_aligned_free(image_data);
        image_data = NULL;
        image_size = 0;
    }
}

fp8q_status fp8q_kernel_image_get(const unsigned char **image, size_t *size,
                                  fp8q_error *error)
{
    fp8q_once_run(&image_once, read_image, NULL);
    *image = image_data;
    *size = image_size;
    if (image_error.status != FP8Q_OK && error != NULL) {
        *error = image_error;
    }
    return image_error.status;
}
