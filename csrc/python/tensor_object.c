/*
 * tensor_object.c - the fp8q.Tensor type: an N-d strided view of typed
 * memory that either owns a 64-byte aligned block or keeps the producer of
 * borrowed memory alive (made by tensor_new.c); its attributes, views (.T,
 * .view, .reshape: layouts from core/view_layout.c), copies, conversion to
 * NumPy (.numpy, __array__) and repr. fp8q.empty / fp8q.zeros are in
 * tensor_factories.c.
 */
#include "cuda/memory.h"
#include "core/view_layout.h"
#include "platform.h"
#include "python/binding.h"

/* ------------------------------------------------------------------------- */
/* NumPy                                                                     */

/* A NumPy array viewing the tensor's memory with `descr` (stolen), whose base
 * is the tensor; read-only when the tensor is. */
static PyObject *tensor_as_numpy(fp8q_TensorObject *self, PyArray_Descr *descr)
{
    npy_intp dims[FP8Q_MAX_DIMS];
    npy_intp strides[FP8Q_MAX_DIMS];
    const int64_t itemsize = (int64_t)fp8q_dtype_itemsize(self->view.dtype);
    PyObject *array;
    int axis;

    if (fp8q_py_require_host_memory(self, "a NumPy array") < 0) {
        Py_DECREF(descr);
        return NULL;
    }
    for (axis = 0; axis < self->view.ndim; axis++) {
        dims[axis] = (npy_intp)self->view.shape[axis];
        strides[axis] = (npy_intp)(self->view.strides[axis] * itemsize);
    }
    array = PyArray_NewFromDescr(&PyArray_Type, descr, self->view.ndim, dims,
                                 strides, self->view.data,
                                 self->readonly ? 0 : NPY_ARRAY_WRITEABLE,
                                 NULL);
    if (array == NULL) {
        return NULL;
    }
    Py_INCREF(self);
    if (PyArray_SetBaseObject((PyArrayObject *)array, (PyObject *)self) < 0) {
        Py_DECREF(array);
        return NULL;
    }
    return array;
}

static PyObject *tensor_numpy(PyObject *object, PyObject *unused)
{
    fp8q_TensorObject *self = (fp8q_TensorObject *)object;
    PyArray_Descr *descr;

    (void)unused;
    descr = fp8q_py_numpy_descr(self->view.dtype);
    if (descr == NULL) {
        return NULL;
    }
    return tensor_as_numpy(self, descr);
}

/* A NumPy array that shows the tensor's values: the zero-copy view when NumPy
 * (with ml_dtypes) has the dtype, else a float32 copy (exact). */
static PyObject *tensor_values_as_numpy(fp8q_TensorObject *self)
{
    PyArray_Descr *descr = fp8q_py_numpy_descr(self->view.dtype);
    fp8q_TensorObject *decoded;
    PyObject *array;
    int raw_codes;

    if (descr == NULL) {
        return NULL;
    }
    raw_codes = self->view.dtype != FP8Q_UINT8 &&
                (descr->type_num == NPY_UINT8 ||
                 descr->type_num == NPY_UINT16);
    if (!raw_codes) {
        return tensor_as_numpy(self, descr);
    }
    Py_DECREF(descr);
    decoded = fp8q_tensor_copy_as(self, FP8Q_FLOAT32);
    if (decoded == NULL) {
        return NULL;
    }
    array = tensor_numpy((PyObject *)decoded, NULL);
    Py_DECREF(decoded);
    return array;
}

static PyObject *tensor_array(PyObject *object, PyObject *const *args,
                              Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const keywords[] = {"dtype", "copy", NULL};
    fp8q_TensorObject *self = (fp8q_TensorObject *)object;
    PyObject *dtype_object = Py_None;
    PyObject *copy_object = Py_None;
    PyArray_Descr *requested = NULL;
    fp8q_TensorObject *converted;
    fp8q_dtype target = self->view.dtype;
    PyObject *array;
    PyObject *result;
    int copy = -1;
    int found = 1;

    if (fp8q_py_parse_arguments(args, nargs, kwnames, "|OO:__array__",
                                keywords, &dtype_object, &copy_object) < 0) {
        return NULL;
    }
    if (copy_object != Py_None) {
        copy = PyObject_IsTrue(copy_object);
        if (copy < 0) {
            return NULL;
        }
    }
    if (dtype_object != Py_None) {
        if (!PyArray_DescrConverter(dtype_object, &requested)) {
            return NULL;
        }
        found = fp8q_py_dtype_from_numpy(requested, &target);
        if (found < 0) {
            Py_DECREF(requested);
            return NULL;
        }
    }
    if (found == 1 && target == self->view.dtype) {
        Py_XDECREF(requested);
        array = tensor_numpy(object, NULL);
        if (array == NULL || copy != 1) {
            return array;
        }
        result = PyArray_NewCopy((PyArrayObject *)array, NPY_KEEPORDER);
        Py_DECREF(array);
        return result;
    }
    if (copy == 0) {
        Py_DECREF(requested);
        PyErr_Format(PyExc_ValueError,
                     "Unable to avoid copy while creating an array as "
                     "requested: the tensor's dtype is %s and a different "
                     "dtype was requested with copy=False",
                     fp8q_dtype_name(self->view.dtype));
        return NULL;
    }
    /* Convert values: into a dtype fp8q stores with the core cast, into any
     * other from the exact float32 values with NumPy. */
    converted = fp8q_tensor_copy_as(self, found == 1 ? target : FP8Q_FLOAT32);
    if (converted == NULL) {
        Py_DECREF(requested);
        return NULL;
    }
    if (found == 1) {
        /* The requested dtype object itself (its metadata kept). */
        array = tensor_as_numpy(converted, requested);
        Py_DECREF(converted);
        return array;
    }
    array = tensor_numpy((PyObject *)converted, NULL);
    Py_DECREF(converted);
    if (array == NULL) {
        Py_DECREF(requested);
        return NULL;
    }
    result = PyArray_CastToType((PyArrayObject *)array, requested, 0);
    Py_DECREF(array);
    return result;
}

/* ------------------------------------------------------------------------- */
/* repr                                                                      */

/* repr of a CPU tensor: its values, and `device` (text to end with). */
static PyObject *values_repr(fp8q_TensorObject *self, const char *device)
{
    const char *dtype = fp8q_dtype_name(self->view.dtype);
    PyObject *numpy;
    PyObject *function;
    PyObject *call_args = NULL;
    PyObject *call_kwargs = NULL;
    PyObject *text = NULL;
    PyObject *result = NULL;
    char shape[32 * FP8Q_MAX_DIMS];

    if (fp8q_view_size(&self->view) == 0) {
        /* Without NumPy, which refuses empty shapes whose other extents
         * multiply beyond its limits. */
        if (self->view.ndim == 1) {
            return PyUnicode_FromFormat("fp8q.Tensor([], dtype=%s%s)", dtype,
                                        device);
        }
        fp8q_format_shape(shape, sizeof shape, self->view.ndim,
                          self->view.shape);
        return PyUnicode_FromFormat("fp8q.Tensor([], shape=%s, dtype=%s%s)",
                                    shape, dtype, device);
    }
    numpy = PyImport_ImportModule("numpy");
    if (numpy == NULL) {
        return NULL;
    }
    function = PyObject_GetAttrString(numpy, "array2string");
    Py_DECREF(numpy);
    if (function != NULL) {
        /* "N" passes on a NULL array's exception. */
        call_args = Py_BuildValue("(N)", tensor_values_as_numpy(self));
        call_kwargs = Py_BuildValue("{s:s,s:s}", "separator", ", ", "prefix",
                                    "fp8q.Tensor(");
    }
    if (call_args != NULL && call_kwargs != NULL) {
        text = PyObject_Call(function, call_args, call_kwargs);
    }
    if (text != NULL) {
        result = PyUnicode_FromFormat("fp8q.Tensor(%U, dtype=%s%s)", text,
                                      dtype, device);
    }
    Py_XDECREF(function);
    Py_XDECREF(call_args);
    Py_XDECREF(call_kwargs);
    Py_XDECREF(text);
    return result;
}

static PyObject *tensor_repr(PyObject *object)
{
    static const fp8q_py_device cpu = {FP8Q_DEVICE_CPU, 0};
    fp8q_TensorObject *self = (fp8q_TensorObject *)object;
    fp8q_TensorObject *host;
    PyObject *result;
    char device[48];

    if (self->device_type != FP8Q_DEVICE_CUDA) {
        return values_repr(self, "");
    }
    /* A CUDA tensor: its values, brought to the CPU, and the device. */
    host = fp8q_tensor_copy_to(self, &cpu, fp8q_py_last_stream(self));
    if (host == NULL) {
        return NULL;
    }
    PyOS_snprintf(device, sizeof device, ", device='cuda:%d'",
                  self->device_index);
    result = values_repr(host, device);
    Py_DECREF(host);
    return result;
}

/* ------------------------------------------------------------------------- */
/* Attributes                                                                */

static PyObject *int64_tuple(int count, const int64_t *values)
{
    PyObject *tuple = PyTuple_New(count);
    int index;

    if (tuple == NULL) {
        return NULL;
    }
    for (index = 0; index < count; index++) {
        PyObject *item = PyLong_FromLongLong((long long)values[index]);

        if (item == NULL) {
            Py_DECREF(tuple);
            return NULL;
        }
        PyTuple_SET_ITEM(tuple, index, item);
    }
    return tuple;
}

/* The two hot getters (read on every call of a layer or op wrapper) have
 * their own functions. */
static PyObject *tensor_get_shape(PyObject *object, void *closure)
{
    fp8q_TensorObject *self = (fp8q_TensorObject *)object;

    (void)closure;
    return int64_tuple(self->view.ndim, self->view.shape);
}

static PyObject *tensor_get_dtype(PyObject *object, void *closure)
{
    (void)closure;
    return fp8q_py_dtype_object(((fp8q_TensorObject *)object)->view.dtype);
}

/* The other getters of fp8q.Tensor but T: the closure points to one of
 * these attribute codes. */
enum { STRIDES, DEVICE, NDIM, SIZE, NBYTES, DATA_PTR, READONLY };
static int tensor_attributes[] = {STRIDES, DEVICE,   NDIM,    SIZE,
                                  NBYTES,  DATA_PTR, READONLY};

static PyObject *tensor_get(PyObject *object, void *closure)
{
    fp8q_TensorObject *self = (fp8q_TensorObject *)object;
    char device[32];

    switch (*(const int *)closure) {
    case STRIDES:
        return int64_tuple(self->view.ndim, self->view.strides);
    case DEVICE:
        fp8q_device_format(self->device_type, self->device_index, device,
                           sizeof device);
        return PyUnicode_FromString(device);
    case NDIM:
        return PyLong_FromLong(self->view.ndim);
    case SIZE:
        return PyLong_FromLongLong((long long)fp8q_view_size(&self->view));
    case NBYTES:
        return PyLong_FromLongLong((long long)fp8q_view_nbytes(&self->view));
    case DATA_PTR:
        return PyLong_FromVoidPtr(self->view.data);
    default:
        return PyBool_FromLong(self->readonly);
    }
}

static PyObject *tensor_get_transpose(PyObject *object, void *closure)
{
    fp8q_TensorObject *self = (fp8q_TensorObject *)object;
    fp8q_view view;

    (void)closure;
    if (self->view.ndim < 2) {
        Py_INCREF(object);
        return object;
    }
    if (self->view.ndim > 2) {
        PyErr_Format(PyExc_ValueError,
                     "Tensor.T: defined for tensors of at most 2 dims, got a "
                     "tensor of %d dims",
                     self->view.ndim);
        return NULL;
    }
    fp8q_view_transpose_2d(&self->view, &view);
    return (PyObject *)fp8q_tensor_new_view(&view, object, self->readonly);
}

static PyGetSetDef tensor_getset[] = {
    {"shape", tensor_get_shape, NULL, "The extents, a tuple of ints.", NULL},
    {"strides", tensor_get, NULL,
     "The strides in elements (not bytes), a tuple of ints; they may be zero "
     "or negative for views of other libraries' memory.",
     &tensor_attributes[STRIDES]},
    {"dtype", tensor_get_dtype, NULL, "The element type, an fp8q.dtype.",
     NULL},
    {"device", tensor_get, NULL,
     "Where the data lives: 'cpu' (or 'cuda:N' with the CUDA backend).",
     &tensor_attributes[DEVICE]},
    {"ndim", tensor_get, NULL, "The number of dimensions (0 to 16).",
     &tensor_attributes[NDIM]},
    {"size", tensor_get, NULL,
     "The number of elements (1 for a 0-d tensor).",
     &tensor_attributes[SIZE]},
    {"nbytes", tensor_get, NULL, "size * dtype.itemsize.",
     &tensor_attributes[NBYTES]},
    {"data_ptr", tensor_get, NULL,
     "The address of element (0, ..., 0) as an int.",
     &tensor_attributes[DATA_PTR]},
    {"readonly", tensor_get, NULL,
     "True when the memory came from a read-only producer; writes through "
     "the buffer protocol, DLPack, .numpy() and out= are refused.",
     &tensor_attributes[READONLY]},
    {"T", tensor_get_transpose, NULL,
     "The transpose of a 2-D tensor as a view sharing its memory; a 0-d or "
     "1-d tensor itself; ValueError for more than 2 dims.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* ------------------------------------------------------------------------- */
/* Methods                                                                   */

static PyObject *tensor_is_contiguous(PyObject *object, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(
        fp8q_view_is_contiguous(&((fp8q_TensorObject *)object)->view));
}

static PyObject *tensor_copy(PyObject *object, PyObject *unused)
{
    fp8q_TensorObject *self = (fp8q_TensorObject *)object;

    (void)unused;
    return (PyObject *)fp8q_tensor_copy_as(self, self->view.dtype);
}

static PyObject *tensor_contiguous(PyObject *object, PyObject *unused)
{
    if (fp8q_view_is_contiguous(&((fp8q_TensorObject *)object)->view)) {
        Py_INCREF(object);
        return object;
    }
    return tensor_copy(object, unused);
}

static PyObject *tensor_reshape(PyObject *object, PyObject *args)
{
    fp8q_TensorObject *self = (fp8q_TensorObject *)object;
    /* One int or sequence, or several ints; one extent may be -1. */
    PyObject *given = PyTuple_GET_SIZE(args) == 1 ? PyTuple_GET_ITEM(args, 0)
                                                  : args;
    fp8q_TensorObject *source;
    fp8q_TensorObject *result = NULL;
    fp8q_view view;
    fp8q_error error;
    int64_t shape[FP8Q_MAX_DIMS];
    int ndim;

    if (PyTuple_GET_SIZE(args) == 0) {
        PyErr_SetString(PyExc_TypeError,
                        "Tensor.reshape() takes a shape (reshape(()) for a "
                        "0-d tensor), got no arguments");
        return NULL;
    }
    if (fp8q_py_parse_extents(given, &ndim, shape) < 0 ||
        fp8q_py_raise_on_failure(
            fp8q_view_reshape_shape(&self->view, ndim, shape,
                                    "Tensor.reshape", &error),
            &error) < 0) {
        return NULL;
    }
    source = (fp8q_TensorObject *)tensor_contiguous(object, NULL);
    if (source != NULL &&
        fp8q_py_raise_on_failure(
            fp8q_view_init_contiguous(&view, source->view.data,
                                      source->view.dtype, ndim, shape,
                                      &error),
            &error) == 0) {
        result = fp8q_tensor_new_view(&view, (PyObject *)source,
                                      source->readonly);
    }
    Py_XDECREF(source);
    return (PyObject *)result;
}

static PyObject *tensor_view_as(PyObject *object, PyObject *dtype_object)
{
    fp8q_TensorObject *self = (fp8q_TensorObject *)object;
    fp8q_dtype dtype;
    fp8q_view view;
    fp8q_error error;

    if (fp8q_py_parse_dtype(dtype_object, "dtype", &dtype) < 0 ||
        fp8q_py_raise_on_failure(
            fp8q_view_recut_last_axis(&self->view, dtype, &view,
                                      "Tensor.view", &error),
            &error) < 0) {
        return NULL;
    }
    return (PyObject *)fp8q_tensor_new_view(&view, object, self->readonly);
}

static Py_ssize_t tensor_length(PyObject *object)
{
    fp8q_TensorObject *self = (fp8q_TensorObject *)object;

    if (self->view.ndim == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of a 0-d tensor");
        return -1;
    }
    return (Py_ssize_t)self->view.shape[0];
}

static PyMethodDef tensor_methods[] = {
    {"to", (PyCFunction)(void (*)(void))fp8q_tensor_to,
     METH_FASTCALL | METH_KEYWORDS,
     "to(device, *, stream=None, copy=False)\n--\n\n"
     "The tensor on `device` ('cpu', 'cuda', 'cuda:N', an int N or a "
     "torch.device): the tensor itself when it is already there (unless "
     "copy=True), else a new C-contiguous tensor holding a bit-exact copy. "
     "The copy is ordered on `stream` (None: the legacy default stream; an "
     "int handle, or an object with __cuda_stream__ or .cuda_stream such as "
     "torch.cuda.Stream) after the tensor's last use; copies between host "
     "and device have finished when this returns. Strided CUDA tensors are "
     "gathered on their GPU; copies between two GPUs go through host "
     "memory."},
    {"cpu", (PyCFunction)(void (*)(void))fp8q_tensor_cpu,
     METH_FASTCALL | METH_KEYWORDS,
     "cpu(*, stream=None)\n--\n\n"
     "to('cpu', stream=stream): the tensor itself on the CPU, else a new "
     "C-contiguous CPU copy, complete when this returns."},
    {"is_contiguous", tensor_is_contiguous, METH_NOARGS,
     "is_contiguous()\n--\n\n"
     "True when the elements are laid out in C (row-major) order without "
     "gaps; the strides of extents of 1 do not matter."},
    {"contiguous", tensor_contiguous, METH_NOARGS,
     "contiguous()\n--\n\n"
     "The tensor itself when is_contiguous(), else a new C-contiguous copy "
     "(bit-exact) in newly allocated, 64-byte aligned memory."},
    {"copy", tensor_copy, METH_NOARGS,
     "copy()\n--\n\n"
     "A new C-contiguous, writable tensor with the same dtype and a "
     "bit-exact copy of the elements (NaN payloads included)."},
    {"reshape", tensor_reshape, METH_VARARGS,
     "reshape(*shape)\n--\n\nThe same elements in C order with a new shape "
     "(ints or one sequence; one extent may be -1, inferred): a view sharing "
     "memory when the tensor is C-contiguous, else a view of a contiguous "
     "copy. ValueError when the sizes differ."},
    {"view", tensor_view_as, METH_O,
     "view(dtype, /)\n--\n\n"
     "A tensor sharing this one's memory whose bytes are read as `dtype`. "
     "With the same itemsize (e.g. uint8 <-> float8_e4m3fn, float16 <-> "
     "bfloat16) shape and strides are kept; otherwise, as in NumPy, the "
     "contiguous last axis is re-cut (uint8 (N, 2K) -> bfloat16 (N, K), "
     "float32 (N,) -> uint8 (4N,)), and ValueError when the layout does not "
     "allow it."},
    {"numpy", tensor_numpy, METH_NOARGS,
     "numpy()\n--\n\n"
     "A NumPy array sharing the tensor's memory (zero-copy; its base is the "
     "tensor, which it keeps alive). float32, float16 and uint8 map to the "
     "NumPy dtypes; bfloat16 and the FP8 dtypes to the ml_dtypes dtypes when "
     "ml_dtypes is importable, else to uint16 / uint8 arrays of the raw "
     "codes. The array is read-only when the tensor is."},
    {"__array__", (PyCFunction)(void (*)(void))tensor_array,
     METH_FASTCALL | METH_KEYWORDS,
     "__array__(dtype=None, copy=None)\n--\n\n"
     "NumPy's array protocol. Without dtype (or with the NumPy dtype of the "
     "tensor's own dtype): the zero-copy array of numpy(), copied when "
     "copy=True. With another dtype the values are converted (a dtype fp8q "
     "stores: by the fp8q cast, saturating; any other: from the exact "
     "float32 values by NumPy), and copy=False raises ValueError. Note that "
     "np.asarray(tensor) prefers the buffer protocol, which exports bfloat16 "
     "and FP8 as raw codes: use tensor.numpy() for their values."},
    {"__dlpack__", (PyCFunction)(void (*)(void))fp8q_tensor_dlpack,
     METH_FASTCALL | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, "
     "copy=None)\n--\n\n"
     "Exports the tensor as a DLPack capsule (the array API protocol).\n"
     "max_version: None or a (major, minor) below (1, 0) gives a legacy "
     "'dltensor' capsule; (1, 0) or above a versioned 'dltensor_versioned' "
     "capsule of DLPack 1.1, whose flags carry READ_ONLY for read-only "
     "tensors and IS_COPIED for copies. A read-only tensor cannot be "
     "exported as a legacy capsule (BufferError) unless copy=True.\n"
     "stream: must be None for CPU tensors (ValueError otherwise).\n"
     "dl_device: None or the tensor's own __dlpack_device__(); another "
     "device only with copy=True, and only the CPU (1, 0) or a CUDA device "
     "(2, N): the capsule then holds a copy there. Any other request "
     "raises BufferError.\n"
     "copy: None or False exports the tensor's memory (no copy is ever "
     "needed on the CPU); True exports a new copy.\n"
     "Data types: float32 (kDLFloat, 32), float16 (kDLFloat, 16), bfloat16 "
     "(kDLBfloat, 16), uint8 (kDLUInt, 8), float8_e4m3fn / e4m3fnuz / e5m2 "
     "/ e5m2fnuz (DLPack 1.1 codes 10 / 11 / 12 / 13, 8 bits). Strides are "
     "always given, in elements, negative ones included (NumPy reads them; "
     "PyTorch up to 2.13 aborts on them, pytorch#188023: export "
     ".contiguous() to PyTorch). The capsule keeps the tensor alive until "
     "the consumer calls the deleter, or until the capsule is destroyed "
     "unconsumed."},
    {"__dlpack_device__", fp8q_tensor_dlpack_device, METH_NOARGS,
     "__dlpack_device__()\n--\n\n"
     "The DLPack device of the data as (device_type, device_id): (1, 0) for "
     "the CPU."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods tensor_as_sequence = {
    .sq_length = tensor_length,
};

static void tensor_dealloc(PyObject *object)
{
    fp8q_TensorObject *self = (fp8q_TensorObject *)object;

    if (self->weakrefs != NULL) {
        PyObject_ClearWeakRefs(object);
    }
    if (self->allocation != NULL && self->device_type == FP8Q_DEVICE_CUDA) {
        fp8q_cuda_free(self->cuda_device, self->allocation,
                       &self->allocated_in, self->stream);
    }
    else if (self->allocation != NULL) {
        fp8q_aligned_free(self->allocation);
    }
    self->allocation = NULL;
    Py_CLEAR(self->owner);
    Py_TYPE(object)->tp_free(object);
}

PyDoc_STRVAR(
    tensor_doc,
    "An N-d array of fp8q dtype elements (0 to 16 dims) on a device.\n"
    "\n"
    "Tensors are made by fp8q.asarray, fp8q.from_dlpack, fp8q.empty,\n"
    "fp8q.zeros and the fp8q operations, not by calling fp8q.Tensor.\n"
    "A tensor either owns its memory (64-byte aligned) or is a zero-copy\n"
    "view of another object's memory (a NumPy array, a DLPack producer such\n"
    "as a PyTorch tensor, a buffer-protocol object, another tensor), which\n"
    "it keeps alive. Strides are in elements and may be zero or negative.\n"
    "\n"
    "Interchange: the buffer protocol (CPU tensors; formats 'f' float32,\n"
    "'e' float16, 'B' uint8, and the raw codes as 'B' for the FP8 dtypes\n"
    "and 'H' for bfloat16; read-only tensors export read-only buffers),\n"
    "DLPack (__dlpack__, __dlpack_device__) and NumPy (numpy(),\n"
    "__array__). np.asarray(t) takes the buffer protocol first, so it gives\n"
    "raw codes for bfloat16 and FP8 tensors: use t.numpy() for values.\n"
    "len(t) is shape[0] (TypeError for a 0-d tensor). repr(t) shows the\n"
    "values, exactly decoded, summarised by NumPy for large tensors.");

PyTypeObject fp8q_Tensor_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fp8q.Tensor",
    .tp_basicsize = sizeof(fp8q_TensorObject),
    .tp_dealloc = tensor_dealloc,
    .tp_repr = tensor_repr,
    .tp_as_sequence = &tensor_as_sequence,
    .tp_as_buffer = &fp8q_tensor_buffer_procs,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = tensor_doc,
    .tp_weaklistoffset = offsetof(fp8q_TensorObject, weakrefs),
    .tp_methods = tensor_methods,
    .tp_getset = tensor_getset,
};

/* ------------------------------------------------------------------------- */
/* Module initialisation                                                     */

int fp8q_py_tensor_init(PyObject *module)
{
    return PyModule_AddType(module, &fp8q_Tensor_Type); /* as "Tensor" */
}
