/*
 * calibrator.c - the calibrator base below the binding (calibrator.h): a
 * batch's channel axis, the NaN/inf count around a kind's absorb and
 * merge, reset, and the calibrated amax.
 */
#include "core/calibrator.h"
#include "platform.h"

fp8q_status fp8q_calib_channel_axis_check(long long axis, fp8q_error *error)
{
    if (axis < -FP8Q_MAX_DIMS || axis >= FP8Q_MAX_DIMS) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "channel_axis: expected an axis in [%d, %d], got "
                         "%lld",
                         -FP8Q_MAX_DIMS, FP8Q_MAX_DIMS - 1, axis);
    }
    return FP8Q_OK;
}

fp8q_status fp8q_calibrator_batch(const fp8q_calibrator *self,
                                  const fp8q_view *x, int on_device,
                                  int skip_nonfinite, fp8q_calib_batch *batch,
                                  fp8q_error *error)
{
    const int axis = self->channel_axis;
    int dimension;

    /* Every field but the room, which `count` fills when it uses it. */
    batch->x = x;
    batch->skip_nonfinite = skip_nonfinite;
    batch->on_device = on_device;
    batch->channel_dimension = -1;
    batch->n_channels = 1;
    batch->n_nonfinite = 0;
    batch->device_bytes = 0;
    batch->settings_version = self->settings_version;
    batch->partial = NULL;
    if (axis == FP8Q_CALIB_PER_TENSOR) {
        return FP8Q_OK;
    }
    dimension = axis < 0 ? axis + x->ndim : axis;
    if (dimension < 0 || dimension >= x->ndim) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "x: channel_axis=%d is out of range for an input "
                         "of %d dimensions",
                         axis, x->ndim);
    }
    batch->channel_dimension = dimension;
    batch->n_channels = x->shape[dimension];
    return FP8Q_OK;
}

/* The batch made, admitted and counted again under self's settings now:
 * FP8Q_OK with *counted 0 when it adds nothing then. */
static fp8q_status recount(const fp8q_calib_kind *kind, void *self,
                           fp8q_calib_batch *batch, int *counted,
                           fp8q_error *error)
{
    fp8q_status status;

    kind->release(batch);
    /* device_bytes 0: the settings change only in a successful setup,
     * after which the binding forgets the GPU state (a stale size would be
     * read against the new settings). */
    status = fp8q_calibrator_batch((const fp8q_calibrator *)self, batch->x,
                                   batch->on_device, batch->skip_nonfinite,
                                   batch, error);
    *counted = 0;
    if (status == FP8Q_OK) {
        status = kind->admit(self, batch, counted, error);
    }
    if (status == FP8Q_OK && *counted) {
        status = kind->count(batch, error);
    }
    return status;
}

/* Whether `added` NaN/inf values still fit self's count (an int64 that a
 * loaded state_dict may have set to anything >= 0); ValueError naming
 * `what` otherwise, before anything changes. */
static fp8q_status check_nonfinite_room(const void *self, int64_t added,
                                        const char *what, fp8q_error *error)
{
    if (added > INT64_MAX - ((const fp8q_calibrator *)self)->nonfinite_count) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: the NaN/inf count would pass 2**63 - 1", what);
    }
    return FP8Q_OK;
}

fp8q_status fp8q_calibrator_absorb(const fp8q_calib_kind *kind, void *self,
                                   fp8q_calib_batch *batch,
                                   fp8q_error *error)
{
    int counted = 1;
    fp8q_status status = FP8Q_OK;

    if (batch->settings_version !=
        ((const fp8q_calibrator *)self)->settings_version) {
        status = recount(kind, self, batch, &counted, error);
    }
    if (status == FP8Q_OK) {
        status = check_nonfinite_room(self, batch->n_nonfinite, "x", error);
    }
    if (status == FP8Q_OK && counted) {
        status = kind->absorb(self, batch, error);
    }
    if (status == FP8Q_OK) {
        ((fp8q_calibrator *)self)->nonfinite_count += batch->n_nonfinite;
    }
    kind->release(batch);
    return status;
}

fp8q_status fp8q_calibrator_merge(const fp8q_calib_kind *kind, void *self,
                                  const void *other, fp8q_error *error)
{
    fp8q_status status = check_nonfinite_room(
        self, ((const fp8q_calibrator *)other)->nonfinite_count, "other",
        error);

    if (status == FP8Q_OK) {
        status = kind->merge(self, other, error);
    }
    if (status == FP8Q_OK) {
        ((fp8q_calibrator *)self)->nonfinite_count +=
            ((const fp8q_calibrator *)other)->nonfinite_count;
    }
    return status;
}

void fp8q_calibrator_reset(const fp8q_calib_kind *kind, void *self)
{
    ((fp8q_calibrator *)self)->nonfinite_count = 0;
    kind->reset(self);
}

fp8q_status fp8q_calibrator_amax(const fp8q_calib_kind *kind,
                                 const void *self, float **amax,
                                 int64_t *n_channels, int *per_channel,
                                 fp8q_error *error)
{
    *amax = NULL;
    *per_channel =
        ((const fp8q_calibrator *)self)->channel_axis != FP8Q_CALIB_PER_TENSOR;
    *n_channels = kind->amax(self, NULL);
    if (*n_channels == 0) {
        return FP8Q_OK;
    }
    *amax = (float *)fp8q_aligned_alloc((size_t)*n_channels * sizeof(float));
    if (*amax == NULL) {
        return fp8q_fail(error, FP8Q_ERROR_MEMORY,
                         "out of memory for %lld amax values",
                         (long long)*n_channels);
    }
    kind->amax(self, *amax);
    return FP8Q_OK;
}
