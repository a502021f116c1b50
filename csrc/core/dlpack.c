/*
 * dlpack.c - the DLPack logic below the binding (core/dlpack.h): dtype
 * codes, the checked view of a DLPack tensor, the description of a view for
 * an export, and the stream and device values of the producer's protocol.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dlpack.h"

/* ------------------------------------------------------------------------- */
/* dtype codes                                                               */

/* The DLPack type code of each fp8q dtype (its bits: 8 * itemsize). */
static const uint8_t dl_codes[FP8Q_DTYPE_COUNT] = {
    [FP8Q_FLOAT32] = FP8Q_DL_FLOAT,
    [FP8Q_FLOAT16] = FP8Q_DL_FLOAT,
    [FP8Q_BFLOAT16] = FP8Q_DL_BFLOAT,
    [FP8Q_UINT8] = FP8Q_DL_UINT,
    [FP8Q_FLOAT8_E4M3FN] = FP8Q_DL_FLOAT8_E4M3FN,
    [FP8Q_FLOAT8_E5M2] = FP8Q_DL_FLOAT8_E5M2,
    [FP8Q_FLOAT8_E4M3FNUZ] = FP8Q_DL_FLOAT8_E4M3FNUZ,
    [FP8Q_FLOAT8_E5M2FNUZ] = FP8Q_DL_FLOAT8_E5M2FNUZ,
};

/* Names of the DLPack type codes in messages, by code; the codes of the
 * dtypes fp8q stores read "unknown", as they always have (they reach a
 * message only with bits fp8q does not store). */
static const char *const dl_code_names[] = {
    "int",           "uint",          "float",
    "opaque handle", "bfloat",        "complex",
    "bool",          "float8_e3m4",   "float8_e4m3",
    "float8_e4m3b11fnuz",             "unknown",
    "unknown",       "unknown",       "unknown",
    "float8_e8m0fnu",                 "float6_e2m3fn",
    "float6_e3m2fn", "float4_e2m1fn",
};

fp8q_dl_data_type fp8q_dl_data_type_of(fp8q_dtype dtype)
{
    fp8q_dl_data_type result;

    result.bits = (uint8_t)(8 * fp8q_dtype_itemsize(dtype));
    result.lanes = 1;
    result.code = (unsigned)dtype < FP8Q_DTYPE_COUNT ? dl_codes[dtype]
                                                     : (uint8_t)FP8Q_DL_UINT;
    return result;
}

int fp8q_dtype_from_dl(fp8q_dl_data_type type, fp8q_dtype *dtype)
{
    int candidate;

    for (candidate = 0; type.lanes == 1 && candidate < FP8Q_DTYPE_COUNT;
         candidate++) {
        if (dl_codes[candidate] == type.code &&
            (size_t)type.bits ==
                8 * fp8q_dtype_itemsize((fp8q_dtype)candidate)) {
            *dtype = (fp8q_dtype)candidate;
            return 1;
        }
    }
    return 0;
}

const char *fp8q_dl_code_name(uint8_t code)
{
    return code < sizeof dl_code_names / sizeof dl_code_names[0]
               ? dl_code_names[code]
               : "unknown";
}

/* ------------------------------------------------------------------------- */
/* Views of DLPack tensors                                                   */

/* A pointer as Python's %p writes it (the C library's %p with a leading
 * "0x" ensured), so that messages read as they did when the binding
 * formatted them. */
typedef struct pointer_text {
    char text[48];
} pointer_text;

static pointer_text pointer(const void *address)
{
    pointer_text result;
    size_t length;

    (void)snprintf(result.text, sizeof result.text - 2, "%p", address);
    result.text[sizeof result.text - 3] = '\0';
    if (result.text[1] == 'X') {
        result.text[1] = 'x';
    }
    else if (result.text[1] != 'x') {
        length = strlen(result.text);
        memmove(result.text + 2, result.text, length + 1);
        result.text[0] = '0';
        result.text[1] = 'x';
    }
    return result;
}

/* FP8Q_ERROR_BUFFER naming the value unless dl_tensor's byte_offset is a
 * whole number of elements that moves its data pointer without overflowing
 * (an offset below 2**63, the pointer not wrapping around). The producer is
 * trusted, as for the data pointer itself, that the memory there is its
 * tensor's. */
static fp8q_status check_byte_offset(const fp8q_dl_tensor *dl_tensor,
                                     size_t itemsize,
                                     const char *argument_name,
                                     fp8q_error *error)
{
    const uint64_t offset = dl_tensor->byte_offset;
    const uint64_t room = (uint64_t)UINTPTR_MAX -
                          (uint64_t)(uintptr_t)dl_tensor->data;

    if (offset > (uint64_t)INT64_MAX || offset > room) {
        return fp8q_fail(error, FP8Q_ERROR_BUFFER,
                         "%s: DLPack byte_offset %llu overflows the data "
                         "pointer %s",
                         argument_name, (unsigned long long)offset,
                         pointer(dl_tensor->data).text);
    }
    if (offset % itemsize != 0) {
        return fp8q_fail(error, FP8Q_ERROR_BUFFER,
                         "%s: DLPack byte_offset %llu is not a multiple of "
                         "the %d-byte elements",
                         argument_name, (unsigned long long)offset,
                         (int)itemsize);
    }
    return FP8Q_OK;
}

/* The first address no process can own: no 64-bit platform fp8q runs on
 * maps memory at or above 2**57 (x86-64's 5-level paging gives user space
 * 2**56, AArch64 2**52, and CUDA's unified addresses stay below both), so an
 * element there comes from a corrupt offset or stride, not from a tensor. */
static uint64_t address_limit(void)
{
    return sizeof(void *) >= 8 ? (uint64_t)1 << 57 : (uint64_t)UINTPTR_MAX;
}

/* Nonzero when the addresses of a checked, non-empty view's elements would
 * run below 0 or reach address_limit(). */
static int elements_outside_the_address_space(const fp8q_view *view)
{
    const uint64_t address = (uint64_t)(uintptr_t)view->data;
    const uint64_t limit = address_limit();
    int64_t low;
    int64_t high;

    if (fp8q_view_size(view) == 0) {
        return 0;
    }
    fp8q_view_byte_extent(view, &low, &high);
    return address >= limit || (uint64_t)-low > address ||
           (uint64_t)high > limit - address;
}

/* The dtype of dl_tensor's elements: its own, or reinterpret_dtype (>= 0)
 * when the bits per element match. */
static fp8q_status element_dtype(const fp8q_dl_tensor *dl_tensor,
                                 const char *argument_name,
                                 int reinterpret_dtype, fp8q_dtype *dtype,
                                 int *unsupported_dtype, fp8q_error *error)
{
    const fp8q_dl_data_type type = dl_tensor->dtype;

    if (reinterpret_dtype < 0) {
        if (fp8q_dtype_from_dl(type, dtype)) {
            return FP8Q_OK;
        }
        if (unsupported_dtype != NULL) {
            *unsupported_dtype = 1;
        }
        return fp8q_fail(error, FP8Q_ERROR_TYPE,
                         "%s: unsupported DLPack dtype (code %d: %s, bits "
                         "%d, lanes %d); fp8q stores float32, float16, "
                         "bfloat16, uint8 and float8_e4m3fn / e5m2 / "
                         "e4m3fnuz / e5m2fnuz",
                         argument_name, (int)type.code,
                         fp8q_dl_code_name(type.code), (int)type.bits,
                         (int)type.lanes);
    }
    *dtype = (fp8q_dtype)reinterpret_dtype;
    if ((size_t)type.bits * type.lanes != 8 * fp8q_dtype_itemsize(*dtype)) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: dtype=%s (%d bits) cannot reinterpret DLPack "
                         "elements of %d bits (code %d, %s, lanes %d); the "
                         "itemsizes must match",
                         argument_name, fp8q_dtype_name(*dtype),
                         (int)(8 * fp8q_dtype_itemsize(*dtype)),
                         (int)type.bits, (int)type.code,
                         fp8q_dl_code_name(type.code), (int)type.lanes);
    }
    return FP8Q_OK;
}

fp8q_status fp8q_dl_tensor_view(const fp8q_dl_tensor *dl_tensor,
                                const char *argument_name,
                                int reinterpret_dtype, fp8q_view *view,
                                int *unsupported_dtype, fp8q_error *error)
{
    fp8q_dtype dtype = FP8Q_UINT8;
    size_t itemsize;
    void *data;
    fp8q_error layout;
    fp8q_status status;
    int axis;

    if (dl_tensor->device.device_type != FP8Q_DL_CPU &&
        dl_tensor->device.device_type != FP8Q_DL_CUDA) {
        return fp8q_fail(error, FP8Q_ERROR_BUFFER,
                         "%s: the data is on DLPack device (%d, %d); fp8q "
                         "reads CPU (1, 0) and CUDA (2, N) memory",
                         argument_name, (int)dl_tensor->device.device_type,
                         (int)dl_tensor->device.device_id);
    }
    status = element_dtype(dl_tensor, argument_name, reinterpret_dtype,
                           &dtype, unsupported_dtype, error);
    if (status != FP8Q_OK) {
        return status;
    }
    if (dl_tensor->ndim < 0 || dl_tensor->ndim > FP8Q_MAX_DIMS) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: fp8q tensors have 0 to %d dims, got %d",
                         argument_name, FP8Q_MAX_DIMS, (int)dl_tensor->ndim);
    }
    if (dl_tensor->ndim > 0 && dl_tensor->shape == NULL) {
        return fp8q_fail(error, FP8Q_ERROR_BUFFER,
                         "%s: DLPack tensor without a shape", argument_name);
    }
    itemsize = fp8q_dtype_itemsize(dtype);
    status = check_byte_offset(dl_tensor, itemsize, argument_name, error);
    if (status != FP8Q_OK) {
        return status;
    }
    memset(view, 0, sizeof *view);
    data = dl_tensor->data == NULL
               ? NULL
               : (char *)dl_tensor->data + dl_tensor->byte_offset;
    fp8q_error_clear(&layout);
    if (dl_tensor->strides == NULL) {
        /* C-contiguous; also checks the extents and the byte size. */
        status = fp8q_view_init_contiguous(view, data, dtype,
                                           (int)dl_tensor->ndim,
                                           dl_tensor->shape, &layout);
    }
    else {
        view->data = data;
        view->dtype = dtype;
        view->ndim = (int)dl_tensor->ndim;
        for (axis = 0; axis < view->ndim; axis++) {
            view->shape[axis] = dl_tensor->shape[axis];
            view->strides[axis] = dl_tensor->strides[axis];
        }
        status = fp8q_view_check_layout(view, "shape and strides", &layout);
    }
    if (status != FP8Q_OK) {
        return fp8q_fail(error, FP8Q_ERROR_BUFFER,
                         "%s: unusable DLPack tensor: %s", argument_name,
                         layout.message);
    }
    if (fp8q_view_size(view) > 0 &&
        (view->data == NULL || (uintptr_t)view->data % itemsize != 0)) {
        return fp8q_fail(error, FP8Q_ERROR_BUFFER,
                         "%s: DLPack data pointer %s is not aligned to the "
                         "%d-byte elements",
                         argument_name, pointer(view->data).text,
                         (int)itemsize);
    }
    if (elements_outside_the_address_space(view)) {
        return fp8q_fail(error, FP8Q_ERROR_BUFFER,
                         "%s: the elements of the DLPack tensor at %s "
                         "(byte_offset %llu included) lie outside the address "
                         "space (below 0 or at or above 2**57): a corrupt "
                         "offset or stride",
                         argument_name, pointer(view->data).text,
                         (unsigned long long)dl_tensor->byte_offset);
    }
    return FP8Q_OK;
}

fp8q_status fp8q_dl_managed_view(const void *managed, int versioned,
                                 const char *argument_name,
                                 int reinterpret_dtype, fp8q_view *view,
                                 int *readonly, fp8q_dl_device *device,
                                 int *unsupported_dtype, fp8q_error *error)
{
    const fp8q_dl_managed_tensor_versioned *as_versioned =
        (const fp8q_dl_managed_tensor_versioned *)managed;
    const fp8q_dl_tensor *dl_tensor =
        &((const fp8q_dl_managed_tensor *)managed)->dl_tensor;

    *readonly = 0;
    if (versioned) {
        if (as_versioned->version.major != 1) {
            return fp8q_fail(error, FP8Q_ERROR_BUFFER,
                             "%s: DLPack version %u.%u is not supported "
                             "(fp8q reads 1.x)",
                             argument_name,
                             (unsigned)as_versioned->version.major,
                             (unsigned)as_versioned->version.minor);
        }
        dl_tensor = &as_versioned->dl_tensor;
        *readonly = (as_versioned->flags & FP8Q_DLPACK_FLAG_READ_ONLY) != 0;
    }
    *device = dl_tensor->device;
    return fp8q_dl_tensor_view(dl_tensor, argument_name, reinterpret_dtype,
                               view, unsupported_dtype, error);
}

/* ------------------------------------------------------------------------- */
/* Exports and the producer's protocol values                                */

void fp8q_dl_tensor_describe(fp8q_dl_tensor *dl_tensor, const fp8q_view *view,
                             int32_t device_type, int32_t device_id,
                             int64_t *shape, int64_t *strides)
{
    int axis;

    for (axis = 0; axis < view->ndim; axis++) {
        shape[axis] = view->shape[axis];
        strides[axis] = view->strides[axis];
    }
    dl_tensor->data = view->data;
    dl_tensor->device.device_type = device_type;
    dl_tensor->device.device_id = device_id;
    dl_tensor->ndim = view->ndim;
    dl_tensor->dtype = fp8q_dl_data_type_of(view->dtype);
    dl_tensor->shape = shape;
    dl_tensor->strides = strides;
    dl_tensor->byte_offset = 0;
}

/* The blocks of fp8q_dl_export_new: the managed tensor first (the deleter
 * frees the block from its argument), then what the export keeps beside it:
 * the release callback and the shape and strides the DLPack tensor points
 * to. */
typedef struct export_extra {
    fp8q_dl_release_fn release;
    int64_t shape[FP8Q_MAX_DIMS];
    int64_t strides[FP8Q_MAX_DIMS];
} export_extra;

typedef struct export_legacy {
    fp8q_dl_managed_tensor managed;
    export_extra extra;
} export_legacy;

typedef struct export_versioned {
    fp8q_dl_managed_tensor_versioned managed;
    export_extra extra;
} export_versioned;

/* What both deleters do: release the owner, free the block. */
static void end_export(void *block, const export_extra *extra, void *owner)
{
    if (extra->release != NULL) {
        extra->release(owner);
    }
    free(block);
}

static void export_legacy_deleter(fp8q_dl_managed_tensor *managed)
{
    if (managed != NULL) {
        end_export(managed, &((export_legacy *)managed)->extra,
                   managed->manager_ctx);
    }
}

static void export_versioned_deleter(fp8q_dl_managed_tensor_versioned *managed)
{
    if (managed != NULL) {
        end_export(managed, &((export_versioned *)managed)->extra,
                   managed->manager_ctx);
    }
}

void *fp8q_dl_export_new(const fp8q_view *view, int32_t device_type,
                         int32_t device_id, int versioned, uint64_t flags,
                         void *owner, fp8q_dl_release_fn release)
{
    void *block = malloc(versioned ? sizeof(export_versioned)
                                : sizeof(export_legacy));
    fp8q_dl_tensor *dl_tensor;
    export_extra *extra;

    if (block == NULL) {
        return NULL;
    }
    if (versioned) {
        export_versioned *exported = (export_versioned *)block;

        exported->managed.version.major = FP8Q_DLPACK_MAJOR_VERSION;
        exported->managed.version.minor = FP8Q_DLPACK_MINOR_VERSION;
        exported->managed.manager_ctx = owner;
        exported->managed.deleter = export_versioned_deleter;
        exported->managed.flags = flags;
        dl_tensor = &exported->managed.dl_tensor;
        extra = &exported->extra;
    }
    else {
        export_legacy *exported = (export_legacy *)block;

        exported->managed.manager_ctx = owner;
        exported->managed.deleter = export_legacy_deleter;
        dl_tensor = &exported->managed.dl_tensor;
        extra = &exported->extra;
    }
    extra->release = release;
    fp8q_dl_tensor_describe(dl_tensor, view, device_type, device_id,
                            extra->shape, extra->strides);
    return block;
}

void fp8q_dl_managed_delete(void *managed, int versioned)
{
    fp8q_dl_managed_tensor_versioned *as_versioned =
        (fp8q_dl_managed_tensor_versioned *)managed;
    fp8q_dl_managed_tensor *as_legacy = (fp8q_dl_managed_tensor *)managed;

    if (managed == NULL) {
        return;
    }
    if (versioned && as_versioned->deleter != NULL) {
        as_versioned->deleter(as_versioned);
    }
    else if (!versioned && as_legacy->deleter != NULL) {
        as_legacy->deleter(as_legacy);
    }
}

int fp8q_dl_consumer_stream(long long value, uintptr_t *handle)
{
    if (value == -1) {
        return 0;
    }
    /* LLONG_MAX: that int or a larger one, never a stream. */
    if (value == 0 || value < -1 || value == LLONG_MAX ||
        (unsigned long long)value > (unsigned long long)UINTPTR_MAX) {
        return -1;
    }
    *handle = (uintptr_t)value;
    return 1;
}

int fp8q_dl_copy_target_reachable(long long device_type, long long device_id)
{
    return (device_type == FP8Q_DL_CPU && device_id == 0) ||
           (device_type == FP8Q_DL_CUDA && device_id >= 0 &&
            device_id <= INT32_MAX);
}

int fp8q_dl_plan_export(const fp8q_dl_export_request *request,
                        fp8q_dl_export_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    plan->versioned = request->has_max_version && request->max_major >= 1;
    plan->copy = request->copy == 1;
    if (request->has_dl_device &&
        (request->dl_device_type != request->device_type ||
         request->dl_device_id != request->device_id)) {
        /* Another device: only as a copy, to the CPU or a GPU. */
        if (request->copy != 1 ||
            !fp8q_dl_copy_target_reachable(request->dl_device_type,
                                           request->dl_device_id)) {
            return FP8Q_DL_EXPORT_BAD_DL_DEVICE;
        }
        plan->move = 1;
        plan->target_type = (int32_t)request->dl_device_type;
        plan->target_id = (int32_t)request->dl_device_id;
    }
    if (request->device_type == FP8Q_DL_CPU) {
        return request->stream_kind != 0 ? FP8Q_DL_EXPORT_CPU_STREAM : 0;
    }
    if (plan->move || request->stream_kind == 0) {
        plan->order = !plan->move;
        return 0;
    }
    if (request->stream_kind != 1) {
        return FP8Q_DL_EXPORT_STREAM_TYPE;
    }
    switch (fp8q_dl_consumer_stream(request->stream_value, &plan->stream)) {
    case 0:
        return 0;
    case 1:
        plan->order = 1;
        return 0;
    default:
        return FP8Q_DL_EXPORT_STREAM_VALUE;
    }
}

int fp8q_dl_exchange_api_usable(const fp8q_dl_exchange_api *api)
{
    return api->header.version.major == 1 &&
           api->dltensor_from_py_object_no_sync != NULL &&
           api->managed_tensor_from_py_object_no_sync != NULL &&
           api->managed_tensor_allocator != NULL &&
           api->managed_tensor_to_py_object_no_sync != NULL &&
           api->current_work_stream != NULL;
}

fp8q_dl_device fp8q_dl_device_of(const fp8q_place *place)
{
    fp8q_dl_device device;

    /* fp8q's device types are DLPack's numbers (core/device_name.h). */
    device.device_type = place->type;
    device.device_id = place->index;
    return device;
}

int fp8q_dl_current_stream(const fp8q_dl_exchange_api *api,
                           const fp8q_dl_device *device, void **stream)
{
    *stream = NULL;
    if (device->device_type != FP8Q_DL_CUDA) {
        return 0;
    }
    if (api->current_work_stream(FP8Q_DL_CUDA, device->device_id, stream) <
        0) {
        *stream = NULL;
        return -1;
    }
    return 0;
}
