/*
 * output_arguments.c - the checks fp8q._C's operations share: a tensor that
 * must be on the CPU, a stream= refused on the CPU, scales on the host
 * (finite, > 0), and an out= argument
 * viewed in place (its kind, dtype, device, shape and writability), with
 * errors that name the function and the argument; an operation's new result
 * on x's device, and its return value with out=; tensor arguments and new
 * results through x's DLPack exchange table (torch's tensors, allocator and
 * current stream).
 */
#include "python/binding.h"

#include "core/op_checks.h"
#include "core/output_check.h"
#include "core/quantize.h"

int fp8q_py_require_cpu(const fp8q_TensorObject *tensor, const char *function,
                        const char *argument)
{
    if (tensor->device_type == FP8Q_DEVICE_CPU) {
        return 0;
    }
    PyErr_Format(PyExc_ValueError,
                 "%s: %s= is a tensor on a non-CPU device (DLPack device "
                 "type %d, index %d), but this version of fp8q runs %s on "
                 "the CPU only: pass a CPU tensor",
                 function, argument, tensor->device_type,
                 tensor->device_index, function);
    return -1;
}

int fp8q_py_check_stream_on_cpu(const char *function, PyObject *stream_object,
                                int on_cpu)
{
    fp8q_error error;

    return fp8q_py_raise_on_failure(
        fp8q_check_stream_on_cpu(function, stream_object != Py_None, on_cpu,
                                 &error),
        &error);
}

int fp8q_py_check_host_scales(const fp8q_TensorObject *scale,
                              const char *function, const char *name)
{
    fp8q_error error;

    if (scale->device_type != FP8Q_DEVICE_CPU) {
        return 0;
    }
    fp8q_error_clear(&error);
    if (fp8q_py_raise_on_failure(
            fp8q_check_scale_values(&scale->view, name, &error), &error) < 0) {
        fp8q_py_error_add_prefix("%s: ", function);
        return -1;
    }
    return 0;
}

int fp8q_py_output_kind(PyObject *object, PyObject **given)
{
    fp8q_dtype dtype;
    int found;

    *given = NULL;
    if (PyArray_Check(object)) {
        PyArray_Descr *descr = PyArray_DESCR((PyArrayObject *)object);
        found = fp8q_py_dtype_from_numpy(descr, &dtype);
        if (found == 0) {
            *given = PyUnicode_FromFormat("a NumPy array of dtype %S",
                                          (PyObject *)descr);
            return *given != NULL ? 0 : -1;
        }
        return found;
    }
    /* A NumPy scalar exports a buffer, but what is written would land in
     * a copy of it. */
    if (!fp8q_py_has_no_memory(object) &&
        (fp8q_Tensor_Check(object) || PyObject_CheckBuffer(object) ||
         fp8q_py_has_dlpack(object))) {
        return 1;
    }
    *given = PyUnicode_FromFormat("an object of type %.200s",
                                  Py_TYPE(object)->tp_name);
    return *given != NULL ? 0 : -1;
}

fp8q_TensorObject *fp8q_py_writable_output(
    PyObject *out_object, const char *function, const char *argument,
    fp8q_dtype dtype, const char *shape_source, int ndim,
    const int64_t *shape, const fp8q_py_device *device)
{
    fp8q_TensorObject *out;
    fp8q_error error;
    PyObject *given;
    const int viewable = fp8q_py_output_kind(out_object, &given);

    if (viewable == 0) {
        /* (An array of another dtype: ValueError, as a copy would be.) */
        PyErr_Format(PyArray_Check(out_object) ? PyExc_ValueError
                                               : PyExc_TypeError,
                     "%s: %s= must be an fp8q.Tensor, or an array fp8q "
                     "can write in place (NumPy array, DLPack producer, "
                     "writable buffer), of dtype %s; got %U",
                     function, argument, fp8q_dtype_name(dtype), given);
        Py_DECREF(given);
        return NULL;
    }
    out = viewable < 0 ? NULL
                       : fp8q_tensor_from_object(out_object, argument, -1,
                                                 FP8Q_COPY_NEVER);
    if (out == NULL) {
        return NULL;
    }
    if (fp8q_py_raise_on_failure(
            fp8q_check_output(&out->view, fp8q_py_place(out), out->readonly,
                              function, argument, dtype, *device,
                              shape_source, ndim, shape, &error),
            &error) < 0) {
        Py_CLEAR(out);
    }
    return out;
}

fp8q_TensorObject *fp8q_py_new_like(const fp8q_TensorObject *x,
                                    fp8q_dtype dtype, int ndim,
                                    const int64_t *shape,
                                    fp8q_cu_stream stream)
{
    const fp8q_py_device device = fp8q_py_place(x);

    return fp8q_tensor_new_empty_on(dtype, ndim, shape, &device, stream);
}

fp8q_TensorObject *fp8q_py_op_output(PyObject *out_object,
                                     const char *function, fp8q_dtype dtype,
                                     const fp8q_TensorObject *x,
                                     fp8q_cu_stream stream)
{
    const fp8q_py_device device = {x->device_type, x->device_index};

    if (out_object == Py_None) {
        return fp8q_py_new_like(x, dtype, x->view.ndim, x->view.shape,
                                stream);
    }
    return fp8q_py_writable_output(out_object, function, "out", dtype,
                                   "x's shape", x->view.ndim, x->view.shape,
                                   &device);
}

PyObject *fp8q_py_op_result(fp8q_TensorObject *out, PyObject *out_object)
{
    if (out == NULL || out_object == Py_None) {
        return (PyObject *)out;
    }
    /* Like NumPy's out=: the very object the caller passed. */
    Py_DECREF(out);
    return Py_NewRef(out_object);
}

fp8q_TensorObject *fp8q_py_import_argument(const fp8q_dl_exchange_api *api,
                                           PyObject *object,
                                           const char *name)
{
    const fp8q_dl_exchange_api *own = NULL;

    if (api != NULL && fp8q_py_exchange_api(object, &own) < 0) {
        return NULL;
    }
    if (own != NULL && own == api) {
        return fp8q_py_exchange_import(api, object, name, NULL);
    }
    return fp8q_tensor_from_object(object, name, -1, FP8Q_COPY_NEVER);
}

fp8q_TensorObject *fp8q_py_new_output(const fp8q_dl_exchange_api *api,
                                      fp8q_dtype dtype, int ndim,
                                      const int64_t *shape,
                                      const fp8q_py_device *device,
                                      fp8q_cu_stream stream,
                                      PyObject **producer_out)
{
    fp8q_TensorObject *tensor = NULL;
    PyObject *producer;

    if (api != NULL) {
        producer = fp8q_py_exchange_empty(api, dtype, ndim, shape, device,
                                          stream, &tensor);
    }
    else {
        tensor = fp8q_tensor_new_empty_on(dtype, ndim, shape, device, stream);
        producer = (PyObject *)tensor;
        Py_XINCREF(producer);
    }
    if (producer_out != NULL) {
        *producer_out = producer;
    }
    else {
        Py_XDECREF(producer); /* the view keeps it alive */
    }
    return tensor;
}
