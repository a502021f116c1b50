/*
 * test_status.c - numbers in messages (fp8q_number) read the same with every
 * C runtime: "nan", "-nan", "inf" and "-inf" by the sign bit, printf's "%g"
 * otherwise; and the core's messages about non-finite values are written
 * with it, for a negative NaN (what 0/0 gives on x86) too. Run natively and
 * under Wine, whose C runtimes print a negative NaN as "-nan(ind)" (UCRT)
 * or "nan" (msvcrt).
 */
#include <float.h>
#include <stdint.h>
#include <string.h>

#include "core/histogram.h"
#include "core/histogram_threshold.h"
#include "core/quantize.h"
#include "core/status.h"
#include "harness.h"
#include "helpers.h"

static double double_from_bits(uint64_t bits)
{
    double value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static float float_from_bits(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* `actual` (which may be NULL) is exactly `expected`. */
static int text_is(const char *actual, const char *expected)
{
    return actual != NULL && strcmp(actual, expected) == 0;
}

/* fp8q_number of the double with these bits is exactly `expected`. */
static int bits_read_as(uint64_t bits, const char *expected)
{
    return text_is(fp8q_number(double_from_bits(bits)).text, expected);
}

void test_number_text(void)
{
    /* x86's default NaN (0/0), quiet and signalling NaNs of both signs. */
    CHECK(bits_read_as(UINT64_C(0xFFF8000000000000), "-nan"));
    CHECK(bits_read_as(UINT64_C(0x7FF8000000000000), "nan"));
    CHECK(bits_read_as(UINT64_C(0xFFF0000000000001), "-nan"));
    CHECK(bits_read_as(UINT64_C(0x7FF0000000000001), "nan"));
    CHECK(bits_read_as(UINT64_C(0x7FF0000000000000), "inf"));
    CHECK(bits_read_as(UINT64_C(0xFFF0000000000000), "-inf"));
    /* A float32 NaN widened to double keeps its sign. */
    CHECK(text_is(fp8q_number((double)float_from_bits(0xFFC00000u)).text,
                  "-nan"));
    /* Finite values: printf's %g. */
    CHECK(text_is(fp8q_number(1.5).text, "1.5"));
    CHECK(text_is(fp8q_number(-0.0).text, "-0"));
    CHECK(text_is(fp8q_number(448.0).text, "448"));
    CHECK(text_is(fp8q_number(1e30).text, "1e+30"));
    CHECK(text_is(fp8q_number(-DBL_MAX).text, "-1.79769e+308"));
    CHECK(text_is(fp8q_number(DBL_TRUE_MIN).text, "4.94066e-324"));
}

void test_messages_with_non_finite_values(void)
{
    float scales[3] = {1.0f, 0.0f, 2.0f};
    int64_t counts[8];
    const int64_t shape[1] = {3};
    fp8q_view scale_view = make_view(scales, FP8Q_FLOAT32, 1, shape, NULL);
    fp8q_histogram histogram;
    fp8q_error error;
    float amax;

    scales[1] = float_from_bits(0xFFC00000u);
    CHECK_ERROR(fp8q_check_scale_values(&scale_view, "scale", &error), &error,
                FP8Q_ERROR_VALUE, "scale: ", NULL, NULL);
    CHECK(text_is(strstr(error.message, "element 1"),
                  "element 1 (C order) is -nan"));

    fp8q_histogram_init(&histogram, 8, counts);
    CHECK_ERROR(fp8q_threshold_percentile(
                    &histogram, double_from_bits(UINT64_C(0xFFF8000000000000)),
                    &amax, &error),
                &error, FP8Q_ERROR_VALUE, NULL, NULL, NULL);
    CHECK(text_is(error.message,
                  "percentile: expected a value in (0, 100], got -nan"));
    CHECK_ERROR(fp8q_histogram_cover(&histogram,
                                     float_from_bits(0xFF800000u), &error),
                &error, FP8Q_ERROR_VALUE, NULL, NULL, NULL);
    CHECK(text_is(error.message,
                  "amax: expected a finite value >= 0, got -inf"));
}
