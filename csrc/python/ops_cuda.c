/*
 * ops_cuda.c - runs an operation's checked call (cuda/op_call.h) for the
 * binding files: orders the caller's stream after the tensors' earlier uses,
 * releases the GIL (interruptibly) while csrc/core or csrc/cuda works on the
 * views, and raises its failure; and the tensor-level calls that several
 * binding files share (cast, dequantize, a copy as another dtype).
 */
#include "python/binding.h"

#include "cuda/op_call.h"

int fp8q_py_use_all_on_stream(fp8q_TensorObject *const *tensors, int count,
                              fp8q_cu_stream stream)
{
    int i;

    for (i = 0; i < count; i++) {
        if (tensors[i] != NULL &&
            fp8q_py_use_on_stream(tensors[i], stream) < 0) {
            return -1;
        }
    }
    return 0;
}

int fp8q_py_op_run(struct fp8q_op_call *call,
                   fp8q_TensorObject *const *tensors, int count)
{
    fp8q_error error;
    fp8q_status status;

    if (fp8q_py_use_all_on_stream(tensors, count, call->stream) < 0) {
        return -1;
    }
    call->device = tensors[0]->cuda_device;
    fp8q_error_clear(&error);
    FP8Q_PY_BEGIN_INTERRUPTIBLE
    status = fp8q_op_run(call, &error);
    FP8Q_PY_END_INTERRUPTIBLE(status)
    return fp8q_py_raise_on_failure(status, &error);
}

int fp8q_py_cast_run(fp8q_TensorObject *input, fp8q_TensorObject *scale,
                     const fp8q_view *scale_view, fp8q_TensorObject *out,
                     fp8q_TensorObject *amax_out, int saturate,
                     fp8q_cu_stream stream)
{
    const fp8q_py_device device = {FP8Q_DEVICE_CUDA, input->device_index};
    fp8q_TensorObject *tensors[4] = {input, out, amax_out, NULL};
    fp8q_op_call call;
    int result;

    fp8q_op_call_init(&call, FP8Q_OP_CAST, &input->view, &out->view, stream);
    call.scale = input->device_type == FP8Q_DEVICE_CPU ? scale_view : NULL;
    if (scale != NULL && input->device_type == FP8Q_DEVICE_CUDA &&
        fp8q_view_size(&input->view) > 0) {
        /* Scales given on the host were checked there; they move over. */
        tensors[3] = scale->device_type == FP8Q_DEVICE_CUDA &&
                             scale->device_index == input->device_index &&
                             fp8q_view_is_contiguous(&scale->view)
                         ? (fp8q_TensorObject *)Py_NewRef(scale)
                         : fp8q_tensor_copy_to(scale, &device, stream);
        if (tensors[3] == NULL) {
            return -1;
        }
        call.scale = &tensors[3]->view;
    }
    call.amax = amax_out != NULL ? amax_out->view.data : NULL;
    call.saturate = saturate;
    result = fp8q_py_op_run(&call, tensors, 4);
    Py_XDECREF(tensors[3]);
    return result;
}

fp8q_TensorObject *fp8q_tensor_copy_as(fp8q_TensorObject *source,
                                       fp8q_dtype dtype)
{
    const fp8q_py_device device = {FP8Q_DEVICE_CUDA, source->device_index};
    const fp8q_cu_stream stream = fp8q_py_last_stream(source);
    fp8q_TensorObject *result;

    if (source->device_type == FP8Q_DEVICE_CPU) {
        return fp8q_tensor_copy_on_host(source, dtype);
    }
    /* On the source's last stream; between equal dtypes the bits. */
    result = fp8q_tensor_new_empty_on(dtype, source->view.ndim,
                                      source->view.shape, &device, stream);
    if (result != NULL &&
        fp8q_py_cast_run(source, NULL, NULL, result, NULL, 1, stream) < 0) {
        Py_CLEAR(result);
    }
    return result;
}

int fp8q_py_cuda_dequantize(fp8q_TensorObject *data, fp8q_TensorObject *scale,
                            const fp8q_granularity *granularity,
                            fp8q_TensorObject *result, fp8q_cu_stream stream)
{
    fp8q_TensorObject *const tensors[3] = {data, scale, result};
    fp8q_op_call call;

    fp8q_op_call_init(&call, FP8Q_OP_DEQUANTIZE, &data->view, &result->view,
                      stream);
    call.scale = &scale->view;
    call.granularity = granularity;
    return fp8q_py_op_run(&call, tensors, 3);
}
