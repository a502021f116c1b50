/*
 * max_calibrator.c - fp8q.calib.MaxCalibrator: the amax of the data seen,
 * per tensor or per channel, as the running maximum over every update (the
 * default), a window of recent amax values or a moving average.
 *
 * The binding of core/max_calibrator.c's state and ops (an amax history,
 * core/amax_history.h) and cuda/calibration_ops.c's GPU ops (the history
 * continued on the device), for the calibrator base (calibrator_base.c,
 * which converts update(), dispatches by device, merges, pickles and
 * locks): the constructor's arguments, merge's settings check, and the
 * state_dict's conversion.
 */
#include "python/calibrator_binding.h"

/* What a state_dict holds, for load_state_dict's KeyError. */
#define STATE_KEYS                                                            \
    "a MaxCalibrator state has \"amax_history\" and \"nonfinite_count\""

typedef struct fp8q_MaxCalibratorObject {
    fp8q_py_calibrator base; /* device: the amax history of CUDA batches */
    fp8q_max_calibrator core;
} fp8q_MaxCalibratorObject;

static int per_channel(const fp8q_MaxCalibratorObject *self)
{
    return self->core.base.channel_axis != FP8Q_CALIB_PER_TENSOR;
}

/* ------------------------------------------------------------------------- */
/* Construction                                                              */

static int max_calibrator_init(PyObject *object, PyObject *args,
                               PyObject *kwargs)
{
    fp8q_MaxCalibratorObject *self = (fp8q_MaxCalibratorObject *)object;
    static char *keywords[] = {"channel_axis", "history_len", "algo",
                               "momentum", NULL};
    PyObject *channel_axis = Py_None;
    PyObject *momentum_object = Py_None;
    PyObject *history_len_object = Py_None;
    long long history_len = 1;
    const char *algo = "max";
    double momentum = -1.0;
    int has_window;
    int axis_value;
    fp8q_error error;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOsO:MaxCalibrator",
                                     keywords, &channel_axis,
                                     &history_len_object, &algo,
                                     &momentum_object)) {
        return -1;
    }
    /* Everything is checked before anything changes. */
    fp8q_error_clear(&error);
    if (fp8q_py_parse_channel_axis(channel_axis, &axis_value) < 0 ||
        fp8q_py_parse_optional_int(history_len_object, "history_len",
                                   "None (running maximum)", &has_window,
                                   &history_len) < 0 ||
        fp8q_py_raise_on_failure(
            fp8q_max_calibrator_check(has_window, history_len, algo, &error),
            &error) < 0) {
        return -1;
    }
    if (momentum_object != Py_None) {
        momentum = PyFloat_AsDouble(momentum_object);
        if (momentum == -1.0 && PyErr_Occurred()) {
            return -1;
        }
        if (!(momentum >= 0.0 && momentum < 1.0)) {
            PyErr_Format(PyExc_ValueError,
                         "momentum: expected None or a value in [0, 1), "
                         "got %R",
                         momentum_object);
            return -1;
        }
    }
    return fp8q_py_raise_on_failure(
        fp8q_max_calibrator_setup(&self->core, axis_value, has_window,
                                  history_len, algo, momentum, &error),
        &error);
}

/* ------------------------------------------------------------------------- */
/* merge, state_dict, load_state_dict                                        */

static PyObject *max_calibrator_repr(PyObject *object);

/* fp8q_py_calibrator_kind.merge_check: the same settings. */
static int max_calibrator_merge_check(PyObject *object, PyObject *other_object)
{
    fp8q_MaxCalibratorObject *self = (fp8q_MaxCalibratorObject *)object;
    fp8q_MaxCalibratorObject *other = (fp8q_MaxCalibratorObject *)other_object;
    PyObject *ours;
    PyObject *theirs;

    if (other->core.base.channel_axis == self->core.base.channel_axis &&
        other->core.most_recent == self->core.most_recent &&
        other->core.history.length == self->core.history.length &&
        other->core.history.momentum == self->core.history.momentum &&
        other->core.history.running_max == self->core.history.running_max) {
        return 0;
    }
    ours = max_calibrator_repr(object);
    theirs = max_calibrator_repr(other_object);
    if (ours != NULL && theirs != NULL) {
        PyErr_Format(PyExc_ValueError,
                     "other: calibrators with different settings cannot "
                     "be merged: %U into %U",
                     theirs, ours);
    }
    Py_XDECREF(ours);
    Py_XDECREF(theirs);
    return -1;
}

/* fp8q_py_calibrator_kind.state_dict: {"amax_history": rows, oldest
 * first}. */
static PyObject *max_calibrator_state_dict(PyObject *object)
{
    fp8q_MaxCalibratorObject *self = (fp8q_MaxCalibratorObject *)object;
    int64_t shape[2];
    float *rows = NULL;
    PyObject *history;
    fp8q_error error;

    fp8q_error_clear(&error);
    if (fp8q_py_raise_on_failure(
            fp8q_max_calibrator_rows(&self->core, &rows, &shape[0],
                                     &shape[1], &error),
            &error) < 0) {
        return NULL;
    }
    history = fp8q_py_array_copy(per_channel(self) ? 2 : 1, shape,
                                 NPY_FLOAT32, rows);
    fp8q_aligned_free(rows);
    if (history == NULL) {
        return NULL;
    }
    return Py_BuildValue("{sN}", "amax_history", history);
}

/* fp8q_py_calibrator_kind.load_state_dict: the rows checked, then pushed
 * oldest first (fp8q_max_calibrator_load). */
static int max_calibrator_load_state_dict(PyObject *object, PyObject *state,
                                          int64_t *loaded_nonfinite_count)
{
    fp8q_MaxCalibratorObject *self = (fp8q_MaxCalibratorObject *)object;
    PyObject *history_object =
        fp8q_py_state_item(state, "amax_history", STATE_KEYS);
    PyObject *count_object =
        history_object != NULL
            ? fp8q_py_state_item(state, "nonfinite_count", STATE_KEYS)
            : NULL;
    fp8q_TensorObject *history = NULL;
    fp8q_TensorObject *contiguous = NULL;
    long long nonfinite_count;
    fp8q_error error;
    int64_t filled;
    int64_t n_channels;
    int64_t index;
    int outcome = -1;

    if (count_object == NULL) {
        return -1;
    }
    nonfinite_count = PyLong_AsLongLong(count_object);
    if (nonfinite_count == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (nonfinite_count < 0) {
        PyErr_Format(PyExc_ValueError,
                     "state: nonfinite_count must be >= 0, got %lld",
                     nonfinite_count);
        return -1;
    }
    history = fp8q_tensor_from_object(history_object, "amax_history",
                                      FP8Q_FLOAT32, FP8Q_COPY_IF_NEEDED);
    if (history == NULL) {
        return -1;
    }
    contiguous = fp8q_tensor_copy_as(history, FP8Q_FLOAT32);
    Py_DECREF(history);
    if (contiguous == NULL) {
        return -1;
    }
    *loaded_nonfinite_count = (int64_t)nonfinite_count;
    fp8q_error_clear(&error);
    if (fp8q_py_raise_on_failure(
            fp8q_max_calibrator_rows_shape(
                &self->core, contiguous->view.ndim, contiguous->view.shape,
                &filled, &n_channels, &error),
            &error) < 0) {
        goto done;
    }
    for (index = 0; index < filled * n_channels; index++) {
        const float value = ((const float *)contiguous->view.data)[index];
        if (!(value >= 0.0f && value <= 3.40282347e38f)) {
            char *text = PyOS_double_to_string((double)value, 'r', 0, 0,
                                               NULL);
            PyErr_Format(PyExc_ValueError,
                         "state: amax_history value %lld (C order) is %s; "
                         "every amax must be finite and >= 0",
                         (long long)index, text != NULL ? text : "?");
            PyMem_Free(text);
            goto done;
        }
    }
    outcome = fp8q_py_raise_on_failure(
        fp8q_max_calibrator_load(&self->core,
                                 (const float *)contiguous->view.data, filled,
                                 n_channels, &error),
        &error);
done:
    Py_DECREF(contiguous);
    return outcome;
}

/* ------------------------------------------------------------------------- */
/* Attributes and type                                                       */

static PyObject *max_calibrator_get_history_len(PyObject *object,
                                                void *closure)
{
    const fp8q_MaxCalibratorObject *self =
        (const fp8q_MaxCalibratorObject *)object;

    (void)closure;
    if (self->core.history.running_max) {
        Py_RETURN_NONE;
    }
    return PyLong_FromLongLong((long long)self->core.history.length);
}

static PyObject *max_calibrator_get_algo(PyObject *object, void *closure)
{
    const fp8q_MaxCalibratorObject *self =
        (const fp8q_MaxCalibratorObject *)object;

    (void)closure;
    return PyUnicode_FromString(self->core.most_recent ? "most_recent" : "max");
}

static PyObject *max_calibrator_get_momentum(PyObject *object, void *closure)
{
    const fp8q_MaxCalibratorObject *self =
        (const fp8q_MaxCalibratorObject *)object;

    (void)closure;
    if (self->core.history.momentum < 0.0) {
        Py_RETURN_NONE;
    }
    return PyFloat_FromDouble(self->core.history.momentum);
}

static PyObject *max_calibrator_repr(PyObject *object)
{
    fp8q_MaxCalibratorObject *self = (fp8q_MaxCalibratorObject *)object;
    PyObject *axis =
        fp8q_py_calibrator_get_channel_axis((PyObject *)self, NULL);
    PyObject *momentum = max_calibrator_get_momentum((PyObject *)self, NULL);
    PyObject *history_len =
        max_calibrator_get_history_len((PyObject *)self, NULL);
    PyObject *amax = fp8q_py_calibrator_get_amax((PyObject *)self, NULL);
    PyObject *text = NULL;

    if (axis != NULL && momentum != NULL && history_len != NULL &&
        amax != NULL) {
        text = PyUnicode_FromFormat(
            "MaxCalibrator(channel_axis=%R, history_len=%R, algo='%s', "
            "momentum=%R, amax=%R)",
            axis, history_len, self->core.most_recent ? "most_recent" : "max",
            momentum, amax);
    }
    Py_XDECREF(axis);
    Py_XDECREF(history_len);
    Py_XDECREF(momentum);
    Py_XDECREF(amax);
    return text;
}

PyDoc_STRVAR(update_doc,
             "update(x, *, skip_nonfinite=False)\n--\n\n"
             "Records the amax of x (anything fp8q.asarray accepts): max |x| "
             "as float32 over every axis, or per index of channel_axis. The "
             "first update fixes the number of channels. NaN and infinity "
             "raise ValueError (nothing recorded) unless skip_nonfinite=True, "
             "which skips them and adds their number to nonfinite_count. An "
             "empty x records nothing. The GIL is released while x is read. "
             "A CUDA x is reduced on its GPU (after the work that wrote it, "
             "on that stream) and the state stays on that GPU, in every "
             "mode (running maximum, window, momentum): update() neither "
             "waits nor copies anything back (a window or momentum uploads "
             "the host state once, at the first CUDA update after a read), "
             "and a batch holding NaN or infinity without skip_nonfinite is "
             "refused there (nothing of it recorded); the next read of the "
             "state (amax, nonfinite_count, scale, state_dict, "
             "load_state_dict, merge, repr, a CPU batch or a batch on "
             "another GPU) brings the state back once and raises that "
             "deferred ValueError, naming the first refused update "
             "(numbered from 1 since construction or reset), its count and "
             "the number refused, after keeping every other batch. The "
             "results are bit-identical to the CPU's for the same "
             "batches.");

PyDoc_STRVAR(scale_doc,
             "scale(dtype=\"float8_e4m3fn\", margin=0, power_of_2=False)\n--\n\n"
             "The dequantization scale of the current amax: "
             "fp8q.calib.scale_from_amax(self.amax, dtype, margin=margin, "
             "power_of_2=power_of_2), i.e. amax / (finfo(dtype).max * "
             "2**-margin) in float32, 1.0 for an amax of 0. A float per "
             "tensor, a float32 array per channel. ValueError before any "
             "update.");

PyDoc_STRVAR(merge_doc,
             "merge(other)\n--\n\n"
             "Folds another MaxCalibrator with the same settings into this "
             "one: entries of equal age in the two windows take their "
             "elementwise maximum (with a momentum, the maximum of the two "
             "averages), and nonfinite_count adds up. ValueError for "
             "different settings or channel counts.");

PyDoc_STRVAR(state_dict_doc,
             "state_dict()\n--\n\n"
             "{'amax_history': float32 array of the recorded amax values, "
             "oldest first, shape (rows,) per tensor or (rows, channels) per "
             "channel (one row, the maximum or the average, with "
             "history_len=None or a momentum), "
             "'nonfinite_count': int}. Plain values, to combine across "
             "processes with any engine (docs/calibration.md).");

PyDoc_STRVAR(load_state_dict_doc,
             "load_state_dict(state)\n--\n\n"
             "Replaces the state with one from state_dict(), checked: "
             "KeyError for a missing key, ValueError for a wrong shape, more "
             "rows than history_len (1 without a window), or an amax that "
             "is negative or not "
             "finite.");

PyDoc_STRVAR(reset_doc,
             "reset()\n--\n\nForgets every recorded amax, on the host and "
             "on a GPU, refused batches included.");

static PyMethodDef max_calibrator_methods[] = {
    FP8Q_PY_CALIBRATOR_METHODS(update_doc, merge_doc, state_dict_doc,
                               load_state_dict_doc, reset_doc),
    {"scale", (PyCFunction)(void (*)(void))fp8q_py_calibrator_scale,
     METH_FASTCALL | METH_KEYWORDS, scale_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef max_calibrator_getset[] = {
    {"amax", fp8q_py_calibrator_get_amax, NULL,
     "The calibrated amax: the maximum over every update (the default), "
     "the maximum over the window (algo=\"max\"), the newest entry "
     "(\"most_recent\"), or the moving average; a float per "
     "tensor, a float32 array per channel; None before any update.",
     NULL},
    {"channel_axis", fp8q_py_calibrator_get_channel_axis, NULL,
     "The kept axis, or None per tensor.", NULL},
    {"history_len", max_calibrator_get_history_len, NULL,
     "Number of amax values the window keeps (1 with a momentum); None for "
     "the running maximum over every update (the default).", NULL},
    {"algo", max_calibrator_get_algo, NULL,
     "\"max\" or \"most_recent\".", NULL},
    {"momentum", max_calibrator_get_momentum, NULL,
     "The moving-average momentum, or None.", NULL},
    {"nonfinite_count", fp8q_py_calibrator_get_nonfinite_count, NULL,
     "NaN and infinite values skipped so far (skip_nonfinite=True).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(
    max_calibrator_doc,
    "MaxCalibrator(channel_axis=None, history_len=None, algo=\"max\", "
    "momentum=None)\n--\n\n"
    "Running amax of the data passed to update(): per tensor, or per index "
    "of channel_axis (that axis is kept, every other reduced). By default "
    "(history_len=None) amax is the maximum over every update, as "
    "TensorRT's and ModelOpt's max calibration. history_len=N keeps a window of that many batch amax values, as "
    "TransformerEngine's delayed scaling does; amax is their maximum "
    "(algo=\"max\") or the newest (algo=\"most_recent\"). With momentum m in "
    "[0, 1), amax is a moving average as in optimum-quanto: the first batch "
    "as is, then float32(m * old + (1 - m) * new) computed in double.");

/* The type and its tables for the calibrator base (calibrator_base.c). */
fp8q_py_calibrator_kind fp8q_max_calibrator_kind = {
    FP8Q_PY_CALIBRATOR_TYPE("fp8q.calib.MaxCalibrator",
                            fp8q_MaxCalibratorObject, max_calibrator_repr,
                            max_calibrator_doc, max_calibrator_methods,
                            max_calibrator_getset),
    .ops = &fp8q_max_calibrator_ops,
    .device = &fp8q_cuda_max_calibrator,
    .name = "MaxCalibrator",
    .settings = {"channel_axis", "history_len", "algo", "momentum", NULL},
    .init = max_calibrator_init,
    .merge_check = max_calibrator_merge_check,
    .state_dict = max_calibrator_state_dict,
    .load_state_dict = max_calibrator_load_state_dict,
};
