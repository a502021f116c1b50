/*
 * scale_formula.h - the scale of a group from its amax, the one definition
 * used by the CPU (csrc/core/quantize.c) and the GPU (kernels/scale.cu).
 * Plain C that also compiles as CUDA C++ (functions are __host__ __device__
 * under nvcc), like float_codec.h.
 *
 * scale = float32(amax) / max (a correctly rounded float32 division: nvcc
 * builds fp8q's kernels with -prec-div=true -ftz=false), 1.0 for amax = 0,
 * the smallest positive float32 where the quotient underflows to 0, rounded
 * up to the next power of two when asked. amax is >= 0 or NaN; NaN and
 * infinity go through the division unchanged (the CPU refuses them before
 * calling this).
 */
#ifndef FP8Q_CORE_SCALE_FORMULA_H
#define FP8Q_CORE_SCALE_FORMULA_H

#include "core/float_codec.h"

/* The smallest power of two >= value, for value > 0 (infinity for values
 * above 2^127, and for infinity). */
FP8Q_CODEC float fp8q_round_up_to_power_of_2(float value)
{
    const uint32_t bits = fp8q_float_to_bits(value);
    const uint32_t exponent = bits & 0x7F800000u;
    const uint32_t fraction = bits & 0x007FFFFFu;
    uint32_t power;

    if (exponent != 0u) {
        /* Normal: already a power of two, or the next binade's start. */
        return fp8q_bits_to_float(fraction == 0u ? bits
                                                 : exponent + 0x00800000u);
    }
    /* Subnormal: the power-of-two bit pattern at or above the fraction
     * (0x00800000 is the smallest normal, which is also a power of two). */
    power = 1u;
    while (power < fraction) {
        power <<= 1;
    }
    return fp8q_bits_to_float(power);
}

/* The dequantization scale of a group whose amax is `amax`, for an FP8
 * format whose largest finite value (after any margin) is `max`. */
FP8Q_CODEC float fp8q_scale_from_amax(float amax, float max, int power_of_2)
{
    float scale;
    if (amax == 0.0f) {
        return 1.0f;
    }
    scale = amax / max;
    if (scale == 0.0f) {
        /* amax below max * 2^-150: keep the scale positive. */
        scale = fp8q_bits_to_float(1u);
    }
    /* NaN stays NaN (rounding its bits would not). */
    return power_of_2 && scale == scale ? fp8q_round_up_to_power_of_2(scale)
                                        : scale;
}

#endif /* FP8Q_CORE_SCALE_FORMULA_H */
