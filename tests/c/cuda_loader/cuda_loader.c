/*
 * cuda_loader.c - csrc/cuda's Windows paths under Wine: how the CUDA driver
 * and cuBLASLt are looked for and what a failure says. One scenario per
 * process (the driver and cuBLASLt are loaded once per process); run.sh
 * beside this file prepares each one's folders and environment:
 *
 *   no-driver        no nvcuda.dll in System32 (a fake one planted in the
 *                    working directory): "no CUDA driver found", naming
 *                    nvcuda.dll and System32, the fake never loaded
 *   no-entry-points  FP8Q_CUDA_DRIVER names a DLL without cuGetProcAddress:
 *                    a clean error naming the file
 *   cublaslt-order   ARGS: two install folders. Nothing found (fakes
 *                    planted in the working directory only): every place
 *                    in order, the wheels' three bin folders under each
 *                    install folder, CUDA_PATH\bin, CUDA_PATH\bin\x64,
 *                    then the bare names, none from the working directory
 *   cublaslt-wheel   ARGS: two install folders, the second holding a fake
 *                    nvidia/cublas/bin/cublasLt64_12.dll: it is opened
 *                    there (an absolute path) and refused cleanly for its
 *                    missing entry points
 *   kernel-image-missing  no fp8q_kernels.fatbin in the folder named: the
 *                    error names the file and the UCRT's / msvcrt's reason
 *   kernel-image-valid    a fatbin header with nothing after it, in the
 *                    working directory (named by a UTF-8 path with
 *                    non-ASCII characters): read and accepted
 *
 * Prints "ok SCENARIO" and exits 0, or "FAIL SCENARIO: why" and exits 1.
 */
#include <stdio.h>
#include <string.h>

#include "cuda/cublaslt.h"
#include "cuda/driver.h"
#include "cuda/kernel_image.h"

static int fail(const char *scenario, const char *why, const char *text)
{
    printf("FAIL %s: %s\n  got: %s\n", scenario, why, text);
    return 1;
}

static int starts_with(const char *text, const char *prefix)
{
    return strncmp(text, prefix, strlen(prefix)) == 0;
}

static int no_driver(void)
{
    const fp8q_cuda_driver *driver = fp8q_cuda_driver_load();
    const char *message = driver->error.message;

    if (driver->error.status != FP8Q_ERROR_CUDA || driver->found) {
        return fail("no-driver", "expected FP8Q_ERROR_CUDA", message);
    }
    if (!starts_with(message, "no CUDA driver found: tried nvcuda.dll (") ||
        strstr(message, "(System32 only). Install the NVIDIA driver") ==
            NULL) {
        return fail("no-driver", "not the no-driver message", message);
    }
    return 0;
}

static int no_entry_points(void)
{
    const fp8q_cuda_driver *driver = fp8q_cuda_driver_load();
    const char *message = driver->error.message;

    if (driver->error.status != FP8Q_ERROR_CUDA ||
        !starts_with(message, "the CUDA driver ") ||
        strstr(message, "fake_library.dll has no cuGetProcAddress") ==
            NULL ||
        strstr(message, "older than CUDA 12.0") == NULL) {
        return fail("no-entry-points", "not a clean missing-entry error",
                    message);
    }
    return 0;
}

/* Checks that the search record lists exactly `expected` places in order
 * (each line is "place (reason)"). */
static int check_search(const char *scenario, const fp8q_cublaslt *library,
                        const char *const *expected, int n_expected)
{
    const char *line = library->search;
    int index;

    for (index = 0; index < n_expected; index++) {
        const size_t length = strlen(expected[index]);
        if (strncmp(line, expected[index], length) != 0 ||
            strncmp(line + length, " (", 2) != 0) {
            return fail(scenario, expected[index], library->search);
        }
        line = strchr(line, '\n');
        if (line == NULL) {
            return fail(scenario, "the record ends early", library->search);
        }
        line++;
    }
    if (*line != '\0') {
        return fail(scenario, "more places than expected", library->search);
    }
    return 0;
}

static int cublaslt_order(const char *const *folders)
{
    /* No driver: its version is unknown, so CUDA 12's name comes first. */
    static const char *const wheel_subdirectories[] = {
        "nvidia/cu13/bin/x86_64", "nvidia/cu13/bin", "nvidia/cublas/bin"};
    char places[18][FP8Q_CUDA_PATH_SIZE];
    const char *expected[18];
    const fp8q_cublaslt *library = fp8q_cublaslt_load(folders, 2);
    int index;

    for (index = 0; index < 6; index++) {
        (void)snprintf(places[2 * index], sizeof places[0],
                       "%s/%s/cublasLt64_12.dll", folders[index / 3],
                       wheel_subdirectories[index % 3]);
        (void)snprintf(places[2 * index + 1], sizeof places[0],
                       "%s/%s/cublasLt64_13.dll", folders[index / 3],
                       wheel_subdirectories[index % 3]);
    }
    (void)snprintf(places[12], sizeof places[0],
                   "C:/fp8q-no-toolkit/bin/cublasLt64_12.dll");
    (void)snprintf(places[13], sizeof places[0],
                   "C:/fp8q-no-toolkit/bin/cublasLt64_13.dll");
    (void)snprintf(places[14], sizeof places[0],
                   "C:/fp8q-no-toolkit/bin/x64/cublasLt64_12.dll");
    (void)snprintf(places[15], sizeof places[0],
                   "C:/fp8q-no-toolkit/bin/x64/cublasLt64_13.dll");
    (void)snprintf(places[16], sizeof places[0], "cublasLt64_12.dll");
    (void)snprintf(places[17], sizeof places[0], "cublasLt64_13.dll");
    for (index = 0; index < 18; index++) {
        expected[index] = places[index];
    }
    if (library->error.status != FP8Q_ERROR_CUDA ||
        !starts_with(library->error.message, "cuBLASLt not found")) {
        return fail("cublaslt-order",
                    "a cuBLASLt was loaded (the working directory's?)",
                    library->path);
    }
    return check_search("cublaslt-order", library, expected, 18);
}

static int cublaslt_wheel(const char *const *folders)
{
    const fp8q_cublaslt *library = fp8q_cublaslt_load(folders, 2);
    const char *message = library->error.message;

    if (library->error.status != FP8Q_ERROR_CUDA ||
        !starts_with(message, "cuBLASLt ") ||
        strstr(message, "cublasLt64_12.dll has no cublasLtCreate: it is not "
                        "a cuBLASLt fp8q can use") == NULL) {
        return fail("cublaslt-wheel", "not opened from the second wheel",
                    message);
    }
    /* fp8q_library_path: the absolute path the loader opened. */
    if (library->path[1] != ':' || library->path[2] != '\\') {
        return fail("cublaslt-wheel", "not an absolute Windows path",
                    library->path);
    }
    return 0;
}

static int kernel_image(const char *scenario, const char *folder,
                        int expect_ok)
{
    const unsigned char *image = NULL;
    size_t size = 0;
    fp8q_error error;
    char expected[FP8Q_CUDA_PATH_SIZE + 64];
    fp8q_status status;

    fp8q_error_clear(&error);
    fp8q_kernel_image_set_folder(folder);
    status = fp8q_kernel_image_get(&image, &size, &error);
    if (expect_ok) {
        return status == FP8Q_OK && size == 16 && image != NULL
                   ? 0
                   : fail(scenario, "the image was not read", error.message);
    }
    (void)snprintf(expected, sizeof expected,
                   "fp8q's CUDA kernels are missing: %s/%s cannot be read "
                   "(No such file or directory); reinstall fp8q",
                   folder, FP8Q_KERNEL_IMAGE_FILE);
    return status == FP8Q_ERROR_CUDA && strcmp(error.message, expected) == 0
               ? 0
               : fail(scenario, expected, error.message);
}

int main(int argc, char **argv)
{
    const char *scenario = argc > 1 ? argv[1] : "";
    const char *const *folders = (const char *const *)(argv + 2);
    int failed;

    if (strcmp(scenario, "no-driver") == 0) {
        failed = no_driver();
    }
    else if (strcmp(scenario, "no-entry-points") == 0) {
        failed = no_entry_points();
    }
    else if (strcmp(scenario, "cublaslt-order") == 0 && argc == 4) {
        failed = cublaslt_order(folders);
    }
    else if (strcmp(scenario, "cublaslt-wheel") == 0 && argc == 4) {
        failed = cublaslt_wheel(folders);
    }
    else if (strcmp(scenario, "kernel-image-missing") == 0) {
        failed = kernel_image(scenario, "C:/fp8q-nowhere", 0);
    }
    else if (strcmp(scenario, "kernel-image-valid") == 0) {
        /* "kernel-\u00e9" in UTF-8: _wfopen_s gets the same name. */
        failed = kernel_image(scenario, "kernel-\xc3\xa9", 1);
    }
    else {
        printf("usage: cuda_loader no-driver | no-entry-points | "
               "cublaslt-order FOLDER1 FOLDER2 | cublaslt-wheel FOLDER1 "
               "FOLDER2 | kernel-image-missing | kernel-image-valid\n");
        return 2;
    }
    if (!failed) {
        printf("ok   %s\n", scenario);
    }
    return failed;
}
