/*
 * calibration_ops.c - the calibrators' reductions on a GPU
 * (calibration_ops.h): a batch's finite amax and NaN/inf count into
 * scratch memory, the max and histogram calibrators' folds into their
 * device states (cuda/launch.h), and a state's start, read-back and
 * record.
 */
#include <string.h>

#include "core/float_codec.h"
#include "cuda/calibration_ops.h"
#include "cuda/launch.h"
#include "cuda/memory.h"
#include "platform.h"

/* The scratch's layout: the NaN/inf count, the amax bits from byte 8, the
 * calibrator's own from the next multiple of 8 after them. */
#define AMAX_OFFSET sizeof(uint64_t)

static size_t extra_offset(int64_t n_channels)
{
    const size_t amax_end = AMAX_OFFSET + (size_t)n_channels * sizeof(uint32_t);
    return (amax_end + 7u) / 8u * 8u;
}

fp8q_status fp8q_cuda_calib_reduce(
    const fp8q_cuda_device *device, const fp8q_view *x, int channel_dimension,
    int64_t n_channels, int contiguous, size_t extra_bytes, int zero_extra,
    fp8q_cu_stream stream, fp8q_cuda_calib_batch *batch, fp8q_error *error)
{
    const size_t offset = extra_offset(n_channels);
    fp8q_status status;
    char *memory;

    memset(batch, 0, sizeof *batch);
    batch->source = *x;
    status = contiguous ? fp8q_cuda_contiguous(device, x, stream,
                                               &batch->gathered,
                                               &batch->source, error)
                        : FP8Q_OK;
    if (status == FP8Q_OK) {
        status = fp8q_cuda_scratch_acquire(device, offset + extra_bytes,
                                           stream, &batch->scratch, error);
    }
    if (status == FP8Q_OK) {
        memory = (char *)batch->scratch.memory;
        batch->nonfinite_count = (uint64_t *)(void *)memory;
        batch->amax_bits = (uint32_t *)(void *)(memory + AMAX_OFFSET);
        batch->extra = extra_bytes > 0 ? memory + offset : NULL;
        status = fp8q_cuda_zero(device, memory,
                                zero_extra ? offset + extra_bytes
                                           : sizeof(uint64_t),
                                stream, error);
    }
    if (status == FP8Q_OK) {
        status = fp8q_cuda_amax_finite(device, &batch->source,
                                       channel_dimension, batch->amax_bits,
                                       batch->nonfinite_count, stream, error);
    }
    if (status != FP8Q_OK) {
        fp8q_cuda_calib_batch_release(batch, stream);
    }
    return status;
}

void fp8q_cuda_calib_batch_release(fp8q_cuda_calib_batch *batch,
                                   fp8q_cu_stream stream)
{
    fp8q_cuda_scratch_release(&batch->scratch, stream);
    fp8q_cuda_buffer_release(&batch->gathered, stream);
    memset(batch, 0, sizeof *batch);
}

/* ------------------------------------------------------------------------- */
/* The max calibrator                                                        */

size_t fp8q_cuda_calib_max_state_bytes(int64_t length, int64_t n_channels)
{
    return sizeof(fp8q_calib_max_state) +
           (size_t)(length * n_channels) * sizeof(float);
}

fp8q_status fp8q_cuda_calib_fold_max(
    const fp8q_cuda_device *device, const fp8q_cuda_calib_batch *batch,
    int64_t n_channels, void *state, int64_t length, double momentum,
    int running_max, int64_t update_number, int skip_nonfinite,
    fp8q_cu_stream stream, fp8q_error *error)
{
    fp8q_calib_fold_max_args args;

    memset(&args, 0, sizeof args);
    args.state = (fp8q_calib_max_state *)state;
    args.batch_nonfinite = batch->nonfinite_count;
    args.batch_amax_bits = batch->amax_bits;
    args.n_channels = n_channels;
    args.length = length;
    args.batch_size = fp8q_view_size(&batch->source);
    args.momentum = momentum;
    args.running_max = running_max;
    args.update_number = update_number;
    args.skip_nonfinite = skip_nonfinite != 0;
    return fp8q_cuda_launch_calib_fold_max(device, &args, stream, error);
}

/* ------------------------------------------------------------------------- */
/* The histogram calibrator                                                  */

size_t fp8q_cuda_calib_histogram_state_bytes(int64_t n_bins)
{
    return sizeof(fp8q_calib_histogram_state) +
           (size_t)n_bins * sizeof(uint64_t);
}

size_t fp8q_cuda_calib_histogram_extra_bytes(int64_t n_bins)
{
    return (size_t)n_bins * sizeof(uint64_t);
}

fp8q_status fp8q_cuda_calib_fold_histogram(
    const fp8q_cuda_device *device, const fp8q_cuda_calib_batch *batch,
    void *state, int64_t n_bins, int skip_zeros, int64_t update_number,
    int skip_nonfinite, fp8q_cu_stream stream, fp8q_error *error)
{
    fp8q_histogram_count_args count;
    fp8q_calib_fold_histogram_args fold;
    fp8q_status status;

    memset(&count, 0, sizeof count);
    count.state = (fp8q_calib_histogram_state *)state;
    count.source = batch->source.data;
    count.batch_counts = (uint64_t *)batch->extra;
    count.batch_amax_bits = batch->amax_bits;
    count.count = fp8q_view_size(&batch->source);
    count.n_bins = n_bins;
    count.source_dtype = (int32_t)batch->source.dtype;
    count.skip_zeros = skip_zeros != 0;
    memset(&fold, 0, sizeof fold);
    fold.state = (fp8q_calib_histogram_state *)state;
    fold.batch_counts = count.batch_counts;
    fold.batch_amax_bits = count.batch_amax_bits;
    fold.batch_nonfinite = batch->nonfinite_count;
    fold.n_bins = n_bins;
    fold.update_number = update_number;
    fold.skip_nonfinite = skip_nonfinite != 0;
    status = fp8q_cuda_launch_histogram_count(device, &count, stream, error);
    if (status == FP8Q_OK) {
        status = fp8q_cuda_launch_calib_fold_histogram(device, &fold, stream,
                                                       error);
    }
    return status;
}

/* ------------------------------------------------------------------------- */
/* A device state                                                            */

fp8q_status fp8q_cuda_calib_state_start(const fp8q_cuda_device *device,
                                        void *state, size_t bytes,
                                        const void *image,
                                        fp8q_cu_stream stream,
                                        fp8q_error *error)
{
    if (image == NULL) {
        return fp8q_cuda_zero(device, state, bytes, stream, error);
    }
    return fp8q_cuda_copy(device, state, image, bytes, stream, 1, error);
}

fp8q_status fp8q_cuda_calib_state_read(const fp8q_cuda_device *device,
                                       const void *state, size_t bytes,
                                       void *copy, fp8q_cu_stream stream,
                                       fp8q_error *error)
{
    return fp8q_cuda_copy(device, copy, state, bytes, stream, 1, error);
}

fp8q_status fp8q_cuda_calib_state_record(const void *copy, int device_index,
                                         int64_t *nonfinite_count,
                                         fp8q_error *error)
{
    fp8q_calib_record record;
    unsigned long long refused;

    memcpy(&record, copy, sizeof record);
    *nonfinite_count += (int64_t)record.nonfinite_count;
    if (record.refused_batches == 0u) {
        return FP8Q_OK;
    }
    refused = (unsigned long long)record.refused_batches;
    return fp8q_fail(
        error, FP8Q_ERROR_VALUE,
        "x: update %llu (a batch on cuda:%d) held %llu NaN or infinite "
        "values and was not recorded; %llu batch%s refused for NaN/inf "
        "since the state was last read, every other batch is recorded "
        "(pass skip_nonfinite=True to skip and count them)",
        (unsigned long long)record.first_refused_update, device_index,
        (unsigned long long)record.first_refused_count, refused,
        refused == 1 ? " was" : "es were");
}

/* ------------------------------------------------------------------------- */
/* The calibrators' GPU tables (fp8q_cuda_calib_kind)                        */

/* core/calibrator.h counts the max state's header without this header. */
typedef char fp8q_max_state_header_check
    [sizeof(fp8q_calib_max_state) == FP8Q_CALIB_MAX_STATE_HEADER ? 1 : -1];

/* No scratch beyond the batch's NaN/inf count and amax per channel. */
static size_t max_scratch(const void *self, const fp8q_calib_batch *batch,
                          int *zeroed)
{
    (void)self;
    (void)batch;
    *zeroed = 0;
    return 0;
}

static size_t max_state_bytes(const void *self,
                              const fp8q_calib_batch *batch)
{
    return fp8q_cuda_calib_max_state_bytes(
        ((const fp8q_max_calibrator *)self)->history.length,
        batch->n_channels);
}

/* A window's or moving average's device history starts as the host's (a
 * running maximum's empty: a maximum is exact in any order). */
static int max_continues_host(const void *self)
{
    return !((const fp8q_max_calibrator *)self)->history.running_max;
}

/* The host history as a device state (same ring, counters and entries);
 * zeros, an empty history, before any entry. */
static void max_image(const void *self, void *memory, size_t bytes)
{
    const fp8q_amax_history *history =
        &((const fp8q_max_calibrator *)self)->history;
    fp8q_calib_max_state *state = (fp8q_calib_max_state *)memory;

    if (history->entries == NULL || history->filled == 0) {
        return;
    }
    state->filled = history->filled;
    state->newest = history->newest;
    memcpy(state + 1, history->entries, bytes - sizeof *state);
}

/* A running maximum's device history (what the device saw since it
 * started empty) is pushed as one entry; a window's or moving average's
 * (which started as the host's) becomes the host's. */
static fp8q_status max_fold(void *self, const void *memory, size_t bytes,
                            fp8q_error *error)
{
    fp8q_max_calibrator *calibrator = (fp8q_max_calibrator *)self;
    const fp8q_calib_max_state *state = (const fp8q_calib_max_state *)memory;
    const size_t entry_bytes =
        (size_t)calibrator->history.length * sizeof(float);

    return fp8q_max_calibrator_fold(
        calibrator, (const float *)(const void *)(state + 1), state->filled,
        state->newest, (int64_t)((bytes - sizeof *state) / entry_bytes),
        error);
}

static fp8q_status max_launch(const void *self, const fp8q_calib_batch *batch,
                              const fp8q_cuda_device *device,
                              const fp8q_cuda_calib_batch *reduced,
                              void *state, int64_t update_number,
                              fp8q_cu_stream stream, fp8q_error *error)
{
    const fp8q_amax_history *history =
        &((const fp8q_max_calibrator *)self)->history;
    return fp8q_cuda_calib_fold_max(device, reduced, batch->n_channels, state,
                                    history->length, history->momentum,
                                    history->running_max, update_number,
                                    batch->skip_nonfinite, stream, error);
}

const fp8q_cuda_calib_kind fp8q_cuda_max_calibrator = {
    0, /* fp8q_amax_finite reads any strides */
    max_scratch, max_state_bytes, max_continues_host,
    max_image,   max_fold,        max_launch,
};

/* The batch's counts, zeroed. */
static size_t histogram_scratch(const void *self,
                                const fp8q_calib_batch *batch, int *zeroed)
{
    (void)batch;
    *zeroed = 1;
    return fp8q_cuda_calib_histogram_extra_bytes(
        ((const fp8q_histogram_calibrator *)self)->histogram.n_bins);
}

static size_t histogram_state_bytes(const void *self,
                                    const fp8q_calib_batch *batch)
{
    (void)batch;
    return fp8q_cuda_calib_histogram_state_bytes(
        ((const fp8q_histogram_calibrator *)self)->histogram.n_bins);
}

/* The device's histogram merged into the host's: exact on this grid, so
 * the result is the CPU's for the same batches. */
static fp8q_status histogram_fold(void *self, const void *memory,
                                  size_t bytes, fp8q_error *error)
{
    fp8q_histogram *histogram =
        &((fp8q_histogram_calibrator *)self)->histogram;
    const fp8q_calib_histogram_state *state =
        (const fp8q_calib_histogram_state *)memory;
    fp8q_histogram on_device;

    (void)bytes; /* n_bins counts, as the calibrator's */
    on_device.n_bins = histogram->n_bins;
    on_device.counts = (int64_t *)(uintptr_t)(const void *)(state + 1);
    on_device.bin_exponent =
        state->has_range ? state->bin_exponent : FP8Q_HISTOGRAM_NO_RANGE;
    on_device.amax = fp8q_bits_to_float(state->amax_bits);
    return fp8q_histogram_merge(histogram, &on_device, error);
}

/* The batch's counts on the grid the state will have once it covers the
 * batch's amax, then the fold into the state. */
static fp8q_status histogram_launch(const void *self,
                                    const fp8q_calib_batch *batch,
                                    const fp8q_cuda_device *device,
                                    const fp8q_cuda_calib_batch *reduced,
                                    void *state, int64_t update_number,
                                    fp8q_cu_stream stream, fp8q_error *error)
{
    const fp8q_histogram_calibrator *calibrator =
        (const fp8q_histogram_calibrator *)self;
    return fp8q_cuda_calib_fold_histogram(
        device, reduced, state, calibrator->histogram.n_bins,
        calibrator->skip_zeros, update_number, batch->skip_nonfinite, stream,
        error);
}

const fp8q_cuda_calib_kind fp8q_cuda_histogram_calibrator = {
    1, histogram_scratch, histogram_state_bytes, NULL,
    NULL, histogram_fold, histogram_launch,
};

/* ------------------------------------------------------------------------- */
/* A calibrator's device state started and folded back                       */

fp8q_status fp8q_cuda_calib_state_begin(const fp8q_cuda_calib_kind *kind,
                                        const void *self, int image,
                                        const fp8q_cuda_device *device,
                                        void *state, size_t bytes,
                                        fp8q_cu_stream stream,
                                        fp8q_error *error)
{
    void *initial;
    fp8q_status status;

    if (!image) {
        return fp8q_cuda_calib_state_start(device, state, bytes, NULL, stream,
                                           error);
    }
    initial = fp8q_aligned_alloc(bytes);
    if (initial == NULL) {
        return fp8q_fail(error, FP8Q_ERROR_MEMORY,
                         "out of memory for a calibrator state of %llu bytes",
                         (unsigned long long)bytes);
    }
    memset(initial, 0, bytes);
    kind->image(self, initial, bytes);
    status = fp8q_cuda_calib_state_start(device, state, bytes, initial, stream,
                                         error);
    fp8q_aligned_free(initial);
    return status;
}

fp8q_status fp8q_cuda_calib_state_fold(const fp8q_cuda_calib_kind *kind,
                                       void *self, const void *copy,
                                       size_t bytes, int device_index,
                                       int *folded, fp8q_error *error)
{
    const fp8q_status status = kind->fold(self, copy, bytes, error);

    *folded = status == FP8Q_OK;
    return *folded ? fp8q_cuda_calib_state_record(
                         copy, device_index,
                         &((fp8q_calibrator *)self)->nonfinite_count, error)
                   : status;
}
