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

/* One of the two files: where it is, and what reading it gave. */
typedef struct kernel_file {
    const char *name;  /* FP8Q_KERNEL_IMAGE_FILE or FP8Q_KERNEL_PTX_FILE */
    const char *what;  /* what the file holds, for errors */
    char path[FP8Q_CUDA_PATH_SIZE];
    fp8q_once once;
    unsigned char *data;
    size_t size;
    fp8q_error error;
} kernel_file;

static fp8q_once folder_once = FP8Q_ONCE_INIT;
static kernel_file real_file = {FP8Q_KERNEL_IMAGE_FILE, "fp8q's CUDA kernels",
                                "", FP8Q_ONCE_INIT, NULL, 0, {FP8Q_OK, ""}};
static kernel_file ptx_file = {FP8Q_KERNEL_PTX_FILE,
                               "the PTX of fp8q's CUDA kernels", "",
                               FP8Q_ONCE_INIT, NULL, 0, {FP8Q_OK, ""}};

/* A folder's name: `length` bytes of `text` (not 0-terminated there). */
typedef struct folder_name {
    const char *text;
    size_t length;
} folder_name;

/* file->path: the folder/file->name, or "" when that is too long. */
static void store_path(kernel_file *file, const folder_name *folder)
{
    const int length =
        folder->length < sizeof file->path
            ? snprintf(file->path, sizeof file->path, "%.*s/%s",
                       (int)folder->length, folder->text, file->name)
            : -1;
    if (length < 0 || (size_t)length >= sizeof file->path) {
        file->path[0] = '\0';
    }
}

static void store_folder(void *context)
{
    store_path(&real_file, (const folder_name *)context);
    store_path(&ptx_file, (const folder_name *)context);
}

void fp8q_kernel_image_set_folder(const char *folder)
{
    folder_name name;
    name.text = folder;
    name.length = strlen(folder);
    fp8q_once_run(&folder_once, store_folder, &name);
}

void fp8q_kernel_image_set_folder_of(const char *file)
{
    const char *slash = strrchr(file, '/');
    const char *backslash = strrchr(file, '\\');
    folder_name name;

    if (backslash != NULL && (slash == NULL || backslash > slash)) {
        slash = backslash;
    }
    name.text = slash != NULL ? file : ".";
    name.length = slash != NULL ? (size_t)(slash - file) : 1;
    fp8q_once_run(&folder_once, store_folder, &name);
}

const char *fp8q_kernel_image_path(void)
{
    return real_file.path;
}

const char *fp8q_kernel_ptx_path(void)
{
    return ptx_file.path;
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

/* Runs once per file: fills file->data and file->size, or file->error. */
static void read_image(void *context)
{
    kernel_file *file = (kernel_file *)context;
    char reason[256];
    const char *wrong = NULL;

    fp8q_error_clear(&file->error);
    if (file->path[0] == '\0') {
        fp8q_fail(&file->error, FP8Q_ERROR_CUDA,
                  "%s (%s) cannot be found: the folder of fp8q._C is "
                  "unknown or its path too long",
                  file->what, file->name);
        return;
    }
    if (fp8q_file_read(file->path, &file->data, &file->size, reason,
                       sizeof reason) < 0) {
        fp8q_fail(&file->error, FP8Q_ERROR_CUDA,
                  "%s are missing: %s cannot be read (%s); reinstall fp8q",
                  file->what, file->path, reason);
        return;
    }
    if (file->size < FATBIN_HEADER_SIZE ||
        read_le(file->data, 4) != FATBIN_MAGIC) {
        wrong = "it is not a CUDA fatbin";
    }
    else if (read_le(file->data + 6, 2) + read_le(file->data + 8, 8) !=
             file->size) {
        wrong = "its size is not the one its header gives (truncated?)";
    }
    if (wrong != NULL) {
        fp8q_fail(&file->error, FP8Q_ERROR_CUDA,
                  "%s are damaged: %s (%zu bytes): %s; reinstall fp8q",
                  file->what, file->path, file->size, wrong);
        fp8q_aligned_free(file->data);
        file->data = NULL;
        file->size = 0;
    }
}

/* The image of `file`, read at the first call. */
static fp8q_status get_image(kernel_file *file, const unsigned char **image,
                             size_t *size, fp8q_error *error)
{
    fp8q_once_run(&file->once, read_image, file);
    *image = file->data;
    *size = file->size;
    if (file->error.status != FP8Q_OK && error != NULL) {
        *error = file->error;
    }
    return file->error.status;
}

fp8q_status fp8q_kernel_image_get(const unsigned char **image, size_t *size,
                                  fp8q_error *error)
{
    return get_image(&real_file, image, size, error);
}

fp8q_status fp8q_kernel_ptx_get(const unsigned char **image, size_t *size,
                                fp8q_error *error)
{
    return get_image(&ptx_file, image, size, error);
}
