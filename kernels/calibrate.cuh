/*
 * calibrate.cuh - launch contracts of the calibration kernels
 * (kernels/calibrate.cu): the calibrators' state kept on the device and
 * each batch folded into it there, so that an update of a CUDA batch never
 * waits for the GPU (csrc/python/calibration_device.c).
 *
 * Plain C as well as CUDA C++ (see amax.cuh). Every state and batch buffer
 * is device memory, 8-byte aligned. A state starts as all zero bytes (an
 * empty state; cuMemsetD8Async) or as a copy of the host's state with a
 * zero record, and is read back by the host, which folds it into its own
 * state or takes it as its state (the calibrator's "settle").
 *
 * Every fold kernel decides first whether the batch is admitted: it is
 * unless it holds non-finite values (*batch_nonfinite != 0) and
 * skip_nonfinite is 0. An admitted batch adds its non-finite count to
 * record.nonfinite_count and is folded into the state; a refused one
 * changes nothing but the record: refused_batches + 1, and the first
 * refused batch's update_number and non-finite count. Folds run on one
 * block (grid 1) of a multiple of 32 threads, at most 1024.
 *
 * Kernel "fp8q_calib_fold_max" (FP8Q_CALIB_FOLD_MAX_KERNEL):
 *     __global__ void fp8q_calib_fold_max(const fp8q_calib_fold_max_args args);
 *   The max calibrator's amax history (core/amax_history.h, in the same
 *   ring layout): an admitted batch that holds a finite value
 *   (*batch_nonfinite < batch_size) is pushed as fp8q_amax_history_push
 *   pushes it, batch_amax_bits[c] (float32 bits) for each of n_channels
 *   channels: with a momentum m >= 0 and an entry already there, the entry
 *   becomes float32(m * old + (1 - m) * amax) computed in double, each
 *   operation rounded on its own (no FMA); with running_max and an entry
 *   there, the entry's elementwise maximum; otherwise a new newest entry
 *   (the oldest dropped when all `length` are filled). kernels/amax.cuh's
 *   fp8q_amax_finite_rows wrote the batch's amax and count.
 *
 * Kernel "fp8q_histogram_count" (FP8Q_HISTOGRAM_COUNT_KERNEL):
 *     __global__ void fp8q_histogram_count(const fp8q_histogram_count_args args);
 *   Counts |x| of `count` contiguous elements into batch_counts[0 .. n_bins)
 *   (raised with 64-bit atomics, so the host clears them first) on the grid
 *   the state will have once it covers *batch_amax_bits (the batch's finite
 *   amax): core/histogram_bins.h's covered exponent and bin rule, as the
 *   CPU's fp8q_histogram_add. Blocks with n_bins <=
 *   FP8Q_HISTOGRAM_SHARED_BINS count into 32-bit shared-memory counters
 *   first (static, no dynamic shared memory) where a block's share of the
 *   count stays below 2^32, else straight into batch_counts. The source is
 *   read in 16-byte vectors where it is aligned for them. grid: any size
 *   >= 1 (grid-stride loop).
 *
 * Kernel "fp8q_calib_fold_histogram" (FP8Q_CALIB_FOLD_HISTOGRAM_KERNEL):
 *     __global__ void fp8q_calib_fold_histogram(const fp8q_calib_fold_histogram_args args);
 *   An admitted batch: widens the state's counts to the covered grid (as
 *   fp8q_histogram_count chose it), adds batch_counts and raises amax_bits.
 *   batch_counts is used as the new grid's buffer (its contents are
 *   destroyed).
 */
#ifndef FP8Q_KERNELS_CALIBRATE_CUH
#define FP8Q_KERNELS_CALIBRATE_CUH

#include <stdint.h>

#define FP8Q_CALIB_FOLD_MAX_KERNEL "fp8q_calib_fold_max"
#define FP8Q_HISTOGRAM_COUNT_KERNEL "fp8q_histogram_count"
#define FP8Q_CALIB_FOLD_HISTOGRAM_KERNEL "fp8q_calib_fold_histogram"

/* This file's kernels, X(fp8q_cuda_kernel value, name in the image)
 * each: csrc/registries.py collects every header's list into
 * cuda/kernel_list.h's FP8Q_CUDA_KERNEL_LIST. */
#define FP8Q_CALIBRATE_KERNELS(X)                                         \
    X(FP8Q_KERNEL_CALIB_FOLD_MAX, FP8Q_CALIB_FOLD_MAX_KERNEL)             \
    X(FP8Q_KERNEL_HISTOGRAM_COUNT, FP8Q_HISTOGRAM_COUNT_KERNEL)           \
    X(FP8Q_KERNEL_CALIB_FOLD_HISTOGRAM, FP8Q_CALIB_FOLD_HISTOGRAM_KERNEL)

#define FP8Q_HISTOGRAM_SHARED_BINS 2048

/* What every device state starts with (32 bytes). */
typedef struct fp8q_calib_record {
    uint64_t nonfinite_count;      /* skipped NaN/inf of admitted batches */
    uint64_t refused_batches;      /* batches refused for NaN/inf         */
    uint64_t first_refused_update; /* 1-based update number, 0 for none   */
    uint64_t first_refused_count;  /* its NaN/inf count                   */
} fp8q_calib_record;

/* The max calibrator's device state (48 bytes): fp8q_amax_history's
 * counters, followed in memory by its ring of length * n_channels float32
 * entries (all zero bytes: an empty history whose first push lands in
 * position 1 % length; positions only matter relative to `newest`). */
typedef struct fp8q_calib_max_state {
    fp8q_calib_record record;
    int64_t filled; /* entries holding values, <= length */
    int64_t newest; /* ring position of the newest entry  */
} fp8q_calib_max_state;

/* The histogram calibrator's device state (48 bytes), followed in memory
 * by n_bins uint64 counts. */
typedef struct fp8q_calib_histogram_state {
    fp8q_calib_record record;
    int32_t has_range;    /* 0: no range yet (FP8Q_HISTOGRAM_NO_RANGE)  */
    int32_t bin_exponent; /* bin width 2^bin_exponent when has_range    */
    uint32_t amax_bits;   /* float32 bits of the largest finite |x|     */
    uint32_t padding;
} fp8q_calib_histogram_state;

/* 72 bytes. */
typedef struct fp8q_calib_fold_max_args {
    fp8q_calib_max_state *state;     /* then the state's ring             */
    const uint32_t *batch_amax_bits; /* n_channels                        */
    const uint64_t *batch_nonfinite; /* one count                         */
    int64_t n_channels;              /* >= 1                              */
    int64_t length;                  /* ring entries, >= 1                */
    int64_t batch_size;              /* the batch's elements, >= 1        */
    int64_t update_number;           /* 1-based, for the record           */
    double momentum;                 /* in [0, 1), or < 0 for none        */
    int32_t running_max;             /* 1: length 1, no momentum          */
    int32_t skip_nonfinite;
} fp8q_calib_fold_max_args;

/* 56 bytes. */
typedef struct fp8q_histogram_count_args {
    const void *source;                      /* count elements            */
    uint64_t *batch_counts;                  /* n_bins, raised            */
    const fp8q_calib_histogram_state *state; /* its grid                  */
    const uint32_t *batch_amax_bits;         /* the batch's finite amax   */
    int64_t count;                           /* >= 0                      */
    int64_t n_bins;                          /* 1 .. 65536                */
    int32_t source_dtype;                    /* an fp8q_dtype value       */
    int32_t skip_zeros;
} fp8q_histogram_count_args;

/* 56 bytes (4 of them tail padding). */
typedef struct fp8q_calib_fold_histogram_args {
    fp8q_calib_histogram_state *state; /* then the state's n_bins counts */
    uint64_t *batch_counts;            /* n_bins, destroyed              */
    const uint32_t *batch_amax_bits;
    const uint64_t *batch_nonfinite;
    int64_t n_bins;                    /* 1 .. 65536                     */
    int64_t update_number;             /* 1-based, for the record        */
    int32_t skip_nonfinite;
} fp8q_calib_fold_histogram_args;

#endif /* FP8Q_KERNELS_CALIBRATE_CUH */
