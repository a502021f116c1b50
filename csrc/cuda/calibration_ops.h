/*
 * calibration_ops.h - the calibrators' reductions on a GPU, on views +
 * device + stream (kernels/calibrate.cuh's layouts): a CUDA batch reduced
 * into scratch memory (its finite amax per channel, its NaN/inf count),
 * folded into a calibrator's device state by the max or the histogram
 * calibrator's kernels, and the device state started, read back and its
 * record of refused batches turned into the deferred error. What
 * csrc/python/calibrator_base.c, calibration_device.c and the two
 * calibrators launched above the binding; they now keep the state's
 * memory, the GIL's ordering and the exceptions.
 *
 * Functions return FP8Q_OK or write the failure into `error`; call them
 * without holding Python's GIL (the binding holds it around the launches
 * that read or write a state, to order concurrent updates).
 */
#ifndef FP8Q_CUDA_CALIBRATION_OPS_H
#define FP8Q_CUDA_CALIBRATION_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "calibrate.cuh"
#include "core/calibrator.h"
#include "core/status.h"
#include "core/view.h"
#include "cuda/driver.h"
#include "cuda/ops.h"
#include "cuda/scratch.h"

/* A CUDA batch reduced on its GPU by fp8q_cuda_calib_reduce, until
 * fp8q_cuda_calib_batch_release. */
typedef struct fp8q_cuda_calib_batch {
    fp8q_view source;          /* x, or its C-contiguous copy in gathered */
    fp8q_cuda_buffer gathered; /* that copy, when one was made            */
    fp8q_cuda_scratch scratch; /* the three parts below, in one block     */
    uint64_t *nonfinite_count; /* the batch's NaN/inf values              */
    uint32_t *amax_bits;       /* its finite amax per channel (bits)      */
    void *extra;               /* the calibrator's own scratch, or NULL   */
} fp8q_cuda_calib_batch;

/*
 * The batch `x` (any strides; gathered into a C-contiguous copy first when
 * `contiguous` and it is not) reduced on `stream`: batch->amax_bits[c] the
 * largest finite |x| of channel c (the index of axis `channel_dimension`,
 * 0 <= it < ndim), or of all of x as one channel when channel_dimension <
 * 0, batch->nonfinite_count its NaN and infinite values, and `extra_bytes`
 * of scratch for the calibrator's kernels after them (8-byte aligned; all
 * zero bytes when `zero_extra`). n_channels is x.shape[channel_dimension]
 * or 1. On failure the batch holds nothing.
 */
fp8q_status fp8q_cuda_calib_reduce(const fp8q_cuda_device *device,
                                   const fp8q_view *x, int channel_dimension,
                                   int64_t n_channels, int contiguous,
                                   size_t extra_bytes, int zero_extra,
                                   fp8q_cu_stream stream,
                                   fp8q_cuda_calib_batch *batch,
                                   fp8q_error *error);

/* Gives the batch's memory back in `stream`'s order, after the work queued
 * on it; nothing to do for a batch that holds nothing. */
void fp8q_cuda_calib_batch_release(fp8q_cuda_calib_batch *batch,
                                   fp8q_cu_stream stream);

/* The bytes of the max calibrator's device state: fp8q_calib_max_state and
 * its ring of `length` entries of n_channels float32. */
size_t fp8q_cuda_calib_max_state_bytes(int64_t length, int64_t n_channels);

/* The max calibrator's fold (kernels/calibrate.cuh, fp8q_calib_fold_max)
 * of a reduced batch of n_channels into `state` (device memory of
 * fp8q_cuda_calib_max_state_bytes): its amax pushed into the ring of
 * `length` entries (a moving average when momentum >= 0, a running
 * maximum when running_max), or refused and recorded as update
 * `update_number` when it holds NaN/inf and not skip_nonfinite. */
fp8q_status fp8q_cuda_calib_fold_max(const fp8q_cuda_device *device,
                                     const fp8q_cuda_calib_batch *batch,
                                     int64_t n_channels, void *state,
                                     int64_t length, double momentum,
                                     int running_max, int64_t update_number,
                                     int skip_nonfinite,
                                     fp8q_cu_stream stream,
                                     fp8q_error *error);

/* The bytes of the histogram calibrator's device state
 * (fp8q_calib_histogram_state and n_bins uint64 counts), and of the
 * zeroed scratch (fp8q_cuda_calib_reduce's extra) its fold needs. */
size_t fp8q_cuda_calib_histogram_state_bytes(int64_t n_bins);
size_t fp8q_cuda_calib_histogram_extra_bytes(int64_t n_bins);

/* The histogram calibrator's fold of a batch reduced per tensor (its
 * source C-contiguous, its extra scratch zeroed) into `state`: the batch's
 * counts on the grid the state will have once it covers the batch's amax
 * (zeros left out when skip_zeros), then merged into the state's counts
 * (kernels/calibrate.cuh), or the batch refused and recorded as update
 * `update_number` when it holds NaN/inf and not skip_nonfinite. */
fp8q_status fp8q_cuda_calib_fold_histogram(
    const fp8q_cuda_device *device, const fp8q_cuda_calib_batch *batch,
    void *state, int64_t n_bins, int skip_zeros, int64_t update_number,
    int skip_nonfinite, fp8q_cu_stream stream, fp8q_error *error);

/* Starts a device state of `bytes` for its first fold on `stream`: all
 * zero bytes (`image` NULL; not waited for), or a copy of the host's
 * `image` (its record zero; waited for, so `image` may be freed after). */
fp8q_status fp8q_cuda_calib_state_start(const fp8q_cuda_device *device,
                                        void *state, size_t bytes,
                                        const void *image,
                                        fp8q_cu_stream stream,
                                        fp8q_error *error);

/* `copy` (`bytes` of host memory) = the device state, after the work
 * queued on `stream` (waited for). */
fp8q_status fp8q_cuda_calib_state_read(const fp8q_cuda_device *device,
                                       const void *state, size_t bytes,
                                       void *copy, fp8q_cu_stream stream,
                                       fp8q_error *error);

/* The record at the start of a state read back (`copy`): its skipped
 * NaN/inf count added to *nonfinite_count; FP8Q_ERROR_VALUE when batches
 * were refused, with the deferred message naming the first refused update
 * (a batch on cuda:`device_index`), its count, the number refused and the
 * skip_nonfinite hint. */
fp8q_status fp8q_cuda_calib_state_record(const void *copy, int device_index,
                                         int64_t *nonfinite_count,
                                         fp8q_error *error);

/*
 * What a calibrator does with a CUDA batch (core/calibrator.h's state as
 * `self`), for the calibrator base's GPU dispatch: the batch reduced by
 * fp8q_cuda_calib_reduce (read C-contiguous when `contiguous`, with
 * `scratch` bytes of the calibrator's own after its NaN/inf count and
 * amax, zero bytes when *zeroed is set), the bytes of the device state,
 * whether it starts as an image of the host state (continues_host, NULL
 * for never; `image` writes it into a zeroed host buffer), the fold of a
 * state read back into the host state, and the launch of the kernels that
 * fold the reduced batch into the device state as update `update_number`.
 */
typedef struct fp8q_cuda_calib_kind {
    int contiguous;
    size_t (*scratch)(const void *self, const fp8q_calib_batch *batch,
                      int *zeroed);
    size_t (*state_bytes)(const void *self, const fp8q_calib_batch *batch);
    int (*continues_host)(const void *self);
    void (*image)(const void *self, void *state, size_t bytes);
    fp8q_status (*fold)(void *self, const void *state, size_t bytes,
                        fp8q_error *error);
    fp8q_status (*launch)(const void *self, const fp8q_calib_batch *batch,
                          const fp8q_cuda_device *device,
                          const fp8q_cuda_calib_batch *reduced, void *state,
                          int64_t update_number, fp8q_cu_stream stream,
                          fp8q_error *error);
} fp8q_cuda_calib_kind;

/* The max calibrator's (fp8q_max_calibrator: its amax history continued
 * on the device) and the histogram calibrator's (fp8q_histogram_calibrator:
 * counts merged exactly at the settle). */
extern const fp8q_cuda_calib_kind fp8q_cuda_max_calibrator;
extern const fp8q_cuda_calib_kind fp8q_cuda_histogram_calibrator;

/* Starts a device state of `bytes` for its first fold on `stream`: all
 * zero bytes, or with `image` the host state's image (kind->image of self
 * into a zeroed host buffer, uploaded and waited for). */
fp8q_status fp8q_cuda_calib_state_begin(const fp8q_cuda_calib_kind *kind,
                                        const void *self, int image,
                                        const fp8q_cuda_device *device,
                                        void *state, size_t bytes,
                                        fp8q_cu_stream stream,
                                        fp8q_error *error);

/* A device state read back (`copy`, `bytes`) folded into self (kind->fold;
 * *folded 1 once it succeeded, else 0 and self unchanged), then its record
 * taken into self's NaN/inf count with fp8q_cuda_calib_state_record, whose
 * deferred error for refused batches (of cuda:`device_index`) follows the
 * fold. */
fp8q_status fp8q_cuda_calib_state_fold(const fp8q_cuda_calib_kind *kind,
                                       void *self, const void *copy,
                                       size_t bytes, int device_index,
                                       int *folded, fp8q_error *error);

#endif /* FP8Q_CUDA_CALIBRATION_OPS_H */
