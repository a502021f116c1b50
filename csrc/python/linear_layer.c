/*
 * linear_layer.c - the forward pass of an fp8q.torch.Linear in one C call:
 *
 *   _C.linear_layer(x, weight, weight_scale, bias, input_scale,
 *                   granularity, stream[, path[, quantized]])
 *                                          W8A8: y = x @ W.T + bias
 *                                          (quantized: x's codes and row
 *                                          scales, already computed)
 *                                          (few tokens on a GPU: the
 *                                          weight-only product,
 *                                          cuda/layer_path.h)
 *   _C.layer_weight(x, weight, weight_scale, granularity, stream)
 *                                          W8A16: W in x's dtype
 *   _C.layer_gemv(x, weight, weight_scale, bias, granularity, stream)
 *                                          W8A16, few tokens on a GPU:
 *                                          y from the FP8 codes in place
 *
 * The tensors are the layer's own torch tensors, viewed through DLPack's C
 * exchange API (dlpack_exchange.c): no Python call, no capsule, torch's
 * current stream read in C, results and GPU temporaries from torch's
 * caching allocator (so CUDA-graph pools and torch.cuda.memory_allocated
 * see them). fp8q.Tensor arguments (or a torch without that API, through
 * fp8q.torch.from_torch) take the same path with fp8q's own allocations;
 * the numbers are the same either way: exactly fp8q.quantize of each token
 * followed by fp8q.scaled_mm, as fp8q.linear computes them (docs/torch.md).
 */
#include <math.h>
#include <string.h>

#include "python/binding.h"

#include "core/activation.h"
#include "core/quantize.h"
#include "core/scaled_mm.h"
#include "cuda/layer_path.h"
#include "gemv.cuh"

#define LAYER "fp8q.torch.Linear"

/* ------------------------------------------------------------------------- */
/* One call's tensors                                                        */

typedef struct layer_call {
    const fp8q_dl_exchange_api *api; /* x's producer's table, or NULL */
    fp8q_cu_stream stream;
    fp8q_py_device device;
    fp8q_granularity_kind granularity; /* of the weight scales */
    fp8q_TensorObject *x;              /* (..., K) float              */
    fp8q_TensorObject *rows;           /* x as C-contiguous (M, K)    */
    fp8q_TensorObject *weight;         /* (N, K) FP8                  */
    fp8q_TensorObject *weight_scale;
    fp8q_TensorObject *bias;        /* NULL or (N,)                   */
    fp8q_TensorObject *input_scale; /* NULL or one float32            */
    fp8q_TensorObject *codes;       /* x quantized, (M, K) e4m3fn     */
    fp8q_TensorObject *x_scale;
    int quantized;               /* codes, x_scale given by the caller */
    fp8q_TensorObject *out_rows; /* the result as (M, N)               */
    PyObject *result;            /* what the call returns             */
} layer_call;

static void release(layer_call *call)
{
    Py_XDECREF(call->x);
    Py_XDECREF(call->rows);
    Py_XDECREF(call->weight);
    Py_XDECREF(call->weight_scale);
    Py_XDECREF(call->bias);
    Py_XDECREF(call->input_scale);
    Py_XDECREF(call->codes);
    Py_XDECREF(call->x_scale);
    Py_XDECREF(call->out_rows);
    Py_XDECREF(call->result);
}

/* A tensor argument: through x's exchange table when it has the same one
 * (a view for this call, last used on the producer's current stream, the
 * call's), else as fp8q.asarray takes it (no copy). */
static fp8q_TensorObject *import(layer_call *call, PyObject *object,
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

/* A new uninitialised C-contiguous tensor on the call's device: from x's
 * producer's allocator (torch's) when x has an exchange table and
 * `from_producer`, else fp8q's own. *producer_out (may be NULL) receives a
 * new reference to the object to hand back: the producer's tensor, or the
 * fp8q.Tensor itself. */
static fp8q_TensorObject *new_tensor(layer_call *call, fp8q_dtype dtype,
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

/* A 2-D view (rows, cols) of a C-contiguous tensor. */
static fp8q_TensorObject *matrix_view(fp8q_TensorObject *tensor, int64_t rows,
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

/* ------------------------------------------------------------------------- */
/* Arguments                                                                 */

static int parse_granularity(PyObject *object, fp8q_granularity_kind *kind)
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

/* x: the call's device comes from it, and its stream: torch's current
 * stream for a torch tensor (every torch argument is then imported as last
 * used there; another stream is refused), else `stream` when given, or the
 * stream of x's last use. */
static int import_x(layer_call *call, PyObject *x_object,
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
            fp8q_py_error_add_prefix(LAYER ": x must be float32, float16 or "
                                           "bfloat16; ");
        }
        return -1;
    }
    dtype = call->x->view.dtype;
    if (dtype != FP8Q_FLOAT32 && dtype != FP8Q_FLOAT16 &&
        dtype != FP8Q_BFLOAT16) {
        PyErr_Format(PyExc_TypeError,
                     LAYER ": x must be float32, float16 or bfloat16, got %s",
                     fp8q_dtype_name(dtype));
        return -1;
    }
    if (call->x->view.ndim == 0) {
        PyErr_SetString(PyExc_ValueError,
                        LAYER ": x must have at least one axis (..., "
                        "in_features), got a 0-d tensor");
        return -1;
    }
    call->device.type = call->x->device_type;
    call->device.index = call->x->device_index;
    if (stream_object != Py_None &&
        (call->api != NULL || call->device.type != FP8Q_DEVICE_CUDA)) {
        PyErr_SetString(PyExc_ValueError,
                        call->api != NULL
                            ? LAYER ": stream must be None for torch tensors: "
                                    "the call runs on torch's current stream "
                                    "(choose it with torch.cuda.stream(...))"
                            : LAYER ": stream applies to CUDA tensors; this "
                                    "call runs on the CPU (pass None)");
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

static int check_device(layer_call *call, const fp8q_TensorObject *tensor,
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
                 LAYER ": x is on %s but the layer's %s is on %s; move one "
                 "of them (model.to(\"%s\"))",
                 x_device, name, device,
                 call->device.type == FP8Q_DEVICE_CUDA ? "cuda" : "cpu");
    return -1;
}

/* The weight (N, K) FP8 and its scales, on x's device. CPU scales are
 * checked (finite, > 0); a GPU's are not read back. */
static int import_weight(layer_call *call, PyObject *weight_object,
                         PyObject *scale_object)
{
    fp8q_error error;
    fp8q_status status;

    call->weight = import(call, weight_object, "weight");
    call->weight_scale =
        call->weight != NULL ? import(call, scale_object, "weight_scale")
                             : NULL;
    if (call->weight_scale == NULL ||
        check_device(call, call->weight, "weight") < 0 ||
        check_device(call, call->weight_scale, "weight_scale") < 0) {
        return -1;
    }
    if ((call->weight->view.dtype != FP8Q_FLOAT8_E4M3FN &&
         call->weight->view.dtype != FP8Q_FLOAT8_E5M2) ||
        call->weight->view.ndim != 2) {
        PyErr_Format(PyExc_TypeError,
                     LAYER ": weight must be a 2-D float8_e4m3fn or "
                     "float8_e5m2 tensor, got %d-D %s",
                     call->weight->view.ndim,
                     fp8q_dtype_name(call->weight->view.dtype));
        return -1;
    }
    if (call->device.type != FP8Q_DEVICE_CPU) {
        return 0;
    }
    fp8q_error_clear(&error);
    status = fp8q_check_scale_values(&call->weight_scale->view,
                                     "weight_scale", &error);
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        fp8q_py_error_add_prefix(LAYER ": ");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* W8A8                                                                      */

/* x as a C-contiguous (M, K) tensor: a view of x, or a copy on x's device
 * when x's layout is not C-contiguous (once per call). */
static int make_rows(layer_call *call, int64_t m, int64_t k)
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
    call->rows = matrix_view(contiguous, m, k);
    Py_DECREF(contiguous);
    return call->rows == NULL ? -1 : 0;
}

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
            call->x_scale = new_tensor(call, FP8Q_FLOAT32, 2, scale_shape,
                                       on_gpu, NULL);
        }
        call->codes = new_tensor(call, FP8Q_FLOAT8_E4M3FN, 2, codes_shape,
                                 on_gpu, NULL);
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
 * stream. A token holding NaN or infinity gets a NaN or infinite scale and
 * NaN codes (fp8q.quantize's GPU contract), so its row of the product is
 * NaN by itself; with the static scale, infinities quantize to the NaN code
 * (infinity_to_nan) rather than saturating, so such a token's row is NaN
 * too, with no masking pass. */
static int quantize_on_gpu(layer_call *call)
{
    fp8q_quantize_options options;

    memset(&options, 0, sizeof options);
    options.saturate = 1;
    options.compute_scale = call->input_scale == NULL;
    options.granularity.kind = FP8Q_GRANULARITY_ROW;
    if (call->input_scale != NULL) {
        options.granularity.kind = FP8Q_GRANULARITY_TENSOR;
        options.infinity_to_nan = 1;
    }
    else if (call->granularity == FP8Q_GRANULARITY_BLOCK) {
        options.granularity.kind = FP8Q_GRANULARITY_BLOCK;
        options.granularity.block_rows = 1;
        options.granularity.block_cols = FP8Q_SCALED_MM_BLOCK;
    }
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
    const int64_t m = call->rows->view.shape[0];
    const int64_t k = call->rows->view.shape[1];
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

static int import_activation_arguments(layer_call *call, PyObject *bias,
                                       PyObject *input_scale)
{
    fp8q_error error;
    fp8q_status status;

    if (bias != Py_None) {
        call->bias = import(call, bias, "bias");
        if (call->bias == NULL || check_device(call, call->bias, "bias") < 0) {
            return -1;
        }
        if (call->bias->view.dtype != FP8Q_FLOAT32 &&
            call->bias->view.dtype != FP8Q_FLOAT16 &&
            call->bias->view.dtype != FP8Q_BFLOAT16) {
            PyErr_Format(PyExc_TypeError,
                         LAYER ": bias must be float32, float16 or bfloat16, "
                         "got %s",
                         fp8q_dtype_name(call->bias->view.dtype));
            return -1;
        }
        if (call->bias->view.ndim != 1 ||
            call->bias->view.shape[0] != call->weight->view.shape[0]) {
            PyErr_Format(PyExc_ValueError,
                         LAYER ": bias must hold out_features = %lld values",
                         (long long)call->weight->view.shape[0]);
            return -1;
        }
    }
    if (input_scale == Py_None) {
        return 0;
    }
    call->input_scale = import(call, input_scale, "input_scale");
    if (call->input_scale == NULL ||
        check_device(call, call->input_scale, "input_scale") < 0) {
        return -1;
    }
    if (call->input_scale->view.dtype != FP8Q_FLOAT32 ||
        fp8q_view_size(&call->input_scale->view) != 1) {
        PyErr_SetString(PyExc_ValueError,
                        LAYER ": input_scale must be one float32 value");
        return -1;
    }
    if (call->granularity == FP8Q_GRANULARITY_BLOCK) {
        PyErr_SetString(PyExc_ValueError,
                        LAYER ": a static input_scale needs \"row\" or "
                        "\"tensor\" weight scales, not \"block\"");
        return -1;
    }
    if (call->device.type != FP8Q_DEVICE_CPU) {
        return 0;
    }
    fp8q_error_clear(&error);
    status = fp8q_check_scale_values(&call->input_scale->view, "input_scale",
                                     &error);
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        fp8q_py_error_add_prefix(LAYER ": ");
        return -1;
    }
    return 0;
}

/* quantized=(codes, scale) of linear_layer: x's float8_e4m3fn codes (M*K
 * values) and its float32 row scales (M values), both C-contiguous on x's
 * device, for "row" / "tensor" weights without input_scale. Imported into
 * call->codes and call->x_scale ((M, K) and (M, 1) views); 0, or -1 with
 * ValueError / TypeError. */
static int given_activations(layer_call *call, int64_t m, int64_t k)
{
    fp8q_TensorObject *codes = call->codes, *scale = call->x_scale;

    call->codes = call->x_scale = NULL;
    if (call->input_scale != NULL ||
        call->granularity == FP8Q_GRANULARITY_BLOCK) {
        PyErr_SetString(PyExc_ValueError,
                        LAYER ": quantized activations need dynamic per-token "
                        "scales (no input_scale, \"row\" or \"tensor\" "
                        "weight scales)");
    }
    else if (codes->view.dtype != FP8Q_FLOAT8_E4M3FN ||
             scale->view.dtype != FP8Q_FLOAT32 ||
             fp8q_view_size(&codes->view) != m * k ||
             fp8q_view_size(&scale->view) != m ||
             !fp8q_view_is_contiguous(&codes->view) ||
             !fp8q_view_is_contiguous(&scale->view)) {
        PyErr_Format(PyExc_ValueError,
                     LAYER ": quantized must be C-contiguous float8_e4m3fn "
                     "codes of x's %lld x %lld values and %lld float32 row "
                     "scales",
                     (long long)m, (long long)k, (long long)m);
    }
    else {
        call->codes = matrix_view(codes, m, k);
        call->x_scale = call->codes != NULL ? matrix_view(scale, m, 1) : NULL;
    }
    Py_DECREF(codes);
    Py_DECREF(scale);
    return call->x_scale == NULL ? -1 : 0;
}

/* CPU, quantized activations: the rows whose scale is not finite (a token
 * that held NaN or infinity) flagged in `nonfinite`. */
static int nonfinite_scales(layer_call *call, uint8_t *nonfinite,
                            int64_t *n_nonfinite)
{
    const float *scale = (const float *)call->x_scale->view.data;
    const int64_t m = call->x_scale->view.shape[0];
    int64_t row;

    *n_nonfinite = 0;
    for (row = 0; row < m; row++) {
        nonfinite[row] = (uint8_t)!isfinite(scale[row]);
        *n_nonfinite += nonfinite[row];
    }
    return 0;
}

/* Allocates the result (x's leading shape, N) and runs quantize + product
 * into it. */
static int forward(layer_call *call)
{
    const fp8q_view *x = &call->x->view;
    const int64_t k = x->shape[x->ndim - 1];
    const int64_t n = call->weight->view.shape[0];
    int64_t shape[FP8Q_MAX_DIMS];
    int64_t m;
    int64_t n_nonfinite = 0;
    uint8_t *nonfinite = NULL;
    fp8q_TensorObject *out;
    int axis, on_gpu, result = -1;

    for (axis = 0; axis + 1 < x->ndim; axis++) {
        shape[axis] = x->shape[axis];
    }
    shape[x->ndim - 1] = n;
    if (k != call->weight->view.shape[1]) {
        char text[256];
        fp8q_format_shape(text, sizeof text, x->ndim, x->shape);
        PyErr_Format(PyExc_ValueError,
                     LAYER ": x has shape %s, but the layer has %lld input "
                     "features (x's last axis)",
                     text, (long long)call->weight->view.shape[1]);
        return -1;
    }
    if (k == 0) {
        PyErr_SetString(PyExc_ValueError,
                        LAYER ": in_features is 0 (the layer computes that "
                        "case in Python)");
        return -1;
    }
    m = fp8q_view_size(x) / k; /* the tokens (no overflow: x exists) */
    out = new_tensor(call, x->dtype, x->ndim, shape, 1, &call->result);
    if (out == NULL) {
        return -1;
    }
    call->out_rows = matrix_view(out, m, n);
    Py_DECREF(out);
    if (call->out_rows == NULL || make_rows(call, m, k) < 0) {
        return -1;
    }
    if (m == 0 || n == 0) {
        return 0;
    }
    on_gpu = call->device.type == FP8Q_DEVICE_CUDA;
    if (call->quantized ? given_activations(call, m, k) < 0
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
    if ((call->quantized ? nonfinite_scales(call, nonfinite, &n_nonfinite)
                         : quantize_on_cpu(call, nonfinite, &n_nonfinite)) ==
            0 &&
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

/* ------------------------------------------------------------------------- */
/* W8A16: the weight in x's dtype                                            */

/* weight dequantized into a new (N, K) tensor of x's dtype on x's device
 * (x being `like`; from x's producer when it has an exchange table):
 * call->result. */
/* The weight scales' granularity (128x128 blocks for "block"), checked
 * against the weight's and the scale's shapes. */
static int weight_granularity(layer_call *call, fp8q_granularity *granularity)
{
    fp8q_error error;
    fp8q_status status;

    memset(granularity, 0, sizeof *granularity);
    granularity->kind = call->granularity;
    if (call->granularity == FP8Q_GRANULARITY_BLOCK) {
        granularity->block_rows = FP8Q_SCALED_MM_BLOCK;
        granularity->block_cols = FP8Q_SCALED_MM_BLOCK;
    }
    fp8q_error_clear(&error);
    status = fp8q_check_scale_shape(granularity, &call->weight->view,
                                    &call->weight_scale->view, &error);
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        fp8q_py_error_add_prefix(LAYER ": weight_scale: ");
        return -1;
    }
    return 0;
}

static int dequantize_weight(layer_call *call)
{
    const fp8q_view *weight = &call->weight->view;
    fp8q_granularity granularity;
    fp8q_TensorObject *destination;
    fp8q_error error;
    fp8q_status status;

    if (weight_granularity(call, &granularity) < 0) {
        return -1;
    }
    destination = new_tensor(call, call->x->view.dtype, 2, weight->shape, 1,
                             &call->result);
    if (destination == NULL) {
        return -1;
    }
    if (call->device.type == FP8Q_DEVICE_CUDA) {
        const int result = fp8q_py_cuda_dequantize(
            call->weight, call->weight_scale, &granularity, destination,
            call->stream);
        Py_DECREF(destination);
        return result;
    }
    fp8q_error_clear(&error);
    FP8Q_PY_BEGIN_INTERRUPTIBLE
    status = fp8q_dequantize(weight, &call->weight_scale->view, &granularity,
                             &destination->view, &error);
    FP8Q_PY_END_INTERRUPTIBLE(status)
    Py_DECREF(destination);
    return fp8q_py_raise_on_failure(status, &error);
}

/* A C-contiguous view of a weight, scale or bias for the GPU kernels (a copy when needed). */
static int contiguous_on_gpu(layer_call *call, fp8q_TensorObject **tensor)
{
    if (call->device.type != FP8Q_DEVICE_CUDA ||
        fp8q_view_is_contiguous(&(*tensor)->view)) {
        return 0;
    }
    Py_SETREF(*tensor, fp8q_py_cuda_contiguous(*tensor, call->stream));
    return *tensor == NULL ? -1 : 0;
}

/* ------------------------------------------------------------------------- */
/* W8A16 on a GPU, few tokens: the weight-only product                       */

static int aligned16(const void *pointer)
{
    return ((uintptr_t)pointer & 15u) == 0u;
}

/* Rows of x from first_row on (of `remaining`) that one launch of
 * kernels/gemv.cuh takes: up to 64 on the tensor cores (16 with block
 * scales) where fp8q_py_cuda_gemv_fp8_takes allows, else up to 8. */
static int64_t launch_rows(layer_call *call, int64_t first_row,
                           int64_t remaining, int scale_kind)
{
    static const int64_t tensor_core_rows[] = {
        FP8Q_GEMV_TC_MAX_ROWS, FP8Q_GEMV_TC_MAX_BLOCK_SCALED_ROWS};
    size_t i;

    for (i = 0; i < sizeof tensor_core_rows / sizeof tensor_core_rows[0];
         i++) {
        const int64_t rows = remaining < tensor_core_rows[i]
                                 ? remaining
                                 : tensor_core_rows[i];
        if (fp8q_py_cuda_gemv_fp8_takes(call->rows, first_row, rows,
                                        scale_kind)) {
            return rows;
        }
    }
    return remaining < FP8Q_GEMV_MAX_ROWS ? remaining : FP8Q_GEMV_MAX_ROWS;
}

/* One launch of kernels/gemv.cuh for rows first_row.. of call->rows into
 * call->out_rows; where the weight has too few rows to fill the GPU
 * (fp8q_py_cuda_gemv_fp8_splits > 1), with a float32 scratch for the
 * splits' sums from the call's allocator (torch's for torch tensors, so
 * stream-ordered and CUDA-graph capturable), released after the launch
 * (the allocator orders its reuse after the launch on the stream). */
static int gemv_launch(layer_call *call, int64_t first_row, int64_t rows,
                       int scale_kind)
{
    const int splits = fp8q_py_cuda_gemv_fp8_splits(
        call->rows, first_row, rows, call->weight, scale_kind);
    fp8q_TensorObject *partial = NULL;
    int64_t values;
    int result;

    if (splits > 1) {
        values = (int64_t)splits * rows * call->weight->view.shape[0];
        partial = new_tensor(call, FP8Q_FLOAT32, 1, &values, 1, NULL);
        if (partial == NULL) {
            return -1;
        }
    }
    result = fp8q_py_cuda_gemv_fp8(call->rows, first_row, rows, call->weight,
                                   call->weight_scale, scale_kind, call->bias,
                                   call->out_rows, partial, splits,
                                   call->stream);
    Py_XDECREF(partial);
    return result;
}

/* y = x . (weight * weight_scale)^T + bias (call->bias, imported by the
 * caller) by kernels/gemv.cuh when the call fits its contract (a GPU, K a
 * multiple of 16, 16-byte aligned operands) and, unless `every_row`, the
 * tokens fit one launch (up to 8, or up to 64 on the tensor cores:
 * fp8q_py_cuda_gemv_fp8_takes); with `every_row` any number of tokens runs
 * in launches of up to 64 rows (launch_rows). call->result is y; else
 * call->result stays NULL and nothing ran. */
static int gemv_forward(layer_call *call, int every_row)
{
    const fp8q_view *x = &call->x->view;
    const int64_t k = x->shape[x->ndim - 1];
    const int64_t n = call->weight->view.shape[0];
    int64_t shape[FP8Q_MAX_DIMS];
    fp8q_granularity granularity;
    fp8q_TensorObject *out;
    int scale_kind;
    int64_t m, first_row, rows;
    int axis;

    if (call->device.type != FP8Q_DEVICE_CUDA || k == 0 ||
        k != call->weight->view.shape[1] || k % 16 != 0) {
        return 0; /* the general path computes it, or says what is wrong */
    }
    m = fp8q_view_size(x) / k;
    if (!every_row && (m < 1 || m > FP8Q_GEMV_TC_MAX_ROWS)) {
        return 0;
    }
    if (weight_granularity(call, &granularity) < 0 ||
        contiguous_on_gpu(call, &call->weight) < 0 ||
        contiguous_on_gpu(call, &call->weight_scale) < 0 ||
        (call->bias != NULL && contiguous_on_gpu(call, &call->bias) < 0) ||
        make_rows(call, m, k) < 0) {
        return -1;
    }
    scale_kind = granularity.kind == FP8Q_GRANULARITY_TENSOR ? FP8Q_GEMV_SCALE_TENSOR
                 : granularity.kind == FP8Q_GRANULARITY_ROW  ? FP8Q_GEMV_SCALE_ROW
                                                             : FP8Q_GEMV_SCALE_BLOCK;
    if (call->weight_scale->view.dtype != FP8Q_FLOAT32 ||
        !aligned16(call->rows->view.data) ||
        !aligned16(call->weight->view.data) ||
        (!every_row &&
         !fp8q_py_cuda_gemv_fp8_takes(call->rows, 0, m, scale_kind))) {
        return 0;
    }
    for (axis = 0; axis + 1 < x->ndim; axis++) {
        shape[axis] = x->shape[axis];
    }
    shape[x->ndim - 1] = n;
    out = new_tensor(call, x->dtype, x->ndim, shape, 1, &call->result);
    if (out == NULL) {
        return -1;
    }
    call->out_rows = matrix_view(out, m, n);
    Py_DECREF(out);
    if (call->out_rows == NULL) {
        return -1;
    }
    for (first_row = 0; first_row < m; first_row += rows) {
        rows = launch_rows(call, first_row, m - first_row, scale_kind);
        if (gemv_launch(call, first_row, rows, scale_kind) < 0) {
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* The module's functions                                                    */

/* 0 when a vectorcall got exactly `count` positional arguments, else -1
 * with a TypeError. */
static int positional(const char *function, Py_ssize_t n_args,
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

/* What an entry returns: the call's result, or NULL when `failed` (an
 * exception is set); the call's references are released either way. */
static PyObject *finish(layer_call *call, int failed)
{
    PyObject *result = failed ? NULL : call->result;

    if (!failed) {
        call->result = NULL;
    }
    release(call);
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
                     LAYER ": path must be None, \"auto\", \"fp8\" or "
                     "\"weight-only\", got %R",
                     path_object);
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
        PyErr_SetString(PyExc_TypeError,
                        LAYER ": quantized must be None or (codes, scale)");
        return -1;
    }
    call->codes = import(call, PyTuple_GET_ITEM(quantized, 0), "codes");
    call->x_scale = call->codes != NULL
                        ? import(call, PyTuple_GET_ITEM(quantized, 1),
                                 "scale")
                        : NULL;
    call->quantized = 1;
    return call->x_scale == NULL ||
                   check_device(call, call->codes, "codes") < 0 ||
                   check_device(call, call->x_scale, "scale") < 0
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
        if (gemv_forward(call, 0) < 0) {
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
    memset(&call, 0, sizeof call);
    if (n_args < 7 || n_args > 9) {
        PyErr_Format(PyExc_TypeError,
                     "linear_layer() takes 7 to 9 positional arguments (%zd "
                     "given)",
                     n_args);
        return NULL;
    }
    return finish(&call,
                  parse_path(n_args >= 8 ? args[7] : Py_None, &path) < 0 ||
                      parse_granularity(args[5], &call.granularity) < 0 ||
                      import_x(&call, args[0], args[6]) < 0 ||
                      import_weight(&call, args[1], args[2]) < 0 ||
                      import_activation_arguments(&call, args[3], args[4]) <
                          0 ||
                      (n_args == 9 && import_quantized(&call, args[8]) < 0) ||
                      fp8_layer_forward(&call, path) < 0);
}

static PyObject *layer_weight(PyObject *module, PyObject *const *args,
                              Py_ssize_t n_args)
{
    layer_call call;

    (void)module;
    memset(&call, 0, sizeof call);
    return finish(&call,
                  positional("layer_weight", n_args, 5) < 0 ||
                      parse_granularity(args[3], &call.granularity) < 0 ||
                      import_x(&call, args[0], args[4]) < 0 ||
                      import_weight(&call, args[1], args[2]) < 0 ||
                      contiguous_on_gpu(&call, &call.weight) < 0 ||
                      contiguous_on_gpu(&call, &call.weight_scale) < 0 ||
                      dequantize_weight(&call) < 0);
}

/* layer_gemv and weight_only_gemv: the same arguments, `every_row` as
 * gemv_forward's. */
static PyObject *gemv_entry(const char *name, PyObject *const *args,
                            Py_ssize_t n_args, int every_row)
{
    layer_call call;
    int failed;

    memset(&call, 0, sizeof call);
    failed = positional(name, n_args, 6) < 0 ||
             parse_granularity(args[4], &call.granularity) < 0 ||
             import_x(&call, args[0], args[5]) < 0 ||
             import_weight(&call, args[1], args[2]) < 0 ||
             import_activation_arguments(&call, args[3], Py_None) < 0 ||
             gemv_forward(&call, every_row) < 0;
    if (!failed && call.result == NULL) {
        call.result = Py_NewRef(Py_None);
    }
    return finish(&call, failed);
}

static PyObject *layer_gemv(PyObject *module, PyObject *const *args,
                            Py_ssize_t n_args)
{
    (void)module;
    return gemv_entry("layer_gemv", args, n_args, 0);
}

static PyObject *weight_only_gemv(PyObject *module, PyObject *const *args,
                                  Py_ssize_t n_args)
{
    (void)module;
    return gemv_entry("weight_only_gemv", args, n_args, 1);
}

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

PyDoc_STRVAR(
    layer_weight_doc,
    "layer_weight(like, weight, weight_scale, granularity, stream)\n"
    "--\n\n"
    "The weight of fp8q.torch.Linear in floating point: weight (N, K) FP8 "
    "times weight_scale at `granularity` (\"row\", \"tensor\", "
    "\"block\": 128x128), rounded once into the dtype of `like` (float32, "
    "float16 or bfloat16; any shape: the W8A16 forward's x, the backward's "
    "grad_y), as a new (N, K) tensor on like's device (torch's allocator "
    "and current stream for torch tensors, as linear_layer). Internal to "
    "fp8q.torch.");

PyDoc_STRVAR(
    layer_gemv_doc,
    "layer_gemv(x, weight, weight_scale, bias, granularity, stream)\n"
    "--\n\n"
    "The W8A16 forward of fp8q.torch.Linear for few tokens on a GPU: "
    "y = x @ (weight * weight_scale).T + bias computed from the FP8 codes "
    "in place (kernels/gemv.cuh: float32 sums, one rounding into x's "
    "dtype), with no float copy of the weight. Returns y ((..., N) in x's "
    "dtype, on x's device, from torch's allocator for torch tensors), or "
    "None when the call is not one the kernels take (x on the CPU, more "
    "than 8 tokens, except up to 64 float16 / bfloat16 tokens on the "
    "tensor cores (16 with block scales; bfloat16 from compute capability "
    "8.0), in_features not a multiple of 16, unaligned operands): "
    "the caller then dequantizes the weight (layer_weight) and runs a "
    "float GEMM. Arguments as linear_layer's. Internal to fp8q.torch.");

PyDoc_STRVAR(
    weight_only_gemv_doc,
    "weight_only_gemv(x, weight, weight_scale, bias, granularity, stream)\n"
    "--\n\n"
    "layer_gemv for any number of tokens: fp8q.linear(..., "
    "weight_only=True) on a GPU. The rows of x run in launches of up to 64 "
    "(the tensor cores where layer_gemv's conditions allow, else 8 at a "
    "time on the CUDA cores; each launch reads the whole weight). Returns "
    "y, or None for x on the CPU, in_features not a multiple of 16 or "
    "unaligned operands. Arguments as layer_gemv's, fp8q.Tensor or torch "
    "tensors. Internal to fp8q.linear.");

static PyMethodDef linear_layer_functions[] = {
    {"layer_gemv", (PyCFunction)(void (*)(void))layer_gemv, METH_FASTCALL,
     layer_gemv_doc},
    {"weight_only_gemv", (PyCFunction)(void (*)(void))weight_only_gemv,
     METH_FASTCALL, weight_only_gemv_doc},
    {"linear_layer", (PyCFunction)(void (*)(void))linear_layer,
     METH_FASTCALL, linear_layer_doc},
    {"layer_weight", (PyCFunction)(void (*)(void))layer_weight,
     METH_FASTCALL, layer_weight_doc},
    {NULL, NULL, 0, NULL},
};

int fp8q_py_linear_layer_init(PyObject *module)
{
    return PyModule_AddFunctions(module, linear_layer_functions);
}
