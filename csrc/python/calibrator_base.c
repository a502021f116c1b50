/*
 * calibrator_base.c - the calibrator base: what every fp8q.calib calibrator
 * does the same way, on top of a small table per calibrator
 * (binding.h, fp8q_py_calibrator_kind; max_calibrator.c and
 * histogram_calibrator.c fill one each).
 *
 * The base owns update()'s argument parsing and its dispatch by device (a
 * CPU batch counted into the host state after the device state is settled;
 * a CUDA batch reduced on its GPU into scratch memory and folded into the
 * device state, calibration_device.c), the NaN/inf count, merge's type
 * check, state_dict's "nonfinite_count", load_state_dict's settle, reset,
 * pickling, construction and deallocation, and the critical sections that
 * make one calibrator safe to share across threads (free-threaded builds
 * included). A new calibrator writes its table and its own methods only.
 */
#include <string.h>

#include "python/calibrator_binding.h"

#include "cuda/calibration_ops.h"

/* The table of self's type (the kind's first member is its type). */
static const fp8q_py_calibrator_kind *kind_of(PyObject *self)
{
    return (const fp8q_py_calibrator_kind *)(const void *)Py_TYPE(self);
}

int fp8q_py_calibrator_settle(PyObject *self)
{
    fp8q_py_calibrator *base = (fp8q_py_calibrator *)self;
    return fp8q_py_device_state_settle(&base->device, self,
                                       kind_of(self)->device_fold,
                                       &base->nonfinite_count);
}

/* ------------------------------------------------------------------------- */
/* Construction                                                              */

int fp8q_py_parse_channel_axis(PyObject *object, int *axis)
{
    long long value;

    if (object == Py_None) {
        *axis = FP8Q_PY_PER_TENSOR;
        return 0;
    }
    if (!PyLong_Check(object)) {
        PyErr_Format(PyExc_TypeError,
                     "channel_axis: expected None or an int, got %.200s",
                     Py_TYPE(object)->tp_name);
        return -1;
    }
    value = PyLong_AsLongLong(object);
    if (value == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (value < -FP8Q_MAX_DIMS || value >= FP8Q_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError,
                     "channel_axis: expected an axis in [%d, %d], got %lld",
                     -FP8Q_MAX_DIMS, FP8Q_MAX_DIMS - 1, value);
        return -1;
    }
    *axis = (int)value;
    return 0;
}

PyObject *fp8q_py_calibrator_get_channel_axis(PyObject *self, void *closure)
{
    const int axis = ((fp8q_py_calibrator *)self)->channel_axis;

    (void)closure;
    if (axis == FP8Q_PY_PER_TENSOR) {
        Py_RETURN_NONE;
    }
    return PyLong_FromLong(axis);
}

int fp8q_py_calibrator_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    fp8q_py_calibrator *base = (fp8q_py_calibrator *)self;

    if (kind_of(self)->init(self, args, kwargs) < 0) {
        return -1;
    }
    base->nonfinite_count = 0;
    fp8q_py_device_state_clear(&base->device);
    return 0;
}

PyObject *fp8q_py_calibrator_new(PyTypeObject *type, PyObject *args,
                                 PyObject *kwargs)
{
    PyObject *self = type->tp_alloc(type, 0);
    PyObject *no_arguments;
    int status;

    (void)args;
    (void)kwargs;
    if (self == NULL) {
        return NULL;
    }
    ((fp8q_py_calibrator *)self)->channel_axis = FP8Q_PY_PER_TENSOR;
    no_arguments = PyTuple_New(0);
    status = no_arguments == NULL
                 ? -1
                 : fp8q_py_calibrator_init(self, no_arguments, NULL);
    Py_XDECREF(no_arguments);
    if (status < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return self;
}

void fp8q_py_calibrator_dealloc(PyObject *self)
{
    Py_XDECREF(((fp8q_py_calibrator *)self)->device.memory);
    kind_of(self)->free_state(self);
    Py_TYPE(self)->tp_free(self);
}

/* ------------------------------------------------------------------------- */
/* update                                                                    */

/* The batch's channel dimension and count from the calibrator's channel
 * axis; -1 with a ValueError when the axis is out of range for x. */
static int resolve_channel_axis(const fp8q_py_calibrator *self,
                                fp8q_py_calibrator_batch *batch)
{
    const int ndim = batch->x->view.ndim;
    const int axis = self->channel_axis;
    int dimension;

    if (axis == FP8Q_PY_PER_TENSOR) {
        return 0;
    }
    dimension = axis < 0 ? axis + ndim : axis;
    if (dimension < 0 || dimension >= ndim) {
        PyErr_Format(PyExc_ValueError,
                     "x: channel_axis=%d is out of range for an input of %d "
                     "dimensions",
                     axis, ndim);
        return -1;
    }
    batch->channel_dimension = dimension;
    batch->n_channels = batch->x->view.shape[dimension];
    return 0;
}

/*
 * A CUDA batch, all on its GPU on x's stream: the batch's finite amax (per
 * channel) and NaN/inf count into scratch memory (fp8q_cuda_calib_reduce,
 * without the GIL), then the table's kernels fold it into the device state
 * (which refuses and records a batch with NaN/inf unless skip_nonfinite).
 * No host wait, no copy back. The kernels that read or write the state are
 * launched with the GIL held, right after the state was ordered on the
 * stream, so that updates from several threads fold one after another.
 */
static int update_on_device(PyObject *self,
                            const fp8q_py_calibrator_batch *batch)
{
    const fp8q_py_calibrator_kind *kind = kind_of(self);
    fp8q_py_calibrator *base = (fp8q_py_calibrator *)self;
    fp8q_TensorObject *x = batch->x;
    const fp8q_cu_stream stream = fp8q_py_last_stream(x);
    fp8q_cuda_calib_batch reduced;
    size_t extra_bytes;
    int zero_extra = 0;
    fp8q_error error;
    fp8q_status status;
    void *state;
    int outcome = -1;

    if (fp8q_py_use_on_stream(x, stream) < 0) {
        return -1;
    }
    extra_bytes = kind->device_scratch(self, batch, &zero_extra);
    fp8q_error_clear(&error);
    Py_BEGIN_ALLOW_THREADS
    status = fp8q_cuda_calib_reduce(
        x->cuda_device, &x->view, batch->channel_dimension, batch->n_channels,
        kind->contiguous_on_device, extra_bytes, zero_extra, stream, &reduced,
        &error);
    Py_END_ALLOW_THREADS
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        return -1;
    }
    state = fp8q_py_device_state_prepare(
        &base->device, x, kind->device_state_bytes(self, batch), stream,
        self, kind->device_fold,
        kind->continues_host != NULL && kind->continues_host(self)
            ? kind->device_image
            : NULL,
        &base->nonfinite_count);
    if (state != NULL) {
        outcome = fp8q_py_raise_on_failure(
            kind->device_launch(self, batch, &reduced, state, stream, &error),
            &error);
    }
    Py_BEGIN_ALLOW_THREADS
    fp8q_cuda_calib_batch_release(&reduced, stream);
    Py_END_ALLOW_THREADS
    return outcome;
}

static PyObject *calibrator_update(fp8q_py_calibrator *self, PyObject *args,
                                   PyObject *kwargs)
{
    static char *keywords[] = {"x", "skip_nonfinite", NULL};
    PyObject *object = (PyObject *)self;
    const fp8q_py_calibrator_kind *kind = kind_of(object);
    fp8q_py_calibrator_batch batch;
    PyObject *x_object;
    int64_t n_nonfinite = 0;
    int outcome;

    memset(&batch, 0, sizeof batch);
    batch.channel_dimension = -1;
    batch.n_channels = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$p:update", keywords,
                                     &x_object, &batch.skip_nonfinite)) {
        return NULL;
    }
    self->device.n_updates++;
    /* A CUDA x stays there: it is reduced on its GPU. */
    batch.x = fp8q_tensor_from_object(x_object, "x", -1, FP8Q_COPY_IF_NEEDED);
    if (batch.x == NULL) {
        return NULL;
    }
    outcome = resolve_channel_axis(self, &batch);
    if (outcome == 0) {
        outcome = kind->admit(object, &batch);
    }
    if (outcome > 0 && batch.x->device_type == FP8Q_DEVICE_CUDA) {
        outcome = update_on_device(object, &batch);
    }
    else if (outcome > 0) {
        /* A CPU batch goes to the host state, after what the device holds
         * (which may raise its deferred error first). */
        outcome = fp8q_py_calibrator_settle(object);
        if (outcome == 0) {
            outcome = kind->update_host(object, &batch, &n_nonfinite);
        }
        if (outcome == 0) {
            self->nonfinite_count += n_nonfinite;
        }
    }
    Py_DECREF(batch.x);
    if (outcome < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------- */
/* merge, state_dict, load_state_dict, reset, pickle                         */

static PyObject *calibrator_merge(fp8q_py_calibrator *self,
                                  PyObject *other_object)
{
    PyObject *object = (PyObject *)self;
    const fp8q_py_calibrator_kind *kind = kind_of(object);
    int outcome;

    if (!PyObject_TypeCheck(other_object, Py_TYPE(self))) {
        PyErr_Format(PyExc_TypeError, "other: expected a %s, got %.200s",
                     kind->name, Py_TYPE(other_object)->tp_name);
        return NULL;
    }
    if (fp8q_py_calibrator_settle(object) < 0 ||
        fp8q_py_calibrator_settle(other_object) < 0) {
        return NULL;
    }
    outcome = kind->merge(object, other_object);
    if (outcome < 0) {
        return NULL;
    }
    if (outcome == 0) {
        self->nonfinite_count +=
            ((fp8q_py_calibrator *)other_object)->nonfinite_count;
    }
    Py_RETURN_NONE;
}

static PyObject *calibrator_state_dict(fp8q_py_calibrator *self,
                                       PyObject *unused)
{
    PyObject *object = (PyObject *)self;
    PyObject *state;
    PyObject *count;

    (void)unused;
    if (fp8q_py_calibrator_settle(object) < 0) {
        return NULL;
    }
    state = kind_of(object)->state_dict(object);
    if (state == NULL) {
        return NULL;
    }
    count = PyLong_FromLongLong((long long)self->nonfinite_count);
    if (count == NULL ||
        PyDict_SetItemString(state, "nonfinite_count", count) < 0) {
        Py_XDECREF(count);
        Py_DECREF(state);
        return NULL;
    }
    Py_DECREF(count);
    return state;
}

static PyObject *calibrator_load_state_dict(fp8q_py_calibrator *self,
                                            PyObject *state)
{
    PyObject *object = (PyObject *)self;
    int64_t nonfinite_count = 0;

    /* What the device holds is settled first, so a deferred error is not
     * lost; then the loaded state replaces everything. */
    if (fp8q_py_calibrator_settle(object) < 0 ||
        kind_of(object)->load_state_dict(object, state, &nonfinite_count) <
            0) {
        return NULL;
    }
    self->nonfinite_count = nonfinite_count;
    Py_RETURN_NONE;
}

static PyObject *calibrator_reset(fp8q_py_calibrator *self, PyObject *unused)
{
    (void)unused;
    self->nonfinite_count = 0;
    fp8q_py_device_state_clear(&self->device);
    if (kind_of((PyObject *)self)->reset((PyObject *)self) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *calibrator_get_nonfinite_count(fp8q_py_calibrator *self,
                                                void *closure)
{
    (void)closure;
    if (fp8q_py_calibrator_settle((PyObject *)self) < 0) {
        return NULL;
    }
    return PyLong_FromLongLong((long long)self->nonfinite_count);
}

/* ------------------------------------------------------------------------- */
/* amax and scale                                                            */

static PyObject *calibrator_get_amax(fp8q_py_calibrator *self, void *closure)
{
    PyObject *object = (PyObject *)self;
    float *amax = NULL;
    int64_t n_channels = 1;
    PyObject *result;
    int ndim = 0;
    int outcome;

    (void)closure;
    if (fp8q_py_calibrator_settle(object) < 0) {
        return NULL;
    }
    outcome =
        kind_of(object)->current_amax(object, &amax, &ndim, &n_channels);
    if (outcome <= 0) {
        if (outcome < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    result = ndim == 0 ? PyFloat_FromDouble((double)amax[0])
                       : fp8q_py_float32_array(1, &n_channels, amax);
    PyMem_Free(amax);
    return result;
}

static PyObject *calibrator_scale(fp8q_py_calibrator *self, PyObject *args,
                                  PyObject *kwargs)
{
    static char *keywords[] = {"dtype", "margin", "power_of_2", NULL};
    PyObject *object = (PyObject *)self;
    const fp8q_py_calibrator_kind *kind = kind_of(object);
    PyObject *dtype_object = NULL;
    PyObject *margin_object = NULL;
    int power_of_2 = 0;
    fp8q_dtype target;
    int margin;
    float *amax = NULL;
    int64_t n_channels = 1;
    int ndim = 0;
    int outcome;
    PyObject *result;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOp:scale", keywords,
                                     &dtype_object, &margin_object,
                                     &power_of_2)) {
        return NULL;
    }
    if (fp8q_py_parse_scale_options(dtype_object, margin_object, &target,
                                    &margin) < 0 ||
        fp8q_py_calibrator_settle(object) < 0) {
        return NULL;
    }
    outcome = kind->current_amax(object, &amax, &ndim, &n_channels);
    if (outcome <= 0) {
        if (outcome == 0) {
            PyErr_Format(PyExc_ValueError,
                         "%s.scale: no data yet; call update() first",
                         kind->name);
        }
        return NULL;
    }
    result = fp8q_py_scales_from_amax(ndim, &n_channels, amax, target,
                                      margin, power_of_2);
    PyMem_Free(amax);
    return result;
}

/* pickle and copy: (type(self), the settings in the constructor's order,
 * self.state_dict()). Outside the critical section: state_dict takes it. */
PyObject *fp8q_py_calibrator_reduce(PyObject *self, PyObject *unused)
{
    const char *const *settings = kind_of(self)->settings;
    PyObject *arguments = NULL;
    PyObject *state = NULL;
    Py_ssize_t count = 0, index;

    (void)unused;
    while (settings[count] != NULL) {
        count++;
    }
    arguments = PyTuple_New(count);
    if (arguments == NULL) {
        return NULL;
    }
    for (index = 0; index < count; index++) {
        PyObject *value = PyObject_GetAttrString(self, settings[index]);
        if (value == NULL) {
            Py_DECREF(arguments);
            return NULL;
        }
        PyTuple_SET_ITEM(arguments, index, value);
    }
    state = PyObject_CallMethod(self, "state_dict", NULL);
    if (state == NULL) {
        Py_DECREF(arguments);
        return NULL;
    }
    return Py_BuildValue("(ONN)", (PyObject *)Py_TYPE(self), arguments,
                         state);
}

/* ------------------------------------------------------------------------- */
/* The locked entry points                                                   */

FP8Q_LOCKED_KEYWORDS(locked_update, calibrator_update, fp8q_py_calibrator)
FP8Q_LOCKED_PAIR(locked_merge, calibrator_merge, fp8q_py_calibrator)
FP8Q_LOCKED_SELF(locked_state_dict, calibrator_state_dict, fp8q_py_calibrator)
FP8Q_LOCKED_SELF(locked_load_state_dict, calibrator_load_state_dict,
                 fp8q_py_calibrator)
FP8Q_LOCKED_SELF(locked_reset, calibrator_reset, fp8q_py_calibrator)
FP8Q_LOCKED_SELF(locked_get_nonfinite_count, calibrator_get_nonfinite_count,
                 fp8q_py_calibrator)
FP8Q_LOCKED_SELF(locked_get_amax, calibrator_get_amax, fp8q_py_calibrator)
FP8Q_LOCKED_KEYWORDS(locked_scale, calibrator_scale, fp8q_py_calibrator)

PyObject *fp8q_py_calibrator_update(PyObject *self, PyObject *args,
                                    PyObject *kwargs)
{
    return locked_update((fp8q_py_calibrator *)self, args, kwargs);
}

PyObject *fp8q_py_calibrator_merge(PyObject *self, PyObject *other)
{
    return locked_merge((fp8q_py_calibrator *)self, other);
}

PyObject *fp8q_py_calibrator_state_dict(PyObject *self, PyObject *unused)
{
    return locked_state_dict((fp8q_py_calibrator *)self, unused);
}

PyObject *fp8q_py_calibrator_load_state_dict(PyObject *self, PyObject *state)
{
    return locked_load_state_dict((fp8q_py_calibrator *)self, state);
}

PyObject *fp8q_py_calibrator_reset(PyObject *self, PyObject *unused)
{
    return locked_reset((fp8q_py_calibrator *)self, unused);
}

PyObject *fp8q_py_calibrator_get_nonfinite_count(PyObject *self,
                                                 void *closure)
{
    return locked_get_nonfinite_count((fp8q_py_calibrator *)self, closure);
}

PyObject *fp8q_py_calibrator_get_amax(PyObject *self, void *closure)
{
    return locked_get_amax((fp8q_py_calibrator *)self, closure);
}

PyObject *fp8q_py_calibrator_scale(PyObject *self, PyObject *args,
                                   PyObject *kwargs)
{
    return locked_scale((fp8q_py_calibrator *)self, args, kwargs);
}
