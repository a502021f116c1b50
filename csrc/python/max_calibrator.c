/*
 * max_calibrator.c - fp8q.calib.MaxCalibrator: the amax of the data seen,
 * per tensor or per channel, as the running maximum over every update (the
 * default), a window of recent amax values or a moving average
 * (core/amax_history.h).
 *
 * Its table for the calibrator base (calibrator_base.c, which parses
 * update() and dispatches by device, merges, pickles and locks): a CPU
 * batch's amax is computed with the GIL released and pushed with the GIL
 * held; a CUDA batch's amax stays on its GPU, where kernels/calibrate.cuh's
 * fp8q_calib_fold_max pushes it into an amax history on the device
 * (calibration_device.c), read back only when the state is read. The running maximum's device history starts
 * empty and is pushed into the host's at the settle (a maximum is exact in
 * any order). A window or a moving average needs every entry in order: its
 * device history starts as a copy of the host's (same ring, counters and
 * entries), continues it batch by batch as the CPU would, and replaces it
 * at the settle.
 */
#include <string.h>

#include "python/calibrator_binding.h"

#include "core/amax.h"
#include "core/amax_history.h"
#include "cuda/calibration_ops.h"

/* What a state_dict holds, for load_state_dict's KeyError. */
#define STATE_KEYS                                                            \
    "a MaxCalibrator state has \"amax_history\" and \"nonfinite_count\""

typedef struct fp8q_MaxCalibratorObject {
    fp8q_py_calibrator base; /* device: the amax history of CUDA batches */
    int most_recent;        /* algo == "most_recent" */
    fp8q_amax_history history; /* entries NULL until the channels are known */
} fp8q_MaxCalibratorObject;

/* ------------------------------------------------------------------------- */
/* State                                                                     */

/* (Re)allocates the history for n_channels, emptying it. */
static int allocate_history(fp8q_MaxCalibratorObject *self,
                            int64_t n_channels)
{
    const size_t count =
        (size_t)(self->history.length * (n_channels > 0 ? n_channels : 1));
    float *entries = (float *)PyMem_Calloc(count, sizeof(float));

    if (entries == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    PyMem_Free(self->history.entries);
    fp8q_amax_history_init(&self->history, n_channels, self->history.length,
                           self->history.momentum, self->history.running_max,
                           entries);
    return 0;
}

/* The calibrated amax values (n_channels floats) into a new buffer. */
static float *current_amax(const fp8q_MaxCalibratorObject *self)
{
    const int64_t n_channels = self->history.n_channels;
    float *amax =
        (float *)PyMem_Malloc((size_t)(n_channels > 0 ? n_channels : 1) *
                              sizeof(float));
    if (amax == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    fp8q_amax_history_reduce(&self->history, self->most_recent, amax);
    return amax;
}

static int has_data(const fp8q_MaxCalibratorObject *self)
{
    return self->history.entries != NULL && self->history.filled > 0;
}

static int per_channel(const fp8q_MaxCalibratorObject *self)
{
    return self->base.channel_axis != FP8Q_PY_PER_TENSOR;
}

/* The channels of a device state of `bytes` (kernels/calibrate.cuh,
 * fp8q_calib_max_state and its ring of history.length entries). */
static int64_t device_channels(const fp8q_MaxCalibratorObject *self,
                               size_t bytes)
{
    return (int64_t)((bytes - sizeof(fp8q_calib_max_state)) /
                     ((size_t)self->history.length * sizeof(float)));
}

/* fp8q_py_device_fold: a running maximum's device history (what the device
 * saw since it started empty) is pushed as one entry, which the host's
 * takes elementwise; a window's or moving average's (which started as the
 * host's) becomes the host's. */
static int fold_device_state(PyObject *object, const void *memory,
                             size_t bytes)
{
    fp8q_MaxCalibratorObject *self = (fp8q_MaxCalibratorObject *)object;
    const fp8q_calib_max_state *state = (const fp8q_calib_max_state *)memory;
    const int64_t n_channels = device_channels(self, bytes);
    const float *ring = (const float *)(const void *)(state + 1);

    if (state->filled == 0) {
        return 0;
    }
    if (self->history.entries == NULL &&
        allocate_history(self, n_channels) < 0) {
        return -1;
    }
    if (self->history.running_max) {
        fp8q_amax_history_push(&self->history,
                               ring + state->newest * n_channels);
        return 0;
    }
    self->history.filled = state->filled;
    self->history.newest = state->newest;
    memcpy(self->history.entries, ring,
           (size_t)(self->history.length * n_channels) * sizeof(float));
    return 0;
}

/* fp8q_py_device_image: the host history as a device state (a window or a
 * moving average); zeros, an empty history, before any entry. */
static void device_image(PyObject *object, void *memory, size_t bytes)
{
    const fp8q_MaxCalibratorObject *self = (fp8q_MaxCalibratorObject *)object;
    fp8q_calib_max_state *state = (fp8q_calib_max_state *)memory;

    if (!has_data(self)) {
        return;
    }
    state->filled = self->history.filled;
    state->newest = self->history.newest;
    memcpy(state + 1, self->history.entries,
           bytes - sizeof *state); /* the ring, same layout */
}

/* fp8q_py_calibrator_kind.continues_host: a window's or moving average's
 * device history starts as the host's. */
static int continues_host(PyObject *object)
{
    return !((fp8q_MaxCalibratorObject *)object)->history.running_max;
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
    int axis_value;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOsO:MaxCalibrator",
                                     keywords, &channel_axis,
                                     &history_len_object, &algo,
                                     &momentum_object)) {
        return -1;
    }
    /* Everything is checked before anything changes. */
    if (fp8q_py_parse_channel_axis(channel_axis, &axis_value) < 0) {
        return -1;
    }
    if (history_len_object != Py_None) {
        if (!PyLong_Check(history_len_object)) {
            PyErr_Format(PyExc_TypeError,
                         "history_len: expected None (running maximum) or "
                         "an int, got %.200s",
                         Py_TYPE(history_len_object)->tp_name);
            return -1;
        }
        history_len = PyLong_AsLongLong(history_len_object);
        if (history_len == -1 && PyErr_Occurred()) {
            return -1;
        }
    }
    if (history_len < 1 || history_len > FP8Q_AMAX_HISTORY_MAX_LENGTH) {
        PyErr_Format(PyExc_ValueError,
                     "history_len: expected 1 to %lld, got %lld",
                     (long long)FP8Q_AMAX_HISTORY_MAX_LENGTH, history_len);
        return -1;
    }
    if (strcmp(algo, "max") != 0 && strcmp(algo, "most_recent") != 0) {
        PyErr_Format(PyExc_ValueError,
                     "algo: expected \"max\" or \"most_recent\", got \"%s\"",
                     algo);
        return -1;
    }
    if (history_len_object == Py_None && strcmp(algo, "max") != 0) {
        PyErr_SetString(PyExc_ValueError,
                        "algo: \"most_recent\" needs a window; pass "
                        "history_len=N (N >= 1)");
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
        if (history_len != 1) {
            PyErr_SetString(PyExc_ValueError,
                            "momentum and history_len > 1 cannot be combined: "
                            "a moving average keeps one value");
            return -1;
        }
    }
    self->base.channel_axis = axis_value;
    self->most_recent = strcmp(algo, "most_recent") == 0;
    PyMem_Free(self->history.entries);
    memset(&self->history, 0, sizeof self->history);
    self->history.length = (int64_t)history_len;
    self->history.momentum = momentum;
    self->history.running_max =
        history_len_object == Py_None && momentum_object == Py_None;
    /* Per tensor the channel count is known now. */
    return per_channel(self) ? 0 : allocate_history(self, 1);
}

static void max_calibrator_free(PyObject *object)
{
    PyMem_Free(((fp8q_MaxCalibratorObject *)object)->history.entries);
}

/* ------------------------------------------------------------------------- */
/* update                                                                    */

/* The channel count the calibrator has fixed (host or device state), or
 * -1 while it is open. */
static int64_t known_channels(const fp8q_MaxCalibratorObject *self)
{
    if (self->history.entries != NULL) {
        return self->history.n_channels;
    }
    if (self->base.device.memory != NULL) {
        return device_channels(
            self, (size_t)self->base.device.memory->view.shape[0]);
    }
    return -1;
}

/* -1 with a ValueError when x's channel count differs from the one fixed. */
static int check_channels(const fp8q_MaxCalibratorObject *self,
                          int channel_dimension, int64_t n_channels)
{
    const int64_t known = known_channels(self);
    if (known < 0 || known == n_channels) {
        return 0;
    }
    PyErr_Format(PyExc_ValueError,
                 "x: its channel axis (%d) has %lld entries, but this "
                 "calibrator has seen %lld channels",
                 channel_dimension, (long long)n_channels, (long long)known);
    return -1;
}

/* fp8q_py_calibrator_kind.admit: an empty x adds nothing; a CUDA x's
 * channel count is checked now (a CPU x's after its amax). */
static int admit(PyObject *object, fp8q_py_calibrator_batch *batch)
{
    fp8q_MaxCalibratorObject *self = (fp8q_MaxCalibratorObject *)object;
    fp8q_TensorObject *x = batch->x;

    if (fp8q_view_size(&x->view) == 0) {
        return 0; /* no values: nothing observed */
    }
    if (x->device_type == FP8Q_DEVICE_CUDA &&
        check_channels(self, batch->channel_dimension, batch->n_channels) <
            0) {
        return -1;
    }
    return 1;
}

/* fp8q_py_calibrator_kind.device_scratch: none beyond the batch's NaN/inf
 * count and amax per channel. */
static size_t device_scratch(PyObject *object,
                             const fp8q_py_calibrator_batch *batch,
                             int *zeroed)
{
    (void)object;
    (void)batch;
    *zeroed = 0;
    return 0;
}

/* fp8q_py_calibrator_kind.device_state_bytes: kernels/calibrate.cuh's
 * fp8q_calib_max_state and its ring of history.length entries. */
static size_t device_state_bytes(PyObject *object,
                                 const fp8q_py_calibrator_batch *batch)
{
    const fp8q_MaxCalibratorObject *self = (fp8q_MaxCalibratorObject *)object;
    return fp8q_cuda_calib_max_state_bytes(self->history.length,
                                           batch->n_channels);
}

/* fp8q_py_calibrator_kind.device_launch: the batch's amax pushed into the
 * device history (cuda/calibration_ops.h, fp8q_cuda_calib_fold_max). */
static fp8q_status device_launch(PyObject *object,
                                 const fp8q_py_calibrator_batch *batch,
                                 const fp8q_cuda_calib_batch *reduced,
                                 void *state, fp8q_cu_stream stream,
                                 fp8q_error *error)
{
    const fp8q_MaxCalibratorObject *self = (fp8q_MaxCalibratorObject *)object;
    return fp8q_cuda_calib_fold_max(
        batch->x->cuda_device, reduced, batch->n_channels, state,
        self->history.length, self->history.momentum,
        self->history.running_max, self->base.device.n_updates,
        batch->skip_nonfinite, stream, error);
}

/* fp8q_py_calibrator_kind.update_host: the batch's amax, as a keepdims
 * reduction to the channel axis, pushed into the history. */
static int update_host(PyObject *object, const fp8q_py_calibrator_batch *batch,
                       int64_t *n_nonfinite)
{
    fp8q_MaxCalibratorObject *self = (fp8q_MaxCalibratorObject *)object;
    const fp8q_view *x = &batch->x->view;
    const int channel_dimension = batch->channel_dimension;
    const int64_t n_channels = batch->n_channels;
    fp8q_view destination;
    float *batch_amax;
    fp8q_error error;
    fp8q_status status;
    int outcome = -1;
    int axis;

    destination.dtype = FP8Q_FLOAT32;
    destination.ndim = x->ndim;
    for (axis = 0; axis < x->ndim; axis++) {
        destination.shape[axis] = 1;
        destination.strides[axis] = 0;
    }
    if (channel_dimension >= 0) {
        destination.shape[channel_dimension] = n_channels;
        destination.strides[channel_dimension] = 1;
    }
    batch_amax = (float *)PyMem_Malloc((size_t)n_channels * sizeof(float));
    if (batch_amax == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    destination.data = batch_amax;
    fp8q_error_clear(&error);
    FP8Q_PY_BEGIN_INTERRUPTIBLE
    status = fp8q_amax_finite(x, &destination, n_nonfinite, &error);
    FP8Q_PY_END_INTERRUPTIBLE(status)
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        goto done;
    }
    if (*n_nonfinite != 0 && !batch->skip_nonfinite) {
        PyErr_Format(PyExc_ValueError,
                     "x: %lld of its %lld values are NaN or infinite (pass "
                     "skip_nonfinite=True to skip and count them)",
                     (long long)*n_nonfinite, (long long)fp8q_view_size(x));
        goto done;
    }
    /* The state, with the GIL held. A batch with no finite value records
     * nothing but its count. */
    if (*n_nonfinite == fp8q_view_size(x)) {
        outcome = 0;
        goto done;
    }
    if (check_channels(self, channel_dimension, n_channels) < 0 ||
        (self->history.entries == NULL &&
         allocate_history(self, n_channels) < 0)) {
        goto done;
    }
    fp8q_amax_history_push(&self->history, batch_amax);
    outcome = 0;
done:
    PyMem_Free(batch_amax);
    return outcome;
}

/* ------------------------------------------------------------------------- */
/* amax and scale                                                            */

/* fp8q_py_calibrator_kind.current_amax: the history reduced (the maximum,
 * the newest entry or the moving average). */
static int max_calibrator_amax(PyObject *object, float **amax, int *ndim,
                               int64_t *n_channels)
{
    const fp8q_MaxCalibratorObject *self = (fp8q_MaxCalibratorObject *)object;

    if (!has_data(self)) {
        return 0;
    }
    *amax = current_amax(self);
    *ndim = per_channel(self) ? 1 : 0;
    *n_channels = self->history.n_channels;
    return *amax == NULL ? -1 : 1;
}

/* ------------------------------------------------------------------------- */
/* merge, state_dict, load_state_dict, reset                                 */

static PyObject *max_calibrator_repr(fp8q_MaxCalibratorObject *self);

/* fp8q_py_calibrator_kind.merge: entries of equal age take their
 * elementwise maximum; an other without data adds nothing (its
 * nonfinite_count included). */
static int max_calibrator_merge(PyObject *object, PyObject *other_object)
{
    fp8q_MaxCalibratorObject *self = (fp8q_MaxCalibratorObject *)object;
    fp8q_MaxCalibratorObject *other = (fp8q_MaxCalibratorObject *)other_object;
    fp8q_error error;

    if (other->base.channel_axis != self->base.channel_axis ||
        other->most_recent != self->most_recent ||
        other->history.length != self->history.length ||
        other->history.momentum != self->history.momentum ||
        other->history.running_max != self->history.running_max) {
        PyObject *ours = max_calibrator_repr(self);
        PyObject *theirs = max_calibrator_repr(other);
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
    if (!has_data(other)) {
        return 1;
    }
    if (self->history.entries == NULL &&
        allocate_history(self, other->history.n_channels) < 0) {
        return -1;
    }
    fp8q_error_clear(&error);
    return fp8q_py_raise_on_failure(
        fp8q_amax_history_merge(&self->history, &other->history, &error),
        &error);
}

/* fp8q_py_calibrator_kind.state_dict: {"amax_history": rows, oldest
 * first}. */
static PyObject *max_calibrator_state_dict(PyObject *object)
{
    fp8q_MaxCalibratorObject *self = (fp8q_MaxCalibratorObject *)object;
    int64_t filled;
    int64_t n_channels;
    int64_t shape[2];
    float *rows = NULL;
    PyObject *history;
    int64_t age;

    filled = has_data(self) ? self->history.filled : 0;
    n_channels = self->history.entries != NULL ? self->history.n_channels : 0;
    shape[0] = filled;
    shape[1] = n_channels;
    if (filled > 0) {
        rows = (float *)PyMem_Malloc((size_t)(filled * n_channels) *
                                     sizeof(float));
        if (rows == NULL) {
            return PyErr_NoMemory();
        }
        for (age = 0; age < filled; age++) { /* oldest first */
            memcpy(rows + (filled - 1 - age) * n_channels,
                   fp8q_amax_history_entry(&self->history, age),
                   (size_t)n_channels * sizeof(float));
        }
    }
    history = fp8q_py_float32_array(per_channel(self) ? 2 : 1, shape, rows);
    PyMem_Free(rows);
    if (history == NULL) {
        return NULL;
    }
    return Py_BuildValue("{sN}", "amax_history", history);
}

/* fp8q_py_calibrator_kind.reset: per channel the channel count opens
 * again. */
static int max_calibrator_reset(PyObject *object)
{
    fp8q_MaxCalibratorObject *self = (fp8q_MaxCalibratorObject *)object;
    if (per_channel(self)) {
        PyMem_Free(self->history.entries);
        self->history.entries = NULL;
        return 0;
    }
    return allocate_history(self, 1);
}

/* fp8q_py_calibrator_kind.load_state_dict: the rows pushed oldest first. */
static int max_calibrator_load_state_dict(PyObject *object, PyObject *state,
                                          int64_t *loaded_nonfinite_count)
{
    fp8q_MaxCalibratorObject *self = (fp8q_MaxCalibratorObject *)object;
    const int history_ndim = per_channel(self) ? 2 : 1;
    PyObject *history_object =
        fp8q_py_state_item(state, "amax_history", STATE_KEYS);
    PyObject *count_object =
        history_object != NULL
            ? fp8q_py_state_item(state, "nonfinite_count", STATE_KEYS)
            : NULL;
    fp8q_TensorObject *history = NULL;
    fp8q_TensorObject *contiguous = NULL;
    fp8q_amax_history loaded;
    long long nonfinite_count;
    int64_t filled;
    int64_t n_channels;
    int64_t row;
    int64_t index;

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
    filled = contiguous->view.ndim == history_ndim ? contiguous->view.shape[0]
                                                   : -1;
    if (filled < 0 || filled > self->history.length) {
        PyErr_Format(PyExc_ValueError,
                     "state: amax_history must have %d dimensions and at "
                     "most %lld rows (%s), got %d dimensions "
                     "and %lld rows",
                     history_ndim, (long long)self->history.length,
                     per_channel(self) ? "(rows, channels)" : "(rows,)",
                     contiguous->view.ndim,
                     (long long)(contiguous->view.ndim > 0
                                     ? contiguous->view.shape[0]
                                     : 0));
        goto fail;
    }
    n_channels = per_channel(self) ? contiguous->view.shape[1] : 1;
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
            goto fail;
        }
    }
    if (per_channel(self) && filled == 0) {
        /* Nothing recorded: the channel count stays open, as after reset. */
        Py_DECREF(contiguous);
        return max_calibrator_reset(object);
    }
    if (allocate_history(self, n_channels) < 0) {
        goto fail;
    }
    loaded = self->history;
    for (row = 0; row < filled; row++) { /* oldest first */
        fp8q_amax_history_push(&loaded, (const float *)contiguous->view.data +
                                            row * n_channels);
    }
    self->history = loaded;
    Py_DECREF(contiguous);
    return 0;

fail:
    Py_DECREF(contiguous);
    return -1;
}

/* ------------------------------------------------------------------------- */
/* Attributes and type                                                       */

static PyObject *max_calibrator_get_history_len(
    fp8q_MaxCalibratorObject *self, void *closure)
{
    (void)closure;
    if (self->history.running_max) {
        Py_RETURN_NONE;
    }
    return PyLong_FromLongLong((long long)self->history.length);
}

static PyObject *max_calibrator_get_algo(fp8q_MaxCalibratorObject *self,
                                         void *closure)
{
    (void)closure;
    return PyUnicode_FromString(self->most_recent ? "most_recent" : "max");
}

static PyObject *max_calibrator_get_momentum(fp8q_MaxCalibratorObject *self,
                                             void *closure)
{
    (void)closure;
    if (self->history.momentum < 0.0) {
        Py_RETURN_NONE;
    }
    return PyFloat_FromDouble(self->history.momentum);
}

static PyObject *max_calibrator_repr(fp8q_MaxCalibratorObject *self)
{
    PyObject *axis =
        fp8q_py_calibrator_get_channel_axis((PyObject *)self, NULL);
    PyObject *momentum = max_calibrator_get_momentum(self, NULL);
    PyObject *history_len = max_calibrator_get_history_len(self, NULL);
    PyObject *amax = fp8q_py_calibrator_get_amax((PyObject *)self, NULL);
    PyObject *text = NULL;

    if (axis != NULL && momentum != NULL && history_len != NULL &&
        amax != NULL) {
        text = PyUnicode_FromFormat(
            "MaxCalibrator(channel_axis=%R, history_len=%R, algo='%s', "
            "momentum=%R, amax=%R)",
            axis, history_len, self->most_recent ? "most_recent" : "max",
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
     METH_VARARGS | METH_KEYWORDS, scale_doc},
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
    {"history_len", (getter)max_calibrator_get_history_len, NULL,
     "Number of amax values the window keeps (1 with a momentum); None for "
     "the running maximum over every update (the default).", NULL},
    {"algo", (getter)max_calibrator_get_algo, NULL,
     "\"max\" or \"most_recent\".", NULL},
    {"momentum", (getter)max_calibrator_get_momentum, NULL,
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

/* The type and its table for the calibrator base (calibrator_base.c). */
fp8q_py_calibrator_kind fp8q_max_calibrator_kind = {
    FP8Q_PY_CALIBRATOR_TYPE("fp8q.calib.MaxCalibrator",
                            fp8q_MaxCalibratorObject,
                            max_calibrator_repr, max_calibrator_doc,
                            max_calibrator_methods, max_calibrator_getset),
    .name = "MaxCalibrator",
    .settings = {"channel_axis", "history_len", "algo", "momentum", NULL},
    .init = max_calibrator_init,
    .free_state = max_calibrator_free,
    .admit = admit,
    .update_host = update_host,
    .contiguous_on_device = 0, /* fp8q_amax_finite reads any strides */
    .device_scratch = device_scratch,
    .device_state_bytes = device_state_bytes,
    .continues_host = continues_host,
    .device_image = device_image,
    .device_fold = fold_device_state,
    .device_launch = device_launch,
    .merge = max_calibrator_merge,
    .state_dict = max_calibrator_state_dict,
    .load_state_dict = max_calibrator_load_state_dict,
    .reset = max_calibrator_reset,
    .current_amax = max_calibrator_amax,
};
