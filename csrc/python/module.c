/*
 * module.c - the fp8q._C extension module: imports NumPy's C API and lets
 * every binding file register its types and functions. Touches no CUDA.
 */
#define FP8Q_BINDING_IMPORTS_NUMPY
#include "python/binding.h"

static struct PyModuleDef fp8q_module_definition = {
    PyModuleDef_HEAD_INIT,
    "fp8q._C",
    "fp8q's C extension: FP8 formats, tensors, casts and quantization.",
    -1,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__C(void)
{
    PyObject *module;

    import_array();

    module = PyModule_Create(&fp8q_module_definition);
    if (module == NULL) {
        return NULL;
    }
    if (fp8q_py_errors_init(module) < 0 || fp8q_py_dtype_init(module) < 0 ||
        fp8q_py_tensor_init(module) < 0 || fp8q_py_device_init(module) < 0 ||
        fp8q_py_dlpack_init(module) < 0 ||
        fp8q_py_asarray_init(module) < 0 || fp8q_py_ops_init(module) < 0 ||
        fp8q_py_cuda_info_init(module) < 0 ||
        fp8q_py_cpu_info_init(module) < 0 ||
        fp8q_py_calibration_init(module) < 0 ||
        fp8q_py_scaled_mm_init(module) < 0 ||
        fp8q_py_scaled_mm_cuda_init(module) < 0 ||
        fp8q_py_dlpack_exchange_init(module) < 0 ||
        fp8q_py_scaled_mm_paths_init(module) < 0 ||
        fp8q_py_linear_layer_init(module) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
