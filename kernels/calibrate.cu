/*
 * calibrate.cu - calibration kernels: the push of a batch's amax into the
 * max calibrator's device amax history (running maximum, window or moving
 * average), the histogram of a batch (per-block 32-bit shared-memory bins,
 * then 64-bit global atomics) and its fold into the histogram calibrator's
 * device state. A batch holding NaN or infinity without skip_nonfinite is
 * refused on the device and only recorded, for the host to report when it
 * reads the state. Launch contracts: kernels/calibrate.cuh. The bin rule is
 * core/histogram_bins.h, the CPU's, computed in float32 where that gives the
 * same bins (fp8q_histogram_float_rule_applies).
 */
#include "calibrate.cuh"
#include "common.cuh"
#include "core/histogram_bins.h"

static_assert(sizeof(fp8q_calib_record) == 32, "fp8q_calib_record must match the host's layout");
static_assert(sizeof(fp8q_calib_max_state) == 48, "fp8q_calib_max_state must match the host's layout");
static_assert(sizeof(fp8q_calib_histogram_state) == 48,
              "fp8q_calib_histogram_state must match the host's layout");
static_assert(sizeof(fp8q_calib_fold_max_args) == 72, "fp8q_calib_fold_max_args must match the host's layout");
static_assert(sizeof(fp8q_histogram_count_args) == 56,
              "fp8q_histogram_count_args must match the host's layout");
static_assert(sizeof(fp8q_calib_fold_histogram_args) == 56,
              "fp8q_calib_fold_histogram_args must match the host's layout");

/* ------------------------------------------------------------------------- */
/* Admission (every fold)                                                    */

/* Whether a batch with `nonfinite` NaN/inf values is folded in; thread 0
 * records it (admitted: its count; refused: the refusal). The same answer
 * for every thread of the block. */
static __device__ __forceinline__ int admit_batch(fp8q_calib_record *record, uint64_t nonfinite,
                                                  int64_t update_number, int skip_nonfinite)
{
    const int admitted = nonfinite == 0u || skip_nonfinite != 0;
    if (threadIdx.x == 0) {
        if (admitted) {
            record->nonfinite_count += nonfinite;
        }
        else {
            if (record->refused_batches == 0u) {
                record->first_refused_update = (uint64_t)update_number;
                record->first_refused_count = nonfinite;
            }
            record->refused_batches += 1u;
        }
    }
    return admitted;
}

/* ------------------------------------------------------------------------- */
/* Max calibrator                                                            */

/* The moving average of core/amax_history.c, float32(keep * old +
 * (1 - keep) * amax) in double, each operation rounded on its own as the
 * CPU's (no contraction into an FMA). */
static __device__ __forceinline__ float moving_average(double keep, float old, float amax)
{
    return __double2float_rn(
        __dadd_rn(__dmul_rn(keep, (double)old), __dmul_rn(__dsub_rn(1.0, keep), (double)amax)));
}

extern "C" __global__ void fp8q_calib_fold_max(const fp8q_calib_fold_max_args args)
{
    const uint64_t nonfinite = *args.batch_nonfinite;
    const float *amax = (const float *)args.batch_amax_bits;
    float *ring = (float *)(args.state + 1);
    const int64_t filled = args.state->filled;
    /* A moving average or running maximum combines into its one entry;
     * otherwise the batch becomes the new newest entry. */
    const int combine = filled > 0 && (args.momentum >= 0.0 || args.running_max);
    const int64_t newest = combine ? args.state->newest : (args.state->newest + 1) % args.length;
    float *entry = ring + newest * args.n_channels;
    int64_t channel;

    if (!admit_batch(&args.state->record, nonfinite, args.update_number, args.skip_nonfinite) ||
        nonfinite >= (uint64_t)args.batch_size) {
        return; /* refused, or no finite value: nothing but the count */
    }
    __syncthreads(); /* every thread has read the counters */
    for (channel = threadIdx.x; channel < args.n_channels; channel += blockDim.x) {
        if (!combine) {
            entry[channel] = amax[channel];
        }
        else if (args.momentum >= 0.0) {
            entry[channel] = moving_average(args.momentum, entry[channel], amax[channel]);
        }
        else {
            entry[channel] = amax[channel] > entry[channel] ? amax[channel] : entry[channel];
        }
    }
    if (threadIdx.x == 0) {
        args.state->newest = newest;
        args.state->filled = filled < args.length ? filled + 1 : filled;
    }
}

/* ------------------------------------------------------------------------- */
/* Histogram calibrator                                                      */

/* The state's bin exponent once it covers the batch's amax. */
static __device__ int covered_exponent(const fp8q_calib_histogram_state *state, int64_t n_bins,
                                       uint32_t batch_amax_bits)
{
    return fp8q_histogram_covered_exponent(
        n_bins, state->has_range ? state->bin_exponent : FP8Q_HISTOGRAM_NO_RANGE,
        fp8q_bits_to_float(batch_amax_bits));
}

/* The bin of `value` (core/histogram_bins.h): FLOAT_RULE, the float32 rule
 * with the float32 inverse width, where fp8q_histogram_float_rule_applies
 * (the same bins, without a double conversion, product and truncation per
 * value); else the double rule. */
template <bool FLOAT_RULE> struct histogram_grid {
    double inverse_width;
    float inverse_width_float;

    __device__ __forceinline__ int64_t bin(float value, int64_t n_bins, int skip_zeros) const
    {
        return FLOAT_RULE
                   ? fp8q_histogram_bin_float(value, inverse_width_float, n_bins, skip_zeros)
                   : fp8q_histogram_bin(value, inverse_width, n_bins, skip_zeros);
    }
};

/* One value into the batch's counts: a block's 32-bit shared counters
 * (native shared-memory atomics) or the 64-bit global ones. */
template <bool FLOAT_RULE>
static __device__ __forceinline__ void count_value(float value,
                                                   const histogram_grid<FLOAT_RULE> &grid,
                                                   const fp8q_histogram_count_args &args,
                                                   int in_shared, unsigned int *shared_counts,
                                                   unsigned long long *global_counts)
{
    const int64_t bin = grid.bin(value, args.n_bins, args.skip_zeros);
    if (bin < args.n_bins) {
        if (in_shared) {
            atomicAdd(shared_counts + bin, 1u);
        }
        else {
            atomicAdd(global_counts + bin, 1ull);
        }
    }
}

/* Every value of the source that this thread counts: 16-byte vectors of
 * the source where it is aligned for them, then the tail; a grid-stride
 * loop. */
template <int S, bool FLOAT_RULE>
static __device__ __forceinline__ void count_values(const fp8q_histogram_count_args &args,
                                                    const histogram_grid<FLOAT_RULE> &grid,
                                                    int in_shared, unsigned int *shared_counts,
                                                    unsigned long long *global_counts)
{
    typedef typename dtype_traits<S>::storage source_t;
    constexpr int VECTOR = 16 / sizeof(source_t);
    typedef packed<source_t, VECTOR> source_vector;
    const source_t *source = (const source_t *)args.source;
    const int64_t threads = global_thread_count();
    const int64_t n_vectors = is_aligned16(source) ? args.count / VECTOR : 0;
    int64_t i;

    for (i = global_thread_index(); i < n_vectors; i += threads) {
        const source_vector in = ((const source_vector *)source)[i];
#pragma unroll
        for (int k = 0; k < VECTOR; k++) {
            count_value(dtype_traits<S>::load(in.values[k]), grid, args, in_shared,
                        shared_counts, global_counts);
        }
    }
    for (i = n_vectors * VECTOR + global_thread_index(); i < args.count; i += threads) {
        count_value(dtype_traits<S>::load(source[i]), grid, args, in_shared, shared_counts,
                    global_counts);
    }
}

/* The batch's counts: into a block's shared counters where they fit (then
 * added to the global ones), else straight into the global ones. */
template <int S>
static __device__ __noinline__ void histogram_count_run(const fp8q_histogram_count_args args,
                                                        unsigned int *shared_counts)
{
    constexpr int VECTOR = 16 / sizeof(typename dtype_traits<S>::storage);
    const int exponent = covered_exponent(args.state, args.n_bins, *args.batch_amax_bits);
    const double inverse_width = exponent == FP8Q_HISTOGRAM_NO_RANGE ? 0.0 : ldexp(1.0, -exponent);
    /* A block counts at most count / grid + (block + 1) * VECTOR values:
     * 32-bit shared counters hold that where it stays below 2^32. */
    const int in_shared =
        args.n_bins <= FP8Q_HISTOGRAM_SHARED_BINS &&
        (uint64_t)args.count / gridDim.x + ((uint64_t)blockDim.x + 1u) * VECTOR <= 0xFFFFFFFFu;
    unsigned long long *global_counts = (unsigned long long *)args.batch_counts;
    int64_t bin;

    if (in_shared) {
        for (bin = threadIdx.x; bin < args.n_bins; bin += blockDim.x) {
            shared_counts[bin] = 0u;
        }
        __syncthreads();
    }
    if (fp8q_histogram_float_rule_applies(exponent, args.n_bins)) {
        const histogram_grid<true> grid = {inverse_width, (float)inverse_width};
        count_values<S>(args, grid, in_shared, shared_counts, global_counts);
    }
    else {
        const histogram_grid<false> grid = {inverse_width, 0.0f};
        count_values<S>(args, grid, in_shared, shared_counts, global_counts);
    }
    if (in_shared) {
        __syncthreads();
        for (bin = threadIdx.x; bin < args.n_bins; bin += blockDim.x) {
            if (shared_counts[bin] != 0u) {
                atomicAdd(global_counts + bin, (unsigned long long)shared_counts[bin]);
            }
        }
    }
}

struct histogram_count_body {
    const fp8q_histogram_count_args &args;
    unsigned int *shared_counts;
    template <int S> __device__ void run() { histogram_count_run<S>(args, shared_counts); }
};

extern "C" __global__ void fp8q_histogram_count(const fp8q_histogram_count_args args)
{
    /* One array for every dtype's instance (static: no dynamic shared memory). */
    __shared__ unsigned int shared_counts[FP8Q_HISTOGRAM_SHARED_BINS];
    histogram_count_body body = {args, shared_counts};
    dispatch_dtype(args.source_dtype, body);
}

extern "C" __global__ void fp8q_calib_fold_histogram(const fp8q_calib_fold_histogram_args args)
{
    fp8q_calib_histogram_state *state = args.state;
    unsigned long long *counts = (unsigned long long *)(state + 1);
    unsigned long long *widened = (unsigned long long *)args.batch_counts;
    const uint32_t batch_amax = *args.batch_amax_bits;
    const int exponent = covered_exponent(state, args.n_bins, batch_amax);
    /* Without a range only bin 0 (zeros) counts: it stays bin 0. */
    const int shift = state->has_range ? exponent - state->bin_exponent : 0;
    int64_t bin;

    if (!admit_batch(&state->record, *args.batch_nonfinite, args.update_number, args.skip_nonfinite)) {
        return;
    }
    /* The state's counts onto the batch's (covered) grid, added to the
     * batch's; then they become the state's. */
    for (bin = threadIdx.x; bin < args.n_bins; bin += blockDim.x) {
        if (counts[bin] != 0u) {
            atomicAdd(widened + fp8q_histogram_widened_bin(bin, shift), counts[bin]);
        }
    }
    __syncthreads();
    for (bin = threadIdx.x; bin < args.n_bins; bin += blockDim.x) {
        counts[bin] = widened[bin];
    }
    if (threadIdx.x == 0) {
        if (exponent != FP8Q_HISTOGRAM_NO_RANGE) {
            state->has_range = 1;
            state->bin_exponent = exponent;
        }
        state->amax_bits = max(state->amax_bits, batch_amax);
    }
}
