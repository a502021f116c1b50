/*
 * gather.cuh - launch contract of the gather kernel (kernels/gather.cu):
 * the elements of a strided N-d view copied, bits unchanged, into a
 * C-contiguous run, in C order. It makes contiguous copies of CUDA tensors
 * (Tensor.contiguous(), transposed operands, strided inputs of operations)
 * without a trip through host memory.
 *
 * Plain C as well as CUDA C++ (the host side includes it).
 *
 * Kernel "fp8q_gather" (FP8Q_GATHER_KERNEL):
 *     __global__ void fp8q_gather(const fp8q_gather_args args);
 *   destination[i] = the element at C-order index i of the view (source,
 *   shape, strides in elements, any sign), for i in [0, count), count being
 *   the product of the extents. grid: any size >= 1 (grid-stride loop);
 *   block a multiple of 32, at most 1024; no dynamic shared memory. source
 *   and destination must not overlap.
 */
#ifndef FP8Q_KERNELS_GATHER_CUH
#define FP8Q_KERNELS_GATHER_CUH

#include <stdint.h>

#define FP8Q_GATHER_KERNEL "fp8q_gather"

/* This file's kernels, X(fp8q_cuda_kernel value, name in the image)
 * each: csrc/registries.py collects every header's list into
 * cuda/kernel_list.h's FP8Q_CUDA_KERNEL_LIST. */
#define FP8Q_GATHER_KERNELS(X)                \
    X(FP8Q_KERNEL_GATHER, FP8Q_GATHER_KERNEL)

#define FP8Q_GATHER_MAX_DIMS 16

/* 288 bytes, no padding. */
typedef struct fp8q_gather_args {
    const void *source;                   /* element (0, ..., 0)         */
    void *destination;                    /* count elements, contiguous  */
    int64_t count;                        /* >= 0                        */
    int64_t shape[FP8Q_GATHER_MAX_DIMS];   /* the first ndim used         */
    int64_t strides[FP8Q_GATHER_MAX_DIMS]; /* in elements                 */
    int32_t ndim;                         /* 0 to FP8Q_GATHER_MAX_DIMS   */
    int32_t element_size;                 /* 1, 2 or 4 bytes             */
} fp8q_gather_args;

#endif /* FP8Q_KERNELS_GATHER_CUH */
