/*
 * ops_cuda.c - the CUDA half of cast_op.c, amax_op.c and quantize_op.c:
 * after they have parsed and checked the arguments and allocated the result
 * on x's device, these functions order the caller's stream after the
 * tensors' earlier uses, hand their views to csrc/cuda/ops.h (which gathers,
 * checks the layouts and launches) without the GIL, and raise its failures.
 */
#include "python/binding.h"

#include "cuda/ops.h"

/* Runs a launch (or any fp8q_status-returning step) without the GIL. */
#define RUN_WITHOUT_GIL(status, call) \
    do {                              \
        Py_BEGIN_ALLOW_THREADS        \
        (status) = (call);            \
        Py_END_ALLOW_THREADS          \
    } while (0)

/* ------------------------------------------------------------------------- */
/* cast                                                                      */

int fp8q_py_cuda_cast(fp8q_TensorObject *input, fp8q_TensorObject *scale,
                      fp8q_TensorObject *out, fp8q_TensorObject *amax_out,
                      int saturate, fp8q_cu_stream stream)
{
    const fp8q_py_device device = {FP8Q_DEVICE_CUDA, input->device_index};
    fp8q_TensorObject *device_scale = NULL;
    fp8q_error error;
    fp8q_status status;
    int result = -1;

    if (scale != NULL && fp8q_view_size(&input->view) > 0) {
        /* Scales given on the host were checked there; they move over. */
        device_scale =
            scale->device_type == FP8Q_DEVICE_CUDA &&
                    scale->device_index == input->device_index &&
                    fp8q_view_is_contiguous(&scale->view)
                ? (fp8q_TensorObject *)Py_NewRef(scale)
                : fp8q_tensor_copy_to(scale, &device, stream);
        if (device_scale == NULL ||
            fp8q_py_use_on_stream(device_scale, stream) < 0) {
            goto done;
        }
    }
    if (fp8q_py_use_on_stream(input, stream) < 0 ||
        fp8q_py_use_on_stream(out, stream) < 0 ||
        (amax_out != NULL && fp8q_py_use_on_stream(amax_out, stream) < 0)) {
        goto done;
    }
    fp8q_error_clear(&error);
    RUN_WITHOUT_GIL(
        status,
        fp8q_cuda_cast(input->cuda_device, &input->view,
                       device_scale != NULL ? &device_scale->view : NULL,
                       &out->view,
                       amax_out != NULL ? (uint32_t *)amax_out->view.data
                                        : NULL,
                       saturate, stream, &error));
    result = fp8q_py_raise_on_failure(status, &error);
done:
    Py_XDECREF(device_scale);
    return result;
}

fp8q_TensorObject *fp8q_py_cuda_convert(fp8q_TensorObject *source,
                                        fp8q_dtype dtype)
{
    const fp8q_py_device device = {FP8Q_DEVICE_CUDA, source->device_index};
    const fp8q_cu_stream stream = fp8q_py_last_stream(source);
    fp8q_TensorObject *result;

    if (dtype == source->view.dtype) {
        return fp8q_tensor_copy_to(source, &device, stream);
    }
    result = fp8q_tensor_new_empty_on(dtype, source->view.ndim,
                                      source->view.shape, &device, stream);
    if (result != NULL &&
        fp8q_py_cuda_cast(source, NULL, result, NULL, 1, stream) < 0) {
        Py_CLEAR(result);
    }
    return result;
}

/* ------------------------------------------------------------------------- */
/* amax                                                                      */

int fp8q_py_cuda_amax(fp8q_TensorObject *input, const int *reduce,
                      fp8q_TensorObject *destination, fp8q_cu_stream stream)
{
    fp8q_error error;
    fp8q_status status;

    if (fp8q_py_use_on_stream(input, stream) < 0 ||
        fp8q_py_use_on_stream(destination, stream) < 0) {
        return -1;
    }
    fp8q_error_clear(&error);
    RUN_WITHOUT_GIL(status, fp8q_cuda_amax(input->cuda_device, &input->view,
                                           reduce,
                                           (uint32_t *)destination->view.data,
                                           stream, &error));
    return fp8q_py_raise_on_failure(status, &error);
}

/* ------------------------------------------------------------------------- */
/* quantize / dequantize                                                     */

int fp8q_py_cuda_quantize(fp8q_TensorObject *x,
                          const fp8q_quantize_options *options,
                          fp8q_TensorObject *data, fp8q_TensorObject *scale,
                          fp8q_cu_stream stream)
{
    fp8q_error error;
    fp8q_status status;

    if (fp8q_py_use_on_stream(x, stream) < 0 ||
        fp8q_py_use_on_stream(data, stream) < 0 ||
        fp8q_py_use_on_stream(scale, stream) < 0) {
        return -1;
    }
    fp8q_error_clear(&error);
    RUN_WITHOUT_GIL(status,
                    fp8q_cuda_quantize(x->cuda_device, &x->view, options,
                                       &data->view, &scale->view, stream,
                                       &error));
    return fp8q_py_raise_on_failure(status, &error);
}

int fp8q_py_cuda_dequantize(fp8q_TensorObject *data, fp8q_TensorObject *scale,
                            const fp8q_granularity *granularity,
                            fp8q_TensorObject *result, fp8q_cu_stream stream)
{
    fp8q_error error;
    fp8q_status status;

    if (fp8q_py_use_on_stream(data, stream) < 0 ||
        fp8q_py_use_on_stream(scale, stream) < 0 ||
        fp8q_py_use_on_stream(result, stream) < 0) {
        return -1;
    }
    fp8q_error_clear(&error);
    RUN_WITHOUT_GIL(status, fp8q_cuda_dequantize(
                                data->cuda_device, &data->view, &scale->view,
                                granularity, &result->view, stream, &error));
    return fp8q_py_raise_on_failure(status, &error);
}
