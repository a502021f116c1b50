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

#include "python/binding.h"

#include "core/histogram.h"
#include "core/histogram_threshold.h"
#include "cuda/launch.h"
#include "cuda/memory.h"
#include "cuda/scratch.h"

/* What a state_dict holds, for load_state_dict's KeyError. */
#define STATE_KEYS                                                            \
    "a HistogramCalibrator state has \"counts\", \"bin_width\", \"amax\" " \
    "and \"nonfinite_count\""

typedef struct fp8q_HistogramCalibratorObject {
    PyObject_HEAD
    fp8q_histogram histogram; /* counts allocated with PyMem */
    int skip_zeros;
    int64_t nonfinite_count;
    fp8q_py_device_state device; /* counts of CUDA batches */
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

/* Brings the device state into the host state (calibration_device.c); -1
 * with an exception, e.g. the deferred error of a refused batch. */
static int settle(fp8q_HistogramCalibratorObject *self)
{
    return fp8q_py_device_state_settle(&self->device, (PyObject *)self,
                                       fold_device_state,
                                       &self->nonfinite_count);
}

/* ------------------------------------------------------------------------- */
/* Construction                                                              */

static int histogram_calibrator_init(fp8q_HistogramCalibratorObject *self,
                                     PyObject *args, PyObject *kwargs)
{
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
    self->nonfinite_count = 0;
    fp8q_py_device_state_clear(&self->device);
    return 0;
}

static void histogram_calibrator_dealloc(fp8q_HistogramCalibratorObject *self)
{
    Py_XDECREF(self->device.memory);
    PyMem_Free(self->histogram.counts);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* ------------------------------------------------------------------------- */
/* update, merge, extend_range                                               */

/*
 * A non-empty CUDA batch counted on its GPU, on x's stream: its finite amax
 * and NaN/inf count, its counts on the grid the state will have once it
 * covers that amax, then the fold into the device state (which refuses and
 * records a batch with NaN/inf unless skip_nonfinite), all in scratch
 * memory. No host wait, no copy back. The kernels that read or write the
 * state are launched with the GIL held, right after the state was ordered
 * on the stream, so that updates from several threads fold one after
 * another.
 */
static int update_on_device(fp8q_HistogramCalibratorObject *self,
                            fp8q_TensorObject *x, int skip_nonfinite)
{
    const fp8q_cu_stream stream = fp8q_py_last_stream(x);
    const int64_t n_bins = self->histogram.n_bins;
    const size_t counts_offset = 2 * sizeof(uint64_t);
    fp8q_TensorObject *source = fp8q_py_cuda_contiguous(x, stream);
    fp8q_histogram_count_args count;
    fp8q_calib_fold_histogram_args fold;
    fp8q_cuda_scratch scratch = {NULL, NULL, 0, {0, 0}};
    fp8q_error error;
    fp8q_status status;
    char *batch;
    int outcome = -1;

    if (source == NULL || fp8q_py_use_on_stream(source, stream) < 0) {
        Py_XDECREF(source);
        return -1;
    }
    fp8q_error_clear(&error);
    Py_BEGIN_ALLOW_THREADS
    status = fp8q_cuda_scratch_acquire(
        x->cuda_device, counts_offset + (size_t)n_bins * sizeof(uint64_t),
        stream, &scratch, &error);
    if (status == FP8Q_OK) {
        status = fp8q_cuda_zero(
            x->cuda_device, scratch.memory,
            counts_offset + (size_t)n_bins * sizeof(uint64_t), stream,
            &error);
    }
    Py_END_ALLOW_THREADS
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        goto done;
    }
    /* Scratch: the NaN/inf count, the amax bits, then the counts. */
    batch = (char *)scratch.memory;
    memset(&count, 0, sizeof count);
    count.source = source->view.data;
    count.batch_counts = (uint64_t *)(void *)(batch + counts_offset);
    count.batch_amax_bits = (const uint32_t *)(void *)(batch + 8);
    count.count = fp8q_view_size(&source->view);
    count.n_bins = n_bins;
    count.source_dtype = (int32_t)source->view.dtype;
    count.skip_zeros = self->skip_zeros != 0;
    memset(&fold, 0, sizeof fold);
    fold.batch_counts = count.batch_counts;
    fold.batch_amax_bits = count.batch_amax_bits;
    fold.batch_nonfinite = (const uint64_t *)(void *)batch;
    fold.n_bins = n_bins;
    fold.update_number = self->device.n_updates;
    fold.skip_nonfinite = skip_nonfinite != 0;
    if (fp8q_py_cuda_enqueue_amax_finite(
            source, -1, (uint32_t *)(void *)(batch + 8),
            (uint64_t *)(void *)batch, stream) < 0) {
        goto done;
    }
    fold.state = (fp8q_calib_histogram_state *)fp8q_py_device_state_prepare(
        &self->device, x,
        sizeof(fp8q_calib_histogram_state) +
            (size_t)n_bins * sizeof(uint64_t),
        stream, (PyObject *)self, fold_device_state, NULL,
        &self->nonfinite_count);
    if (fold.state == NULL) {
        goto done;
    }
    count.state = fold.state;
    status = fp8q_cuda_launch_histogram_count(x->cuda_device, &count, stream,
                                              &error);
    if (status == FP8Q_OK) {
        status = fp8q_cuda_launch_calib_fold_histogram(x->cuda_device, &fold,
                                                       stream, &error);
    }
    outcome = fp8q_py_raise_on_failure(status, &error);
done:
    Py_BEGIN_ALLOW_THREADS
    fp8q_cuda_scratch_release(&scratch, stream);
    Py_END_ALLOW_THREADS
    Py_DECREF(source);
    return outcome;
}

static PyObject *histogram_calibrator_update(
    fp8q_HistogramCalibratorObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"x", "skip_nonfinite", NULL};
    PyObject *x_object;
    int skip_nonfinite = 0;
    fp8q_TensorObject *x;
    fp8q_histogram batch;
    int64_t n_nonfinite = 0;
    fp8q_error error;
    fp8q_status status;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$p:update", keywords,
                                     &x_object, &skip_nonfinite)) {
        return NULL;
    }
    self->device.n_updates++;
    x = fp8q_tensor_from_object(x_object, "x", -1, FP8Q_COPY_IF_NEEDED);
    if (x == NULL) {
        return NULL;
    }
    if (x->device_type == FP8Q_DEVICE_CUDA) {
        const int outcome = fp8q_view_size(&x->view) == 0
                                ? 0
                                : update_on_device(self, x, skip_nonfinite);
        Py_DECREF(x);
        if (outcome < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    /* A CPU batch goes to the host state, after what the device holds
     * (which may raise its deferred error first). */
    if (settle(self) < 0 ||
        new_histogram(&batch, self->histogram.n_bins) < 0) {
        Py_DECREF(x);
        return NULL;
    }
    fp8q_error_clear(&error);
    FP8Q_PY_BEGIN_INTERRUPTIBLE
    status = fp8q_histogram_add(&batch, &x->view, self->skip_zeros,
                                skip_nonfinite, &n_nonfinite, &error);
    FP8Q_PY_END_INTERRUPTIBLE(status)
    Py_DECREF(x);
    if (status == FP8Q_OK) {
        status = fp8q_histogram_merge(&self->histogram, &batch, &error);
    }
    PyMem_Free(batch.counts);
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        return NULL;
    }
    self->nonfinite_count += n_nonfinite;
    Py_RETURN_NONE;
}

static PyObject *histogram_calibrator_merge(
    fp8q_HistogramCalibratorObject *self, PyObject *other_object)
{
    fp8q_HistogramCalibratorObject *other;
    fp8q_error error;

    if (!PyObject_TypeCheck(other_object, Py_TYPE(self))) {
        PyErr_Format(PyExc_TypeError,
                     "other: expected a HistogramCalibrator, got %.200s",
                     Py_TYPE(other_object)->tp_name);
        return NULL;
    }
    other = (fp8q_HistogramCalibratorObject *)other_object;
    if (settle(self) < 0 || settle(other) < 0) {
        return NULL;
    }
    if (other->skip_zeros != self->skip_zeros) {
        PyErr_SetString(PyExc_ValueError,
                        "other: calibrators differ in skip_zeros and cannot "
                        "be merged");
        return NULL;
    }
    fp8q_error_clear(&error);
    if (fp8q_py_raise_on_failure(
            fp8q_histogram_merge(&self->histogram, &other->histogram, &error),
            &error) < 0) {
        return NULL;
    }
    self->nonfinite_count += other->nonfinite_count;
    Py_RETURN_NONE;
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

static PyObject *histogram_calibrator_state_dict(
    fp8q_HistogramCalibratorObject *self, PyObject *unused)
{
    PyObject *counts;

    (void)unused;
    if (settle(self) < 0) {
        return NULL;
    }
    counts = counts_array(&self->histogram);
    if (counts == NULL) {
        return NULL;
    }
    return Py_BuildValue(
        "{sNsdsdsL}", "counts", counts, "bin_width",
        fp8q_histogram_bin_width(&self->histogram), "amax",
        (double)self->histogram.amax, "nonfinite_count",
        (long long)self->nonfinite_count);
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

static PyObject *histogram_calibrator_load_state_dict(
    fp8q_HistogramCalibratorObject *self, PyObject *state)
{
    /* What the device holds is settled first, so a deferred error is not
     * lost; then the loaded state replaces everything. */
    PyObject *counts_object =
        settle(self) < 0 ? NULL
                         : fp8q_py_state_item(state, "counts", STATE_KEYS);
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
        return NULL;
    }
    amax = PyFloat_AsDouble(amax_object);
    nonfinite_count = PyLong_AsLongLong(count_object);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (nonfinite_count < 0 || !(amax >= 0.0 && amax <= 3.40282347e38) ||
        (double)(float)amax != amax) {
        PyErr_Format(PyExc_ValueError,
                     "state: amax must be a finite float32 value >= 0 and "
                     "nonfinite_count >= 0, got %R and %R",
                     amax_object, count_object);
        return NULL;
    }
    counts = (PyArrayObject *)PyArray_FROMANY(counts_object, NPY_INT64, 1, 1,
                                              NPY_ARRAY_CARRAY_RO);
    if (counts == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "state: counts must be a 1-d array of integers");
        return NULL;
    }
    if (PyArray_DIM(counts, 0) != (npy_intp)self->histogram.n_bins) {
        PyErr_Format(PyExc_ValueError,
                     "state: counts has %lld bins, this calibrator %lld",
                     (long long)PyArray_DIM(counts, 0),
                     (long long)self->histogram.n_bins);
        Py_DECREF(counts);
        return NULL;
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
        return NULL;
    }
    memcpy(self->histogram.counts, loaded.counts,
           (size_t)loaded.n_bins * sizeof(int64_t));
    self->histogram.bin_exponent = loaded.bin_exponent;
    self->histogram.amax = loaded.amax;
    self->nonfinite_count = (int64_t)nonfinite_count;
    Py_DECREF(counts);
    Py_RETURN_NONE;
}

static PyObject *histogram_calibrator_reset(
    fp8q_HistogramCalibratorObject *self, PyObject *unused)
{
    (void)unused;
    fp8q_histogram_init(&self->histogram, self->histogram.n_bins,
                        self->histogram.counts);
    self->nonfinite_count = 0;
    fp8q_py_device_state_clear(&self->device);
    Py_RETURN_NONE;
}

static PyObject *histogram_calibrator_new(PyTypeObject *type, PyObject *args,
                                          PyObject *kwargs)
{
    (void)args;
    (void)kwargs;
    return fp8q_py_new_initialized(type, (initproc)histogram_calibrator_init);
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

static PyObject *histogram_calibrator_get_amax(
    fp8q_HistogramCalibratorObject *self, void *closure)
{
    (void)closure;
    if (settle(self) < 0) {
        return NULL;
    }
    if (!has_counted(self)) {
        Py_RETURN_NONE;
    }
    return PyFloat_FromDouble((double)self->histogram.amax);
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

static PyObject *histogram_calibrator_get_nonfinite_count(
    fp8q_HistogramCalibratorObject *self, void *closure)
{
    (void)closure;
    if (settle(self) < 0) {
        return NULL;
    }
    return PyLong_FromLongLong((long long)self->nonfinite_count);
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

/* pickle and copy: the settings in the constructor's order, then the
 * state (fp8q_py_calibrator_reduce). */
static PyObject *histogram_calibrator_reduce(PyObject *self, PyObject *unused)
{
    static const char *const settings[] = {"bins", "skip_zeros", NULL};
    (void)unused;
    return fp8q_py_calibrator_reduce(self, settings);
}

/* Every method and getter that reads or changes the state runs inside a
 * critical section of the calibrator (binding.h): one calibrator updated
 * from several threads behaves as under the GIL, free-threaded too. The
 * settings (fixed at construction) and __reduce__ (which calls
 * state_dict) need none. */
FP8Q_LOCKED_KEYWORDS(locked_update, histogram_calibrator_update,
                     fp8q_HistogramCalibratorObject)
FP8Q_LOCKED_KEYWORDS(locked_compute_amax, histogram_calibrator_compute_amax,
                     fp8q_HistogramCalibratorObject)
FP8Q_LOCKED_SELF(locked_state_dict, histogram_calibrator_state_dict,
                 fp8q_HistogramCalibratorObject)
FP8Q_LOCKED_SELF(locked_load_state_dict, histogram_calibrator_load_state_dict,
                 fp8q_HistogramCalibratorObject)
FP8Q_LOCKED_SELF(locked_reset, histogram_calibrator_reset,
                 fp8q_HistogramCalibratorObject)
FP8Q_LOCKED_SELF(locked_extend_range, histogram_calibrator_extend_range,
                 fp8q_HistogramCalibratorObject)
FP8Q_LOCKED_PAIR(locked_merge, histogram_calibrator_merge,
                 fp8q_HistogramCalibratorObject)
FP8Q_LOCKED_SELF(locked_get_amax, histogram_calibrator_get_amax,
                 fp8q_HistogramCalibratorObject)
FP8Q_LOCKED_SELF(locked_get_bin_width, histogram_calibrator_get_bin_width,
                 fp8q_HistogramCalibratorObject)
FP8Q_LOCKED_SELF(locked_get_counts, histogram_calibrator_get_counts,
                 fp8q_HistogramCalibratorObject)
FP8Q_LOCKED_SELF(locked_get_total_count, histogram_calibrator_get_total_count,
                 fp8q_HistogramCalibratorObject)
FP8Q_LOCKED_SELF(locked_get_nonfinite_count, histogram_calibrator_get_nonfinite_count,
                 fp8q_HistogramCalibratorObject)

static PyMethodDef histogram_calibrator_methods[] = {
    {"update", (PyCFunction)(void (*)(void))locked_update,
     METH_VARARGS | METH_KEYWORDS, update_doc},
    {"compute_amax",
     (PyCFunction)(void (*)(void))locked_compute_amax,
     METH_VARARGS | METH_KEYWORDS, compute_amax_doc},
    {"merge", (PyCFunction)locked_merge, METH_O, merge_doc},
    {"extend_range", (PyCFunction)locked_extend_range, METH_O,
     extend_range_doc},
    {"state_dict", (PyCFunction)locked_state_dict, METH_NOARGS,
     state_dict_doc},
    {"load_state_dict", (PyCFunction)locked_load_state_dict,
     METH_O, load_state_dict_doc},
    {"__reduce__", (PyCFunction)histogram_calibrator_reduce, METH_NOARGS,
     "Pickling and copy.deepcopy: the settings and state_dict() (state "
     "kept on a GPU comes back to the host)."},
    {"__setstate__", (PyCFunction)locked_load_state_dict, METH_O,
     "Unpickling: load_state_dict(state)."},
    {"reset", (PyCFunction)locked_reset, METH_NOARGS,
     reset_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef histogram_calibrator_getset[] = {
    {"bins", (getter)histogram_calibrator_get_bins, NULL, "Number of bins.",
     NULL},
    {"skip_zeros", (getter)histogram_calibrator_get_skip_zeros, NULL,
     "Whether exact zeros are left uncounted.", NULL},
    {"amax", (getter)locked_get_amax, NULL,
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
    {"nonfinite_count", (getter)locked_get_nonfinite_count,
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

PyTypeObject fp8q_HistogramCalibrator_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fp8q.calib.HistogramCalibrator",
    .tp_basicsize = sizeof(fp8q_HistogramCalibratorObject),
    .tp_dealloc = (destructor)histogram_calibrator_dealloc,
    .tp_repr = (reprfunc)histogram_calibrator_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = histogram_calibrator_doc,
    .tp_methods = histogram_calibrator_methods,
    .tp_getset = histogram_calibrator_getset,
    .tp_init = (initproc)histogram_calibrator_init,
    .tp_new = histogram_calibrator_new,
};
