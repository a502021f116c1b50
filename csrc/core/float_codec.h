/*
 * float_codec.h - the one scalar codec for fp8q's narrow floating-point types.
 *
 * float32 <-> the four FP8 formats (OCP OFP8 E4M3FN and E5M2, and the "fnuz"
 * variants E4M3FNUZ and E5M2FNUZ), float16 and bfloat16. Every CPU loop and
 * every CUDA kernel converts through these functions (or through hardware
 * conversions proven bit-identical to them), so there is one definition of the
 * numerics. The header is plain C that also compiles as CUDA C++: functions
 * are __host__ __device__ under nvcc.
 *
 * Rules (bit-identical to ml_dtypes, see docs/numerics.md):
 *   - encoding rounds once, to nearest, ties to even;
 *   - saturate != 0 maps finite overflow and +-inf to +-max; saturate == 0
 *     maps them to NaN (E4M3FN, fnuz) or +-inf (E5M2);
 *   - NaN encodes as the format's NaN with the input's sign (E4M3FN 0x7F/0xFF,
 *     E5M2 0x7E/0xFE; fnuz formats have the single NaN 0x80 and no -0);
 *   - decoding is exact; an FP8 NaN decodes to the quiet float32 NaN with the
 *     code's sign bit (0xFFC00000 for the fnuz NaN 0x80).
 * float16 follows IEEE 754 binary16 (overflow to inf, NaN payload kept as
 * NumPy does); bfloat16 rounds to nearest-even and canonicalises NaN to
 * 0x7FC0 with the input's sign, as ml_dtypes does.
 *
 * A scaling (x / scale, x * scale) whose result is NaN gives the same bits
 * on every CPU and GPU (fp8q_scaling_result): its first NaN operand,
 * quieted, or for a NaN computed from numbers (0/0, inf/inf, inf*0) the
 * positive quiet NaN 0x7FC00000, where x86 would give 0xFFC00000 and a GPU
 * 0x7FFFFFFF.
 *
 * The subnormal encodings add a "magic" power of two so that the float32 adder
 * performs the round-to-nearest-even; this is exact under flush-to-zero too,
 * because every float32 subnormal rounds to an FP8 zero anyway.
 */
#ifndef FP8Q_CORE_FLOAT_CODEC_H
#define FP8Q_CORE_FLOAT_CODEC_H

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define FP8Q_CODEC static __host__ __device__ __forceinline__
#elif defined(_MSC_VER) && !defined(__clang__)
#define FP8Q_CODEC static __forceinline
#else
#define FP8Q_CODEC static inline
#endif

/* ------------------------------------------------------------------------- */
/* float32 bit access                                                        */

FP8Q_CODEC uint32_t fp8q_float_to_bits(float value)
{
#if defined(__CUDA_ARCH__)
    return __float_as_uint(value);
#else
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
#endif
}

FP8Q_CODEC float fp8q_bits_to_float(uint32_t bits)
{
#if defined(__CUDA_ARCH__)
    return __uint_as_float(bits);
#else
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
#endif
}

/* ------------------------------------------------------------------------- */
/* NaN from a scaling                                                        */

/* The bits of a NaN computed from two numbers (0/0, inf/inf, inf*0). */
#define FP8Q_COMPUTED_NAN_BITS 0x7FC00000u

/* The NaN of `value` op `factor`: the first NaN operand, quieted, sign and
 * payload kept (what x86 and Arm return), else FP8Q_COMPUTED_NAN_BITS.
 * Branch-free, so that CPU loops calling it still vectorise. */
FP8Q_CODEC float fp8q_scaling_nan(float value, float factor)
{
    const uint32_t value_bits = fp8q_float_to_bits(value);
    const uint32_t factor_bits = fp8q_float_to_bits(factor);
    const uint32_t nan_bits =
        (value_bits & 0x7FFFFFFFu) > 0x7F800000u    ? value_bits
        : (factor_bits & 0x7FFFFFFFu) > 0x7F800000u ? factor_bits
                                                    : FP8Q_COMPUTED_NAN_BITS;
    return fp8q_bits_to_float(nan_bits | 0x00400000u);
}

/* `result`, the correctly rounded value / factor or value * factor, with a
 * NaN result replaced by fp8q_scaling_nan's: the same bits on every CPU and
 * on the GPU. */
FP8Q_CODEC float fp8q_scaling_result(float result, float value, float factor)
{
    return result != result ? fp8q_scaling_nan(value, factor) : result;
}

/* value, except that an infinity becomes the quiet NaN of its sign
 * (0x7FC00000 or 0xFFC00000): quantized, it gives the format's NaN code with
 * that sign instead of saturating (the casts' infinity_to_nan,
 * kernels/cast.cuh). */
FP8Q_CODEC float fp8q_infinity_as_nan(float value)
{
    const uint32_t bits = fp8q_float_to_bits(value);
    return (bits & 0x7FFFFFFFu) == 0x7F800000u
               ? fp8q_bits_to_float(bits | 0x00400000u)
               : value;
}

/* ------------------------------------------------------------------------- */
/* FP8, generic over the format parameters                                   */

/* How a format spends its top exponent and its sign bit. */
enum {
    FP8Q_FP8_KIND_IEEE = 0, /* E5M2: infinities and several NaNs        */
    FP8Q_FP8_KIND_FN = 1,   /* E4M3FN: no inf, NaN only at S.1111.111   */
    FP8Q_FP8_KIND_FNUZ = 2  /* fnuz: no inf, no -0, the single NaN 0x80 */
};

/*
 * Encodes float32 `value` into an FP8 code.
 *   mantissa_bits  explicit fraction bits (3 or 2)
 *   exponent_bias  7 (E4M3FN), 15 (E5M2), 8 (E4M3FNUZ), 16 (E5M2FNUZ)
 *   max_code       code of the largest finite magnitude
 *   kind           FP8Q_FP8_KIND_*
 * Written without branches so that loops over it vectorise; with constant
 * format arguments the compiler folds everything format-specific.
 */
FP8Q_CODEC uint8_t fp8q_encode_fp8(float value, int mantissa_bits,
                                   int exponent_bias, uint32_t max_code,
                                   int kind, int saturate)
{
    const uint32_t bits = fp8q_float_to_bits(value);
    const uint32_t magnitude = bits & 0x7FFFFFFFu;
    const int shift = 23 - mantissa_bits;

    /* |value| below the smallest normal: let the float adder round to the
     * subnormal grid, whose spacing is the magic number's ulp. */
    const uint32_t min_normal_bits = (uint32_t)(127 + 1 - exponent_bias) << 23;
    const uint32_t magic_bits = (uint32_t)(127 + 1 - exponent_bias - mantissa_bits + 23)
                                << 23;
    const float magic = fp8q_bits_to_float(magic_bits);
    const uint32_t subnormal_code =
        fp8q_float_to_bits(fp8q_bits_to_float(magnitude) + magic) - magic_bits;

    /* Normal range: round the fraction to nearest-even on the bits, then
     * re-bias the exponent. A carry out of the fraction bumps the exponent,
     * which is exactly right. */
    const uint32_t rounded =
        magnitude + ((magnitude >> shift) & 1u) + ((1u << (shift - 1)) - 1u);
    const uint32_t normal_code =
        (rounded >> shift) - ((uint32_t)(127 - exponent_bias) << mantissa_bits);

    const uint32_t overflow_code = kind == FP8Q_FP8_KIND_IEEE ? 0x7Cu
                                   : kind == FP8Q_FP8_KIND_FN ? 0x7Fu
                                                              : 0x80u;
    const uint32_t nan_code = kind == FP8Q_FP8_KIND_IEEE ? 0x7Eu
                              : kind == FP8Q_FP8_KIND_FN ? 0x7Fu
                                                         : 0x80u;
    uint32_t code = magnitude < min_normal_bits ? subnormal_code : normal_code;
    code = code > max_code ? (saturate ? max_code : overflow_code) : code;
    code = magnitude > 0x7F800000u ? nan_code : code;

    uint32_t sign = (bits >> 24) & 0x80u;
    if (kind == FP8Q_FP8_KIND_FNUZ) {
        sign = code == 0u ? 0u : sign; /* fnuz has no negative zero */
    }
    return (uint8_t)(sign | code);
}

/* Decodes an FP8 code exactly into float32 (see the header comment for NaN). */
FP8Q_CODEC float fp8q_decode_fp8(uint8_t code, int mantissa_bits,
                                 int exponent_bits, int exponent_bias, int kind)
{
    const uint32_t sign = (uint32_t)(code & 0x80u) << 24;
    const uint32_t exponent_mask = (1u << exponent_bits) - 1u;
    const uint32_t exponent = ((uint32_t)code >> mantissa_bits) & exponent_mask;
    const uint32_t fraction = (uint32_t)code & ((1u << mantissa_bits) - 1u);

    const uint32_t normal_bits =
        sign | ((exponent + 127u - (uint32_t)exponent_bias) << 23) |
        (fraction << (23 - mantissa_bits));
    const float subnormal_unit =
        fp8q_bits_to_float((uint32_t)(127 + 1 - exponent_bias - mantissa_bits) << 23);
    const uint32_t subnormal_bits =
        sign | fp8q_float_to_bits((float)fraction * subnormal_unit);

    uint32_t result = exponent == 0u ? subnormal_bits : normal_bits;
    int is_nan;
    if (kind == FP8Q_FP8_KIND_IEEE) {
        is_nan = exponent == exponent_mask && fraction != 0u;
        result = exponent == exponent_mask && fraction == 0u
                     ? (sign | 0x7F800000u)
                     : result;
    } else if (kind == FP8Q_FP8_KIND_FN) {
        is_nan = (code & 0x7Fu) == 0x7Fu;
    } else {
        is_nan = code == 0x80u;
    }
    result = is_nan ? (sign | 0x7FC00000u) : result;
    return fp8q_bits_to_float(result);
}

/* ------------------------------------------------------------------------- */
/* The four FP8 formats                                                      */

FP8Q_CODEC uint8_t fp8q_encode_e4m3fn(float value, int saturate)
{
    return fp8q_encode_fp8(value, 3, 7, 0x7Eu, FP8Q_FP8_KIND_FN, saturate);
}

FP8Q_CODEC uint8_t fp8q_encode_e5m2(float value, int saturate)
{
    return fp8q_encode_fp8(value, 2, 15, 0x7Bu, FP8Q_FP8_KIND_IEEE, saturate);
}

FP8Q_CODEC uint8_t fp8q_encode_e4m3fnuz(float value, int saturate)
{
    return fp8q_encode_fp8(value, 3, 8, 0x7Fu, FP8Q_FP8_KIND_FNUZ, saturate);
}

FP8Q_CODEC uint8_t fp8q_encode_e5m2fnuz(float value, int saturate)
{
    return fp8q_encode_fp8(value, 2, 16, 0x7Fu, FP8Q_FP8_KIND_FNUZ, saturate);
}

FP8Q_CODEC float fp8q_decode_e4m3fn(uint8_t code)
{
    return fp8q_decode_fp8(code, 3, 4, 7, FP8Q_FP8_KIND_FN);
}

FP8Q_CODEC float fp8q_decode_e5m2(uint8_t code)
{
    return fp8q_decode_fp8(code, 2, 5, 15, FP8Q_FP8_KIND_IEEE);
}

FP8Q_CODEC float fp8q_decode_e4m3fnuz(uint8_t code)
{
    return fp8q_decode_fp8(code, 3, 4, 8, FP8Q_FP8_KIND_FNUZ);
}

FP8Q_CODEC float fp8q_decode_e5m2fnuz(uint8_t code)
{
    return fp8q_decode_fp8(code, 2, 5, 16, FP8Q_FP8_KIND_FNUZ);
}

/* The same decodes of E4M3FN and E5M2 in a few integer operations and one
 * multiplication, for loops that decode every weight they read (the
 * weight-only GEMV kernel): the code's magnitude bits are placed under
 * float32's exponent and fraction, which gives the value times 2^(127 - bias)
 * (a float32 subnormal for the format's subnormals), and one exact
 * multiplication by 2^(bias - 127) removes the offset. Bit-identical to
 * fp8q_decode_e4m3fn / fp8q_decode_e5m2 for all 256 codes, NaN included
 * (tests/c/test_codec.c), provided float32 subnormals are not flushed (fp8q
 * never compiles with flush-to-zero). */
FP8Q_CODEC float fp8q_decode_e4m3fn_by_product(uint8_t code)
{
    const uint32_t sign = (uint32_t)(code & 0x80u) << 24;
    const uint32_t magnitude = (uint32_t)code & 0x7Fu;
    const float value = fp8q_bits_to_float(sign | (magnitude << 20)) *
                        fp8q_bits_to_float((127u + 120u) << 23); /* 2^120 */
    return magnitude == 0x7Fu ? fp8q_bits_to_float(sign | 0x7FC00000u) : value;
}

FP8Q_CODEC float fp8q_decode_e5m2_by_product(uint8_t code)
{
    const uint32_t sign = (uint32_t)(code & 0x80u) << 24;
    const uint32_t magnitude = (uint32_t)code & 0x7Fu;
    const float value = fp8q_bits_to_float(sign | (magnitude << 21)) *
                        fp8q_bits_to_float((127u + 112u) << 23); /* 2^112 */
    return magnitude < 0x7Cu    ? value
           : magnitude == 0x7Cu ? fp8q_bits_to_float(sign | 0x7F800000u)
                                : fp8q_bits_to_float(sign | 0x7FC00000u);
}

/* ------------------------------------------------------------------------- */
/* float16 (IEEE binary16)                                                   */

FP8Q_CODEC uint16_t fp8q_encode_float16(float value)
{
    const uint32_t bits = fp8q_float_to_bits(value);
    const uint32_t sign = (bits >> 16) & 0x8000u;
    const uint32_t magnitude = bits & 0x7FFFFFFFu;

    /* Subnormals: the ulp of 0.5f is 2^-24, float16's subnormal spacing. */
    const uint32_t subnormal_code =
        fp8q_float_to_bits(fp8q_bits_to_float(magnitude) + 0.5f) - 0x3F000000u;
    const uint32_t rounded = magnitude + ((magnitude >> 13) & 1u) + 0xFFFu;
    uint32_t normal_code = (rounded >> 13) - (112u << 10);
    normal_code = normal_code > 0x7C00u ? 0x7C00u : normal_code;

    /* NaN keeps the top of its payload and stays a NaN (NumPy's rule). */
    uint32_t nan_code = 0x7C00u | ((magnitude & 0x7FFFFFu) >> 13);
    nan_code = nan_code == 0x7C00u ? 0x7C01u : nan_code;

    uint32_t code = magnitude < 0x38800000u ? subnormal_code : normal_code;
    code = magnitude > 0x7F800000u ? nan_code : code;
    return (uint16_t)(sign | code);
}

FP8Q_CODEC float fp8q_decode_float16(uint16_t code)
{
    const uint32_t sign = (uint32_t)(code & 0x8000u) << 16;
    const uint32_t exponent = ((uint32_t)code >> 10) & 0x1Fu;
    const uint32_t fraction = (uint32_t)code & 0x3FFu;
    const uint32_t normal_bits = sign | ((exponent + 112u) << 23) | (fraction << 13);
    const uint32_t subnormal_bits =
        sign | fp8q_float_to_bits((float)fraction * 5.9604644775390625e-8f);
    const uint32_t special_bits = sign | 0x7F800000u | (fraction << 13);
    uint32_t result = exponent == 0u ? subnormal_bits : normal_bits;
    result = exponent == 0x1Fu ? special_bits : result;
    return fp8q_bits_to_float(result);
}

/* ------------------------------------------------------------------------- */
/* bfloat16                                                                  */

FP8Q_CODEC uint16_t fp8q_encode_bfloat16(float value)
{
    const uint32_t bits = fp8q_float_to_bits(value);
    const uint32_t sign = (bits >> 16) & 0x8000u;
    const uint32_t magnitude = bits & 0x7FFFFFFFu;
    const uint32_t rounded =
        (magnitude + ((magnitude >> 16) & 1u) + 0x7FFFu) >> 16;
    const uint32_t code = magnitude > 0x7F800000u ? 0x7FC0u : rounded;
    return (uint16_t)(sign | code);
}

FP8Q_CODEC float fp8q_decode_bfloat16(uint16_t code)
{
    return fp8q_bits_to_float((uint32_t)code << 16);
}

/* ------------------------------------------------------------------------- */
/* uint8: truncation toward zero, saturating to [0, 255], NaN -> 0 (the      */
/* semantics of CUDA's saturating float-to-integer conversion).             */

FP8Q_CODEC uint8_t fp8q_encode_uint8(float value)
{
    float clamped = value == value ? value : 0.0f;
    clamped = clamped < 0.0f ? 0.0f : clamped;
    clamped = clamped > 255.0f ? 255.0f : clamped;
    return (uint8_t)clamped;
}

#endif /* FP8Q_CORE_FLOAT_CODEC_H */
