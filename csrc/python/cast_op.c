/*
 * cast_op.c - fp8q._C.cast: parses its arguments, turns them into views,
 * checks dtypes, shapes and devices, allocates the result (and the optional
 * amax output) and runs the cast on x's device (fp8q_py_cast_run). No math
 * here.
 */
#include "python/binding.h"

#include "core/cast.h"
#include "core/op_checks.h"
#include "core/output_check.h"
#include "core/view_layout.h"

/* amax_out= of cast (core/output_check.h's fp8q_check_amax_output), in
 * memory apart from x, scale (NULL when absent) and out. */
static fp8q_TensorObject *amax_output(PyObject *object,
                                      const fp8q_TensorObject *x,
                                      const fp8q_TensorObject *scale,
                                      const fp8q_TensorObject *out)
{
    static const char *const names[3] = {"x", "scale=", "out="};
    fp8q_TensorObject *amax =
        fp8q_py_refuse_without_memory(object, "amax_out") < 0
            ? NULL
            : fp8q_tensor_from_object(object, "amax_out", -1,
                                      FP8Q_COPY_NEVER);
    const fp8q_view *others[3];
    fp8q_error error;

    others[0] = &x->view;
    others[1] = scale != NULL ? &scale->view : NULL;
    others[2] = &out->view;
    if (amax != NULL &&
        (fp8q_py_raise_on_failure(
             fp8q_check_amax_output(&amax->view, fp8q_py_place(amax),
                                    amax->readonly, fp8q_py_place(x), &error),
             &error) < 0 ||
         fp8q_py_raise_on_failure(
             fp8q_check_amax_out_apart("cast", &amax->view, others, names, 3,
                                       &error),
             &error) < 0)) {
        Py_CLEAR(amax);
    }
    return amax;
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
    "device, sharing no memory with x, scale or out: receives\n"
    "max |float32(x)| over all of x as given (before scaling, and before an\n"
    "in-place cast with out=x; NaN when x holds a NaN), as fp8q.amax(x)\n"
    "would give it. On CUDA it is\n"
    "computed in the same pass as the cast (delayed scaling: cast with\n"
    "last step's scale, record this step's amax).\n"
    "\n"
    "CUDA: when x is on a GPU the cast runs there, on `stream` (None: the\n"
    "legacy default stream; an int handle; or an object with\n"
    "__cuda_stream__ or .cuda_stream, such as torch.cuda.Stream), after\n"
    "the last use of each input; results are bit-identical to the CPU's.\n"
    "For x on the CPU stream must be None (ValueError otherwise), as for\n"
    "every fp8q operation that takes a stream.\n"
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

static PyObject *ops_cast(PyObject *module, PyObject *const *args,
                          Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const keywords[] = {
        "x", "dtype", "scale", "saturate", "out", "amax_out", "stream", NULL};
    PyObject *x_object, *dtype_object, *scale_object = Py_None;
    PyObject *out_object = Py_None, *amax_object = Py_None;
    PyObject *stream_object = Py_None;
    fp8q_TensorObject *x = NULL, *scale = NULL, *out = NULL, *amax_out = NULL;
    int saturate = 1;
    fp8q_dtype dtype;
    fp8q_cu_stream stream;
    fp8q_view scale_view;
    fp8q_error error;
    fp8q_status status;

    (void)module;
    if (fp8q_py_parse_arguments(args, nargs, kwnames, "OO|$OpOOO:cast",
                                keywords, &x_object, &dtype_object,
                                &scale_object, &saturate, &out_object,
                                &amax_object, &stream_object) < 0 ||
        fp8q_py_parse_dtype(dtype_object, "dtype", &dtype) < 0 ||
        fp8q_py_parse_stream(stream_object, "stream", &stream) < 0) {
        return NULL;
    }
    if (fp8q_py_raise_on_failure(
            fp8q_check_cast_scale(scale_object != Py_None, dtype, &error),
            &error) < 0) {
        return NULL;
    }
    x = fp8q_tensor_from_object(x_object, "x", -1, FP8Q_COPY_IF_NEEDED);
    if (x == NULL ||
        fp8q_py_check_stream_on_cpu("cast", stream_object,
                                    x->device_type == FP8Q_DEVICE_CPU) < 0) {
        goto done;
    }
    fp8q_error_clear(&error);
    if (scale_object != Py_None) {
        scale = fp8q_tensor_from_object(scale_object, "scale", FP8Q_FLOAT32,
                                        FP8Q_COPY_IF_NEEDED);
        if (scale == NULL ||
            (x->device_type == FP8Q_DEVICE_CPU &&
             fp8q_py_require_cpu(scale, "cast", "scale") < 0)) {
            goto done;
        }
        status = fp8q_view_broadcast_to(&scale->view, x->view.ndim,
                                        x->view.shape, &scale_view, "scale",
                                        &error);
        /* Scales on the host are checked here; a CUDA scale is not read
         * back (docs/architecture.md, "Devices and streams"). */
        if (status == FP8Q_OK && scale->device_type == FP8Q_DEVICE_CPU) {
            Py_BEGIN_ALLOW_THREADS
            status = fp8q_check_scale_values(&scale->view, "scale", &error);
            Py_END_ALLOW_THREADS
        }
        if (fp8q_py_raise_on_failure(status, &error) < 0) {
            goto done;
        }
    }
    out = fp8q_py_op_output(out_object, "cast", dtype, x, stream);
    if (out != NULL && out_object != Py_None &&
        fp8q_py_raise_on_failure(
            fp8q_check_cast_overlap(&x->view,
                                    scale != NULL ? &scale_view : NULL,
                                    &out->view, &error),
            &error) < 0) {
        Py_CLEAR(out);
    }
    if (out == NULL) {
        goto done;
    }
    amax_out = amax_object != Py_None
                   ? amax_output(amax_object, x, scale, out)
                   : NULL;
    if ((amax_object != Py_None && amax_out == NULL) ||
        fp8q_py_cast_run(x, scale, scale != NULL ? &scale_view : NULL, out,
                         amax_out, saturate, stream) < 0) {
        Py_CLEAR(out);
    }
done:
    Py_XDECREF(x);
    Py_XDECREF(scale);
    Py_XDECREF(amax_out);
    return fp8q_py_op_result(out, out_object);
}

/* The methods this file adds to fp8q._C. */
PyMethodDef fp8q_py_cast_functions[] = {
    {"cast", (PyCFunction)(void (*)(void))ops_cast,
     METH_FASTCALL | METH_KEYWORDS, cast_doc},
    {NULL, NULL, 0, NULL},
};
