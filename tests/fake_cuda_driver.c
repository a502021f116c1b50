/*
 * fake_cuda_driver.c - a stand-in for the CUDA driver library, for testing
 * fp8q's driver loading on machines without a GPU. The tests compile it into
 * a shared library and point FP8Q_CUDA_DRIVER at it.
 *
 * It exports only cuGetProcAddress_v2 (as the real driver does, everything
 * else is found through it) and behaves as environment variables say:
 *   FAKE_CUDA_VERSION     cuDriverGetVersion's value (default 13000)
 *   FAKE_CUDA_INIT_ERROR  the CUresult cuInit returns (default 0)
 *   FAKE_CUDA_DEVICES     the device count (default 1)
 *   FAKE_CUDA_NAME        every device's name (default "Fake GPU")
 *   FAKE_CUDA_CC          compute capability "major.minor" (default "8.9")
 *   FAKE_CUDA_MEMORY      total memory in bytes (default 24 GiB)
 *   FAKE_CUDA_MISSING     an entry point cuGetProcAddress reports missing
 *   FAKE_CUDA_LOAD_ERROR  the CUresult of loading a kernel image (default 0)
 *   FAKE_CUDA_NO_LIBRARY  when set, there is no cuLibraryLoadData
 *   FAKE_CUDA_LOG         a file each call's name is appended to
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int result_t;

static int setting(const char *name, int fallback)
{
    const char *text = getenv(name);
    return text != NULL && text[0] != '\0' ? atoi(text) : fallback;
}

static void log_call(const char *name)
{
    const char *path = getenv("FAKE_CUDA_LOG");
    FILE *file;
    if (path == NULL || path[0] == '\0') {
        return;
    }
    file = fopen(path, "a");
    if (file != NULL) {
        fprintf(file, "%s\n", name);
        fclose(file);
    }
}

static const char *error_name(result_t error)
{
    switch (error) {
    case 0: return "CUDA_SUCCESS";
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 209: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case 222: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case 999: return "CUDA_ERROR_UNKNOWN";
    default: return NULL;
    }
}

static result_t fake_get_error_name(result_t error, const char **text)
{
    *text = error_name(error);
    return *text != NULL ? 0 : 1;
}

static result_t fake_get_error_string(result_t error, const char **text)
{
    *text = error_name(error) != NULL ? "fake driver description" : NULL;
    return *text != NULL ? 0 : 1;
}

static int initialised;

static result_t fake_init(unsigned int flags)
{
    const int error = setting("FAKE_CUDA_INIT_ERROR", 0);
    log_call("cuInit");
    if (flags != 0) {
        return 1;
    }
    initialised = error == 0;
    return error;
}

static result_t fake_driver_get_version(int *version)
{
    *version = setting("FAKE_CUDA_VERSION", 13000);
    return 0;
}

static result_t fake_device_get_count(int *count)
{
    if (!initialised) {
        return 3;
    }
    *count = setting("FAKE_CUDA_DEVICES", 1);
    return 0;
}

static result_t fake_device_get(int *device, int ordinal)
{
    if (!initialised || ordinal < 0 ||
        ordinal >= setting("FAKE_CUDA_DEVICES", 1)) {
        return 101; /* CUDA_ERROR_INVALID_DEVICE */
    }
    *device = ordinal;
    return 0;
}

static result_t fake_device_get_name(char *name, int length, int device)
{
    const char *text = getenv("FAKE_CUDA_NAME");
    (void)snprintf(name, (size_t)length, "%s %d",
                   text != NULL ? text : "Fake GPU", device);
    return 0;
}

static result_t fake_device_get_attribute(int *value, int attribute,
                                          int device)
{
    const char *text = getenv("FAKE_CUDA_CC");
    int major = 8;
    int minor = 9;
    (void)device;
    if (text != NULL && sscanf(text, "%d.%d", &major, &minor) != 2) {
        return 1;
    }
    if (attribute == 75) {
        *value = major;
        return 0;
    }
    if (attribute == 76) {
        *value = minor;
        return 0;
    }
    return 1;
}

static result_t fake_device_total_mem(size_t *bytes, int device)
{
    const char *text = getenv("FAKE_CUDA_MEMORY");
    (void)device;
    *bytes = text != NULL ? (size_t)strtoull(text, NULL, 10)
                          : (size_t)24 << 30;
    return 0;
}

static int context_storage;

static result_t fake_primary_ctx_retain(void **context, int device)
{
    (void)device;
    log_call("cuDevicePrimaryCtxRetain");
    *context = &context_storage;
    return 0;
}

static result_t fake_primary_ctx_release(int device)
{
    (void)device;
    log_call("cuDevicePrimaryCtxRelease");
    return 0;
}

static result_t fake_ctx_push(void *context)
{
    (void)context;
    log_call("cuCtxPushCurrent");
    return 0;
}

static result_t fake_ctx_pop(void **context)
{
    log_call("cuCtxPopCurrent");
    *context = &context_storage;
    return 0;
}

static int module_storage;
static int library_storage;

static result_t fake_library_load_data(void **library, const void *code,
                                       void *options, void **values,
                                       unsigned int n_options,
                                       void *library_options,
                                       void **library_values,
                                       unsigned int n_library_options)
{
    (void)code;
    (void)options;
    (void)values;
    (void)n_options;
    (void)library_options;
    (void)library_values;
    (void)n_library_options;
    log_call("cuLibraryLoadData");
    *library = &library_storage;
    return 0;
}

static result_t fake_library_get_module(void **module, void *library)
{
    (void)library;
    log_call("cuLibraryGetModule");
    *module = &module_storage;
    return setting("FAKE_CUDA_LOAD_ERROR", 0);
}

static result_t fake_library_unload(void *library)
{
    (void)library;
    log_call("cuLibraryUnload");
    return 0;
}

static result_t fake_module_load_data(void **module, const void *image)
{
    (void)image;
    log_call("cuModuleLoadData");
    *module = &module_storage;
    return setting("FAKE_CUDA_LOAD_ERROR", 0);
}

typedef struct entry {
    const char *name;
    void *function; /* the function, converted through uintptr_t */
} entry;

#define FUNCTION(function) ((void *)(uintptr_t)(function))

result_t cuGetProcAddress_v2(const char *symbol, void **function,
                             int cuda_version, uint64_t flags, int *status)
{
    const entry entries[] = {
        {"cuGetErrorName", FUNCTION(fake_get_error_name)},
        {"cuGetErrorString", FUNCTION(fake_get_error_string)},
        {"cuInit", FUNCTION(fake_init)},
        {"cuDriverGetVersion", FUNCTION(fake_driver_get_version)},
        {"cuDeviceGetCount", FUNCTION(fake_device_get_count)},
        {"cuDeviceGet", FUNCTION(fake_device_get)},
        {"cuDeviceGetName", FUNCTION(fake_device_get_name)},
        {"cuDeviceGetAttribute", FUNCTION(fake_device_get_attribute)},
        {"cuDeviceTotalMem", FUNCTION(fake_device_total_mem)},
        {"cuDevicePrimaryCtxRetain", FUNCTION(fake_primary_ctx_retain)},
        {"cuDevicePrimaryCtxRelease", FUNCTION(fake_primary_ctx_release)},
        {"cuCtxPushCurrent", FUNCTION(fake_ctx_push)},
        {"cuCtxPopCurrent", FUNCTION(fake_ctx_pop)},
        {"cuLibraryLoadData", FUNCTION(fake_library_load_data)},
        {"cuLibraryGetModule", FUNCTION(fake_library_get_module)},
        {"cuLibraryUnload", FUNCTION(fake_library_unload)},
        {"cuModuleLoadData", FUNCTION(fake_module_load_data)},
    };
    const char *missing = getenv("FAKE_CUDA_MISSING");
    size_t index;
    int ignored;

    *function = NULL;
    if (cuda_version != 12000 || flags != 0) {
        return 1; /* CUDA_ERROR_INVALID_VALUE: fp8q asks for 12.0 */
    }
    if (status == NULL) {
        status = &ignored;
    }
    *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    if ((missing != NULL && strcmp(symbol, missing) == 0) ||
        (getenv("FAKE_CUDA_NO_LIBRARY") != NULL &&
         strncmp(symbol, "cuLibrary", 9) == 0)) {
        return 0;
    }
    for (index = 0; index < sizeof entries / sizeof entries[0]; index++) {
        if (strcmp(symbol, entries[index].name) == 0) {
            *function = entries[index].function;
            *status = 0;
            return 0;
        }
    }
    return 0;
}
