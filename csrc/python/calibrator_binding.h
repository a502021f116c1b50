/*
 * calibrator_binding.h - what the calibrator files of the CPython binding
 * share: calibration.c (helpers beside the base), calibration_device.c (a
 * calibrator's state kept on a device), calibrator_base.c (the base and
 * the table each calibrator fills), max_calibrator.c and
 * histogram_calibrator.c. Everything else the binding shares is in
 * binding.h, which this includes.
 */
#ifndef FP8Q_PYTHON_CALIBRATOR_BINDING_H
#define FP8Q_PYTHON_CALIBRATOR_BINDING_H

#include "python/binding.h"

/* ------------------------------------------------------------------------- */
/* calibration.c: what the calibrators share beside their base             */

/* A new C-contiguous float32 NumPy array of `shape` holding a copy of
 * `values`. */
PyObject *fp8q_py_float32_array(int ndim, const int64_t *shape,
                                const float *values);

/* state[key] (borrowed) of a calibrator's load_state_dict; TypeError when
 * state is not a dict, KeyError naming the key and `keys_text` (what a
 * state holds) when it is missing. */
PyObject *fp8q_py_state_item(PyObject *state, const char *key,
                             const char *keys_text);

/* The dtype= and margin= arguments of a scale computation (either may be
 * NULL: float8_e4m3fn and 0); -1 with an exception for a bad one. */
int fp8q_py_parse_scale_options(PyObject *dtype_object,
                                PyObject *margin_object, fp8q_dtype *target,
                                int *margin);

/* Scales for the amax values (C order, `shape`) by core
 * fp8q_scales_from_amax: a float when ndim is 0, else a float32 NumPy array;
 * NULL with a ValueError for a bad amax. */
PyObject *fp8q_py_scales_from_amax(int ndim, const int64_t *shape,
                                   const float *amax, fp8q_dtype target,
                                   int margin, int power_of_2);

/* ------------------------------------------------------------------------- */
/* calibration_device.c: a calibrator's state kept on a device              */

/*
 * The device half of a calibrator's state (kernels/calibrate.cuh's layouts:
 * a record of skipped and refused batches, then the calibrator's own
 * statistics). CUDA batches are folded into it by kernels on their stream,
 * with no host wait; "settling" copies it back (waiting), folds it into the
 * host state and empties it. Changed with the GIL held only.
 */
typedef struct fp8q_py_device_state {
    fp8q_TensorObject *memory; /* uint8 CUDA tensor, or NULL: nothing there */
    int pending;               /* batches folded in since the last settle  */
    int uploaded;              /* started as an image of the host state    */
    int64_t n_updates;         /* update() calls so far (1-based numbers)   */
} fp8q_py_device_state;

/* Folds a settled device state (a host copy of all its `bytes`, 8-byte
 * aligned) into the calibrator's host state; 0, or -1 with an exception and
 * the host state unchanged. */
typedef int (*fp8q_py_device_fold)(PyObject *calibrator, const void *state,
                                   size_t bytes);

/* Writes the image of the calibrator's host state into `state` (`bytes`,
 * zero-filled, 8-byte aligned; the record stays zero), for a device state
 * that continues the host state rather than adding to it. */
typedef void (*fp8q_py_device_image)(PyObject *calibrator, void *state,
                                     size_t bytes);

/*
 * Settles the device state, if any: copies it back (waiting for the work
 * queued on its stream), folds it in with `fold`, adds its skipped
 * non-finite count to *nonfinite_count and empties it (kept for reuse).
 * When batches were refused for NaN/inf since the last settle, raises the
 * deferred ValueError naming the first one's update number and count, the
 * number refused and the skip_nonfinite hint, after folding every admitted
 * batch; the record is cleared. 0, or -1 with an exception.
 */
int fp8q_py_device_state_settle(fp8q_py_device_state *state,
                                PyObject *calibrator, fp8q_py_device_fold fold,
                                int64_t *nonfinite_count);

/*
 * Makes the device state `bytes` long on x's device (x a CUDA tensor),
 * ordered on `stream`: kept when it already is, else the old one settled
 * (as fp8q_py_device_state_settle, which may raise) and a new one
 * allocated. A state's first fold after its allocation or a settle starts
 * it: all zero bytes when `image` is NULL, else uploaded from the host
 * state's image (waiting for the copy), which the settle's `fold` then takes
 * as the host state. Marks it pending: the caller enqueues a fold into it
 * next. Returns the state's device memory, or NULL with an exception.
 */
void *fp8q_py_device_state_prepare(fp8q_py_device_state *state,
                                   fp8q_TensorObject *x, size_t bytes,
                                   fp8q_cu_stream stream, PyObject *calibrator,
                                   fp8q_py_device_fold fold,
                                   fp8q_py_device_image image,
                                   int64_t *nonfinite_count);

/* Forgets the device state and its record (reset, __init__), and restarts
 * the update numbering. */
void fp8q_py_device_state_clear(fp8q_py_device_state *state);

/* ------------------------------------------------------------------------- */
/* calibrator_base.c: the calibrator base, and one table per calibrator      */

/*
 * Every calibrator object starts with this: what the base keeps for every
 * kind of calibrator (the NaN/inf count and the part of the state kept on a
 * GPU). A calibrator's own object is a struct whose first member is it.
 */
typedef struct fp8q_py_calibrator {
    PyObject_HEAD
    int channel_axis; /* as given (may be negative), or FP8Q_PY_PER_TENSOR */
    int64_t nonfinite_count;     /* NaN/inf values skipped so far         */
    fp8q_py_device_state device; /* the state of CUDA batches, not settled */
} fp8q_py_calibrator;

/* fp8q_py_calibrator.channel_axis of a calibrator per tensor. */
#define FP8Q_PY_PER_TENSOR (-1000)

/* One update() batch, as the base hands it to a calibrator's table. */
typedef struct fp8q_py_calibrator_batch {
    fp8q_TensorObject *x; /* on the CPU or a CUDA device                   */
    int skip_nonfinite;
    int channel_dimension; /* channel_axis resolved against x, or -1        */
    int64_t n_channels;    /* its length, or 1                             */
} fp8q_py_calibrator_batch;

/* A CUDA batch reduced on its GPU (cuda/calibration_ops.h), as the
 * table's device_launch receives it. */
struct fp8q_cuda_calib_batch;

/*
 * A calibrator type and its table: what one kind of calibrator does, that
 * the base (update, merge, state_dict, load_state_dict, reset, pickle,
 * nonfinite_count, locking) calls. The PyTypeObject comes first, so the
 * base finds the table from Py_TYPE(self) (the types are final: no
 * subclass can come between). Every hook that returns int returns -1 with
 * an exception, or 0; `self` and `other` are objects of the type.
 */
typedef struct fp8q_py_calibrator_kind {
    PyTypeObject type; /* tp_init, tp_new, tp_dealloc: the base's */
    const char *name;  /* "MaxCalibrator", for merge's TypeError   */
    /* The constructor's arguments in positional order, NULL-terminated:
     * __reduce__ passes getattr(self, name) of each. */
    const char *settings[8];
    /* __init__ of the calibrator's own state and channel_axis (the base
     * then empties the NaN/inf count and the device state); everything
     * checked first. */
    int (*init)(PyObject *self, PyObject *args, PyObject *kwargs);
    /* Frees the calibrator's own state (tp_dealloc). */
    void (*free_state)(PyObject *self);
    /* Looks at a new batch (its channel axis resolved by the base) first:
     * 1 to count it, 0 when it adds nothing (update() returns None at
     * once), -1 with an exception. */
    int (*admit)(PyObject *self, fp8q_py_calibrator_batch *batch);
    /* Counts a CPU batch into the host state (already settled), with the
     * GIL released while x is read; *n_nonfinite the NaN/inf values it
     * skipped, which the base adds to nonfinite_count. */
    int (*update_host)(PyObject *self, const fp8q_py_calibrator_batch *batch,
                       int64_t *n_nonfinite);
    /* A CUDA batch (fp8q_py_calibrator_update, reduced by
     * cuda/calibration_ops.h's fp8q_cuda_calib_reduce): non-zero when the
     * kernels read x C-contiguous; the calibrator's own scratch bytes
     * after the batch's NaN/inf count and amax (*zeroed set nonzero when
     * they must start as zero bytes); the bytes of the device state;
     * whether the device state starts as an image of the host state
     * (image) rather than empty (NULL when never); and the launch of the
     * kernels that fold the reduced batch into `state` on `stream`. */
    int contiguous_on_device;
    size_t (*device_scratch)(PyObject *self,
                             const fp8q_py_calibrator_batch *batch,
                             int *zeroed);
    size_t (*device_state_bytes)(PyObject *self,
                                 const fp8q_py_calibrator_batch *batch);
    int (*continues_host)(PyObject *self);
    fp8q_py_device_image device_image;
    fp8q_py_device_fold device_fold;
    fp8q_status (*device_launch)(PyObject *self,
                                 const fp8q_py_calibrator_batch *batch,
                                 const struct fp8q_cuda_calib_batch *reduced,
                                 void *state, fp8q_cu_stream stream,
                                 fp8q_error *error);
    /* Folds `other` (same type, both settled) into self: 0 when merged
     * (the base adds other's nonfinite_count), 1 when other adds nothing
     * (the count is left as it is), -1 with an exception. */
    int (*merge)(PyObject *self, PyObject *other);
    /* The state_dict without "nonfinite_count" (the base adds it last). */
    PyObject *(*state_dict)(PyObject *self);
    /* Replaces the (settled) state with `state`, checked; stores the
     * loaded nonfinite_count in *nonfinite_count for the base. */
    int (*load_state_dict)(PyObject *self, PyObject *state,
                           int64_t *nonfinite_count);
    /* Empties the calibrator's own state (reset). */
    int (*reset)(PyObject *self);
    /* The calibrated amax of the (settled) state, for the amax getter and
     * scale(): 1 with *amax a PyMem buffer of *n_channels floats (the
     * caller frees it) and *ndim 0 (one value, per tensor) or 1 (per
     * channel); 0 before any data; -1 with an exception. */
    int (*current_amax)(PyObject *self, float **amax, int *ndim,
                        int64_t *n_channels);
} fp8q_py_calibrator_kind;

extern fp8q_py_calibrator_kind fp8q_max_calibrator_kind;
extern fp8q_py_calibrator_kind fp8q_histogram_calibrator_kind;

/* Brings self's device state into its host state (calibration_device.c's
 * settle with the table's fold); 0, or -1 with an exception, e.g. the
 * deferred error of a refused batch. For the table's own getters and
 * methods, which hold the calibrator's critical section. */
int fp8q_py_calibrator_settle(PyObject *self);

/* The channel_axis= argument of a calibrator: None (*axis =
 * FP8Q_PY_PER_TENSOR) or an int in [-FP8Q_MAX_DIMS, FP8Q_MAX_DIMS); -1 with
 * TypeError / ValueError otherwise. */
int fp8q_py_parse_channel_axis(PyObject *object, int *axis);

/* The channel_axis getter: the axis as given, or None per tensor. */
PyObject *fp8q_py_calibrator_get_channel_axis(PyObject *self, void *closure);

/* The base's slots and methods, each inside the calibrator's critical
 * section where it reads or changes the state (binding.h's FP8Q_LOCKED_*):
 * one calibrator updated from several threads behaves as under the GIL,
 * free-threaded too. __init__, __new__ (initialised with default settings
 * before __init__, so no method ever sees unallocated state) and dealloc
 * go in the type's slots. */
int fp8q_py_calibrator_init(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *fp8q_py_calibrator_new(PyTypeObject *type, PyObject *args,
                                 PyObject *kwargs);
void fp8q_py_calibrator_dealloc(PyObject *self);
PyObject *fp8q_py_calibrator_update(PyObject *self, PyObject *args,
                                    PyObject *kwargs);
PyObject *fp8q_py_calibrator_merge(PyObject *self, PyObject *other);
PyObject *fp8q_py_calibrator_state_dict(PyObject *self, PyObject *unused);
PyObject *fp8q_py_calibrator_load_state_dict(PyObject *self,
                                             PyObject *state);
PyObject *fp8q_py_calibrator_reset(PyObject *self, PyObject *unused);
PyObject *fp8q_py_calibrator_reduce(PyObject *self, PyObject *unused);
PyObject *fp8q_py_calibrator_get_nonfinite_count(PyObject *self,
                                                 void *closure);
/* The amax getter: a float per tensor, a float32 array per channel, None
 * before any data (the table's current_amax). */
PyObject *fp8q_py_calibrator_get_amax(PyObject *self, void *closure);
/* scale(dtype="float8_e4m3fn", margin=0, power_of_2=False): the scales of
 * the current amax (fp8q_py_scales_from_amax); ValueError "<name>.scale: no
 * data yet" before any data. */
PyObject *fp8q_py_calibrator_scale(PyObject *self, PyObject *args,
                                   PyObject *kwargs);

/* The methods every calibrator has, for its PyMethodDef table (the
 * docstrings are the calibrator's): update(x, *, skip_nonfinite=False),
 * merge(other), state_dict(), load_state_dict(state), reset(), and pickle
 * and copy (__reduce__: the settings and state_dict(), state kept on a GPU
 * brought back first; __setstate__: load_state_dict). */
#define FP8Q_PY_CALIBRATOR_METHODS(update_doc, merge_doc, state_dict_doc,   \
                                   load_state_dict_doc, reset_doc)          \
    {"update", (PyCFunction)(void (*)(void))fp8q_py_calibrator_update,      \
     METH_VARARGS | METH_KEYWORDS, update_doc},                            \
    {"merge", fp8q_py_calibrator_merge, METH_O, merge_doc},                \
    {"state_dict", fp8q_py_calibrator_state_dict, METH_NOARGS,             \
     state_dict_doc},                                                      \
    {"load_state_dict", fp8q_py_calibrator_load_state_dict, METH_O,        \
     load_state_dict_doc},                                                 \
    {"__reduce__", fp8q_py_calibrator_reduce, METH_NOARGS,                 \
     "Pickling and copy.deepcopy: the settings and state_dict() (state "   \
     "kept on a GPU comes back to the host)."},                            \
    {"__setstate__", fp8q_py_calibrator_load_state_dict, METH_O,           \
     "Unpickling: load_state_dict(state)."},                               \
    {"reset", fp8q_py_calibrator_reset, METH_NOARGS, reset_doc}

/* The PyTypeObject of a calibrator kind (its `.type`): the object struct,
 * repr, docstring, methods and getters are the calibrator's; __init__,
 * __new__ and dealloc the base's. */
#define FP8Q_PY_CALIBRATOR_TYPE(name, object_type, repr, doc, methods,      \
                                getset)                                     \
    .type = {                                                              \
        PyVarObject_HEAD_INIT(NULL, 0)                                     \
        .tp_name = name,                                                   \
        .tp_basicsize = sizeof(object_type),                               \
        .tp_dealloc = fp8q_py_calibrator_dealloc,                          \
        .tp_repr = (reprfunc)repr,                                         \
        .tp_flags = Py_TPFLAGS_DEFAULT,                                    \
        .tp_doc = doc,                                                     \
        .tp_methods = methods,                                             \
        .tp_getset = getset,                                               \
        .tp_init = fp8q_py_calibrator_init,                                \
        .tp_new = fp8q_py_calibrator_new,                                  \
    }

#endif /* FP8Q_PYTHON_CALIBRATOR_BINDING_H */
