/*
 * dlpack.c - DLPack interchange: fp8q.Tensor.__dlpack__ / __dlpack_device__
 * (producer) and fp8q.from_dlpack (consumer).
 *
 * Ownership rules (DLPack Python specification): a capsule named "dltensor"
 * or "dltensor_versioned" owns its managed tensor; its destructor calls the
 * deleter. A consumer takes ownership by renaming the capsule to
 * "used_dltensor[_versioned]" and later calls the deleter exactly once
 * itself. Capsule destructors and deleters never raise.
 */
#include <limits.h>
#include <string.h>

#include "cuda/memory.h"
#include "python/binding.h"
#include "core/dlpack.h"

/* Names of the capsules that hold a consumed managed tensor inside an
 * fp8q.Tensor (its owner); their destructors call the producer's deleter. */
#define OWNER_LEGACY "fp8q.dlpack_owner"
#define OWNER_VERSIONED "fp8q.dlpack_versioned_owner"

/* ------------------------------------------------------------------------- */
/* Producer                                                                  */

/* The release callback of fp8q's exports (core/dlpack.c makes them; their
 * manager_ctx is the exported fp8q.Tensor, a strong reference): drops it.
 * Deleters may be called from any thread, with or without the GIL; after
 * interpreter shutdown the reference is leaked rather than touched. */
static void release_exported_tensor(void *manager_ctx)
{
    PyGILState_STATE state;

    if (manager_ctx == NULL || !Py_IsInitialized()) {
        return;
    }
    state = PyGILState_Ensure();
    Py_DECREF((PyObject *)manager_ctx);
    PyGILState_Release(state);
}

/* What every capsule destructor here does, never raising: unless the capsule
 * is named `used_name` (consumed: the consumer deletes it), calls the
 * deleter of the managed tensor it holds under `name`. One destructor per
 * kind of capsule, each with its names: what a capsule holds is known when
 * it is made, and its destructor runs on every exchange. */
static void destroy_capsule(PyObject *capsule, const char *name,
                            const char *used_name, int versioned)
{
    fp8q_py_saved_error saved;
    void *managed;

    if (used_name != NULL && PyCapsule_IsValid(capsule, used_name)) {
        return;
    }
    fp8q_py_error_save(&saved);
    managed = PyCapsule_GetPointer(capsule, name);
    if (managed == NULL) {
        PyErr_WriteUnraisable(capsule);
    }
    else {
        fp8q_dl_managed_delete(managed, versioned);
    }
    fp8q_py_error_restore(&saved);
}

/* Destructors of exported capsules: free only what nobody consumed. */
static void legacy_capsule_destructor(PyObject *capsule)
{
    destroy_capsule(capsule, FP8Q_DLPACK_CAPSULE_LEGACY,
                    FP8Q_DLPACK_CAPSULE_LEGACY_USED, 0);
}

static void versioned_capsule_destructor(PyObject *capsule)
{
    destroy_capsule(capsule, FP8Q_DLPACK_CAPSULE_VERSIONED,
                    FP8Q_DLPACK_CAPSULE_VERSIONED_USED, 1);
}

/* Destructors of the owner capsules of imported tensors: call the
 * producer's deleter once. */
static void legacy_owner_destructor(PyObject *owner)
{
    destroy_capsule(owner, OWNER_LEGACY, NULL, 0);
}

static void versioned_owner_destructor(PyObject *owner)
{
    destroy_capsule(owner, OWNER_VERSIONED, NULL, 1);
}

/* The value of a Python int, saturated to [LLONG_MIN, LLONG_MAX]: an int
 * beyond them is as unusable as the bound itself, and gets the caller's own
 * refusal instead of OverflowError. */
static long long saturated_long_long(PyObject *integer)
{
    int overflow = 0;
    const long long value = PyLong_AsLongLongAndOverflow(integer, &overflow);

    if (overflow != 0) {
        return overflow > 0 ? LLONG_MAX : LLONG_MIN;
    }
    return value;
}

/* Parses a (int, int) tuple argument (ints beyond long long saturate); 0 or
 * -1 with TypeError. */
static int parse_int_pair(PyObject *object, const char *argument_name,
                          const char *expected, long long *first,
                          long long *second)
{
    if (!PyTuple_Check(object) || PyTuple_GET_SIZE(object) != 2 ||
        !PyLong_Check(PyTuple_GET_ITEM(object, 0)) ||
        !PyLong_Check(PyTuple_GET_ITEM(object, 1))) {
        PyErr_Format(PyExc_TypeError, "%s: expected %s, got %R",
                     argument_name, expected, object);
        return -1;
    }
    *first = saturated_long_long(PyTuple_GET_ITEM(object, 0));
    *second = saturated_long_long(PyTuple_GET_ITEM(object, 1));
    return 0;
}

/* Raises the refusal `refusal` (fp8q_dl_plan_export's) of an export of
 * `tensor` given dl_device and stream; NULL. */
static PyObject *refuse_export(const fp8q_TensorObject *tensor, int refusal,
                               PyObject *dl_device, PyObject *stream)
{
    switch (refusal) {
    case FP8Q_DL_EXPORT_BAD_DL_DEVICE:
        PyErr_Format(PyExc_BufferError,
                     "dl_device: the tensor is on DLPack device (%d, %d); "
                     "fp8q exports it to %R only as a copy (copy=True) to "
                     "the CPU (1, 0) or a CUDA device (2, N)",
                     tensor->device_type, tensor->device_index, dl_device);
        break;
    case FP8Q_DL_EXPORT_CPU_STREAM:
        PyErr_Format(PyExc_ValueError,
                     "stream: a CPU tensor accepts only stream=None, got %R",
                     stream);
        break;
    case FP8Q_DL_EXPORT_STREAM_TYPE:
        PyErr_Format(PyExc_TypeError,
                     "stream: expected None or an int (the consumer's CUDA "
                     "stream), got %R",
                     stream);
        break;
    default:
        PyErr_Format(PyExc_ValueError,
                     "stream: %R is not a CUDA stream for DLPack (0 is "
                     "ambiguous: pass 1 for the legacy default stream, 2 for "
                     "the per-thread default stream, -1 for no ordering, or "
                     "a stream handle)",
                     stream);
    }
    return NULL;
}

PyObject *fp8q_tensor_dlpack(PyObject *self, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const keywords[] = {"stream", "max_version",
                                           "dl_device", "copy", NULL};
    fp8q_TensorObject *tensor = (fp8q_TensorObject *)self;
    fp8q_TensorObject *source;
    PyObject *stream = Py_None;
    PyObject *max_version = Py_None;
    PyObject *dl_device = Py_None;
    PyObject *copy_object = Py_None;
    fp8q_dl_export_request request;
    fp8q_dl_export_plan plan;
    PyObject *capsule;
    void *block;
    long long minor;
    int refusal;

    if (fp8q_py_parse_arguments(args, nargs, kwnames, "|$OOOO:__dlpack__",
                                keywords, &stream, &max_version, &dl_device,
                                &copy_object) < 0) {
        return NULL;
    }
    memset(&request, 0, sizeof request);
    request.device_type = tensor->device_type;
    request.device_id = tensor->device_index;
    request.has_max_version = max_version != Py_None;
    if (request.has_max_version &&
        parse_int_pair(max_version, "max_version",
                       "None or a (major, minor) tuple of ints",
                       &request.max_major, &minor) < 0) {
        return NULL;
    }
    request.copy =
        copy_object == Py_None ? -1 : PyObject_IsTrue(copy_object);
    request.has_dl_device = dl_device != Py_None;
    if ((copy_object != Py_None && request.copy < 0) ||
        (request.has_dl_device &&
         parse_int_pair(dl_device, "dl_device",
                        "None or a (device_type, device_id) tuple of ints",
                        &request.dl_device_type,
                        &request.dl_device_id) < 0)) {
        return NULL;
    }
    if (stream != Py_None) {
        request.stream_kind =
            PyLong_Check(stream) && !PyBool_Check(stream) ? 1 : 2;
    }
    if (request.stream_kind == 1) {
        request.stream_value = saturated_long_long(stream);
    }
    refusal = fp8q_dl_plan_export(&request, &plan);
    if (refusal != 0) {
        return refuse_export(tensor, refusal, dl_device, stream);
    }
    if (plan.order &&
        fp8q_py_use_on_stream(tensor, (fp8q_cu_stream)plan.stream) < 0) {
        return NULL;
    }
    if (tensor->readonly && !plan.versioned && !plan.copy) {
        PyErr_SetString(PyExc_BufferError,
                        "the tensor is read-only and a legacy (unversioned) "
                        "DLPack capsule cannot say so; pass "
                        "max_version=(1, 0) or later, or copy=True");
        return NULL;
    }

    if (plan.move) {
        const fp8q_py_device target = {plan.target_type, plan.target_id};

        source = fp8q_tensor_copy_to(tensor, &target,
                                     fp8q_py_last_stream(tensor));
    }
    else if (plan.copy) {
        source = fp8q_tensor_copy_as(tensor, tensor->view.dtype);
    }
    else {
        source = (fp8q_TensorObject *)Py_NewRef(self);
    }
    if (source == NULL) {
        return NULL;
    }
    block = fp8q_dl_export_new(
        &source->view, source->device_type, source->device_index,
        plan.versioned,
        (source->readonly ? FP8Q_DLPACK_FLAG_READ_ONLY : 0) |
            (plan.copy ? FP8Q_DLPACK_FLAG_IS_COPIED : 0),
        source, release_exported_tensor);
    if (block == NULL) {
        Py_DECREF(source);
        return PyErr_NoMemory();
    }
    capsule = plan.versioned
                  ? PyCapsule_New(block, FP8Q_DLPACK_CAPSULE_VERSIONED,
                                  versioned_capsule_destructor)
                  : PyCapsule_New(block, FP8Q_DLPACK_CAPSULE_LEGACY,
                                  legacy_capsule_destructor);
    if (capsule == NULL) {
        /* drops source, frees the block */
        fp8q_dl_managed_delete(block, plan.versioned);
    }
    return capsule;
}

PyObject *fp8q_tensor_dlpack_device(PyObject *self, PyObject *unused)
{
    fp8q_TensorObject *tensor = (fp8q_TensorObject *)self;

    (void)unused;
    return Py_BuildValue("(ii)", tensor->device_type, tensor->device_index);
}

/* ------------------------------------------------------------------------- */
/* Consumer                                                                  */

/* Takes over a DLPack capsule: a Tensor viewing its data, owning the managed
 * tensor (the capsule is renamed "used_..."). */
static fp8q_TensorObject *tensor_from_capsule(PyObject *capsule,
                                              const char *argument_name,
                                              int reinterpret_dtype,
                                              int *unsupported_dtype,
                                              fp8q_cu_stream stream)
{
    const int versioned =
        PyCapsule_IsValid(capsule, FP8Q_DLPACK_CAPSULE_VERSIONED);
    const fp8q_cuda_device *cuda;
    fp8q_TensorObject *tensor;
    fp8q_dl_device device;
    fp8q_error error;
    fp8q_status status;
    PyObject *owner;
    fp8q_view view;
    void *managed;
    int readonly;

    if (!versioned &&
        !PyCapsule_IsValid(capsule, FP8Q_DLPACK_CAPSULE_LEGACY)) {
        const char *name = PyCapsule_GetName(capsule);

        PyErr_Clear();
        if (name != NULL &&
            (strcmp(name, FP8Q_DLPACK_CAPSULE_VERSIONED_USED) == 0 ||
             strcmp(name, FP8Q_DLPACK_CAPSULE_LEGACY_USED) == 0)) {
            PyErr_Format(PyExc_BufferError,
                         "%s: the DLPack capsule was already consumed",
                         argument_name);
            return NULL;
        }
        PyErr_Format(PyExc_TypeError,
                     "%s: expected a DLPack capsule named 'dltensor' or "
                     "'dltensor_versioned', got a capsule named '%s'",
                     argument_name, name == NULL ? "(null)" : name);
        return NULL;
    }
    managed = PyCapsule_GetPointer(capsule,
                                   versioned ? FP8Q_DLPACK_CAPSULE_VERSIONED
                                             : FP8Q_DLPACK_CAPSULE_LEGACY);
    status = fp8q_dl_managed_view(managed, versioned, argument_name,
                                  reinterpret_dtype, &view, &readonly,
                                  &device, unsupported_dtype, &error);
    /* CUDA memory: the device must open before the capsule is consumed. */
    if (fp8q_py_raise_on_failure(status, &error) < 0 ||
        fp8q_py_dl_cuda_device(&device, &cuda) < 0) {
        return NULL;
    }
    /* The managed tensor is ours from the rename on. */
    if (PyCapsule_SetName(capsule,
                          versioned ? FP8Q_DLPACK_CAPSULE_VERSIONED_USED
                                    : FP8Q_DLPACK_CAPSULE_LEGACY_USED) < 0) {
        return NULL;
    }
    owner = versioned ? PyCapsule_New(managed, OWNER_VERSIONED,
                                      versioned_owner_destructor)
                      : PyCapsule_New(managed, OWNER_LEGACY,
                                      legacy_owner_destructor);
    if (owner == NULL) {
        fp8q_py_saved_error saved;

        fp8q_py_error_save(&saved);
        fp8q_dl_managed_delete(managed, versioned);
        fp8q_py_error_restore(&saved);
        return NULL;
    }
    tensor = fp8q_py_new_view_on(&view, owner, readonly, cuda, stream);
    Py_DECREF(owner);
    return tensor;
}

/* The producer's DLPack device type from __dlpack_device__() (the CPU for
 * producers without one); BufferError unless it is the CPU or CUDA. Checked
 * before exporting, so that the export can be asked for the right stream. */
static int check_producer_device(PyObject *object, const char *argument_name,
                                 int *device_type_out)
{
    PyObject *method = PyObject_GetAttrString(object, "__dlpack_device__");
    PyObject *device;
    long long device_type, device_id;

    *device_type_out = FP8Q_DL_CPU;
    if (method == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return -1;
        }
        PyErr_Clear();
        return 0;
    }
    device = PyObject_CallNoArgs(method);
    Py_DECREF(method);
    if (device == NULL) {
        return -1;
    }
    if (parse_int_pair(device, "__dlpack_device__()",
                       "a (device_type, device_id) tuple of ints",
                       &device_type, &device_id) < 0) {
        Py_DECREF(device);
        return -1;
    }
    if (device_type != FP8Q_DL_CPU && device_type != FP8Q_DL_CUDA) {
        PyErr_Format(PyExc_BufferError,
                     "%s: the data is on DLPack device %R; fp8q reads CPU "
                     "(1, 0) and CUDA (2, N) memory",
                     argument_name, device);
        Py_DECREF(device);
        return -1;
    }
    Py_DECREF(device);
    *device_type_out = (int)device_type;
    return 0;
}

/* Calls object.__dlpack__(max_version=(1, 1)), or object.__dlpack__() for
 * producers that predate max_version (TypeError); a CUDA producer also gets
 * stream=, the consumer's stream (1 for the legacy default stream, NULL;
 * else the handle), on which it makes its pending work visible. New
 * reference. */
static PyObject *export_capsule(PyObject *method, const char *argument_name,
                                int device_type, fp8q_cu_stream stream)
{
    const unsigned long long handle =
        stream == NULL ? 1ull : (unsigned long long)(uintptr_t)stream;
    PyObject *keywords =
        device_type == FP8Q_DL_CUDA
            ? Py_BuildValue("{s:(ii),s:K}", "max_version",
                            FP8Q_DLPACK_MAJOR_VERSION,
                            FP8Q_DLPACK_MINOR_VERSION, "stream", handle)
            : Py_BuildValue("{s:(ii)}", "max_version",
                            FP8Q_DLPACK_MAJOR_VERSION,
                            FP8Q_DLPACK_MINOR_VERSION);
    PyObject *capsule;

    if (keywords == NULL) {
        return NULL;
    }
    capsule = PyObject_VectorcallDict(method, NULL, 0, keywords);
    if (capsule == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        capsule = PyDict_DelItemString(keywords, "max_version") < 0
                      ? NULL
                      : PyObject_VectorcallDict(method, NULL, 0, keywords);
    }
    if (capsule != NULL && !PyCapsule_CheckExact(capsule)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: __dlpack__() returned %s, not a DLPack capsule",
                     argument_name, Py_TYPE(capsule)->tp_name);
        Py_CLEAR(capsule);
    }
    Py_DECREF(keywords);
    return capsule;
}

/* The consumer of a producer through __dlpack__. After a failed __dlpack__(),
 * with allow_torch_fallback, a PyTorch float8 tensor is imported through
 * its uint8 view (fp8q_py_torch_float8_bytes) as its own float8 dtype or as
 * reinterpret_dtype. */
static fp8q_TensorObject *import_object(PyObject *object,
                                        const char *argument_name,
                                        int reinterpret_dtype,
                                        int *unsupported_dtype,
                                        int allow_torch_fallback,
                                        fp8q_cu_stream stream)
{
    PyObject *method;
    PyObject *capsule;
    fp8q_TensorObject *tensor;
    fp8q_dtype dtype;
    int device_type;

    method = PyObject_GetAttrString(object, "__dlpack__");
    if (method == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "%s: expected a DLPack producer (an object with "
                         "__dlpack__) or a DLPack capsule, got %s",
                         argument_name, Py_TYPE(object)->tp_name);
        }
        return NULL;
    }
    if (check_producer_device(object, argument_name, &device_type) < 0) {
        Py_DECREF(method);
        return NULL;
    }
    capsule = export_capsule(method, argument_name, device_type, stream);
    Py_DECREF(method);
    if (capsule == NULL) {
        PyObject *bytes = allow_torch_fallback
                              ? fp8q_py_torch_float8_bytes(object, &dtype)
                              : NULL;

        if (bytes == NULL) {
            return NULL;
        }
        tensor = import_object(
            bytes, argument_name,
            reinterpret_dtype >= 0 ? reinterpret_dtype : (int)dtype, NULL, 0,
            stream);
        Py_DECREF(bytes);
        return tensor;
    }
    tensor = tensor_from_capsule(capsule, argument_name, reinterpret_dtype,
                                 unsupported_dtype, stream);
    /* Unless consumed, the capsule's destructor releases the export. */
    Py_DECREF(capsule);
    return tensor;
}

/* Through the C exchange table `api`: the producer's owning export, taken
 * over as tensor_from_capsule takes a capsule, its CUDA memory last used on
 * the producer's current stream, or with `consumer` (not NULL) on
 * *consumer, ordered after that stream (fp8q_py_use_on_stream), as a
 * producer orders it for __dlpack__(stream=*consumer). NULL with an
 * exception, or NULL without one when the producer refused the export
 * (its C++ message, e.g. torch's, carries a backtrace: __dlpack__ then
 * says why in Python's terms). */
static fp8q_TensorObject *from_exchange(const fp8q_dl_exchange_api *api,
                                        PyObject *object,
                                        const char *argument_name,
                                        int *unsupported_dtype,
                                        const fp8q_cu_stream *consumer)
{
    fp8q_dl_managed_tensor_versioned *managed = NULL;
    fp8q_TensorObject *tensor;
    fp8q_cu_stream stream;
    PyObject *capsule;

    if (api->managed_tensor_from_py_object_no_sync(object, &managed) < 0 ||
        managed == NULL) {
        PyErr_Clear();
        return NULL;
    }
    capsule = fp8q_py_producer_stream(api, &managed->dl_tensor.device,
                                      &stream) < 0
                  ? NULL
                  : PyCapsule_New(managed, FP8Q_DLPACK_CAPSULE_VERSIONED,
                                  versioned_capsule_destructor);
    if (capsule == NULL) {
        fp8q_dl_managed_delete(managed, 1);
        return NULL;
    }
    tensor = tensor_from_capsule(capsule, argument_name, -1,
                                 unsupported_dtype, stream);
    Py_DECREF(capsule); /* frees the export unless the tensor took it */
    if (tensor != NULL && consumer != NULL &&
        fp8q_py_use_on_stream(tensor, *consumer) < 0) {
        Py_CLEAR(tensor);
    }
    return tensor;
}

/* Imports a DLPack capsule, or a producer: through its C exchange table
 * (from_exchange, with `consumer`) when reinterpret_dtype is -1, its type
 * has one and object does not require grad, else through
 * __dlpack__(stream=*consumer, or the legacy default stream for NULL).
 * torch views with the negative bit are refused first (torch exports their
 * stored, negated values as they are), and the failures of meta, sparse
 * and storage-less torch tensors explained. */
static fp8q_TensorObject *import_any(PyObject *object,
                                     const char *argument_name,
                                     int reinterpret_dtype,
                                     int *unsupported_dtype,
                                     const fp8q_cu_stream *consumer)
{
    const fp8q_cu_stream stream = consumer != NULL ? *consumer : NULL;
    const fp8q_dl_exchange_api *api = NULL;
    fp8q_TensorObject *tensor = NULL;

    if (unsupported_dtype != NULL) {
        *unsupported_dtype = 0;
    }
    if (PyCapsule_CheckExact(object)) {
        return tensor_from_capsule(object, argument_name, reinterpret_dtype,
                                   unsupported_dtype, stream);
    }
    if ((reinterpret_dtype < 0 &&
         fp8q_py_exchange_api(object, &api) < 0) ||
        fp8q_py_refuse_negative_view(object, argument_name) < 0) {
        return NULL;
    }
    if (api != NULL && !fp8q_py_torch_requires_grad(object)) {
        tensor = from_exchange(api, object, argument_name, unsupported_dtype,
                               consumer);
    }
    if (tensor == NULL && !PyErr_Occurred()) {
        /* __dlpack__ also refuses a tensor that requires grad, with torch's
         * own message: its memory must not change behind autograd's back. */
        tensor = import_object(object, argument_name, reinterpret_dtype,
                               unsupported_dtype, 1, stream);
    }
    if (tensor == NULL) {
        fp8q_py_explain_refused_torch_tensor(object, argument_name,
                                             unsupported_dtype);
    }
    return tensor;
}

fp8q_TensorObject *fp8q_tensor_from_dlpack(PyObject *object,
                                           const char *argument_name,
                                           int reinterpret_dtype,
                                           int *unsupported_dtype)
{
    return import_any(object, argument_name, reinterpret_dtype,
                      unsupported_dtype, NULL);
}

/* fp8q.from_dlpack(object, *, dtype=None, stream=None). */
static PyObject *from_dlpack(PyObject *module, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const keywords[] = {"", "dtype", "stream", NULL};
    fp8q_cu_stream stream;
    int reinterpret_dtype;
    PyObject *object;
    PyObject *dtype_object = Py_None;
    PyObject *stream_object = Py_None;

    (void)module;
    if (fp8q_py_parse_arguments(args, nargs, kwnames, "O|$OO:from_dlpack",
                                keywords, &object, &dtype_object,
                                &stream_object) < 0 ||
        fp8q_py_parse_stream(stream_object, "stream", &stream) < 0 ||
        fp8q_py_parse_optional_dtype(dtype_object, &reinterpret_dtype) < 0) {
        return NULL;
    }
    return (PyObject *)import_any(object, "obj", reinterpret_dtype, NULL,
                                  &stream);
}

PyMethodDef fp8q_py_dlpack_functions[] = {
    {FP8Q_PY_KEYWORDS_FUNCTION("from_dlpack", from_dlpack),
     "from_dlpack(obj, /, *, dtype=None, stream=None)\n--\n\n"
     "A zero-copy fp8q.Tensor over the memory of a DLPack producer (NumPy, "
     "PyTorch, CuPy, JAX, fp8q ...) or of an unconsumed DLPack capsule.\n"
     "obj.__dlpack__(max_version=(1, 1)) is called (obj.__dlpack__() for "
     "producers that reject max_version with TypeError); a producer whose "
     "type has DLPack's C exchange table (PyTorch 2.10 and later; subclasses "
     "inherit it, so their own __dlpack__ is not called) exports through "
     "that table instead, without a __dlpack__ call, unless dtype= is given, "
     "the tensor requires grad or the table's export fails (__dlpack__ then "
     "says why). Versioned and "
     "legacy capsules are accepted, the capsule is marked consumed, shape "
     "and strides are kept (no strides means C-contiguous), and the "
     "producer's deleter is called once when the tensor (and every view of "
     "it) is gone. A read-only versioned capsule gives a read-only tensor.\n"
     "dtype: None keeps the DLPack dtype; otherwise a dtype whose itemsize "
     "equals the element size reinterprets the bytes (e.g. uint8 data as "
     "float8_e4m3fn); ValueError when the sizes differ.\n"
     "PyTorch float8 tensors whose __dlpack__ fails are imported through "
     "tensor.view(torch.uint8).\n"
     "CUDA memory (DLPack device (2, N)) gives a CUDA tensor. The producer "
     "is called with stream= the consumer's stream (1 for the legacy default "
     "stream when stream is None; else the handle of `stream`: an int, or an "
     "object with __cuda_stream__ or .cuda_stream such as "
     "torch.cuda.Stream), so its pending work is ordered before fp8q's use "
     "on that stream (through the exchange table fp8q orders that stream "
     "after the producer's current one itself); the tensor's last use is "
     "that stream.\n"
     "Errors: TypeError for objects without __dlpack__ and for DLPack dtypes "
     "fp8q does not store (float64, int32, complex, ...; the message names "
     "the code and bits); BufferError for data neither on the CPU nor on a "
     "CUDA device, for a consumed capsule and for unsupported DLPack major "
     "versions; fp8q.CudaError when CUDA memory arrives and CUDA cannot be "
     "used, or the driver refuses that ordering; ValueError for more than "
     "16 dims."},
    {NULL, NULL, 0, NULL},
};
