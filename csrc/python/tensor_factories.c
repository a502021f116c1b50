/*
 * tensor_factories.c - fp8q.empty and fp8q.zeros, and the parsing of a
 * shape argument (an int or a sequence of ints) they share with
 * Tensor.reshape (binding.h).
 */
#include <string.h>

#include "cuda/memory.h"
#include "python/binding.h"

#include "core/view_layout.h"

/* One extent: `item` (not a bool, as NumPy and torch refuse) through
 * operator.index() into *extent; TypeError names the axis. 0, or -1 with an
 * exception. */
static int parse_extent(PyObject *item, Py_ssize_t axis, int64_t *extent)
{
    PyObject *index;

    if (!PyIndex_Check(item) || PyBool_Check(item)) {
        PyErr_Format(PyExc_TypeError,
                     "shape: expected ints, got %s at axis %zd",
                     Py_TYPE(item)->tp_name, axis);
        return -1;
    }
    index = PyNumber_Index(item);
    if (index == NULL) {
        return -1;
    }
    *extent = (int64_t)PyLong_AsLongLong(index);
    Py_DECREF(index);
    return *extent == -1 && PyErr_Occurred() ? -1 : 0;
}

int fp8q_py_parse_extents(PyObject *object, int *ndim, int64_t *shape)
{
    PyObject *sequence;
    Py_ssize_t count;
    Py_ssize_t axis;

    /* One int (a NumPy array of ints is a sequence of them). */
    if ((PyIndex_Check(object) || PyBool_Check(object)) &&
        !(PyArray_Check(object) &&
          PyArray_NDIM((PyArrayObject *)object) > 0)) {
        *ndim = 1;
        return parse_extent(object, 0, &shape[0]);
    }
    if (!PySequence_Check(object) || PyUnicode_Check(object)) {
        PyErr_Format(PyExc_TypeError,
                     "shape: expected an int or a sequence of ints, got %s",
                     Py_TYPE(object)->tp_name);
        return -1;
    }
    sequence = PySequence_Fast(object, "shape: expected a sequence");
    if (sequence == NULL) {
        return -1;
    }
    count = PySequence_Fast_GET_SIZE(sequence);
    if (count > FP8Q_MAX_DIMS) {
        Py_DECREF(sequence);
        PyErr_Format(PyExc_ValueError,
                     "shape: fp8q tensors have at most %d dims, got %zd",
                     FP8Q_MAX_DIMS, count);
        return -1;
    }
    for (axis = 0; axis < count; axis++) {
        if (parse_extent(PySequence_Fast_GET_ITEM(sequence, axis), axis,
                         &shape[axis]) < 0) {
            Py_DECREF(sequence);
            return -1;
        }
    }
    Py_DECREF(sequence);
    *ndim = (int)count;
    return 0;
}

/* Parses an int or a sequence of ints >= 0 into (ndim, shape). */
static int parse_shape(PyObject *object, int *ndim, int64_t *shape)
{
    fp8q_error error;

    if (fp8q_py_parse_extents(object, ndim, shape) < 0) {
        return -1;
    }
    return fp8q_py_raise_on_failure(
        fp8q_shape_check_extents(*ndim, shape, "shape: ", &error), &error);
}

/* empty() / zeros() arguments; *stream_out receives the stream. */
static fp8q_TensorObject *new_tensor_from_arguments(PyObject *const *args,
                                                    Py_ssize_t nargs,
                                                    PyObject *kwnames,
                                                    const char *format,
                                                    fp8q_cu_stream *stream_out)
{
    static const char *const keywords[] = {"shape", "dtype", "device",
                                           "stream", NULL};
    PyObject *shape_object;
    PyObject *dtype_object = NULL;
    PyObject *device_object = Py_None;
    PyObject *stream_object = Py_None;
    int64_t shape[FP8Q_MAX_DIMS];
    fp8q_dtype dtype = FP8Q_FLOAT32;
    fp8q_py_device device = {FP8Q_DEVICE_CPU, 0};
    fp8q_cu_stream stream;
    int ndim;

    if (fp8q_py_parse_arguments(args, nargs, kwnames, format, keywords,
                                &shape_object, &dtype_object, &device_object,
                                &stream_object) < 0) {
        return NULL;
    }
    if (parse_shape(shape_object, &ndim, shape) < 0 ||
        (dtype_object != NULL && dtype_object != Py_None &&
         fp8q_py_parse_dtype(dtype_object, "dtype", &dtype) < 0) ||
        fp8q_py_parse_placement(device_object, stream_object, &device,
                                &stream) < 0) {
        return NULL;
    }
    *stream_out = stream;
    return fp8q_tensor_new_empty_on(dtype, ndim, shape, &device, stream);
}

PyDoc_STRVAR(
    empty_doc,
    "empty(shape, dtype='float32', *, device=None, stream=None)\n--\n\n"
    "A new C-contiguous tensor with uninitialised memory. shape is an int "
    "or a sequence (a NumPy array too) of at most 16 ints >= 0 (not bools); "
    "dtype is anything fp8q.dtype() accepts, or None for float32. device: None or 'cpu' (64-byte aligned host memory), 'cuda', "
    "'cuda:N', an int N or a torch.device (device memory, allocated "
    "ordered on `stream`: None for the legacy default stream, an int "
    "handle, or a stream object such as torch.cuda.Stream). Raises "
    "fp8q.CudaError when CUDA cannot be used, saying why.");

static PyObject *empty(PyObject *module, PyObject *const *args,
                       Py_ssize_t nargs, PyObject *kwnames)
{
    fp8q_cu_stream stream;

    (void)module;
    return (PyObject *)new_tensor_from_arguments(args, nargs, kwnames,
                                                 "O|O$OO:empty", &stream);
}

PyDoc_STRVAR(
    zeros_doc,
    "zeros(shape, dtype='float32', *, device=None, stream=None)\n--\n\n"
    "Like empty(), with every element +0 (on CUDA: filled on `stream`).");

static PyObject *zeros(PyObject *module, PyObject *const *args,
                       Py_ssize_t nargs, PyObject *kwnames)
{
    fp8q_cu_stream stream = NULL;
    fp8q_TensorObject *result = new_tensor_from_arguments(
        args, nargs, kwnames, "O|O$OO:zeros", &stream);
    size_t bytes;
    fp8q_error error;
    fp8q_status status;

    (void)module;
    if (result == NULL) {
        return NULL;
    }
    /* Zero bits are the value 0 in every fp8q dtype. */
    bytes = (size_t)fp8q_view_nbytes(&result->view);
    if (result->device_type == FP8Q_DEVICE_CPU) {
        memset(result->allocation, 0, bytes);
        return (PyObject *)result;
    }
    FP8Q_PY_WITHOUT_GIL(status, error,
                        fp8q_cuda_zero(result->cuda_device, result->allocation,
                                       bytes, stream, &error));
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        Py_DECREF(result);
        return NULL;
    }
    return (PyObject *)result;
}

PyMethodDef fp8q_py_tensor_factories_functions[] = {
    {FP8Q_PY_KEYWORDS_FUNCTION("empty", empty), empty_doc},
    {FP8Q_PY_KEYWORDS_FUNCTION("zeros", zeros), zeros_doc},
    {NULL, NULL, 0, NULL},
};
