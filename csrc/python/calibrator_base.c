/*
 * calibrator_base.c - the binding of the calibrator base: what every
 * fp8q.calib calibrator does the same way, on top of its core state and ops
 * (core/calibrator.h: counting, merge, reset, amax, NaN/inf count; its GPU
 * ops, cuda/calibration_ops.h) and a small binding table
 * (calibrator_binding.h; max_calibrator.c and histogram_calibrator.c fill
 * one each).
 *
 * The base converts update()'s arguments and dispatches by device (a CPU
 * batch counted with the GIL released and absorbed with it held, after the
 * device state is settled; a CUDA batch reduced on its GPU into scratch
 * memory and folded into the device state, calibration_device.c), checks
 * merge's type, adds state_dict's "nonfinite_count", settles before
 * load_state_dict, and owns reset, pickling, construction, deallocation and
 * the critical sections that make one calibrator safe to share across
 * threads (free-threaded builds included).
 */
#include "python/calibrator_binding.h"

/* The table of self's type (the kind's first member is its type). */
static const fp8q_py_calibrator_kind *kind_of(PyObject *self)
{
    return (const fp8q_py_calibrator_kind *)(const void *)Py_TYPE(self);
}

/* The core state of a calibrator object. */
static void *core_of(PyObject *self)
{
    return (char *)self + kind_of(self)->core_offset;
}

/* The core base state of self. */
static fp8q_calibrator *core_base(PyObject *self)
{
    return (fp8q_calibrator *)core_of(self);
}

int fp8q_py_calibrator_settle(PyObject *self)
{
    return fp8q_py_device_state_settle(&((fp8q_py_calibrator *)self)->device,
                                       kind_of(self)->device,
                                       core_of(self));
}

/* ------------------------------------------------------------------------- */
/* Construction                                                              */

int fp8q_py_parse_optional_int(PyObject *object, const char *name,
                               const char *none_text, int *given,
                               long long *value)
{
    PyObject *index;

    *given = object != Py_None;
    if (!*given) {
        return 0;
    }
    /* Python's and NumPy's ints (operator.index), not bools, Python's or
     * NumPy's (NumPy 1.x's have __index__): True is no count or axis. */
    index = PyBool_Check(object) || PyArray_IsScalar(object, Bool) ||
                    !PyIndex_Check(object)
                ? NULL
                : PyNumber_Index(object);
    if (index == NULL) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: expected %s or an int, got %.200s",
                     name, none_text, Py_TYPE(object)->tp_name);
        return -1;
    }
    *value = PyLong_AsLongLong(index);
    Py_DECREF(index);
    return *value == -1 && PyErr_Occurred() ? -1 : 0;
}

int fp8q_py_parse_channel_axis(PyObject *object, int *axis)
{
    long long value = 0;
    fp8q_error error;
    int given;

    *axis = FP8Q_CALIB_PER_TENSOR;
    fp8q_error_clear(&error);
    if (fp8q_py_parse_optional_int(object, "channel_axis", "None", &given,
                                   &value) < 0 ||
        (given && fp8q_py_raise_on_failure(
                      fp8q_calib_channel_axis_check(value, &error), &error) <
                      0)) {
        return -1;
    }
    if (given) {
        *axis = (int)value;
    }
    return 0;
}

PyObject *fp8q_py_calibrator_get_channel_axis(PyObject *self, void *closure)
{
    const int axis = core_base(self)->channel_axis;

    (void)closure;
    if (axis == FP8Q_CALIB_PER_TENSOR) {
        Py_RETURN_NONE;
    }
    return PyLong_FromLong(axis);
}

/* Inside the critical section: an update that counts meanwhile (outside
 * it) is counted again at absorb (fp8q_calibrator_absorb). */
int fp8q_py_calibrator_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    int status;

    Py_BEGIN_CRITICAL_SECTION(self);
    status = kind_of(self)->init(self, args, kwargs);
    if (status == 0) {
        fp8q_py_device_state_clear(&((fp8q_py_calibrator *)self)->device);
    }
    Py_END_CRITICAL_SECTION();
    return status;
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
    core_base(self)->channel_axis = FP8Q_CALIB_PER_TENSOR;
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
    kind_of(self)->ops->free(core_of(self));
    Py_TYPE(self)->tp_free(self);
}

/* ------------------------------------------------------------------------- */
/* update                                                                    */

/*
 * A CUDA batch, all on its GPU on x's stream: the batch's finite amax (per
 * channel) and NaN/inf count into scratch memory (fp8q_cuda_calib_reduce,
 * without the GIL), then the table's kernels fold it into the device state
 * (which refuses and records a batch with NaN/inf unless skip_nonfinite).
 * No host wait, no copy back. The kernels that read or write the state are
 * launched with the GIL held, right after the state was ordered on the
 * stream, so that updates from several threads fold one after another.
 * An update overtaken, while it ran without the GIL, by a reset() or an
 * __init__ from another thread (the device state's `wipes` no longer
 * `wipes`, or the settings changed) is ordered before it: nothing is
 * folded, as the wipe would have dropped it anyway, and it returns 0. It
 * is never started again for that reason, so a thread reconfiguring in a
 * loop cannot starve it. 1, nothing folded, when another update replaced
 * the device state meanwhile (the caller starts the batch again), else 0
 * or -1.
 */
static int update_on_device(PyObject *self, fp8q_TensorObject *x,
                            const fp8q_calib_batch *batch, int64_t wipes)
{
    const fp8q_cuda_calib_kind *device = kind_of(self)->device;
    void *core = core_of(self);
    fp8q_py_device_state *state = &((fp8q_py_calibrator *)self)->device;
    const fp8q_cu_stream stream = fp8q_py_last_stream(x);
    fp8q_cuda_calib_batch reduced;
    size_t extra_bytes;
    int zero_extra = 0;
    fp8q_error error;
    fp8q_status status;
    void *memory;
    int outcome = -1;

    if (fp8q_py_use_on_stream(x, stream) < 0) {
        return -1;
    }
    extra_bytes = device->scratch(core, batch, &zero_extra);
    fp8q_error_clear(&error);
    Py_BEGIN_ALLOW_THREADS
    status = fp8q_cuda_calib_reduce(
        x->cuda_device, &x->view, batch->channel_dimension, batch->n_channels,
        device->contiguous, extra_bytes, zero_extra, stream, &reduced,
        &error);
    Py_END_ALLOW_THREADS
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        return -1;
    }
    if (batch->settings_version != core_base(self)->settings_version ||
        state->wipes != wipes) {
        outcome = 0; /* ordered before the reset / __init__ that wiped it */
    }
    else {
        memory = fp8q_py_device_state_prepare(
            state, x, device->state_bytes(core, batch), stream, device,
            core,
            device->continues_host != NULL && device->continues_host(core));
        if (memory == NULL && !PyErr_Occurred()) {
            /* Wiped meanwhile: ordered before the wipe; else the state
             * changed hands between updates: again. */
            outcome = state->wipes != wipes ? 0 : 1;
        }
        else if (memory != NULL) {
            outcome = fp8q_py_raise_on_failure(
                device->launch(core, batch, x->cuda_device, &reduced, memory,
                               state->n_updates, stream, &error),
                &error);
        }
    }
    Py_BEGIN_ALLOW_THREADS
    fp8q_cuda_calib_batch_release(&reduced, stream);
    Py_END_ALLOW_THREADS
    return outcome;
}

/* A CPU batch, after what the device holds (which may raise its deferred
 * error first): counted with the GIL released, absorbed with it held. */
static int update_on_host(PyObject *self, fp8q_calib_batch *batch)
{
    const fp8q_calib_kind *ops = kind_of(self)->ops;
    void *core = core_of(self);
    fp8q_error error;
    fp8q_status status;

    if (fp8q_py_calibrator_settle(self) < 0) {
        return -1;
    }
    fp8q_error_clear(&error);
    FP8Q_PY_BEGIN_INTERRUPTIBLE
    status = ops->count(batch, &error);
    FP8Q_PY_END_INTERRUPTIBLE(status)
    if (status == FP8Q_OK) {
        return fp8q_py_raise_on_failure(
            fp8q_calibrator_absorb(ops, core, batch, &error), &error);
    }
    ops->release(batch);
    return fp8q_py_raise_on_failure(status, &error);
}

static PyObject *calibrator_update(fp8q_py_calibrator *self,
                                   PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames)
{
    static const char *const keywords[] = {"x", "skip_nonfinite", NULL};
    PyObject *object = (PyObject *)self;
    const fp8q_calib_kind *ops = kind_of(object)->ops;
    fp8q_calib_batch batch;
    fp8q_TensorObject *x;
    PyObject *x_object;
    int skip_nonfinite = 0;
    int counted = 0;
    int64_t wipes;
    fp8q_error error;
    int outcome;

    if (fp8q_py_parse_arguments(args, nargs, kwnames, "O|$p:update", keywords,
                                &x_object, &skip_nonfinite) < 0) {
        return NULL;
    }
    self->device.n_updates++;
    /* A CUDA x stays there: it is reduced on its GPU. */
    x = fp8q_tensor_from_object(x_object, "x", -1, FP8Q_COPY_IF_NEEDED);
    if (x == NULL) {
        return NULL;
    }
    do {
        wipes = self->device.wipes;
        fp8q_error_clear(&error);
        outcome = fp8q_py_raise_on_failure(
            fp8q_calibrator_batch(core_base(object), &x->view,
                                  x->device_type == FP8Q_DEVICE_CUDA,
                                  skip_nonfinite, &batch, &error),
            &error);
        if (outcome == 0 && self->device.memory != NULL) {
            batch.device_bytes = (size_t)self->device.memory->view.shape[0];
        }
        if (outcome == 0) {
            outcome = fp8q_py_raise_on_failure(
                ops->admit(core_of(object), &batch, &counted, &error),
                &error);
        }
        if (outcome == 0 && counted && batch.on_device &&
            kind_of(object)->device == NULL) {
            PyErr_Format(PyExc_TypeError, "x: a %s counts CPU batches only",
                         kind_of(object)->name);
            outcome = -1;
        }
        if (outcome == 0 && counted) {
            outcome = batch.on_device
                          ? update_on_device(object, x, &batch, wipes)
                          : update_on_host(object, &batch);
        }
    } while (outcome == 1);
    Py_DECREF(x);
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
    fp8q_error error;

    if (!PyObject_TypeCheck(other_object, Py_TYPE(self))) {
        PyErr_Format(PyExc_TypeError, "other: expected a %s, got %.200s",
                     kind->name, Py_TYPE(other_object)->tp_name);
        return NULL;
    }
    if (fp8q_py_calibrator_settle(object) < 0 ||
        fp8q_py_calibrator_settle(other_object) < 0) {
        return NULL;
    }
    if (kind->merge_check != NULL &&
        kind->merge_check(object, other_object) < 0) {
        return NULL;
    }
    fp8q_error_clear(&error);
    if (fp8q_py_raise_on_failure(
            fp8q_calibrator_merge(kind->ops, core_of(object),
                                  core_of(other_object),
                                  &error),
            &error) < 0) {
        return NULL;
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
    count = PyLong_FromLongLong((long long)core_base(object)->nonfinite_count);
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
     * lost; then the loaded state replaces everything, the device memory
     * (sized for the old state) included. */
    if (fp8q_py_calibrator_settle(object) < 0 ||
        kind_of(object)->load_state_dict(object, state, &nonfinite_count) <
            0) {
        return NULL;
    }
    fp8q_py_device_state_forget(&self->device);
    core_base(object)->nonfinite_count = nonfinite_count;
    Py_RETURN_NONE;
}

static PyObject *calibrator_reset(fp8q_py_calibrator *self, PyObject *unused)
{
    (void)unused;
    fp8q_py_device_state_clear(&self->device);
    fp8q_calibrator_reset(kind_of((PyObject *)self)->ops,
                          core_of((PyObject *)self));
    Py_RETURN_NONE;
}

static PyObject *calibrator_get_nonfinite_count(fp8q_py_calibrator *self,
                                                void *closure)
{
    (void)closure;
    if (fp8q_py_calibrator_settle((PyObject *)self) < 0) {
        return NULL;
    }
    return PyLong_FromLongLong(
        (long long)core_base((PyObject *)self)->nonfinite_count);
}

/* ------------------------------------------------------------------------- */
/* amax and scale                                                            */

/* The calibrated amax after a settle (fp8q_calibrator_amax): 1 with *amax
 * (free it with fp8q_aligned_free), 0 before any data, -1 with an
 * exception. */
static int current_amax(PyObject *self, float **amax, int64_t *n_channels,
                        int *per_channel)
{
    fp8q_error error;

    fp8q_error_clear(&error);
    if (fp8q_py_calibrator_settle(self) < 0 ||
        fp8q_py_raise_on_failure(
            fp8q_calibrator_amax(kind_of(self)->ops,
                                 core_of(self), amax,
                                 n_channels, per_channel, &error),
            &error) < 0) {
        return -1;
    }
    return *amax != NULL;
}

static PyObject *calibrator_get_amax(fp8q_py_calibrator *self, void *closure)
{
    float *amax = NULL;
    int64_t n_channels = 1;
    int per_channel = 0;
    PyObject *result;
    const int outcome =
        current_amax((PyObject *)self, &amax, &n_channels, &per_channel);

    (void)closure;
    if (outcome <= 0) {
        if (outcome < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    result = per_channel
                 ? fp8q_py_array_copy(1, &n_channels, NPY_FLOAT32, amax)
                 : PyFloat_FromDouble((double)amax[0]);
    fp8q_aligned_free(amax);
    return result;
}

static PyObject *calibrator_scale(fp8q_py_calibrator *self,
                                  PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames)
{
    static const char *const keywords[] = {"dtype", "margin", "power_of_2",
                                           NULL};
    PyObject *object = (PyObject *)self;
    PyObject *dtype_object = NULL;
    PyObject *margin_object = NULL;
    int power_of_2 = 0;
    fp8q_dtype target;
    int margin;
    float *amax = NULL;
    int64_t n_channels = 1;
    int per_channel = 0;
    int outcome;
    PyObject *result;

    if (fp8q_py_parse_arguments(args, nargs, kwnames, "|OOp:scale", keywords,
                                &dtype_object, &margin_object,
                                &power_of_2) < 0 ||
        fp8q_py_parse_scale_options(dtype_object, margin_object, &target,
                                    &margin) < 0) {
        return NULL;
    }
    outcome = current_amax(object, &amax, &n_channels, &per_channel);
    if (outcome <= 0) {
        if (outcome == 0) {
            PyErr_Format(PyExc_ValueError,
                         "%s.scale: no data yet; call update() first",
                         kind_of(object)->name);
        }
        return NULL;
    }
    result = fp8q_py_scales_from_amax(per_channel, &n_channels, amax, target,
                                      margin, power_of_2);
    fp8q_aligned_free(amax);
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

FP8Q_LOCKED_KEYWORDS(fp8q_py_calibrator_update, calibrator_update,
                     fp8q_py_calibrator)
FP8Q_LOCKED_PAIR(fp8q_py_calibrator_merge, calibrator_merge,
                 fp8q_py_calibrator)
FP8Q_LOCKED_SELF(fp8q_py_calibrator_state_dict, calibrator_state_dict,
                 fp8q_py_calibrator, PyObject *)
FP8Q_LOCKED_SELF(fp8q_py_calibrator_load_state_dict,
                 calibrator_load_state_dict, fp8q_py_calibrator, PyObject *)
FP8Q_LOCKED_SELF(fp8q_py_calibrator_reset, calibrator_reset,
                 fp8q_py_calibrator, PyObject *)
FP8Q_LOCKED_SELF(fp8q_py_calibrator_get_nonfinite_count,
                 calibrator_get_nonfinite_count, fp8q_py_calibrator, void *)
FP8Q_LOCKED_SELF(fp8q_py_calibrator_get_amax, calibrator_get_amax,
                 fp8q_py_calibrator, void *)
FP8Q_LOCKED_KEYWORDS(fp8q_py_calibrator_scale, calibrator_scale,
                     fp8q_py_calibrator)
