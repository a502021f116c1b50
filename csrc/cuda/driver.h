/*
 * driver.h - the CUDA driver, loaded at first GPU use: finding and opening
 * the driver library, its entry points, the devices, and fp8q's kernel image
 * loaded into each device's primary context.
 *
 * Nothing here runs at import: the first call of fp8q_cuda_driver_load (from
 * any of the functions below) opens the driver, exactly once per process and
 * thread-safely. Every failure is an FP8Q_ERROR_CUDA whose message says what
 * happened and what was looked for. Results, failures included, are kept for
 * the life of the process: a missing driver or an image the GPU cannot run
 * does not appear later. Call these without holding Python's GIL (cuInit
 * may take seconds).
 *
 * Where the driver is looked for: the environment variable FP8Q_CUDA_DRIVER,
 * when set, names the one library to open (a path; for diagnostics and tests,
 * e.g. a fake driver); otherwise libcuda.so.1, then libcuda.so, through the
 * system's loader (Linux), or nvcuda.dll from System32 only (Windows).
 */
#ifndef FP8Q_CUDA_DRIVER_H
#define FP8Q_CUDA_DRIVER_H

#include <stdint.h>

#include "core/status.h"
#include "cuda/driver_api.h"
#include "cuda/kernel_image.h" /* FP8Q_CUDA_PATH_SIZE */
#include "cuda/kernel_list.h"

/* The driver API level fp8q asks cuGetProcAddress for (CUDA 12.0, the
 * first with cuGetProcAddress_v2 and cuLibraryLoadData): drivers older than
 * this are refused. Units of cuDriverGetVersion: 1000 * major + 10 * minor. */
#define FP8Q_CUDA_API_VERSION 12000

#define FP8Q_CUDA_DEVICE_NAME_SIZE 256

/* The driver entry points, resolved with cuGetProcAddress at
 * FP8Q_CUDA_API_VERSION (so cuDeviceTotalMem is cuDeviceTotalMem_v2, and so
 * on). All are non-NULL once the driver loaded, except library_load_data,
 * library_get_module, library_unload, device_get_default_mem_pool,
 * mem_pool_set_attribute and stream_get_capture_info, which are NULL where
 * the driver lacks them. */
typedef struct fp8q_cuda_api {
    fp8q_cu_get_error_text_fn get_error_name;
    fp8q_cu_get_error_text_fn get_error_string;
    fp8q_cu_driver_get_version_fn driver_get_version;
    fp8q_cu_init_fn init;
    fp8q_cu_device_get_count_fn device_get_count;
    fp8q_cu_device_get_fn device_get;
    fp8q_cu_device_get_name_fn device_get_name;
    fp8q_cu_device_get_attribute_fn device_get_attribute;
    fp8q_cu_device_total_mem_fn device_total_mem;
    fp8q_cu_device_primary_ctx_retain_fn device_primary_ctx_retain;
    fp8q_cu_device_primary_ctx_release_fn device_primary_ctx_release;
    fp8q_cu_ctx_push_current_fn ctx_push_current;
    fp8q_cu_ctx_pop_current_fn ctx_pop_current;
    fp8q_cu_library_load_data_fn library_load_data;
    fp8q_cu_library_get_module_fn library_get_module;
    fp8q_cu_library_unload_fn library_unload;
    fp8q_cu_module_load_data_fn module_load_data;
    fp8q_cu_module_get_function_fn module_get_function;
    fp8q_cu_launch_kernel_fn launch_kernel;
    fp8q_cu_occupancy_max_active_blocks_fn occupancy_max_active_blocks;
    fp8q_cu_mem_alloc_fn mem_alloc;
    fp8q_cu_mem_free_fn mem_free;
    fp8q_cu_mem_alloc_async_fn mem_alloc_async;
    fp8q_cu_mem_free_async_fn mem_free_async;
    fp8q_cu_device_get_default_mem_pool_fn device_get_default_mem_pool;
    fp8q_cu_mem_pool_set_attribute_fn mem_pool_set_attribute;
    fp8q_cu_memcpy_async_fn memcpy_async;
    fp8q_cu_memset_d8_async_fn memset_d8_async;
    fp8q_cu_memset_d32_async_fn memset_d32_async;
    fp8q_cu_stream_synchronize_fn stream_synchronize;
    fp8q_cu_stream_get_capture_info_fn stream_get_capture_info;
    fp8q_cu_stream_wait_event_fn stream_wait_event;
    fp8q_cu_event_create_fn event_create;
    fp8q_cu_event_record_fn event_record;
    fp8q_cu_event_destroy_fn event_destroy;
    /* Optional (NULL where the driver lacks them): the GEMM tuner's timing
     * (cuda/matmul.h); without them products are not timed. */
    fp8q_cu_event_synchronize_fn event_synchronize;
    fp8q_cu_event_elapsed_time_fn event_elapsed_time;
} fp8q_cuda_api;

/* What fp8q found of the driver; never changes once loaded. */
typedef struct fp8q_cuda_driver {
    /* Nonzero when a driver library was opened and exports
     * cuGetProcAddress_v2; `path` is then the file that was loaded. */
    int found;
    char path[FP8Q_CUDA_PATH_SIZE];
    /* cuDriverGetVersion (e.g. 12040 for 12.4), or 0 when not known. */
    int version;
    /* The number of devices; nonzero exactly when `error` is FP8Q_OK. */
    int device_count;
    /* FP8Q_OK when the driver is usable: found, every entry point resolved,
     * cuInit succeeded, at least one device, version >= 12.0. Otherwise the
     * FP8Q_ERROR_CUDA that says why. */
    fp8q_error error;
    fp8q_cuda_api api;
} fp8q_cuda_driver;

/* Loads the driver on the first call (once per process) and returns what
 * was found; never NULL. Check ->error before using ->api. */
const fp8q_cuda_driver *fp8q_cuda_driver_load(void);

/* Formats a cuDriverGetVersion value as "major.minor" (12040 -> "12.4"). */
void fp8q_cuda_format_version(int version, char *text, size_t text_size);

/* Writes "NAME (description)" for `result` (e.g. "CUDA_ERROR_NO_DEVICE (no
 * CUDA-capable device is detected)"), or "CUresult N" when the driver has
 * no name for it. */
void fp8q_cuda_describe_result(const fp8q_cuda_driver *driver,
                               fp8q_cu_result result, char *text,
                               size_t text_size);

/*
 * FP8Q_OK when fp8q's GPU backend can be used here: the driver is usable
 * (as fp8q_cuda_driver_load's ->error), fp8q was built with CUDA kernels
 * ("fp8q was built without CUDA kernels: <reason>" otherwise), the driver
 * is at least the version the kernels were built for (both versions in the
 * message otherwise), and the switches (cuda/switches.h, read here the
 * first time) have values they take. Devices' kernel images are not
 * loaded.
 */
fp8q_status fp8q_cuda_backend_check(fp8q_error *error);

/* Nonzero for compute capability 8.9 and newer: FP8 tensor cores. */
int fp8q_cuda_has_fp8_tensor_cores(int major, int minor);

/* A device as the driver describes it. */
typedef struct fp8q_cuda_device_properties {
    int index;
    char name[FP8Q_CUDA_DEVICE_NAME_SIZE];
    int compute_capability_major;
    int compute_capability_minor;
    uint64_t memory_bytes; /* total global memory */
    /* Nonzero for compute capability 8.9 and newer (FP8 tensor cores). */
    int native_fp8;
} fp8q_cuda_device_properties;

/* Queries device `index` (0 <= index < device_count) of a usable driver;
 * creates no context. */
fp8q_status fp8q_cuda_device_properties_get(
    int index, fp8q_cuda_device_properties *properties, fp8q_error *error);

/* Threads per block of fp8q's kernels (a multiple of 32; the one-pass row
 * quantize kernel sizes its blocks to the row instead). */
#define FP8Q_CUDA_THREADS_PER_BLOCK 256

/* fp8q's kernels, by the names of their launch contracts in kernels/
 * (cuda/kernel_list.h: each kernel header's FP8Q_<NAME>_KERNELS list). */
#define FP8Q_CUDA_KERNEL_VALUE(value, name) value,
typedef enum fp8q_cuda_kernel {
    FP8Q_CUDA_KERNEL_LIST(FP8Q_CUDA_KERNEL_VALUE)
    FP8Q_KERNEL_COUNT
} fp8q_cuda_kernel;
#undef FP8Q_CUDA_KERNEL_VALUE

/* The kernel's name in the image (e.g. "fp8q_cast"). */
const char *fp8q_cuda_kernel_name(fp8q_cuda_kernel kernel);

/* A device ready to run fp8q's kernels. */
typedef struct fp8q_cuda_device {
    int index;
    fp8q_cu_device device;
    /* The device's primary context (the one the CUDA runtime and PyTorch
     * use), retained by fp8q for the life of the process. */
    fp8q_cu_context context;
    /* fp8q's kernel image: loaded with cuLibraryLoadData (library is then
     * non-NULL) where the driver has it, else with cuModuleLoadData; module
     * is the image's module in `context` either way (cuModuleGetFunction
     * finds the kernels in it). */
    fp8q_cu_library library;
    fp8q_cu_module module;
    /* Every fp8q_cuda_kernel, found in `module` when the device opened. */
    fp8q_cu_function kernels[FP8Q_KERNEL_COUNT];
    /* Blocks of FP8Q_CUDA_THREADS_PER_BLOCK threads of each kernel that fit
     * on one multiprocessor at once (at least 1), from
     * cuOccupancyMaxActiveBlocksPerMultiprocessor when the device opened: a
     * grid-stride kernel fills the device with multiprocessor_count times
     * this many blocks. */
    int blocks_per_multiprocessor[FP8Q_KERNEL_COUNT];
    /* Compute capability, e.g. 9 and 0 for sm_90. */
    int compute_capability_major;
    int compute_capability_minor;
    /* Nonzero when scaled_mm uses the device's FP8 tensor cores: compute
     * capability 8.9 or newer, and FP8Q_CUDA_NO_FP8_TENSOR_CORES not 1
     * (cuda/switches.h). */
    int fp8_tensor_cores;
    /* Multiprocessors, for sizing grids. */
    int multiprocessor_count;
    /* Nonzero when fp8q allocates with the stream-ordered allocator
     * (cuMemAllocAsync from the device's default memory pool): the device
     * supports memory pools and its default pool took fp8q's release
     * threshold (FP8Q_MEMORY_POOL_RELEASE_THRESHOLD in driver.c). Zero:
     * cuMemAlloc and cuMemFree. */
    int memory_pools;
} fp8q_cuda_device;

/*
 * Returns device `index` with fp8q's kernels loaded into its primary
 * context: on the first call for the device, retains the primary context
 * and loads the real-code image read from its file (cuda/kernel_image.h;
 * once per device, thread-safely); where the driver answers that it holds
 * no code for the GPU (CUDA_ERROR_NO_BINARY_FOR_GPU or
 * CUDA_ERROR_UNSUPPORTED_PTX_VERSION), reads the PTX image's file, only
 * then, and loads that instead. Fails as fp8q_cuda_backend_check, with the
 * real-code file's error when it is missing or damaged, with "CUDA device
 * N does not exist" for a bad index, and with the device's sm_XY and the
 * architectures fp8q's kernels were built for when neither image has code
 * this GPU can run (naming both files), or the PTX file's error when a GPU
 * needs it and it is missing or damaged.
 */
fp8q_status fp8q_cuda_device_open(int index, const fp8q_cuda_device **device,
                                  fp8q_error *error);

#endif /* FP8Q_CUDA_DRIVER_H */
