/*
 * calibrator.h - the calibrator base in plain C, below the binding: the
 * state every calibrator keeps (channel axis, NaN/inf count), one batch's
 * path through it (channel axis resolved, counted without a lock, absorbed
 * with one), merge, reset and the calibrated amax, on top of a small table
 * per calibrator (fp8q_calib_kind). The max calibrator
 * (max_calibrator.c: an amax history, core/amax_history.h) and the
 * histogram calibrator (histogram_calibrator.c: core/histogram.h) fill one
 * each; csrc/python/calibrator_base.c converts Python objects, holds the
 * locks and raises. A calibrator's state on a GPU is
 * cuda/calibration_ops.h's (fp8q_cuda_calib_kind).
 *
 * Functions return FP8Q_OK or write the failure into `error`; memory is
 * fp8q_aligned_alloc's. None of them locks: the caller serialises calls on
 * one state, except the kinds' `count`, which reads only its batch (what
 * `admit` recorded there of the settings), so that it can run outside the
 * caller's lock while another thread changes the state, its settings
 * included; fp8q_calibrator_absorb counts a batch again when they changed.
 */
#ifndef FP8Q_CORE_CALIBRATOR_H
#define FP8Q_CORE_CALIBRATOR_H

#include <stddef.h>
#include <stdint.h>

#include "core/amax_history.h"
#include "core/dtype.h"
#include "core/histogram.h"
#include "core/status.h"
#include "core/view.h"

/* fp8q_calibrator.channel_axis of a calibrator per tensor. */
#define FP8Q_CALIB_PER_TENSOR (-1000)

/* The first member of every calibrator's state. */
typedef struct fp8q_calibrator {
    int channel_axis;        /* as given (may be negative), or PER_TENSOR */
    int64_t nonfinite_count; /* NaN/inf values skipped so far             */
    /* Bumped by every (re)configuration (the kinds' setup functions), so
     * that a batch made under other settings is recognised at absorb. */
    int64_t settings_version;
} fp8q_calibrator;

/* One update() batch on its way through a calibrator. */
typedef struct fp8q_calib_batch {
    const fp8q_view *x;    /* on the CPU, or a CUDA x's view (borrowed)   */
    int skip_nonfinite;
    int on_device;         /* x is on a GPU                               */
    int channel_dimension; /* channel_axis resolved against x, or -1      */
    int64_t n_channels;    /* its length, or 1                            */
    int64_t n_nonfinite;   /* NaN/inf values `count` found                */
    size_t device_bytes;   /* bytes of the GPU state kept now, or 0       */
    int64_t settings_version; /* the calibrator's, when the batch was made */
    void *partial;         /* what `count` made for `absorb`, or NULL     */
    /* Room for what `admit` records of the settings for `count` and for a
     * small partial, so that a batch per tensor allocates nothing beyond
     * its statistics. */
    union {
        double align;
        float amax[256];
        struct {
            fp8q_histogram histogram;
            void *block;        /* its counts' memory                   */
            int64_t n_bins;     /* the calibrator's, recorded by admit  */
            int skip_zeros;     /* the same                             */
            uintptr_t counts_address; /* of the calibrator's counts        */
        } counted;
    } room;
} fp8q_calib_batch;

/*
 * What one kind of calibrator does, on its state (a struct whose first
 * member is fp8q_calibrator). `self` and `other` are states of the kind.
 */
typedef struct fp8q_calib_kind {
    /* A new batch, looked at first (with the caller's lock): *counted 1 to
     * count it, 0 when it adds nothing; a failure, e.g. a channel count
     * that differs from the one fixed, when it cannot be counted. Records
     * in the batch's room what `count` needs of self's settings. */
    fp8q_status (*admit)(const void *self, fp8q_calib_batch *batch,
                         int *counted, fp8q_error *error);
    /* An admitted CPU batch's statistics into batch->partial and its
     * NaN/inf count into batch->n_nonfinite, reading nothing but the batch
     * (called without the caller's lock, e.g. with Python's GIL
     * released). */
    fp8q_status (*count)(fp8q_calib_batch *batch, fp8q_error *error);
    /* batch->partial folded into self (with the caller's lock). */
    fp8q_status (*absorb)(void *self, const fp8q_calib_batch *batch,
                          fp8q_error *error);
    /* Frees batch->partial (NULL is fine). */
    void (*release)(fp8q_calib_batch *batch);
    /* other's statistics folded into self (the settings it does not
     * check itself already found equal); the base adds the NaN/inf
     * count. */
    fp8q_status (*merge)(void *self, const void *other, fp8q_error *error);
    /* Empties self's statistics, keeping its settings. */
    void (*reset)(void *self);
    /* The calibrated amax: 0 before any data, else its channels (1 per
     * tensor) and, when `amax` is not NULL, their values into it. */
    int64_t (*amax)(const void *self, float *amax);
    /* Frees self's memory (the state itself is the caller's). */
    void (*free)(void *self);
} fp8q_calib_kind;

/* A calibrator's channel_axis= as given: FP8Q_OK for an axis in
 * [-FP8Q_MAX_DIMS, FP8Q_MAX_DIMS), else FP8Q_ERROR_VALUE "channel_axis:
 * expected an axis in [-FP8Q_MAX_DIMS, FP8Q_MAX_DIMS - 1], got AXIS". */
fp8q_status fp8q_calib_channel_axis_check(long long axis, fp8q_error *error);

/* Resolves self's channel axis against x into `batch` (every field set but its room):
 * FP8Q_ERROR_VALUE "x: channel_axis=A is out of range for an input of N
 * dimensions". */
fp8q_status fp8q_calibrator_batch(const fp8q_calibrator *self,
                                  const fp8q_view *x, int on_device,
                                  int skip_nonfinite, fp8q_calib_batch *batch,
                                  fp8q_error *error);

/* kind->absorb, then batch->n_nonfinite added to self's count (ValueError
 * first, nothing counted, if that count would pass 2**63 - 1); the batch's
 * partial released either way. When self was reconfigured since the batch
 * was made (its settings_version), the batch is first made, admitted and
 * counted again under the settings now (with the caller's lock, so the
 * update acts as if it came after the reconfiguration). */
fp8q_status fp8q_calibrator_absorb(const fp8q_calib_kind *kind, void *self,
                                   fp8q_calib_batch *batch,
                                   fp8q_error *error);

/* kind->merge, then other's NaN/inf count added (a calibrator that saw
 * only NaN/inf values still adds its count); ValueError first, nothing
 * changed, if the sum would pass 2**63 - 1. */
fp8q_status fp8q_calibrator_merge(const fp8q_calib_kind *kind, void *self,
                                  const void *other, fp8q_error *error);

/* Empties the statistics and the NaN/inf count. */
void fp8q_calibrator_reset(const fp8q_calib_kind *kind, void *self);

/* The calibrated amax into a new block (*amax, free with
 * fp8q_aligned_free) of *n_channels values, *per_channel whether self
 * keeps a channel axis; *amax NULL before any data. */
fp8q_status fp8q_calibrator_amax(const fp8q_calib_kind *kind,
                                 const void *self, float **amax,
                                 int64_t *n_channels, int *per_channel,
                                 fp8q_error *error);

/* ------------------------------------------------------------------------- */
/* The max calibrator (max_calibrator.c)                                    */

typedef struct fp8q_max_calibrator {
    fp8q_calibrator base;
    int most_recent;           /* algo == "most_recent"                   */
    fp8q_amax_history history; /* entries NULL until the channels are known */
} fp8q_max_calibrator;

extern const fp8q_calib_kind fp8q_max_calibrator_ops;

/* The bytes before the ring of a history kept on a GPU (its record and
 * counters: kernels/calibrate.cuh, fp8q_calib_max_state). */
#define FP8Q_CALIB_MAX_STATE_HEADER 48u

/* The window settings, in the constructor's order of checks: history_len
 * (has_window 0: None, the running maximum) in [1,
 * FP8Q_AMAX_HISTORY_MAX_LENGTH], algo "max" or "most_recent", and
 * "most_recent" only with a window. FP8Q_ERROR_VALUE naming the first bad
 * one. */
fp8q_status fp8q_max_calibrator_check(int has_window, int64_t history_len,
                                      const char *algo, fp8q_error *error);

/* (Re)configures self, emptying it: FP8Q_ERROR_VALUE when a momentum
 * (momentum >= 0; checked in [0, 1) by the caller) meets history_len > 1,
 * nothing changed; the settings otherwise as fp8q_max_calibrator_check
 * passed them. Per tensor the history is allocated now (FP8Q_ERROR_MEMORY
 * when that fails, nothing changed). */
fp8q_status fp8q_max_calibrator_setup(fp8q_max_calibrator *self,
                                      int channel_axis, int has_window,
                                      int64_t history_len, const char *algo,
                                      double momentum, fp8q_error *error);

/* The channel count self has fixed (its history, or a GPU state of
 * `device_bytes` that is not 0), or -1 while it is open. */
int64_t fp8q_max_calibrator_channels(const fp8q_max_calibrator *self,
                                     size_t device_bytes);

/* The recorded amax rows, oldest first, into a new block (*rows, free
 * with fp8q_aligned_free; NULL when *filled is 0) of *filled rows of
 * *n_channels (0 while the channel count is open). */
fp8q_status fp8q_max_calibrator_rows(const fp8q_max_calibrator *self,
                                     float **rows, int64_t *filled,
                                     int64_t *n_channels, fp8q_error *error);

/* The rows of a loaded amax_history of `ndim` dimensions and `shape`:
 * (rows,) per tensor, (rows, channels) per channel, at most history_len
 * rows, into *filled and *n_channels (1 per tensor); FP8Q_ERROR_VALUE
 * "state: amax_history must have ..." otherwise. */
fp8q_status fp8q_max_calibrator_rows_shape(const fp8q_max_calibrator *self,
                                           int ndim, const int64_t *shape,
                                           int64_t *filled,
                                           int64_t *n_channels,
                                           fp8q_error *error);

/* Replaces the history with `filled` rows (oldest first, checked by the
 * caller) of n_channels; per channel with no rows the channel count opens
 * again, as after a reset. */
fp8q_status fp8q_max_calibrator_load(fp8q_max_calibrator *self,
                                     const float *rows, int64_t filled,
                                     int64_t n_channels, fp8q_error *error);

/* A GPU history (a ring of history.length entries of n_channels, `filled`
 * entries, `newest` its position) folded in: a running maximum's (which
 * started empty) pushed as one entry, a window's or moving average's
 * (which started as the host's) taken as the host's. */
fp8q_status fp8q_max_calibrator_fold(fp8q_max_calibrator *self,
                                     const float *ring, int64_t filled,
                                     int64_t newest, int64_t n_channels,
                                     fp8q_error *error);

/* ------------------------------------------------------------------------- */
/* The histogram calibrator (histogram_calibrator.c)                        */

typedef struct fp8q_histogram_calibrator {
    fp8q_calibrator base;
    fp8q_histogram histogram; /* counts fp8q_aligned_alloc'd */
    int skip_zeros;
} fp8q_histogram_calibrator;

extern const fp8q_calib_kind fp8q_histogram_calibrator_ops;

/* compute_amax's methods. */
typedef enum fp8q_calib_method {
    FP8Q_CALIB_MAX,
    FP8Q_CALIB_PERCENTILE,
    FP8Q_CALIB_ENTROPY,
    FP8Q_CALIB_MSE
} fp8q_calib_method;

/* (Re)configures self with `bins` (1 to FP8Q_HISTOGRAM_MAX_BINS, else
 * FP8Q_ERROR_VALUE and nothing changed) empty bins. */
fp8q_status fp8q_histogram_calibrator_setup(fp8q_histogram_calibrator *self,
                                            int64_t bins, int skip_zeros,
                                            fp8q_error *error);

/* "max", "percentile", "entropy" or "mse"; FP8Q_ERROR_VALUE otherwise. */
fp8q_status fp8q_calib_method_parse(const char *name,
                                    fp8q_calib_method *method,
                                    fp8q_error *error);

/* A copy of self's histogram with its own counts (free them with
 * fp8q_aligned_free), for a search without the lock; FP8Q_ERROR_VALUE
 * "HistogramCalibrator.compute_amax: no values counted yet" before any. */
fp8q_status fp8q_histogram_calibrator_snapshot(
    const fp8q_histogram_calibrator *self, fp8q_histogram *snapshot,
    fp8q_error *error);

/* The amax `method` chooses from `histogram` (core/histogram_threshold.h;
 * "max" its amax), for FP8 `target` where the method needs one. */
fp8q_status fp8q_calib_threshold(const fp8q_histogram *histogram,
                                 fp8q_calib_method method, double percentile,
                                 fp8q_dtype target, float *amax,
                                 fp8q_error *error);

/* The bin exponent of a state's bin width: FP8Q_HISTOGRAM_NO_RANGE for 0,
 * e for 2**e (in double's normal range); 1, or 0 for any other width. */
int fp8q_histogram_width_exponent(double bin_width, int *exponent);

/* Replaces the counts, grid and amax with a loaded state's, checked
 * (FP8Q_ERROR_VALUE "state: ..." for another bin count or
 * fp8q_histogram_check's inconsistencies; nothing changed). */
fp8q_status fp8q_histogram_calibrator_load(fp8q_histogram_calibrator *self,
                                           const int64_t *counts,
                                           int64_t n_bins, int bin_exponent,
                                           float amax, fp8q_error *error);

/* ------------------------------------------------------------------------- */
/* The list of calibrators                                                   */

/* X(name, Name) for each calibrator: its core ops fp8q_<name>_calibrator_ops
 * (above), and the binding's type fp8q_<name>_calibrator_kind that
 * csrc/python/calibration.c registers as fp8q._C._<Name>Calibrator. A new
 * calibrator adds its line here. */
#define FP8Q_CALIBRATORS(X) X(max, Max) X(histogram, Histogram)

#endif /* FP8Q_CORE_CALIBRATOR_H */
