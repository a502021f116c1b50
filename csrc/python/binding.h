/*
 * binding.h - what the files of the CPython binding share.
 *
 * The binding turns Python objects into core views (without copying where the
 * layout allows), calls csrc/core with the GIL released, and maps fp8q_status
 * codes to exceptions. It does no arithmetic on data itself.
 *
 * Each file says at its top what it holds; the calibrator files share
 * calibrator_binding.h besides.
 */
#ifndef FP8Q_PYTHON_BINDING_H
#define FP8Q_PYTHON_BINDING_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* One NumPy C-API table for the whole extension; module.c imports it. */
#define NPY_NO_DEPRECATED_API NPY_1_23_API_VERSION
#define NPY_TARGET_VERSION NPY_1_25_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL fp8q_ARRAY_API
#ifndef FP8Q_BINDING_IMPORTS_NUMPY
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

/* Per-object critical sections (PEP 703): on a free-threaded CPython
 * (3.13+) they lock the object, and are suspended while the thread waits or
 * releases its thread state (Py_BEGIN_ALLOW_THREADS), as the GIL would be;
 * with a GIL they do nothing. Python before 3.13 lacks the macros. */
#if !defined(Py_BEGIN_CRITICAL_SECTION)
#define Py_BEGIN_CRITICAL_SECTION(object) {
#define Py_END_CRITICAL_SECTION() }
#define Py_BEGIN_CRITICAL_SECTION2(first, second) {
#define Py_END_CRITICAL_SECTION2() }
#endif

/* Defines `name`, a method or getter of the signature
 * `PyObject *(PyObject *self, argument_type)` (METH_O or METH_NOARGS:
 * PyObject *; a getter: void *), that runs `method` on self (a self_type)
 * inside a critical section of self (the state of objects users share
 * across threads, such as a calibrator). Write `static` before it for a
 * file's own method. */
#define FP8Q_LOCKED_SELF(name, method, self_type, argument_type)           \
    PyObject *name(PyObject *self, argument_type argument)                 \
    {                                                                      \
        PyObject *result;                                                  \
        Py_BEGIN_CRITICAL_SECTION(self);                                   \
        result = method((self_type *)self, argument);                      \
        Py_END_CRITICAL_SECTION();                                         \
        return result;                                                     \
    }

/* The same for a METH_O method whose argument's state is read too (merge):
 * both objects locked. */
#define FP8Q_LOCKED_PAIR(name, method, self_type)                          \
    PyObject *name(PyObject *self, PyObject *other)                        \
    {                                                                      \
        PyObject *result;                                                  \
        Py_BEGIN_CRITICAL_SECTION2(self, other);                           \
        result = method((self_type *)self, other);                         \
        Py_END_CRITICAL_SECTION2();                                        \
        return result;                                                     \
    }

/* The same for METH_FASTCALL | METH_KEYWORDS methods. */
#define FP8Q_LOCKED_KEYWORDS(name, method, self_type)                      \
    PyObject *name(PyObject *self, PyObject *const *args, Py_ssize_t nargs, \
                   PyObject *kwnames)                                      \
    {                                                                      \
        PyObject *result;                                                  \
        Py_BEGIN_CRITICAL_SECTION(self);                                   \
        result = method((self_type *)self, args, nargs, kwnames);          \
        Py_END_CRITICAL_SECTION();                                         \
        return result;                                                     \
    }

#include "core/device_name.h"
#include "core/dlpack.h"
#include "core/dtype.h"
#include "core/quantize.h"
#include "core/scaled_mm.h"
#include "core/status.h"
#include "core/view.h"
#include "cuda/capture.h"
#include "cuda/driver.h"
#include "platform.h"

/* ------------------------------------------------------------------------- */
/* errors.c                                                                  */

/* Raises the exception matching error->status with error->message. */
void fp8q_py_raise(const fp8q_error *error);

/* 0 when `status` is FP8Q_OK; otherwise raises as fp8q_py_raise(error) and
 * returns -1. FP8Q_ERROR_INTERRUPTED keeps the exception already set (the
 * signal handler's), or raises KeyboardInterrupt. */
int fp8q_py_raise_on_failure(fp8q_status status, const fp8q_error *error);

/*
 * interruptible.c: a GIL-released region whose CPU loops Ctrl-C stops.
 * fp8q_py_unlock releases the GIL and installs an interrupt (platform.h)
 * whose check takes the GIL back for PyErr_CheckSignals, at most every
 * FP8Q_INTERRUPT_CHECK_MS milliseconds of a long loop (Python's C signal
 * handler only sets a flag; the Python handler runs on the main thread,
 * with the GIL). fp8q_py_relock removes it and retakes the GIL; when a
 * handler raised (KeyboardInterrupt), *status becomes FP8Q_ERROR_INTERRUPTED
 * and fp8q_py_raise_on_failure then leaves that exception in place, so the
 * call's usual failure path releases what it holds. Use in place of
 * Py_BEGIN_ALLOW_THREADS / Py_END_ALLOW_THREADS around core calls.
 */
typedef struct fp8q_py_unlocked {
    PyThreadState *thread_state;
    fp8q_interrupt interrupt;
} fp8q_py_unlocked;

void fp8q_py_unlock(fp8q_py_unlocked *unlocked);
void fp8q_py_relock(fp8q_py_unlocked *unlocked, fp8q_status *status);

/* The region as a block, like Py_BEGIN_ALLOW_THREADS; `status` (an
 * fp8q_status variable) becomes FP8Q_ERROR_INTERRUPTED when stopped. */
#define FP8Q_PY_BEGIN_INTERRUPTIBLE                                        \
    {                                                                      \
        fp8q_py_unlocked fp8q_py_unlocked_;                                \
        fp8q_py_unlock(&fp8q_py_unlocked_);
#define FP8Q_PY_END_INTERRUPTIBLE(status)                                  \
    fp8q_py_relock(&fp8q_py_unlocked_, &(status));                         \
    }

/* The error indicator, saved aside (the spelling differs from Python 3.12
 * on, where PyErr_Fetch is deprecated). */
typedef struct fp8q_py_saved_error {
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exception;
#else
    PyObject *type;
    PyObject *value;
    PyObject *traceback;
#endif
} fp8q_py_saved_error;

/* Moves the current exception (if any) into *saved, clearing it. */
void fp8q_py_error_save(fp8q_py_saved_error *saved);
/* Makes the saved exception current again (replacing any other). */
void fp8q_py_error_restore(fp8q_py_saved_error *saved);
/* Drops the saved exception. */
void fp8q_py_error_discard(fp8q_py_saved_error *saved);

/* Re-raises the current exception as the same type with its message
 * prefixed by the PyUnicode_FromFormat-style text. */
void fp8q_py_error_add_prefix(const char *format, ...);

/* ------------------------------------------------------------------------- */
/* dtype_object.c                                                            */

typedef struct fp8q_DtypeObject {
    PyObject_HEAD
    fp8q_dtype dtype;
} fp8q_DtypeObject;

extern PyTypeObject fp8q_Dtype_Type;

/* New reference to the singleton fp8q.dtype object for `dtype`. */
PyObject *fp8q_py_dtype_object(fp8q_dtype dtype);

/*
 * Parses anything a `dtype=` argument accepts: fp8q.dtype objects, canonical
 * names and aliases, NumPy and ml_dtypes dtypes (and their scalar types), and
 * torch dtypes (by str(), torch is never imported). Returns 0 and sets
 * *dtype, or -1 with TypeError naming `argument_name` and what was received.
 */
int fp8q_py_parse_dtype(PyObject *object, const char *argument_name,
                        fp8q_dtype *dtype);

/* An optional `dtype=` argument: *dtype = -1 for None (or NULL, an omitted
 * argument), else fp8q_py_parse_dtype's dtype as an int; 0, or -1 with its
 * TypeError naming "dtype". */
int fp8q_py_parse_optional_dtype(PyObject *object, int *dtype);

/* The head of a PyMethodDef entry of a METH_FASTCALL | METH_KEYWORDS
 * function or method, whose arguments fp8q_py_parse_arguments binds:
 * {FP8Q_PY_KEYWORDS_FUNCTION("name", function), "doc"}. */
#define FP8Q_PY_KEYWORDS_FUNCTION(name, function)                             \
    name, (PyCFunction)(void (*)(void))(function),                            \
        METH_FASTCALL | METH_KEYWORDS

/*
 * Binds the arguments of a METH_FASTCALL | METH_KEYWORDS call (args, nargs,
 * kwnames) to the parameters `keywords` names, as PyArg_ParseTupleAndKeywords
 * does with the same format, for the formats "O" (stores the borrowed
 * object), "p" (int: PyObject_IsTrue's 0 or 1), "d" (double: a float or an
 * object with __float__ or __index__) and "s" (const char *: the UTF-8 of a
 * str without NUL, alive as long as the str), with "|" before the optional
 * parameters, "$" before the keyword-only ones, "" as the name of a
 * positional-only one, and ":name" at the end; its TypeError messages have
 * PyArg's form. An output whose parameter was not given keeps its value.
 * Returns 0, or -1 with the exception set.
 */
int fp8q_py_parse_arguments(PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames, const char *format,
                            const char *const *keywords, ...);

/*
 * fp8q_py_parse_dtype without its TypeError: 1 and *dtype for a dtype-like
 * object fp8q supports, 0 for anything else (no exception set), -1 with an
 * exception on an internal failure.
 */
int fp8q_py_dtype_from_object(PyObject *object, fp8q_dtype *dtype);

/*
 * Recognises a NumPy dtype whose elements fp8q stores unchanged: native byte
 * order float32, float16 and uint8, and the ml_dtypes bfloat16 and FP8 dtypes
 * (by name). Returns 1 and sets *dtype, 0 for any other dtype (no exception
 * set), -1 with an exception on failure.
 */
int fp8q_py_dtype_from_numpy(PyArray_Descr *descr, fp8q_dtype *dtype);

/*
 * New reference to the NumPy dtype that views `dtype`'s elements: float32,
 * float16 and uint8 natively; bfloat16 and the FP8 dtypes as the ml_dtypes
 * dtype when ml_dtypes is importable, else as raw uint16 / uint8 codes.
 * NULL with an exception on failure.
 */
PyArray_Descr *fp8q_py_numpy_descr(fp8q_dtype dtype);

/* ------------------------------------------------------------------------- */
/* tensor_object.c                                                           */

/* Device types: FP8Q_DEVICE_CPU, FP8Q_DEVICE_CUDA (core/device_name.h). */

typedef struct fp8q_TensorObject {
    PyObject_HEAD
    fp8q_view view;
    int device_type;  /* FP8Q_DEVICE_* */
    int device_index; /* 0 for the CPU */
    int readonly;     /* writes through buffer/DLPack/out= are refused */
    /* Owned memory, or NULL: an FP8Q_ALIGNMENT-aligned block on the CPU,
     * device memory from fp8q_cuda_alloc on CUDA. */
    void *allocation;
    PyObject *owner;  /* object keeping borrowed memory alive, or NULL */
    PyObject *weakrefs;
    /* CUDA tensors: the opened device, and the stream of the memory's last
     * use (kept by the tensor that owns or borrowed the memory; see
     * device.c). NULL on the CPU. */
    const fp8q_cuda_device *cuda_device;
    fp8q_cu_stream stream;
    /* The capture state of the stream `allocation` was allocated on: a
     * graph's memory while that stream was capturing (cuda/memory.h). */
    fp8q_cuda_capture allocated_in;
} fp8q_TensorObject;

extern PyTypeObject fp8q_Tensor_Type;

#define fp8q_Tensor_Check(object) PyObject_TypeCheck(object, &fp8q_Tensor_Type)

/* A new C-contiguous CPU tensor with uninitialised, owned, 64-byte aligned
 * memory. Raises ValueError (bad shape) or MemoryError. */
fp8q_TensorObject *fp8q_tensor_new_empty(fp8q_dtype dtype, int ndim,
                                         const int64_t *shape);

/* A new tensor over borrowed memory described by `view`; `owner` (may be
 * NULL) is kept alive as long as the tensor. On the CPU, or on the device of
 * `owner` when it is a Tensor (a view of it). */
fp8q_TensorObject *fp8q_tensor_new_view(const fp8q_view *view,
                                        PyObject *owner, int readonly);

/* fp8q_tensor_new_view(view, owner, readonly), marked as CUDA memory of
 * the opened device `cuda` (unless NULL), last used on `stream`. */
fp8q_TensorObject *fp8q_py_new_view_on(const fp8q_view *view,
                                       PyObject *owner, int readonly,
                                       const fp8q_cuda_device *cuda,
                                       fp8q_cu_stream stream);

/* fp8q_tensor_copy_as of a CPU `source` (tensor_new.c, below the files that
 * move data between devices). */
fp8q_TensorObject *fp8q_tensor_copy_on_host(fp8q_TensorObject *source,
                                            fp8q_dtype dtype);

/* tensor_factories.c: parses an int or a sequence of at most FP8Q_MAX_DIMS
 * ints (any signs) into (ndim, shape); 0, or -1 with TypeError (not an int
 * or a sequence of ints) or ValueError (too many dims). */
int fp8q_py_parse_extents(PyObject *object, int *ndim, int64_t *shape);


/* ------------------------------------------------------------------------- */
/* device.c                                                                  */

/* A device= argument (core/device_name.h). */
typedef fp8q_place fp8q_py_device;

/* The device of the tensor's memory. */
FP8Q_INLINE fp8q_place fp8q_py_place(const fp8q_TensorObject *tensor)
{
    fp8q_place place;

    place.type = tensor->device_type;
    place.index = tensor->device_index;
    return place;
}

/* Parses a stream= argument into a driver handle: None (NULL: the legacy
 * default stream), an int handle (1 and 2 are the legacy and per-thread
 * default streams), an object with __cuda_stream__() returning (version,
 * handle), or one with an int .cuda_stream (torch.cuda.Stream). 0, or -1
 * with TypeError / ValueError naming `argument_name`. */
int fp8q_py_parse_stream(PyObject *object, const char *argument_name,
                         fp8q_cu_stream *stream);

/* The usual optional device= and stream= arguments: *device untouched when
 * device_object is None or NULL (the caller's default), else parsed from
 * 'cpu', 'cuda' (device 0), 'cuda:N', an int N or any object whose str() is
 * one of those (torch.device), without checking that the device exists
 * (ValueError naming "device" otherwise); then fp8q_py_parse_stream(..,
 * "stream", ..). 0, or -1 with their exception. */
int fp8q_py_parse_placement(PyObject *device_object, PyObject *stream_object,
                            fp8q_py_device *device, fp8q_cu_stream *stream);

/* Runs `call`, an expression of type fp8q_status that fills the fp8q_error
 * variable `error` (cleared first), with the GIL released, into the
 * fp8q_status variable `status`; fp8q_py_raise_on_failure(status, &error)
 * raises for it afterwards. */
#define FP8Q_PY_WITHOUT_GIL(status, error, call)                           \
    do {                                                                   \
        fp8q_error_clear(&(error));                                        \
        Py_BEGIN_ALLOW_THREADS                                             \
        (status) = (call);                                                 \
        Py_END_ALLOW_THREADS                                               \
    } while (0)

/* The CUDA device index that `object`, an int (not a bool), names: 0 to
 * FP8Q_MAX_DEVICE_INDEX (core/device_name.h), without checking that the
 * device exists; -1 with TypeError or ValueError naming `argument_name`. */
int fp8q_py_device_index(PyObject *object, const char *argument_name);

/* CUDA device `index`, opened (driver and kernels loaded, GIL released
 * meanwhile); NULL with fp8q.CudaError naming what is missing. */
const fp8q_cuda_device *fp8q_py_cuda_device(int index);

/* Records a use of the CUDA tensor's memory on `stream`: orders `stream`
 * after the memory's last use when that was on another stream, and makes
 * this the last use. Nothing for CPU tensors. 0, or -1 with CudaError. */
int fp8q_py_use_on_stream(fp8q_TensorObject *tensor, fp8q_cu_stream stream);

/* The stream of the last use of the tensor's memory (NULL on the CPU). */
fp8q_cu_stream fp8q_py_last_stream(fp8q_TensorObject *tensor);

/* A new C-contiguous tensor with uninitialised memory on `device`: as
 * fp8q_tensor_new_empty on the CPU; on CUDA allocated ordered on `stream`
 * (its last use). */
fp8q_TensorObject *fp8q_tensor_new_empty_on(fp8q_dtype dtype, int ndim,
                                            const int64_t *shape,
                                            const fp8q_py_device *device,
                                            fp8q_cu_stream stream);

/* A new C-contiguous tensor on `device` holding a bit-exact copy of
 * `source`'s elements, moved on `stream` (host <-> device copies finish
 * before this returns; strided CUDA sources are gathered on their GPU;
 * copies between two GPUs go through the host). */
fp8q_TensorObject *fp8q_tensor_copy_to(fp8q_TensorObject *source,
                                       const fp8q_py_device *device,
                                       fp8q_cu_stream stream);

/* The CUDA tensor itself when C-contiguous, else a new C-contiguous copy
 * on its GPU (gathered there, on `stream`); NULL with an exception. */
fp8q_TensorObject *fp8q_py_cuda_contiguous(fp8q_TensorObject *tensor,
                                           fp8q_cu_stream stream);

/* Tensor.to(device, *, stream=None, copy=False) and Tensor.cpu(*,
 * stream=None). */
PyObject *fp8q_tensor_to(PyObject *self, PyObject *const *args,
                         Py_ssize_t nargs, PyObject *kwnames);
PyObject *fp8q_tensor_cpu(PyObject *self, PyObject *const *args,
                          Py_ssize_t nargs, PyObject *kwnames);

/* 0 for a CPU tensor; else -1 with a TypeError saying that `what` needs the
 * values on the CPU and that tensor.cpu() brings them there. */
int fp8q_py_require_host_memory(const fp8q_TensorObject *tensor,
                                const char *what);

/* ------------------------------------------------------------------------- */
/* tensor_buffer.c                                                           */

/* PEP 3118 export of CPU tensors (fp8q.Tensor's tp_as_buffer). */
extern PyBufferProcs fp8q_tensor_buffer_procs;

/* ------------------------------------------------------------------------- */
/* asarray.c                                                                 */

/* copy= semantics of the array API: */
#define FP8Q_COPY_IF_NEEDED -1 /* None  */
#define FP8Q_COPY_NEVER 0      /* False: ValueError if a copy is needed */
#define FP8Q_COPY_ALWAYS 1     /* True  */

/*
 * fp8q.asarray semantics: returns a new reference to a Tensor for `object`
 * (Tensor, DLPack producer, NumPy array, buffer-protocol object, Python
 * scalar or nested sequence). `dtype` is a dtype to convert to, or -1 to keep
 * the object's own (float64 and integer inputs become float32). Errors name
 * `argument_name`.
 */
fp8q_TensorObject *fp8q_tensor_from_object(PyObject *object,
                                           const char *argument_name,
                                           int dtype, int copy);

/* Whether `object` holds values but no memory to view: a list, tuple,
 * Python number or NumPy scalar (NumPy copies them into a new array). */
int fp8q_py_has_no_memory(PyObject *object);

/* copy=False's refusal of an `object` that holds values but no memory to
 * view (a list, tuple, Python number or NumPy scalar: NumPy 2 refuses them
 * too), for fp8q.asarray and outputs, where a copy would lose what is
 * written. 0, or -1 with ValueError "Unable to avoid copy while converting
 * <argument_name> ..." (fp8q_tensor_from_object itself takes them under
 * FP8Q_COPY_NEVER, for inputs that must only not be converted). */
int fp8q_py_refuse_without_memory(PyObject *object, const char *argument_name);

/* ------------------------------------------------------------------------- */
/* output_arguments.c                                                        */

/* 0 for a CPU tensor; else -1 with a ValueError saying that `function` runs
 * on the CPU only and naming `argument` and the tensor's device. */
int fp8q_py_require_cpu(const fp8q_TensorObject *tensor, const char *function,
                        const char *argument);

/* 0 unless a stream was given (`stream_object` not None) to `function`
 * running on the CPU (`on_cpu`); else -1 with core's
 * fp8q_check_stream_on_cpu ValueError. */
int fp8q_py_check_stream_on_cpu(const char *function, PyObject *stream_object,
                                int on_cpu);

/* 0 when `scale` is on a GPU (its values are not read back, so not checked)
 * or holds only finite values > 0; else -1 with core's
 * fp8q_check_scale_values ValueError naming `name`, its message prefixed by
 * "FUNCTION: ". */
int fp8q_py_check_host_scales(const fp8q_TensorObject *scale,
                              const char *function, const char *name);

/*
 * Whether `object` can be an output argument, viewed in place: 1 for an
 * fp8q.Tensor, a NumPy array of a dtype fp8q stores, a DLPack producer or a
 * buffer (its dtype, device and layout still to be checked), not one that
 * has no memory (fp8q_py_has_no_memory: a NumPy scalar); 0 with *given a
 * new string that says what it is instead ("a NumPy array of dtype
 * float64", "an object of type list"); -1 with an exception.
 */
int fp8q_py_output_kind(PyObject *object, PyObject **given);

/*
 * An output argument: a new reference to a Tensor over out_object's memory
 * (out_object itself when it is an fp8q.Tensor, else a zero-copy view of a
 * NumPy array, DLPack producer or buffer) that has `dtype`, lives on
 * `device`, is writable, has no two elements at one address
 * (fp8q_view_check_writable) and has the shape (ndim, shape), which the
 * message calls `shape_source`. NULL with TypeError / ValueError naming `function`
 * and `argument` otherwise.
 */
fp8q_TensorObject *fp8q_py_writable_output(PyObject *out_object,
                                           const char *function,
                                           const char *argument,
                                           fp8q_dtype dtype,
                                           const char *shape_source, int ndim,
                                           const int64_t *shape,
                                           const fp8q_py_device *device);

/* A new C-contiguous tensor of (dtype, ndim, shape) with uninitialised
 * memory on x's device, allocated ordered on `stream` on a GPU. */
fp8q_TensorObject *fp8q_py_new_like(const fp8q_TensorObject *x,
                                    fp8q_dtype dtype, int ndim,
                                    const int64_t *shape,
                                    fp8q_cu_stream stream);

/* The out= of an operation on x: with out_object Py_None a new tensor of
 * x's shape and `dtype` (fp8q_py_new_like), else out_object checked by
 * fp8q_py_writable_output (argument "out", x's shape and device). */
fp8q_TensorObject *fp8q_py_op_output(PyObject *out_object,
                                     const char *function, fp8q_dtype dtype,
                                     const fp8q_TensorObject *x,
                                     fp8q_cu_stream stream);

/* What an operation with out= returns: NULL when out is NULL; `out` (the
 * reference handed over) when out_object is Py_None; else, like NumPy's
 * out=, a new reference to out_object itself (out released). */
PyObject *fp8q_py_op_result(fp8q_TensorObject *out, PyObject *out_object);

/* A tensor argument of a call whose x came with the exchange table `api`
 * (NULL: none): a view through it when `object` has the same table (for
 * this call, last used on the producer's current stream), else as
 * fp8q.asarray takes it (no copy). NULL with an exception naming `name`. */
fp8q_TensorObject *fp8q_py_import_argument(const fp8q_dl_exchange_api *api,
                                           PyObject *object,
                                           const char *name);

/* A new uninitialised C-contiguous tensor of (dtype, ndim, shape) on
 * `device`, allocated on `stream`: from the producer's allocator through
 * `api` (torch's) when not NULL, else fp8q's own. *producer_out (may be
 * NULL) receives a new reference to the object to hand back: the
 * producer's tensor, or the fp8q.Tensor itself. NULL with an exception. */
fp8q_TensorObject *fp8q_py_new_output(const fp8q_dl_exchange_api *api,
                                      fp8q_dtype dtype, int ndim,
                                      const int64_t *shape,
                                      const fp8q_py_device *device,
                                      fp8q_cu_stream stream,
                                      PyObject **producer_out);

/* ------------------------------------------------------------------------- */
/* ops_cuda.c (an operation's checked call run on its tensors' device)     */

struct fp8q_op_call;

/*
 * A new C-contiguous tensor on `source`'s device holding its elements
 * converted to `dtype` by the fp8q cast without a scale, saturating (as
 * fp8q.cast's default): a bit-exact copy when the dtypes are equal. The GIL
 * is released while the data moves. CUDA tensors are converted on the
 * tensor's last stream.
 */
fp8q_TensorObject *fp8q_tensor_copy_as(fp8q_TensorObject *source,
                                       fp8q_dtype dtype);

/* fp8q_py_use_on_stream of each non-NULL tensors[0..count) in turn. 0, or
 * -1 with an exception. */
int fp8q_py_use_all_on_stream(fp8q_TensorObject *const *tensors, int count,
                              fp8q_cu_stream stream);

/* Runs `call` (cuda/op_call.h, its fields but device and stream set) on
 * the device of tensors[0]: records a use on call->stream of each non-NULL
 * tensors[0..count) (the operation's operands), sets call->device, runs
 * fp8q_op_run with the GIL released (interruptible on the CPU). 0, or -1
 * with an exception. */
int fp8q_py_op_run(struct fp8q_op_call *call,
                   fp8q_TensorObject *const *tensors, int count);

/* out = cast(x / scale) on x's device (on a GPU on `stream`): out of x's
 * shape (C-contiguous on a GPU); scale NULL or a float32 tensor that
 * `scale_view` broadcasts to x's shape (on a GPU read through scale itself,
 * moved over when on the host or strided); amax_out NULL or one float32 on
 * x's device receiving x's amax. 0, or -1 with an exception. */
int fp8q_py_cast_run(fp8q_TensorObject *x, fp8q_TensorObject *scale,
                     const fp8q_view *scale_view, fp8q_TensorObject *out,
                     fp8q_TensorObject *amax_out, int saturate,
                     fp8q_cu_stream stream);

/* result = data * scale on data's device (on a GPU on `stream`; data and
 * scale of any strides, strided operands gathered first, cuda/op_call.h);
 * scale of the granularity's scale shape. 0, or -1 with an exception. */
int fp8q_py_cuda_dequantize(fp8q_TensorObject *data, fp8q_TensorObject *scale,
                            const fp8q_granularity *granularity,
                            fp8q_TensorObject *result, fp8q_cu_stream stream);

/* cuBLASLt, loaded on the first call (GIL released meanwhile) with the
 * NVIDIA wheels' folders under this interpreter's install folders
 * (fp8q._install_folders) searched too (cublaslt_info.c). NULL with
 * fp8q.CudaError when none is usable. */
const struct fp8q_cublaslt *fp8q_py_load_cublaslt(void);

/* core/scaled_mm_run.h's fp8q_sgemm through NumPy's BLAS
 * (PyArray_MatrixProduct2, which releases the GIL itself), for core runs
 * without the GIL (it is retaken here; `context` unused). A NumPy failure
 * leaves its exception set and returns FP8Q_ERROR_INTERRUPTED, the status
 * whose exception fp8q_py_raise_on_failure keeps (scaled_mm.c). */
fp8q_status fp8q_py_numpy_sgemm(void *context, const fp8q_view *a,
                                const fp8q_view *b, const fp8q_view *product,
                                fp8q_error *error);

/* ------------------------------------------------------------------------- */
/* dlpack.c                                                                  */

/*
 * Zero-copy Tensor over the memory `object` (a DLPack producer or a DLPack
 * capsule) exports; the Tensor keeps the producer's managed tensor alive.
 * A producer with a C exchange table (dlpack_exchange.c) that does not
 * require grad exports through it (an owning export, no Python call), its
 * CUDA memory marked as last used on the producer's current stream; the
 * others through __dlpack__(stream=...) on the legacy default stream.
 * `reinterpret_dtype` is -1, or a dtype of the same itemsize to view the
 * bytes as. On failure returns NULL with an exception set; *unsupported_dtype
 * (may be NULL) is then 1 exactly when the only problem was a DLPack dtype
 * fp8q does not store (the TypeError that says so is set).
 */
fp8q_TensorObject *fp8q_tensor_from_dlpack(PyObject *object,
                                           const char *argument_name,
                                           int reinterpret_dtype,
                                           int *unsupported_dtype);

/* torch_refusals.c: BufferError naming `argument_name` and the fix
 * (x.resolve_neg()) when object.is_neg() is true (a torch view with the
 * negative bit, whose DLPack export would give the stored, negated values);
 * 0 otherwise, also for objects without is_neg. */
int fp8q_py_refuse_negative_view(PyObject *object, const char *argument_name);

/* torch_refusals.c: called with the exception of a failed import of
 * `object`; replaces it by one that names the cause and the fix when object
 * is a torch tensor of a sparse layout (TypeError, "x.to_dense()"), on the
 * meta device (BufferError) or of a subclass without storage (TypeError
 * naming the type), and then clears *unsupported_dtype (may be NULL). Any
 * other exception stays as it was. */
void fp8q_py_explain_refused_torch_tensor(PyObject *object,
                                          const char *argument_name,
                                          int *unsupported_dtype);

/* torch_refusals.c: after object.__dlpack__() failed, when object is a
 * PyTorch tensor of a float8 dtype (str(object.dtype) starts with
 * "torch.float8"; PyTorch versions without float8 DLPack refuse it): a new
 * reference to object.view(torch.uint8) and *dtype, its float8 dtype (torch
 * is taken from sys.modules, never imported). NULL, with the original error
 * restored, when that does not apply or the view cannot be made. */
PyObject *fp8q_py_torch_float8_bytes(PyObject *object, fp8q_dtype *dtype);

/* torch_refusals.c: nonzero when object.requires_grad (torch's autograd
 * flag) is true; 0 for objects without the attribute or when reading it
 * fails (the exception is cleared). */
int fp8q_py_torch_requires_grad(PyObject *object);

/* torch_refusals.c: interns the attribute names it reads; 0, or -1 with an
 * exception. Called once at module execution. */
int fp8q_py_torch_init(void);

/* ------------------------------------------------------------------------- */
/* dlpack_view.c: below both DLPack files                                    */

/* fp8q_dl_tensor_view (core/dlpack.h): 0 and *view, or -1 with its error
 * raised (BufferError, TypeError or ValueError naming `argument_name`). */
int fp8q_py_view_from_dl_tensor(const fp8q_dl_tensor *dl_tensor,
                                const char *argument_name,
                                int reinterpret_dtype, fp8q_view *view,
                                int *unsupported_dtype);

/* The CUDA device of DLPack device `device`, opened: 0 and *cuda (NULL for
 * any other device type), or -1 with fp8q.CudaError. */
int fp8q_py_dl_cuda_device(const fp8q_dl_device *device,
                           const fp8q_cuda_device **cuda);

/* ------------------------------------------------------------------------- */
/* dlpack_exchange.c: DLPack's C exchange API (PyTorch's tensors, in C)      */

/* 0 and *api: the exchange table of object's type (looked up once per
 * type), or NULL for a type with no DLPack 1.x table holding every entry
 * fp8q calls (fp8q.Tensor, NumPy arrays, torch < 2.10); -1 with an
 * exception when the lookup itself failed. */
int fp8q_py_exchange_api(PyObject *object, const fp8q_dl_exchange_api **api);

/* Whether `object` exports DLPack: a type with a known exchange table, or
 * an object with __dlpack__ (PyObject_HasAttrString's answer). */
int fp8q_py_has_dlpack(PyObject *object);

/* core/dlpack.h's fp8q_dl_current_stream as a stream handle: the
 * producer's current work stream on `device` (torch's current CUDA stream
 * there; NULL for the CPU). 0, or -1 with an exception. */
int fp8q_py_producer_stream(const fp8q_dl_exchange_api *api,
                            const fp8q_dl_device *device,
                            fp8q_cu_stream *stream);

/* A Tensor viewing `object`'s memory through the non-owning export (no
 * copy; it keeps `object` alive, but the producer promises the view only
 * until control returns to it: for use within one call), CUDA memory
 * marked as last used on the producer's current stream of its device;
 * NULL with an exception naming `argument_name`, and *unsupported_dtype
 * (may be NULL) set when the dtype alone is the problem. */
fp8q_TensorObject *fp8q_py_exchange_import(const fp8q_dl_exchange_api *api,
                                           PyObject *object,
                                           const char *argument_name,
                                           int *unsupported_dtype);

/* A new C-contiguous producer tensor (e.g. a torch.Tensor from torch's
 * caching allocator) of `dtype` and `shape` on `device`, uninitialised;
 * returns it (new reference) and sets *tensor to a new fp8q view of it
 * (last used on `stream`). NULL with an exception. */
PyObject *fp8q_py_exchange_empty(const fp8q_dl_exchange_api *api,
                                 fp8q_dtype dtype, int ndim,
                                 const int64_t *shape,
                                 const fp8q_py_device *device,
                                 fp8q_cu_stream stream,
                                 fp8q_TensorObject **tensor);

/* `bytes` of uninitialised scratch memory (uint8, 1-D) on `device` from
 * the producer's allocator, for one call's temporaries: an fp8q view owning
 * the producer's managed tensor through a capsule, with no producer object
 * made; the memory goes back to the producer's allocator (stream-ordered,
 * as a freed producer tensor's would) when the last view of it goes. Last
 * used on `stream`. NULL with an exception. */
fp8q_TensorObject *fp8q_py_exchange_scratch(const fp8q_dl_exchange_api *api,
                                            int64_t bytes,
                                            const fp8q_py_device *device,
                                            fp8q_cu_stream stream);

/* Tensor.__dlpack__(*, stream=None, max_version=None, dl_device=None,
 * copy=None) and Tensor.__dlpack_device__() (methods of fp8q.Tensor). */
PyObject *fp8q_tensor_dlpack(PyObject *self, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *kwnames);
PyObject *fp8q_tensor_dlpack_device(PyObject *self, PyObject *unused);

/* ------------------------------------------------------------------------- */
/* Per-file module initialisation of the files that add types (module.c     */
/* calls them first, in this order): each adds its types and functions to  */
/* `module` and returns 0, or -1 with an error.                            */

int fp8q_py_errors_init(PyObject *module);
int fp8q_py_dtype_init(PyObject *module);
int fp8q_py_tensor_init(PyObject *module);
int fp8q_py_calibration_init(PyObject *module);

/* The files that add no type export their functions as one table each,
 * `PyMethodDef fp8q_py_<name>_functions[] = {...}` at the start of a line,
 * ending in a NULL entry: the build finds them (csrc/registries.py) and
 * module.c adds them all to the module, so they are declared nowhere here. */

#endif /* FP8Q_PYTHON_BINDING_H */
