/*
 * fast_divide.h - integer division by a divisor known in advance, as one
 * multiply-high, an add and a shift (Granlund and Montgomery's method), for
 * the index arithmetic of the CUDA kernels: the host makes the divisor once
 * per launch and the kernels divide per element without a 64-bit division.
 * Plain C that also compiles as CUDA C++ (functions are __host__ __device__
 * under nvcc), like float_codec.h.
 *
 * Exact for every dividend 0 <= n < 2^63 and divisor 1 <= d < 2^63. With
 * l = ceil(log2 d) and m' = floor(2^(64 + l) / d) + 1, m' d lies in
 * (2^(64 + l), 2^(64 + l) + d] and d <= 2^l, which is the condition under
 * which floor(n / d) = floor(m' n / 2^(64 + l)) for all n < 2^64. Writing
 * m' = 2^64 + multiplier (multiplier < 2^64), that is
 * (multiply_high(n, multiplier) + n) >> l, whose sum cannot overflow for
 * n < 2^63 because multiply_high(n, multiplier) < n.
 */
#ifndef FP8Q_CORE_FAST_DIVIDE_H
#define FP8Q_CORE_FAST_DIVIDE_H

#include <stdint.h>

#include "core/float_codec.h" /* FP8Q_CODEC */

/* 16 bytes (4 of them tail padding, the same for every 64-bit compiler):
 * it sits inside the kernels' argument structs. */
typedef struct fp8q_fast_divisor {
    uint64_t multiplier; /* floor(2^64 * (2^shift - d) / d) + 1 */
    uint32_t shift;      /* ceil(log2 d) */
} fp8q_fast_divisor;

/* The high 64 bits of the 128-bit product a * b. */
FP8Q_CODEC uint64_t fp8q_multiply_high(uint64_t a, uint64_t b)
{
#if defined(__CUDA_ARCH__)
    return __umul64hi(a, b);
#else
    const uint64_t a_low = a & 0xFFFFFFFFu, a_high = a >> 32;
    const uint64_t b_low = b & 0xFFFFFFFFu, b_high = b >> 32;
    const uint64_t low_high = a_low * b_high;
    const uint64_t high_low = a_high * b_low;
    const uint64_t middle = ((a_low * b_low) >> 32) +
                            (low_high & 0xFFFFFFFFu) +
                            (high_low & 0xFFFFFFFFu);
    return a_high * b_high + (low_high >> 32) + (high_low >> 32) +
           (middle >> 32);
#endif
}

/* The divisor d, 1 <= d < 2^63 (made on the host, once per launch). */
FP8Q_CODEC fp8q_fast_divisor fp8q_fast_divisor_make(uint64_t d)
{
    fp8q_fast_divisor result;
    uint64_t remainder, quotient = 0u;
    uint32_t shift = 0u;
    int bit;

    while (shift < 63u && ((uint64_t)1 << shift) < d) {
        shift++;
    }
    /* floor(2^64 * remainder / d) by long division; remainder < d < 2^63,
     * so doubling it never overflows. */
    remainder = ((uint64_t)1 << shift) - d;
    for (bit = 0; bit < 64; bit++) {
        remainder <<= 1;
        quotient <<= 1;
        if (remainder >= d) {
            remainder -= d;
            quotient |= 1u;
        }
    }
    result.multiplier = quotient + 1u;
    result.shift = shift;
    return result;
}

/* floor(n / d) for 0 <= n < 2^63. */
FP8Q_CODEC uint64_t fp8q_fast_divide(uint64_t n, fp8q_fast_divisor divisor)
{
    return (fp8q_multiply_high(n, divisor.multiplier) + n) >> divisor.shift;
}

#endif /* FP8Q_CORE_FAST_DIVIDE_H */
