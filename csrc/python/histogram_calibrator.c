/*
 * histogram_calibrator.c - fp8q.calib.HistogramCalibrator: a histogram of |x|
 * on a power-of-two grid that widens as larger values arrive
 * (core/histogram.h), and the amax choices made from it
 * (core/histogram_threshold.h).
 *
 * update() counts the batch into a histogram of its own with the GIL
 * released, then merges it into the calibrator's with the GIL held; merging
 * is exact on this grid, so concurrent updates lose nothing. A CUDA batch
 * is counted on its GPU (kernels/calibrate.cuh: finite amax, counts on the
 * covered grid, fold) into a state kept there (calibration_device.c),
 * merged into the host's when the state is read. compute_amax() searches a
 * snapshot of the counts with the GIL released.
 */
#include <math.h>
#include <string.h>

#include "python/calibrator_binding.h"

#include "core/histogram.h"
#include "core/histogram_threshold.h"
#include "cuda/calibration_ops.h"

/* What a state_dict holds, for load_state_dict's KeyError. */
#define STATE_KEYS                                                            \
    "a HistogramCalibrator state has \"counts\", \"bin_width\", \"amax\" " \
    "and \"nonfinite_count\""

typedef struct fp8q_HistogramCalibratorObject {
    fp8q_py_calibrator base;  /* device: the counts of CUDA batches */
    fp8q_histogram histogram; /* counts allocated with PyMem */
    int skip_zeros;
} fp8q_HistogramCalibratorObject;

/* A zeroed histogram of n_bins over new PyMem counts; -1 with MemoryError. */
static int new_histogram(fp8q_histogram *histogram, int64_t n_bins)
{
    int64_t *counts = (int64_t *)PyMem_Malloc((size_t)n_bins *
                                              sizeof(int64_t));
    if (counts == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    fp8q_histogram_init(histogram, n_bins, counts);
    return 0;
}

/* A copy of `source` with its own counts. */
static int copy_histogram(fp8q_histogram *copy, const fp8q_histogram *source)
{
    if (new_histogram(copy, source->n_bins) < 0) {
        return -1;
    }
    memcpy(copy->counts, source->counts,
           (size_t)source->n_bins * sizeof(int64_t));
    copy->bin_exponent = source->bin_exponent;
    copy->amax = source->amax;
    return 0;
}

static int has_counted(const fp8q_HistogramCalibratorObject *self)
{
    return fp8q_histogram_total(&self->histogram) > 0;
}

/* fp8q_py_device_fold: the device's histogram (kernels/calibrate.cuh,
 * fp8q_calib_histogram_state and its counts) merged into the host's.
 * Merging is exact on this grid, so the result is the CPU's for the same
 * batches. */
static int fold_device_state(PyObject *object, const void *memory,
                             size_t bytes)
{
    fp8q_HistogramCalibratorObject *self =
        (fp8q_HistogramCalibratorObject *)object;
    const fp8q_calib_histogram_state *state =
        (const fp8q_calib_histogram_state *)memory;
    fp8q_histogram on_device;
    fp8q_error error;

    (void)bytes; /* n_bins counts, as the calibrator's */
    on_device.n_bins = self->histogram.n_bins;
    on_device.counts = (int64_t *)(void *)(state + 1);
    on_device.bin_exponent =
        state->has_range ? state->bin_exponent : FP8Q_HISTOGRAM_NO_RANGE;
    on_device.amax = fp8q_bits_to_float(state->amax_bits);
    fp8q_error_clear(&error);
    return fp8q_py_raise_on_failure(
        fp8q_histogram_merge(&self->histogram, &on_device, &error), &error);
}

/* The host state brought up to date (fp8q_py_calibrator_settle). */
static int settle(fp8q_HistogramCalibratorObject *self)
{
    return fp8q_py_calibrator_settle((PyObject *)self);
}

/* ------------------------------------------------------------------------- */
/* Construction                                                              */

static int histogram_calibrator_init(PyObject *object, PyObject *args,
                                     PyObject *kwargs)
{
    fp8q_HistogramCalibratorObject *self =
        (fp8q_HistogramCalibratorObject *)object;
    static char *keywords[] = {"bins", "skip_zeros", NULL};
    long long bins = 2048;
    int skip_zeros = 0;
    fp8q_histogram histogram;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|Lp:HistogramCalibrator",
                                     keywords, &bins, &skip_zeros)) {
        return -1;
    }
    if (bins < 1 || bins > FP8Q_HISTOGRAM_MAX_BINS) {
        PyErr_Format(PyExc_ValueError, "bins: expected 1 to %lld, got %lld",
                     (long long)FP8Q_HISTOGRAM_MAX_BINS, bins);
        return -1;
    }
    if (new_histogram(&histogram, (int64_t)bins) < 0) {
        return -1;
    }
    PyMem_Free(self->histogram.counts);
    self->histogram = histogram;
    self->skip_zeros = skip_zeros;
    return 0;
}

static void histogram_calibrator_free(PyObject *object)
{
    PyMem_Free(((fp8q_HistogramCalibratorObject *)object)->histogram.counts);
}

/* ------------------------------------------------------------------------- */
/* update, merge, extend_range                                               */

/* fp8q_py_calibrator_kind.admit: an empty CUDA x adds nothing (an empty
 * CPU x is counted: nothing, after the settle). */
static int admit(PyObject *object, fp8q_py_calibrator_batch *batch)
{
    (void)object;
    return batch->x->device_type != FP8Q_DEVICE_CUDA ||
           fp8q_view_size(&batch->x->view) != 0;
}

/* fp8q_py_calibrator_kind.device_scratch: the batch's counts, zeroed. */
static size_t device_scratch(PyObject *object,
                             const fp8q_py_calibrator_batch *batch,
                             int *zeroed)
{
    const fp8q_HistogramCalibratorObject *self =
        (fp8q_HistogramCalibratorObject *)object;
    (void)batch;
    *zeroed = 1;
    return fp8q_cuda_calib_histogram_extra_bytes(self->histogram.n_bins);
}

/* fp8q_py_calibrator_kind.device_state_bytes: kernels/calibrate.cuh's
 * fp8q_calib_histogram_state and its counts. */
static size_t device_state_bytes(PyObject *object,
                                 const fp8q_py_calibrator_batch *batch)
{
    const fp8q_HistogramCalibratorObject *self =
        (fp8q_HistogramCalibratorObject *)object;
    (void)batch;
    return fp8q_cuda_calib_histogram_state_bytes(self->histogram.n_bins);
}

/* fp8q_py_calibrator_kind.device_launch: the batch's counts on the grid
 * the state will have once it covers the batch's amax, then the fold into
 * the state (cuda/calibration_ops.h, fp8q_cuda_calib_fold_histogram). */
static fp8q_status device_launch(PyObject *object,
                                 const fp8q_py_calibrator_batch *batch,
                                 const fp8q_cuda_calib_batch *reduced,
                                 void *state, fp8q_cu_stream stream,
                                 fp8q_error *error)
{
    const fp8q_HistogramCalibratorObject *self =
        (fp8q_HistogramCalibratorObject *)object;
    return fp8q_cuda_calib_fold_histogram(
        batch->x->cuda_device, reduced, state, self->histogram.n_bins,
        self->skip_zeros, self->base.device.n_updates, batch->skip_nonfinite,
        stream, error);
}

/* fp8q_py_calibrator_kind.update_host: the batch counted into a histogram
 * of its own with the GIL released, then merged into the calibrator's. */
static int update_host(PyObject *object, const fp8q_py_calibrator_batch *batch,
                       int64_t *n_nonfinite)
{
    fp8q_HistogramCalibratorObject *self =
        (fp8q_HistogramCalibratorObject *)object;
    fp8q_histogram counted;
    fp8q_error error;
    fp8q_status status;

    if (new_histogram(&counted, self->histogram.n_bins) < 0) {
        return -1;
    }
    fp8q_error_clear(&error);
    FP8Q_PY_BEGIN_INTERRUPTIBLE
    status = fp8q_histogram_add(&counted, &batch->x->view, self->skip_zeros,
                                batch->skip_nonfinite, n_nonfinite, &error);
    FP8Q_PY_END_INTERRUPTIBLE(status)
    if (status == FP8Q_OK) {
        status = fp8q_histogram_merge(&self->histogram, &counted, &error);
    }
    PyMem_Free(counted.counts);
    return fp8q_py_raise_on_failure(status, &error);
}

/* fp8q_py_calibrator_kind.merge: the counts added on the wider grid. */
static int histogram_calibrator_merge(PyObject *object,
                                      PyObject *other_object)
{
    fp8q_HistogramCalibratorObject *self =
        (fp8q_HistogramCalibratorObject *)object;
    fp8q_HistogramCalibratorObject *other =
        (fp8q_HistogramCalibratorObject *)other_object;
    fp8q_error error;

    if (other->skip_zeros != self->skip_zeros) {
        PyErr_SetString(PyExc_ValueError,
                        "other: calibrators differ in skip_zeros and cannot "
                        "be merged");
        return -1;
    }
    fp8q_error_clear(&error);
    return fp8q_py_raise_on_failure(
        fp8q_histogram_merge(&self->histogram, &other->histogram, &error),
        &error);
}

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
            fp8q_histogram_cover(&self->histogram, (float)amax, &error),
            &error) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------- */
/* compute_amax                                                              */

static PyObject *histogram_calibrator_compute_amax(
    fp8q_HistogramCalibratorObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"method", "percentile", "dtype", NULL};
    const char *method;
    double percentile = 99.99;
    PyObject *dtype_object = NULL;
    fp8q_dtype target = FP8Q_FLOAT8_E4M3FN;
    fp8q_histogram snapshot;
    fp8q_error error;
    fp8q_status status = FP8Q_OK;
    float amax = 0.0f;
    enum { MAX, PERCENTILE, ENTROPY, MSE } choice;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|$dO:compute_amax",
                                     keywords, &method, &percentile,
                                     &dtype_object)) {
        return NULL;
    }
    if (dtype_object != NULL &&
        fp8q_py_parse_dtype(dtype_object, "dtype", &target) < 0) {
        return NULL;
    }
    if (strcmp(method, "max") == 0) {
        choice = MAX;
    }
    else if (strcmp(method, "percentile") == 0) {
        choice = PERCENTILE;
    }
    else if (strcmp(method, "entropy") == 0) {
        choice = ENTROPY;
    }
    else if (strcmp(method, "mse") == 0) {
        choice = MSE;
    }
    else {
        PyErr_Format(PyExc_ValueError,
                     "method: expected \"max\", \"percentile\", \"entropy\" or "
                     "\"mse\", got \"%s\"",
                     method);
        return NULL;
    }
    if (settle(self) < 0) {
        return NULL;
    }
    if (!has_counted(self)) {
        PyErr_SetString(PyExc_ValueError,
                        "HistogramCalibrator.compute_amax: no values counted "
                        "yet; call update() with data first");
        return NULL;
    }
    if (choice == MAX) {
        return PyFloat_FromDouble((double)self->histogram.amax);
    }
    if (copy_histogram(&snapshot, &self->histogram) < 0) {
        return NULL;
    }
    fp8q_error_clear(&error);
    Py_BEGIN_ALLOW_THREADS
    switch (choice) {
    case PERCENTILE:
        status = fp8q_threshold_percentile(&snapshot, percentile, &amax,
                                           &error);
        break;
    case ENTROPY:
        status = fp8q_threshold_entropy(&snapshot, target, &amax, &error);
        break;
    case MSE:
        status = fp8q_threshold_mse(&snapshot, target, &amax, &error);
        break;
    case MAX:
        break;
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(snapshot.counts);
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        return NULL;
    }
    return PyFloat_FromDouble((double)amax);
}

/* ------------------------------------------------------------------------- */
/* state_dict, load_state_dict, reset                                        */

static PyObject *counts_array(const fp8q_histogram *histogram)
{
    npy_intp length = (npy_intp)histogram->n_bins;
    PyObject *array = PyArray_SimpleNew(1, &length, NPY_INT64);
    if (array != NULL) {
        memcpy(PyArray_DATA((PyArrayObject *)array), histogram->counts,
               (size_t)histogram->n_bins * sizeof(int64_t));
    }
    return array;
}

/* fp8q_py_calibrator_kind.state_dict. */
static PyObject *histogram_calibrator_state_dict(PyObject *object)
{
    fp8q_HistogramCalibratorObject *self =
        (fp8q_HistogramCalibratorObject *)object;
    PyObject *counts = counts_array(&self->histogram);

    if (counts == NULL) {
        return NULL;
    }
    return Py_BuildValue("{sNsdsd}", "counts", counts, "bin_width",
                         fp8q_histogram_bin_width(&self->histogram), "amax",
                         (double)self->histogram.amax);
}

/* The exponent of a bin width that is 0 (no range) or a power of two. */
static int parse_bin_width(PyObject *object, int *exponent)
{
    const double width = PyFloat_AsDouble(object);
    double fraction;

    if (width == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    if (width == 0.0) {
        *exponent = FP8Q_HISTOGRAM_NO_RANGE;
        return 0;
    }
    fraction = width > 0.0 && width <= 1e300 ? frexp(width, exponent) : 0.0;
    if (fraction != 0.5) {
        PyErr_Format(PyExc_ValueError,
                     "state: bin_width must be 0 or a power of two, got %R",
                     object);
        return -1;
    }
    *exponent -= 1;
    return 0;
}

/* fp8q_py_calibrator_kind.load_state_dict: counts, grid and amax checked
 * together (core fp8q_histogram_check). */
static int histogram_calibrator_load_state_dict(PyObject *object,
                                                PyObject *state,
                                                int64_t *loaded_nonfinite_count)
{
    fp8q_HistogramCalibratorObject *self =
        (fp8q_HistogramCalibratorObject *)object;
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
    fp8q_histogram loaded;
    fp8q_error error;
    long long nonfinite_count;
    double amax;
    int exponent;

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
    if (PyArray_DIM(counts, 0) != (npy_intp)self->histogram.n_bins) {
        PyErr_Format(PyExc_ValueError,
                     "state: counts has %lld bins, this calibrator %lld",
                     (long long)PyArray_DIM(counts, 0),
                     (long long)self->histogram.n_bins);
        Py_DECREF(counts);
        return -1;
    }
    loaded.n_bins = self->histogram.n_bins;
    loaded.counts = (int64_t *)PyArray_DATA(counts);
    loaded.bin_exponent = exponent;
    loaded.amax = (float)amax;
    fp8q_error_clear(&error);
    if (fp8q_py_raise_on_failure(fp8q_histogram_check(&loaded, &error),
                                 &error) < 0) {
        fp8q_py_error_add_prefix("state: ");
        Py_DECREF(counts);
        return -1;
    }
    memcpy(self->histogram.counts, loaded.counts,
           (size_t)loaded.n_bins * sizeof(int64_t));
    self->histogram.bin_exponent = loaded.bin_exponent;
    self->histogram.amax = loaded.amax;
    *loaded_nonfinite_count = (int64_t)nonfinite_count;
    Py_DECREF(counts);
    return 0;
}

/* fp8q_py_calibrator_kind.reset: no counts, no range. */
static int histogram_calibrator_reset(PyObject *object)
{
    fp8q_HistogramCalibratorObject *self =
        (fp8q_HistogramCalibratorObject *)object;
    fp8q_histogram_init(&self->histogram, self->histogram.n_bins,
                        self->histogram.counts);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Attributes and type                                                       */

static PyObject *histogram_calibrator_get_bins(
    fp8q_HistogramCalibratorObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromLongLong((long long)self->histogram.n_bins);
}

static PyObject *histogram_calibrator_get_skip_zeros(
    fp8q_HistogramCalibratorObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->skip_zeros);
}

/* fp8q_py_calibrator_kind.current_amax: the largest |x| counted. */
static int histogram_calibrator_amax(PyObject *object, float **amax,
                                     int *ndim, int64_t *n_channels)
{
    const fp8q_HistogramCalibratorObject *self =
        (fp8q_HistogramCalibratorObject *)object;

    if (!has_counted(self)) {
        return 0;
    }
    *amax = (float *)PyMem_Malloc(sizeof(float));
    if (*amax == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    **amax = self->histogram.amax;
    *ndim = 0;
    *n_channels = 1;
    return 1;
}

static PyObject *histogram_calibrator_get_bin_width(
    fp8q_HistogramCalibratorObject *self, void *closure)
{
    (void)closure;
    if (settle(self) < 0) {
        return NULL;
    }
    return PyFloat_FromDouble(fp8q_histogram_bin_width(&self->histogram));
}

static PyObject *histogram_calibrator_get_counts(
    fp8q_HistogramCalibratorObject *self, void *closure)
{
    (void)closure;
    if (settle(self) < 0) {
        return NULL;
    }
    return counts_array(&self->histogram);
}

static PyObject *histogram_calibrator_get_total_count(
    fp8q_HistogramCalibratorObject *self, void *closure)
{
    (void)closure;
    if (settle(self) < 0) {
        return NULL;
    }
    return PyLong_FromLongLong(
        (long long)fp8q_histogram_total(&self->histogram));
}

static PyObject *histogram_calibrator_repr(
    fp8q_HistogramCalibratorObject *self)
{
    if (settle(self) < 0) {
        return NULL;
    }
    return PyUnicode_FromFormat(
        "HistogramCalibrator(bins=%lld, skip_zeros=%s, total_count=%lld)",
        (long long)self->histogram.n_bins,
        self->skip_zeros ? "True" : "False",
        (long long)fp8q_histogram_total(&self->histogram));
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
    "value is counted or for an unknown method.");

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
FP8Q_LOCKED_KEYWORDS(locked_compute_amax, histogram_calibrator_compute_amax,
                     fp8q_HistogramCalibratorObject)
FP8Q_LOCKED_SELF(locked_extend_range, histogram_calibrator_extend_range,
                 fp8q_HistogramCalibratorObject)
FP8Q_LOCKED_SELF(locked_get_bin_width, histogram_calibrator_get_bin_width,
                 fp8q_HistogramCalibratorObject)
FP8Q_LOCKED_SELF(locked_get_counts, histogram_calibrator_get_counts,
                 fp8q_HistogramCalibratorObject)
FP8Q_LOCKED_SELF(locked_get_total_count, histogram_calibrator_get_total_count,
                 fp8q_HistogramCalibratorObject)

static PyMethodDef histogram_calibrator_methods[] = {
    FP8Q_PY_CALIBRATOR_METHODS(update_doc, merge_doc, state_dict_doc,
                               load_state_dict_doc, reset_doc),
    {"compute_amax",
     (PyCFunction)(void (*)(void))locked_compute_amax,
     METH_VARARGS | METH_KEYWORDS, compute_amax_doc},
    {"extend_range", (PyCFunction)locked_extend_range, METH_O,
     extend_range_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef histogram_calibrator_getset[] = {
    {"bins", (getter)histogram_calibrator_get_bins, NULL, "Number of bins.",
     NULL},
    {"skip_zeros", (getter)histogram_calibrator_get_skip_zeros, NULL,
     "Whether exact zeros are left uncounted.", NULL},
    {"amax", fp8q_py_calibrator_get_amax, NULL,
     "The largest |x| counted, or None before any.", NULL},
    {"bin_width", (getter)locked_get_bin_width, NULL,
     "Width of every bin: a power of two, or 0.0 before any nonzero value.",
     NULL},
    {"counts", (getter)locked_get_counts, NULL,
     "A copy of the counts (int64 array); bin k holds "
     "k * bin_width <= |x| < (k + 1) * bin_width.",
     NULL},
    {"total_count", (getter)locked_get_total_count, NULL,
     "Number of values counted.", NULL},
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

/* The type and its table for the calibrator base (calibrator_base.c). */
fp8q_py_calibrator_kind fp8q_histogram_calibrator_kind = {
    FP8Q_PY_CALIBRATOR_TYPE("fp8q.calib.HistogramCalibrator",
                            fp8q_HistogramCalibratorObject,
                            histogram_calibrator_repr, histogram_calibrator_doc,
                            histogram_calibrator_methods, histogram_calibrator_getset),
    .name = "HistogramCalibrator",
    .settings = {"bins", "skip_zeros", NULL},
    .init = histogram_calibrator_init,
    .free_state = histogram_calibrator_free,
    .admit = admit,
    .update_host = update_host,
    .contiguous_on_device = 1,
    .device_scratch = device_scratch,
    .device_state_bytes = device_state_bytes,
    .continues_host = NULL,
    .device_image = NULL,
    .device_fold = fold_device_state,
    .device_launch = device_launch,
    .merge = histogram_calibrator_merge,
    .state_dict = histogram_calibrator_state_dict,
    .load_state_dict = histogram_calibrator_load_state_dict,
    .reset = histogram_calibrator_reset,
    .current_amax = histogram_calibrator_amax,
};
