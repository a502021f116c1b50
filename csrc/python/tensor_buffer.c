/*
 * tensor_buffer.c - the PEP 3118 buffer protocol for CPU fp8q.Tensor objects.
 *
 * Formats: float32 "f", float16 "e", uint8 "B". PEP 3118 has no format for
 * bfloat16 or the FP8 formats, so those export their raw codes: "H"
 * (uint16) for bfloat16 and "B" (uint8) for the four FP8 dtypes; read values
 * with Tensor.numpy() instead. Strides are exported in bytes. Read-only
 * tensors refuse PyBUF_WRITABLE requests; a request for a contiguity the
 * tensor lacks (including any request without strides for a non-C-contiguous
 * tensor) raises BufferError.
 */
#include "python/binding.h"

#include "core/view_layout.h"

/* Format characters by fp8q_dtype: "B" (raw codes) unless listed. */
static const char *buffer_format(fp8q_dtype dtype)
{
    static const char *const formats[FP8Q_DTYPE_COUNT] = {
        [FP8Q_FLOAT32] = "f",
        [FP8Q_FLOAT16] = "e",
        [FP8Q_BFLOAT16] = "H",
    };
    const char *format =
        (unsigned)dtype < FP8Q_DTYPE_COUNT ? formats[dtype] : NULL;

    return format != NULL ? format : "B";
}

static int buffer_refuse(const char *message)
{
    PyErr_Format(PyExc_BufferError, "fp8q.Tensor: %s", message);
    return -1;
}

static int tensor_getbuffer(PyObject *object, Py_buffer *buffer, int flags)
{
    fp8q_TensorObject *self = (fp8q_TensorObject *)object;
    const fp8q_view *view = &self->view;
    const Py_ssize_t itemsize = (Py_ssize_t)fp8q_dtype_itemsize(view->dtype);
    const int c_contiguous = fp8q_view_is_contiguous(view);
    const int f_contiguous = fp8q_view_is_fortran_contiguous(view);
    Py_ssize_t *layout = NULL;
    int axis;

    if (self->device_type != FP8Q_DEVICE_CPU) {
        return buffer_refuse("only CPU tensors export the buffer protocol");
    }
    if ((flags & PyBUF_WRITABLE) == PyBUF_WRITABLE && self->readonly) {
        return buffer_refuse("the tensor is read-only; a writable buffer was "
                             "requested");
    }
    if ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !c_contiguous) {
        return buffer_refuse("the tensor is not C-contiguous and the "
                             "consumer did not ask for strides; use "
                             ".contiguous()");
    }
    if ((flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS && !c_contiguous) {
        return buffer_refuse("a C-contiguous buffer was requested but the "
                             "tensor is not C-contiguous; use .contiguous()");
    }
    if ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS && !f_contiguous) {
        return buffer_refuse("a Fortran-contiguous buffer was requested but "
                             "the tensor is not Fortran-contiguous");
    }
    if ((flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS &&
        !c_contiguous && !f_contiguous) {
        return buffer_refuse("a contiguous buffer was requested but the "
                             "tensor is neither C- nor Fortran-contiguous");
    }

    if (view->ndim > 0 && (flags & PyBUF_ND) == PyBUF_ND) {
        layout = PyMem_New(Py_ssize_t, 2 * (size_t)view->ndim);
        if (layout == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (axis = 0; axis < view->ndim; axis++) {
            layout[axis] = (Py_ssize_t)view->shape[axis];
            layout[view->ndim + axis] =
                (Py_ssize_t)(view->strides[axis] * (int64_t)itemsize);
        }
    }

    buffer->buf = view->data;
    Py_INCREF(object);
    buffer->obj = object;
    buffer->len = (Py_ssize_t)fp8q_view_size(view) * itemsize;
    buffer->readonly = self->readonly;
    buffer->itemsize = itemsize;
    buffer->format = (flags & PyBUF_FORMAT) == PyBUF_FORMAT
                         ? (char *)buffer_format(view->dtype)
                         : NULL;
    if ((flags & PyBUF_ND) == PyBUF_ND) {
        buffer->ndim = view->ndim;
        buffer->shape = layout;
    }
    else {
        /* A plain run of bytes (PyBUF_SIMPLE). */
        buffer->ndim = 1;
        buffer->shape = NULL;
    }
    buffer->strides =
        (flags & PyBUF_STRIDES) == PyBUF_STRIDES && layout != NULL
            ? layout + view->ndim
            : NULL;
    buffer->suboffsets = NULL;
    buffer->internal = layout;
    return 0;
}

static void tensor_releasebuffer(PyObject *object, Py_buffer *buffer)
{
    (void)object;
    PyMem_Free(buffer->internal);
    buffer->internal = NULL;
}

PyBufferProcs fp8q_tensor_buffer_procs = {
    tensor_getbuffer,
    tensor_releasebuffer,
};
