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
 * Prints one line per check; exits 1 when a check that must hold (the
 * saturating encodes with the NaN fix-up) does not. The other lines say
 * where the plain cuda_fp8.h conversions differ from the codec.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/float_codec.h"
#include "fp8_hardware.cuh"

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
    HALF2_E4M3, HALF2_E5M2, BF162_E4M3, BF162_E5M2, CHECKS
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
};

static void check_float(uint32_t bits)
{
    const float x = fp8q_bits_to_float(bits);
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
    return failed;
}
