/*
 * layer_call.c - the tensors and argument checks of one fp8q.torch.Linear
 * call (layer_call.h), shared by linear_layer.c (W8A8) and
 * layer_weight_only.c (W8A16). The tensors are the layer's own torch
 * tensors, viewed through DLPack's C exchange API (dlpack_exchange.c): no
 * Python call, no capsule, torch's current stream read in C, results and
 * GPU temporaries from torch's caching allocator (so CUDA-graph pools and
 * torch.cuda.memory_allocated see them). fp8q.Tensor arguments (or a torch
 * without that API, through fp8q.torch.from_torch) take the same path with
 * fp8q's own allocations.
 */
#include <string.h>

#include "python/layer_call.h"

static void release(layer_call *call)
{
    fp8q_TensorObject **const held[] = {
        &call->x,           &call->rows,        &call->weight,
        &call->weight_scale, &call->bias,       &call->input_scale,
        &call->codes,       &call->x_scale,     &call->out_rows};
    size_t index;

    for (index = 0; index < sizeof held / sizeof held[0]; index++) {
        Py_CLEAR(*held[index]);
    }
    Py_CLEAR(call->result);
}

void fp8q_layer_start(layer_call *call, const char *name)
{
    memset(call, 0, sizeof *call);
    call->name = name;
}

fp8q_TensorObject *fp8q_layer_import(layer_call *call, PyObject *object,
                                     const char *name)
{
    const fp8q_dl_exchange_api *api;

    if (call->api != NULL) {
        if (fp8q_py_exchange_api(object, &api) < 0) {
            return NULL;
        }
        if (api == call->api) {
            return fp8q_py_exchange_import(api, object, name, NULL);
        }
    }
    return fp8q_tensor_from_object(object, name, -1, FP8Q_COPY_NEVER);
}

fp8q_TensorObject *fp8q_layer_new_tensor(layer_call *call, fp8q_dtype dtype,
                                         int ndim, const int64_t *shape,
                                         int from_producer,
                                         PyObject **producer_out)
{
    fp8q_TensorObject *tensor = NULL;
    PyObject *producer;

    if (call->api != NULL && from_producer) {
        producer = fp8q_py_exchange_empty(call->api, dtype, ndim, shape,
                                          &call->device, call->stream,
                                          &tensor);
    }
    else {
        tensor = fp8q_tensor_new_empty_on(dtype, ndim, shape, &call->device,
                                          call->stream);
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

fp8q_TensorObject *fp8q_layer_matrix_view(fp8q_TensorObject *tensor,
                                          int64_t rows,
                                          int64_t cols)
{
    fp8q_view view = tensor->view;

    view.ndim = 2;
    view.shape[0] = rows;
    view.shape[1] = cols;
    view.strides[0] = cols > 0 ? cols : 1;
    view.strides[1] = 1;
    return fp8q_tensor_new_view(&view, (PyObject *)tensor, tensor->readonly);
}

int fp8q_layer_parse_granularity(PyObject *object,
                                 fp8q_granularity_kind *kind)
{
    if (PyUnicode_Check(object)) {
        if (PyUnicode_CompareWithASCIIString(object, "row") == 0) {
            *kind = FP8Q_GRANULARITY_ROW;
            return 0;
        }
        if (PyUnicode_CompareWithASCIIString(object, "tensor") == 0) {
            *kind = FP8Q_GRANULARITY_TENSOR;
            return 0;
        }
        if (PyUnicode_CompareWithASCIIString(object, "block") == 0) {
            *kind = FP8Q_GRANULARITY_BLOCK;
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError,
                 LAYER ": granularity must be \"row\", \"tensor\" or "
                 "\"block\", got %R",
                 object);
    return -1;
}

int fp8q_layer_import_x(layer_call *call, PyObject *x_object,
                        PyObject *stream_object)
{
    fp8q_dl_device device;
    fp8q_dtype dtype;
    int unsupported_dtype = 0;

    if (fp8q_py_exchange_api(x_object, &call->api) < 0) {
        return -1;
    }
    call->x = call->api != NULL
                  ? fp8q_py_exchange_import(call->api, x_object, "x",
                                            &unsupported_dtype)
                  : fp8q_tensor_from_object(x_object, "x", -1,
                                            FP8Q_COPY_NEVER);
    if (call->x == NULL) {
        if (unsupported_dtype) {
            fp8q_py_error_add_prefix("%s: x must be float32, float16 or "
                                     "bfloat16; ",
                                     call->name);
        }
        return -1;
    }
    dtype = call->x->view.dtype;
    if (call->x_codes ? dtype != FP8Q_FLOAT8_E4M3FN &&
                            dtype != FP8Q_FLOAT8_E5M2
                      : dtype != FP8Q_FLOAT32 && dtype != FP8Q_FLOAT16 &&
                            dtype != FP8Q_BFLOAT16) {
        PyErr_Format(PyExc_TypeError, "%s: x must be %s, got %s", call->name,
                     call->x_codes ? "float8_e4m3fn or float8_e5m2 codes"
                                   : "float32, float16 or bfloat16",
                     fp8q_dtype_name(dtype));
        return -1;
    }
    if (call->x->view.ndim == 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s: x must have at least one axis (..., "
                     "in_features), got a 0-d tensor",
                     call->name);
        return -1;
    }
    call->device.type = call->x->device_type;
    call->device.index = call->x->device_index;
    if (stream_object != Py_None &&
        (call->api != NULL || call->device.type != FP8Q_DEVICE_CUDA)) {
        PyErr_Format(PyExc_ValueError, "%s: %s", call->name,
                     call->api != NULL
                         ? "stream must be None for torch tensors: the call "
                           "runs on torch's current stream (choose it with "
                           "torch.cuda.stream(...))"
                         : "stream applies to CUDA tensors; this call runs "
                           "on the CPU (pass None)");
        return -1;
    }
    if (stream_object != Py_None) {
        return fp8q_py_parse_stream(stream_object, "stream", &call->stream);
    }
    if (call->api == NULL) {
        call->stream = fp8q_py_last_stream(call->x);
        return 0;
    }
    device.device_type =
        call->device.type == FP8Q_DEVICE_CUDA ? FP8Q_DL_CUDA : FP8Q_DL_CPU;
    device.device_id = call->device.index;
    return fp8q_py_exchange_current_stream(call->api, &device,
                                           &call->stream);
}

int fp8q_layer_check_device(layer_call *call,
                            const fp8q_TensorObject *tensor,
                            const char *name)
{
    char x_device[32], device[32];

    if (tensor->device_type == call->device.type &&
        tensor->device_index == call->device.index) {
        return 0;
    }
    fp8q_py_format_device(call->device.type, call->device.index, x_device,
                          sizeof x_device);
    fp8q_py_format_device(tensor->device_type, tensor->device_index, device,
                          sizeof device);
    PyErr_Format(PyExc_ValueError,
                 "%s: x is on %s but the layer's %s is on %s; move one "
                 "of them (model.to(\"%s\"))",
                 call->name, x_device, name, device,
                 call->device.type == FP8Q_DEVICE_CUDA ? "cuda" : "cpu");
    return -1;
}

int fp8q_layer_import_weight(layer_call *call, PyObject *weight_object,
                             PyObject *scale_object)
{
    call->weight = fp8q_layer_import(call, weight_object, "weight");
    call->weight_scale =
        call->weight != NULL
            ? fp8q_layer_import(call, scale_object, "weight_scale")
            : NULL;
    if (call->weight_scale == NULL ||
        fp8q_layer_check_device(call, call->weight, "weight") < 0 ||
        fp8q_layer_check_device(call, call->weight_scale, "weight_scale") < 0) {
        return -1;
    }
    if ((call->weight->view.dtype != FP8Q_FLOAT8_E4M3FN &&
         call->weight->view.dtype != FP8Q_FLOAT8_E5M2) ||
        call->weight->view.ndim != 2) {
        PyErr_Format(PyExc_TypeError,
                     "%s: weight must be a 2-D float8_e4m3fn or "
                     "float8_e5m2 tensor, got %d-D %s",
                     call->name, call->weight->view.ndim,
                     fp8q_dtype_name(call->weight->view.dtype));
        return -1;
    }
    return fp8q_layer_check_scales(call, call->weight_scale, "weight_scale");
}

int fp8q_layer_check_scales(layer_call *call, const fp8q_TensorObject *scale,
                            const char *name)
{
    fp8q_error error;
    fp8q_status status;

    if (call->device.type != FP8Q_DEVICE_CPU) {
        return 0;
    }
    fp8q_error_clear(&error);
    status = fp8q_check_scale_values(&scale->view, name, &error);
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        fp8q_py_error_add_prefix("%s: ", call->name);
        return -1;
    }
    return 0;
}

int fp8q_layer_make_rows(layer_call *call, int64_t m, int64_t k)
{
    fp8q_TensorObject *contiguous = call->x;

    if (call->rows != NULL) {
        return 0;
    }
    if (!fp8q_view_is_contiguous(&call->x->view)) {
        contiguous =
            call->device.type == FP8Q_DEVICE_CUDA
                ? fp8q_py_cuda_contiguous(call->x, call->stream)
                : fp8q_tensor_copy_as(call->x, call->x->view.dtype);
        if (contiguous == NULL) {
            return -1;
        }
    }
    else {
        Py_INCREF(contiguous);
    }
    call->rows = fp8q_layer_matrix_view(contiguous, m, k);
    Py_DECREF(contiguous);
    return call->rows == NULL ? -1 : 0;
}

int fp8q_layer_import_activation_arguments(layer_call *call, PyObject *bias,
                                           PyObject *input_scale)
{
    if (bias != Py_None) {
        call->bias = fp8q_layer_import(call, bias, "bias");
        if (call->bias == NULL ||
            fp8q_layer_check_device(call, call->bias, "bias") < 0) {
            return -1;
        }
        if (call->bias->view.dtype != FP8Q_FLOAT32 &&
            call->bias->view.dtype != FP8Q_FLOAT16 &&
            call->bias->view.dtype != FP8Q_BFLOAT16) {
            PyErr_Format(PyExc_TypeError,
                         "%s: bias must be float32, float16 or bfloat16, "
                         "got %s",
                         call->name, fp8q_dtype_name(call->bias->view.dtype));
            return -1;
        }
        if (call->bias->view.ndim != 1 ||
            call->bias->view.shape[0] != call->weight->view.shape[0]) {
            PyErr_Format(PyExc_ValueError,
                         "%s: bias must hold out_features = %lld values",
                         call->name, (long long)call->weight->view.shape[0]);
            return -1;
        }
    }
    if (input_scale == Py_None) {
        return 0;
    }
    call->input_scale = fp8q_layer_import(call, input_scale, "input_scale");
    if (call->input_scale == NULL ||
        fp8q_layer_check_device(call, call->input_scale, "input_scale") < 0) {
        return -1;
    }
    if (call->input_scale->view.dtype != FP8Q_FLOAT32 ||
        fp8q_view_size(&call->input_scale->view) != 1) {
        PyErr_Format(PyExc_ValueError, "%s: input_scale must be one float32 "
                     "value", call->name);
        return -1;
    }
    if (call->granularity == FP8Q_GRANULARITY_BLOCK) {
        PyErr_Format(PyExc_ValueError,
                     "%s: a static input_scale needs \"row\" or \"tensor\" "
                     "weight scales, not \"block\"",
                     call->name);
        return -1;
    }
    return fp8q_layer_check_scales(call, call->input_scale, "input_scale");
}

int fp8q_layer_make_output(layer_call *call, int64_t m, int64_t n)
{
    const fp8q_view *x = &call->x->view;
    int64_t shape[FP8Q_MAX_DIMS];
    fp8q_TensorObject *out;
    int axis;

    for (axis = 0; axis + 1 < x->ndim; axis++) {
        shape[axis] = x->shape[axis];
    }
    shape[x->ndim - 1] = n;
    out = fp8q_layer_new_tensor(call,
                                call->has_out_dtype ? call->out_dtype
                                                    : x->dtype,
                                x->ndim, shape, 1,
                                &call->result);
    if (out == NULL) {
        return -1;
    }
    call->out_rows = fp8q_layer_matrix_view(out, m, n);
    Py_DECREF(out);
    return call->out_rows == NULL ? -1 : 0;
}

int fp8q_layer_positional(const char *function, Py_ssize_t n_args,
                          Py_ssize_t count)
{
    if (n_args == count) {
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "%s() takes %zd positional arguments (%zd "
                                  "given)",
                 function, count, n_args);
    return -1;
}

PyObject *fp8q_layer_finish(layer_call *call, int failed)
{
    PyObject *result = failed ? NULL : call->result;

    if (!failed) {
        call->result = NULL;
    }
    release(call);
    return result;
}
