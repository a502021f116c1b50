/*
 * linear_layer.c - the forward pass of an fp8q.torch.Linear with FP8
 * activations (W8A8) in one C call:
 *
 *   _C.linear_layer(x, weight, weight_scale, bias, input_scale,
 *                   granularity, stream[, path[, quantized]])
 *                                          y = x @ W.T + bias
 *                                          (quantized: x's codes and row
 *                                          scales, already computed)
 *                                          (few tokens on a GPU: the
 *                                          weight-only product,
 *                                          cuda/layer_path.h)
 *   _C.linear(x, weight, weight_scale, granularity, bias, out_dtype,
 *             weight_only, stream, x_scale)
 *                                          fp8q.linear: the same call
 *                                          (path "fp8"), or the
 *                                          weight-only product
 *
 * The numbers are exactly fp8q.quantize of each token followed by
 * fp8q.scaled_mm, as fp8q.linear computes them (docs/torch.md); the
 * call's tensors come from layer_call.c.
 */
#include <stdint.h>
#include <string.h>

#include "python/layer_call.h"

#include "core/layer_checks.h"
#include "core/scaled_mm_checks.h"
#include "cuda/fp8_layer.h"
#include "cuda/layer_path.h"

/* quantized=(codes, scale) of linear_layer: x's float8_e4m3fn codes
 * (shape (..., K), M*K values, 16-byte aligned) and its float32 row scales
 * (shape (..., 1), M values), both C-contiguous on x's device, for "row" /
 * "tensor" weights without input_scale. Imported into call->codes and
 * call->x_scale ((M, K) and (M, 1) views); 0, or -1 with ValueError /
 * TypeError. */
static int given_activations(layer_call *call, int64_t m, int64_t k)
{
    fp8q_TensorObject *codes = call->codes, *scale = call->x_scale;
    fp8q_error error;

    call->codes = call->x_scale = NULL;
    if (fp8q_py_raise_on_failure(
            fp8q_layer_check_given_allowed(call->name,
                                           call->input_scale != NULL,
                                           call->granularity, &error),
            &error) == 0 &&
        fp8q_py_raise_on_failure(
            fp8q_layer_check_given(call->name, "codes", &codes->view,
                                   FP8Q_FLOAT8_E4M3FN, m, k, 16, &error),
            &error) == 0 &&
        fp8q_py_raise_on_failure(
            fp8q_layer_check_given(call->name, "scale", &scale->view,
                                   FP8Q_FLOAT32, m, 1, sizeof(float), &error),
            &error) == 0) {
        call->codes = fp8q_layer_matrix_view(codes, m, k);
        call->x_scale =
            call->codes != NULL ? fp8q_layer_matrix_view(scale, m, 1) : NULL;
    }
    Py_DECREF(codes);
    Py_DECREF(scale);
    return call->x_scale == NULL ? -1 : 0;
}


/* fp8q_layer_check_features for the call's x and weight. Both products of
 * linear check it first. */
static int check_features(layer_call *call)
{
    fp8q_error error;

    return fp8q_py_raise_on_failure(
        fp8q_layer_check_features(call->name, &call->x->view,
                               call->weight->view.shape[1], &error),
        &error);
}

/* Allocates the result (x's leading shape, N) and runs quantize + product
 * into it (cuda/fp8_layer.h). */
static int forward(layer_call *call)
{
    const fp8q_view *x = &call->x->view;
    const int64_t k = x->shape[x->ndim - 1];
    const int64_t n = call->weight->view.shape[0];
    fp8q_TensorObject *tensors[9]; /* the call's memory, used on its stream */
    fp8q_fp8_layer_call product;
    int64_t m, bytes;
    fp8q_error error;
    fp8q_status status;
    int result;

    if (check_features(call) < 0) {
        return -1;
    }
    m = fp8q_view_size(x) / k; /* the tokens (no overflow: x exists) */
    if (fp8q_layer_make_output(call, m, n) < 0 ||
        ((!call->quantized || call->x_codes) &&
         fp8q_layer_make_rows(call, m, k) < 0)) {
        return -1;
    }
    if (m == 0 || n == 0) {
        return 0;
    }
    if (call->quantized && !call->x_codes &&
        given_activations(call, m, k) < 0) {
        return -1;
    }
    memset(&product, 0, sizeof product);
    product.device = call->device.type == FP8Q_DEVICE_CUDA
                         ? call->x->cuda_device
                         : NULL;
    product.stream = call->stream;
    product.granularity = call->granularity;
    product.weight = &call->weight->view;
    product.weight_scale = &call->weight_scale->view;
    product.bias = call->bias != NULL ? &call->bias->view : NULL;
    if (!call->quantized) {
        product.rows = &call->rows->view;
        product.input_scale =
            call->input_scale != NULL ? &call->input_scale->view : NULL;
    }
    else {
        product.codes = call->x_codes ? &call->rows->view : &call->codes->view;
        product.x_scale = &call->x_scale->view;
        /* (fp8q.linear's QTensor scales are checked finite on import.) */
        product.flag_nonfinite_scales = !call->x_codes;
    }
    product.out = &call->out_rows->view;
    product.sgemm = fp8q_py_numpy_sgemm;
    bytes = fp8q_fp8_layer_scratch_bytes(&product);
    tensors[0] = call->rows;
    tensors[1] = call->codes;
    tensors[2] = call->x_scale;
    tensors[3] = call->input_scale;
    tensors[4] = call->weight;
    tensors[5] = call->weight_scale;
    tensors[6] = call->bias;
    tensors[7] = call->out_rows;
    tensors[8] = bytes > 0 ? fp8q_layer_scratch(call, bytes) : NULL;
    if ((bytes > 0 && tensors[8] == NULL) ||
        (product.device != NULL &&
         (product.library = fp8q_py_load_cublaslt()) == NULL) ||
        fp8q_py_use_all_on_stream(tensors, 9, call->stream) < 0) {
        Py_XDECREF(tensors[8]);
        return -1;
    }
    fp8q_error_clear(&error);
    FP8Q_PY_BEGIN_INTERRUPTIBLE
    status = fp8q_fp8_layer_forward(
        &product, tensors[8] != NULL ? tensors[8]->view.data : NULL, &error);
    FP8Q_PY_END_INTERRUPTIBLE(status)
    result = fp8q_py_raise_on_failure(status, &error);
    Py_XDECREF(tensors[8]);
    return result;
}

/* The product a W8A8 call takes (cuda/layer_path.h): `path_object` None
 * for FP8Q_CUDA_FP8_LAYER_PATH's choice, or "auto", "fp8", "weight-only". */
static int parse_path(PyObject *path_object, fp8q_layer_path *path)
{
    const char *text;

    *path = fp8q_cuda_switches_get()->fp8_layer_path;
    if (path_object == Py_None) {
        return 0;
    }
    text = PyUnicode_Check(path_object) ? PyUnicode_AsUTF8(path_object) : NULL;
    if (text != NULL && fp8q_layer_path_parse(text, path) == 0) {
        return 0;
    }
    if (text != NULL || !PyErr_Occurred()) {
        PyErr_Format(PyExc_ValueError,
                     "%s: path must be None, \"auto\", \"fp8\" or "
                     "\"weight-only\", got %R",
                     LAYER, path_object);
    }
    return -1;
}

/* linear_layer's `quantized`: None, or (codes, scale) imported as
 * call->codes and call->x_scale (checked by given_activations once x's
 * shape is known). Call after import_x. */
static int import_quantized(layer_call *call, PyObject *quantized)
{
    if (quantized == Py_None) {
        return 0;
    }
    if (!PyTuple_Check(quantized) || PyTuple_GET_SIZE(quantized) != 2) {
        PyErr_Format(PyExc_TypeError,
                     "%s: quantized must be None or (codes, scale)",
                     call->name);
        return -1;
    }
    call->codes = fp8q_py_import_argument(
        call->api, PyTuple_GET_ITEM(quantized, 0), "codes");
    call->x_scale = call->codes != NULL
                        ? fp8q_py_import_argument(
                              call->api, PyTuple_GET_ITEM(quantized, 1),
                              "scale")
                        : NULL;
    call->quantized = 1;
    return call->x_scale == NULL ||
                   fp8q_layer_check_device(call, call->codes, "codes") < 0 ||
                   fp8q_layer_check_device(call, call->x_scale, "scale") < 0
               ? -1
               : 0;
}

/* The W8A8 forward: the weight-only product for as many tokens as `path`
 * allows on x's GPU (cuda/layer_path.h) where its kernels take the call,
 * else quantize + FP8 GEMM (forward). */
static int fp8_layer_forward(layer_call *call, fp8q_layer_path path)
{
    const fp8q_view *x = &call->x->view;
    const int64_t k = x->shape[x->ndim - 1];

    if (call->device.type == FP8Q_DEVICE_CUDA && k > 0 &&
        fp8q_view_size(x) / k <=
            fp8q_cuda_fp8_layer_weight_only_tokens(call->x->cuda_device,
                                                   path)) {
        if (fp8q_layer_gemv_forward(call, 0) < 0) {
            return -1;
        }
        if (call->result != NULL) {
            return 0;
        }
    }
    return forward(call);
}

static PyObject *linear_layer(PyObject *module, PyObject *const *args,
                              Py_ssize_t n_args)
{
    layer_call call;
    fp8q_layer_path path;

    (void)module;
    fp8q_layer_start(&call, LAYER);
    if (n_args < 7 || n_args > 9) {
        PyErr_Format(PyExc_TypeError,
                     "linear_layer() takes 7 to 9 positional arguments (%zd "
                     "given)",
                     n_args);
        return NULL;
    }
    return fp8q_layer_finish(
        &call,
        parse_path(n_args >= 8 ? args[7] : Py_None, &path) < 0 ||
            fp8q_layer_parse_granularity(args[5], &call.granularity) < 0 ||
            fp8q_layer_import_x(&call, args[0], args[6]) < 0 ||
            fp8q_layer_import_weight(&call, args[1], args[2]) < 0 ||
            fp8q_layer_import_activation_arguments(&call, args[3], args[4]) <
                0 ||
            (n_args == 9 && import_quantized(&call, args[8]) < 0) ||
            fp8_layer_forward(&call, path) < 0);
}

/* fp8q.linear's out_dtype: None for x's dtype (bfloat16 for FP8 codes),
 * else one of scaled_mm's result dtypes. */
static int parse_out_dtype(layer_call *call, PyObject *object)
{
    int found;

    call->has_out_dtype = call->x_codes || object != Py_None;
    call->out_dtype = FP8Q_BFLOAT16;
    if (object == Py_None) {
        return 0;
    }
    found = fp8q_py_dtype_from_object(object, &call->out_dtype);
    if (found < 0) {
        return -1;
    }
    if (found == 0 || !fp8q_scaled_mm_out_dtype_ok(call->out_dtype)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: out_dtype must be " FP8Q_SCALED_MM_OUT_DTYPES
                     ", got %R",
                     call->name, object);
        return -1;
    }
    return 0;
}

/* fp8q.linear's x_scale (its QTensor x's float32 scales), on x's device;
 * on the CPU checked finite and > 0, as scaled_mm checks its scales. */
static int import_x_scale(layer_call *call, PyObject *object)
{
    fp8q_error error;

    call->x_scale = fp8q_py_import_argument(call->api, object, "x_scale");
    if (call->x_scale == NULL ||
        fp8q_layer_check_device(call, call->x_scale, "x_scale") < 0 ||
        fp8q_py_raise_on_failure(
            fp8q_layer_check_x_scale(call->name, call->x_scale->view.dtype,
                                     &error),
            &error) < 0) {
        return -1;
    }
    return fp8q_py_check_host_scales(call->x_scale, call->name, "x's scale");
}

/* fp8q.linear (python/fp8q/_linear.py normalises its arguments): the same
 * call as linear_layer's, with the product always quantize + FP8 GEMM
 * (path "fp8"), or the weight-only product. */
static PyObject *linear(PyObject *module, PyObject *const *args,
                        Py_ssize_t n_args)
{
    layer_call call;
    int weight_only;

    (void)module;
    fp8q_layer_start(&call, "linear");
    if (fp8q_layer_positional("linear", n_args, 9) < 0 ||
        (weight_only = PyObject_IsTrue(args[6])) < 0) {
        return NULL;
    }
    call.x_codes = call.quantized = args[8] != Py_None;
    return fp8q_layer_finish(
        &call,
        fp8q_layer_parse_granularity(args[3], &call.granularity) < 0 ||
            parse_out_dtype(&call, args[5]) < 0 ||
            fp8q_layer_import_x(&call, args[0], args[7]) < 0 ||
            fp8q_layer_import_weight(&call, args[1], args[2]) < 0 ||
            fp8q_layer_import_activation_arguments(&call, args[4], Py_None) <
                0 ||
            (call.x_codes && import_x_scale(&call, args[8]) < 0) ||
            (weight_only ? check_features(&call) < 0 ||
                               fp8q_layer_weight_only_forward(&call) < 0
                         : forward(&call) < 0));
}

PyDoc_STRVAR(
    linear_doc,
    "linear(x, weight, weight_scale, granularity, bias, out_dtype, "
    "weight_only, stream, x_scale)\n"
    "--\n\n"
    "fp8q.linear's computation (python/fp8q/_linear.py checks and "
    "normalises the arguments): linear_layer's W8A8 forward with "
    "granularity's weight scales, always quantize + FP8 GEMM, the result "
    "an fp8q.Tensor of out_dtype (None: x's dtype, bfloat16 for codes); "
    "x_scale None for a float x, else x holds FP8 codes (..., K) and "
    "x_scale their float32 scales as scaled_mm's scale_a takes them for "
    "the (M, K) rows: (), (M, 1) or (M, ceil(K/128)). weight_only true: "
    "the weight-only product (weight_only_gemv's on a GPU, ValueError when "
    "its kernels do not take the call; on the CPU w decoded to float32 and "
    "NumPy's float32 product). Internal to fp8q.linear.");

PyDoc_STRVAR(
    linear_layer_doc,
    "linear_layer(x, weight, weight_scale, bias, input_scale, granularity, "
    "stream, path=None, quantized=None)\n"
    "--\n\n"
    "The forward pass of fp8q.torch.Linear with FP8 activations, in one "
    "call: y = x @ (weight * weight_scale).T + bias, with x (..., K) "
    "float32, float16 or bfloat16 quantized to float8_e4m3fn per token "
    "(granularity \"row\" or \"tensor\" weights), in 1x128 blocks "
    "(\"block\" weights, 128x128 weight scales), or with the float32 "
    "input_scale when it is not None (static); exactly fp8q.quantize "
    "followed by fp8q.scaled_mm. weight: (N, K) float8_e4m3fn or "
    "float8_e5m2; weight_scale: (N, 1) \"row\", () \"tensor\", "
    "(ceil(N/128), ceil(K/128)) \"block\"; bias None or N values. Returns "
    "(..., N) in x's dtype, on x's device.\n\n"
    "torch tensors are viewed through DLPack's C exchange API and the "
    "result comes from torch's allocator, on torch's current stream when "
    "stream is None; other arguments are read as fp8q.asarray reads them "
    "and the result is an fp8q.Tensor (stream None: x's last stream). On "
    "the CPU a token holding NaN or infinity gives a row of NaN and the "
    "other rows are computed as if it were absent; on a GPU the dynamic "
    "scales carry the NaN into the row, and a static scale quantizes an "
    "infinity to the NaN code (where fp8q.quantize saturates it), so the "
    "row is NaN too.\n\n"
    "On a GPU, up to a crossover number of tokens (cuda/layer_path.h: a "
    "table by device kind) the call computes layer_gemv's weight-only "
    "product instead (x unquantized, input_scale unused; a NaN or infinite "
    "token gives what torch's float product gives in its row) where the "
    "weight-only kernels take the call. path (positional, optional): None "
    "for FP8Q_CUDA_FP8_LAYER_PATH's choice (\"auto\" when unset), "
    "\"auto\", \"fp8\" (quantize + FP8 GEMM for every token count) or "
    "\"weight-only\" (the weight-only product wherever its kernels take "
    "the call). quantized (positional, optional): None, or (codes, scale) "
    "of x already quantized per token (float8_e4m3fn codes and float32 "
    "row scales, C-contiguous, x's size and rows: what "
    "torch.ops.fp8q.norm_quantize writes), used instead of quantizing x "
    "(\"row\" / \"tensor\" weights without input_scale); on the CPU a "
    "row whose scale is not finite gives a row of NaN. Internal to "
    "fp8q.torch (docs/torch.md).");

PyMethodDef fp8q_py_linear_layer_functions[] = {
    {"linear_layer", (PyCFunction)(void (*)(void))linear_layer,
     METH_FASTCALL, linear_layer_doc},
    {"linear", (PyCFunction)(void (*)(void))linear, METH_FASTCALL,
     linear_doc},
    {NULL, NULL, 0, NULL},
};
