/*
 * max_calibrator.c - the max calibrator's state below the binding
 * (calibrator.h): an amax history (amax_history.h: running maximum, window
 * or moving average) per tensor or per channel, its table of ops for the
 * calibrator base, its settings, rows for state_dict and load, and the
 * fold of a history kept on a GPU.
 */
#include <string.h>

#include "core/amax.h"
#include "core/calibrator.h"
#include "platform.h"

static int per_channel(const fp8q_max_calibrator *self)
{
    return self->base.channel_axis != FP8Q_CALIB_PER_TENSOR;
}

static int has_data(const fp8q_max_calibrator *self)
{
    return self->history.entries != NULL && self->history.filled > 0;
}

/* (Re)allocates the history for n_channels, emptying it. */
static fp8q_status allocate_history(fp8q_max_calibrator *self,
                                    int64_t n_channels, fp8q_error *error)
{
    const size_t bytes = (size_t)(self->history.length *
                                  (n_channels > 0 ? n_channels : 1)) *
                         sizeof(float);
    float *entries = (float *)fp8q_aligned_alloc(bytes);

    if (entries == NULL) {
        return fp8q_fail(error, FP8Q_ERROR_MEMORY,
                         "out of memory for an amax history of %lld bytes",
                         (long long)bytes);
    }
    memset(entries, 0, bytes);
    fp8q_aligned_free(self->history.entries);
    fp8q_amax_history_init(&self->history, n_channels, self->history.length,
                           self->history.momentum, self->history.running_max,
                           entries);
    return FP8Q_OK;
}

fp8q_status fp8q_max_calibrator_check(int has_window, int64_t history_len,
                                      const char *algo, fp8q_error *error)
{
    if (history_len < 1 || history_len > FP8Q_AMAX_HISTORY_MAX_LENGTH) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "history_len: expected 1 to %lld, got %lld",
                         (long long)FP8Q_AMAX_HISTORY_MAX_LENGTH,
                         (long long)history_len);
    }
    if (strcmp(algo, "max") != 0 && strcmp(algo, "most_recent") != 0) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "algo: expected \"max\" or \"most_recent\", got "
                         "\"%s\"",
                         algo);
    }
    if (!has_window && strcmp(algo, "max") != 0) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "algo: \"most_recent\" needs a window; pass "
                         "history_len=N (N >= 1)");
    }
    return FP8Q_OK;
}

fp8q_status fp8q_max_calibrator_setup(fp8q_max_calibrator *self,
                                      int channel_axis, int has_window,
                                      int64_t history_len, const char *algo,
                                      double momentum, fp8q_error *error)
{
    fp8q_max_calibrator next;
    fp8q_status status = FP8Q_OK;

    if (momentum >= 0.0 && history_len != 1) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "momentum and history_len > 1 cannot be combined: "
                         "a moving average keeps one value");
    }
    /* The new state is built aside and swapped in whole: a failed
     * allocation leaves the calibrator as it was. */
    next = *self;
    next.base.channel_axis = channel_axis;
    next.base.nonfinite_count = 0;
    next.base.settings_version++;
    next.most_recent = strcmp(algo, "most_recent") == 0;
    memset(&next.history, 0, sizeof next.history);
    next.history.length = history_len;
    next.history.momentum = momentum;
    next.history.running_max = !has_window && momentum < 0.0;
    /* Per tensor the channel count is known now. */
    if (!per_channel(&next)) {
        status = allocate_history(&next, 1, error);
    }
    if (status == FP8Q_OK) {
        fp8q_aligned_free(self->history.entries);
        *self = next;
    }
    return status;
}

int64_t fp8q_max_calibrator_channels(const fp8q_max_calibrator *self,
                                     size_t device_bytes)
{
    if (self->history.entries != NULL) {
        return self->history.n_channels;
    }
    if (device_bytes != 0) {
        return (int64_t)((device_bytes - FP8Q_CALIB_MAX_STATE_HEADER) /
                         ((size_t)self->history.length * sizeof(float)));
    }
    return -1;
}

/* FP8Q_ERROR_VALUE when n_channels differs from the count fixed. */
static fp8q_status check_channels(const fp8q_max_calibrator *self,
                                  const fp8q_calib_batch *batch,
                                  fp8q_error *error)
{
    const int64_t known =
        fp8q_max_calibrator_channels(self, batch->device_bytes);

    if (known < 0 || known == batch->n_channels) {
        return FP8Q_OK;
    }
    return fp8q_fail(error, FP8Q_ERROR_VALUE,
                     "x: its channel axis (%d) has %lld entries, but this "
                     "calibrator has seen %lld channels",
                     batch->channel_dimension, (long long)batch->n_channels,
                     (long long)known);
}

/* An empty x adds nothing; a CUDA x's channel count is checked now (a CPU
 * x's after its amax). */
static fp8q_status max_admit(const void *state, fp8q_calib_batch *batch,
                             int *counted, fp8q_error *error)
{
    *counted = fp8q_view_size(batch->x) != 0;
    return *counted && batch->on_device
               ? check_channels((const fp8q_max_calibrator *)state, batch,
                                error)
               : FP8Q_OK;
}

/* The batch's amax, a keepdims reduction to the channel axis. */
static fp8q_status max_count(fp8q_calib_batch *batch, fp8q_error *error)
{
    const fp8q_view *x = batch->x;
    fp8q_view destination;
    int axis;

    destination.dtype = FP8Q_FLOAT32;
    destination.ndim = x->ndim;
    for (axis = 0; axis < x->ndim; axis++) {
        destination.shape[axis] = 1;
        destination.strides[axis] = 0;
    }
    if (batch->channel_dimension >= 0) {
        destination.shape[batch->channel_dimension] = batch->n_channels;
        destination.strides[batch->channel_dimension] = 1;
    }
    batch->partial =
        batch->n_channels <= 256
            ? batch->room.amax
            : fp8q_aligned_alloc((size_t)batch->n_channels * sizeof(float));
    if (batch->partial == NULL) {
        return fp8q_fail(error, FP8Q_ERROR_MEMORY,
                         "out of memory for %lld amax values",
                         (long long)batch->n_channels);
    }
    destination.data = batch->partial;
    return fp8q_amax_finite(x, &destination, &batch->n_nonfinite, error);
}

/* The batch's amax pushed into the history; a batch with NaN/inf refused
 * unless skip_nonfinite, one with no finite value records only its count. */
static fp8q_status max_absorb(void *state, const fp8q_calib_batch *batch,
                              fp8q_error *error)
{
    fp8q_max_calibrator *self = (fp8q_max_calibrator *)state;
    const int64_t size = fp8q_view_size(batch->x);
    fp8q_status status;

    if (batch->n_nonfinite != 0 && !batch->skip_nonfinite) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "x: %lld of its %lld values are NaN or infinite "
                         "(pass skip_nonfinite=True to skip and count them)",
                         (long long)batch->n_nonfinite, (long long)size);
    }
    /* Its channels are checked even when it has no finite value (as on a
     * GPU, where the batch is admitted before its values are read). */
    status = check_channels(self, batch, error);
    if (status != FP8Q_OK || batch->n_nonfinite == size) {
        return status;
    }
    if (self->history.entries == NULL) {
        status = allocate_history(self, batch->n_channels, error);
    }
    if (status == FP8Q_OK) {
        fp8q_amax_history_push(&self->history, (const float *)batch->partial);
    }
    return status;
}

static void max_release(fp8q_calib_batch *batch)
{
    if (batch->partial != (void *)batch->room.amax) {
        fp8q_aligned_free(batch->partial);
    }
    batch->partial = NULL;
}

/* Entries of equal age take their elementwise maximum; an other without
 * data adds no entry. */
static fp8q_status max_merge(void *state, const void *other_state,
                             fp8q_error *error)
{
    fp8q_max_calibrator *self = (fp8q_max_calibrator *)state;
    const fp8q_max_calibrator *other =
        (const fp8q_max_calibrator *)other_state;
    const int added = has_data(other);
    fp8q_status status = FP8Q_OK;

    if (added && self->history.entries == NULL) {
        status = allocate_history(self, other->history.n_channels, error);
    }
    return added && status == FP8Q_OK
               ? fp8q_amax_history_merge(&self->history, &other->history,
                                         error)
               : status;
}

/* Per channel the channel count opens again. */
static void max_reset(void *state)
{
    fp8q_max_calibrator *self = (fp8q_max_calibrator *)state;
    fp8q_error ignored;

    if (per_channel(self)) {
        fp8q_aligned_free(self->history.entries);
        self->history.entries = NULL;
        return;
    }
    /* The one-channel history is kept: only emptied. */
    if (self->history.entries != NULL) {
        fp8q_amax_history_init(&self->history, 1, self->history.length,
                               self->history.momentum,
                               self->history.running_max,
                               self->history.entries);
        memset(self->history.entries, 0,
               (size_t)self->history.length * sizeof(float));
        return;
    }
    (void)allocate_history(self, 1, &ignored);
}

/* The history reduced (the maximum, the newest entry or the moving
 * average). */
static int64_t max_amax(const void *state, float *amax)
{
    const fp8q_max_calibrator *self = (const fp8q_max_calibrator *)state;

    if (!has_data(self)) {
        return 0;
    }
    if (amax != NULL) {
        fp8q_amax_history_reduce(&self->history, self->most_recent, amax);
    }
    return self->history.n_channels;
}

/* The history's entries (the state itself is the caller's). */
static void max_free(void *state)
{
    fp8q_aligned_free(((fp8q_max_calibrator *)state)->history.entries);
}

const fp8q_calib_kind fp8q_max_calibrator_ops = {
    max_admit, max_count, max_absorb, max_release,
    max_merge, max_reset, max_amax,   max_free,
};

fp8q_status fp8q_max_calibrator_rows(const fp8q_max_calibrator *self,
                                     float **rows, int64_t *filled,
                                     int64_t *n_channels, fp8q_error *error)
{
    int64_t age;

    *rows = NULL;
    *filled = has_data(self) ? self->history.filled : 0;
    *n_channels = self->history.entries != NULL ? self->history.n_channels
                                                : 0;
    if (*filled == 0) {
        return FP8Q_OK;
    }
    *rows = (float *)fp8q_aligned_alloc((size_t)(*filled * *n_channels) *
                                        sizeof(float));
    if (*rows == NULL) {
        return fp8q_fail(error, FP8Q_ERROR_MEMORY,
                         "out of memory for %lld amax rows",
                         (long long)*filled);
    }
    for (age = 0; age < *filled; age++) { /* oldest first */
        memcpy(*rows + (*filled - 1 - age) * *n_channels,
               fp8q_amax_history_entry(&self->history, age),
               (size_t)*n_channels * sizeof(float));
    }
    return FP8Q_OK;
}

fp8q_status fp8q_max_calibrator_rows_shape(const fp8q_max_calibrator *self,
                                           int ndim, const int64_t *shape,
                                           int64_t *filled,
                                           int64_t *n_channels,
                                           fp8q_error *error)
{
    const int expected_ndim = per_channel(self) ? 2 : 1;

    *filled = ndim == expected_ndim ? shape[0] : -1;
    *n_channels = per_channel(self) && ndim == 2 ? shape[1] : 1;
    if (*filled >= 0 && *filled <= self->history.length) {
        return FP8Q_OK;
    }
    return fp8q_fail(error, FP8Q_ERROR_VALUE,
                     "state: amax_history must have %d dimensions and at "
                     "most %lld rows (%s), got %d dimensions and %lld rows",
                     expected_ndim, (long long)self->history.length,
                     per_channel(self) ? "(rows, channels)" : "(rows,)", ndim,
                     (long long)(ndim > 0 ? shape[0] : 0));
}

fp8q_status fp8q_max_calibrator_load(fp8q_max_calibrator *self,
                                     const float *rows, int64_t filled,
                                     int64_t n_channels, fp8q_error *error)
{
    fp8q_status status;
    int64_t row;

    if (per_channel(self) && filled == 0) {
        max_reset(self);
        return FP8Q_OK;
    }
    status = allocate_history(self, n_channels, error);
    for (row = 0; status == FP8Q_OK && row < filled; row++) {
        fp8q_amax_history_push(&self->history, rows + row * n_channels);
    }
    return status;
}

fp8q_status fp8q_max_calibrator_fold(fp8q_max_calibrator *self,
                                     const float *ring, int64_t filled,
                                     int64_t newest, int64_t n_channels,
                                     fp8q_error *error)
{
    if (filled == 0) {
        return FP8Q_OK;
    }
    if (self->history.entries == NULL) {
        const fp8q_status status =
            allocate_history(self, n_channels, error);
        if (status != FP8Q_OK) {
            return status;
        }
    }
    if (self->history.running_max) {
        fp8q_amax_history_push(&self->history, ring + newest * n_channels);
        return FP8Q_OK;
    }
    self->history.filled = filled;
    self->history.newest = newest;
    memcpy(self->history.entries, ring,
           (size_t)(self->history.length * n_channels) * sizeof(float));
    return FP8Q_OK;
}
