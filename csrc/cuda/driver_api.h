/*
 * driver_api.h - the part of the CUDA driver API's binary interface that fp8q
 * calls, declared from NVIDIA's CUDA Driver API reference (fp8q includes no
 * CUDA header and links no CUDA library: csrc/cuda/driver.c finds these
 * functions at run time through cuGetProcAddress).
 *
 * Only types, constants and function pointer types are declared here. CUDA's
 * handles are opaque pointers, CUdevice is an int, enums are int-sized, and
 * on 64-bit Linux and Windows the driver uses the platform's one C calling
 * convention.
 */
#ifndef FP8Q_CUDA_DRIVER_API_H
#define FP8Q_CUDA_DRIVER_API_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------- */
/* Types                                                                     */

typedef int fp8q_cu_result;          /* CUresult */
typedef int fp8q_cu_device;          /* CUdevice: an ordinal */
typedef int fp8q_cu_device_attribute; /* CUdevice_attribute */
typedef int fp8q_cu_jit_option;      /* CUjit_option */
typedef int fp8q_cu_library_option;  /* CUlibraryOption */
typedef int fp8q_cu_proc_address_query_result; /* CUdriverProcAddressQueryResult */

typedef struct fp8q_cu_context_opaque *fp8q_cu_context; /* CUcontext */
typedef struct fp8q_cu_module_opaque *fp8q_cu_module;   /* CUmodule */
typedef struct fp8q_cu_library_opaque *fp8q_cu_library; /* CUlibrary */
typedef struct fp8q_cu_function_opaque *fp8q_cu_function; /* CUfunction */
typedef struct fp8q_cu_stream_opaque *fp8q_cu_stream;   /* CUstream */
typedef struct fp8q_cu_event_opaque *fp8q_cu_event;     /* CUevent */
typedef struct fp8q_cu_mem_pool_opaque *fp8q_cu_mem_pool; /* CUmemoryPool */
typedef int fp8q_cu_mem_pool_attribute; /* CUmemPool_attribute */
typedef unsigned long long fp8q_cu_deviceptr;           /* CUdeviceptr */
typedef int fp8q_cu_stream_capture_status; /* CUstreamCaptureStatus */
typedef struct fp8q_cu_graph_opaque *fp8q_cu_graph;     /* CUgraph */
typedef struct fp8q_cu_graph_node_opaque *fp8q_cu_graph_node; /* CUgraphNode */

/* ------------------------------------------------------------------------- */
/* Constants                                                                 */

/* CUresult values fp8q tells apart (cuda.h's CUDA_ERROR_*; the driver API
 * has no "insufficient driver" code: that is the runtime's cudaError 35). */
#define FP8Q_CUDA_SUCCESS 0
#define FP8Q_CUDA_ERROR_INVALID_VALUE 1
#define FP8Q_CUDA_ERROR_OUT_OF_MEMORY 2
#define FP8Q_CUDA_ERROR_NO_DEVICE 100
#define FP8Q_CUDA_ERROR_NO_BINARY_FOR_GPU 209
#define FP8Q_CUDA_ERROR_UNSUPPORTED_PTX_VERSION 222
/* The legacy default stream queried (or used) while a stream created
 * without CU_STREAM_NON_BLOCKING captures a CUDA graph. */
#define FP8Q_CUDA_ERROR_STREAM_CAPTURE_IMPLICIT 906

/* CUstreamCaptureStatus */
#define FP8Q_CU_STREAM_CAPTURE_STATUS_NONE 0
#define FP8Q_CU_STREAM_CAPTURE_STATUS_ACTIVE 1
#define FP8Q_CU_STREAM_CAPTURE_STATUS_INVALIDATED 2

/* CUdevice_attribute */
#define FP8Q_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define FP8Q_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define FP8Q_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define FP8Q_CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED 115

/* CUmemPool_attribute: the bytes a pool keeps reserved across
 * synchronizations (a cuuint64_t; 0, the default, returns every free byte to
 * the system at each synchronization). */
#define FP8Q_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD 4

/* CUevent_flags */
#define FP8Q_CU_EVENT_DEFAULT 0x0 /* timing enabled */
#define FP8Q_CU_EVENT_DISABLE_TIMING 0x2

/* The special stream handles (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD); a
 * NULL stream is the legacy default stream as well. */
#define FP8Q_CU_STREAM_LEGACY ((fp8q_cu_stream)0x1)
#define FP8Q_CU_STREAM_PER_THREAD ((fp8q_cu_stream)0x2)

/* cuGetProcAddress flags (CUdriverProcAddress_flags) and symbol status. */
#define FP8Q_CU_GET_PROC_ADDRESS_DEFAULT 0
#define FP8Q_CU_GET_PROC_ADDRESS_SUCCESS 0
#define FP8Q_CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND 1
#define FP8Q_CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT 2

/* The exported name of the CUDA 12 cuGetProcAddress (cuda.h maps
 * cuGetProcAddress to it); drivers older than CUDA 12.0 lack it. */
#define FP8Q_CU_GET_PROC_ADDRESS_SYMBOL "cuGetProcAddress_v2"

/* ------------------------------------------------------------------------- */
/* Functions (pointer types; names as cuGetProcAddress looks them up)        */

/* cuGetProcAddress (v2) */
typedef fp8q_cu_result (*fp8q_cu_get_proc_address_fn)(
    const char *symbol, void **function, int cuda_version, uint64_t flags,
    fp8q_cu_proc_address_query_result *symbol_status);

/* cuGetErrorName, cuGetErrorString */
typedef fp8q_cu_result (*fp8q_cu_get_error_text_fn)(fp8q_cu_result error,
                                                    const char **text);
/* cuInit */
typedef fp8q_cu_result (*fp8q_cu_init_fn)(unsigned int flags);
/* cuDriverGetVersion */
typedef fp8q_cu_result (*fp8q_cu_driver_get_version_fn)(int *version);
/* cuDeviceGetCount */
typedef fp8q_cu_result (*fp8q_cu_device_get_count_fn)(int *count);
/* cuDeviceGet */
typedef fp8q_cu_result (*fp8q_cu_device_get_fn)(fp8q_cu_device *device,
                                                int ordinal);
/* cuDeviceGetName */
typedef fp8q_cu_result (*fp8q_cu_device_get_name_fn)(char *name, int length,
                                                     fp8q_cu_device device);
/* cuDeviceGetAttribute */
typedef fp8q_cu_result (*fp8q_cu_device_get_attribute_fn)(
    int *value, fp8q_cu_device_attribute attribute, fp8q_cu_device device);
/* cuDeviceTotalMem (_v2) */
typedef fp8q_cu_result (*fp8q_cu_device_total_mem_fn)(size_t *bytes,
                                                      fp8q_cu_device device);
/* cuDevicePrimaryCtxRetain */
typedef fp8q_cu_result (*fp8q_cu_device_primary_ctx_retain_fn)(
    fp8q_cu_context *context, fp8q_cu_device device);
/* cuDevicePrimaryCtxRelease (_v2) */
typedef fp8q_cu_result (*fp8q_cu_device_primary_ctx_release_fn)(
    fp8q_cu_device device);
/* cuCtxPushCurrent (_v2) */
typedef fp8q_cu_result (*fp8q_cu_ctx_push_current_fn)(fp8q_cu_context context);
/* cuCtxPopCurrent (_v2) */
typedef fp8q_cu_result (*fp8q_cu_ctx_pop_current_fn)(fp8q_cu_context *context);
/* cuLibraryLoadData (CUDA 12.0+) */
typedef fp8q_cu_result (*fp8q_cu_library_load_data_fn)(
    fp8q_cu_library *library, const void *code,
    fp8q_cu_jit_option *jit_options, void **jit_option_values,
    unsigned int n_jit_options, fp8q_cu_library_option *library_options,
    void **library_option_values, unsigned int n_library_options);
/* cuLibraryGetModule (CUDA 12.0+): the library's module in the current
 * context. */
typedef fp8q_cu_result (*fp8q_cu_library_get_module_fn)(
    fp8q_cu_module *module, fp8q_cu_library library);
/* cuLibraryUnload (CUDA 12.0+) */
typedef fp8q_cu_result (*fp8q_cu_library_unload_fn)(fp8q_cu_library library);
/* cuModuleLoadData */
typedef fp8q_cu_result (*fp8q_cu_module_load_data_fn)(fp8q_cu_module *module,
                                                      const void *image);

/* cuModuleGetFunction */
typedef fp8q_cu_result (*fp8q_cu_module_get_function_fn)(
    fp8q_cu_function *function, fp8q_cu_module module, const char *name);
/* cuLaunchKernel */
typedef fp8q_cu_result (*fp8q_cu_launch_kernel_fn)(
    fp8q_cu_function function, unsigned int grid_x, unsigned int grid_y,
    unsigned int grid_z, unsigned int block_x, unsigned int block_y,
    unsigned int block_z, unsigned int shared_memory_bytes,
    fp8q_cu_stream stream, void **kernel_parameters, void **extra);

/* cuOccupancyMaxActiveBlocksPerMultiprocessor */
typedef fp8q_cu_result (*fp8q_cu_occupancy_max_active_blocks_fn)(
    int *blocks, fp8q_cu_function function, int block_size,
    size_t dynamic_shared_memory_bytes);

/* cuMemAlloc (_v2) */
typedef fp8q_cu_result (*fp8q_cu_mem_alloc_fn)(fp8q_cu_deviceptr *pointer,
                                               size_t bytes);
/* cuMemFree (_v2) */
typedef fp8q_cu_result (*fp8q_cu_mem_free_fn)(fp8q_cu_deviceptr pointer);
/* cuMemAllocAsync (CUDA 11.2+) */
typedef fp8q_cu_result (*fp8q_cu_mem_alloc_async_fn)(
    fp8q_cu_deviceptr *pointer, size_t bytes, fp8q_cu_stream stream);
/* cuMemFreeAsync (CUDA 11.2+) */
typedef fp8q_cu_result (*fp8q_cu_mem_free_async_fn)(fp8q_cu_deviceptr pointer,
                                                    fp8q_cu_stream stream);
/* cuDeviceGetDefaultMemPool (CUDA 11.2+): the pool cuMemAllocAsync uses. */
typedef fp8q_cu_result (*fp8q_cu_device_get_default_mem_pool_fn)(
    fp8q_cu_mem_pool *pool, fp8q_cu_device device);
/* cuMemPoolSetAttribute (CUDA 11.2+) */
typedef fp8q_cu_result (*fp8q_cu_mem_pool_set_attribute_fn)(
    fp8q_cu_mem_pool pool, fp8q_cu_mem_pool_attribute attribute, void *value);
/* cuMemcpyAsync: the direction follows from the addresses (unified
 * addressing), host memory included. */
typedef fp8q_cu_result (*fp8q_cu_memcpy_async_fn)(fp8q_cu_deviceptr destination,
                                                  fp8q_cu_deviceptr source,
                                                  size_t bytes,
                                                  fp8q_cu_stream stream);
/* cuMemsetD8Async */
typedef fp8q_cu_result (*fp8q_cu_memset_d8_async_fn)(
    fp8q_cu_deviceptr destination, unsigned char value, size_t count,
    fp8q_cu_stream stream);

/* cuMemsetD32Async: `count` 4-byte words set to `value`. */
typedef fp8q_cu_result (*fp8q_cu_memset_d32_async_fn)(
    fp8q_cu_deviceptr destination, unsigned int value, size_t count,
    fp8q_cu_stream stream);

/* cuStreamGetCaptureInfo as cuGetProcAddress gives it at CUDA 12.0 (the
 * ABI of cuStreamGetCaptureInfo_v2, CUDA 11.3; CUDA 12.3's _v3 adds edge
 * data): the stream's capture status and, while it is ACTIVE, the id of
 * its capture sequence (unique in the process); the other outputs may be
 * NULL. */
typedef fp8q_cu_result (*fp8q_cu_stream_get_capture_info_fn)(
    fp8q_cu_stream stream, fp8q_cu_stream_capture_status *status,
    uint64_t *id, fp8q_cu_graph *graph,
    const fp8q_cu_graph_node **dependencies, size_t *n_dependencies);

/* cuStreamSynchronize */
typedef fp8q_cu_result (*fp8q_cu_stream_synchronize_fn)(fp8q_cu_stream stream);
/* cuStreamWaitEvent */
typedef fp8q_cu_result (*fp8q_cu_stream_wait_event_fn)(fp8q_cu_stream stream,
                                                       fp8q_cu_event event,
                                                       unsigned int flags);
/* cuEventCreate */
typedef fp8q_cu_result (*fp8q_cu_event_create_fn)(fp8q_cu_event *event,
                                                  unsigned int flags);
/* cuEventRecord */
typedef fp8q_cu_result (*fp8q_cu_event_record_fn)(fp8q_cu_event event,
                                                  fp8q_cu_stream stream);
/* cuEventDestroy (_v2) */
typedef fp8q_cu_result (*fp8q_cu_event_destroy_fn)(fp8q_cu_event event);
/* cuEventSynchronize */
typedef fp8q_cu_result (*fp8q_cu_event_synchronize_fn)(fp8q_cu_event event);
/* cuEventElapsedTime: milliseconds between two events created without
 * CU_EVENT_DISABLE_TIMING, both complete */
typedef fp8q_cu_result (*fp8q_cu_event_elapsed_time_fn)(float *milliseconds,
                                                        fp8q_cu_event start,
                                                        fp8q_cu_event end);

#endif /* FP8Q_CUDA_DRIVER_API_H */
