/*
 * transpose.cuh - launch contract of the transpose kernel
 * (kernels/transpose.cu): a C-contiguous (rows, cols) matrix of 1-, 2- or
 * 4-byte elements copied, bits unchanged, into a C-contiguous (cols, rows)
 * one. quantize(..., transpose=True) uses it for the column-major operand
 * of an FP8 GEMM.
 *
 * Plain C as well as CUDA C++ (the host side includes it).
 *
 * Kernel "fp8q_transpose" (FP8Q_TRANSPOSE_KERNEL):
 *     __global__ void fp8q_transpose(const fp8q_transpose_args args);
 *   destination[c * rows + r] = source[r * cols + c] for every (r, c).
 *   block: exactly FP8Q_TRANSPOSE_THREADS threads; grid: any size >= 1
 *   (block b handles 32 x 32 tiles b, b + grid, ... in row-major order of
 *   the tiles); no dynamic shared memory. source and destination must not
 *   overlap.
 */
#ifndef FP8Q_KERNELS_TRANSPOSE_CUH
#define FP8Q_KERNELS_TRANSPOSE_CUH

#include <stdint.h>

#define FP8Q_TRANSPOSE_KERNEL "fp8q_transpose"

/* This file's kernels, X(fp8q_cuda_kernel value, name in the image)
 * each: csrc/registries.py collects every header's list into
 * cuda/kernel_list.h's FP8Q_CUDA_KERNEL_LIST. */
#define FP8Q_TRANSPOSE_KERNELS(X)                   \
    X(FP8Q_KERNEL_TRANSPOSE, FP8Q_TRANSPOSE_KERNEL)

#define FP8Q_TRANSPOSE_THREADS 256
#define FP8Q_TRANSPOSE_TILE 32

/* 40 bytes (4 of them tail padding). */
typedef struct fp8q_transpose_args {
    const void *source;   /* rows * cols elements                         */
    void *destination;    /* cols * rows elements                         */
    int64_t rows;         /* >= 0                                          */
    int64_t cols;         /* >= 0                                          */
    int32_t element_size; /* 1, 2 or 4 bytes                              */
} fp8q_transpose_args;

#endif /* FP8Q_KERNELS_TRANSPOSE_CUH */
