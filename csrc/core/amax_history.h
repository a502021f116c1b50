/*
 * amax_history.h - the running amax of the max calibrator: the maximum of
 * every amax seen (TensorRT/ModelOpt "max" calibration), a window of the
 * last `length` amax values (TransformerEngine's delayed-scaling history) or
 * an exponential moving average (optimum-quanto's momentum), per tensor or
 * per channel.
 */
#ifndef FP8Q_CORE_AMAX_HISTORY_H
#define FP8Q_CORE_AMAX_HISTORY_H

#include <stdint.h>

#include "core/status.h"

#define FP8Q_AMAX_HISTORY_MAX_LENGTH ((int64_t)1 << 20)

typedef struct fp8q_amax_history {
    int64_t n_channels; /* values per entry: 1 per tensor, C per channel */
    int64_t length;     /* entries kept (1 with a momentum or running max) */
    double momentum;    /* in [0, 1), or < 0 for a plain window */
    int running_max;    /* 1: one entry, the maximum of every push */
    int64_t filled;     /* entries holding values, <= length */
    int64_t newest;     /* ring position of the newest entry */
    float *entries;     /* length * n_channels floats, caller-owned */
} fp8q_amax_history;

/* An empty history over caller-owned `entries`. running_max = 1 needs
 * length 1 and no momentum (momentum < 0). */
void fp8q_amax_history_init(fp8q_amax_history *history, int64_t n_channels,
                            int64_t length, double momentum, int running_max,
                            float *entries);

/* The entry `age` steps old (0 = newest), for 0 <= age < filled. */
float *fp8q_amax_history_entry(const fp8q_amax_history *history, int64_t age);

/*
 * Records one batch's amax (n_channels values). A window drops its oldest
 * entry when full. With running_max the single entry becomes
 * max(old, amax) per channel. With a momentum m the single entry becomes
 * float32(m * old + (1 - m) * amax), computed in double, per channel. In
 * both the first batch is taken as is.
 */
void fp8q_amax_history_push(fp8q_amax_history *history, const float *amax);

/* The calibrated amax per channel into `out`: the maximum over the window,
 * or with most_recent the newest entry. Requires filled > 0. */
void fp8q_amax_history_reduce(const fp8q_amax_history *history,
                              int most_recent, float *out);

/*
 * Combines `other` (same n_channels, length, momentum and running_max;
 * FP8Q_ERROR_VALUE
 * naming the difference otherwise) into `history`: entries of equal age take
 * the elementwise maximum, and the result holds as many entries as the
 * fuller of the two. With a running max that is the maximum of all data
 * seen by both; with a momentum, the maximum of the two averages (what an
 * all_reduce with MAX gives).
 */
fp8q_status fp8q_amax_history_merge(fp8q_amax_history *history,
                                    const fp8q_amax_history *other,
                                    fp8q_error *error);

#endif /* FP8Q_CORE_AMAX_HISTORY_H */
