/*
 * pad.cuh - launch contract of the pad kernel (kernels/pad.cu): a
 * C-contiguous matrix of 1-, 2- or 4-byte elements copied, bits unchanged,
 * into a C-contiguous matrix of another shape: the part both cover copied,
 * the rest of the destination zeros, the rest of the source left out.
 * scaled_mm uses it to pad FP8 operands to cuBLASLt's alignment (zeros
 * along K leave every dot product unchanged) and to crop a padded product
 * back to its real columns.
 *
 * Plain C as well as CUDA C++ (the host side includes it).
 *
 * Kernel "fp8q_pad" (FP8Q_PAD_KERNEL):
 *     __global__ void fp8q_pad(const fp8q_pad_args args);
 *   destination[r * cols + c] = r < source_rows && c < source_cols
 *       ? source[r * source_cols + c] : 0
 *   for every r < rows, c < cols. grid: any size >= 1 (grid-stride loop);
 *   block a multiple of 32, at most 1024; no dynamic shared memory. source
 *   and destination must not overlap.
 */
#ifndef FP8Q_KERNELS_PAD_CUH
#define FP8Q_KERNELS_PAD_CUH

#include <stdint.h>

#define FP8Q_PAD_KERNEL "fp8q_pad"

/* This file's kernels, X(fp8q_cuda_kernel value, name in the image)
 * each: csrc/registries.py collects every header's list into
 * cuda/kernel_list.h's FP8Q_CUDA_KERNEL_LIST. */
#define FP8Q_PAD_KERNELS(X)             \
    X(FP8Q_KERNEL_PAD, FP8Q_PAD_KERNEL)

/* 56 bytes (4 of them tail padding). */
typedef struct fp8q_pad_args {
    const void *source;    /* source_rows * source_cols elements          */
    void *destination;     /* rows * cols elements                        */
    int64_t source_rows;   /* >= 0                                        */
    int64_t source_cols;   /* >= 0                                        */
    int64_t rows;          /* >= 0                                        */
    int64_t cols;          /* >= 0                                        */
    int32_t element_size;  /* 1, 2 or 4 bytes                             */
} fp8q_pad_args;

#endif /* FP8Q_KERNELS_PAD_CUH */
