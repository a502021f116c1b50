/*
 * norm_quantize.c - the binding of the fused RMSNorm / LayerNorm + per-token
 * FP8 quantize (core/norm_quantize.h on the CPU, kernels/norm_quantize.cuh
 * on a GPU, run through cuda/op_call.h): argument checks, no arithmetic.
 *
 *   _C.norm_quantize(x, weight, bias, epsilon, layer_norm)
 *       -> (normed, codes, scale), new tensors: torch tensors from torch's
 *          allocator, on torch's current stream, when x is a torch tensor
 *          (DLPack's C exchange API, one crossing, no capsule); fp8q
 *          Tensors otherwise
 *   _C.norm_quantize(x, weight, bias, normed, codes, scale, epsilon,
 *                    layer_norm, stream)
 *       fills the given normed, codes and scale and returns None.
 */
#include <string.h>

#include "python/binding.h"

#include "core/norm_quantize.h"
#include "cuda/op_call.h"

#define OP "norm_quantize"

/* `tensor` (a new reference, or NULL with an exception) checked by
 * core/norm_quantize.h's fp8q_norm_quantize_check_tensor, against x's
 * device unless `x` is NULL; released when refused. */
static fp8q_TensorObject *checked(fp8q_TensorObject *tensor, const char *name,
                                  const fp8q_TensorObject *x, int output)
{
    fp8q_place x_place;
    fp8q_error error;

    if (tensor == NULL) {
        return NULL;
    }
    x_place = fp8q_py_place(x != NULL ? x : tensor);
    if (fp8q_py_raise_on_failure(
            fp8q_norm_quantize_check_tensor(
                name, &tensor->view, fp8q_py_place(tensor), tensor->readonly,
                x != NULL ? &x_place : NULL, output, &error),
            &error) < 0) {
        Py_CLEAR(tensor);
    }
    return tensor;
}

/* A tensor argument, checked as `checked` does: through x's exchange table
 * `api` when not NULL and the object has the same one (a view for this
 * call), else as fp8q.asarray takes it (no copy). */
static fp8q_TensorObject *argument(PyObject *object, const char *name,
                                   const fp8q_TensorObject *x, int output,
                                   const fp8q_dl_exchange_api *api)
{
    return checked(fp8q_py_import_argument(api, object, name), name, x,
                   output);
}

/* epsilon and layer_norm from their argument objects; 0, or -1 with an
 * exception. */
static int parse_options(PyObject *epsilon_object, PyObject *layer_norm_object,
                         fp8q_norm_quantize_args *call)
{
    const double epsilon = PyFloat_AsDouble(epsilon_object);
    const int layer_norm = PyObject_IsTrue(layer_norm_object);

    if ((epsilon == -1.0 && PyErr_Occurred()) || layer_norm < 0) {
        return -1;
    }
    call->epsilon = (float)epsilon;
    call->layer_norm = layer_norm;
    return 0;
}

/* x, weight and bias (args[0..2]) imported into tensors[0..2]: with
 * `exchange`, through x's exchange table, which *api receives (NULL when x
 * has none); else as fp8q.asarray takes them. 0, or -1 with an
 * exception. */
static int import_inputs(PyObject *const *args, fp8q_TensorObject **tensors,
                         int exchange, const fp8q_dl_exchange_api **api)
{
    static const char *const names[3] = {"x", "weight", "bias"};
    int i;

    *api = NULL;
    if (exchange && fp8q_py_exchange_api(args[0], api) < 0) {
        return -1;
    }
    for (i = 0; i < 3; i++) {
        if (i == 2 && args[i] == Py_None) {
            continue;
        }
        tensors[i] = argument(args[i], names[i], i == 0 ? NULL : tensors[0],
                              0, *api);
        if (tensors[i] == NULL) {
            return -1;
        }
    }
    return 0;
}

/* The 5-argument form: normed, codes and scale made here (tensors[3..5],
 * their producer objects in outputs[0..2]) on x's device and stream. */
static int make_outputs(fp8q_TensorObject **tensors, PyObject **outputs,
                        const fp8q_dl_exchange_api *api,
                        fp8q_cu_stream *stream)
{
    const fp8q_TensorObject *x = tensors[0];
    const fp8q_dtype dtypes[3] = {x->view.dtype, FP8Q_FLOAT8_E4M3FN,
                                  FP8Q_FLOAT32};
    fp8q_py_device device;
    int64_t shape[FP8Q_MAX_DIMS];
    int ndim = x->view.ndim, i;

    device.type = x->device_type;
    device.index = x->device_index;
    if (ndim < 1) {
        PyErr_SetString(PyExc_ValueError,
                        OP ": x must have a last axis of at least 1 element");
        return -1;
    }
    memcpy(shape, x->view.shape, sizeof(int64_t) * (size_t)ndim);
    if (api == NULL) {
        *stream = fp8q_py_last_stream(tensors[0]);
    }
    else {
        const fp8q_dl_device dl_device = fp8q_dl_device_of(&device);
        if (fp8q_py_producer_stream(api, &dl_device, stream) < 0) {
            return -1;
        }
    }
    for (i = 0; i < 3; i++) {
        if (i == 2) {
            shape[ndim - 1] = 1; /* one scale per row */
        }
        tensors[3 + i] = fp8q_py_new_output(api, dtypes[i], ndim, shape,
                                            &device, *stream, &outputs[i]);
        if (tensors[3 + i] == NULL) {
            return -1;
        }
    }
    return 0;
}

PyDoc_STRVAR(
    norm_quantize_doc,
    "norm_quantize(x, weight, bias, epsilon, layer_norm) or "
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
    "holding NaN or infinity gets a NaN scale. The 5-argument form makes "
    "normed (x's shape), codes (x's shape) and scale (x.shape[:-1] + (1,)) "
    "and returns (normed, codes, scale): torch tensors from torch's "
    "allocator, run on torch's current stream, when x is a torch tensor "
    "(DLPack's C exchange API), else fp8q Tensors on x's device (on the "
    "stream of x's last use). The 9-argument form writes the given, "
    "writable outputs (on a GPU on `stream`, as fp8q.cast's; for CPU "
    "tensors stream must be None) and returns None. Internal to fp8q.torch (torch.ops.fp8q.norm_quantize).");

static PyObject *norm_quantize(PyObject *module, PyObject *const *args,
                               Py_ssize_t n_args)
{
    static const char *const names[3] = {"normed", "codes", "scale"};
    fp8q_TensorObject *tensors[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    PyObject *outputs[3] = {NULL, NULL, NULL};
    PyObject *result = NULL;
    const fp8q_dl_exchange_api *api = NULL;
    fp8q_cu_stream stream = NULL;
    fp8q_norm_quantize_args call;
    fp8q_op_call op;
    fp8q_error error;
    const int given = n_args == 9;
    int i, failed;

    (void)module;
    if (n_args != 5 && n_args != 9) {
        PyErr_Format(PyExc_TypeError,
                     OP "() takes 5 or 9 positional arguments (%zd given)",
                     n_args);
        return NULL;
    }
    memset(&call, 0, sizeof call);
    failed = parse_options(args[given ? 6 : 3], args[given ? 7 : 4],
                           &call) < 0 ||
             import_inputs(args, tensors, !given, &api) < 0;
    if (!failed && given) {
        /* The caller's outputs, fp8q.asarray's views; its stream. */
        for (i = 0; i < 3 && !failed; i++) {
            tensors[3 + i] =
                argument(args[3 + i], names[i], tensors[0], 1, NULL);
            failed = tensors[3 + i] == NULL;
        }
        failed = failed ||
                 fp8q_py_parse_stream(args[8], "stream", &stream) < 0 ||
                 fp8q_py_check_stream_on_cpu(
                     OP, args[8],
                     tensors[0]->device_type == FP8Q_DEVICE_CPU) < 0;
    }
    else if (!failed) {
        failed = make_outputs(tensors, outputs, api, &stream) < 0;
    }
    fp8q_op_call_init(&op, FP8Q_OP_NORM_QUANTIZE, NULL, NULL, stream);
    op.norm = &call;
    fp8q_error_clear(&error);
    /* The argument block from the checked views (its epsilon and
     * layer_norm already set), run on x's device. */
    failed = failed ||
             fp8q_py_raise_on_failure(
                 fp8q_norm_quantize_describe(
                     &tensors[0]->view, &tensors[1]->view,
                     tensors[2] != NULL ? &tensors[2]->view : NULL,
                     &tensors[3]->view, &tensors[4]->view, &tensors[5]->view,
                     call.epsilon, call.layer_norm, &call, &error),
                 &error) < 0 ||
             fp8q_py_op_run(&op, tensors, 6) < 0;
    if (!failed) {
        result = given ? Py_NewRef(Py_None)
                       : PyTuple_Pack(3, outputs[0], outputs[1], outputs[2]);
    }
    for (i = 0; i < 6; i++) {
        Py_XDECREF(tensors[i]);
    }
    for (i = 0; i < 3; i++) {
        Py_XDECREF(outputs[i]);
    }
    return result;
}

PyMethodDef fp8q_py_norm_quantize_functions[] = {
    {"norm_quantize", (PyCFunction)(void (*)(void))norm_quantize,
     METH_FASTCALL, norm_quantize_doc},
    {NULL, NULL, 0, NULL},
};
