/*
 * epilogue.cuh - launch contract of the matrix-multiply epilogue kernel
 * (kernels/epilogue.cu): what fp8q.scaled_mm does to the float32 sums of a
 * product on the GPU, exactly as csrc/core/scaled_mm.c and the binding do
 * on the CPU.
 *
 * Plain C as well as CUDA C++ (the host side includes it).
 *
 * Kernel "fp8q_scaled_mm_epilogue" (FP8Q_EPILOGUE_KERNEL):
 *     __global__ void fp8q_scaled_mm_epilogue(const fp8q_epilogue_args args);
 *   For every (i, j) of the m x n row-major product P:
 *     v = float32(double(P[i, j]) * a_i * b_j + bias_j)   (in double, in
 *         that order; a_i = scale_a[i * scale_a_stride], 1 when scale_a is
 *         NULL; b_j likewise; bias_j 0 when bias is NULL)
 *     *amax_bits raised (atomicMax) to the bits of |v| (NaN wins), when
 *         amax_bits is not NULL (the host sets it first)
 *     destination[i, j] = store(v / scale_result) when divide is nonzero
 *         (an FP8 destination; a NaN v stays itself), else store(v); store
 *         saturates FP8.
 *   grid: any size >= 1 (grid-stride loop); block a multiple of 32, at most
 *   1024; no dynamic shared memory. Pointers are device pointers; a float32
 *   destination may be product itself (each element is read, then written,
 *   by one thread).
 */
#ifndef FP8Q_KERNELS_EPILOGUE_CUH
#define FP8Q_KERNELS_EPILOGUE_CUH

#include <stdint.h>

#define FP8Q_EPILOGUE_KERNEL "fp8q_scaled_mm_epilogue"

/* This file's kernels, X(fp8q_cuda_kernel value, name in the image)
 * each: csrc/registries.py collects every header's list into
 * cuda/kernel_list.h's FP8Q_CUDA_KERNEL_LIST. */
#define FP8Q_EPILOGUE_KERNELS(X)                  \
    X(FP8Q_KERNEL_EPILOGUE, FP8Q_EPILOGUE_KERNEL)

/* 96 bytes (4 of them tail padding). */
typedef struct fp8q_epilogue_args {
    const float *product;       /* m * n float32                       */
    void *destination;          /* m * n of destination_dtype          */
    const float *scale_a;       /* NULL or float32, see above          */
    const float *scale_b;       /* NULL or float32                     */
    const float *bias;          /* NULL or n float32                   */
    uint32_t *amax_bits;        /* NULL or one uint32                  */
    int64_t m;                  /* >= 0                                */
    int64_t n;                  /* >= 0                                */
    int64_t scale_a_stride;     /* 0 (one value) or 1                  */
    int64_t scale_b_stride;     /* 0 or 1                              */
    int32_t destination_dtype;  /* float32, float16, bfloat16 or FP8   */
    float scale_result;         /* > 0; used when divide is nonzero    */
    int32_t divide;             /* nonzero: divide by scale_result     */
} fp8q_epilogue_args;

#endif /* FP8Q_KERNELS_EPILOGUE_CUH */
