/*
 * test_fast_divide.c - fp8q_fast_divide (the kernels' index division,
 * core/fast_divide.h) against the / operator: every small divisor and
 * dividend, powers of two and their neighbours, quotient boundaries, and
 * random 63-bit operands.
 */
#include <stdint.h>

#include "core/fast_divide.h"
#include "harness.h"

#define MAX_DIVIDEND (((uint64_t)1 << 63) - 1u)

/* n / d for n at and around multiples of d (q d - 1, q d, q d + d - 1). */
static int check_around(uint64_t d, uint64_t q)
{
    const fp8q_fast_divisor divisor = fp8q_fast_divisor_make(d);
    const uint64_t n = q * d;
    int passed = 1;
    if (q > MAX_DIVIDEND / d) {
        return 1;
    }
    passed &= CHECK(fp8q_fast_divide(n, divisor) == q);
    passed &= CHECK(n == 0 || fp8q_fast_divide(n - 1u, divisor) == q - 1u);
    passed &= CHECK(n > MAX_DIVIDEND - (d - 1u) ||
                    fp8q_fast_divide(n + d - 1u, divisor) == q);
    return passed;
}

void test_fast_divide(void)
{
    uint64_t d, n;
    int k, i;

    for (d = 1; d <= 300; d++) {
        const fp8q_fast_divisor divisor = fp8q_fast_divisor_make(d);
        for (n = 0; n <= 5000; n++) {
            if (fp8q_fast_divide(n, divisor) != n / d) {
                CHECK_INT(fp8q_fast_divide(n, divisor), n / d);
                return;
            }
        }
        CHECK(fp8q_fast_divide(MAX_DIVIDEND, divisor) == MAX_DIVIDEND / d);
    }
    for (k = 0; k < 63; k++) {
        const uint64_t power = (uint64_t)1 << k;
        for (d = power > 1u ? power - 1u : power; d <= power + 1u; d++) {
            if (d == 0 || d > MAX_DIVIDEND) {
                continue;
            }
            CHECK(fp8q_fast_divide(MAX_DIVIDEND, fp8q_fast_divisor_make(d)) ==
                  MAX_DIVIDEND / d);
            check_around(d, 1u);
            check_around(d, 3u);
            check_around(d, MAX_DIVIDEND / d);
        }
    }
    for (i = 0; i < 200000; i++) {
        /* Divisors of every size, dividends of every size. */
        const int d_bits = 1 + (int)harness_random_below(62);
        const int n_bits = 1 + (int)harness_random_below(63);
        d = harness_random() >> (64 - d_bits);
        n = harness_random() >> (64 - n_bits);
        if (d == 0) {
            d = 1;
        }
        if (fp8q_fast_divide(n, fp8q_fast_divisor_make(d)) != n / d) {
            CHECK_INT(fp8q_fast_divide(n, fp8q_fast_divisor_make(d)), n / d);
            return;
        }
        if (!check_around(d, n / d)) {
            return;
        }
    }
}
