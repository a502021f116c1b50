/*
 * tensor_new.c - making fp8q.Tensor objects, below every file that makes
 * them (tensor_object.c, device.c, ops_cuda.c, ...): an empty CPU tensor, a
 * tensor over borrowed memory (on the CPU or placed on an opened CUDA
 * device), and a copy of a CPU tensor (binding.h).
 */

#include "core/cast.h"
#include "core/view_layout.h"
#include "cuda/memory.h"
#include "python/binding.h"

/* A valid address for tensors without elements whose producer gave none. */
static int64_t empty_tensor_storage;

/* A new CPU tensor: tp_alloc (PyType_GenericAlloc) zero-fills the object,
 * so its view, owner, allocation, weak references, device index, CUDA
 * device and stream start as 0 / NULL; each caller then sets the view. */
static fp8q_TensorObject *tensor_alloc(void)
{
    fp8q_TensorObject *self =
        (fp8q_TensorObject *)fp8q_Tensor_Type.tp_alloc(&fp8q_Tensor_Type, 0);

    if (self != NULL) {
        self->device_type = FP8Q_DEVICE_CPU;
    }
    return self;
}

fp8q_TensorObject *fp8q_tensor_new_empty(fp8q_dtype dtype, int ndim,
                                         const int64_t *shape)
{
    fp8q_TensorObject *self = tensor_alloc();
    fp8q_error error;

    if (self != NULL &&
        fp8q_py_raise_on_failure(
            fp8q_view_alloc_contiguous(&self->view, dtype, ndim, shape,
                                       &self->allocation, &error),
            &error) < 0) {
        Py_CLEAR(self);
    }
    return self;
}

fp8q_TensorObject *fp8q_tensor_new_view(const fp8q_view *view,
                                        PyObject *owner, int readonly)
{
    fp8q_TensorObject *self;

    if (view->ndim < 0 || view->ndim > FP8Q_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError,
                     "fp8q tensors have 0 to %d dims, got %d", FP8Q_MAX_DIMS,
                     view->ndim);
        return NULL;
    }
    self = tensor_alloc();
    if (self == NULL) {
        return NULL;
    }
    self->view = *view;
    if (self->view.data == NULL) {
        self->view.data = &empty_tensor_storage;
    }
    self->readonly = readonly != 0;
    if (owner != NULL && fp8q_Tensor_Check(owner)) {
        const fp8q_TensorObject *base = (const fp8q_TensorObject *)owner;
        self->device_type = base->device_type;
        self->device_index = base->device_index;
        self->cuda_device = base->cuda_device;
    }
    Py_XINCREF(owner);
    self->owner = owner;
    return self;
}

fp8q_TensorObject *fp8q_tensor_copy_on_host(fp8q_TensorObject *source,
                                            fp8q_dtype dtype)
{
    fp8q_TensorObject *result;
    fp8q_error error;
    fp8q_status status;

    result = fp8q_tensor_new_empty(dtype, source->view.ndim,
                                   source->view.shape);
    if (result == NULL) {
        return NULL;
    }
    fp8q_error_clear(&error);
    /* Between equal dtypes fp8q_cast copies the bits. */
    FP8Q_PY_BEGIN_INTERRUPTIBLE
    status = fp8q_cast(&source->view, &result->view, NULL, FP8Q_SCALE_DIVIDE,
                       1, &error);
    FP8Q_PY_END_INTERRUPTIBLE(status)
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        Py_DECREF(result);
        return NULL;
    }
    return result;
}

fp8q_TensorObject *fp8q_py_new_view_on(const fp8q_view *view,
                                       PyObject *owner, int readonly,
                                       const fp8q_cuda_device *cuda,
                                       fp8q_cu_stream stream)
{
    fp8q_TensorObject *tensor = fp8q_tensor_new_view(view, owner, readonly);

    if (tensor == NULL || cuda == NULL) {
        return tensor;
    }
    tensor->device_type = FP8Q_DEVICE_CUDA;
    tensor->device_index = cuda->index;
    tensor->cuda_device = cuda;
    tensor->stream = fp8q_cuda_last_use_stream(stream);
    return tensor;
}
