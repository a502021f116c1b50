/*
 * dlpack_abi.h - fp8q's own declaration of the DLPack C ABI (version 1.1).
 *
 * DLPack is a binary interface: what matters is the memory layout of the
 * structs, the numeric values of the enumerators and the PyCapsule names, all
 * fixed by the DLPack specification (https://dmlc.github.io/dlpack/). The
 * names here carry an fp8q_ prefix so that they can never clash with a copy of
 * dlpack.h another library might bring into the same translation unit.
 * Declared: the structs, the capsule names, the device types and flags fp8q
 * deals with, every data type code of DLPack 1.1 (named in messages), and the
 * C exchange API table of DLPack 1.3 (`__dlpack_c_exchange_api__`).
 */
#ifndef FP8Q_CORE_DLPACK_ABI_H
#define FP8Q_CORE_DLPACK_ABI_H

#include <stdint.h>

/* The version fp8q produces; a consumer must accept any 1.x capsule. */
#define FP8Q_DLPACK_MAJOR_VERSION 1
#define FP8Q_DLPACK_MINOR_VERSION 1

/* PyCapsule names: a producer names its capsule FP8Q_DLPACK_*; a consumer
 * that takes ownership renames it to the matching "used_" name. */
#define FP8Q_DLPACK_CAPSULE_LEGACY "dltensor"
#define FP8Q_DLPACK_CAPSULE_LEGACY_USED "used_dltensor"
#define FP8Q_DLPACK_CAPSULE_VERSIONED "dltensor_versioned"
#define FP8Q_DLPACK_CAPSULE_VERSIONED_USED "used_dltensor_versioned"

/* DLDeviceType (the C enum is int-sized; fixed here as int32_t). */
#define FP8Q_DL_CPU 1
#define FP8Q_DL_CUDA 2

/* DLDataTypeCode. */
#define FP8Q_DL_INT 0
#define FP8Q_DL_UINT 1
#define FP8Q_DL_FLOAT 2
#define FP8Q_DL_OPAQUE_HANDLE 3
#define FP8Q_DL_BFLOAT 4
#define FP8Q_DL_COMPLEX 5
#define FP8Q_DL_BOOL 6
#define FP8Q_DL_FLOAT8_E3M4 7
#define FP8Q_DL_FLOAT8_E4M3 8
#define FP8Q_DL_FLOAT8_E4M3B11FNUZ 9
#define FP8Q_DL_FLOAT8_E4M3FN 10
#define FP8Q_DL_FLOAT8_E4M3FNUZ 11
#define FP8Q_DL_FLOAT8_E5M2 12
#define FP8Q_DL_FLOAT8_E5M2FNUZ 13
#define FP8Q_DL_FLOAT8_E8M0FNU 14
#define FP8Q_DL_FLOAT6_E2M3FN 15
#define FP8Q_DL_FLOAT6_E3M2FN 16
#define FP8Q_DL_FLOAT4_E2M1FN 17

/* DLManagedTensorVersioned.flags bits. */
#define FP8Q_DLPACK_FLAG_READ_ONLY ((uint64_t)1 << 0)
#define FP8Q_DLPACK_FLAG_IS_COPIED ((uint64_t)1 << 1)

typedef struct fp8q_dl_version {
    uint32_t major;
    uint32_t minor;
} fp8q_dl_version;

typedef struct fp8q_dl_device {
    int32_t device_type; /* FP8Q_DL_CPU, ... */
    int32_t device_id;
} fp8q_dl_device;

typedef struct fp8q_dl_data_type {
    uint8_t code;   /* FP8Q_DL_FLOAT, ... */
    uint8_t bits;   /* bits per lane */
    uint16_t lanes; /* 1 for scalar elements */
} fp8q_dl_data_type;

typedef struct fp8q_dl_tensor {
    void *data; /* with byte_offset: address of element (0, ..., 0) */
    fp8q_dl_device device;
    int32_t ndim;
    fp8q_dl_data_type dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL means C-contiguous */
    uint64_t byte_offset;
} fp8q_dl_tensor;

/* The legacy (unversioned) managed tensor, capsule name "dltensor". */
typedef struct fp8q_dl_managed_tensor {
    fp8q_dl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct fp8q_dl_managed_tensor *self);
} fp8q_dl_managed_tensor;

/* The versioned managed tensor (DLPack >= 1.0), "dltensor_versioned". */
typedef struct fp8q_dl_managed_tensor_versioned {
    fp8q_dl_version version;
    void *manager_ctx;
    void (*deleter)(struct fp8q_dl_managed_tensor_versioned *self);
    uint64_t flags;
    fp8q_dl_tensor dl_tensor;
} fp8q_dl_managed_tensor_versioned;

/* ------------------------------------------------------------------------- */
/* The C exchange API (DLPack 1.3): a table of C functions a producer's type  */
/* publishes as the PyCapsule `type(x).__dlpack_c_exchange_api__`, named      */
/* FP8Q_DLPACK_EXCHANGE_API_CAPSULE. A consumer checks header.version.major.  */

#define FP8Q_DLPACK_EXCHANGE_API_CAPSULE "dlpack_exchange_api"

typedef struct fp8q_dl_exchange_api_header {
    fp8q_dl_version version;
    struct fp8q_dl_exchange_api_header *prev_api;
} fp8q_dl_exchange_api_header;

typedef struct fp8q_dl_exchange_api {
    fp8q_dl_exchange_api_header header;
    /* A new producer tensor of prototype's dtype, ndim, shape and device
     * (the producer's allocator); 0, or -1 after set_error(error_context,
     * kind, message). */
    int (*managed_tensor_allocator)(
        fp8q_dl_tensor *prototype, fp8q_dl_managed_tensor_versioned **out,
        void *error_context,
        void (*set_error)(void *error_context, const char *kind,
                          const char *message));
    /* An owning export of a producer object; 0, or -1 with a Python error. */
    int (*managed_tensor_from_py_object_no_sync)(
        void *py_object, fp8q_dl_managed_tensor_versioned **out);
    /* The producer object owning `tensor` (stolen); 0, or -1 with a Python
     * error. */
    int (*managed_tensor_to_py_object_no_sync)(
        fp8q_dl_managed_tensor_versioned *tensor, void **out_py_object);
    /* A non-owning description, promised only until control returns to
     * the producer (may be NULL in a producer's table); 0, or -1 with a
     * Python error. */
    int (*dltensor_from_py_object_no_sync)(void *py_object,
                                           fp8q_dl_tensor *out);
    /* The producer's current work stream of a device (NULL for the CPU);
     * 0, or -1 with a Python error. */
    int (*current_work_stream)(int32_t device_type, int32_t device_id,
                               void **out_current_stream);
} fp8q_dl_exchange_api;

#endif /* FP8Q_CORE_DLPACK_ABI_H */
