/*
 * norm_formula.h - the per-element arithmetic of the fused norm + per-token
 * quantize (RMSNorm / LayerNorm, then FP8 codes per row), the one
 * definition used by the CPU (csrc/core/norm_quantize.c), the GPU
 * (kernels/norm_quantize.cu) and the fake driver's emulation. Plain C that
 * also compiles as CUDA C++, like scale_formula.h.
 *
 * Given a row's float32 mean (0 for RMSNorm) and float32 spread (the mean
 * square for RMSNorm, the variance for LayerNorm; the row's reductions,
 * whose summation order is the caller's), every step below is one
 * correctly rounded float32 operation (the kernels build with -fmad=false
 * -prec-div=true -prec-sqrt=true, the C code with -ffp-contract=off), so
 * the CPU and the GPU agree bit for bit wherever their reductions agree.
 */
#ifndef FP8Q_CORE_NORM_FORMULA_H
#define FP8Q_CORE_NORM_FORMULA_H

#include <math.h>

#include "core/float_codec.h"

/* inverse = 1 / sqrt(spread + epsilon), each operation rounded to float32
 * (NaN for a NaN spread; infinity for spread + epsilon = 0). */
FP8Q_CODEC float fp8q_norm_inverse(float spread, float epsilon)
{
    const float shifted = spread + epsilon;
    return 1.0f / sqrtf(shifted);
}

/* One normalised element before its rounding into the output dtype:
 * ((x - mean) * inverse) * weight, + bias when has_bias; four float32
 * operations in this order (mean 0 for RMSNorm: x - 0 is x exactly). */
FP8Q_CODEC float fp8q_norm_value(float x, float mean, float inverse,
                                 float weight, float bias, int has_bias)
{
    const float centred = x - mean;
    const float normalised = centred * inverse;
    const float scaled = normalised * weight;
    return has_bias ? scaled + bias : scaled;
}

#endif /* FP8Q_CORE_NORM_FORMULA_H */
