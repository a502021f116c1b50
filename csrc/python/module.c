/*
 * module.c - the fp8q._C extension module (multi-phase initialisation, PEP
 * 489): imports NumPy's C API, lets every binding file register its types
 * and functions, and tells csrc/cuda where the kernels' file is (beside
 * this module's file). Touches no CUDA.
 *
 * Free-threaded CPython: the module declares Py_MOD_GIL_NOT_USED. Every
 * mutable global of the C code is either set once (fp8q_once_run), atomic,
 * guarded by a lock, or created once at module execution; objects that
 * users share across threads lock themselves (docs/architecture.md,
 * "Threads", lists each). One interpreter per process: the static types and
 * NumPy's C API are process-wide.
 */
#define FP8Q_BINDING_IMPORTS_NUMPY
#include "python/binding.h"

#include <string.h>

#include "cuda/kernel_image.h"

/* Names the folder of this module's file to csrc/cuda/kernel_image.h; 0, or
 * -1 with an exception. A module without __file__ (embedded, frozen) names
 * none: CUDA work then fails saying the kernels cannot be found. */
static int name_kernel_folder(PyObject *module)
{
    PyObject *file = PyModule_GetFilenameObject(module);
    const char *path;
    const char *slash;
    const char *backslash;
    char *folder;
    size_t length;

    if (file == NULL) {
        PyErr_Clear();
        return 0;
    }
    path = PyUnicode_AsUTF8(file);
    if (path == NULL) {
        Py_DECREF(file);
        return -1;
    }
    slash = strrchr(path, '/');
    backslash = strrchr(path, '\\');
    if (backslash != NULL && (slash == NULL || backslash > slash)) {
        slash = backslash;
    }
    length = slash != NULL ? (size_t)(slash - path) : 0;
    folder = (char *)PyMem_Malloc(length + 2);
    if (folder == NULL) {
        Py_DECREF(file);
        PyErr_NoMemory();
        return -1;
    }
    if (slash != NULL) {
        memcpy(folder, path, length);
        folder[length] = '\0';
    }
    else {
        folder[0] = '.';
        folder[1] = '\0';
    }
    fp8q_kernel_image_set_folder(folder);
    PyMem_Free(folder);
    Py_DECREF(file);
    return 0;
}

/* The functions of the binding's files that add no type (binding.h). */
static PyMethodDef *const function_tables[] = {
    fp8q_py_device_functions,
    fp8q_py_dlpack_functions,
    fp8q_py_asarray_functions,
    fp8q_py_cast_functions,
    fp8q_py_amax_functions,
    fp8q_py_quantize_functions,
    fp8q_py_thread_count_functions,
    fp8q_py_build_info_functions,
    fp8q_py_cuda_info_functions,
    fp8q_py_cpu_info_functions,
    fp8q_py_scaled_mm_functions,
    fp8q_py_scaled_mm_cuda_functions,
    fp8q_py_dlpack_exchange_functions,
    fp8q_py_cublaslt_info_functions,
    fp8q_py_linear_layer_functions,
    fp8q_py_layer_weight_only_functions,
    fp8q_py_norm_quantize_functions,
    fp8q_py_tensor_factories_functions,
};

static int fp8q_module_exec(PyObject *module)
{
    size_t index;

    import_array1(-1);

    if (name_kernel_folder(module) < 0 || fp8q_py_errors_init(module) < 0 ||
        fp8q_py_dtype_init(module) < 0 || fp8q_py_tensor_init(module) < 0 ||
        fp8q_py_calibration_init(module) < 0 || fp8q_py_torch_init() < 0) {
        return -1;
    }
    for (index = 0; index < sizeof function_tables / sizeof function_tables[0];
         index++) {
        if (PyModule_AddFunctions(module, function_tables[index]) < 0) {
            return -1;
        }
    }
    return 0;
}

/* The exec slot's function is stored by PyInit__C: ISO C has no cast from
 * a function pointer to void *, and memcpy converts without one. */
static PyModuleDef_Slot fp8q_module_slots[] = {
    {Py_mod_exec, NULL},
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
#if defined(Py_mod_gil)
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef fp8q_module_definition = {
    PyModuleDef_HEAD_INIT,
    "fp8q._C",
    "fp8q's C extension: FP8 formats, tensors, casts and quantization.",
    0,
    NULL,
    fp8q_module_slots,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__C(void)
{
    int (*exec)(PyObject *) = fp8q_module_exec;

    memcpy(&fp8q_module_slots[0].value, &exec, sizeof exec);
    return PyModuleDef_Init(&fp8q_module_definition);
}
