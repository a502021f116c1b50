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

#include "core/calibrator.h"
#include "cuda/calibration_ops.h"

/* ------------------------------------------------------------------------- */
/* calibration.c: what the calibrators share beside their base             */

/* A new C-contiguous NumPy array of `shape` and NumPy type `type`
 * (NPY_FLOAT32, NPY_INT64) holding a copy of `values`. */
PyObject *fp8q_py_array_copy(int ndim, const int64_t *shape, int type,
                             const void *values);

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
    /* Bumped whenever the state is forgotten or replaced, so that a
     * function that released the GIL sees that it is no longer the one it
     * had (reset or __init__ from another thread meanwhile). */
    int64_t epoch;
    /* Bumped by fp8q_py_device_state_forget only (reset, __init__,
     * load_state_dict): an update that sees it change while it ran
     * without the GIL was overtaken by a wipe of everything it would add,
     * and is ordered before that wipe (its batch dropped, as the wipe
     * drops the rest). */
    int64_t wipes;
} fp8q_py_device_state;

/*
 * Settles the device state, if any: copies it back (waiting for the work
 * queued on its stream), folds it into the core state `core` with the
 * kind's fold, adds its skipped non-finite count to core's NaN/inf count
 * and empties it (kept for reuse). When batches were refused for NaN/inf
 * since the last settle, raises the deferred ValueError naming the first
 * one's update number and count, the number refused and the
 * skip_nonfinite hint, after folding every admitted batch; the record is
 * cleared. A copy read (without the GIL) while another thread's reset()
 * or __init__ wiped the calibrator is dropped, not folded: it is ordered
 * before the wipe. 0, or -1 with an exception (the host state unchanged
 * when the fold failed).
 */
int fp8q_py_device_state_settle(fp8q_py_device_state *state,
                                const fp8q_cuda_calib_kind *kind, void *core);

/*
 * Makes the device state `bytes` long on x's device (x a CUDA tensor),
 * ordered on `stream`: kept when it already is, else the old one settled
 * (as fp8q_py_device_state_settle, which may raise) and a new one
 * allocated. A state's first fold after its allocation or a settle starts
 * it: all zero bytes, or with `image` uploaded from the kind's image of
 * the host state (waiting for the copy), which the settle's fold then
 * takes as the host state. Marks it pending: the caller enqueues a fold
 * into it next. Returns the state's device memory; NULL with an
 * exception; or NULL without one when another thread forgot, replaced or
 * detached the state while this one allocated, ordered or settled it (the
 * GIL released; a state another update folded into meanwhile is kept):
 * then nothing is folded, and the caller drops the batch when
 * the state was wiped meanwhile (`wipes`), else starts it again.
 */
void *fp8q_py_device_state_prepare(fp8q_py_device_state *state,
                                   fp8q_TensorObject *x, size_t bytes,
                                   fp8q_cu_stream stream,
                                   const fp8q_cuda_calib_kind *kind,
                                   void *core, int image);

/* Forgets the device state and its record, as a wipe (`wipes`): an update
 * reducing meanwhile is dropped, ordered before it (load_state_dict, after
 * its settle, as the loaded state replaces everything). */
void fp8q_py_device_state_forget(fp8q_py_device_state *state);

/* fp8q_py_device_state_forget, and the update numbering restarted (reset,
 * __init__). */
void fp8q_py_device_state_clear(fp8q_py_device_state *state);

/* ------------------------------------------------------------------------- */
/* calibrator_base.c: the calibrator base, and one table per calibrator      */

/*
 * Every calibrator object starts with this (the part of the state kept on
 * a GPU); the calibrator's core state (core/calibrator.h: a struct whose
 * first member is fp8q_calibrator) follows it in the object's struct.
 */
typedef struct fp8q_py_calibrator {
    PyObject_HEAD
    fp8q_py_device_state device; /* the state of CUDA batches, not settled */
} fp8q_py_calibrator;

/*
 * A calibrator type and its table: the core ops (core/calibrator.h) and GPU
 * ops (cuda/calibration_ops.h) that the base (update, merge, state_dict,
 * load_state_dict, reset, pickle, amax, scale, nonfinite_count, locking)
 * calls on the core state at `core_offset` in the object, and what only the
 * binding does: parse the constructor's arguments, compare settings for
 * merge, and build and read a state_dict. The PyTypeObject comes first, so
 * the base finds the table from Py_TYPE(self) (the types are final). Hooks
 * that return int return -1 with an exception, or 0.
 */
typedef struct fp8q_py_calibrator_kind {
    PyTypeObject type; /* tp_init, tp_new, tp_dealloc: the base's */
    const char *name;  /* "MaxCalibrator", for merge's TypeError   */
    /* The constructor's arguments in positional order, NULL-terminated:
     * __reduce__ passes getattr(self, name) of each. */
    const char *settings[8];
    size_t core_offset;
    const fp8q_calib_kind *ops;
    /* NULL for a calibrator of CPU batches only (a CUDA x: TypeError). */
    const fp8q_cuda_calib_kind *device;
    /* __init__: the arguments checked, then the core state set up (the
     * base then empties the device state). */
    int (*init)(PyObject *self, PyObject *args, PyObject *kwargs);
    /* merge's check that `other` (same type) has the same settings; NULL
     * when the core's merge checks them itself. */
    int (*merge_check)(PyObject *self, PyObject *other);
    /* The state_dict without "nonfinite_count" (the base adds it last). */
    PyObject *(*state_dict)(PyObject *self);
    /* Replaces the (settled) state with `state`, checked; stores the
     * loaded nonfinite_count in *nonfinite_count for the base. */
    int (*load_state_dict)(PyObject *self, PyObject *state,
                           int64_t *nonfinite_count);
} fp8q_py_calibrator_kind;

/* The binding's calibrator types (core/calibrator.h's list). */
#define FP8Q_PY_DECLARE_KIND(name, Name)                                    \
    extern fp8q_py_calibrator_kind fp8q_##name##_calibrator_kind;
FP8Q_CALIBRATORS(FP8Q_PY_DECLARE_KIND)
#undef FP8Q_PY_DECLARE_KIND

/* Brings self's device state into its host state (calibration_device.c's
 * settle with the table's fold); 0, or -1 with an exception, e.g. the
 * deferred error of a refused batch. For the table's own getters and
 * methods, which hold the calibrator's critical section. */
int fp8q_py_calibrator_settle(PyObject *self);

/* An optional int argument `name`: None (*given 0) or a Python or NumPy
 * int, not a bool (*given 1, *value); -1 with TypeError "<name>: expected
 * <none_text> or an int, got <type>" otherwise (OverflowError beyond
 * 64 bits). */
int fp8q_py_parse_optional_int(PyObject *object, const char *name,
                               const char *none_text, int *given,
                               long long *value);

/* The channel_axis= argument of a calibrator: None (*axis =
 * FP8Q_CALIB_PER_TENSOR) or an int in [-FP8Q_MAX_DIMS, FP8Q_MAX_DIMS); -1 with
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
PyObject *fp8q_py_calibrator_update(PyObject *self, PyObject *const *args,
                                    Py_ssize_t nargs, PyObject *kwnames);
PyObject *fp8q_py_calibrator_merge(PyObject *self, PyObject *other);
PyObject *fp8q_py_calibrator_state_dict(PyObject *self, PyObject *unused);
PyObject *fp8q_py_calibrator_load_state_dict(PyObject *self,
                                             PyObject *state);
PyObject *fp8q_py_calibrator_reset(PyObject *self, PyObject *unused);
PyObject *fp8q_py_calibrator_reduce(PyObject *self, PyObject *unused);
PyObject *fp8q_py_calibrator_get_nonfinite_count(PyObject *self,
                                                 void *closure);
/* The amax getter: a float per tensor, a float32 array per channel, None
 * before any data (the core's fp8q_calibrator_amax). */
PyObject *fp8q_py_calibrator_get_amax(PyObject *self, void *closure);
/* scale(dtype="float8_e4m3fn", margin=0, power_of_2=False): the scales of
 * the current amax (fp8q_py_scales_from_amax); ValueError "<name>.scale: no
 * data yet" before any data. */
PyObject *fp8q_py_calibrator_scale(PyObject *self, PyObject *const *args,
                                   Py_ssize_t nargs, PyObject *kwnames);

/* The methods every calibrator has, for its PyMethodDef table (the
 * docstrings are the calibrator's): update(x, *, skip_nonfinite=False),
 * merge(other), state_dict(), load_state_dict(state), reset(), and pickle
 * and copy (__reduce__: the settings and state_dict(), state kept on a GPU
 * brought back first; __setstate__: load_state_dict). */
#define FP8Q_PY_CALIBRATOR_METHODS(update_doc, merge_doc, state_dict_doc,   \
                                   load_state_dict_doc, reset_doc)          \
    {"update", (PyCFunction)(void (*)(void))fp8q_py_calibrator_update,      \
     METH_FASTCALL | METH_KEYWORDS, update_doc},                           \
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
        .tp_repr = repr,                                                   \
        .tp_flags = Py_TPFLAGS_DEFAULT,                                    \
        .tp_doc = doc,                                                     \
        .tp_methods = methods,                                             \
        .tp_getset = getset,                                               \
        .tp_init = fp8q_py_calibrator_init,                                \
        .tp_new = fp8q_py_calibrator_new,                                  \
    },                                                                     \
    .core_offset = offsetof(object_type, core)

#endif /* FP8Q_PYTHON_CALIBRATOR_BINDING_H */
