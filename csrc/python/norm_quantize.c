/*
 * norm_quantize.c - the binding of the fused RMSNorm / LayerNorm + per-token
 * FP8 quantize (core/norm_quantize.h on the CPU, kernels/norm_quantize.cuh
 * on a GPU): argument checks and dispatch by device, no arithmetic.
 *
 *   _C.norm_quantize(x, weight, bias, normed, codes, scale, epsilon,
 *                    layer_norm, stream)
 *
 * Every tensor is given (fp8q.torch allocates them with torch); the call
 * fills normed, codes and scale and returns None.
 */
#include <string.h>

#include "python/binding.h"

#include "core/norm_quantize.h"
#include "cuda/launch.h"

#define OP "norm_quantize"

/* A tensor argument as fp8q.asarray takes it (no copy), on x's device when
 * `x` is not NULL, C-contiguous (so no two elements share an address) and,
 * for an output (`output` nonzero), writable; NULL with an exception
 * otherwise. */
static fp8q_TensorObject *argument(PyObject *object, const char *name,
                                   const fp8q_TensorObject *x, int output)
{
    fp8q_TensorObject *tensor =
        fp8q_tensor_from_object(object, name, -1, FP8Q_COPY_NEVER);

    if (tensor == NULL) {
        return NULL;
    }
    if (x != NULL && (tensor->device_type != x->device_type ||
                      tensor->device_index != x->device_index)) {
        PyErr_Format(PyExc_ValueError, OP ": %s is not on x's device", name);
    }
    else if (!fp8q_view_is_contiguous(&tensor->view)) {
        PyErr_Format(PyExc_ValueError, OP ": %s must be C-contiguous", name);
    }
    else if (output && tensor->readonly) {
        PyErr_Format(PyExc_ValueError,
                     OP ": %s is an output and must be writable, got a "
                     "read-only tensor",
                     name);
    }
    else {
        return tensor;
    }
    Py_DECREF(tensor);
    return NULL;
}

/* 0 when `tensor` has `dtype` and `size` elements, else -1 with
 * ValueError. */
static int check_tensor(const fp8q_TensorObject *tensor, const char *name,
                        fp8q_dtype dtype, int64_t size)
{
    if (tensor->view.dtype == dtype && fp8q_view_size(&tensor->view) == size) {
        return 0;
    }
    PyErr_Format(PyExc_ValueError,
                 OP ": %s must hold %lld %s values, got %lld %s", name,
                 (long long)size, fp8q_dtype_name(dtype),
                 (long long)fp8q_view_size(&tensor->view),
                 fp8q_dtype_name(tensor->view.dtype));
    return -1;
}

/* Fills `call` from the checked tensors. */
static int describe(fp8q_norm_quantize_args *call, fp8q_TensorObject *x,
                    fp8q_TensorObject *weight, fp8q_TensorObject *bias,
                    fp8q_TensorObject *normed, fp8q_TensorObject *codes,
                    fp8q_TensorObject *scale)
{
    const int64_t length =
        x->view.ndim > 0 ? x->view.shape[x->view.ndim - 1] : 0;
    const int64_t size = fp8q_view_size(&x->view);
    const int64_t rows = length > 0 ? size / length : 0;

    if (length < 1) {
        PyErr_SetString(PyExc_ValueError,
                        OP ": x must have a last axis of at least 1 element");
        return -1;
    }
    if (check_tensor(weight, "weight", weight->view.dtype, length) < 0 ||
        (bias != NULL &&
         check_tensor(bias, "bias", weight->view.dtype, length) < 0) ||
        check_tensor(normed, "normed", x->view.dtype, size) < 0 ||
        check_tensor(codes, "codes", FP8Q_FLOAT8_E4M3FN, size) < 0 ||
        check_tensor(scale, "scale", FP8Q_FLOAT32, rows) < 0) {
        return -1;
    }
    call->source = x->view.data;
    call->weight = weight->view.data;
    call->bias = bias != NULL ? bias->view.data : NULL;
    call->normed = normed->view.data;
    call->codes = (uint8_t *)codes->view.data;
    call->scale = (float *)scale->view.data;
    call->n_rows = rows;
    call->row_length = length;
    call->source_dtype = (int32_t)x->view.dtype;
    call->weight_dtype = (int32_t)weight->view.dtype;
    call->max = 448.0f; /* float8_e4m3fn */
    return 0;
}

/* Runs the checked call on x's device. */
static int run(fp8q_norm_quantize_args *call, fp8q_TensorObject **tensors,
               int count, PyObject *stream_object)
{
    fp8q_TensorObject *x = tensors[0];
    fp8q_cu_stream stream = NULL;
    fp8q_error error;
    fp8q_status status;
    int i;

    fp8q_error_clear(&error);
    if (x->device_type == FP8Q_DEVICE_CPU) {
        Py_BEGIN_ALLOW_THREADS
        status = fp8q_norm_quantize(call, &error);
        Py_END_ALLOW_THREADS
        return fp8q_py_raise_on_failure(status, &error);
    }
    if (fp8q_py_parse_stream(stream_object, "stream", &stream) < 0) {
        return -1;
    }
    for (i = 0; i < count; i++) {
        if (tensors[i] != NULL &&
            fp8q_py_use_on_stream(tensors[i], stream) < 0) {
            return -1;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    status = fp8q_cuda_launch_norm_quantize(x->cuda_device, call, stream,
                                            &error);
    Py_END_ALLOW_THREADS
    return fp8q_py_raise_on_failure(status, &error);
}

static PyObject *norm_quantize(PyObject *module, PyObject *const *args,
                               Py_ssize_t n_args)
{
    static const char *const names[6] = {"x",      "weight", "bias",
                                         "normed", "codes",  "scale"};
    fp8q_TensorObject *tensors[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    fp8q_norm_quantize_args call;
    double epsilon;
    int layer_norm, i, failed = 0;

    (void)module;
    if (n_args != 9) {
        PyErr_Format(PyExc_TypeError,
                     OP "() takes 9 positional arguments (%zd given)",
                     n_args);
        return NULL;
    }
    memset(&call, 0, sizeof call);
    epsilon = PyFloat_AsDouble(args[6]);
    layer_norm = PyObject_IsTrue(args[7]);
    failed = (epsilon == -1.0 && PyErr_Occurred()) || layer_norm < 0;
    for (i = 0; i < 6 && !failed; i++) {
        if (i == 2 && args[i] == Py_None) {
            continue;
        }
        tensors[i] =
            argument(args[i], names[i], i == 0 ? NULL : tensors[0], i >= 3);
        failed = tensors[i] == NULL;
    }
    if (!failed) {
        call.epsilon = (float)epsilon;
        call.layer_norm = layer_norm;
        failed = describe(&call, tensors[0], tensors[1], tensors[2],
                          tensors[3], tensors[4], tensors[5]) < 0 ||
                 run(&call, tensors, 6, args[8]) < 0;
    }
    for (i = 0; i < 6; i++) {
        Py_XDECREF(tensors[i]);
    }
    return failed ? NULL : Py_NewRef(Py_None);
}

PyDoc_STRVAR(
    norm_quantize_doc,
    "norm_quantize(x, weight, bias, normed, codes, scale, epsilon, "
    "layer_norm, stream)\n"
    "--\n\n"
    "The fused RMSNorm (layer_norm false) or LayerNorm (true) of x's rows "
    "(x C-contiguous float32, float16 or bfloat16, last axis K) with "
    "weight (K values, float32 / float16 / bfloat16) and bias (None or K "
    "values of weight's dtype), followed by the per-token float8_e4m3fn "
    "quantize of the result: writes normed (x's dtype and size), codes "
    "(float8_e4m3fn, x's size) and scale (float32, one per row), exactly "
    "as csrc/core/norm_quantize.h defines them; codes and scale are "
    "fp8q.quantize(normed, granularity=\"row\") bit for bit, and a row "
    "holding NaN or infinity gets a NaN scale. On a GPU the kernel runs "
    "on `stream` (as fp8q.cast's). Returns None. Internal to fp8q.torch "
    "(torch.ops.fp8q.norm_quantize).");

static PyMethodDef norm_quantize_functions[] = {
    {"norm_quantize", (PyCFunction)(void (*)(void))norm_quantize,
     METH_FASTCALL, norm_quantize_doc},
    {NULL, NULL, 0, NULL},
};

int fp8q_py_norm_quantize_init(PyObject *module)
{
    return PyModule_AddFunctions(module, norm_quantize_functions);
}
