/*
 * amax_op.c - fp8q._C.amax: the largest magnitude over all of x or over
 * given axes (NumPy's axis= rules), computed by csrc/core on the CPU with
 * the GIL released or by the CUDA half (ops_cuda.c) on a GPU.
 */
#include "python/binding.h"

#include "core/amax.h"

/* Adds one axis= entry to `reduce`, NumPy's normalisation and errors. */
static int add_axis(PyObject *item, int ndim, int *reduce)
{
    Py_ssize_t axis;

    if (PyBool_Check(item) || !PyIndex_Check(item)) {
        PyErr_Format(PyExc_TypeError,
                     "amax: axis= must be None, an int or a tuple of ints, "
                     "got an item of type %.200s",
                     Py_TYPE(item)->tp_name);
        return -1;
    }
    /* Out-of-range ints clip to PY_SSIZE_T_MIN / PY_SSIZE_T_MAX. */
    axis = PyNumber_AsSsize_t(item, NULL);
    if (axis == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (axis < -(Py_ssize_t)ndim || axis >= (Py_ssize_t)ndim) {
        PyErr_Format(PyExc_ValueError,
                     "amax: axis %R is out of bounds for array of dimension "
                     "%d (axis= must be in [-%d, %d))",
                     item, ndim, ndim, ndim);
        return -1;
    }
    if (axis < 0) {
        axis += ndim;
    }
    if (reduce[axis]) {
        PyErr_Format(PyExc_ValueError,
                     "amax: duplicate value in axis=: axis %zd is given more "
                     "than once",
                     axis);
        return -1;
    }
    reduce[axis] = 1;
    return 0;
}

/* Fills reduce[0..ndim) with 1 for every axis that axis= names. */
static int parse_axes(PyObject *axis_object, int ndim, int *reduce)
{
    Py_ssize_t index;
    int axis;

    for (axis = 0; axis < FP8Q_MAX_DIMS; axis++) {
        reduce[axis] = axis < ndim && axis_object == Py_None;
    }
    if (axis_object == Py_None) {
        return 0;
    }
    if (!PyTuple_Check(axis_object)) {
        if (PyBool_Check(axis_object) || !PyIndex_Check(axis_object)) {
            PyErr_Format(PyExc_TypeError,
                         "amax: axis= must be None, an int or a tuple of "
                         "ints, got an object of type %.200s",
                         Py_TYPE(axis_object)->tp_name);
            return -1;
        }
        return add_axis(axis_object, ndim, reduce);
    }
    for (index = 0; index < PyTuple_GET_SIZE(axis_object); index++) {
        if (add_axis(PyTuple_GET_ITEM(axis_object, index), ndim, reduce) < 0) {
            return -1;
        }
    }
    return 0;
}

PyDoc_STRVAR(
    amax_doc,
    "amax(x, axis=None, keepdims=False, *, stream=None)\n"
    "--\n"
    "\n"
    "Maximum absolute value of x over `axis`, as a float32 tensor.\n"
    "\n"
    "axis: None (every axis), an int or a tuple of ints; negative values\n"
    "count from the end; out-of-range or repeated axes raise ValueError, as\n"
    "in NumPy. keepdims=True keeps the reduced axes with extent 1.\n"
    "A NaN anywhere in a group makes that group's result NaN; inf gives\n"
    "inf. Unlike NumPy's max, an empty group is not an error: its amax is 0\n"
    "(the identity of max |x|). x may have any fp8q dtype; values are\n"
    "loaded exactly into float32, so the result is exact.\n"
    "\n"
    "CUDA: for x on a GPU the result is computed there, on `stream` (as\n"
    "for fp8q.cast), and stays there (x is gathered with the reduced axes\n"
    "last when they are not already).");

static PyObject *ops_amax(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"x", "axis", "keepdims", "stream", NULL};
    PyObject *x_object;
    PyObject *axis_object = Py_None;
    PyObject *stream_object = Py_None;
    fp8q_cu_stream stream;
    fp8q_py_device device;
    int keepdims = 0;
    int reduce[FP8Q_MAX_DIMS];
    int64_t keep_shape[FP8Q_MAX_DIMS];
    fp8q_TensorObject *x = NULL;
    fp8q_TensorObject *destination = NULL;
    fp8q_TensorObject *result;
    fp8q_view result_view;
    fp8q_error error;
    fp8q_status status;
    int axis;

    (void)module;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|Op$O:amax", keywords,
                                     &x_object, &axis_object, &keepdims,
                                     &stream_object) ||
        fp8q_py_parse_stream(stream_object, "stream", &stream) < 0) {
        return NULL;
    }
    x = fp8q_tensor_from_object(x_object, "x", -1, FP8Q_COPY_IF_NEEDED);
    if (x == NULL || parse_axes(axis_object, x->view.ndim, reduce) < 0) {
        goto fail;
    }
    for (axis = 0; axis < x->view.ndim; axis++) {
        keep_shape[axis] = reduce[axis] ? 1 : x->view.shape[axis];
    }
    device.type = x->device_type;
    device.index = x->device_index;
    destination = fp8q_tensor_new_empty_on(FP8Q_FLOAT32, x->view.ndim,
                                           keep_shape, &device, stream);
    if (destination == NULL) {
        goto fail;
    }
    if (device.type == FP8Q_DEVICE_CUDA) {
        if (fp8q_py_cuda_amax(x, reduce, destination, stream) < 0) {
            goto fail;
        }
    }
    else {
        fp8q_error_clear(&error);
        FP8Q_PY_BEGIN_INTERRUPTIBLE
        status = fp8q_amax(&x->view, &destination->view, &error);
        FP8Q_PY_END_INTERRUPTIBLE(status)
        if (fp8q_py_raise_on_failure(status, &error) < 0) {
            goto fail;
        }
    }
    Py_DECREF(x);
    if (keepdims) {
        return (PyObject *)destination;
    }
    /* The same memory without the reduced axes. */
    result_view = destination->view;
    result_view.ndim = 0;
    for (axis = 0; axis < destination->view.ndim; axis++) {
        if (!reduce[axis]) {
            result_view.shape[result_view.ndim] = destination->view.shape[axis];
            result_view.strides[result_view.ndim] =
                destination->view.strides[axis];
            result_view.ndim++;
        }
    }
    result = fp8q_tensor_new_view(&result_view, (PyObject *)destination, 0);
    Py_DECREF(destination);
    return (PyObject *)result;

fail:
    Py_XDECREF(x);
    Py_XDECREF(destination);
    return NULL;
}

/* The methods this file adds to fp8q._C. */
PyMethodDef fp8q_py_amax_functions[] = {
    {"amax", (PyCFunction)(void (*)(void))ops_amax,
     METH_VARARGS | METH_KEYWORDS, amax_doc},
    {NULL, NULL, 0, NULL},
};
