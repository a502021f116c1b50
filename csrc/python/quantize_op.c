/*
 * quantize_op.c - the C halves of quantize and dequantize (fp8q/__init__.py
 * wraps them in fp8q.QTensor): granularity parsing, scale shapes and
 * checks, the results' allocation, and the call run on x's device
 * (cuda/op_call.h; fp8q_py_cuda_dequantize). No math here.
 */
#include "python/binding.h"

#include "core/cast.h"
#include "core/op_checks.h"
#include "core/quantize.h"
#include "core/view_layout.h"
#include "cuda/op_call.h"

#define GRANULARITY_HELP                                                      \
    "\"tensor\", \"row\", \"col\" or a (block_rows, block_cols) pair of "   \
    "positive ints"

/* Reads one block extent of a granularity pair. */
static int parse_block_extent(PyObject *item, const char *function,
                              int64_t *extent)
{
    /* Out-of-range ints clip to PY_SSIZE_T_MIN / PY_SSIZE_T_MAX. */
    const int is_int = !PyBool_Check(item) && PyIndex_Check(item);
    const Py_ssize_t value = is_int ? PyNumber_AsSsize_t(item, NULL) : 0;

    if (!is_int) {
        PyErr_Format(PyExc_TypeError,
                     "%s: granularity= must be " GRANULARITY_HELP
                     ", got a pair holding an object of type %.200s",
                     function, Py_TYPE(item)->tp_name);
    }
    else if (value < 1 && !PyErr_Occurred()) {
        PyErr_Format(PyExc_ValueError,
                     "%s: granularity= block extents must be positive ints, "
                     "got %R",
                     function, item);
    }
    *extent = (int64_t)value;
    return value >= 1 ? 0 : -1;
}

/* granularity= : "tensor", "row", "col" (the kinds in their enum order) or
 * a (block_rows, block_cols) pair. 0, or -1 with an exception. */
static int parse_granularity(PyObject *object, const char *function,
                             fp8q_granularity *granularity)
{
    static const char *const names[3] = {"tensor", "row", "col"};
    int kind;

    granularity->block_rows = 1;
    granularity->block_cols = 1;
    if (PyUnicode_Check(object)) {
        for (kind = 0; kind < 3; kind++) {
            if (PyUnicode_CompareWithASCIIString(object, names[kind]) == 0) {
                granularity->kind = (fp8q_granularity_kind)kind;
                return 0;
            }
        }
        PyErr_Format(PyExc_ValueError,
                     "%s: granularity= must be " GRANULARITY_HELP ", got %R",
                     function, object);
        return -1;
    }
    if (!PyTuple_Check(object) && !PyList_Check(object)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: granularity= must be " GRANULARITY_HELP
                     ", got an object of type %.200s",
                     function, Py_TYPE(object)->tp_name);
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(object) != 2) {
        PyErr_Format(PyExc_ValueError,
                     "%s: granularity= must be " GRANULARITY_HELP
                     ", got a sequence of length %zd",
                     function, PySequence_Fast_GET_SIZE(object));
        return -1;
    }
    granularity->kind = FP8Q_GRANULARITY_BLOCK;
    return parse_block_extent(PySequence_Fast_GET_ITEM(object, 0), function,
                              &granularity->block_rows) < 0 ||
                   parse_block_extent(PySequence_Fast_GET_ITEM(object, 1),
                                      function, &granularity->block_cols) < 0
               ? -1
               : 0;
}

/* Raises fp8q_refuse_scale_shape's ValueError, granularity= shown by
 * repr() ('tensor' when left at its default, NULL). */
static void raise_scale_shape_mismatch(PyObject *granularity_object,
                                       const fp8q_view *x, int scale_ndim,
                                       const int64_t *scale_shape,
                                       const fp8q_view *given)
{
    PyObject *shown = granularity_object != NULL
                          ? PyObject_Repr(granularity_object)
                          : PyUnicode_FromString("'tensor'");
    const char *text = shown != NULL ? PyUnicode_AsUTF8(shown) : NULL;
    fp8q_error error;

    if (text != NULL) {
        (void)fp8q_py_raise_on_failure(
            fp8q_refuse_scale_shape(text, x, scale_ndim, scale_shape, given,
                                    &error),
            &error);
    }
    Py_XDECREF(shown);
}

/*
 * The given scale= of a quantize as a new float32 tensor of the
 * granularity's scale shape (scale_ndim, scale_shape) on x's device. A CUDA
 * scale of exactly that shape, C-contiguous, on x's GPU is copied there and
 * not read back (so not checked); any other is brought to the host,
 * broadcast to the scale shape, checked there to be finite and > 0 when x
 * is on a GPU (on the CPU fp8q_quantize checks it), and copied over.
 */
static fp8q_TensorObject *given_scale(PyObject *scale_object,
                                      PyObject *granularity_object,
                                      const fp8q_TensorObject *x,
                                      int scale_ndim,
                                      const int64_t *scale_shape,
                                      fp8q_cu_stream stream)
{
    static const fp8q_py_device cpu = {FP8Q_DEVICE_CPU, 0};
    const fp8q_py_device device = {x->device_type, x->device_index};
    fp8q_TensorObject *given = fp8q_tensor_from_object(
        scale_object, "scale", FP8Q_FLOAT32, FP8Q_COPY_IF_NEEDED);
    fp8q_TensorObject *full = NULL, *result = NULL;
    fp8q_view view;
    fp8q_error error;
    fp8q_status status;

    fp8q_error_clear(&error);
    if (given == NULL ||
        (device.type == FP8Q_DEVICE_CPU &&
         fp8q_py_require_cpu(given, "quantize", "scale") < 0)) {
        goto done;
    }
    if (fp8q_view_broadcast_to(&given->view, scale_ndim, scale_shape, &view,
                               "scale", &error) != FP8Q_OK) {
        raise_scale_shape_mismatch(granularity_object, &x->view, scale_ndim,
                                   scale_shape, &given->view);
        goto done;
    }
    if (device.type == FP8Q_DEVICE_CUDA &&
        given->device_type == FP8Q_DEVICE_CUDA &&
        given->device_index == device.index &&
        fp8q_view_is_contiguous(&given->view) &&
        given->view.ndim == scale_ndim &&
        memcmp(given->view.shape, scale_shape,
               (size_t)scale_ndim * sizeof(int64_t)) == 0) {
        result = fp8q_tensor_copy_to(given, &device, stream);
        goto done;
    }
    if (given->device_type != FP8Q_DEVICE_CPU) {
        Py_SETREF(given, fp8q_tensor_copy_to(given, &cpu, stream));
    }
    full = given == NULL ? NULL
                         : fp8q_tensor_new_empty(FP8Q_FLOAT32, scale_ndim,
                                                 scale_shape);
    if (full == NULL) {
        goto done;
    }
    /* The broadcast view, over the host copy's memory. */
    (void)fp8q_view_broadcast_to(&given->view, scale_ndim, scale_shape, &view,
                                 "scale", &error);
    Py_BEGIN_ALLOW_THREADS
    status = fp8q_cast(&view, &full->view, NULL, FP8Q_SCALE_DIVIDE, 1,
                       &error);
    if (status == FP8Q_OK && device.type == FP8Q_DEVICE_CUDA) {
        status = fp8q_check_scale_values(&full->view, "scale", &error);
    }
    Py_END_ALLOW_THREADS
    result = fp8q_py_raise_on_failure(status, &error) < 0 ? NULL
             : device.type == FP8Q_DEVICE_CPU
                 ? (fp8q_TensorObject *)Py_NewRef(full)
                 : fp8q_tensor_copy_to(full, &device, stream);
done:
    Py_XDECREF(given);
    Py_XDECREF(full);
    return result;
}

/* A new C-contiguous (N, M) tensor on data's device holding data.T (data
 * a C-contiguous (M, N) tensor), bits unchanged. */
static fp8q_TensorObject *transposed_copy(fp8q_TensorObject *data,
                                          fp8q_cu_stream stream)
{
    const int64_t shape[2] = {data->view.shape[1], data->view.shape[0]};
    fp8q_TensorObject *tensors[2] = {data, NULL};
    fp8q_view source;
    fp8q_op_call call;

    tensors[1] = fp8q_py_new_like(data, data->view.dtype, 2, shape, stream);
    if (tensors[1] == NULL) {
        return NULL;
    }
    /* A cast between equal dtypes copies the bits (on a GPU, data.T by
     * kernels/transpose.cuh). */
    fp8q_view_transpose_2d(&data->view, &source);
    fp8q_op_call_init(&call, FP8Q_OP_CAST, &source, &tensors[1]->view,
                      stream);
    if (fp8q_py_op_run(&call, tensors, 2) < 0) {
        Py_CLEAR(tensors[1]);
    }
    return tensors[1];
}

/* stream=, dtype= (when given) and granularity= (when given) of
 * `function`, quantize (dtype must be an FP8 format) or dequantize (dtype
 * must be float32, float16 or bfloat16). 0, or -1 with an exception. */
static int parse_options(const char *function, PyObject *stream_object,
                         PyObject *dtype_object, PyObject *granularity_object,
                         fp8q_cu_stream *stream, fp8q_dtype *dtype,
                         fp8q_granularity *granularity)
{
    fp8q_error error;

    if (fp8q_py_parse_stream(stream_object, "stream", stream) < 0 ||
        (dtype_object != NULL &&
         fp8q_py_parse_dtype(dtype_object, "dtype", dtype) < 0)) {
        return -1;
    }
    if (fp8q_py_raise_on_failure(
            fp8q_check_quantize_dtype(function[0] == 'd', *dtype, &error),
            &error) < 0) {
        return -1;
    }
    return granularity_object == NULL
               ? 0
               : parse_granularity(granularity_object, function,
                                   granularity);
}

PyDoc_STRVAR(
    quantize_doc,
    "_quantize(x, dtype='float8_e4m3fn', *, granularity='tensor', "
    "scale=None, saturate=True, power_of_2=False, transpose=False, "
    "stream=None)\n"
    "--\n"
    "\n"
    "The C half of fp8q.quantize, which wraps the result in fp8q.QTensor.\n"
    "Returns (data, scale, transposed): transposed is None, or with\n"
    "transpose=True (2-D x only) a C-contiguous copy of data.T.\n"
    "\n"
    "data = cast(x, dtype, scale=scale broadcast per group, saturate=...),\n"
    "an FP8 tensor of x's shape; scale is a new float32 tensor of the\n"
    "granularity's scale shape:\n"
    "  'tensor': ()                       one scale\n"
    "  'row':    x.shape[:-1] + (1,)      one per index of all but the last axis\n"
    "  'col':    (1,) * (ndim - 1) + (N,) one per index of the last axis\n"
    "  (bm, bn): (ceil(M / bm), ceil(N / bn)) blocks of 2-D x (M, N),\n"
    "            edge blocks may be partial\n"
    "With scale=None every group's scale is float32(amax) / float32(max of\n"
    "dtype) (a correctly rounded float32 division), 1.0 for an all-zero\n"
    "group, rounded up to a power of two when power_of_2=True; a NaN or\n"
    "infinite amax raises ValueError. A given scale (finite, > 0) must have\n"
    "the scale shape or broadcast to it; it is copied.\n"
    "dtype must be an FP8 format.");

PyDoc_STRVAR(
    dequantize_doc,
    "_dequantize(data, scale, granularity, dtype='float32', *, "
    "stream=None)\n"
    "--\n"
    "\n"
    "The C half of fp8q.dequantize / QTensor.dequantize.\n"
    "\n"
    "result = float32(data) * scale (a correctly rounded float32 product,\n"
    "each element using its group's scale), rounded once into dtype\n"
    "(float32, float16 or bfloat16). data is an FP8 tensor; scale is\n"
    "float32 of exactly the granularity's scale shape for data's shape (see\n"
    "fp8q.quantize); granularity is 'tensor', 'row', 'col' or a\n"
    "(block_rows, block_cols) pair; stream as fp8q.cast takes it.");

static PyObject *ops_quantize(PyObject *module, PyObject *const *args,
                              Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const keywords[] = {
        "x",          "dtype",     "granularity", "scale", "saturate",
        "power_of_2", "transpose", "stream",      NULL};
    PyObject *x_object, *dtype_object = NULL, *granularity_object = NULL;
    PyObject *scale_object = Py_None, *stream_object = Py_None;
    fp8q_cu_stream stream;
    int transpose = 0;
    fp8q_quantize_options options;
    fp8q_dtype dtype = FP8Q_FLOAT8_E4M3FN;
    int scale_ndim;
    int64_t scale_shape[FP8Q_MAX_DIMS];
    fp8q_TensorObject *x = NULL, *data = NULL, *scale = NULL;
    fp8q_TensorObject *transposed = NULL;
    fp8q_TensorObject *tensors[3];
    fp8q_op_call call;
    fp8q_error error;

    (void)module;
    /* granularity "tensor"; infinity_to_nan 0: the layer's option. */
    memset(&options, 0, sizeof options);
    options.granularity.block_rows = 1;
    options.granularity.block_cols = 1;
    options.saturate = 1;
    if (fp8q_py_parse_arguments(args, nargs, kwnames, "O|O$OOpppO:quantize",
                                keywords, &x_object, &dtype_object,
                                &granularity_object, &scale_object,
                                &options.saturate, &options.power_of_2,
                                &transpose, &stream_object) < 0 ||
        parse_options("quantize", stream_object, dtype_object,
                      granularity_object, &stream, &dtype,
                      &options.granularity) < 0) {
        return NULL;
    }
    options.compute_scale = scale_object == Py_None;
    x = fp8q_tensor_from_object(x_object, "x", -1, FP8Q_COPY_IF_NEEDED);
    if (x == NULL ||
        fp8q_py_check_stream_on_cpu("quantize", stream_object,
                                    x->device_type == FP8Q_DEVICE_CPU) < 0) {
        goto fail;
    }
    fp8q_error_clear(&error);
    if (fp8q_py_raise_on_failure(
            fp8q_scale_shape(&options.granularity, x->view.ndim,
                             x->view.shape, &scale_ndim, scale_shape, &error),
            &error) < 0 ||
        fp8q_py_raise_on_failure(
            fp8q_check_quantize_transpose(transpose, x->view.ndim, &error),
            &error) < 0) {
        goto fail;
    }
    data = fp8q_py_new_like(x, dtype, x->view.ndim, x->view.shape, stream);
    scale = data == NULL ? NULL
            : options.compute_scale
                ? fp8q_py_new_like(x, FP8Q_FLOAT32, scale_ndim, scale_shape,
                                   stream)
                : given_scale(scale_object, granularity_object, x,
                              scale_ndim, scale_shape, stream);
    if (scale == NULL) {
        goto fail;
    }
    tensors[0] = x;
    tensors[1] = data;
    tensors[2] = scale;
    fp8q_op_call_init(&call, FP8Q_OP_QUANTIZE, &x->view, &data->view, stream);
    call.scale = &scale->view;
    call.options = &options;
    if (fp8q_py_op_run(&call, tensors, 3) < 0) {
        goto fail;
    }
    if (transpose) {
        transposed = transposed_copy(data, stream);
        if (transposed == NULL) {
            goto fail;
        }
    }
    Py_DECREF(x);
    return Py_BuildValue("(NNN)", (PyObject *)data, (PyObject *)scale,
                         transposed != NULL ? (PyObject *)transposed
                                            : Py_NewRef(Py_None));

fail:
    Py_XDECREF(x);
    Py_XDECREF(data);
    Py_XDECREF(scale);
    return NULL;
}

static PyObject *ops_dequantize(PyObject *module, PyObject *const *args,
                                Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const keywords[] = {"data",  "scale",  "granularity",
                                           "dtype", "stream", NULL};
    PyObject *data_object, *scale_object, *granularity_object;
    PyObject *dtype_object = NULL, *stream_object = Py_None;
    fp8q_cu_stream stream;
    fp8q_py_device device;
    fp8q_granularity granularity;
    fp8q_dtype dtype = FP8Q_FLOAT32;
    fp8q_TensorObject *data = NULL, *scale = NULL, *result = NULL;
    fp8q_error error;

    (void)module;
    if (fp8q_py_parse_arguments(args, nargs, kwnames, "OOO|O$O:dequantize",
                                keywords, &data_object, &scale_object,
                                &granularity_object, &dtype_object,
                                &stream_object) < 0 ||
        parse_options("dequantize", stream_object, dtype_object,
                      granularity_object, &stream, &dtype, &granularity) < 0) {
        return NULL;
    }
    data = fp8q_tensor_from_object(data_object, "data", -1,
                                   FP8Q_COPY_IF_NEEDED);
    if (data == NULL ||
        fp8q_py_check_stream_on_cpu("dequantize", stream_object,
                                    data->device_type == FP8Q_DEVICE_CPU) <
            0) {
        goto fail;
    }
    device.type = data->device_type;
    device.index = data->device_index;
    if (fp8q_py_raise_on_failure(
            fp8q_check_dequantize_data(data->view.dtype, &error), &error) <
        0) {
        goto fail;
    }
    scale = fp8q_tensor_from_object(scale_object, "scale", FP8Q_FLOAT32,
                                    FP8Q_COPY_IF_NEEDED);
    if (scale == NULL ||
        (device.type == FP8Q_DEVICE_CPU &&
         fp8q_py_require_cpu(scale, "dequantize", "scale") < 0)) {
        goto fail;
    }
    result = fp8q_py_new_like(data, dtype, data->view.ndim, data->view.shape,
                              stream);
    if (result == NULL) {
        goto fail;
    }
    fp8q_error_clear(&error);
    /* A scale on the host moves to a GPU data's device once its shape is
     * checked (on the CPU fp8q_dequantize checks it). */
    if (device.type == FP8Q_DEVICE_CUDA &&
        fp8q_py_raise_on_failure(
            fp8q_check_scale_shape(&granularity, &data->view, &scale->view,
                                   &error),
            &error) < 0) {
        goto fail;
    }
    if (scale->device_type != device.type ||
        scale->device_index != device.index) {
        Py_SETREF(scale, fp8q_tensor_copy_to(scale, &device, stream));
    }
    if (scale == NULL || fp8q_py_cuda_dequantize(data, scale, &granularity,
                                                 result, stream) < 0) {
        goto fail;
    }
    Py_DECREF(data);
    Py_DECREF(scale);
    return (PyObject *)result;

fail:
    Py_XDECREF(data);
    Py_XDECREF(scale);
    Py_XDECREF(result);
    return NULL;
}

/* The methods this file adds to fp8q._C. */
PyMethodDef fp8q_py_quantize_functions[] = {
    {"_quantize", (PyCFunction)(void (*)(void))ops_quantize,
     METH_FASTCALL | METH_KEYWORDS, quantize_doc},
    {"_dequantize", (PyCFunction)(void (*)(void))ops_dequantize,
     METH_FASTCALL | METH_KEYWORDS, dequantize_doc},
    {NULL, NULL, 0, NULL},
};
