/*
 * host_random.h - a small deterministic generator (xorshift64*) for the
 * host emulation programs of tests/ (straight_cast_emulation.cpp,
 * quantize_rows_emulation.cpp): the same sequence on every machine.
 */
#ifndef FP8Q_TESTS_HOST_RANDOM_H
#define FP8Q_TESTS_HOST_RANDOM_H

#include <stdint.h>

struct host_random {
    uint64_t state; /* nonzero */

    uint32_t next()
    {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        return (uint32_t)((state * 0x2545F4914F6CDD1Dull) >> 32);
    }
};

#endif /* FP8Q_TESTS_HOST_RANDOM_H */
