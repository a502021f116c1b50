/*
 * amax_history.c - the max calibrator's amax window or moving average (see
 * amax_history.h). Entries live in a ring: pushing never moves old entries.
 */
#include <inttypes.h>
#include <string.h>

#include "core/amax_history.h"

void fp8q_amax_history_init(fp8q_amax_history *history, int64_t n_channels,
                            int64_t length, double momentum, int running_max,
                            float *entries)
{
    history->n_channels = n_channels;
    history->length = length;
    history->momentum = momentum;
    history->running_max = running_max;
    history->filled = 0;
    history->newest = length - 1; /* the first push lands in position 0 */
    history->entries = entries;
}

float *fp8q_amax_history_entry(const fp8q_amax_history *history, int64_t age)
{
    const int64_t position =
        (history->newest - age + history->length) % history->length;
    return history->entries + position * history->n_channels;
}

void fp8q_amax_history_push(fp8q_amax_history *history, const float *amax)
{
    int64_t channel;

    if (history->momentum >= 0.0 && history->filled > 0) {
        float *average = fp8q_amax_history_entry(history, 0);
        const double keep = history->momentum;
        for (channel = 0; channel < history->n_channels; channel++) {
            average[channel] = (float)(keep * (double)average[channel] +
                                       (1.0 - keep) * (double)amax[channel]);
        }
        return;
    }
    if (history->running_max && history->filled > 0) {
        float *maximum = fp8q_amax_history_entry(history, 0);
        for (channel = 0; channel < history->n_channels; channel++) {
            maximum[channel] =
                amax[channel] > maximum[channel] ? amax[channel]
                                                 : maximum[channel];
        }
        return;
    }
    history->newest = (history->newest + 1) % history->length;
    memcpy(fp8q_amax_history_entry(history, 0), amax,
           (size_t)history->n_channels * sizeof(float));
    if (history->filled < history->length) {
        history->filled++;
    }
}

void fp8q_amax_history_reduce(const fp8q_amax_history *history,
                              int most_recent, float *out)
{
    const int64_t ages = most_recent ? 1 : history->filled;
    int64_t channel;
    int64_t age;

    memcpy(out, fp8q_amax_history_entry(history, 0),
           (size_t)history->n_channels * sizeof(float));
    for (age = 1; age < ages; age++) {
        const float *entry = fp8q_amax_history_entry(history, age);
        for (channel = 0; channel < history->n_channels; channel++) {
            out[channel] = entry[channel] > out[channel] ? entry[channel]
                                                         : out[channel];
        }
    }
}

/* FP8Q_ERROR_VALUE naming what differs when `other` cannot be merged into
 * `history`. */
static fp8q_status check_mergeable(const fp8q_amax_history *history,
                                   const fp8q_amax_history *other,
                                   fp8q_error *error)
{
    if (other->n_channels != history->n_channels) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "other: %" PRId64 " channels, expected %" PRId64,
                         other->n_channels, history->n_channels);
    }
    if (other->length != history->length ||
        other->momentum != history->momentum ||
        other->running_max != history->running_max) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "other: history_len %" PRId64 ", momentum %s and "
                         "running max %d, expected %" PRId64 ", %s and %d",
                         other->length, fp8q_number(other->momentum).text,
                         other->running_max, history->length,
                         fp8q_number(history->momentum).text,
                         history->running_max);
    }
    return FP8Q_OK;
}

fp8q_status fp8q_amax_history_merge(fp8q_amax_history *history,
                                    const fp8q_amax_history *other,
                                    fp8q_error *error)
{
    const fp8q_status status = check_mergeable(history, other, error);
    int64_t age;

    for (age = 0; status == FP8Q_OK && age < other->filled; age++) {
        const float *theirs = fp8q_amax_history_entry(other, age);
        float *ours;
        int64_t channel;
        if (age >= history->filled) {
            /* Older than anything here: copy it in as the oldest entry. */
            history->filled++;
            memcpy(fp8q_amax_history_entry(history, age), theirs,
                   (size_t)history->n_channels * sizeof(float));
            continue;
        }
        ours = fp8q_amax_history_entry(history, age);
        for (channel = 0; channel < history->n_channels; channel++) {
            ours[channel] =
                theirs[channel] > ours[channel] ? theirs[channel]
                                                : ours[channel];
        }
    }
    return status;
}
