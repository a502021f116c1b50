/*
 * scaled_mm_cuda.c - the private switch and record of fp8q.scaled_mm's GPU
 * paths (cuda/scaled_mm_ops.h, cuda/scaled_mm_paths.h), for the
 * benchmarks: zero-padded FP8 operands on or off, and the path each
 * scaling mode's last product took on each device.
 */
#include <stdio.h>

#include "python/binding.h"

#include "cuda/scaled_mm_ops.h"
#include "cuda/scaled_mm_paths.h"

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
