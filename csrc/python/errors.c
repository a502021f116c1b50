/*
 * errors.c - turns an fp8q_status reported by the C library into the matching
 * Python exception (TypeError, ValueError, BufferError, MemoryError,
 * RuntimeError, fp8q.CudaError, fp8q.CudaOutOfMemoryError), carrying the
 * library's message unchanged; defines the two fp8q exceptions; and the small
 * error-indicator helpers the binding shares (saving it around capsule
 * destructors, prefixing a message with the argument it concerns).
 */
#include <stdarg.h>

#include "python/binding.h"

/* fp8q.CudaError (a RuntimeError subclass), raised for FP8Q_ERROR_CUDA,
 * and fp8q.CudaOutOfMemoryError (a CudaError and a MemoryError), raised for
 * FP8Q_ERROR_CUDA_MEMORY; made by fp8q_py_errors_init. */
static PyObject *cuda_error;
static PyObject *cuda_out_of_memory_error;

PyDoc_STRVAR(cuda_error_doc,
             "Raised when fp8q's GPU backend cannot be used or a CUDA call "
             "fails:\nno CUDA driver found (the message lists every library "
             "tried), a driver\nolder than fp8q needs (both versions), no "
             "CUDA device, no kernel for\nthe GPU's architecture (its sm_XY "
             "and the architectures built), out of\nmemory, or fp8q built "
             "without CUDA kernels. A subclass of RuntimeError.");

PyDoc_STRVAR(cuda_out_of_memory_doc,
             "Raised when a GPU runs out of memory (allocating a tensor or "
             "loading\nfp8q's kernels). Both an fp8q.CudaError and a "
             "MemoryError.");

/* Creates the exception type `name` (once per process: a module executed
 * again, after `del sys.modules["fp8q._C"]`, gets the same class, so
 * `except fp8q.CudaError` keeps working) and adds it to the module as
 * `attribute`; the global `*type` holds its own reference. */
static int add_exception(PyObject *module, PyObject **type, const char *name,
                         const char *attribute, const char *doc,
                         PyObject *bases)
{
    if (*type == NULL) {
        *type = PyErr_NewExceptionWithDoc(name, doc, bases, NULL);
        if (*type == NULL) {
            return -1;
        }
    }
    Py_INCREF(*type);
    if (PyModule_AddObject(module, attribute, *type) < 0) {
        Py_DECREF(*type);
        return -1;
    }
    return 0;
}

int fp8q_py_errors_init(PyObject *module)
{
    PyObject *bases;
    int result;

    if (add_exception(module, &cuda_error, "fp8q.CudaError", "CudaError",
                      cuda_error_doc, PyExc_RuntimeError) < 0) {
        return -1;
    }
    bases = PyTuple_Pack(2, cuda_error, PyExc_MemoryError);
    if (bases == NULL) {
        return -1;
    }
    result = add_exception(module, &cuda_out_of_memory_error,
                           "fp8q.CudaOutOfMemoryError", "CudaOutOfMemoryError",
                           cuda_out_of_memory_doc, bases);
    Py_DECREF(bases);
    return result;
}

void fp8q_py_raise(const fp8q_error *error)
{
    PyObject *exception_type =
        error->status == FP8Q_ERROR_TYPE     ? PyExc_TypeError
        : error->status == FP8Q_ERROR_VALUE  ? PyExc_ValueError
        : error->status == FP8Q_ERROR_BUFFER ? PyExc_BufferError
        : error->status == FP8Q_ERROR_MEMORY ? PyExc_MemoryError
        : error->status == FP8Q_ERROR_CUDA   ? cuda_error
        : error->status == FP8Q_ERROR_CUDA_MEMORY ? cuda_out_of_memory_error
                                                  : PyExc_RuntimeError;

    if (error->message[0] == '\0') {
        PyErr_Format(exception_type, "fp8q: the C library failed (status %d) "
                     "without a message", (int)error->status);
        return;
    }
    PyErr_SetString(exception_type, error->message);
}

int fp8q_py_raise_on_failure(fp8q_status status, const fp8q_error *error)
{
    if (status == FP8Q_OK) {
        return 0;
    }
    if (status == FP8Q_ERROR_INTERRUPTED) {
        /* The signal handler's exception, raised during the call. */
        if (!PyErr_Occurred()) {
            PyErr_SetNone(PyExc_KeyboardInterrupt);
        }
        return -1;
    }
    fp8q_py_raise(error);
    return -1;
}

void fp8q_py_error_save(fp8q_py_saved_error *saved)
{
#if PY_VERSION_HEX >= 0x030C0000
    saved->exception = PyErr_GetRaisedException();
#else
    PyErr_Fetch(&saved->type, &saved->value, &saved->traceback);
#endif
}

void fp8q_py_error_restore(fp8q_py_saved_error *saved)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(saved->exception);
    saved->exception = NULL;
#else
    PyErr_Restore(saved->type, saved->value, saved->traceback);
    saved->type = saved->value = saved->traceback = NULL;
#endif
}

void fp8q_py_error_discard(fp8q_py_saved_error *saved)
{
#if PY_VERSION_HEX >= 0x030C0000
    Py_CLEAR(saved->exception);
#else
    Py_CLEAR(saved->type);
    Py_CLEAR(saved->value);
    Py_CLEAR(saved->traceback);
#endif
}

void fp8q_py_error_add_prefix(const char *format, ...)
{
    PyObject *type;
    PyObject *value;
    PyObject *prefix;
    va_list arguments;

#if PY_VERSION_HEX >= 0x030C0000
    value = PyErr_GetRaisedException();
    if (value == NULL) {
        return;
    }
    type = (PyObject *)Py_TYPE(value);
    Py_INCREF(type);
#else
    PyObject *traceback;

    PyErr_Fetch(&type, &value, &traceback);
    if (type == NULL) {
        return;
    }
    PyErr_NormalizeException(&type, &value, &traceback);
    Py_XDECREF(traceback);
#endif
    va_start(arguments, format);
    prefix = PyUnicode_FromFormatV(format, arguments);
    va_end(arguments);
    if (prefix != NULL) {
        PyErr_Format(type, "%U%S", prefix, value);
        Py_DECREF(prefix);
    }
    Py_DECREF(type);
    Py_XDECREF(value);
}
