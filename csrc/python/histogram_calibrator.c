/*
 * histogram_calibrator.c - fp8q.calib.HistogramCalibrator: a histogram of |x|
 * on a power-of-two grid that widens as larger values arrive, and the amax
 * choices made from it.
 *
 * The binding of core/histogram_calibrator.c's state and ops (a batch
 * counted into a histogram of its own with the GIL released, then merged
 * exactly with it held; the searches of core/histogram_threshold.h) and
 * cuda/calibration_ops.c's GPU ops (counts kept on the device, merged into
 * the host's when the state is read), for the calibrator base
 * (calibrator_base.c): the constructor's arguments, compute_amax,
 * extend_range, the getters and the state_dict's conversion.
 */
#include "python/calibrator_binding.h"

/* What a state_dict holds, for load_state_dict's KeyError. */
#define STATE_KEYS                                                            \
    "a HistogramCalibrator state has \"counts\", \"bin_width\", \"amax\" " \
    "and \"nonfinite_count\""

typedef struct fp8q_HistogramCalibratorObject {
    fp8q_py_calibrator base; /* device: the counts of CUDA batches */
    fp8q_histogram_calibrator core;
} fp8q_HistogramCalibratorObject;

/* The host state brought up to date (fp8q_py_calibrator_settle). */
static int settle(fp8q_HistogramCalibratorObject *self)
{
    return fp8q_py_calibrator_settle((PyObject *)self);
}

static int histogram_calibrator_init(PyObject *object, PyObject *args,
                                     PyObject *kwargs)
{
    static char *keywords[] = {"bins", "skip_zeros", NULL};
    PyObject *bins_object = NULL;
    long long bins = 2048;
    int skip_zeros = 0;
    int given;
    fp8q_error error;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|Op:HistogramCalibrator",
                                     keywords, &bins_object, &skip_zeros)) {
        return -1;
    }
    if (bins_object != NULL &&
        (fp8q_py_parse_optional_int(bins_object, "bins", "None (2048)",
                                    &given, &bins) < 0)) {
        return -1;
    }
    fp8q_error_clear(&error);
    return fp8q_py_raise_on_failure(
        fp8q_histogram_calibrator_setup(
            &((fp8q_HistogramCalibratorObject *)object)->core,
            (int64_t)bins, skip_zeros, &error),
        &error);
}

/* ------------------------------------------------------------------------- */
/* merge, extend_range, compute_amax                                         */

static PyObject *histogram_calibrator_extend_range(
    fp8q_HistogramCalibratorObject *self, PyObject *amax_object)
{
    const double amax = PyFloat_AsDouble(amax_object);
    fp8q_error error;

    if ((amax == -1.0 && PyErr_Occurred()) || settle(self) < 0) {
        return NULL;
    }
    if (!(amax <= 3.40282347e38)) {
        PyErr_Format(PyExc_ValueError,
                     "amax: expected a finite value >= 0, got %R",
                     amax_object);
        return NULL;
    }
    fp8q_error_clear(&error);
    if (fp8q_py_raise_on_failure(
            fp8q_histogram_cover(&self->core.histogram, (float)amax, &error),
            &error) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* compute_amax's percentile=: a real number (an int or an object with
 * __index__ too, as PyArg's "d" takes them), not a bool: True is no
 * percentage. Its range is checked by the search. */
static int parse_percentile(PyObject *object, double *percentile)
{
    if (!PyBool_Check(object) && !PyArray_IsScalar(object, Bool)) {
        *percentile = PyFloat_AsDouble(object);
        if (!(*percentile == -1.0 && PyErr_Occurred())) {
            return 0;
        }
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) {
            return -1;
        }
        PyErr_Clear();
    }
    PyErr_Format(PyExc_TypeError,
                 "compute_amax() argument 'percentile' must be real number, "
                 "not %.200s",
                 Py_TYPE(object)->tp_name);
    return -1;
}

/* The search runs on a snapshot of the counts, with the GIL released. */
static PyObject *histogram_calibrator_compute_amax(
    fp8q_HistogramCalibratorObject *self, PyObject *const *args,
    Py_ssize_t nargs, PyObject *kwnames)
{
    static const char *const keywords[] = {"method", "percentile", "dtype",
                                           NULL};
    const char *name;
    double percentile = 99.99;
    PyObject *percentile_object = NULL;
    PyObject *dtype_object = NULL;
    fp8q_dtype target = FP8Q_FLOAT8_E4M3FN;
    fp8q_calib_method method;
    fp8q_histogram snapshot;
    fp8q_error error;
    fp8q_status status;
    float amax = 0.0f;

    if (fp8q_py_parse_arguments(args, nargs, kwnames, "s|$OO:compute_amax",
                                keywords, &name, &percentile_object,
                                &dtype_object) < 0 ||
        (percentile_object != NULL &&
         parse_percentile(percentile_object, &percentile) < 0) ||
        (dtype_object != NULL &&
         fp8q_py_parse_dtype(dtype_object, "dtype", &target) < 0)) {
        return NULL;
    }
    fp8q_error_clear(&error);
    if (fp8q_py_raise_on_failure(
            fp8q_calib_method_parse(name, &method, &error), &error) < 0) {
        return NULL;
    }
    if (percentile_object != NULL && method != FP8Q_CALIB_PERCENTILE) {
        PyErr_Format(PyExc_TypeError,
                     "compute_amax: percentile applies to method "
                     "\"percentile\" only, not \"%s\"",
                     name);
        return NULL;
    }
    if (settle(self) < 0 ||
        fp8q_py_raise_on_failure(fp8q_histogram_calibrator_snapshot(
                                     &self->core, &snapshot, &error),
                                 &error) < 0) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    status = fp8q_calib_threshold(&snapshot, method, percentile, target,
                                  &amax, &error);
    Py_END_ALLOW_THREADS
    fp8q_aligned_free(snapshot.counts);
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        return NULL;
    }
    return PyFloat_FromDouble((double)amax);
}

/* ------------------------------------------------------------------------- */
/* state_dict, load_state_dict                                               */

/* fp8q_py_calibrator_kind.state_dict. */
static PyObject *histogram_calibrator_state_dict(PyObject *object)
{
    const fp8q_histogram *histogram =
        &((fp8q_HistogramCalibratorObject *)object)->core.histogram;
    PyObject *counts = fp8q_py_array_copy(1, &histogram->n_bins, NPY_INT64,
                                          histogram->counts);

    if (counts == NULL) {
        return NULL;
    }
    return Py_BuildValue("{sNsdsd}", "counts", counts, "bin_width",
                         fp8q_histogram_bin_width(histogram), "amax",
                         (double)histogram->amax);
}

/* The exponent of a bin width that is 0 (no range) or a power of two
 * (fp8q_histogram_width_exponent). */
static int parse_bin_width(PyObject *object, int *exponent)
{
    const double width = PyFloat_AsDouble(object);

    if (width == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    if (!fp8q_histogram_width_exponent(width, exponent)) {
        PyErr_Format(PyExc_ValueError,
                     "state: bin_width must be 0 or a power of two, got %R",
                     object);
        return -1;
    }
    return 0;
}

/* fp8q_py_calibrator_kind.load_state_dict: counts, grid and amax checked
 * together (fp8q_histogram_calibrator_load). */
static int histogram_calibrator_load_state_dict(PyObject *object,
                                                PyObject *state,
                                                int64_t *loaded_nonfinite_count)
{
    PyObject *counts_object = fp8q_py_state_item(state, "counts", STATE_KEYS);
    PyObject *width_object =
        counts_object != NULL
            ? fp8q_py_state_item(state, "bin_width", STATE_KEYS)
            : NULL;
    PyObject *amax_object =
        width_object != NULL ? fp8q_py_state_item(state, "amax", STATE_KEYS)
                             : NULL;
    PyObject *count_object =
        amax_object != NULL
            ? fp8q_py_state_item(state, "nonfinite_count", STATE_KEYS)
            : NULL;
    PyArrayObject *counts;
    fp8q_error error;
    long long nonfinite_count;
    double amax;
    int exponent;
    int outcome;

    if (count_object == NULL || parse_bin_width(width_object, &exponent) < 0) {
        return -1;
    }
    amax = PyFloat_AsDouble(amax_object);
    nonfinite_count = PyLong_AsLongLong(count_object);
    if (PyErr_Occurred()) {
        return -1;
    }
    if (nonfinite_count < 0 || !(amax >= 0.0 && amax <= 3.40282347e38) ||
        (double)(float)amax != amax) {
        PyErr_Format(PyExc_ValueError,
                     "state: amax must be a finite float32 value >= 0 and "
                     "nonfinite_count >= 0, got %R and %R",
                     amax_object, count_object);
        return -1;
    }
    counts = (PyArrayObject *)PyArray_FROMANY(counts_object, NPY_INT64, 1, 1,
                                              NPY_ARRAY_CARRAY_RO);
    if (counts == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "state: counts must be a 1-d array of integers");
        return -1;
    }
    fp8q_error_clear(&error);
    outcome = fp8q_py_raise_on_failure(
        fp8q_histogram_calibrator_load(
            &((fp8q_HistogramCalibratorObject *)object)->core,
            (const int64_t *)PyArray_DATA(counts),
            (int64_t)PyArray_DIM(counts, 0), exponent, (float)amax, &error),
        &error);
    Py_DECREF(counts);
    if (outcome == 0) {
        *loaded_nonfinite_count = (int64_t)nonfinite_count;
    }
    return outcome;
}

/* ------------------------------------------------------------------------- */
/* Attributes and type                                                       */

static PyObject *histogram_calibrator_get_bins(PyObject *object, void *closure)
{
    const fp8q_HistogramCalibratorObject *self =
        (const fp8q_HistogramCalibratorObject *)object;

    (void)closure;
    return PyLong_FromLongLong((long long)self->core.histogram.n_bins);
}

static PyObject *histogram_calibrator_get_skip_zeros(PyObject *object,
                                                     void *closure)
{
    const fp8q_HistogramCalibratorObject *self =
        (const fp8q_HistogramCalibratorObject *)object;

    (void)closure;
    return PyBool_FromLong(self->core.skip_zeros);
}

/* The getters of the settled state: bin_width, counts and total_count
 * (the closure names which). */
static PyObject *histogram_calibrator_get_settled(
    fp8q_HistogramCalibratorObject *self, void *closure)
{
    const char *name = (const char *)closure;
    const fp8q_histogram *histogram = &self->core.histogram;

    if (settle(self) < 0) {
        return NULL;
    }
    if (name[0] == 'b') {
        return PyFloat_FromDouble(fp8q_histogram_bin_width(histogram));
    }
    return name[0] == 'c'
               ? fp8q_py_array_copy(1, &histogram->n_bins, NPY_INT64,
                                    histogram->counts)
               : PyLong_FromLongLong(
                     (long long)fp8q_histogram_total(histogram));
}

static PyObject *histogram_calibrator_repr(PyObject *object)
{
    fp8q_HistogramCalibratorObject *self =
        (fp8q_HistogramCalibratorObject *)object;

    if (settle(self) < 0) {
        return NULL;
    }
    return PyUnicode_FromFormat(
        "HistogramCalibrator(bins=%lld, skip_zeros=%s, total_count=%lld)",
        (long long)self->core.histogram.n_bins,
        self->core.skip_zeros ? "True" : "False",
        (long long)fp8q_histogram_total(&self->core.histogram));
}

PyDoc_STRVAR(
    update_doc,
    "update(x, *, skip_nonfinite=False)\n--\n\n"
    "Counts |x| (anything fp8q.asarray accepts, as float32) into the "
    "histogram, widening the bins first if x holds a larger value than any "
    "seen (adjacent bins fold together; nothing is dropped). Zeros are not "
    "counted with skip_zeros=True. NaN and infinity raise ValueError "
    "(nothing counted) unless skip_nonfinite=True, which skips them and adds "
    "their number to nonfinite_count. The GIL is released while x is read. "
    "A CUDA x is counted on its GPU (after the work that wrote it, on that "
    "stream), with the CPU's bin rule, into a state kept on that GPU: "
    "update() neither waits nor copies anything back. A CUDA batch holding "
    "NaN or infinity without skip_nonfinite is refused there (nothing of it "
    "counted); the next read of the state (counts, amax, bin_width, "
    "total_count, nonfinite_count, compute_amax, state_dict, "
    "load_state_dict, merge, extend_range, repr, a CPU batch or a batch on "
    "another GPU) brings the state back once, bit-identical to the CPU's "
    "counts, and raises that deferred ValueError, naming the first refused "
    "update (numbered from 1 since construction or reset), its count and "
    "the number refused, after keeping every other batch.");

PyDoc_STRVAR(
    compute_amax_doc,
    "compute_amax(method, *, percentile=99.99, dtype=\"float8_e4m3fn\")\n--\n\n"
    "The calibrated amax (a float, never above the largest value seen):\n"
    "\"max\": the largest |x| counted, exactly.\n"
    "\"percentile\": the upper edge of the bin where the running count "
    "reaches `percentile` percent of the total (within one bin width of the "
    "exact percentile).\n"
    "\"entropy\": TensorRT's KL-divergence threshold search, with the "
    "candidate distribution quantized to dtype's FP8 grid.\n"
    "\"mse\": among 128 candidates from amax down to just above amax / 2, "
    "the largest whose FP8 quantization (scale candidate / finfo(dtype).max) "
    "has an expected squared error over the histogram within 1% of the "
    "smallest.\n"
    "docs/calibration.md states each search exactly. ValueError before any "
    "value is counted or for an unknown method; TypeError for percentile= "
    "with another method.");

PyDoc_STRVAR(merge_doc,
             "merge(other)\n--\n\n"
             "Adds another HistogramCalibrator's counts (same bins and "
             "skip_zeros) to this one; both are folded onto the wider grid "
             "first. Merging histograms of two halves of some data gives "
             "exactly the histogram of all of it.");

PyDoc_STRVAR(extend_range_doc,
             "extend_range(amax)\n--\n\n"
             "Widens the bins so that a value of `amax` would fall inside the "
             "histogram, without counting anything. Calibrators that each "
             "call it with the same (global) amax share one grid, so their "
             "counts can be summed elementwise, e.g. by all_reduce.");

PyDoc_STRVAR(state_dict_doc,
             "state_dict()\n--\n\n"
             "{'counts': int64 array of `bins` counts, 'bin_width': float (a "
             "power of two, or 0.0 before any nonzero value), 'amax': float, "
             "'nonfinite_count': int}.");

PyDoc_STRVAR(load_state_dict_doc,
             "load_state_dict(state)\n--\n\n"
             "Replaces the state with one from state_dict(), checked: "
             "KeyError for a missing key, ValueError for a different bin "
             "count, negative counts, a bin width that is not a power of two, "
             "or counts and amax that disagree.");

PyDoc_STRVAR(reset_doc,
             "reset()\n--\n\nForgets every count, on the host and on a "
             "GPU, refused batches included.");

/* The methods and getters beside the base's that read or change the state
 * run inside a critical section of the calibrator (binding.h); the
 * settings, fixed at construction, need none. */
static FP8Q_LOCKED_KEYWORDS(locked_compute_amax,
                            histogram_calibrator_compute_amax,
                            fp8q_HistogramCalibratorObject)
static FP8Q_LOCKED_SELF(locked_extend_range,
                        histogram_calibrator_extend_range,
                        fp8q_HistogramCalibratorObject, PyObject *)
static FP8Q_LOCKED_SELF(locked_get_settled, histogram_calibrator_get_settled,
                        fp8q_HistogramCalibratorObject, void *)

static PyMethodDef histogram_calibrator_methods[] = {
    FP8Q_PY_CALIBRATOR_METHODS(update_doc, merge_doc, state_dict_doc,
                               load_state_dict_doc, reset_doc),
    {"compute_amax",
     (PyCFunction)(void (*)(void))locked_compute_amax,
     METH_FASTCALL | METH_KEYWORDS, compute_amax_doc},
    {"extend_range", locked_extend_range, METH_O,
     extend_range_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef histogram_calibrator_getset[] = {
    {"bins", histogram_calibrator_get_bins, NULL, "Number of bins.",
     NULL},
    {"skip_zeros", histogram_calibrator_get_skip_zeros, NULL,
     "Whether exact zeros are left uncounted.", NULL},
    {"amax", fp8q_py_calibrator_get_amax, NULL,
     "The largest |x| counted, or None before any.", NULL},
    {"bin_width", locked_get_settled, NULL,
     "Width of every bin: a power of two, or 0.0 before any nonzero value.",
     "bin_width"},
    {"counts", locked_get_settled, NULL,
     "A copy of the counts (int64 array); bin k holds "
     "k * bin_width <= |x| < (k + 1) * bin_width.",
     "counts"},
    {"total_count", locked_get_settled, NULL,
     "Number of values counted.", "total_count"},
    {"nonfinite_count", fp8q_py_calibrator_get_nonfinite_count,
     NULL, "NaN and infinite values skipped so far.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(
    histogram_calibrator_doc,
    "HistogramCalibrator(bins=2048, skip_zeros=False)\n--\n\n"
    "Histogram of |x| over everything passed to update(), for percentile, "
    "entropy and MSE calibration (compute_amax). The bin width is the "
    "smallest power of two that keeps the largest value inside the last bin, "
    "so the grid depends on that value alone and histograms merge exactly. "
    "bins: 1 to 65536.");

/* The type and its tables for the calibrator base (calibrator_base.c). */
fp8q_py_calibrator_kind fp8q_histogram_calibrator_kind = {
    .name = "HistogramCalibrator",
    .settings = {"bins", "skip_zeros", NULL},
    .ops = &fp8q_histogram_calibrator_ops,
    .device = &fp8q_cuda_histogram_calibrator,
    .init = histogram_calibrator_init,
    .state_dict = histogram_calibrator_state_dict,
    .load_state_dict = histogram_calibrator_load_state_dict,
    FP8Q_PY_CALIBRATOR_TYPE("fp8q.calib.HistogramCalibrator",
                            fp8q_HistogramCalibratorObject,
                            histogram_calibrator_repr,
                            histogram_calibrator_doc,
                            histogram_calibrator_methods,
                            histogram_calibrator_getset),
};
