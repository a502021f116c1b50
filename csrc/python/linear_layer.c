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

#include "core/activation.h"
#include "core/quantize.h"
#include "core/scaled_mm.h"
#include "cuda/layer_path.h"

/* The dynamic activation scales' shape: (M, 1) per token, (M,
 * ceil(K/128)) for block weights. */
static void activation_scale_shape(const layer_call *call, int64_t m,
                                   int64_t k, int64_t *shape)
{
    shape[0] = m;
    shape[1] = call->granularity == FP8Q_GRANULARITY_BLOCK
                   ? (k + FP8Q_SCALED_MM_BLOCK - 1) / FP8Q_SCALED_MM_BLOCK
                   : 1;
}

/* Where the scales start in the scratch block of make_activation_buffers:
 * past the codes, on a boundary any scale reader (cuBLASLt's vectors
 * included) accepts. */
#define SCALES_ALIGNMENT 256

/* A (rows, cols) C-contiguous view of `dtype` at byte `offset` of a
 * scratch block. */
static fp8q_TensorObject *carve(fp8q_TensorObject *block, int64_t offset,
                                fp8q_dtype dtype, const int64_t *shape)
{
    fp8q_view view = block->view;

    view.data = (char *)block->view.data + offset;
    view.dtype = dtype;
    view.ndim = 2;
    view.shape[0] = shape[0];
    view.shape[1] = shape[1];
    view.strides[0] = shape[1] > 0 ? shape[1] : 1;
    view.strides[1] = 1;
    return fp8q_tensor_new_view(&view, (PyObject *)block, 0);
}

/* call->codes, x's (M, K) e4m3fn codes, and call->x_scale: input_scale
 * when static, else new (M, 1) or (M, ceil(K/128)) float32 scales. With an
 * exchange table (torch tensors) both are carved from one scratch block of
 * the producer's allocator (one allocation, no producer object: the layer's
 * host time); else from fp8q's own, on the GPU when `on_gpu`. */
static int make_activation_buffers(layer_call *call, int64_t m, int64_t k,
                                   int on_gpu)
{
    int64_t scale_shape[2];
    int64_t codes_shape[2];
    int64_t scales_offset;
    fp8q_TensorObject *block;

    codes_shape[0] = m;
    codes_shape[1] = k;
    activation_scale_shape(call, m, k, scale_shape);
    if (call->input_scale != NULL) {
        Py_INCREF(call->input_scale);
        call->x_scale = call->input_scale;
        scale_shape[0] = scale_shape[1] = 0;
    }
    if (call->api == NULL) {
        if (call->x_scale == NULL) {
            call->x_scale = fp8q_layer_new_tensor(call, FP8Q_FLOAT32, 2,
                                                  scale_shape, on_gpu, NULL);
        }
        call->codes = fp8q_layer_new_tensor(call, FP8Q_FLOAT8_E4M3FN, 2,
                                            codes_shape, on_gpu, NULL);
        return call->x_scale == NULL || call->codes == NULL ? -1 : 0;
    }
    scales_offset = (m * k + SCALES_ALIGNMENT - 1) / SCALES_ALIGNMENT *
                    SCALES_ALIGNMENT;
    block = fp8q_py_exchange_scratch(
        call->api,
        scales_offset + scale_shape[0] * scale_shape[1] *
                            (int64_t)sizeof(float),
        &call->device, call->stream);
    if (block == NULL) {
        return -1;
    }
    call->codes = carve(block, 0, FP8Q_FLOAT8_E4M3FN, codes_shape);
    if (call->x_scale == NULL) {
        call->x_scale = carve(block, scales_offset, FP8Q_FLOAT32, scale_shape);
    }
    Py_DECREF(block);
    return call->x_scale == NULL || call->codes == NULL ? -1 : 0;
}

/* CPU: codes and scales by core, rows holding NaN or infinity flagged in
 * `nonfinite` (M bytes). */
static int quantize_on_cpu(layer_call *call, uint8_t *nonfinite,
                           int64_t *n_nonfinite)
{
    const int64_t m = call->rows->view.shape[0];
    const int64_t k = call->rows->view.shape[1];
    const int64_t block_cols =
        call->input_scale != NULL ? 0
        : call->granularity == FP8Q_GRANULARITY_BLOCK ? FP8Q_SCALED_MM_BLOCK
                                                      : k;
    fp8q_TensorObject *row_amax = NULL;
    int64_t amax_shape[2];
    fp8q_error error;
    fp8q_status status;

    amax_shape[0] = m;
    amax_shape[1] = 1;
    if (block_cols == 0) {
        row_amax = fp8q_tensor_new_empty(FP8Q_FLOAT32, 2, amax_shape);
        if (row_amax == NULL) {
            return -1;
        }
    }
    fp8q_error_clear(&error);
    FP8Q_PY_BEGIN_INTERRUPTIBLE
    status = fp8q_quantize_activations(
        &call->rows->view, &call->codes->view, &call->x_scale->view,
        block_cols, row_amax != NULL ? &row_amax->view : NULL, nonfinite,
        n_nonfinite, &error);
    FP8Q_PY_END_INTERRUPTIBLE(status)
    Py_XDECREF(row_amax);
    return fp8q_py_raise_on_failure(status, &error);
}

/* GPU: per token (or 1x128 block) or with the static scale, on the call's
 * stream (cuda/layer_path.h, fp8q_cuda_fp8_layer_activation_options: a
 * token holding NaN or infinity gives a NaN row of the product by
 * itself). */
static int quantize_on_gpu(layer_call *call)
{
    fp8q_quantize_options options;

    fp8q_cuda_fp8_layer_activation_options(
        call->granularity, call->input_scale != NULL, &options);
    return fp8q_py_cuda_quantize(call->rows, &options, call->codes,
                                 call->x_scale, call->stream);
}

/* The weight as scaled_mm's b = weight.T (K, N) and its scales laid out
 * for b: () tensorwise, (1, N) rowwise, (ceil(K/128), ceil(N/128)). */
static fp8q_TensorObject *transposed(fp8q_TensorObject *tensor)
{
    fp8q_view view = tensor->view;

    if (view.ndim == 2) {
        view.shape[0] = tensor->view.shape[1];
        view.shape[1] = tensor->view.shape[0];
        view.strides[0] = tensor->view.strides[1];
        view.strides[1] = tensor->view.strides[0];
    }
    return fp8q_tensor_new_view(&view, (PyObject *)tensor, 1);
}

static int multiply(layer_call *call)
{
    const int64_t m = call->codes->view.shape[0];
    const int64_t k = call->codes->view.shape[1];
    const int64_t n = call->weight->view.shape[0];
    fp8q_py_scaled_mm product;
    fp8q_error error;
    fp8q_status status;
    int result;

    memset(&product, 0, sizeof product);
    product.a = call->codes;
    product.b = transposed(call->weight);
    product.scale_a = call->x_scale;
    product.scale_b = product.b != NULL ? transposed(call->weight_scale)
                                        : NULL;
    product.bias = call->bias;
    product.out = call->out_rows;
    if (product.scale_b == NULL) {
        Py_XDECREF(product.b);
        return -1;
    }
    fp8q_error_clear(&error);
    status = fp8q_scaled_mm_mode(m, k, n, &product.scale_a->view,
                                 &product.scale_b->view, &product.mode,
                                 &error);
    result = fp8q_py_raise_on_failure(status, &error);
    if (result == 0) {
        result = fp8q_py_scaled_mm_run(&product, 1, call->stream);
    }
    Py_DECREF(product.b);
    Py_DECREF(product.scale_b);
    return result;
}

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
    if (call->input_scale != NULL ||
        call->granularity == FP8Q_GRANULARITY_BLOCK) {
        PyErr_Format(PyExc_ValueError,
                     "%s: quantized activations need dynamic per-token "
                     "scales (no input_scale, \"row\" or \"tensor\" "
                     "weight scales)",
                     call->name);
    }
    else if (fp8q_py_raise_on_failure(
                 fp8q_check_given_activations(call->name, "codes",
                                              &codes->view,
                                              FP8Q_FLOAT8_E4M3FN, m, k, 16,
                                              &error),
                 &error) == 0 &&
             fp8q_py_raise_on_failure(
                 fp8q_check_given_activations(call->name, "scale",
                                              &scale->view, FP8Q_FLOAT32, m,
                                              1, sizeof(float), &error),
                 &error) == 0) {
        call->codes = fp8q_layer_matrix_view(codes, m, k);
        call->x_scale =
            call->codes != NULL ? fp8q_layer_matrix_view(scale, m, 1) : NULL;
    }
    Py_DECREF(codes);
    Py_DECREF(scale);
    return call->x_scale == NULL ? -1 : 0;
}

/* fp8q.linear's QTensor x: call->rows are its (M, K) codes, call->x_scale
 * (imported by import_x_scale) its scales as scaled_mm's scale_a takes
 * them (the product's mode checks their shape). */
static int codes_activations(layer_call *call)
{
    call->codes = (fp8q_TensorObject *)Py_NewRef(call->rows);
    return 0;
}

/* fp8q_check_in_features for the call's x and weight. Both products of
 * linear check it first. */
static int check_features(layer_call *call)
{
    fp8q_error error;

    return fp8q_py_raise_on_failure(
        fp8q_check_in_features(call->name, &call->x->view,
                               call->weight->view.shape[1], &error),
        &error);
}

/* Allocates the result (x's leading shape, N) and runs quantize + product
 * into it. */
static int forward(layer_call *call)
{
    const fp8q_view *x = &call->x->view;
    const int64_t k = x->shape[x->ndim - 1];
    const int64_t n = call->weight->view.shape[0];
    int64_t m;
    int64_t n_nonfinite = 0;
    uint8_t *nonfinite = NULL;
    int on_gpu, result = -1;

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
    on_gpu = call->device.type == FP8Q_DEVICE_CUDA;
    if (call->x_codes ? codes_activations(call) < 0
        : call->quantized ? given_activations(call, m, k) < 0
                          : make_activation_buffers(call, m, k, on_gpu) < 0) {
        return -1;
    }
    if (on_gpu) {
        return !call->quantized && quantize_on_gpu(call) < 0 ? -1
                                                             : multiply(call);
    }
    nonfinite = (uint8_t *)PyMem_Malloc((size_t)m);
    if (nonfinite == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    /* (fp8q.linear's QTensor scales are checked finite on import.) */
    if (call->quantized && !call->x_codes) {
        n_nonfinite =
            fp8q_flag_nonfinite_rows(&call->x_scale->view, nonfinite);
    }
    if ((call->quantized ||
         quantize_on_cpu(call, nonfinite, &n_nonfinite) == 0) &&
        multiply(call) == 0) {
        fp8q_error error;
        fp8q_status status = FP8Q_OK;
        fp8q_error_clear(&error);
        if (n_nonfinite > 0) {
            Py_BEGIN_ALLOW_THREADS
            status = fp8q_fill_rows_nan(&call->out_rows->view, nonfinite,
                                        &error);
            Py_END_ALLOW_THREADS
        }
        result = fp8q_py_raise_on_failure(status, &error);
    }
    PyMem_Free(nonfinite);
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
    call->codes =
        fp8q_layer_import(call, PyTuple_GET_ITEM(quantized, 0), "codes");
    call->x_scale =
        call->codes != NULL
            ? fp8q_layer_import(call, PyTuple_GET_ITEM(quantized, 1), "scale")
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
    if (found == 0 || (call->out_dtype != FP8Q_BFLOAT16 &&
                       call->out_dtype != FP8Q_FLOAT16 &&
                       call->out_dtype != FP8Q_FLOAT32 &&
                       call->out_dtype != FP8Q_FLOAT8_E4M3FN)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: out_dtype must be bfloat16, float16, float32 or "
                     "float8_e4m3fn, got %R",
                     call->name, object);
        return -1;
    }
    return 0;
}

/* fp8q.linear's x_scale (its QTensor x's float32 scales), on x's device;
 * on the CPU checked finite and > 0, as scaled_mm checks its scales. */
static int import_x_scale(layer_call *call, PyObject *object)
{
    call->x_scale = fp8q_layer_import(call, object, "x_scale");
    if (call->x_scale == NULL ||
        fp8q_layer_check_device(call, call->x_scale, "x_scale") < 0) {
        return -1;
    }
    if (call->x_scale->view.dtype != FP8Q_FLOAT32) {
        PyErr_Format(PyExc_TypeError, "%s: x's scales must be float32, got %s",
                     call->name, fp8q_dtype_name(call->x_scale->view.dtype));
        return -1;
    }
    return fp8q_layer_check_scales(call, call->x_scale, "x's scale");
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
