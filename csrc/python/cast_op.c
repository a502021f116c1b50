/*
 * cast_op.c - fp8q._C.cast: parses its arguments, turns them into views,
 * checks dtypes, shapes and devices, allocates the result (and the optional
 * amax output) and calls csrc/core's cast on the CPU (GIL released) or the
 * CUDA half (ops_cuda.c) on a GPU. No math here.
 */
#include "python/binding.h"

#include "core/amax.h"
#include "core/cast.h"

/* Nonzero when two views touch a common byte without being the very same
 * elements (same address, itemsize and strides): such a pair cannot be an
 * input and an output of one operation. An exact alias is a safe in-place
 * operation, because every element is read before it is written. */
static int views_overlap_unsafely(const fp8q_view *first,
                                  const fp8q_view *second)
{
    int64_t first_low, first_high, second_low, second_high;
    uintptr_t first_begin, first_end, second_begin, second_end;
    int axis;

    if (fp8q_view_size(first) == 0 || fp8q_view_size(second) == 0) {
        return 0;
    }
    fp8q_view_byte_extent(first, &first_low, &first_high);
    fp8q_view_byte_extent(second, &second_low, &second_high);
    first_begin = (uintptr_t)((const char *)first->data + first_low);
    first_end = (uintptr_t)((const char *)first->data + first_high);
    second_begin = (uintptr_t)((const char *)second->data + second_low);
    second_end = (uintptr_t)((const char *)second->data + second_high);
    if (first_end <= second_begin || second_end <= first_begin) {
        return 0;
    }
    if (first->data != second->data || first->ndim != second->ndim ||
        fp8q_dtype_itemsize(first->dtype) !=
            fp8q_dtype_itemsize(second->dtype)) {
        return 1;
    }
    for (axis = 0; axis < first->ndim; axis++) {
        if (first->shape[axis] != second->shape[axis]) {
            return 1;
        }
        if (first->shape[axis] != 1 &&
            first->strides[axis] != second->strides[axis]) {
            return 1;
        }
    }
    return 0;
}
/* out= of cast: a writable output of x's shape that does not partly overlap
 * x. */
static fp8q_TensorObject *check_cast_out(PyObject *out_object,
                                         const fp8q_TensorObject *x,
                                         fp8q_dtype dtype)
{
    const fp8q_py_device device = {x->device_type, x->device_index};
    fp8q_TensorObject *out = fp8q_py_writable_output(
        out_object, "cast", "out", dtype, "x's shape", x->view.ndim,
        x->view.shape, &device);

    if (out != NULL && views_overlap_unsafely(&x->view, &out->view)) {
        PyErr_SetString(PyExc_ValueError,
                        "cast: out= must not overlap x in memory (except as "
                        "the very same elements of the same itemsize), got "
                        "a partially overlapping tensor");
        Py_CLEAR(out);
    }
    return out;
}

/* amax_out= of cast: a writable float32 tensor of one element on
 * `device`. */
static fp8q_TensorObject *amax_output(PyObject *object,
                                      const fp8q_py_device *device)
{
    fp8q_TensorObject *amax = fp8q_tensor_from_object(object, "amax_out", -1,
                                                      FP8Q_COPY_NEVER);
    char where[32];

    if (amax == NULL) {
        return NULL;
    }
    fp8q_py_format_device(device->type, device->index, where, sizeof where);
    if (amax->view.dtype != FP8Q_FLOAT32 || fp8q_view_size(&amax->view) != 1 ||
        amax->readonly || amax->device_type != device->type ||
        amax->device_index != device->index) {
        PyErr_Format(PyExc_ValueError,
                     "cast: amax_out= must be a writable float32 tensor of "
                     "one element on %s (x's device), got %s",
                     where,
                     amax->view.dtype != FP8Q_FLOAT32 ? "another dtype"
                     : fp8q_view_size(&amax->view) != 1
                         ? "another number of elements"
                     : amax->readonly ? "a read-only tensor"
                                      : "a tensor on another device");
        Py_DECREF(amax);
        return NULL;
    }
    return amax;
}

/* The amax of every element of `x` into the one element of `amax`. */
static fp8q_status amax_of_everything(const fp8q_view *x,
                                      const fp8q_TensorObject *amax,
                                      fp8q_error *error)
{
    fp8q_view destination;
    int axis;

    destination = *x;
    destination.dtype = FP8Q_FLOAT32;
    destination.data = amax->view.data;
    for (axis = 0; axis < x->ndim; axis++) {
        destination.shape[axis] = 1;
        destination.strides[axis] = 0;
    }
    return fp8q_amax(x, &destination, error);
}

PyDoc_STRVAR(
    cast_doc,
    "cast(x, dtype, *, scale=None, saturate=True, out=None, amax_out=None,\n"
    "     stream=None)\n"
    "--\n"
    "\n"
    "Converts x (an fp8q.Tensor, NumPy array, DLPack producer such as a\n"
    "torch tensor, buffer, Python scalar or nested list) to `dtype`, any of\n"
    "float32, float16, bfloat16, uint8 and the four FP8 formats.\n"
    "\n"
    "Every element is loaded exactly into float32 and stored with one\n"
    "rounding, to nearest with ties to even:\n"
    "\n"
    "- to an FP8 dtype: value = float32(x) / scale when scale is given (a\n"
    "  correctly rounded float32 division; scale is the dequantization\n"
    "  scale, x ~= result * scale), then rounded once to the format.\n"
    "  saturate=True maps finite overflow and +-inf to +-max;\n"
    "  saturate=False maps them to NaN (float8_e4m3fn and the fnuz formats)\n"
    "  or +-inf (float8_e5m2). NaN stays NaN; the fnuz formats have no -0.\n"
    "  The results are bit-identical to ml_dtypes' astype (of the input\n"
    "  clipped to +-max when saturate=True).\n"
    "- to float16 / bfloat16: IEEE round to nearest even (overflow gives\n"
    "  inf), as NumPy and ml_dtypes do; saturate does not apply.\n"
    "- to float32 and from FP8: exact.\n"
    "- to x's own dtype without a scale: a copy of the bits (NaN payloads\n"
    "  and float8_e5m2 infinities are kept: there is nothing to round).\n"
    "- to uint8: truncation toward zero, saturating to [0, 255], NaN -> 0.\n"
    "\n"
    "scale: float32 scalar or array broadcastable to x's shape (NumPy\n"
    "rules), only allowed when dtype is an FP8 format (to multiply by a\n"
    "scale use fp8q.dequantize); every value must be finite and > 0.\n"
    "out: receives the result and is returned: a writable fp8q.Tensor, or\n"
    "an array fp8q views without copying (NumPy or ml_dtypes array, DLPack\n"
    "producer such as a torch tensor, writable buffer), of x's shape and of\n"
    "dtype `dtype`; it must not partially overlap x or scale.\n"
    "amax_out: a writable float32 tensor (or array) of one element, on x's\n"
    "device: receives max |float32(x)| over all of x, before scaling (NaN\n"
    "when x holds a NaN), as fp8q.amax(x) would give it. On CUDA it is\n"
    "computed in the same pass as the cast (delayed scaling: cast with\n"
    "last step's scale, record this step's amax).\n"
    "\n"
    "CUDA: when x is on a GPU the cast runs there, on `stream` (None: the\n"
    "legacy default stream; an int handle; or an object with\n"
    "__cuda_stream__ or .cuda_stream, such as torch.cuda.Stream), after\n"
    "the last use of each input; results are bit-identical to the CPU's.\n"
    "A strided x is gathered on the GPU first; out must be C-contiguous\n"
    "there. scale may be on the host\n"
    "(checked there, then copied) or on x's GPU (not read back, so not\n"
    "checked: a zero, negative or non-finite scale gives what the\n"
    "division gives); it must be one value, one per row or group of rows,\n"
    "one per column, or one per element.\n"
    "\n"
    "Returns a new C-contiguous tensor on x's device (or out). On the CPU\n"
    "the GIL is released and large inputs use get_num_threads() threads;\n"
    "on CUDA the call returns once the work is queued.");

static PyObject *ops_cast(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"x", "dtype", "scale", "saturate", "out",
                               "amax_out", "stream", NULL};
    PyObject *x_object;
    PyObject *dtype_object;
    PyObject *scale_object = Py_None;
    PyObject *out_object = Py_None;
    PyObject *amax_object = Py_None;
    PyObject *stream_object = Py_None;
    fp8q_TensorObject *amax_out = NULL;
    int saturate = 1;
    fp8q_dtype dtype;
    fp8q_cu_stream stream;
    fp8q_py_device device;
    fp8q_TensorObject *x = NULL;
    fp8q_TensorObject *scale = NULL;
    fp8q_TensorObject *out = NULL;
    fp8q_view scale_view;
    fp8q_error error;
    fp8q_status status;

    (void)module;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$OpOOO:cast", keywords,
                                     &x_object, &dtype_object, &scale_object,
                                     &saturate, &out_object, &amax_object,
                                     &stream_object)) {
        return NULL;
    }
    if (fp8q_py_parse_dtype(dtype_object, "dtype", &dtype) < 0 ||
        fp8q_py_parse_stream(stream_object, "stream", &stream) < 0) {
        return NULL;
    }
    if (scale_object != Py_None && !fp8q_dtype_is_fp8(dtype)) {
        PyErr_Format(PyExc_ValueError,
                     "cast: scale= is only allowed when dtype= is an FP8 "
                     "format (it divides before rounding to FP8), got "
                     "dtype=%s; to multiply FP8 data by its scale use "
                     "fp8q.dequantize",
                     fp8q_dtype_name(dtype));
        return NULL;
    }
    x = fp8q_tensor_from_object(x_object, "x", -1, FP8Q_COPY_IF_NEEDED);
    if (x == NULL) {
        goto fail;
    }
    device.type = x->device_type;
    device.index = x->device_index;
    fp8q_error_clear(&error);
    if (scale_object != Py_None) {
        scale = fp8q_tensor_from_object(scale_object, "scale", FP8Q_FLOAT32,
                                        FP8Q_COPY_IF_NEEDED);
        if (scale == NULL ||
            (device.type == FP8Q_DEVICE_CPU &&
             fp8q_py_require_cpu(scale, "cast", "scale") < 0)) {
            goto fail;
        }
        if (fp8q_view_broadcast_to(&scale->view, x->view.ndim, x->view.shape,
                                   &scale_view, "scale", &error) != FP8Q_OK) {
            fp8q_py_raise(&error);
            goto fail;
        }
        /* Scales on the host are checked here; a CUDA scale is not read
         * back (docs/architecture.md, "Devices and streams"). */
        if (scale->device_type == FP8Q_DEVICE_CPU) {
            Py_BEGIN_ALLOW_THREADS
            status = fp8q_check_scale_values(&scale->view, "scale", &error);
            Py_END_ALLOW_THREADS
            if (fp8q_py_raise_on_failure(status, &error) < 0) {
                goto fail;
            }
        }
    }
    if (out_object != Py_None) {
        out = check_cast_out(out_object, x, dtype);
        if (out == NULL) {
            goto fail;
        }
        if (scale != NULL && views_overlap_unsafely(&scale_view, &out->view)) {
            PyErr_SetString(PyExc_ValueError,
                            "cast: out= must not overlap scale= in memory");
            goto fail;
        }
    }
    else {
        out = fp8q_tensor_new_empty_on(dtype, x->view.ndim, x->view.shape,
                                       &device, stream);
        if (out == NULL) {
            goto fail;
        }
    }
    if (amax_object != Py_None) {
        amax_out = amax_output(amax_object, &device);
        if (amax_out == NULL) {
            goto fail;
        }
    }
    if (device.type == FP8Q_DEVICE_CUDA) {
        if (fp8q_py_cuda_cast(x, scale, out, amax_out, saturate, stream) < 0) {
            goto fail;
        }
    }
    else {
        FP8Q_PY_BEGIN_INTERRUPTIBLE
        status = fp8q_cast(&x->view, &out->view,
                           scale != NULL ? &scale_view : NULL,
                           FP8Q_SCALE_DIVIDE, saturate, &error);
        if (status == FP8Q_OK && amax_out != NULL) {
            status = amax_of_everything(&x->view, amax_out, &error);
        }
        FP8Q_PY_END_INTERRUPTIBLE(status)
        if (fp8q_py_raise_on_failure(status, &error) < 0) {
            goto fail;
        }
    }
    Py_DECREF(x);
    Py_XDECREF(scale);
    Py_XDECREF(amax_out);
    if (out_object != Py_None) {
        /* Like NumPy's out=: the very object the caller passed. */
        Py_DECREF(out);
        Py_INCREF(out_object);
        return out_object;
    }
    return (PyObject *)out;

fail:
    Py_XDECREF(x);
    Py_XDECREF(scale);
    Py_XDECREF(out);
    Py_XDECREF(amax_out);
    return NULL;
}

/* The methods this file adds to fp8q._C. */
PyMethodDef fp8q_py_cast_functions[] = {
    {"cast", (PyCFunction)(void (*)(void))ops_cast,
     METH_VARARGS | METH_KEYWORDS, cast_doc},
    {NULL, NULL, 0, NULL},
};
