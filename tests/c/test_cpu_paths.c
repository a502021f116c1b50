/*
 * test_cpu_paths.c - core/cpu_paths.c: each x86 feature is used exactly
 * where every feature of a variant that needs it is supported and the AVX2
 * switch is on, and otherwise says why not.
 */
#include <string.h>

#include "core/convert.h"
#include "core/cpu_paths.h"
#include "harness.h"

static int supported(fp8q_cpu_feature feature)
{
    return fp8q_cpu_support_of(feature) == FP8Q_CPU_SUPPORTED;
}

void test_cpu_paths(void)
{
    const int conversions =
        supported(FP8Q_CPU_AVX2) && supported(FP8Q_CPU_F16C);
    const int products = conversions && supported(FP8Q_CPU_FMA);
    const char *const expected_by[FP8Q_CPU_FEATURE_COUNT] = {
        products ? "conversions, scaled_mm" : "conversions", "scaled_mm",
        products ? "conversions, scaled_mm" : "conversions"};
    const int expected_used[FP8Q_CPU_FEATURE_COUNT] = {conversions, products,
                                                       conversions};
    fp8q_cpu_feature_use use;
    int feature;
    int allow;

    for (allow = 1; allow >= 0; allow--) {
        fp8q_convert_allow_avx2(allow);
        for (feature = 0; feature < FP8Q_CPU_FEATURE_COUNT; feature++) {
            const fp8q_cpu_support support =
                fp8q_cpu_support_of((fp8q_cpu_feature)feature);
            fp8q_cpu_feature_use_of((fp8q_cpu_feature)feature, &use);
            CHECK_INT(use.used, allow && expected_used[feature]);
            if (use.used) {
                CHECK(strcmp(use.text, expected_by[feature]) == 0);
            }
            else if (support != FP8Q_CPU_SUPPORTED) {
                CHECK(strcmp(use.text, fp8q_cpu_support_text(support)) == 0);
            }
            else if (allow) {
                /* A partner feature is missing. */
                CHECK(strncmp(use.text, "needs ", 6) == 0);
            }
            else {
                CHECK(expected_used[feature] ||
                      strncmp(use.text, "needs ", 6) == 0);
                CHECK(!expected_used[feature] ||
                      strcmp(use.text,
                             "switched off (fp8q_convert_allow_avx2(0))") ==
                          0);
            }
        }
    }
    fp8q_convert_allow_avx2(1);
}
