/*
 * scaled_mm_paths.c - which path a product on the GPU took (scaled_mm_cuda.c
 * chooses it; docs/scaled_mm.md, "GPUs"): the paths' names, FP8Q_LOG's line
 * per product, and the last path of each scaling mode on each device, which
 * fp8q._C._scaled_mm_paths() returns (fp8q.info() runs one small product of
 * each mode and reports what they took).
 */
#include <stdio.h>
#include <string.h>

#include "python/binding.h"

#include "cuda/cublaslt.h"
#include "platform.h"

/* fp8q_scaling's modes: tensorwise, rowwise, blockwise. */
#define SCALING_MODES 3

/* Per device and scaling mode, the last path taken plus one (0: none yet),
 * written and read with atomics. */
static volatile int64_t last_paths[FP8Q_CUBLASLT_MAX_DEVICES][SCALING_MODES];

const char *fp8q_py_mm_path_name(fp8q_py_mm_path path)
{
    switch (path) {
    case FP8Q_PY_MM_ONE_CALL: return "one cuBLASLt call";
    case FP8Q_PY_MM_ONE_CALL_PADDED:
        return "one cuBLASLt call on operands padded to multiples of 16";
    case FP8Q_PY_MM_FP8: return "cuBLASLt FP8 product + epilogue kernel";
    case FP8Q_PY_MM_FP8_PADDED:
        return "cuBLASLt FP8 product of operands padded to multiples of 16 "
               "+ epilogue kernel";
    case FP8Q_PY_MM_BFLOAT16:
        return "bfloat16 product of the decoded codes + epilogue kernel";
    default:
        return "float32 product of block-scaled operands + epilogue kernel";
    }
}

/* Nonzero when FP8Q_LOG is set to something other than "" or "0" (read
 * once; the race of two first calls reads the same value). */
static int logging(void)
{
    static volatile int state = -1;
    char value[8];
    if (state < 0) {
        const int length = fp8q_getenv_utf8("FP8Q_LOG", value, sizeof value);
        state = length > 0 && strcmp(value, "0") != 0;
    }
    return state;
}

void fp8q_py_mm_path_taken(const fp8q_py_scaled_mm *call,
                           fp8q_py_mm_path path)
{
    const int device = call->a->device_index;

    if (device >= 0 && device < FP8Q_CUBLASLT_MAX_DEVICES &&
        (int)call->mode >= 0 && (int)call->mode < SCALING_MODES) {
        fp8q_atomic_store_i64(&last_paths[device][call->mode],
                              (int64_t)path + 1);
    }
    if (logging()) {
        fprintf(stderr, "fp8q: scaled_mm M=%lld N=%lld K=%lld on cuda:%d: %s\n",
                (long long)call->a->view.shape[0],
                (long long)call->b->view.shape[1],
                (long long)call->a->view.shape[1], device,
                fp8q_py_mm_path_name(path));
    }
}

/* {"DEVICE": {"MODE": "PATH", ...}} for every device and scaling mode with
 * a product so far. */
static PyObject *scaled_mm_paths(PyObject *module, PyObject *unused)
{
    PyObject *result = PyDict_New();
    PyObject *modes = NULL;
    int device, mode;

    (void)module;
    (void)unused;
    for (device = 0; result != NULL && device < FP8Q_CUBLASLT_MAX_DEVICES;
         device++) {
        char key[16];
        for (mode = 0; mode < SCALING_MODES; mode++) {
            const int64_t taken =
                fp8q_atomic_load_i64(&last_paths[device][mode]);
            PyObject *name;
            if (taken == 0) {
                continue;
            }
            if (modes == NULL && (modes = PyDict_New()) == NULL) {
                goto fail;
            }
            name = PyUnicode_FromString(
                fp8q_py_mm_path_name((fp8q_py_mm_path)(taken - 1)));
            if (name == NULL ||
                PyDict_SetItemString(modes,
                                     fp8q_scaling_name((fp8q_scaling)mode),
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

static PyMethodDef scaled_mm_paths_functions[] = {
    {"_scaled_mm_paths", scaled_mm_paths, METH_NOARGS,
     "_scaled_mm_paths()\n--\n\n"
     "{device index as text: {scaling mode: path}}: the path (as FP8Q_LOG "
     "names it) the last scaled_mm of each scaling mode (tensorwise, "
     "rowwise, blockwise) took on each CUDA device, for the devices and "
     "modes with a product so far."},
    {NULL, NULL, 0, NULL},
};

int fp8q_py_scaled_mm_paths_init(PyObject *module)
{
    return PyModule_AddFunctions(module, scaled_mm_paths_functions);
}
