/*
 * cublaslt.c - finds and opens cuBLASLt at first use, resolves its entry
 * points, and keeps one handle per device (see cublaslt.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cublaslt.h"
#include "cuda/memory.h"
#include "platform.h"

/* ------------------------------------------------------------------------- */
/* Process-wide state                                                        */

typedef struct load_request {
    const char *const *install_folders;
    int n_folders;
    int driver_version; /* cuDriverGetVersion's, 0 when unknown */
} load_request;

typedef struct device_slot {
    fp8q_once once;
    const fp8q_cuda_device *device;
    fp8q_cublaslt_device state;
    fp8q_error error;
} device_slot;

static fp8q_once library_once = FP8Q_ONCE_INIT;
static fp8q_cublaslt library;
static fp8q_library *library_handle;
static volatile int64_t library_ready; /* 1 once library_once has run */
static device_slot device_slots[FP8Q_CUBLASLT_MAX_DEVICES];

/* The file names of cuBLASLt 13 and 12, in the order they are tried:
 * the release that matches the driver first (a CUDA 12 driver cannot run
 * cuBLASLt 13). Set once by load_library. */
#if defined(_WIN32)
static const char *const names_13_first[] = {"cublasLt64_13.dll",
                                              "cublasLt64_12.dll"};
static const char *const names_12_first[] = {"cublasLt64_12.dll",
                                             "cublasLt64_13.dll"};
static const char *const toolkit_subdirectories[] = {"bin", "bin/x64"};
/* CUDA 13's wheels keep the DLLs in bin/x86_64, CUDA 12's in bin. */
static const char *const wheel_subdirectories[] = {
    "nvidia/cu13/bin/x86_64", "nvidia/cu13/bin", "nvidia/cublas/bin"};
#else
static const char *const names_13_first[] = {"libcublasLt.so.13",
                                             "libcublasLt.so.12"};
static const char *const names_12_first[] = {"libcublasLt.so.12",
                                             "libcublasLt.so.13"};
static const char *const toolkit_subdirectories[] = {"lib64", "lib"};
static const char *const wheel_subdirectories[] = {"nvidia/cu13/lib",
                                                   "nvidia/cublas/lib"};
#endif
#define N_NAMES (sizeof names_13_first / sizeof names_13_first[0])
static const char *const *library_names = names_13_first;
#define N_SUBDIRECTORIES \
    (sizeof toolkit_subdirectories / sizeof toolkit_subdirectories[0])
#define N_WHEEL_SUBDIRECTORIES \
    (sizeof wheel_subdirectories / sizeof wheel_subdirectories[0])

/* ------------------------------------------------------------------------- */
/* Finding the library                                                       */

/* Everything tried so far: one "place (reason)" line each, in
 * library.search. */
typedef struct search_log {
    int count;
    int overflowed; /* a line did not fit */
} search_log;

static void log_try(search_log *log, const char *what, const char *reason)
{
    const size_t used = strlen(library.search);
    const size_t room = sizeof library.search - used;
    const int length =
        snprintf(library.search + used, room, "%s (%s)\n", what, reason);
    if (length < 0 || (size_t)length >= room) {
        library.search[used] = '\0';
        log->overflowed = 1;
        return;
    }
    log->count++;
}

/* The failure of a search that found nothing: every place in the message
 * where they fit, else their number and where to read them. */
static void fail_not_found(const search_log *log)
{
    /* What the message's other words leave of FP8Q_ERROR_MESSAGE_SIZE. */
    char tried[FP8Q_ERROR_MESSAGE_SIZE - 160];
    const char *line = library.search;
    size_t used = 0;
    int fits = !log->overflowed;

    tried[0] = '\0';
    while (fits && *line != '\0') {
        const char *end = strchr(line, '\n');
        const size_t length = (size_t)(end - line);
        const size_t separator = used > 0 ? 2 : 0;
        if (used + separator + length >= sizeof tried) {
            fits = 0;
            break;
        }
        memcpy(tried + used, "; ", separator);
        memcpy(tried + used + separator, line, length);
        used += separator + length;
        tried[used] = '\0';
        line = end + 1;
    }
    if (fits) {
        fp8q_fail(&library.error, FP8Q_ERROR_CUDA,
                  "cuBLASLt not found: tried %s. Install NVIDIA's "
                  "nvidia-cublas wheel (or PyTorch with CUDA), or set "
                  "FP8Q_CUBLASLT to libcublasLt's path",
                  tried);
        return;
    }
    fp8q_fail(&library.error, FP8Q_ERROR_CUDA,
              "cuBLASLt not found in %d places (`python -m fp8q info` lists "
              "each and why it failed). Install NVIDIA's nvidia-cublas wheel "
              "(or PyTorch with CUDA), or set FP8Q_CUBLASLT to libcublasLt's "
              "path",
              log->count);
}

/* Opens `path`; on success records it as the library's path. */
static int try_open(const char *path, search_log *log)
{
    char reason[256];
    library_handle = fp8q_library_open(path, 0, reason, sizeof reason);
    if (library_handle == NULL) {
        log_try(log, path, reason);
        return 0;
    }
    if (fp8q_library_path(library_handle, library.path, sizeof library.path) <
        0) {
        (void)snprintf(library.path, sizeof library.path, "%s", path);
    }
    return 1;
}

/* Writes directory/name into path; -1 when it does not fit, logged as
 * "DIRECTORY (path too long for NAME)". */
static int join_path(char *path, size_t size, const char *directory,
                     const char *name, search_log *log)
{
    const int length = snprintf(path, size, "%s/%s", directory, name);
    char reason[96];
    if (length < 0 || (size_t)length >= size) {
        (void)snprintf(reason, sizeof reason, "path too long for %s", name);
        log_try(log, directory, reason);
        return -1;
    }
    return 0;
}

/* Tries directory/name for every library name. */
static int try_directory(const char *directory, search_log *log)
{
    char path[FP8Q_CUDA_PATH_SIZE];
    size_t index;
    for (index = 0; index < N_NAMES; index++) {
        if (join_path(path, sizeof path, directory, library_names[index],
                      log) == 0 &&
            try_open(path, log)) {
            return 1;
        }
    }
    return 0;
}

/* 1 when `path` is absolute: POSIX, it starts with '/'; Windows, a drive
 * letter, ':' and a slash (C:\ or C:/), or a UNC path (\\server or //server).
 * A relative CUDA_PATH would make the search open libraries from the
 * working directory, which it never does. */
static int is_absolute_path(const char *path)
{
#if defined(_WIN32)
    if (((path[0] >= 'A' && path[0] <= 'Z') ||
         (path[0] >= 'a' && path[0] <= 'z')) &&
        path[1] == ':' && (path[2] == '\\' || path[2] == '/')) {
        return 1;
    }
    return (path[0] == '\\' || path[0] == '/') &&
           (path[1] == '\\' || path[1] == '/');
#else
    return path[0] == '/';
#endif
}

/* Steps 2 to 5 of the search (cublaslt.h). */
static int search(const load_request *request, search_log *log)
{
    static const char *const toolkit_variables[] = {"CUDA_PATH", "CUDA_HOME"};
    char root[FP8Q_CUDA_PATH_SIZE];
    char directory[FP8Q_CUDA_PATH_SIZE];
    size_t index, sub;
    int entry;

    for (index = 0; index < N_NAMES; index++) {
        if (fp8q_library_is_loaded(library_names[index], &library_handle)) {
            if (fp8q_library_path(library_handle, library.path,
                                  sizeof library.path) < 0) {
                (void)snprintf(library.path, sizeof library.path, "%s",
                               library_names[index]);
            }
            return 1;
        }
    }
    for (entry = 0; entry < request->n_folders; entry++) {
        for (sub = 0; sub < N_WHEEL_SUBDIRECTORIES; sub++) {
            if (join_path(directory, sizeof directory,
                          request->install_folders[entry],
                          wheel_subdirectories[sub], log) == 0 &&
                try_directory(directory, log)) {
                return 1;
            }
        }
    }
    for (index = 0; index < 2; index++) {
        if (fp8q_getenv_utf8(toolkit_variables[index], root, sizeof root) <= 0) {
            continue;
        }
        if (!is_absolute_path(root)) {
            char what[FP8Q_CUDA_PATH_SIZE + 16];
            (void)snprintf(what, sizeof what, "%s=%s",
                           toolkit_variables[index], root);
            log_try(log, what,
                    "not an absolute path: ignored, as it would be the "
                    "working directory's");
            continue;
        }
        for (sub = 0; sub < N_SUBDIRECTORIES; sub++) {
            if (join_path(directory, sizeof directory, root,
                          toolkit_subdirectories[sub], log) == 0 &&
                try_directory(directory, log)) {
                return 1;
            }
        }
    }
    for (index = 0; index < N_NAMES; index++) {
        if (try_open(library_names[index], log)) {
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Entry points                                                              */

static int resolve(const char *name, void *slot)
{
    void *address = fp8q_library_symbol(library_handle, name);
    /* Function and object pointers share one representation on every
     * platform fp8q supports; memcpy converts without an ISO C cast. */
    memcpy(slot, &address, sizeof address);
    if (address == NULL) {
        fp8q_fail(&library.error, FP8Q_ERROR_CUDA,
                  "cuBLASLt %s has no %s: it is not a cuBLASLt fp8q can use",
                  library.path, name);
        return -1;
    }
    return 0;
}

static int resolve_entry_points(void)
{
    fp8q_cublaslt_api *api = &library.api;
    return resolve("cublasLtCreate", &api->create) < 0 ||
                   resolve("cublasLtGetVersion", &api->get_version) < 0 ||
                   resolve("cublasLtGetStatusName", &api->get_status_name) <
                       0 ||
                   resolve("cublasLtMatmulDescCreate",
                           &api->matmul_desc_create) < 0 ||
                   resolve("cublasLtMatmulDescSetAttribute",
                           &api->matmul_desc_set_attribute) < 0 ||
                   resolve("cublasLtMatmulDescDestroy",
                           &api->matmul_desc_destroy) < 0 ||
                   resolve("cublasLtMatrixLayoutCreate",
                           &api->matrix_layout_create) < 0 ||
                   resolve("cublasLtMatrixLayoutDestroy",
                           &api->matrix_layout_destroy) < 0 ||
                   resolve("cublasLtMatmulPreferenceCreate",
                           &api->preference_create) < 0 ||
                   resolve("cublasLtMatmulPreferenceSetAttribute",
                           &api->preference_set_attribute) < 0 ||
                   resolve("cublasLtMatmulPreferenceDestroy",
                           &api->preference_destroy) < 0 ||
                   resolve("cublasLtMatmulAlgoGetHeuristic",
                           &api->algo_get_heuristic) < 0 ||
                   resolve("cublasLtMatmul", &api->matmul) < 0
               ? -1
               : 0;
}

/* Runs once: fills `library`. */
static void load_library(void *context)
{
    const load_request *request = (const load_request *)context;
    char override[FP8Q_CUDA_PATH_SIZE];
    search_log log = {0, 0};
    const int override_state =
        fp8q_getenv_utf8("FP8Q_CUBLASLT", override, sizeof override);
    int found;

    fp8q_error_clear(&library.error);
    library.search[0] = '\0';
    if (request->driver_version < 13000) {
        library_names = names_12_first;
    }
    if (override_state < 0) {
        fp8q_fail(&library.error, FP8Q_ERROR_CUDA,
                  "cuBLASLt not found: FP8Q_CUBLASLT is longer than %d bytes "
                  "or not valid text",
                  FP8Q_CUDA_PATH_SIZE - 1);
        return;
    }
    found = override_state > 0 ? try_open(override, &log)
                               : search(request, &log);
    if (!found) {
        fail_not_found(&log);
        return;
    }
    if (resolve_entry_points() < 0) {
        return;
    }
    library.version = library.api.get_version();
    if (library.version < FP8Q_CUBLASLT_MIN_VERSION) {
        fp8q_fail(&library.error, FP8Q_ERROR_CUDA,
                  "cuBLASLt %s is version %zu, but fp8q needs 12.0 or newer",
                  library.path, library.version);
    }
}

const fp8q_cublaslt *fp8q_cublaslt_load(const char *const *install_folders,
                                        int n_folders)
{
    load_request request;
    request.install_folders = install_folders;
    request.n_folders = n_folders;
    /* Outside the once: fp8q_once_run must not nest an unfinished once. */
    request.driver_version = fp8q_cuda_driver_load()->version;
    fp8q_once_run(&library_once, load_library, &request);
    fp8q_atomic_store_i64(&library_ready, 1);
    return &library;
}

const fp8q_cublaslt *fp8q_cublaslt_loaded(void)
{
    return fp8q_atomic_load_i64(&library_ready) ? &library : NULL;
}

void fp8q_cublaslt_format_version(size_t version, char *text,
                                  size_t text_size)
{
    (void)snprintf(text, text_size, "%d.%d.%d", (int)(version / 10000),
                   (int)(version / 100 % 100), (int)(version % 100));
}

void fp8q_cublaslt_describe(const fp8q_cublaslt *loaded, fp8q_lt_status status,
                            char *text, size_t text_size)
{
    const char *name = loaded->api.get_status_name != NULL
                           ? loaded->api.get_status_name(status)
                           : NULL;
    if (name != NULL) {
        (void)snprintf(text, text_size, "%s (%d)", name, status);
    }
    else {
        (void)snprintf(text, text_size, "cublasStatus_t %d", status);
    }
}

/* ------------------------------------------------------------------------- */
/* Per device                                                                */

static void open_device(void *context)
{
    device_slot *slot = (device_slot *)context;
    fp8q_lt_status status;
    char what[96];

    fp8q_error_clear(&slot->error);
    if (fp8q_cuda_context_enter(slot->device, &slot->error) != FP8Q_OK) {
        return;
    }
    status = library.api.create(&slot->state.handle);
    fp8q_cuda_context_leave();
    if (status != FP8Q_LT_SUCCESS) {
        fp8q_cublaslt_describe(&library, status, what, sizeof what);
        fp8q_fail(&slot->error, FP8Q_ERROR_CUDA,
                  "cublasLtCreate failed on CUDA device %d: %s",
                  slot->device->index, what);
    }
}

fp8q_status fp8q_cublaslt_device_open(const fp8q_cublaslt *loaded,
                                      const fp8q_cuda_device *device,
                                      const fp8q_cublaslt_device **out,
                                      fp8q_error *error)
{
    device_slot *slot;

    *out = NULL;
    if (loaded->error.status != FP8Q_OK) {
        *error = loaded->error;
        return error->status;
    }
    if (device->index < 0 || device->index >= FP8Q_CUBLASLT_MAX_DEVICES) {
        return fp8q_fail(error, FP8Q_ERROR_CUDA,
                         "CUDA device %d: fp8q's matrix multiply supports "
                         "devices 0 to %d",
                         device->index, FP8Q_CUBLASLT_MAX_DEVICES - 1);
    }
    slot = &device_slots[device->index];
    slot->device = device;
    fp8q_once_run(&slot->once, open_device, slot);
    if (slot->error.status != FP8Q_OK) {
        *error = slot->error;
        return error->status;
    }
    *out = &slot->state;
    return FP8Q_OK;
}
