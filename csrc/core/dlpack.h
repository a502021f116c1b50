/*
 * dlpack.h - the DLPack logic that needs no Python: fp8q dtypes <-> DLPack
 * data types, the checked fp8q_view of a DLPack tensor (what every DLPack
 * consumer of the binding relies on), the DLPack description of a view (what
 * the producer exports) and the DLPack stream and device values a producer
 * accepts. The structs are in core/dlpack_abi.h.
 */
#ifndef FP8Q_CORE_DLPACK_H
#define FP8Q_CORE_DLPACK_H

#include <stdint.h>

#include "core/device_name.h"
#include "core/dlpack_abi.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/view.h"

/* The DLPack data type of fp8q's `dtype`: lanes 1, bits 8 * itemsize, code
 * kDLFloat (float32, float16), kDLBfloat (bfloat16), the DLPack 1.1 float8
 * codes (the four FP8 dtypes), kDLUInt (uint8 and anything else). */
fp8q_dl_data_type fp8q_dl_data_type_of(fp8q_dtype dtype);

/* The fp8q dtype of a DLPack data type: 1 and *dtype when fp8q stores it
 * (lanes 1 and the bits of that dtype), else 0 (*dtype untouched). */
int fp8q_dtype_from_dl(fp8q_dl_data_type type, fp8q_dtype *dtype);

/* A readable name of a DLPack type code for messages ("float", "bfloat",
 * "float8_e3m4", ...); "unknown" for codes DLPack 1.1 does not define and
 * for the four float8 codes fp8q stores (10 to 13). */
const char *fp8q_dl_code_name(uint8_t code);

/*
 * Fills *view with the view of `dl_tensor` after checking everything fp8q
 * relies on: the device is the CPU or CUDA (FP8Q_ERROR_BUFFER); the dtype is
 * one fp8q stores (FP8Q_ERROR_TYPE, *unsupported_dtype set to 1 when it is
 * not NULL) or, when reinterpret_dtype >= 0, that dtype with the same bits
 * per element (FP8Q_ERROR_VALUE); 0 to FP8Q_MAX_DIMS dims
 * (FP8Q_ERROR_VALUE); a shape unless ndim is 0; a byte_offset that is a
 * whole number of elements and moves the pointer without overflow; a
 * layout fp8q_view_check_layout accepts (NULL strides: C-contiguous); a data
 * pointer aligned to the elements of a non-empty tensor; elements inside
 * the address space (below 2**57 on 64-bit platforms). The data pointer is
 * dl_tensor->data + byte_offset. The messages start with "<argument_name>: "
 * and print pointers as Python's %p does. *unsupported_dtype is not reset.
 */
fp8q_status fp8q_dl_tensor_view(const fp8q_dl_tensor *dl_tensor,
                                const char *argument_name,
                                int reinterpret_dtype, fp8q_view *view,
                                int *unsupported_dtype, fp8q_error *error);

/*
 * The checked view of the tensor a DLPack managed tensor holds (`managed`:
 * an fp8q_dl_managed_tensor_versioned when `versioned` is nonzero, else an
 * fp8q_dl_managed_tensor): a versioned one must be of major version 1
 * (FP8Q_ERROR_BUFFER, "<argument_name>: DLPack version M.m is not supported
 * (fp8q reads 1.x)"); then fp8q_dl_tensor_view of its dl_tensor. Also sets
 * *readonly (the READ_ONLY flag of a versioned one, 0 for a legacy one) and
 * *device (the dl_tensor's device).
 */
fp8q_status fp8q_dl_managed_view(const void *managed, int versioned,
                                 const char *argument_name,
                                 int reinterpret_dtype, fp8q_view *view,
                                 int *readonly, fp8q_dl_device *device,
                                 int *unsupported_dtype, fp8q_error *error);

/* Describes `view` on DLPack device (device_type, device_id) in dl_tensor:
 * its shape and strides (in elements, always given) are copied into the
 * caller's arrays `shape` and `strides` (FP8Q_MAX_DIMS each, which
 * dl_tensor then points to); byte_offset is 0. */
void fp8q_dl_tensor_describe(fp8q_dl_tensor *dl_tensor, const fp8q_view *view,
                             int32_t device_type, int32_t device_id,
                             int64_t *shape, int64_t *strides);

/* What an export holds on to (its manager_ctx) is dropped by a callback the
 * exporter gives: release(owner), called once from the deleter. */
typedef void (*fp8q_dl_release_fn)(void *owner);

/*
 * A new export of `view` on DLPack device (device_type, device_id): one
 * malloc'ed block holding a managed tensor, versioned (DLPack
 * FP8Q_DLPACK_MAJOR_VERSION.FP8Q_DLPACK_MINOR_VERSION, `flags`) when
 * `versioned` is nonzero, else legacy (`flags` unused), whose dl_tensor is
 * fp8q_dl_tensor_describe's (shape and strides inside the block), whose
 * manager_ctx is `owner`, and whose deleter calls release(owner) (when
 * release is not NULL) and frees the block. The managed tensor is the
 * block's first member: the pointer returned is the
 * fp8q_dl_managed_tensor[_versioned] itself. NULL when out of memory
 * (release is then not called).
 */
void *fp8q_dl_export_new(const fp8q_view *view, int32_t device_type,
                         int32_t device_id, int versioned, uint64_t flags,
                         void *owner, fp8q_dl_release_fn release);

/* Calls the deleter of `managed` (an fp8q_dl_managed_tensor_versioned when
 * `versioned` is nonzero, else an fp8q_dl_managed_tensor) when it has one;
 * nothing for NULL. */
void fp8q_dl_managed_delete(void *managed, int versioned);

/* A producer's reading of the int a DLPack consumer passes as `stream` for
 * CUDA memory (the Python int, saturated to long long): 1 and *handle for a
 * stream (1: the legacy default stream, handle 1; 2: the per-thread default
 * stream; another value > 0: a handle); 0 for -1 (no ordering wanted); -1
 * for values that are no stream: 0 (ambiguous by the standard), values
 * below -1, LLONG_MAX (the saturated value of larger ints) and values
 * beyond uintptr_t. */
int fp8q_dl_consumer_stream(long long value, uintptr_t *handle);

/* Nonzero when (device_type, device_id) is a DLPack device fp8q can copy a
 * tensor to: the CPU (1, 0) or a CUDA device (2, N) with 0 <= N <=
 * INT32_MAX. */
int fp8q_dl_copy_target_reachable(long long device_type, long long device_id);

/* A producer's __dlpack__(stream=, max_version=, dl_device=, copy=) call,
 * its Python arguments read as numbers (ints saturated to long long). */
typedef struct fp8q_dl_export_request {
    int32_t device_type;      /* the tensor's DLPack device */
    int32_t device_id;
    int has_max_version;      /* max_version=(max_major, minor) given */
    long long max_major;
    int has_dl_device;        /* dl_device=(dl_device_type, dl_device_id) */
    long long dl_device_type;
    long long dl_device_id;
    int copy;                 /* copy=: -1 None, 0 false, 1 true */
    int stream_kind;          /* stream=: 0 None, 1 the int stream_value, 2
                                 another object */
    long long stream_value;
} fp8q_dl_export_request;

/* What the producer then does (fp8q_dl_plan_export). */
typedef struct fp8q_dl_export_plan {
    int versioned;            /* a versioned capsule (max_major >= 1) */
    int copy;                 /* export a copy (copy=True, or a move) */
    int move;                 /* the copy goes to (target_type, target_id) */
    int32_t target_type;
    int32_t target_id;
    int order;                /* order the consumer's stream `stream` (0:
                                 the legacy default stream) after the
                                 tensor's last use, which it becomes */
    uintptr_t stream;
} fp8q_dl_export_plan;

/* The refusals of fp8q_dl_plan_export (0: none). */
enum {
    FP8Q_DL_EXPORT_BAD_DL_DEVICE = 1, /* dl_device names another device,
                                         and not with copy=True the CPU
                                         (1, 0) or a CUDA device (2, N) */
    FP8Q_DL_EXPORT_CPU_STREAM,        /* a CPU tensor (moved or not)
                                         given a stream other than None */
    FP8Q_DL_EXPORT_STREAM_TYPE,       /* a CUDA tensor (not moved) given a
                                         stream that is no int */
    FP8Q_DL_EXPORT_STREAM_VALUE       /* ... an int that is no stream
                                         (fp8q_dl_consumer_stream: -1) */
};

/*
 * The DLPack producer's rules for `request`: fills *plan and returns 0, or
 * returns the refusal (plan->order is then 0). A capsule is versioned when
 * max_version's major is >= 1. A dl_device other than the tensor's device
 * moves a copy there. The stream: a CPU tensor takes only None; a tensor
 * moved off its device ignores it; a CUDA tensor orders the consumer's
 * stream (None: the legacy default stream; an int read by
 * fp8q_dl_consumer_stream, where -1 asks for no ordering).
 */
int fp8q_dl_plan_export(const fp8q_dl_export_request *request,
                        fp8q_dl_export_plan *plan);

/* Nonzero when `api` (a producer's C exchange table) is one fp8q reads: of
 * major version 1, with every entry fp8q calls (all five but prev_api). */
int fp8q_dl_exchange_api_usable(const fp8q_dl_exchange_api *api);

/* The DLPack device of fp8q's `place`: its type and index as they are
 * (kDLCPU 0, or kDLCUDA and the device's index). */
fp8q_dl_device fp8q_dl_device_of(const fp8q_place *place);

/* The current work stream of `api`'s producer on `device` (its
 * current_work_stream, e.g. torch's current CUDA stream): 0 and *stream,
 * which is NULL on a device that is not CUDA (DLPack's CPU has no stream)
 * and for the legacy default stream; or -1 with *stream NULL when the
 * producer's call failed (a Python producer has then raised). */
int fp8q_dl_current_stream(const fp8q_dl_exchange_api *api,
                           const fp8q_dl_device *device, void **stream);

#endif /* FP8Q_CORE_DLPACK_H */
