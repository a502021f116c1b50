/*
 * dlpack_view.c - what both DLPack consumers (dlpack.c: capsules and
 * __dlpack__; dlpack_exchange.c: the C exchange API) and the producer share,
 * below both: DLPack dtype codes, the checked view of a DLPack tensor, and
 * a new view tensor placed on a CUDA device (binding.h).
 */
#include <stdint.h>

#include "cuda/memory.h"
#include "python/binding.h"
#include "python/dlpack_abi.h"

/* ------------------------------------------------------------------------- */
/* dtype codes                                                               */

fp8q_dl_data_type fp8q_py_dl_data_type(fp8q_dtype dtype)
{
    fp8q_dl_data_type result;

    result.bits = (uint8_t)(8 * fp8q_dtype_itemsize(dtype));
    result.lanes = 1;
    switch (dtype) {
    case FP8Q_FLOAT32:
    case FP8Q_FLOAT16:
        result.code = FP8Q_DL_FLOAT;
        break;
    case FP8Q_BFLOAT16:
        result.code = FP8Q_DL_BFLOAT;
        break;
    case FP8Q_FLOAT8_E4M3FN:
        result.code = FP8Q_DL_FLOAT8_E4M3FN;
        break;
    case FP8Q_FLOAT8_E5M2:
        result.code = FP8Q_DL_FLOAT8_E5M2;
        break;
    case FP8Q_FLOAT8_E4M3FNUZ:
        result.code = FP8Q_DL_FLOAT8_E4M3FNUZ;
        break;
    case FP8Q_FLOAT8_E5M2FNUZ:
        result.code = FP8Q_DL_FLOAT8_E5M2FNUZ;
        break;
    default:
        result.code = FP8Q_DL_UINT;
        break;
    }
    return result;
}

/* Maps a DLPack dtype to an fp8q dtype: 1 found, 0 not stored by fp8q. */
static int dtype_from_dl(fp8q_dl_data_type type, fp8q_dtype *dtype)
{
    fp8q_dtype candidate;

    if (type.lanes != 1) {
        return 0;
    }
    switch (type.code) {
    case FP8Q_DL_FLOAT:
        candidate = type.bits == 32 ? FP8Q_FLOAT32 : FP8Q_FLOAT16;
        break;
    case FP8Q_DL_BFLOAT:
        candidate = FP8Q_BFLOAT16;
        break;
    case FP8Q_DL_UINT:
        candidate = FP8Q_UINT8;
        break;
    case FP8Q_DL_FLOAT8_E4M3FN:
        candidate = FP8Q_FLOAT8_E4M3FN;
        break;
    case FP8Q_DL_FLOAT8_E5M2:
        candidate = FP8Q_FLOAT8_E5M2;
        break;
    case FP8Q_DL_FLOAT8_E4M3FNUZ:
        candidate = FP8Q_FLOAT8_E4M3FNUZ;
        break;
    case FP8Q_DL_FLOAT8_E5M2FNUZ:
        candidate = FP8Q_FLOAT8_E5M2FNUZ;
        break;
    default:
        return 0;
    }
    if ((size_t)type.bits != 8 * fp8q_dtype_itemsize(candidate)) {
        return 0;
    }
    *dtype = candidate;
    return 1;
}

/* A readable name of a DLPack type code, for messages. */
static const char *dl_code_name(uint8_t code)
{
    switch (code) {
    case FP8Q_DL_INT:
        return "int";
    case FP8Q_DL_UINT:
        return "uint";
    case FP8Q_DL_FLOAT:
        return "float";
    case FP8Q_DL_OPAQUE_HANDLE:
        return "opaque handle";
    case FP8Q_DL_BFLOAT:
        return "bfloat";
    case FP8Q_DL_COMPLEX:
        return "complex";
    case FP8Q_DL_BOOL:
        return "bool";
    case FP8Q_DL_FLOAT8_E3M4:
        return "float8_e3m4";
    case FP8Q_DL_FLOAT8_E4M3:
        return "float8_e4m3";
    case FP8Q_DL_FLOAT8_E4M3B11FNUZ:
        return "float8_e4m3b11fnuz";
    case FP8Q_DL_FLOAT8_E8M0FNU:
        return "float8_e8m0fnu";
    case FP8Q_DL_FLOAT6_E2M3FN:
        return "float6_e2m3fn";
    case FP8Q_DL_FLOAT6_E3M2FN:
        return "float6_e3m2fn";
    case FP8Q_DL_FLOAT4_E2M1FN:
        return "float4_e2m1fn";
    default:
        return "unknown";
    }
}

/* ------------------------------------------------------------------------- */
/* Views of DLPack tensors                                                   */

/* BufferError naming the value unless dl_tensor's byte_offset is a whole
 * number of elements that moves its data pointer without overflowing (an
 * offset below 2**63, the pointer not wrapping around). The producer is
 * trusted, as for the data pointer itself, that the memory there is its
 * tensor's. 0, or -1 with the exception. */
static int check_byte_offset(const fp8q_dl_tensor *dl_tensor, size_t itemsize,
                             const char *argument_name)
{
    const uint64_t offset = dl_tensor->byte_offset;
    const uint64_t room = (uint64_t)UINTPTR_MAX -
                          (uint64_t)(uintptr_t)dl_tensor->data;

    if (offset > (uint64_t)INT64_MAX || offset > room) {
        PyErr_Format(PyExc_BufferError,
                     "%s: DLPack byte_offset %llu overflows the data pointer "
                     "%p",
                     argument_name, (unsigned long long)offset,
                     dl_tensor->data);
        return -1;
    }
    if (offset % itemsize != 0) {
        PyErr_Format(PyExc_BufferError,
                     "%s: DLPack byte_offset %llu is not a multiple of the "
                     "%d-byte elements",
                     argument_name, (unsigned long long)offset,
                     (int)itemsize);
        return -1;
    }
    return 0;
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

/*
 * Builds a view of a managed tensor's dl_tensor after checking everything
 * fp8q relies on. Sets *unsupported_dtype when the dtype alone is the
 * problem. 0, or -1 with an exception (nothing is consumed then).
 */
int fp8q_py_view_from_dl_tensor(const fp8q_dl_tensor *dl_tensor,
                                const char *argument_name,
                                int reinterpret_dtype, fp8q_view *view,
                                int *unsupported_dtype)
{
    const fp8q_dl_data_type type = dl_tensor->dtype;
    fp8q_dtype dtype;
    size_t itemsize;
    void *data;
    fp8q_error error;
    fp8q_status status;
    int axis;

    if (dl_tensor->device.device_type != FP8Q_DL_CPU &&
        dl_tensor->device.device_type != FP8Q_DL_CUDA) {
        PyErr_Format(PyExc_BufferError,
                     "%s: the data is on DLPack device (%d, %d); fp8q reads "
                     "CPU (1, 0) and CUDA (2, N) memory",
                     argument_name, (int)dl_tensor->device.device_type,
                     (int)dl_tensor->device.device_id);
        return -1;
    }
    if (reinterpret_dtype >= 0) {
        dtype = (fp8q_dtype)reinterpret_dtype;
        if ((size_t)type.bits * type.lanes != 8 * fp8q_dtype_itemsize(dtype)) {
            PyErr_Format(PyExc_ValueError,
                         "%s: dtype=%s (%d bits) cannot reinterpret DLPack "
                         "elements of %d bits (code %d, %s, lanes %d); the "
                         "itemsizes must match",
                         argument_name, fp8q_dtype_name(dtype),
                         (int)(8 * fp8q_dtype_itemsize(dtype)), (int)type.bits,
                         (int)type.code, dl_code_name(type.code),
                         (int)type.lanes);
            return -1;
        }
    }
    else if (!dtype_from_dl(type, &dtype)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: unsupported DLPack dtype (code %d: %s, bits %d, "
                     "lanes %d); fp8q stores float32, float16, bfloat16, "
                     "uint8 and float8_e4m3fn / e5m2 / e4m3fnuz / e5m2fnuz",
                     argument_name, (int)type.code, dl_code_name(type.code),
                     (int)type.bits, (int)type.lanes);
        if (unsupported_dtype != NULL) {
            *unsupported_dtype = 1;
        }
        return -1;
    }
    if (dl_tensor->ndim < 0 || dl_tensor->ndim > FP8Q_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError,
                     "%s: fp8q tensors have 0 to %d dims, got %d",
                     argument_name, FP8Q_MAX_DIMS, (int)dl_tensor->ndim);
        return -1;
    }
    if (dl_tensor->ndim > 0 && dl_tensor->shape == NULL) {
        PyErr_Format(PyExc_BufferError, "%s: DLPack tensor without a shape",
                     argument_name);
        return -1;
    }
    itemsize = fp8q_dtype_itemsize(dtype);
    if (check_byte_offset(dl_tensor, itemsize, argument_name) < 0) {
        return -1;
    }
    memset(view, 0, sizeof *view);
    data = dl_tensor->data == NULL
               ? NULL
               : (char *)dl_tensor->data + dl_tensor->byte_offset;
    fp8q_error_clear(&error);
    if (dl_tensor->strides == NULL) {
        /* C-contiguous; also checks the extents and the byte size. */
        status = fp8q_view_init_contiguous(view, data, dtype,
                                           (int)dl_tensor->ndim,
                                           dl_tensor->shape, &error);
    }
    else {
        view->data = data;
        view->dtype = dtype;
        view->ndim = (int)dl_tensor->ndim;
        for (axis = 0; axis < view->ndim; axis++) {
            view->shape[axis] = dl_tensor->shape[axis];
            view->strides[axis] = dl_tensor->strides[axis];
        }
        status = fp8q_view_check_layout(view, "shape and strides", &error);
    }
    if (status != FP8Q_OK) {
        PyErr_Format(PyExc_BufferError, "%s: unusable DLPack tensor: %s",
                     argument_name, error.message);
        return -1;
    }
    if (fp8q_view_size(view) > 0 &&
        (view->data == NULL || (uintptr_t)view->data % itemsize != 0)) {
        PyErr_Format(PyExc_BufferError,
                     "%s: DLPack data pointer %p is not aligned to the "
                     "%d-byte elements",
                     argument_name, view->data, (int)itemsize);
        return -1;
    }
    if (elements_outside_the_address_space(view)) {
        PyErr_Format(PyExc_BufferError,
                     "%s: the elements of the DLPack tensor at %p (byte_offset "
                     "%llu included) lie outside the address space (below 0 "
                     "or at or above 2**57): a corrupt offset or stride",
                     argument_name, view->data,
                     (unsigned long long)dl_tensor->byte_offset);
        return -1;
    }
    return 0;
}

void fp8q_py_place_on_cuda(fp8q_TensorObject *tensor,
                           const fp8q_cuda_device *cuda, fp8q_cu_stream stream)
{
    tensor->device_type = FP8Q_DEVICE_CUDA;
    tensor->device_index = cuda->index;
    tensor->cuda_device = cuda;
    tensor->stream = fp8q_cuda_last_use_stream(stream);
}
