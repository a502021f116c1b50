/*
 * cuda_info.c - fp8q._C._cuda_info(): what the CUDA backend finds on this
 * machine (driver, devices, whether fp8q's kernels load), as the dict that
 * fp8q.info() reports under "cuda"; and fp8q._C._cuda_open_device(), which
 * raises fp8q.CudaError saying why a device cannot run fp8q's kernels.
 * Touches CUDA only when called.
 */

#include "cuda/device_report.h"
#include "cuda/driver.h"
#include "cuda/layer_path.h"
#include "cuda/switches.h"
#include "python/binding.h"

/* {"path": ..., "version": "13.0" or None}, or None when no driver library
 * was found. */
static PyObject *driver_dict(const fp8q_cuda_driver *driver)
{
    char version[32];

    if (!driver->found) {
        Py_RETURN_NONE;
    }
    fp8q_cuda_format_version(driver->version, version, sizeof version);
    return Py_BuildValue("{s:s,s:z}", "path", driver->path, "version",
                         driver->version > 0 ? version : NULL);
}

/* {"FP8Q_CUDA_NO_FP8_TENSOR_CORES": bool, "FP8Q_CUDA_GEMM_TUNING": bool,
 * "FP8Q_CUDA_SCALED_MM_PATH": "auto" | ..., "FP8Q_CUDA_FP8_LAYER_PATH":
 * "auto" | ..., "error": None or why a value is refused}: the switches as
 * read (cuda/switches.h). */
static PyObject *switches_dict(void)
{
    const fp8q_cuda_switches *switches = fp8q_cuda_switches_get();
    return Py_BuildValue(
        "{s:O,s:O,s:s,s:s,s:z}", "FP8Q_CUDA_NO_FP8_TENSOR_CORES",
        switches->no_fp8_tensor_cores ? Py_True : Py_False,
        "FP8Q_CUDA_GEMM_TUNING", switches->gemm_tuning ? Py_True : Py_False,
        "FP8Q_CUDA_SCALED_MM_PATH",
        fp8q_scaled_mm_path_switch_name(switches->scaled_mm_path),
        "FP8Q_CUDA_FP8_LAYER_PATH",
        fp8q_layer_path_name(switches->fp8_layer_path), "error",
        switches->error.status != FP8Q_OK ? switches->error.message : NULL);
}

/* The entry for device `index`; *kernels_error receives the reason the
 * kernels do not run there (a new reference, or NULL when they load): a
 * device whose properties cannot be read runs nothing. */
static PyObject *device_dict(int index, const fp8q_error *backend,
                             PyObject **kernels_error)
{
    fp8q_cuda_device_report report;
    int kernels;

    Py_BEGIN_ALLOW_THREADS
    fp8q_cuda_device_report_get(index, backend, &report);
    Py_END_ALLOW_THREADS
    *kernels_error = NULL;
    kernels = report.kernels.status == FP8Q_OK;
    if (report.error.status != FP8Q_OK) {
        *kernels_error = PyUnicode_FromString(report.error.message);
        return *kernels_error == NULL
                   ? NULL
                   : Py_BuildValue("{s:i,s:O}", "index", index, "error",
                                   *kernels_error);
    }
    if (!kernels &&
        (*kernels_error = PyUnicode_FromString(report.kernels.message)) ==
            NULL) {
        return NULL;
    }
    return Py_BuildValue(
        "{s:i,s:s,s:s,s:K,s:O,s:O,s:O,s:N}", "index", index, "name",
        report.properties.name, "compute_capability",
        report.compute_capability, "memory_bytes",
        (unsigned long long)report.properties.memory_bytes, "native_fp8",
        report.properties.native_fp8 ? Py_True : Py_False, "kernels",
        kernels ? Py_True : Py_False, "kernels_error",
        *kernels_error != NULL ? *kernels_error : Py_None,
        "fp8_layer_weight_only_tokens",
        kernels ? PyLong_FromLongLong((long long)report.weight_only_tokens)
                : Py_NewRef(Py_None));
}

PyDoc_STRVAR(cuda_info_doc,
             "_cuda_info()\n"
             "--\n"
             "\n"
             "What fp8q's CUDA backend finds here, as a dict:\n"
             "available (bool: fp8q's kernels load on at least one device),\n"
             "reason (str: why not, else None), driver ({'path': the driver\n"
             "library loaded, 'version': e.g. '13.0'}, or None when no driver\n"
             "was found), devices (one dict per device: index, name,\n"
             "compute_capability such as '8.9', memory_bytes, native_fp8 (8.9\n"
             "or newer), kernels (bool), kernels_error (str or None) and\n"
             "fp8_layer_weight_only_tokens (int: up to how many tokens a W8A8\n"
             "fp8q.torch.Linear takes the weight-only product there by\n"
             "default; None where the kernels do not load)) and switches\n"
             "(FP8Q_CUDA_NO_FP8_TENSOR_CORES: bool, FP8Q_CUDA_GEMM_TUNING:\n"
             "bool, FP8Q_CUDA_SCALED_MM_PATH:\n"
             "'auto', 'padded', 'epilogue' or 'exact',\n"
             "FP8Q_CUDA_FP8_LAYER_PATH: 'auto', 'fp8' or 'weight-only',\n"
             "read from the environment once, and error: why a\n"
             "value is refused, else None; a refused value makes the backend\n"
             "unusable, and `reason` names the first problem found: driver,\n"
             "build, then switches).\n"
             "\n"
             "The first call loads the CUDA driver (libcuda.so.1 / nvcuda.dll,\n"
             "or FP8Q_CUDA_DRIVER) as the first GPU operation would. Checking\n"
             "the kernels loads fp8q's kernel image into each device's primary\n"
             "context (retained for the life of the process), which is what\n"
             "the first operation on that device does anyway. Never raises\n"
             "for CUDA problems: they are reported in the dict.");

static PyObject *cuda_info(PyObject *module, PyObject *unused)
{
    const fp8q_cuda_driver *driver;
    fp8q_error backend;
    PyObject *devices = NULL;
    PyObject *reason = NULL;
    PyObject *driver_entry = NULL;
    PyObject *switches = NULL;
    PyObject *result = NULL;
    int available = 0;
    int index;

    (void)module;
    (void)unused;
    fp8q_error_clear(&backend);
    Py_BEGIN_ALLOW_THREADS
    driver = fp8q_cuda_driver_load();
    (void)fp8q_cuda_backend_check(&backend);
    Py_END_ALLOW_THREADS

    devices = PyList_New(0);
    if (devices == NULL) {
        return NULL;
    }
    if (backend.status != FP8Q_OK) {
        reason = PyUnicode_FromString(backend.message);
        if (reason == NULL) {
            goto done;
        }
    }
    for (index = 0; index < driver->device_count; index++) {
        PyObject *kernels_error;
        PyObject *entry = device_dict(index, &backend, &kernels_error);
        const int appended = entry != NULL &&
                             PyList_Append(devices, entry) == 0;

        Py_XDECREF(entry);
        if (appended && kernels_error == NULL) {
            available = 1;
        }
        else if (appended && reason == NULL) {
            /* Kept unless another device runs the kernels; each device's
             * own reason is in its entry. */
            reason = Py_NewRef(kernels_error);
        }
        Py_XDECREF(kernels_error);
        if (!appended) {
            goto done;
        }
    }
    driver_entry = driver_dict(driver);
    switches = switches_dict();
    if (driver_entry == NULL || switches == NULL) {
        goto done;
    }
    if (available) {
        Py_CLEAR(reason);
    }
    result = Py_BuildValue("{s:O,s:O,s:O,s:O,s:O}", "available",
                           available ? Py_True : Py_False, "reason",
                           reason != NULL ? reason : Py_None, "driver",
                           driver_entry, "devices", devices, "switches",
                           switches);
done:
    Py_XDECREF(driver_entry);
    Py_XDECREF(switches);
    Py_XDECREF(reason);
    Py_DECREF(devices);
    return result;
}

PyDoc_STRVAR(cuda_open_device_doc,
             "_cuda_open_device(index)\n"
             "--\n"
             "\n"
             "Makes CUDA device `index` ready for fp8q's kernels, as the first\n"
             "operation on it does: loads the CUDA driver (once per process),\n"
             "retains the device's primary context and loads fp8q's kernel\n"
             "image there (once per device). Returns None, or raises\n"
             "fp8q.CudaError saying why not (no driver found and where it\n"
             "looked, driver too old with both versions, no device, no kernel\n"
             "for the GPU's sm_XY, out of memory, built without kernels);\n"
             "the outcome is kept, so a later call fails the same way.");

static PyObject *cuda_open_device(PyObject *module, PyObject *argument)
{
    const int index = fp8q_py_device_index(argument, "_cuda_open_device");

    (void)module;
    if (index < 0 || fp8q_py_cuda_device(index) == NULL) {
        return NULL;
    }
    Py_RETURN_NONE;
}

PyMethodDef fp8q_py_cuda_info_functions[] = {
    {"_cuda_info", cuda_info, METH_NOARGS, cuda_info_doc},
    {"_cuda_open_device", cuda_open_device, METH_O, cuda_open_device_doc},
    {NULL, NULL, 0, NULL},
};
