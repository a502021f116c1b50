/*
 * cuda_fp8_emulation.cpp - checks kernels/fp8_hardware.cuh against the codec
 * (csrc/core/float_codec.h) on the host, through cuda_fp8.h's host code:
 * NVIDIA's software emulation of cvt.rn.satfinite, NOT the GPU instruction
 * (tests/test_cuda_ops.py checks the GPU). Built and run by
 * tests/test_cuda_fp8_emulation.py where cuda_fp8.h is found:
 *
 *     g++ -O2 -I/usr/local/cuda/include -Icsrc -Ikernels \
 *         tests/cuda_fp8_emulation.cpp -o emulation && ./emulation [all]
 *
 * Inputs: every float16 and bfloat16 pattern (through the float32 path the
 * kernels take, and through __nv_cvt_halfraw2_to_fp8x2 /
 * __nv_cvt_bfloat16raw2_to_fp8x2), and float32 values around every rounding
 * boundary (every sign, exponent and top 7 fraction bits, with the low 16
 * bits 0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF), or with `all` every float32.
 * The same inputs go through the four-at-a-time encode
 * (fp8q_hardware_encode4) in every lane. The quotient shortcut
 * (fp8q_quotient_codes4, through the hardware encode and through the codec)
 * is checked against the codec of the correctly rounded float32 quotient
 * for 2,000 scales (powers of two, random, the extremes and non-numbers) and
 * for each the quotients nearest every FP8 rounding boundary and value
 * (+-3 float32 steps), zeros, infinities, NaN and random inputs; it prints
 * how often the caller has to divide. Four codes to float16
 * (fp8q_decode4_to_float16): every E4M3FN and E5M2 code in every lane.
 * Four float32 values to float16 / bfloat16 through the paired conversions
 * (elements.cuh's float_store4, cuda_fp16.h / cuda_bf16.h's host code): the
 * float32 inputs above and float16's ties and their neighbours, every lane,
 * against the codec's stores.
 * Prints one line per check; exits 1 when a check that must hold (the
 * saturating encodes with the NaN fix-up, the quotient codes) does not. The
 * other lines say where the plain cuda_fp8.h conversions differ from the
 * codec.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/float_codec.h"
#include "elements.cuh"
#include "fp8_hardware.cuh"
#include "host_random.h"

struct check {
    const char *name;
    int required; /* 1: must match everywhere */
    uint64_t mismatches;
    uint32_t first_input;
    unsigned first_got, first_expected;
};

static void record(check &c, uint32_t input, unsigned got, unsigned expected)
{
    if (got != expected) {
        if (c.mismatches == 0) {
            c.first_input = input;
            c.first_got = got;
            c.first_expected = expected;
        }
        c.mismatches++;
    }
}

enum {
    E4M3_SAT, E5M2_SAT, E4M3_SAT_RAW, E5M2_SAT_RAW, E4M3_NOSAT, E5M2_NOSAT,
    HALF2_E4M3, HALF2_E5M2, BF162_E4M3, BF162_E5M2, ENCODE4_E4M3, ENCODE4_E5M2,
    QUOTIENT_E4M3, QUOTIENT_E5M2, QUOTIENT_CODEC_E4M3, QUOTIENT_CODEC_E5M2, DECODE4_E4M3,
    DECODE4_E5M2, STORE4_FLOAT16, STORE4_BFLOAT16, CHECKS
};

static check checks[CHECKS] = {
    {"float32 -> e4m3fn saturate, fp8_hardware.cuh", 1, 0, 0, 0, 0},
    {"float32 -> e5m2 saturate, fp8_hardware.cuh", 1, 0, 0, 0, 0},
    {"float32 -> e4m3fn __nv_cvt_float_to_fp8 SATFINITE, no NaN fix-up", 0, 0, 0, 0, 0},
    {"float32 -> e5m2 __nv_cvt_float_to_fp8 SATFINITE, no NaN fix-up", 0, 0, 0, 0, 0},
    {"float32 -> e4m3fn __nv_cvt_float_to_fp8 NOSAT vs codec saturate=0", 0, 0, 0, 0, 0},
    {"float32 -> e5m2 __nv_cvt_float_to_fp8 NOSAT vs codec saturate=0", 0, 0, 0, 0, 0},
    {"float16x2 -> e4m3fn __nv_cvt_halfraw2_to_fp8x2 SATFINITE + NaN fix-up", 1, 0, 0, 0, 0},
    {"float16x2 -> e5m2 __nv_cvt_halfraw2_to_fp8x2 SATFINITE + NaN fix-up", 1, 0, 0, 0, 0},
    {"bfloat16x2 -> e4m3fn __nv_cvt_bfloat16raw2_to_fp8x2 SATFINITE + NaN fix-up", 1, 0, 0, 0, 0},
    {"bfloat16x2 -> e5m2 __nv_cvt_bfloat16raw2_to_fp8x2 SATFINITE + NaN fix-up", 1, 0, 0, 0, 0},
    {"4 x float32 -> e4m3fn saturate, fp8q_hardware_encode4", 1, 0, 0, 0, 0},
    {"4 x float32 -> e5m2 saturate, fp8q_hardware_encode4", 1, 0, 0, 0, 0},
    {"x / s -> e4m3fn saturate, fp8q_quotient_codes4 (raw hardware encode)", 1, 0, 0, 0, 0},
    {"x / s -> e5m2 saturate, fp8q_quotient_codes4 (raw hardware encode)", 1, 0, 0, 0, 0},
    {"x / s -> e4m3fn saturate, fp8q_quotient_codes4 (codec encode)", 1, 0, 0, 0, 0},
    {"x / s -> e5m2 saturate, fp8q_quotient_codes4 (codec encode)", 1, 0, 0, 0, 0},
    {"4 x e4m3fn -> float16, fp8q_decode4_to_float16 (value; NaN as NaN)", 1, 0, 0, 0, 0},
    {"4 x e5m2 -> float16, fp8q_decode4_to_float16 (value; NaN as NaN)", 1, 0, 0, 0, 0},
    {"4 x float32 -> float16, float_store4 paired conversions (not NaN)", 1, 0, 0, 0, 0},
    {"4 x float32 -> bfloat16, float_store4 paired conversions (not NaN)", 1, 0, 0, 0, 0},
};

/* The codec's saturating code of `value` (E4M3FN or E5M2). */
static unsigned codec(float value, int e4m3)
{
    return e4m3 ? fp8q_encode_e4m3fn(value, 1) : fp8q_encode_e5m2(value, 1);
}

/* Byte k of fp8q_hardware_encode4 against the codec of value[k]. */
static void check_encode4(const float value[4], uint32_t input)
{
    const uint32_t e4m3 = fp8q_hardware_encode4<true>(value);
    const uint32_t e5m2 = fp8q_hardware_encode4<false>(value);
    int k;
    for (k = 0; k < 4; k++) {
        record(checks[ENCODE4_E4M3], input, (e4m3 >> (8 * k)) & 0xFFu, codec(value[k], 1));
        record(checks[ENCODE4_E5M2], input, (e5m2 >> (8 * k)) & 0xFFu, codec(value[k], 0));
    }
}

/* Each lane of elements.cuh's float_store4 through the paired float16 /
 * bfloat16 conversions (the sm_80+ route) against the codec's store, for
 * values that are not NaN (the straight casts store no NaN that way). */
static void check_store4(const float value[4], uint32_t input)
{
    uint16_t half[4], brain[4];
    int k;
    if (value[0] != value[0] || value[2] != value[2]) {
        return;
    }
    float_store4<FP8Q_FLOAT16, true>()(value, half);
    float_store4<FP8Q_BFLOAT16, true>()(value, brain);
    for (k = 0; k < 4; k++) {
        record(checks[STORE4_FLOAT16], input, half[k], fp8q_encode_float16(value[k]));
        record(checks[STORE4_BFLOAT16], input, brain[k], fp8q_encode_bfloat16(value[k]));
    }
}

static void check_float(uint32_t bits)
{
    static float previous = 1.0f;
    const float x = fp8q_bits_to_float(bits);
    const float four[4] = {x, -x, previous, -previous};
    check_encode4(four, bits);
    check_store4(four, bits);
    previous = x;
    record(checks[E4M3_SAT], bits, fp8q_hardware_encode_e4m3fn(x), fp8q_encode_e4m3fn(x, 1));
    record(checks[E5M2_SAT], bits, fp8q_hardware_encode_e5m2(x), fp8q_encode_e5m2(x, 1));
    record(checks[E4M3_SAT_RAW], bits, __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3),
           fp8q_encode_e4m3fn(x, 1));
    record(checks[E5M2_SAT_RAW], bits, __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2),
           fp8q_encode_e5m2(x, 1));
    record(checks[E4M3_NOSAT], bits, __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3),
           fp8q_encode_e4m3fn(x, 0));
    record(checks[E5M2_NOSAT], bits, __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2),
           fp8q_encode_e5m2(x, 0));
}

/* Both lanes of a pair conversion of the 16-bit pattern `code` (as the low
 * lane) and its negation (the high lane), with the NaN fix-up. */
static void check_pair(check &c, uint16_t code, unsigned pair, float value_low,
                       float value_high, uint32_t nan_code, int e4m3)
{
    const unsigned low = fp8q_fix_nan((uint8_t)(pair & 0xFFu), value_low, nan_code);
    const unsigned high = fp8q_fix_nan((uint8_t)(pair >> 8), value_high, nan_code);
    record(c, code, low, e4m3 ? fp8q_encode_e4m3fn(value_low, 1) : fp8q_encode_e5m2(value_low, 1));
    record(c, code ^ 0x8000u, high,
           e4m3 ? fp8q_encode_e4m3fn(value_high, 1) : fp8q_encode_e5m2(value_high, 1));
}

static void check_16_bit(uint16_t code)
{
    const uint16_t negated = (uint16_t)(code ^ 0x8000u);
    __half2_raw half2;
    __nv_bfloat162_raw bfloat2;
    half2.x = code;
    half2.y = negated;
    bfloat2.x = code;
    bfloat2.y = negated;
    const float h_low = fp8q_decode_float16(code), h_high = fp8q_decode_float16(negated);
    const float b_low = fp8q_decode_bfloat16(code), b_high = fp8q_decode_bfloat16(negated);
    check_pair(checks[HALF2_E4M3], code,
               __nv_cvt_halfraw2_to_fp8x2(half2, __NV_SATFINITE, __NV_E4M3), h_low, h_high, 0x7Fu, 1);
    check_pair(checks[HALF2_E5M2], code,
               __nv_cvt_halfraw2_to_fp8x2(half2, __NV_SATFINITE, __NV_E5M2), h_low, h_high, 0x7Eu, 0);
    check_pair(checks[BF162_E4M3], code,
               __nv_cvt_bfloat16raw2_to_fp8x2(bfloat2, __NV_SATFINITE, __NV_E4M3), b_low, b_high, 0x7Fu, 1);
    check_pair(checks[BF162_E5M2], code,
               __nv_cvt_bfloat16raw2_to_fp8x2(bfloat2, __NV_SATFINITE, __NV_E5M2), b_low, b_high, 0x7Eu, 0);
    /* The kernels' own path: exact decode to float32, then the encode. */
    check_float(fp8q_float_to_bits(h_low));
    check_float((uint32_t)code << 16);
}

/* fp8q_decode4_to_float16 on every code in every lane (the other lanes
 * hold other codes), against the codec's decode: the same float32 bits, or
 * both NaN. Recorded as the input code and 1 (right) or 0 (wrong). */
static void check_decode4(void)
{
    unsigned code, lane;
    int e4m3;
    for (e4m3 = 0; e4m3 < 2; e4m3++) {
        for (code = 0; code < 256; code++) {
            for (lane = 0; lane < 4; lane++) {
                const uint32_t word = (0x5A3C91E7u & ~(0xFFu << (8 * lane))) | code << (8 * lane);
                uint32_t pairs[2];
                if (e4m3) {
                    fp8q_decode4_to_float16<true>(word, pairs);
                }
                else {
                    fp8q_decode4_to_float16<false>(word, pairs);
                }
                const float got =
                    fp8q_decode_float16((uint16_t)(pairs[lane / 2] >> (16 * (lane % 2))));
                const float expected = e4m3 ? fp8q_decode_e4m3fn((uint8_t)code)
                                            : fp8q_decode_e5m2((uint8_t)code);
                const int right = got != got ? expected != expected
                                             : fp8q_float_to_bits(got) ==
                                                   fp8q_float_to_bits(expected);
                record(checks[e4m3 ? DECODE4_E4M3 : DECODE4_E5M2], code, (unsigned)right, 1u);
            }
        }
    }
}

/* ------------------------------------------------------------------------- */
/* The quotient shortcut                                                     */

static uint64_t quotients, shortcut_declined;

static uint32_t codec4(const float value[4], int e4m3)
{
    uint32_t codes = 0;
    int k;
    for (k = 0; k < 4; k++) {
        codes |= (uint32_t)codec(value[k], e4m3) << (8 * k);
    }
    return codes;
}

/* x[0..3] / s through fp8q_quotient_codes4 with both encodes, against the
 * codec of the correctly rounded quotient (with the NaN rule of
 * fp8q_scaling_result), as the kernels' exact path computes it. */
static void check_quotients(const float x[4], float s)
{
    float reciprocal, quotient[4];
    uint32_t got;
    int k, e4m3;
    const int usage = fp8q_quotient_reciprocal(s, &reciprocal);
    if (usage == FP8Q_RECIPROCAL_UNUSABLE) {
        return; /* the kernels divide exactly for this scale */
    }
    for (k = 0; k < 4; k++) {
        quotient[k] = fp8q_scaling_result(x[k] / s, x[k], s);
    }
    for (e4m3 = 0; e4m3 < 2; e4m3++) {
        const uint32_t expected = codec4(quotient, e4m3);
        quotients += 4;
        if (e4m3 ? fp8q_quotient_codes4<true>(x, reciprocal, usage,
                                              fp8q_hardware_encode4_raw<true>, &got)
                 : fp8q_quotient_codes4<false>(x, reciprocal, usage,
                                               fp8q_hardware_encode4_raw<false>, &got)) {
            record(checks[e4m3 ? QUOTIENT_E4M3 : QUOTIENT_E5M2], fp8q_float_to_bits(x[0]), got,
                   expected);
        }
        else {
            shortcut_declined += 4;
        }
        struct codec_encode {
            int e4m3;
            uint32_t operator()(const float value[4]) const { return codec4(value, e4m3); }
        } through_codec = {e4m3};
        if (e4m3 ? fp8q_quotient_codes4<true>(x, reciprocal, usage, through_codec, &got)
                 : fp8q_quotient_codes4<false>(x, reciprocal, usage, through_codec, &got)) {
            record(checks[e4m3 ? QUOTIENT_CODEC_E4M3 : QUOTIENT_CODEC_E5M2],
                   fp8q_float_to_bits(x[0]), got, expected);
        }
    }
}

/* Reproducible random bits (tests/host_random.h). */
static host_random generator = {0x9E3779B97F4A7C15ull};
static uint32_t random_bits(void)
{
    return generator.next();
}

/* Every positive FP8 value of both formats and the midpoints between
 * neighbours (the rounding boundaries), ending past the largest value. */
static size_t boundaries(float *out)
{
    size_t n = 0;
    unsigned code;
    int e4m3;
    for (e4m3 = 0; e4m3 < 2; e4m3++) {
        const unsigned largest = e4m3 ? 0x7Eu : 0x7Bu;
        for (code = 0; code <= largest; code++) {
            const float value = e4m3 ? fp8q_decode_e4m3fn((uint8_t)code)
                                     : fp8q_decode_e5m2((uint8_t)code);
            const float next = code < largest ? (e4m3 ? fp8q_decode_e4m3fn((uint8_t)(code + 1))
                                                      : fp8q_decode_e5m2((uint8_t)(code + 1)))
                                              : 2.0f * value;
            out[n++] = value;
            out[n++] = (value + next) / 2.0f;
        }
    }
    return n;
}

static void check_quotient_shortcut(void)
{
    static float boundary[2 * 2 * 128];
    const size_t n_boundaries = boundaries(boundary);
    static const float specials[] = {0.0f, -0.0f, 1.0f, 1e-30f, 1e30f, 3.0e38f,
                                     fp8q_bits_to_float(0x7F800000u),
                                     fp8q_bits_to_float(0xFF800000u),
                                     fp8q_bits_to_float(0x7FC00001u),
                                     fp8q_bits_to_float(0xFFC00000u),
                                     fp8q_bits_to_float(0x00000001u),
                                     fp8q_bits_to_float(0x807FFFFFu)};
    float x[4];
    int filled = 0, scale_index, step;
    size_t i;
    for (scale_index = 0; scale_index < 2000; scale_index++) {
        float s;
        if (scale_index < 256) { /* every power of two, and its negation */
            s = fp8q_bits_to_float(((uint32_t)scale_index << 23) | (scale_index & 1u) << 31);
        }
        else if (scale_index < 300) { /* subnormal, huge, non-numbers, zero, ... */
            static const uint32_t odd[] = {0x00000001u, 0x007FFFFFu, 0x00800000u, 0x00800001u,
                                           0x7F7FFFFFu, 0x7F000000u, 0x7E800001u, 0x7F800000u,
                                           0x7FC00000u, 0x00000000u, 0x80000000u, 0x3F800001u,
                                           0x3F7FFFFFu, 0x3FFFFFFFu, 0x3BFFFFFFu,
                                           /* few significand bits: not
                                              powers of two, RN(1 / s) not
                                              exact */
                                           0x3FC00000u, 0x3FA00000u, 0x3EC00000u, 0x3FE00000u,
                                           0x3C23D70Au, 0x3B124925u, 0x40400000u};
            s = fp8q_bits_to_float(odd[scale_index % (sizeof odd / sizeof odd[0])] ^
                                   (scale_index & 1u) << 31);
        }
        else { /* a random significand, exponent 2^-40 .. 2^40, either sign */
            s = fp8q_bits_to_float((random_bits() & 0x807FFFFFu) |
                                   (uint32_t)(87 + random_bits() % 81) << 23);
        }
        for (i = 0; i < n_boundaries; i++) {
            const float nearest = boundary[i] * s;
            for (step = -3; step <= 3; step++) {
                uint32_t bits = fp8q_float_to_bits(nearest) + (uint32_t)step;
                x[filled++] = fp8q_bits_to_float(bits ^ (i & 1u) << 31);
                if (filled == 4) {
                    check_quotients(x, s);
                    filled = 0;
                }
            }
        }
        for (i = 0; i < 256; i++) {
            x[filled++] = i < sizeof specials / sizeof specials[0]
                              ? specials[i]
                              : fp8q_bits_to_float(random_bits());
            if (filled == 4) {
                check_quotients(x, s);
                filled = 0;
            }
        }
    }
}

int main(int argc, char **argv)
{
    static const uint32_t lows[] = {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu};
    const int all = argc > 1 && strcmp(argv[1], "all") == 0;
    uint64_t bits;
    int failed = 0;
    size_t i;

    for (bits = 0; bits < 0x10000u; bits++) {
        check_16_bit((uint16_t)bits);
    }
    if (all) {
        for (bits = 0; bits <= 0xFFFFFFFFu; bits++) {
            check_float((uint32_t)bits);
        }
    }
    else {
        for (bits = 0; bits < 0x10000u; bits++) {
            for (i = 0; i < sizeof lows / sizeof lows[0]; i++) {
                check_float((uint32_t)(bits << 16) | lows[i]);
            }
        }
    }
    /* float16's rounding point is bit 13: its ties and their neighbours,
     * both parities of the kept bit, under every top half. */
    for (bits = 0; bits < 0x10000u; bits++) {
        static const uint32_t float16_lows[] = {0x0FFFu, 0x1000u, 0x1001u};
        uint32_t kept;
        for (kept = 0; kept < 8; kept++) {
            for (i = 0; i < 3; i++) {
                const float x = fp8q_bits_to_float((uint32_t)(bits << 16) | kept << 13 |
                                                   float16_lows[i]);
                const float four[4] = {x, -x, x, x};
                check_store4(four, fp8q_float_to_bits(x));
            }
        }
    }
    check_quotient_shortcut();
    check_decode4();
    for (i = 0; i < CHECKS; i++) {
        const check &c = checks[i];
        printf("%s %s: %llu mismatches", c.required ? "MUST" : "INFO", c.name,
               (unsigned long long)c.mismatches);
        if (c.mismatches != 0) {
            printf(" (first: input 0x%08X gives 0x%02X, codec 0x%02X)", c.first_input,
                   c.first_got, c.first_expected);
        }
        printf("\n");
        failed |= c.required && c.mismatches != 0;
    }
    printf("inputs: every float16 / bfloat16 pattern and %s\n",
           all ? "every float32" : "float32 around every rounding boundary");
    printf("quotients: %llu, of which the shortcut declined %llu (the kernels divide those)\n",
           (unsigned long long)quotients, (unsigned long long)shortcut_declined);
    return failed;
}
