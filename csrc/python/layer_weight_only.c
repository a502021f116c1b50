/*
 * layer_weight_only.c - the W8A16 side of an fp8q.torch.Linear in C:
 *
 *   _C.layer_weight(x, weight, weight_scale, granularity, stream)
 *                                          W in x's dtype
 *   _C.layer_gemv(x, weight, weight_scale, bias, granularity, stream)
 *                                          few tokens on a GPU: y from the
 *                                          FP8 codes in place
 *   _C.weight_only_gemv(...)               the same for any token count
 *                                          (fp8q.linear(weight_only=True))
 *
 * and the weight-only product a W8A8 call takes for few tokens
 * (fp8q_layer_gemv_forward, linear_layer.c). The call's tensors come from
 * layer_call.c.
 */
#include <string.h>

#include "python/layer_call.h"

#include "core/layer_checks.h"
#include "core/scaled_mm_run.h"
#include "cuda/weight_only_ops.h"

/* core/layer_checks.h's fp8q_layer_weight_granularity of the call. */
static int weight_granularity(layer_call *call, fp8q_granularity *granularity)
{
    fp8q_error error;

    return fp8q_py_raise_on_failure(
        fp8q_layer_weight_granularity(call->name, call->granularity,
                                      &call->weight->view,
                                      &call->weight_scale->view, granularity,
                                      &error),
        &error);
}

/* weight dequantized into a new (N, K) tensor of x's dtype on x's device
 * (x being `like`; from x's producer when it has an exchange table):
 * call->result. fp8q_py_cuda_dequantize runs it on the call's device
 * (core's fp8q_dequantize on the CPU; on a GPU strided operands are
 * gathered first, cuda/op_call.h). */
static int dequantize_weight(layer_call *call)
{
    fp8q_granularity granularity;
    fp8q_TensorObject *destination;
    int result;

    if (weight_granularity(call, &granularity) < 0) {
        return -1;
    }
    destination = fp8q_layer_new_tensor(call, call->x->view.dtype, 2,
                                        call->weight->view.shape,
                                        &call->result);
    if (destination == NULL) {
        return -1;
    }
    result = fp8q_py_cuda_dequantize(call->weight, call->weight_scale,
                                     &granularity, destination, call->stream);
    Py_DECREF(destination);
    return result;
}

/* A C-contiguous view of a weight, scale or bias for the GPU kernels (a copy
 * when needed). */
static int contiguous_on_gpu(layer_call *call, fp8q_TensorObject **tensor)
{
    if (call->device.type != FP8Q_DEVICE_CUDA ||
        fp8q_view_is_contiguous(&(*tensor)->view)) {
        return 0;
    }
    Py_SETREF(*tensor, fp8q_py_cuda_contiguous(*tensor, call->stream));
    return *tensor == NULL ? -1 : 0;
}

int fp8q_layer_gemv_forward(layer_call *call, int every_row)
{
    const fp8q_view *x = &call->x->view;
    fp8q_cuda_weight_only_plan plan;
    fp8q_granularity granularity;
    fp8q_TensorObject *scratch = NULL;
    fp8q_TensorObject *used[6]; /* the call's memory, used on its stream */
    fp8q_error error;
    fp8q_status status;
    int64_t m, k;
    int result = -1;

    if (call->device.type != FP8Q_DEVICE_CUDA ||
        !fp8q_cuda_weight_only_may_take(x, &call->weight->view, every_row)) {
        return 0; /* the general path computes it, or says what is wrong */
    }
    k = x->shape[x->ndim - 1];
    m = fp8q_view_size(x) / k;
    if (weight_granularity(call, &granularity) < 0 ||
        contiguous_on_gpu(call, &call->weight) < 0 ||
        contiguous_on_gpu(call, &call->weight_scale) < 0 ||
        (call->bias != NULL && contiguous_on_gpu(call, &call->bias) < 0) ||
        fp8q_layer_make_rows(call, m, k) < 0) {
        return -1;
    }
    fp8q_cuda_weight_only_plan_make(
        call->x->cuda_device, &call->rows->view, &call->weight->view,
        &call->weight_scale->view, granularity.kind, every_row, &plan);
    if (!plan.takes) {
        return 0;
    }
    if (fp8q_layer_make_output(call, m, call->weight->view.shape[0]) < 0) {
        return -1;
    }
    if (plan.scratch_bytes > 0) {
        scratch = fp8q_layer_scratch(call, (int64_t)plan.scratch_bytes);
        if (scratch == NULL) {
            return -1;
        }
    }
    used[0] = call->rows;
    used[1] = call->weight;
    used[2] = call->weight_scale;
    used[3] = call->bias;
    used[4] = scratch;
    used[5] = call->out_rows;
    if (fp8q_py_use_all_on_stream(used, 6, call->stream) == 0) {
        fp8q_error_clear(&error);
        Py_BEGIN_ALLOW_THREADS
        status = fp8q_cuda_weight_only_gemv(
            call->x->cuda_device, &call->rows->view, &call->weight->view,
            &call->weight_scale->view,
            call->bias != NULL ? &call->bias->view : NULL, &plan,
            &call->out_rows->view, scratch != NULL ? scratch->view.data : NULL,
            plan.scratch_bytes, call->stream, &error);
        Py_END_ALLOW_THREADS
        result = fp8q_py_raise_on_failure(status, &error);
    }
    Py_XDECREF(scratch);
    return result;
}

/* fp8q.linear(weight_only=True) on the CPU: core/scaled_mm_run.h's
 * weight-only product, NumPy's BLAS its sgemm (as x32 @ w32.T in Python
 * computed it). */
static int weight_only_on_cpu(layer_call *call)
{
    const fp8q_view *x = &call->x->view;
    const int64_t k = x->shape[x->ndim - 1];
    const int64_t m = k > 0 ? fp8q_view_size(x) / k : 0;
    fp8q_granularity granularity;
    fp8q_error error;
    fp8q_status status;

    if (weight_granularity(call, &granularity) < 0 ||
        fp8q_layer_make_rows(call, m, k) < 0 ||
        fp8q_layer_make_output(call, m, call->weight->view.shape[0]) < 0) {
        return -1;
    }
    fp8q_error_clear(&error);
    FP8Q_PY_BEGIN_INTERRUPTIBLE
    status = fp8q_weight_only_run(
        &call->rows->view, &call->weight->view, &call->weight_scale->view,
        &granularity, call->bias != NULL ? &call->bias->view : NULL,
        &call->out_rows->view, fp8q_py_numpy_sgemm, NULL, &error);
    FP8Q_PY_END_INTERRUPTIBLE(status)
    return fp8q_py_raise_on_failure(status, &error);
}

int fp8q_layer_weight_only_forward(layer_call *call)
{
    const fp8q_view *x = &call->x->view;
    fp8q_error error;

    if (call->device.type != FP8Q_DEVICE_CUDA) {
        return weight_only_on_cpu(call);
    }
    if (fp8q_layer_gemv_forward(call, 1) < 0) {
        return -1;
    }
    return call->result != NULL
               ? 0
               : fp8q_py_raise_on_failure(
                     fp8q_layer_refuse_weight_only(
                         call->name, x->shape[x->ndim - 1], &error),
                     &error);
}

static PyObject *layer_weight(PyObject *module, PyObject *const *args,
                              Py_ssize_t n_args)
{
    layer_call call;

    (void)module;
    fp8q_layer_start(&call, LAYER);
    return fp8q_layer_finish(
        &call,
        fp8q_layer_positional("layer_weight", n_args, 5) < 0 ||
            fp8q_layer_parse_granularity(args[3], &call.granularity) < 0 ||
            fp8q_layer_import_x(&call, args[0], args[4]) < 0 ||
            fp8q_layer_import_weight(&call, args[1], args[2]) < 0 ||
            dequantize_weight(&call) < 0);
}

/* layer_gemv and weight_only_gemv: the same arguments, `every_row` as
 * gemv_forward's. */
static PyObject *gemv_entry(const char *name, PyObject *const *args,
                            Py_ssize_t n_args, int every_row)
{
    layer_call call;
    int failed;

    fp8q_layer_start(&call, LAYER);
    failed =
        fp8q_layer_positional(name, n_args, 6) < 0 ||
        fp8q_layer_parse_granularity(args[4], &call.granularity) < 0 ||
        fp8q_layer_import_x(&call, args[0], args[5]) < 0 ||
        fp8q_layer_import_weight(&call, args[1], args[2]) < 0 ||
        fp8q_layer_import_activation_arguments(&call, args[3], Py_None) < 0 ||
        fp8q_layer_gemv_forward(&call, every_row) < 0;
    if (!failed && call.result == NULL) {
        call.result = Py_NewRef(Py_None);
    }
    return fp8q_layer_finish(&call, failed);
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

PyMethodDef fp8q_py_layer_weight_only_functions[] = {
    {"layer_gemv", (PyCFunction)(void (*)(void))layer_gemv, METH_FASTCALL,
     layer_gemv_doc},
    {"weight_only_gemv", (PyCFunction)(void (*)(void))weight_only_gemv,
     METH_FASTCALL, weight_only_gemv_doc},
    {"layer_weight", (PyCFunction)(void (*)(void))layer_weight,
     METH_FASTCALL, layer_weight_doc},
    {NULL, NULL, 0, NULL},
};
