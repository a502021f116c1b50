/*
 * scale.cuh - launch contract of the scales-from-amax kernel
 * (kernels/scale.cu): turns a buffer of group amaxes into the groups'
 * dequantization scales in place, with csrc/core/scale_formula.h.
 *
 * Plain C as well as CUDA C++ (the host side includes it for the argument
 * struct and the kernel's name).
 *
 * Kernel "fp8q_scales_from_amax" (FP8Q_SCALES_FROM_AMAX_KERNEL):
 *     __global__ void fp8q_scales_from_amax(const fp8q_scales_from_amax_args args);
 *   For i in [0, count): values[i] = fp8q_scale_from_amax(values[i], max,
 *   power_of_2). grid: any size >= 1 (grid-stride loop); block a multiple of
 *   32, at most 1024; no dynamic shared memory.
 */
#ifndef FP8Q_KERNELS_SCALE_CUH
#define FP8Q_KERNELS_SCALE_CUH

#include <stdint.h>

#define FP8Q_SCALES_FROM_AMAX_KERNEL "fp8q_scales_from_amax"

/* This file's kernels, X(fp8q_cuda_kernel value, name in the image)
 * each: csrc/registries.py collects every header's list into
 * cuda/kernel_list.h's FP8Q_CUDA_KERNEL_LIST. */
#define FP8Q_SCALE_KERNELS(X)                                     \
    X(FP8Q_KERNEL_SCALES_FROM_AMAX, FP8Q_SCALES_FROM_AMAX_KERNEL)

/* 24 bytes, no padding. */
typedef struct fp8q_scales_from_amax_args {
    float *values;      /* count float32: amax in, scale out             */
    int64_t count;      /* >= 0                                          */
    float max;          /* the format's largest finite value (margin applied) */
    int32_t power_of_2; /* nonzero: round each scale up to a power of two */
} fp8q_scales_from_amax_args;

#endif /* FP8Q_KERNELS_SCALE_CUH */
