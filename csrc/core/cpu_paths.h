/*
 * cpu_paths.h - which of the core's x86 instruction-set variants run in this
 * process, and for each processor feature they need, whether fp8q uses it
 * or why not (what `python -m fp8q info` reports).
 *
 * Two files are compiled for newer instruction sets and run only where
 * platform.h says the processor and the OS support them: convert_avx2.c,
 * the conversions (the store loops of casts, quantize and dequantize, and
 * the FP8 decoder), with AVX2 and F16C; scaled_mm_avx2.c, scaled_mm's
 * products, with AVX2, FMA and F16C.
 */
#ifndef FP8Q_CORE_CPU_PATHS_H
#define FP8Q_CORE_CPU_PATHS_H

#include "platform.h"

#define FP8Q_CPU_USE_TEXT_SIZE 128

/* How fp8q uses one processor feature. */
typedef struct fp8q_cpu_feature_use {
    int used; /* nonzero when code compiled for the feature runs */
    /* Where used: the variants that use it, e.g. "conversions, scaled_mm".
     * Otherwise why not: the feature's own fp8q_cpu_support_text; "needs
     * <feature>: <its support text>" when a feature it runs with is
     * missing; or "switched off (fp8q_convert_allow_avx2(0))". */
    char text[FP8Q_CPU_USE_TEXT_SIZE];
} fp8q_cpu_feature_use;

/* How fp8q uses `feature` now (the switch of fp8q_convert_allow_avx2
 * included). */
void fp8q_cpu_feature_use_of(fp8q_cpu_feature feature,
                             fp8q_cpu_feature_use *use);

#endif /* FP8Q_CORE_CPU_PATHS_H */
