/*
 * layer_call.h - one call of an fp8q.torch.Linear forward (or of
 * fp8q.linear, the same entry) in C (linear_layer.c: W8A8;
 * layer_weight_only.c: W8A16): the call's tensors,
 * imported through DLPack's C exchange API when x comes from torch (views,
 * torch's allocator and current stream) or as fp8q.asarray takes them, and
 * the argument checks both entry files share. Each function returns 0 (or a
 * new reference) on success, -1 (or NULL) with an exception naming
 * fp8q.torch.Linear and the argument.
 */
#ifndef FP8Q_PYTHON_LAYER_CALL_H
#define FP8Q_PYTHON_LAYER_CALL_H

#include "python/binding.h"

#define LAYER "fp8q.torch.Linear"

typedef struct layer_call {
    const char *name; /* the entry, as errors name it: LAYER or "linear" */
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
    int x_codes;       /* x holds those FP8 codes (fp8q.linear's QTensor x) */
    int has_out_dtype; /* the result's dtype is out_dtype, not x's       */
    fp8q_dtype out_dtype;
    fp8q_TensorObject *out_rows; /* the result as (M, N)               */
    PyObject *result;            /* what the call returns             */
} layer_call;

/* *call emptied, its errors naming `name` (LAYER or "linear"). */
void fp8q_layer_start(layer_call *call, const char *name);

/* A new uninitialised C-contiguous tensor on the call's device and
 * stream, from torch's allocator when x has an exchange table, else
 * fp8q's; *producer_out receives a new reference to the object to hand
 * back: the producer's tensor, or the fp8q.Tensor itself. */
fp8q_TensorObject *fp8q_layer_new_tensor(layer_call *call, fp8q_dtype dtype,
                                         int ndim, const int64_t *shape,
                                         PyObject **producer_out);

/* `bytes` of uninitialised scratch memory (uint8, 1-D) on the call's device
 * for the call's temporaries: from x's producer's allocator when x has an
 * exchange table (torch's: stream-ordered, captured by CUDA graphs; no
 * torch tensor object made), else fp8q's own. */
fp8q_TensorObject *fp8q_layer_scratch(layer_call *call, int64_t bytes);

/* A 2-D view (rows, cols) of a C-contiguous tensor. */
fp8q_TensorObject *fp8q_layer_matrix_view(fp8q_TensorObject *tensor,
                                          int64_t rows, int64_t cols);

/* granularity= ("row", "tensor", "block") into *kind. */
int fp8q_layer_parse_granularity(PyObject *object,
                                 fp8q_granularity_kind *kind);

/* x (..., K) float32 / float16 / bfloat16 (FP8 codes when call->x_codes),
 * which gives the call its device and stream: torch's current stream for a
 * torch tensor (other torch arguments are then imported as last used
 * there; another stream is refused), else `stream_object` when not None,
 * or the stream of x's last use. */
int fp8q_layer_import_x(layer_call *call, PyObject *x_object,
                        PyObject *stream_object);

/* 0 when `tensor` is on x's device, else -1 with ValueError naming it. */
int fp8q_layer_check_device(layer_call *call, const fp8q_TensorObject *tensor,
                            const char *name);

/* The FP8 weight (N, K) and its scales at the call's granularity, on x's
 * device; CPU scales are checked (fp8q_py_check_host_scales). */
int fp8q_layer_import_weight(layer_call *call, PyObject *weight_object,
                             PyObject *scale_object);

/* bias (None or N values) and input_scale (None or one float32). */
int fp8q_layer_import_activation_arguments(layer_call *call, PyObject *bias,
                                           PyObject *input_scale);

/* call->rows: x as a C-contiguous (M, K) tensor (a view, or a copy on x's
 * device when x is not C-contiguous; once per call). */
int fp8q_layer_make_rows(layer_call *call, int64_t m, int64_t k);

/* The call's result: a new tensor of x's shape with n as its last axis,
 * in x's dtype or call->out_dtype (torch's allocator for torch x), as
 * call->result, and
 * call->out_rows its (m, n) view. */
int fp8q_layer_make_output(layer_call *call, int64_t m, int64_t n);

/* 0 when a vectorcall got exactly `count` positional arguments, else -1
 * with a TypeError. */
int fp8q_layer_positional(const char *function, Py_ssize_t n_args,
                          Py_ssize_t count);

/* What an entry returns: the call's result, or NULL when `failed` (an
 * exception is set); the call's references are released either way. */
PyObject *fp8q_layer_finish(layer_call *call, int failed);

/* layer_weight_only.c: y = x . (weight * weight_scale)^T + bias
 * (call->bias, imported by the caller) by the weight-only kernels when the
 * call fits their contract (cuda/weight_only_ops.h: a GPU, K a multiple of
 * 16, 16-byte aligned operands) and, with `every_row` 0, all of x fits one
 * launch (linear_layer's few-token path); with `every_row` any number of
 * tokens runs in launches of up to 64 rows. The split-K scratch the plan
 * asks for comes from the call's allocator (torch's for torch tensors, so
 * stream-ordered and CUDA-graph capturable), released after the launches
 * (the allocator orders its reuse after them on the stream). call->result
 * is y; else it stays NULL and nothing ran. */
int fp8q_layer_gemv_forward(layer_call *call, int every_row);

/* layer_weight_only.c: fp8q.linear(weight_only=True): on a GPU the gemv
 * kernels for every row (ValueError naming the call when they do not take
 * it), on the CPU x and the weight decoded to float32 and NumPy's float32
 * product, plus the bias in float32, rounded once into the result. */
int fp8q_layer_weight_only_forward(layer_call *call);

#endif
