/*
 * scaled_mm.c - fp8q.scaled_mm: out = (a * scale_a) @ (b * scale_b) + bias
 * for FP8 a (M, K) and b (K, N): the argument checks (their pure shape and
 * dtype logic in core/scaled_mm_checks.h), then the product on the
 * operands' device through cuda/scaled_mm_ops.h's fp8q_scaled_mm_on_device
 * (core/scaled_mm_run.h on the CPU, NumPy's BLAS handed in as its sgemm
 * where core has no kernel for b; cuBLASLt on a GPU). docs/scaled_mm.md.
 */
#include <string.h>

#include "python/binding.h"

#include "core/op_checks.h"
#include "core/quantize.h"
#include "core/scaled_mm_checks.h"
#include "cuda/scaled_mm_ops.h"

/* A checked call: its tensors, a and b on one device (the "GPU" below,
 * which may be the CPU), released by release_call. */
typedef struct scaled_mm_call {
    fp8q_TensorObject *a;       /* (M, K) FP8                             */
    fp8q_TensorObject *b;       /* (K, N) FP8, on a's GPU                 */
    fp8q_TensorObject *scale_a; /* float32, on a's GPU or the host        */
    fp8q_TensorObject *scale_b;
    fp8q_TensorObject *bias;     /* NULL or N values, a's GPU or the host */
    fp8q_TensorObject *amax_out; /* NULL or one float32 on a's GPU        */
    fp8q_TensorObject *out;      /* (M, N) of out_dtype on a's GPU        */
    /* NULL, or scale_result's one float32 on a's GPU: used there, never
     * read back (so not checked, as scales on the GPU are not) */
    fp8q_TensorObject *scale_result_on_device;
    /* The product's mode, use_fast_accum and scale_result as parsed; run
     * fills in the views. */
    fp8q_cuda_scaled_mm_call product;
} scaled_mm_call;

static void release_call(scaled_mm_call *call)
{
    fp8q_TensorObject **const held[] = {
        &call->a,    &call->b,        &call->scale_a, &call->scale_b,
        &call->bias, &call->amax_out, &call->out,
        &call->scale_result_on_device};
    size_t index;

    for (index = 0; index < sizeof held / sizeof held[0]; index++) {
        Py_CLEAR(*held[index]);
    }
}

/* ------------------------------------------------------------------------- */
/* Argument checks                                                           */

/* Puts "scaled_mm: " before the message of the exception raised by a helper
 * shared with other functions, which names only the argument ("stream:
 * ...", "scale_a: ..."); returns -1. */
static int name_scaled_mm(void)
{
    fp8q_py_error_add_prefix("scaled_mm: ");
    return -1;
}

/* fp8q_tensor_from_object, its refusals naming scaled_mm. */
static fp8q_TensorObject *argument(PyObject *object, const char *name,
                                   int dtype, int copy)
{
    fp8q_TensorObject *tensor =
        fp8q_tensor_from_object(object, name, dtype, copy);

    if (tensor == NULL) {
        (void)name_scaled_mm();
    }
    return tensor;
}

/* An FP8 matrix operand (fp8q_scaled_mm_check_matrix). */
static fp8q_TensorObject *matrix_operand(PyObject *object, const char *name)
{
    fp8q_TensorObject *tensor =
        argument(object, name, -1, FP8Q_COPY_IF_NEEDED);
    fp8q_error error;

    if (tensor != NULL &&
        fp8q_py_raise_on_failure(
            fp8q_scaled_mm_check_matrix(&tensor->view, name, &error),
            &error) < 0) {
        Py_CLEAR(tensor);
    }
    return tensor;
}

/* A float32 tensor of scale values (fp8q_py_check_host_scales). */
static fp8q_TensorObject *scale_operand(PyObject *object, const char *name)
{
    fp8q_TensorObject *tensor =
        argument(object, name, FP8Q_FLOAT32, FP8Q_COPY_IF_NEEDED);

    if (tensor != NULL &&
        fp8q_py_check_host_scales(tensor, "scaled_mm", name) < 0) {
        Py_CLEAR(tensor);
    }
    return tensor;
}

/* fp8q_scaled_mm_check_place of `tensor` against a's `device`. */
static int same_device(const fp8q_TensorObject *tensor,
                       const fp8q_py_device *device, const char *name,
                       int host_allowed)
{
    fp8q_error error;

    return fp8q_py_raise_on_failure(
        fp8q_scaled_mm_check_place(name, fp8q_py_place(tensor), *device,
                                   host_allowed, &error),
        &error);
}

/* The result's dtype when out_dtype is not given: out's, when it is an
 * array fp8q can view (else bfloat16, and fp8q_py_writable_output says what
 * out= must be). */
static int dtype_of_out(PyObject *out_object, fp8q_dtype *out_dtype)
{
    fp8q_TensorObject *out;
    PyObject *given;
    const int viewable = fp8q_py_output_kind(out_object, &given);

    if (viewable <= 0) {
        Py_XDECREF(given);
        return viewable;
    }
    out = argument(out_object, "out", -1, FP8Q_COPY_NEVER);
    if (out == NULL) {
        return -1;
    }
    *out_dtype = out->view.dtype;
    Py_DECREF(out);
    return 0;
}

/* Parses out_dtype (given, or out's dtype, or bfloat16) and checks it
 * (fp8q_scaled_mm_check_out_dtype). */
static int parse_out_dtype(PyObject *out_dtype_object, PyObject *out_object,
                           fp8q_dtype *out_dtype)
{
    const int given = out_dtype_object != NULL && out_dtype_object != Py_None;
    int found = 1;
    fp8q_error error;

    *out_dtype = FP8Q_BFLOAT16;
    if (given) {
        found = fp8q_py_dtype_from_object(out_dtype_object, out_dtype);
    }
    else if (out_object != Py_None && dtype_of_out(out_object, out_dtype) < 0) {
        return -1;
    }
    if (found == 0) {
        PyErr_Format(PyExc_TypeError,
                     "scaled_mm: out_dtype must be " FP8Q_SCALED_MM_OUT_DTYPES
                     ", got %R (%s)",
                     out_dtype_object, Py_TYPE(out_dtype_object)->tp_name);
    }
    return found <= 0 ? -1
                      : fp8q_py_raise_on_failure(
                            fp8q_scaled_mm_check_out_dtype(given, *out_dtype,
                                                           &error),
                            &error);
}

/* The one value of scale_result (float32, finite, > 0), 1.0 when absent.
 * On the operands' GPU it stays there (*on_device, not read back, so not
 * checked); elsewhere it is read here. */
static int parse_scale_result(PyObject *object, fp8q_dtype out_dtype,
                              const fp8q_py_device *device,
                              float *scale_result,
                              fp8q_TensorObject **on_device)
{
    fp8q_TensorObject *tensor;
    fp8q_error error;

    *scale_result = 1.0f;
    *on_device = NULL;
    if (object == Py_None) {
        return 0;
    }
    if (fp8q_py_raise_on_failure(
            fp8q_scaled_mm_check_scale_result(NULL, out_dtype, &error),
            &error) < 0) {
        return -1;
    }
    tensor = argument(object, "scale_result", FP8Q_FLOAT32,
                      FP8Q_COPY_IF_NEEDED);
    if (tensor != NULL &&
        fp8q_py_raise_on_failure(fp8q_scaled_mm_check_scale_result(
                                     &tensor->view, out_dtype, &error),
                                 &error) < 0) {
        Py_DECREF(tensor);
        return -1;
    }
    if (tensor != NULL && tensor->device_type == device->type &&
        tensor->device_index == device->index &&
        device->type != FP8Q_DEVICE_CPU) {
        *on_device = tensor;
        return 0;
    }
    if (tensor != NULL && tensor->device_type != FP8Q_DEVICE_CPU) {
        /* On another device than the operands: read here (and checked). */
        static const fp8q_py_device cpu = {FP8Q_DEVICE_CPU, 0};
        Py_SETREF(tensor, fp8q_tensor_copy_to(tensor, &cpu,
                                              fp8q_py_last_stream(tensor)));
        if (tensor == NULL) {
            return name_scaled_mm();
        }
    }
    if (tensor == NULL ||
        fp8q_py_check_host_scales(tensor, "scaled_mm", "scale_result") < 0) {
        Py_XDECREF(tensor);
        return -1;
    }
    memcpy(scale_result, tensor->view.data, sizeof *scale_result);
    Py_DECREF(tensor);
    return 0;
}

/* amax_out=: one writable float32 element (any shape of size 1) on the
 * operands' device, viewed in place. */
static fp8q_TensorObject *amax_output(PyObject *object)
{
    fp8q_TensorObject *tensor = NULL;
    PyObject *given;
    const int viewable = fp8q_py_output_kind(object, &given);
    fp8q_error error;

    if (viewable > 0) {
        tensor = argument(object, "amax_out", -1, FP8Q_COPY_NEVER);
        if (tensor != NULL &&
            fp8q_py_raise_on_failure(
                fp8q_scaled_mm_check_amax_out(&tensor->view, tensor->readonly,
                                              &error),
                &error) < 0) {
            Py_CLEAR(tensor);
        }
    }
    else if (given != NULL) {
        PyErr_Format(PyExc_ValueError, FP8Q_SCALED_MM_AMAX_OUT_RULE "%U",
                     given);
        Py_DECREF(given);
    }
    return tensor;
}

/* 0 when the call's amax_out shares no memory with its operands, scales,
 * bias, scale_result or out; else -1 with ValueError naming the first. */
static int amax_apart(const scaled_mm_call *call)
{
    static const char *const names[7] = {"a", "b", "scale_a", "scale_b",
                                         "bias", "scale_result", "out="};
    const fp8q_view *others[7];
    fp8q_error error;

    others[0] = &call->a->view;
    others[1] = &call->b->view;
    others[2] = &call->scale_a->view;
    others[3] = &call->scale_b->view;
    others[4] = call->bias != NULL ? &call->bias->view : NULL;
    others[5] = call->scale_result_on_device != NULL
                    ? &call->scale_result_on_device->view
                    : NULL;
    others[6] = &call->out->view;
    return fp8q_py_raise_on_failure(
        fp8q_check_amax_out_apart("scaled_mm", &call->amax_out->view, others,
                                  names, 7, &error),
        &error);
}

/* ------------------------------------------------------------------------- */
/* The computation                                                           */

/* A float32 view as a NumPy array of its memory. */
static PyObject *float32_array(const fp8q_view *view)
{
    npy_intp dims[2], strides[2];
    int axis;

    for (axis = 0; axis < 2; axis++) {
        dims[axis] = (npy_intp)view->shape[axis];
        strides[axis] = (npy_intp)(view->strides[axis] * (int64_t)sizeof(float));
    }
    return PyArray_New(&PyArray_Type, 2, dims, NPY_FLOAT32, strides,
                       view->data, 0, NPY_ARRAY_ALIGNED | NPY_ARRAY_WRITEABLE,
                       NULL);
}

fp8q_status fp8q_py_numpy_sgemm(void *context, const fp8q_view *a,
                                const fp8q_view *b, const fp8q_view *product,
                                fp8q_error *error)
{
    const PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *a_array = float32_array(a);
    PyObject *b_array = float32_array(b);
    PyObject *product_array = float32_array(product);
    PyObject *result = NULL;

    (void)context;
    (void)error;
    if (a_array != NULL && b_array != NULL && product_array != NULL) {
        result = PyArray_MatrixProduct2(a_array, b_array,
                                        (PyArrayObject *)product_array);
    }
    Py_XDECREF(a_array);
    Py_XDECREF(b_array);
    Py_XDECREF(product_array);
    Py_XDECREF(result);
    PyGILState_Release(gil);
    return result != NULL ? FP8Q_OK : FP8Q_ERROR_INTERRUPTED;
}

/* The product on the operands' device (cuda/scaled_mm_ops.h's
 * fp8q_scaled_mm_on_device) without the GIL: on the CPU with NumPy's BLAS
 * as its sgemm, computing straight into out when `out_is_new`; on a GPU on
 * `stream`, cuBLASLt loaded, scales and a bias held on the host copied
 * there by cuda/ and every tensor's memory used on `stream` first (only
 * amax_out's when the product is empty or out refused). 0, or -1 with an
 * exception. */
static int run(const scaled_mm_call *call, int out_is_new,
               fp8q_cu_stream stream)
{
    const int on_gpu = call->a->device_type == FP8Q_DEVICE_CUDA;
    fp8q_TensorObject *used[8];
    const fp8q_cublaslt *library = NULL;
    fp8q_cuda_scaled_mm_call product = call->product;
    fp8q_error error;
    fp8q_status status;
    int computes;

    product.a = &call->a->view;
    product.b = &call->b->view;
    product.scale_a = &call->scale_a->view;
    product.scale_b = &call->scale_b->view;
    product.bias = call->bias != NULL ? &call->bias->view : NULL;
    product.out = &call->out->view;
    product.amax_out =
        call->amax_out != NULL ? call->amax_out->view.data : NULL;
    product.scale_result_on_device =
        call->scale_result_on_device != NULL
            ? (const float *)call->scale_result_on_device->view.data
            : NULL;
    product.scale_a_on_host = call->scale_a->device_type == FP8Q_DEVICE_CPU;
    product.scale_b_on_host = call->scale_b->device_type == FP8Q_DEVICE_CPU;
    product.bias_on_host =
        call->bias != NULL && call->bias->device_type == FP8Q_DEVICE_CPU;
    computes = !on_gpu || fp8q_cuda_scaled_mm_uses_cublaslt(&product);
    used[0] = computes ? call->a : NULL;
    used[1] = computes ? call->b : NULL;
    used[2] = computes ? call->scale_a : NULL;
    used[3] = computes ? call->scale_b : NULL;
    used[4] = computes ? call->bias : NULL;
    used[5] = computes ? call->out : NULL;
    used[6] = call->amax_out;
    used[7] = computes ? call->scale_result_on_device : NULL;
    if ((on_gpu && computes &&
         (library = fp8q_py_load_cublaslt()) == NULL) ||
        fp8q_py_use_all_on_stream(used, 8, stream) < 0) {
        return -1;
    }
    fp8q_error_clear(&error);
    FP8Q_PY_BEGIN_INTERRUPTIBLE
    status = fp8q_scaled_mm_on_device(
        library, on_gpu ? call->a->cuda_device : NULL, &product, stream,
        fp8q_py_numpy_sgemm, NULL, out_is_new, &error);
    FP8Q_PY_END_INTERRUPTIBLE(status)
    return fp8q_py_raise_on_failure(status, &error);
}

/* ------------------------------------------------------------------------- */
/* fp8q.scaled_mm                                                            */

static PyObject *scaled_mm(PyObject *module, PyObject *const *args,
                           Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const keywords[] = {"a",
                                           "b",
                                           "scale_a",
                                           "scale_b",
                                           "bias",
                                           "out_dtype",
                                           "scale_result",
                                           "amax_out",
                                           "use_fast_accum",
                                           "out",
                                           "stream",
                                           NULL};
    PyObject *a_object;
    PyObject *b_object;
    PyObject *scale_a_object;
    PyObject *scale_b_object;
    PyObject *bias_object = Py_None;
    PyObject *out_dtype_object = NULL;
    PyObject *scale_result_object = Py_None;
    PyObject *amax_out_object = Py_None;
    PyObject *out_object = Py_None;
    PyObject *stream_object = Py_None;
    fp8q_cu_stream stream;
    fp8q_py_device device;
    scaled_mm_call call;
    fp8q_dtype out_dtype;
    fp8q_error error;
    fp8q_status status;
    int64_t shape[2];
    PyObject *result = NULL;

    (void)module;
    memset(&call, 0, sizeof call);
    if (fp8q_py_parse_arguments(
            args, nargs, kwnames, "OOOO|$OOOOpOO:scaled_mm", keywords,
            &a_object, &b_object, &scale_a_object, &scale_b_object,
            &bias_object, &out_dtype_object, &scale_result_object,
            &amax_out_object, &call.product.use_fast_accum, &out_object,
            &stream_object) < 0) {
        return NULL;
    }
    if (fp8q_py_parse_stream(stream_object, "stream", &stream) < 0) {
        (void)name_scaled_mm();
        return NULL;
    }
    call.a = matrix_operand(a_object, "a");
    call.b = call.a != NULL ? matrix_operand(b_object, "b") : NULL;
    if (call.b == NULL) {
        goto fail;
    }
    device.type = call.a->device_type;
    device.index = call.a->device_index;
    if (same_device(call.b, &device, "b", 0) < 0) {
        goto fail;
    }
    if (fp8q_py_check_stream_on_cpu("scaled_mm", stream_object,
                                    device.type == FP8Q_DEVICE_CPU) < 0 ||
        fp8q_py_raise_on_failure(
            fp8q_scaled_mm_check_pair(&call.a->view, &call.b->view, &error),
            &error) < 0) {
        goto fail;
    }
    shape[0] = call.a->view.shape[0];
    shape[1] = call.b->view.shape[1];
    call.scale_a = scale_operand(scale_a_object, "scale_a");
    call.scale_b =
        call.scale_a != NULL ? scale_operand(scale_b_object, "scale_b") : NULL;
    if (call.scale_b == NULL ||
        same_device(call.scale_a, &device, "scale_a", 1) < 0 ||
        same_device(call.scale_b, &device, "scale_b", 1) < 0) {
        goto fail;
    }
    fp8q_error_clear(&error);
    status = fp8q_scaled_mm_mode(shape[0], call.a->view.shape[1], shape[1],
                                 &call.scale_a->view, &call.scale_b->view,
                                 &call.product.mode, &error);
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        (void)name_scaled_mm();
        goto fail;
    }
    if (bias_object != Py_None) {
        call.bias = argument(bias_object, "bias", -1, FP8Q_COPY_IF_NEEDED);
        if (call.bias == NULL ||
            fp8q_py_raise_on_failure(
                fp8q_scaled_mm_check_bias(&call.bias->view, shape[1], &error),
                &error) < 0 ||
            same_device(call.bias, &device, "bias", 1) < 0) {
            goto fail;
        }
    }
    if (parse_out_dtype(out_dtype_object, out_object, &out_dtype) < 0 ||
        parse_scale_result(scale_result_object, out_dtype, &device,
                           &call.product.scale_result,
                           &call.scale_result_on_device) < 0) {
        goto fail;
    }
    if (amax_out_object != Py_None) {
        call.amax_out = amax_output(amax_out_object);
        if (call.amax_out == NULL ||
            same_device(call.amax_out, &device, "amax_out", 0) < 0) {
            goto fail;
        }
    }
    if (out_object != Py_None) {
        call.out = fp8q_py_writable_output(out_object, "scaled_mm", "out",
                                           out_dtype, "the result's shape",
                                           2, shape, &device);
    }
    else {
        call.out = fp8q_tensor_new_empty_on(out_dtype, 2, shape, &device,
                                            stream);
    }
    if (call.out == NULL || (call.amax_out != NULL && amax_apart(&call) < 0)) {
        goto fail;
    }
    call.product.has_scale_result = scale_result_object != Py_None;
    if (run(&call, out_object == Py_None, stream) < 0) {
        goto fail;
    }
    result = fp8q_py_op_result(call.out, out_object);
    call.out = NULL;
fail:
    release_call(&call);
    return result;
}

PyDoc_STRVAR(
    scaled_mm_doc,
    "scaled_mm(a, b, scale_a, scale_b, *, bias=None, out_dtype=\"bfloat16\", "
    "scale_result=None, amax_out=None, use_fast_accum=False, out=None, "
    "stream=None)\n"
    "--\n\n"
    "out = (a * scale_a) @ (b * scale_b) + bias, for FP8 matrices a (M, K) "
    "and b (K, N), float8_e4m3fn or float8_e5m2 (not both e5m2).\n\n"
    "The scales' shapes choose the scaling: tensorwise (one value each: a "
    "float, shape () or (1, 1)); rowwise (scale_a (M, 1), scale_b (1, N)); "
    "blockwise (scale_a (M, ceil(K/128)) for 1x128 blocks of a, scale_b "
    "(ceil(K/128), ceil(N/128)) for 128x128 blocks of b). Scales are float32 "
    "dequantization scales, finite and > 0.\n\n"
    "bias: None or N values (float32, float16 or bfloat16; other real NumPy "
    "arrays, float64 or integers, are converted to float32 first as "
    "fp8q.asarray converts them). out_dtype: "
    "bfloat16, float16, float32 or float8_e4m3fn (then out = "
    "cast(result / scale_result), saturating; scale_result defaults to 1). "
    "amax_out: a writable float32 element that receives max |result| before "
    "scale_result. out: a writable (M, N) tensor of out_dtype, returned.\n\n"
    "On the CPU: exact decodes (times the blockwise scales, rounded once to "
    "float32), a float32 product (fp8q's own AVX2 kernels for b = w.T, else "
    "a BLAS sgemm through NumPy; float32 accumulation; use_fast_accum has "
    "no effect), then the tensorwise or rowwise scales "
    "and the bias applied in double and rounded to float32, then rounded "
    "once more into a 16-bit or FP8 out_dtype. Any layout of a and "
    "b is accepted. stream must be None for CPU tensors. See "
    "docs/scaled_mm.md.");

PyMethodDef fp8q_py_scaled_mm_functions[] = {
    {"scaled_mm", (PyCFunction)(void (*)(void))scaled_mm,
     METH_FASTCALL | METH_KEYWORDS, scaled_mm_doc},
    {NULL, NULL, 0, NULL},
};
