/*
 * asarray.c - any Python object to an fp8q.Tensor: fp8q.asarray and
 * fp8q_tensor_from_object, which every operation uses for its inputs.
 *
 * Zero-copy where the layout allows (Tensors, NumPy arrays, DLPack producers,
 * buffer-protocol objects); NumPy converts what fp8q does not store
 * (float64, integers, bool, big-endian data) to float32 or float16, and the
 * core's fp8q_cast converts between fp8q dtypes. No arithmetic happens here.
 */
#include <math.h>

#include "python/binding.h"

#include <numpy/arrayscalars.h>

#include "core/view_layout.h"

/* Applies the requested dtype and copy= to a tensor made from the input
 * (stolen). `fresh`: the tensor's memory is already a private copy. */
static fp8q_TensorObject *finish(fp8q_TensorObject *tensor,
                                 const char *argument_name, int dtype,
                                 int copy, int fresh)
{
    fp8q_TensorObject *result;

    if (dtype >= 0 && (fp8q_dtype)dtype != tensor->view.dtype) {
        if (copy == FP8Q_COPY_NEVER) {
            PyErr_Format(PyExc_ValueError,
                         "Unable to avoid copy while converting %s from %s to "
                         "%s as requested (copy=False)",
                         argument_name, fp8q_dtype_name(tensor->view.dtype),
                         fp8q_dtype_name((fp8q_dtype)dtype));
            Py_DECREF(tensor);
            return NULL;
        }
        result = fp8q_tensor_copy_as(tensor, (fp8q_dtype)dtype);
        Py_DECREF(tensor);
        return result;
    }
    if (copy == FP8Q_COPY_ALWAYS && !fresh) {
        result = fp8q_tensor_copy_as(tensor, tensor->view.dtype);
        Py_DECREF(tensor);
        return result;
    }
    return tensor;
}

/* A zero-copy tensor over a NumPy array whose dtype fp8q stores; NULL with
 * *needs_copy set (and no exception) when the array's layout needs a copy:
 * misaligned data, or byte strides that are not whole elements. */
static fp8q_TensorObject *view_numpy_array(PyArrayObject *array,
                                           fp8q_dtype dtype, int *needs_copy)
{
    int64_t shape[FP8Q_MAX_DIMS];
    int64_t byte_strides[FP8Q_MAX_DIMS];
    fp8q_view view;
    int axis;

    for (axis = 0; axis < PyArray_NDIM(array); axis++) {
        shape[axis] = (int64_t)PyArray_DIM(array, axis);
        byte_strides[axis] = (int64_t)PyArray_STRIDE(array, axis);
    }
    *needs_copy = !PyArray_ISALIGNED(array) ||
                  !fp8q_view_init_byte_strided(&view, PyArray_DATA(array),
                                               dtype, PyArray_NDIM(array),
                                               shape, byte_strides);
    return *needs_copy ? NULL
                       : fp8q_tensor_new_view(&view, (PyObject *)array,
                                              !PyArray_ISWRITEABLE(array));
}

/* The dtype fp8q converts a user-defined NumPy dtype to: float32 when
 * NumPy casts it there safely (every value exact: ml_dtypes' other floats
 * and small ints, such as float8_e3m4, float4_e2m1fn or int4), else -1. */
static int user_dtype_conversion(PyArray_Descr *descr)
{
    PyArray_Descr *float32 = PyArray_DescrFromType(NPY_FLOAT32);
    const int safe = float32 != NULL && PyArray_CanCastTo(descr, float32);

    Py_XDECREF(float32);
    return safe ? FP8Q_FLOAT32 : -1;
}

/* A tensor for a NumPy array: viewed, or converted by NumPy first. `fresh`:
 * the array is a private copy already. `original`: the non-array object the
 * array was made from, or NULL when the caller passed an array. */
static fp8q_TensorObject *from_numpy_array(PyArrayObject *array,
                                           const char *argument_name,
                                           int dtype, int copy, int fresh,
                                           PyObject *original)
{
    PyArray_Descr *descr = PyArray_DESCR(array);
    fp8q_TensorObject *tensor;
    PyArrayObject *converted;
    PyArray_Descr *target;
    fp8q_dtype own;
    int found;
    int needs_copy = 0;

    if (PyArray_NDIM(array) > FP8Q_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError,
                     "%s: fp8q tensors have at most %d dims, got %d",
                     argument_name, FP8Q_MAX_DIMS, PyArray_NDIM(array));
        return NULL;
    }
    found = fp8q_py_dtype_from_numpy(descr, &own);
    if (found < 0) {
        return NULL;
    }
    if (found == 1) {
        tensor = view_numpy_array(array, own, &needs_copy);
        if (tensor != NULL) {
            return finish(tensor, argument_name, dtype, copy, fresh);
        }
        if (!needs_copy) {
            return NULL;
        }
        /* Same dtype, a layout fp8q cannot view: an aligned copy. */
        Py_INCREF(descr);
        target = descr;
    }
    else {
        const int target_dtype =
            descr->type_num < NPY_USERDEF
                ? fp8q_dtype_numpy_conversion(descr->kind, descr->type)
                : user_dtype_conversion(descr);

        if (target_dtype < 0) {
            if (original != NULL &&
                (descr->kind == 'O' || descr->kind == 'U' ||
                 descr->kind == 'S')) {
                PyErr_Format(PyExc_TypeError,
                             "%s: expected a Tensor, a NumPy array, a DLPack "
                             "or buffer-protocol object, a number or a "
                             "nested sequence of numbers, got %s",
                             argument_name, Py_TYPE(original)->tp_name);
            }
            else {
                PyErr_Format(PyExc_TypeError,
                             "%s: unsupported NumPy dtype %S; fp8q stores "
                             "float32, float16, bfloat16, uint8 and the FP8 "
                             "dtypes (bool, integer and other float input is "
                             "converted to float32)",
                             argument_name, (PyObject *)descr);
            }
            return NULL;
        }
        target = PyArray_DescrFromType(
            fp8q_dtype_buffer_format((fp8q_dtype)target_dtype)[0]);
        if (target == NULL) {
            return NULL;
        }
    }
    if (copy == FP8Q_COPY_NEVER) {
        PyErr_Format(PyExc_ValueError,
                     "Unable to avoid copy while converting %s (a NumPy array "
                     "of dtype %S%s) as requested (copy=False)",
                     argument_name, (PyObject *)descr,
                     needs_copy ? " whose layout needs a copy" : "");
        Py_DECREF(target);
        return NULL;
    }
    converted = (PyArrayObject *)PyArray_FromArray(
        array, target,
        NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_WRITEABLE |
            NPY_ARRAY_FORCECAST | NPY_ARRAY_ENSURECOPY);
    if (converted == NULL) {
        return NULL;
    }
    tensor = from_numpy_array(converted, argument_name, dtype, copy, 1, NULL);
    Py_DECREF(converted);
    return tensor;
}

/* Whether `array` is an object array (as NumPy makes it for nested
 * sequences holding ints beyond 64 bits) of Python ints, bools and floats
 * only. */
static int only_python_numbers(PyArrayObject *array)
{
    PyObject *const *items = (PyObject *const *)PyArray_DATA(array);
    const npy_intp count = PyArray_SIZE(array);
    npy_intp index;

    if (PyArray_TYPE(array) != NPY_OBJECT ||
        !PyArray_IS_C_CONTIGUOUS(array) || count == 0) {
        return 0;
    }
    for (index = 0; index < count; index++) {
        if (!PyLong_Check(items[index]) && !PyFloat_Check(items[index])) {
            return 0;
        }
    }
    return 1;
}

int fp8q_py_has_no_memory(PyObject *object)
{
    return PyList_Check(object) || PyTuple_Check(object) ||
           PyLong_Check(object) || PyFloat_Check(object) ||
           PyArray_IsScalar(object, Generic);
}

/* A NumPy array for any other input (buffer-protocol objects through a
 * memoryview, scalars and nested sequences through NumPy). *fresh tells
 * whether its memory is new. */
static PyArrayObject *numpy_from_other(PyObject *object,
                                       const char *argument_name, int *fresh)
{
    PyObject *array;

    *fresh = 0;
    /* NumPy scalars export buffers too, but those of user dtypes
     * (ml_dtypes.bfloat16, float8_*) refuse a format: NumPy converts every
     * scalar instead, keeping its dtype. */
    if (PyObject_CheckBuffer(object) && !PyArray_IsScalar(object, Generic)) {
        /* Zero-copy, by format character: bytes, bytearray, memoryview,
         * array.array, ... (np.asarray(bytes) would give an 'S' scalar). */
        PyObject *memoryview = PyMemoryView_FromObject(object);

        if (memoryview == NULL) {
            return NULL;
        }
        array = PyArray_FromAny(memoryview, NULL, 0, 0, 0, NULL);
        Py_DECREF(memoryview);
        return (PyArrayObject *)array;
    }
    array = PyArray_FromAny(object, NULL, 0, 0, 0, NULL);
    if (array != NULL && only_python_numbers((PyArrayObject *)array)) {
        /* Ints beyond int64 and uint64, which NumPy keeps as objects: as
         * float64, as NumPy converts them for dtype=float32 (OverflowError
         * beyond float64's range). */
        Py_SETREF(array, PyArray_FromAny(object,
                                         PyArray_DescrFromType(NPY_FLOAT64),
                                         0, 0, 0, NULL));
    }
    if (array == NULL) {
        if (PyErr_ExceptionMatches(PyExc_ValueError) ||
            PyErr_ExceptionMatches(PyExc_TypeError) ||
            PyErr_ExceptionMatches(PyExc_OverflowError)) {
            fp8q_py_error_add_prefix("%s: cannot convert %s to a tensor: ",
                                     argument_name, Py_TYPE(object)->tp_name);
        }
        return NULL;
    }
    *fresh = fp8q_py_has_no_memory(object);
    return (PyArrayObject *)array;
}

int fp8q_py_refuse_without_memory(PyObject *object, const char *argument_name)
{
    if (!fp8q_py_has_no_memory(object)) {
        return 0;
    }
    PyErr_Format(PyExc_ValueError,
                 "Unable to avoid copy while converting %s (an object of type "
                 "%.200s, whose values are copied into a new array) as "
                 "requested (copy=False)",
                 argument_name, Py_TYPE(object)->tp_name);
    return -1;
}

/* A Python float or int (exactly those types) or a NumPy float32 scalar as
 * the 0-d float32 tensor NumPy's conversion gives (a float or int to float64
 * or int64, then rounded to float32), without NumPy: a scale= of 2.0 costs
 * 0.1 us instead of 1-2 us. NULL without an exception where NumPy's answer
 * could differ (an int beyond int64, a finite float that overflows float32,
 * for which NumPy warns; copy=False, which NumPy's conversion refuses) and
 * for any other object. */
static fp8q_TensorObject *from_scalar(PyObject *object, int copy)
{
    fp8q_TensorObject *tensor;
    float value;
    int overflow = 0;

    if (copy == FP8Q_COPY_NEVER) {
        return NULL;
    }
    if (PyFloat_CheckExact(object)) {
        const double number = PyFloat_AS_DOUBLE(object);

        value = (float)number;
        if (isinf(value) && isfinite(number)) {
            return NULL;
        }
    }
    else if (PyArray_IsScalar(object, Float)) {
        value = PyArrayScalar_VAL(object, Float);
    }
    else if (!PyLong_CheckExact(object)) {
        return NULL;
    }
    else {
        const long long number = PyLong_AsLongLongAndOverflow(object,
                                                              &overflow);
        if (overflow != 0) {
            return NULL;
        }
        value = (float)number;
    }
    tensor = fp8q_tensor_new_empty(FP8Q_FLOAT32, 0, NULL);
    if (tensor != NULL) {
        *(float *)tensor->view.data = value;
    }
    return tensor;
}

fp8q_TensorObject *fp8q_tensor_from_object(PyObject *object,
                                           const char *argument_name,
                                           int dtype, int copy)
{
    PyArrayObject *array;
    fp8q_TensorObject *tensor;
    int fresh;

    if (fp8q_Tensor_Check(object)) {
        Py_INCREF(object);
        return finish((fp8q_TensorObject *)object, argument_name, dtype, copy,
                      0);
    }
    tensor = from_scalar(object, copy);
    if (tensor != NULL || PyErr_Occurred()) {
        return tensor == NULL ? NULL
                              : finish(tensor, argument_name, dtype, copy, 1);
    }
    if (PyArray_Check(object)) {
        return from_numpy_array((PyArrayObject *)object, argument_name, dtype,
                                copy, 0, NULL);
    }
    if (PyCapsule_CheckExact(object) ||
        fp8q_py_has_dlpack(object)) {
        int unsupported_dtype = 0;

        tensor = fp8q_tensor_from_dlpack(object, argument_name, -1,
                                         &unsupported_dtype);
        if (tensor != NULL) {
            return finish(tensor, argument_name, dtype, copy, 0);
        }
        if (!unsupported_dtype || PyCapsule_CheckExact(object)) {
            return NULL;
        }
        /* A dtype fp8q does not store (float64, int32, bool, ...): let NumPy
         * convert through the producer's array protocols. */
        PyErr_Clear();
    }
    array = numpy_from_other(object, argument_name, &fresh);
    if (array == NULL) {
        return NULL;
    }
    tensor = from_numpy_array(array, argument_name, dtype, copy, fresh,
                              object);
    Py_DECREF(array);
    return tensor;
}

/* ------------------------------------------------------------------------- */
/* fp8q.asarray                                                              */

static PyObject *asarray(PyObject *module, PyObject *const *args,
                         Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const keywords[] = {"obj",    "dtype",  "copy",
                                           "device", "stream", NULL};
    PyObject *object;
    PyObject *dtype_object = Py_None;
    PyObject *copy_object = Py_None;
    PyObject *device_object = Py_None;
    PyObject *stream_object = Py_None;
    fp8q_py_device device;
    fp8q_cu_stream stream;
    fp8q_TensorObject *tensor;
    fp8q_TensorObject *moved;
    int target;
    int copy = FP8Q_COPY_IF_NEEDED;

    (void)module;
    if (fp8q_py_parse_arguments(args, nargs, kwnames, "O|OO$OO:asarray",
                                keywords, &object, &dtype_object, &copy_object,
                                &device_object, &stream_object) < 0 ||
        fp8q_py_parse_placement(device_object, stream_object, &device,
                                &stream) < 0 ||
        fp8q_py_parse_optional_dtype(dtype_object, &target) < 0) {
        return NULL;
    }
    if (copy_object == Py_True) {
        copy = FP8Q_COPY_ALWAYS;
    }
    else if (copy_object == Py_False) {
        copy = FP8Q_COPY_NEVER;
    }
    else if (copy_object != Py_None) {
        PyErr_Format(PyExc_TypeError,
                     "copy: expected None, True or False, got %R",
                     copy_object);
        return NULL;
    }
    if (copy == FP8Q_COPY_NEVER &&
        fp8q_py_refuse_without_memory(object, "obj") < 0) {
        return NULL;
    }
    tensor = fp8q_tensor_from_object(object, "obj", target, copy);
    if (tensor == NULL || device_object == Py_None ||
        (tensor->device_type == device.type &&
         tensor->device_index == device.index)) {
        return (PyObject *)tensor;
    }
    /* Another device: the data moves (copy=True is then met as well). */
    if (copy == FP8Q_COPY_NEVER) {
        char where[32];
        fp8q_device_format(tensor->device_type, tensor->device_index,
                           where, sizeof where);
        PyErr_Format(PyExc_ValueError,
                     "Unable to avoid copy while moving obj from %s to the "
                     "requested device (copy=False)",
                     where);
        Py_DECREF(tensor);
        return NULL;
    }
    moved = fp8q_tensor_copy_to(tensor, &device, stream);
    Py_DECREF(tensor);
    return (PyObject *)moved;
}

PyDoc_STRVAR(
    asarray_doc,
    "asarray(obj, dtype=None, copy=None, *, device=None, stream=None)\n"
    "--\n\n"
    "obj as an fp8q.Tensor, sharing its memory whenever possible. obj may "
    "be:\n"
    "- an fp8q.Tensor (returned itself when nothing changes);\n"
    "- a NumPy array: float32, float16, uint8 and the ml_dtypes bfloat16 "
    "and FP8 arrays in native byte order are viewed without copying (a "
    "read-only array gives a read-only tensor);\n"
    "- a DLPack producer such as a PyTorch tensor, or an unconsumed DLPack "
    "capsule (see from_dlpack); producers of dtypes fp8q does not store "
    "are converted through NumPy;\n"
    "- a buffer-protocol object (bytes, bytearray, memoryview, "
    "array.array), typed by its format character;\n"
    "- a Python or NumPy scalar, or a nested sequence of numbers.\n"
    "Input of a dtype fp8q does not store is converted by NumPy: bool, "
    "integers, float64 and other floats to float32, big-endian float16 to "
    "float16 (so a Python float or list gives float32; ints beyond 64 "
    "bits through float64, as NumPy converts them for float32).\n"
    "dtype: None keeps the input's (converted) dtype; any other dtype "
    "converts the values with the fp8q cast (exact where representable, "
    "else rounded to nearest-even, saturating to the FP8 range as "
    "fp8q.cast does by default).\n"
    "copy: None copies only when needed; True always returns new memory; "
    "False never copies and raises ValueError ('Unable to avoid copy ...') "
    "when a conversion or copy would be needed.\n"
    "device: None leaves the tensor where obj is; \"cpu\", \"cuda\" or "
    "\"cuda:N\" (or a torch.device) moves it there when it is elsewhere, "
    "as Tensor.to does, on `stream` (as fp8q.cast takes it).\n"
    "Errors name the argument 'obj': TypeError for unsupported objects and "
    "dtypes (complex, strings, objects, ...), ValueError for more than 16 "
    "dims and ragged sequences, OverflowError for ints beyond float64, "
    "BufferError for non-CPU data. torch "
    "tensors DLPack would misdescribe are refused with the fix named: a "
    "view with the negative bit (BufferError: x.resolve_neg()), a meta "
    "tensor (BufferError), a sparse one (TypeError: x.to_dense()), a "
    "tensor subclass without storage (TypeError naming its type).");

/* fp8q._C._tensor_argument(obj, name): what an operation written in Python
 * (fp8q.linear) makes of its argument `name`, as the C operations make theirs
 * (fp8q_tensor_from_object): asarray(obj), with errors naming `name`. */
static PyObject *tensor_argument(PyObject *module, PyObject *const *args,
                                 Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const keywords[] = {"", "", NULL};
    PyObject *object;
    const char *name;

    (void)module;
    if (fp8q_py_parse_arguments(args, nargs, kwnames, "Os:_tensor_argument",
                                keywords, &object, &name) < 0) {
        return NULL;
    }
    return (PyObject *)fp8q_tensor_from_object(object, name, -1,
                                               FP8Q_COPY_IF_NEEDED);
}

PyMethodDef fp8q_py_asarray_functions[] = {
    {FP8Q_PY_KEYWORDS_FUNCTION("asarray", asarray), asarray_doc},
    {FP8Q_PY_KEYWORDS_FUNCTION("_tensor_argument", tensor_argument),
     "_tensor_argument(obj, name, /)\n--\n\n"
     "obj as fp8q.asarray(obj) gives it, with errors naming the argument "
     "`name` (internal to fp8q.linear)."},
    {NULL, NULL, 0, NULL},
};
