/*
 * dlpack_exchange.c - the consumer side of DLPack's C exchange API
 * (`type(x).__dlpack_c_exchange_api__`, DLPack 1.3; PyTorch 2.10+): torch
 * tensors viewed, allocated and given back through C function pointers,
 * with no Python call and no capsule in between, and the producer's current
 * stream read in C. Its non-owning views, valid while the call that made
 * them runs, make one fp8q.torch layer call cheap (linear_layer.c);
 * fp8q.asarray takes an owning export from the same table and keeps it
 * like a DLPack capsule (dlpack.c). Types without a table go through
 * `__dlpack__`.
 */
#include <string.h>

#include "python/binding.h"

#include "platform.h"

/* ------------------------------------------------------------------------- */
/* Finding a type's table                                                    */

/* Types seen so far (kept alive, so their addresses stay theirs) and their
 * tables, NULL for a type that publishes none fp8q reads. */
static fp8q_pointer_table known_types = FP8Q_POINTER_TABLE_INIT;

/* The table of `type`: 0 and *table (NULL when the type has no
 * `__dlpack_c_exchange_api__` capsule or one fp8q cannot use), or -1 with
 * the exception of a lookup that failed otherwise than by a missing
 * attribute. */
static int lookup(PyTypeObject *type, const fp8q_dl_exchange_api **table)
{
    PyObject *capsule = PyObject_GetAttrString((PyObject *)type,
                                               "__dlpack_c_exchange_api__");
    const fp8q_dl_exchange_api *found = NULL;

    *table = NULL;
    if (capsule == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return -1;
        }
        PyErr_Clear();
        return 0;
    }
    if (PyCapsule_IsValid(capsule, FP8Q_DLPACK_EXCHANGE_API_CAPSULE)) {
        found = (const fp8q_dl_exchange_api *)PyCapsule_GetPointer(
            capsule, FP8Q_DLPACK_EXCHANGE_API_CAPSULE);
    }
    Py_DECREF(capsule);
    if (found != NULL && fp8q_dl_exchange_api_usable(found)) {
        *table = found;
    }
    return 0;
}

/* fp8q_py_exchange_api for a type it has seen already: 1 and *api (NULL
 * for a type without a table), or 0 for a type not seen yet. No lookup, no
 * exception: the question "is this a DLPack producer" asked before any
 * attribute lookup (torch tensors answer here without one). */
static int known_exchange_api(PyObject *object,
                              const fp8q_dl_exchange_api **api)
{
    const void *table;
    const int known =
        fp8q_pointer_table_find(&known_types, Py_TYPE(object), &table);

    *api = (const fp8q_dl_exchange_api *)table;
    return known;
}

int fp8q_py_exchange_api(PyObject *object, const fp8q_dl_exchange_api **api)
{
    PyTypeObject *type = Py_TYPE(object);

    if (known_exchange_api(object, api)) {
        return 0;
    }
    if (type == &fp8q_Tensor_Type || PyArray_Check(object)) {
        return 0;
    }
    if (lookup(type, api) < 0) {
        return -1;
    }
    if (fp8q_pointer_table_add(&known_types, type, *api)) {
        Py_INCREF(type); /* alive until now: `object` is one of its own */
    }
    return 0;
}

int fp8q_py_has_dlpack(PyObject *object)
{
    const fp8q_dl_exchange_api *api;

    return (known_exchange_api(object, &api) && api != NULL) ||
           PyObject_HasAttrString(object, "__dlpack__");
}

/* ------------------------------------------------------------------------- */
/* Views, streams and allocations                                            */

int fp8q_py_producer_stream(const fp8q_dl_exchange_api *api,
                            const fp8q_dl_device *device,
                            fp8q_cu_stream *stream)
{
    void *handle;
    const int result = fp8q_dl_current_stream(api, device, &handle);

    *stream = (fp8q_cu_stream)handle;
    return result;
}

fp8q_TensorObject *fp8q_py_exchange_import(const fp8q_dl_exchange_api *api,
                                           PyObject *object,
                                           const char *argument_name,
                                           int *unsupported_dtype)
{
    const fp8q_cuda_device *cuda;
    fp8q_dl_tensor dl_tensor;
    fp8q_cu_stream stream;
    fp8q_view view;

    if (api->dltensor_from_py_object_no_sync(object, &dl_tensor) < 0) {
        fp8q_py_error_add_prefix("%s: ", argument_name);
        return NULL;
    }
    if (fp8q_py_view_from_dl_tensor(&dl_tensor, argument_name, -1, &view,
                                    unsupported_dtype) < 0 ||
        fp8q_py_producer_stream(api, &dl_tensor.device, &stream) < 0 ||
        fp8q_py_dl_cuda_device(&dl_tensor.device, &cuda) < 0) {
        return NULL;
    }
    return fp8q_py_new_view_on(&view, object, 0, cuda, stream);
}

/* The allocator's error callback: raises `kind` (MemoryError or a
 * RuntimeError naming the kind) with the producer's message. */
static void set_allocation_error(void *context, const char *kind,
                                 const char *message)
{
    (void)context;
    if (kind != NULL && strcmp(kind, "MemoryError") == 0) {
        PyErr_Format(PyExc_MemoryError, "%s", message);
    }
    else {
        PyErr_Format(PyExc_RuntimeError, "%s: %s",
                     kind != NULL ? kind : "error", message);
    }
}

/* A new uninitialised C-contiguous managed tensor of `dtype` and `shape`
 * on `device` from the producer's allocator, *view of it and *cuda, its
 * opened CUDA device (NULL on the CPU); NULL with an exception. */
static fp8q_dl_managed_tensor_versioned *
allocate(const fp8q_dl_exchange_api *api, fp8q_dtype dtype, int ndim,
         const int64_t *shape, const fp8q_py_device *device,
         const fp8q_cuda_device **cuda, fp8q_view *view)
{
    fp8q_dl_managed_tensor_versioned *managed = NULL;
    fp8q_dl_tensor prototype;
    int64_t extents[FP8Q_MAX_DIMS];

    memset(&prototype, 0, sizeof prototype);
    memcpy(extents, shape, (size_t)ndim * sizeof *shape);
    prototype.device = fp8q_dl_device_of(device);
    prototype.ndim = ndim;
    prototype.dtype = fp8q_dl_data_type_of(dtype);
    prototype.shape = extents;
    if (api->managed_tensor_allocator(&prototype, &managed, NULL,
                                      set_allocation_error) < 0 ||
        managed == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_MemoryError,
                            "the tensor library's allocator failed");
        }
        return NULL;
    }
    if (fp8q_py_view_from_dl_tensor(&managed->dl_tensor, "out", -1, view,
                                    NULL) < 0 ||
        fp8q_py_dl_cuda_device(&managed->dl_tensor.device, cuda) < 0) {
        fp8q_dl_managed_delete(managed, 1);
        return NULL;
    }
    return managed;
}

PyObject *fp8q_py_exchange_empty(const fp8q_dl_exchange_api *api,
                                 fp8q_dtype dtype, int ndim,
                                 const int64_t *shape,
                                 const fp8q_py_device *device,
                                 fp8q_cu_stream stream,
                                 fp8q_TensorObject **tensor)
{
    fp8q_dl_managed_tensor_versioned *managed;
    const fp8q_cuda_device *cuda;
    PyObject *result = NULL;
    void *object = NULL;
    fp8q_view view;

    *tensor = NULL;
    /* Viewed before the producer object takes the managed tensor over. */
    managed = allocate(api, dtype, ndim, shape, device, &cuda, &view);
    if (managed == NULL) {
        return NULL;
    }
    if (api->managed_tensor_to_py_object_no_sync(managed, &object) < 0) {
        return NULL; /* the producer owns the managed tensor now */
    }
    result = (PyObject *)object;
    *tensor = fp8q_py_new_view_on(&view, result, 0, cuda, stream);
    if (*tensor == NULL) {
        Py_CLEAR(result);
    }
    return result;
}

#define SCRATCH_CAPSULE "fp8q.exchange_scratch"

/* The scratch capsule's destructor: hands the memory back to the producer
 * (never raises). */
static void release_scratch(PyObject *capsule)
{
    fp8q_dl_managed_tensor_versioned *managed =
        (fp8q_dl_managed_tensor_versioned *)PyCapsule_GetPointer(
            capsule, SCRATCH_CAPSULE);

    fp8q_dl_managed_delete(managed, 1);
    PyErr_Clear();
}

fp8q_TensorObject *fp8q_py_exchange_scratch(const fp8q_dl_exchange_api *api,
                                            int64_t bytes,
                                            const fp8q_py_device *device,
                                            fp8q_cu_stream stream)
{
    fp8q_dl_managed_tensor_versioned *managed;
    const fp8q_cuda_device *cuda;
    fp8q_TensorObject *tensor;
    PyObject *capsule;
    fp8q_view view;

    managed = allocate(api, FP8Q_UINT8, 1, &bytes, device, &cuda, &view);
    if (managed == NULL) {
        return NULL;
    }
    capsule = PyCapsule_New(managed, SCRATCH_CAPSULE, release_scratch);
    if (capsule == NULL) {
        fp8q_dl_managed_delete(managed, 1);
        return NULL;
    }
    tensor = fp8q_py_new_view_on(&view, capsule, 0, cuda, stream);
    Py_DECREF(capsule); /* the view owns it now */
    return tensor;
}

/* ------------------------------------------------------------------------- */
/* fp8q._C._dlpack_exchange_usable                                           */

static PyObject *exchange_usable(PyObject *module, PyObject *object)
{
    const fp8q_dl_exchange_api *api;

    (void)module;
    if (fp8q_py_exchange_api(object, &api) < 0) {
        return NULL;
    }
    return PyBool_FromLong(api != NULL);
}

PyMethodDef fp8q_py_dlpack_exchange_functions[] = {
    {"_dlpack_exchange_usable", exchange_usable, METH_O,
     "_dlpack_exchange_usable(obj)\n--\n\nWhether fp8q reads obj's type "
     "through DLPack's C exchange API (a DLPack 1.x table with every entry "
     "fp8q calls), as it does torch.Tensor from PyTorch 2.10 on."},
    {NULL, NULL, 0, NULL},
};
