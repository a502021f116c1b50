/*
 * cpu_paths.c - whether fp8q uses each x86 feature it has code for, and why
 * not (see cpu_paths.h).
 */
#include <stdio.h>
#include <string.h>

#include "core/convert.h"
#include "core/cpu_paths.h"
#include "core/scaled_mm.h"

/* An instruction-set variant of the core: its name, whether it runs now,
 * and the features it is compiled for (bit 1 << feature for each). */
typedef struct cpu_path {
    const char *name;
    int (*runs)(void);
    unsigned needs;
} cpu_path;

#define NEEDS(feature) (1u << (feature))

static const cpu_path paths[] = {
    {"conversions", fp8q_convert_uses_avx2,
     NEEDS(FP8Q_CPU_AVX2) | NEEDS(FP8Q_CPU_F16C)},
    {"scaled_mm", fp8q_scaled_mm_uses_avx2_fma,
     NEEDS(FP8Q_CPU_AVX2) | NEEDS(FP8Q_CPU_FMA) | NEEDS(FP8Q_CPU_F16C)},
};
#define N_PATHS ((int)(sizeof paths / sizeof paths[0]))

/* Appends `text` to use->text, after ", " unless it is the first. */
static void append(fp8q_cpu_feature_use *use, const char *text)
{
    const size_t length = strlen(use->text);
    (void)snprintf(use->text + length, sizeof use->text - length, "%s%s",
                   length > 0 ? ", " : "", text);
}

/* Why `path`, which needs a supported feature, does not run. */
static void explain(const cpu_path *path, fp8q_cpu_feature_use *use)
{
    int feature;
    for (feature = 0; feature < FP8Q_CPU_FEATURE_COUNT; feature++) {
        const fp8q_cpu_support support =
            fp8q_cpu_support_of((fp8q_cpu_feature)feature);
        if ((path->needs & NEEDS(feature)) != 0 &&
            support != FP8Q_CPU_SUPPORTED) {
            (void)snprintf(use->text, sizeof use->text, "needs %s: %s",
                           fp8q_cpu_feature_name((fp8q_cpu_feature)feature),
                           fp8q_cpu_support_text(support));
            return;
        }
    }
    (void)snprintf(use->text, sizeof use->text,
                   "switched off (fp8q_convert_allow_avx2(0))");
}

void fp8q_cpu_feature_use_of(fp8q_cpu_feature feature,
                             fp8q_cpu_feature_use *use)
{
    const fp8q_cpu_support support = fp8q_cpu_support_of(feature);
    const cpu_path *first = NULL;
    int i;

    use->used = 0;
    use->text[0] = '\0';
    for (i = 0; i < N_PATHS; i++) {
        if ((paths[i].needs & NEEDS(feature)) == 0) {
            continue;
        }
        if (first == NULL) {
            first = &paths[i];
        }
        if (paths[i].runs()) {
            use->used = 1;
            append(use, paths[i].name);
        }
    }
    if (use->used) {
        return;
    }
    if (support != FP8Q_CPU_SUPPORTED) {
        (void)snprintf(use->text, sizeof use->text, "%s",
                       fp8q_cpu_support_text(support));
    }
    else {
        explain(first, use);
    }
}
