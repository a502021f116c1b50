/*
 * convert_avx2.c - the store loops of core/convert_loops.h compiled for AVX2.
 *
 * The build compiles this one file with -mavx2 (gcc, clang) or /arch:AVX2
 * (MSVC) on x86-64, so the branch-free codec loops run 8 lanes wide;
 * convert.c calls in here only when fp8q_cpu_has_avx2() says the processor
 * and the OS support AVX2. On other processors it is built like any other
 * file and never called. Results are identical to the baseline loops.
 */
#include "core/convert_loops.h"

void fp8q_store_float32_avx2(fp8q_dtype dtype, const float *values,
                             char *destination, int64_t byte_stride,
                             int64_t count, int saturate)
{
    store_float32_loops(dtype, values, destination, byte_stride, count,
                        saturate);
}
