/*
 * calibration.c - what the calibrator types share beside their base
 * (calibrator_base.c): float32 NumPy results, the margin argument, and
 * fp8q._C._scale_from_amax (amax to scale, the one conversion the
 * calibrators and fp8q.CalibrationCache use). Registers the calibrator
 * types of core/calibrator.h's list (FP8Q_CALIBRATORS) as
 * fp8q._C._<Name>Calibrator, e.g. fp8q._C._MaxCalibrator.
 */
#include <string.h>

#include "python/calibrator_binding.h"

#include "core/quantize.h"

/* ------------------------------------------------------------------------- */
/* Shared by the calibrator types (beside calibrator_base.c)                 */

PyObject *fp8q_py_array_copy(int ndim, const int64_t *shape, int type,
                             const void *values)
{
    npy_intp dims[FP8Q_MAX_DIMS];
    PyObject *array;
    int axis;

    for (axis = 0; axis < ndim; axis++) {
        dims[axis] = (npy_intp)shape[axis];
    }
    array = PyArray_SimpleNew(ndim, dims, type);
    if (array != NULL && PyArray_NBYTES((PyArrayObject *)array) > 0) {
        memcpy(PyArray_DATA((PyArrayObject *)array), values,
               (size_t)PyArray_NBYTES((PyArrayObject *)array));
    }
    return array;
}

/* Parses a `margin=` int in [-FP8Q_SCALE_MARGIN_LIMIT,
 * FP8Q_SCALE_MARGIN_LIMIT]; -1 with TypeError / ValueError otherwise. */
static int parse_margin(PyObject *object, int *margin)
{
    long long value;
    int overflow;

    if (!PyLong_Check(object) || PyBool_Check(object)) {
        PyErr_Format(PyExc_TypeError, "margin: expected an int, got %.200s",
                     Py_TYPE(object)->tp_name);
        return -1;
    }
    value = PyLong_AsLongLongAndOverflow(object, &overflow);
    if (value == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow != 0 || value < -FP8Q_SCALE_MARGIN_LIMIT ||
        value > FP8Q_SCALE_MARGIN_LIMIT) {
        PyErr_Format(PyExc_ValueError,
                     "margin: expected an integer in [%d, %d], got %R",
                     -FP8Q_SCALE_MARGIN_LIMIT, FP8Q_SCALE_MARGIN_LIMIT,
                     object);
        return -1;
    }
    *margin = (int)value;
    return 0;
}

int fp8q_py_parse_scale_options(PyObject *dtype_object,
                                PyObject *margin_object, fp8q_dtype *target,
                                int *margin)
{
    *target = FP8Q_FLOAT8_E4M3FN;
    *margin = 0;
    if (dtype_object != NULL &&
        fp8q_py_parse_dtype(dtype_object, "dtype", target) < 0) {
        return -1;
    }
    if (margin_object != NULL && parse_margin(margin_object, margin) <
                                     0) {
        return -1;
    }
    return 0;
}

PyObject *fp8q_py_scales_from_amax(int ndim, const int64_t *shape,
                                   const float *amax, fp8q_dtype target,
                                   int margin, int power_of_2)
{
    PyObject *array = fp8q_py_array_copy(ndim, shape, NPY_FLOAT32, amax);
    PyObject *scalar;
    fp8q_view view;
    fp8q_error error;
    fp8q_status status;

    if (array == NULL) {
        return NULL;
    }
    fp8q_view_init_contiguous(&view, PyArray_DATA((PyArrayObject *)array),
                              FP8Q_FLOAT32, ndim, shape, NULL);
    fp8q_error_clear(&error);
    status = fp8q_scales_from_amax(&view, target, margin, power_of_2, &error);
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        /* A group's amax (margin was checked already); a dtype's TypeError
         * names dtype itself. */
        if (status == FP8Q_ERROR_VALUE) {
            fp8q_py_error_add_prefix("amax: ");
        }
        Py_DECREF(array);
        return NULL;
    }
    if (ndim > 0) {
        return array;
    }
    scalar = PyFloat_FromDouble((double)*(float *)view.data);
    Py_DECREF(array);
    return scalar;
}

PyObject *fp8q_py_state_item(PyObject *state, const char *key,
                             const char *keys_text)
{
    PyObject *item;
    if (!PyDict_Check(state)) {
        PyErr_Format(PyExc_TypeError, "state: expected a dict, got %.200s",
                     Py_TYPE(state)->tp_name);
        return NULL;
    }
    item = PyDict_GetItemString(state, key);
    if (item == NULL) {
        PyErr_Format(PyExc_KeyError, "state: missing \"%s\" (%s)", key,
                     keys_text);
    }
    return item;
}

/* ------------------------------------------------------------------------- */
/* fp8q._C._scale_from_amax                                                  */

static PyObject *calibration_scale_from_amax(PyObject *module,
                                             PyObject *const *args,
                                             Py_ssize_t nargs,
                                             PyObject *kwnames)
{
    static const char *const keywords[] = {"amax", "dtype", "margin",
                                           "power_of_2", NULL};
    PyObject *amax_object;
    PyObject *dtype_object = NULL;
    PyObject *margin_object = NULL;
    int power_of_2 = 0;
    fp8q_dtype target;
    int margin;
    fp8q_TensorObject *amax;
    fp8q_TensorObject *contiguous;
    PyObject *result;

    (void)module;
    if (fp8q_py_parse_arguments(args, nargs, kwnames, "O|O$Op:scale_from_amax",
                                keywords, &amax_object, &dtype_object,
                                &margin_object, &power_of_2) < 0) {
        return NULL;
    }
    if (fp8q_py_parse_scale_options(dtype_object, margin_object, &target,
                                    &margin) < 0) {
        return NULL;
    }
    amax = fp8q_tensor_from_object(amax_object, "amax", FP8Q_FLOAT32,
                                   FP8Q_COPY_IF_NEEDED);
    if (amax == NULL) {
        return NULL;
    }
    if (fp8q_py_require_cpu(amax, "scale_from_amax", "amax") < 0) {
        Py_DECREF(amax);
        return NULL;
    }
    contiguous = fp8q_tensor_copy_as(amax, FP8Q_FLOAT32);
    Py_DECREF(amax);
    if (contiguous == NULL) {
        return NULL;
    }
    result = fp8q_py_scales_from_amax(
        contiguous->view.ndim, contiguous->view.shape,
        (const float *)contiguous->view.data, target, margin, power_of_2);
    Py_DECREF(contiguous);
    return result;
}

PyDoc_STRVAR(
    scale_from_amax_doc,
    "_scale_from_amax(amax, dtype=\"float8_e4m3fn\", *, margin=0, "
    "power_of_2=False)\n"
    "--\n\n"
    "The dequantization scale for each amax: float32(amax) / "
    "float32(finfo(dtype).max * 2**-margin), rounded once (a correctly "
    "rounded float32 division), 1.0 where amax is 0, rounded up to a power "
    "of two with power_of_2=True, never 0 for a positive amax. Each unit of "
    "margin doubles the headroom above amax (TransformerEngine's margin), "
    "in [-64, 64].\n\n"
    "amax: a float or anything fp8q.asarray accepts, every value finite and "
    ">= 0 (ValueError naming the first bad one otherwise). Returns a float "
    "for a scalar or 0-d amax, else a float32 NumPy array of amax's shape. "
    "This is the conversion quantize uses for computed scales.");

static PyMethodDef calibration_functions[] = {
    {"_scale_from_amax",
     (PyCFunction)(void (*)(void))calibration_scale_from_amax,
     METH_FASTCALL | METH_KEYWORDS, scale_from_amax_doc},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------------------- */
/* Registration                                                              */

int fp8q_py_calibration_init(PyObject *module)
{
    /* Private here; fp8q/calib.py gives them their public names. */
#define FP8Q_PY_ADD_KIND(name, Name)                                        \
    if (PyType_Ready(&fp8q_##name##_calibrator_kind.type) < 0 ||           \
        PyModule_AddObjectRef(                                             \
            module, "_" #Name "Calibrator",                                \
            (PyObject *)&fp8q_##name##_calibrator_kind.type) < 0) {        \
        return -1;                                                         \
    }
    FP8Q_CALIBRATORS(FP8Q_PY_ADD_KIND)
#undef FP8Q_PY_ADD_KIND
    return PyModule_AddFunctions(module, calibration_functions);
}
