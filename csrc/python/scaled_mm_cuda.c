/*
 * scaled_mm_cuda.c - the binding's half of fp8q.scaled_mm on the GPU
 * (scaled_mm.c checks the arguments; cuda/scaled_mm_ops.h chooses the path
 * and computes): the operands as views on the call's device (scales and a
 * bias held elsewhere copied there), the stream ordered after their earlier
 * uses, cuBLASLt loaded, the product without the GIL, its status as an
 * exception. Also the private switch and record of the GPU paths.
 */
#include <stdio.h>
#include <string.h>

#include "python/binding.h"

#include "cuda/scaled_mm_ops.h"
#include "cuda/scaled_mm_paths.h"

/* `tensor` itself when it is on `device` (the GPU gathers any strides),
 * else a copy there; NULL with an exception. */
static fp8q_TensorObject *on_device(fp8q_TensorObject *tensor,
                                    const fp8q_py_device *device,
                                    fp8q_cu_stream stream)
{
    if (tensor->device_type == device->type &&
        tensor->device_index == device->index) {
        return (fp8q_TensorObject *)Py_NewRef(tensor);
    }
    return fp8q_tensor_copy_to(tensor, device, stream);
}

int fp8q_py_cuda_scaled_mm(const fp8q_py_scaled_mm *call,
                           fp8q_cu_stream stream)
{
    const fp8q_py_device device = {FP8Q_DEVICE_CUDA, call->a->device_index};
    /* The scales and bias on the device: the caller's or copies. */
    fp8q_TensorObject *held[3] = {NULL, NULL, NULL};
    const fp8q_cublaslt *library = NULL;
    fp8q_cuda_scaled_mm_call product;
    fp8q_error error;
    fp8q_status status;
    int result = -1;
    int index;

    memset(&product, 0, sizeof product);
    product.a = &call->a->view;
    product.b = &call->b->view;
    product.out = &call->out->view;
    product.amax_out =
        call->amax_out != NULL ? call->amax_out->view.data : NULL;
    product.mode = call->mode;
    product.use_fast_accum = call->use_fast_accum;
    product.has_scale_result = call->has_scale_result;
    product.scale_result = call->scale_result;
    product.scale_result_on_device =
        call->scale_result_on_device != NULL
            ? (const float *)call->scale_result_on_device->view.data
            : NULL;
    if (!fp8q_cuda_scaled_mm_uses_cublaslt(&product)) {
        /* A refusal of out, or an empty product (amax_out zeroed). */
        if (call->amax_out != NULL &&
            fp8q_py_use_on_stream(call->amax_out, stream) < 0) {
            return -1;
        }
    }
    else {
        library = fp8q_py_load_cublaslt();
        if (library == NULL) {
            return -1;
        }
        held[0] = on_device(call->scale_a, &device, stream);
        held[1] = held[0] != NULL ? on_device(call->scale_b, &device, stream)
                                  : NULL;
        held[2] = held[1] != NULL && call->bias != NULL
                      ? on_device(call->bias, &device, stream)
                      : NULL;
        if (held[1] == NULL || (call->bias != NULL && held[2] == NULL)) {
            goto done;
        }
        product.scale_a = &held[0]->view;
        product.scale_b = &held[1]->view;
        product.bias = held[2] != NULL ? &held[2]->view : NULL;
        if (fp8q_py_use_on_stream(call->a, stream) < 0 ||
            fp8q_py_use_on_stream(call->b, stream) < 0 ||
            fp8q_py_use_on_stream(held[0], stream) < 0 ||
            fp8q_py_use_on_stream(held[1], stream) < 0 ||
            (held[2] != NULL &&
             fp8q_py_use_on_stream(held[2], stream) < 0) ||
            fp8q_py_use_on_stream(call->out, stream) < 0 ||
            (call->amax_out != NULL &&
             fp8q_py_use_on_stream(call->amax_out, stream) < 0) ||
            (call->scale_result_on_device != NULL &&
             fp8q_py_use_on_stream(call->scale_result_on_device, stream) <
                 0)) {
            goto done;
        }
    }
    fp8q_error_clear(&error);
    Py_BEGIN_ALLOW_THREADS
    status = fp8q_cuda_scaled_mm(library, call->a->cuda_device, &product,
                                 stream, &error);
    Py_END_ALLOW_THREADS
    result = fp8q_py_raise_on_failure(status, &error);
done:
    for (index = 0; index < 3; index++) {
        Py_XDECREF(held[index]);
    }
    return result;
}

/* ------------------------------------------------------------------------- */
/* fp8q._C._scaled_mm_padding, fp8q._C._scaled_mm_paths                      */

static PyObject *scaled_mm_padding(PyObject *module, PyObject *enabled)
{
    const int wanted = PyObject_IsTrue(enabled);

    (void)module;
    if (wanted < 0) {
        return NULL;
    }
    return PyBool_FromLong(fp8q_cuda_scaled_mm_set_padding(wanted));
}

/* {"DEVICE": {"MODE": "PATH", ...}} for every device and scaling mode with
 * a product so far. */
static PyObject *scaled_mm_paths(PyObject *module, PyObject *unused)
{
    static const fp8q_scaling modes_in_order[] = {
        FP8Q_SCALING_TENSORWISE, FP8Q_SCALING_ROWWISE,
        FP8Q_SCALING_BLOCKWISE};
    PyObject *result = PyDict_New();
    PyObject *modes = NULL;
    int device;
    size_t mode;

    (void)module;
    (void)unused;
    for (device = 0; result != NULL && device < FP8Q_CUBLASLT_MAX_DEVICES;
         device++) {
        char key[16];
        for (mode = 0; mode < sizeof modes_in_order / sizeof modes_in_order[0];
             mode++) {
            const int taken =
                fp8q_cuda_mm_last_path(device, modes_in_order[mode]);
            PyObject *name;
            if (taken < 0) {
                continue;
            }
            if (modes == NULL && (modes = PyDict_New()) == NULL) {
                goto fail;
            }
            name = PyUnicode_FromString(
                fp8q_cuda_mm_path_name((fp8q_cuda_mm_path)taken));
            if (name == NULL ||
                PyDict_SetItemString(modes,
                                     fp8q_scaling_name(modes_in_order[mode]),
                                     name) < 0) {
                Py_XDECREF(name);
                goto fail;
            }
            Py_DECREF(name);
        }
        if (modes == NULL) {
            continue;
        }
        (void)snprintf(key, sizeof key, "%d", device);
        if (PyDict_SetItemString(result, key, modes) < 0) {
            goto fail;
        }
        Py_CLEAR(modes);
    }
    return result;
fail:
    Py_XDECREF(modes);
    Py_XDECREF(result);
    return NULL;
}

PyMethodDef fp8q_py_scaled_mm_cuda_functions[] = {
    {"_scaled_mm_padding", scaled_mm_padding, METH_O,
     "_scaled_mm_padding(enabled)\n--\n\n"
     "Private, for `python -m fp8q bench gemm`: with enabled false, GPU "
     "products whose K or N is not a multiple of 16 take the exact "
     "bfloat16 path instead of zero-padded FP8 operands (the default, "
     "true, follows csrc/cuda/matmul_padding.h's rule). Process-wide; "
     "returns the previous setting."},
    {"_scaled_mm_paths", scaled_mm_paths, METH_NOARGS,
     "_scaled_mm_paths()\n--\n\n"
     "{device index as text: {scaling mode: path}}: the path (as FP8Q_LOG "
     "names it) the last scaled_mm of each scaling mode (tensorwise, "
     "rowwise, blockwise) took on each CUDA device, for the devices and "
     "modes with a product so far."},
    {NULL, NULL, 0, NULL},
};
