/*
 * tensor_buffer.c - the PEP 3118 buffer protocol for CPU fp8q.Tensor objects.
 *
 * Formats: float32 "f", float16 "e", uint8 "B". PEP 3118 has no format for
 * bfloat16 or the FP8 formats, so those export their raw codes: "H"
 * (uint16) for bfloat16 and "B" (uint8) for the four FP8 dtypes; read values
 * with Tensor.numpy() instead. Strides are exported in bytes. Read-only
 * tensors refuse PyBUF_WRITABLE requests; a request for a contiguity the
 * tensor lacks (including any request without strides for a non-C-contiguous
 * tensor) raises BufferError. What a request may get is decided in
 * core/view_layout.c; this file maps the request and fills the Py_buffer.
 */
#include "python/binding.h"

#include "core/view_layout.h"

/* Whether every bit of `wanted` is in the request's `flags`. */
#define ASKS(flags, wanted) (((flags) & (wanted)) == (wanted))

/* The PyBUF_* request of each FP8Q_BUFFER_* bit: bit i is request_flags[i]. */
static const int request_flags[] = {PyBUF_WRITABLE, PyBUF_STRIDES,
                                    PyBUF_C_CONTIGUOUS, PyBUF_F_CONTIGUOUS,
                                    PyBUF_ANY_CONTIGUOUS};

static int tensor_getbuffer(PyObject *object, Py_buffer *buffer, int flags)
{
    fp8q_TensorObject *self = (fp8q_TensorObject *)object;
    const fp8q_view *view = &self->view;
    const Py_ssize_t itemsize = (Py_ssize_t)fp8q_dtype_itemsize(view->dtype);
    const char *refusal = "only CPU tensors export the buffer protocol";
    Py_ssize_t *layout = NULL;
    unsigned request = 0;
    int axis;

    for (axis = 0; axis < (int)(sizeof request_flags / sizeof(int)); axis++) {
        request |= ASKS(flags, request_flags[axis]) ? 1u << axis : 0u;
    }
    if (self->device_type == FP8Q_DEVICE_CPU) {
        refusal = fp8q_view_buffer_refusal(view, self->readonly, request);
    }
    if (refusal != NULL) {
        PyErr_Format(PyExc_BufferError, "fp8q.Tensor: %s", refusal);
        return -1;
    }
    if (view->ndim > 0 && ASKS(flags, PyBUF_ND)) {
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
    buffer->len = (Py_ssize_t)fp8q_view_nbytes(view);
    buffer->readonly = self->readonly;
    buffer->itemsize = itemsize;
    buffer->format = ASKS(flags, PyBUF_FORMAT)
                         ? (char *)fp8q_dtype_buffer_format(view->dtype)
                         : NULL;
    if (ASKS(flags, PyBUF_ND)) {
        buffer->ndim = view->ndim;
        buffer->shape = layout;
    }
    else {
        /* A plain run of bytes (PyBUF_SIMPLE). */
        buffer->ndim = 1;
        buffer->shape = NULL;
    }
    buffer->strides =
        ASKS(flags, PyBUF_STRIDES) && layout != NULL
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
