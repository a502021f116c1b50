/*
 * amax_op.c - fp8q._C.amax: the largest magnitude over all of x or over
 * given axes (NumPy's axis= rules), run on x's device (cuda/op_call.h
 * through fp8q_py_op_run).
 */
#include "python/binding.h"

#include "core/view_layout.h"
#include "cuda/op_call.h"

/* Adds one axis= entry to `reduce`, NumPy's normalisation and errors;
 * `what` is "an item" (of a tuple) or "an object" (axis= itself). */
static int add_axis(PyObject *item, const char *what, int ndim, int *reduce)
{
    Py_ssize_t axis;

    if (PyBool_Check(item) || !PyIndex_Check(item)) {
        PyErr_Format(PyExc_TypeError,
                     "amax: axis= must be None, an int or a tuple of ints, "
                     "got %s of type %.200s",
                     what, Py_TYPE(item)->tp_name);
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
    axis += axis < 0 ? ndim : 0;
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
        return add_axis(axis_object, "an object", ndim, reduce);
    }
    for (index = 0; index < PyTuple_GET_SIZE(axis_object); index++) {
        if (add_axis(PyTuple_GET_ITEM(axis_object, index), "an item", ndim,
                     reduce) < 0) {
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

static PyObject *ops_amax(PyObject *module, PyObject *const *args,
                          Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const keywords[] = {"x", "axis", "keepdims", "stream",
                                           NULL};
    PyObject *x_object;
    PyObject *axis_object = Py_None, *stream_object = Py_None;
    fp8q_cu_stream stream;
    int keepdims = 0, reduce[FP8Q_MAX_DIMS];
    int64_t keep_shape[FP8Q_MAX_DIMS];
    fp8q_TensorObject *tensors[2] = {NULL, NULL}; /* x, the result */
    fp8q_op_call call;
    fp8q_view result_view;
    int axis;

    if (fp8q_py_parse_arguments(args, nargs, kwnames, "O|Op$O:amax", keywords,
                                &x_object, &axis_object, &keepdims,
                                &stream_object) < 0 ||
        fp8q_py_parse_stream(stream_object, "stream", &stream) < 0) {
        return NULL;
    }
    (void)module;
    tensors[0] =
        fp8q_tensor_from_object(x_object, "x", -1, FP8Q_COPY_IF_NEEDED);
    if (tensors[0] == NULL ||
        fp8q_py_check_stream_on_cpu("amax", stream_object,
                                    tensors[0]->device_type ==
                                        FP8Q_DEVICE_CPU) < 0 ||
        parse_axes(axis_object, tensors[0]->view.ndim, reduce) < 0) {
        goto done;
    }
    for (axis = 0; axis < tensors[0]->view.ndim; axis++) {
        keep_shape[axis] = reduce[axis] ? 1 : tensors[0]->view.shape[axis];
    }
    tensors[1] = fp8q_py_new_like(tensors[0], FP8Q_FLOAT32,
                                  tensors[0]->view.ndim, keep_shape, stream);
    if (tensors[1] == NULL) {
        goto done;
    }
    fp8q_op_call_init(&call, FP8Q_OP_AMAX, &tensors[0]->view,
                      &tensors[1]->view, stream);
    call.reduce = reduce;
    if (fp8q_py_op_run(&call, tensors, 2) < 0) {
        Py_CLEAR(tensors[1]);
    }
    else if (!keepdims) {
        /* The same memory without the reduced axes. */
        fp8q_view_drop_axes(&tensors[1]->view, reduce, &result_view);
        Py_SETREF(tensors[1], fp8q_tensor_new_view(
                                  &result_view, (PyObject *)tensors[1], 0));
    }
done:
    Py_XDECREF(tensors[0]);
    return (PyObject *)tensors[1];
}

/* The methods this file adds to fp8q._C. */
PyMethodDef fp8q_py_amax_functions[] = {
    {"amax", (PyCFunction)(void (*)(void))ops_amax,
     METH_FASTCALL | METH_KEYWORDS, amax_doc},
    {NULL, NULL, 0, NULL},
};
