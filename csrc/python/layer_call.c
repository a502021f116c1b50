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

#include "core/layer_checks.h"

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

fp8q_TensorObject *fp8q_layer_new_tensor(layer_call *call, fp8q_dtype dtype,
                                         int ndim, const int64_t *shape,
                                         PyObject **producer_out)
{
    return fp8q_py_new_output(call->api, dtype, ndim, shape, &call->device,
                              call->stream, producer_out);
}

fp8q_TensorObject *fp8q_layer_scratch(layer_call *call, int64_t bytes)
{
    if (call->api != NULL) {
        return fp8q_py_exchange_scratch(call->api, bytes, &call->device,
                                        call->stream);
    }
    return fp8q_tensor_new_empty_on(FP8Q_UINT8, 1, &bytes, &call->device,
                                    call->stream);
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
    static const fp8q_granularity_kind kinds[3] = {
        FP8Q_GRANULARITY_ROW, FP8Q_GRANULARITY_TENSOR, FP8Q_GRANULARITY_BLOCK};
    static const char *const names[3] = {"row", "tensor", "block"};
    int index;

    for (index = 0; PyUnicode_Check(object) && index < 3; index++) {
        if (PyUnicode_CompareWithASCIIString(object, names[index]) == 0) {
            *kind = kinds[index];
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
    fp8q_dl_device dl_device;
    fp8q_error error;
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
    if (fp8q_py_raise_on_failure(fp8q_layer_check_x(call->name,
                                                    &call->x->view,
                                                    call->x_codes, &error),
                                 &error) < 0) {
        return -1;
    }
    call->device.type = call->x->device_type;
    call->device.index = call->x->device_index;
    if (fp8q_py_raise_on_failure(
            fp8q_layer_check_stream(call->name, stream_object != Py_None,
                                    call->api != NULL,
                                    call->device.type != FP8Q_DEVICE_CUDA,
                                    &error),
            &error) < 0) {
        return -1;
    }
    if (stream_object != Py_None) {
        return fp8q_py_parse_stream(stream_object, "stream", &call->stream);
    }
    if (call->api == NULL) {
        call->stream = fp8q_py_last_stream(call->x);
        return 0;
    }
    dl_device = fp8q_dl_device_of(&call->device);
    return fp8q_py_producer_stream(call->api, &dl_device, &call->stream);
}

int fp8q_layer_check_device(layer_call *call,
                            const fp8q_TensorObject *tensor,
                            const char *name)
{
    fp8q_error error;

    return fp8q_py_raise_on_failure(
        fp8q_layer_check_place(call->name, call->device,
                               fp8q_py_place(tensor), name, &error),
        &error);
}

int fp8q_layer_import_weight(layer_call *call, PyObject *weight_object,
                             PyObject *scale_object)
{
    fp8q_error error;

    call->weight =
        fp8q_py_import_argument(call->api, weight_object, "weight");
    call->weight_scale = call->weight != NULL
                             ? fp8q_py_import_argument(
                                   call->api, scale_object, "weight_scale")
                             : NULL;
    if (call->weight_scale == NULL ||
        fp8q_layer_check_device(call, call->weight, "weight") < 0 ||
        fp8q_layer_check_device(call, call->weight_scale, "weight_scale") < 0) {
        return -1;
    }
    if (fp8q_py_raise_on_failure(
            fp8q_layer_check_weight(call->name, &call->weight->view, &error),
            &error) < 0) {
        return -1;
    }
    return fp8q_py_check_host_scales(call->weight_scale, call->name,
                                     "weight_scale");
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
    fp8q_error error;

    if (bias != Py_None) {
        call->bias = fp8q_py_import_argument(call->api, bias, "bias");
        if (call->bias == NULL ||
            fp8q_layer_check_device(call, call->bias, "bias") < 0 ||
            fp8q_py_raise_on_failure(
                fp8q_layer_check_bias(call->name, &call->bias->view,
                                      call->weight->view.shape[0], &error),
                &error) < 0) {
            return -1;
        }
    }
    if (input_scale == Py_None) {
        return 0;
    }
    call->input_scale =
        fp8q_py_import_argument(call->api, input_scale, "input_scale");
    if (call->input_scale == NULL ||
        fp8q_layer_check_device(call, call->input_scale, "input_scale") < 0 ||
        fp8q_py_raise_on_failure(
            fp8q_layer_check_input_scale(call->name, &call->input_scale->view,
                                         call->granularity, &error),
            &error) < 0) {
        return -1;
    }
    return fp8q_py_check_host_scales(call->input_scale, call->name,
                                     "input_scale");
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
                                x->ndim, shape, &call->result);
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
