/*
 * common.cuh - device-only helpers shared by every kernel family:
 * grid-stride indices and a block-wide maximum, over the host-and-device
 * element conversions of elements.cuh (which it includes, with the
 * runtime dtype dispatch).
 *
 * Device code only; included by the family .cu files through
 * fp8q_kernels.cu.
 */
#ifndef FP8Q_KERNELS_COMMON_CUH
#define FP8Q_KERNELS_COMMON_CUH

#include <stdint.h>

#include "elements.cuh"

/* The largest block any kernel accepts: block_max_bits keeps one slot per
 * warp in shared memory. */
#define FP8Q_MAX_BLOCK_THREADS 1024
#define FP8Q_WARP_SIZE 32

/* data[index] of float dtype `dtype` (float32, float16 or bfloat16) as
 * float32: for operands, such as a bias, whose dtype is a launch argument
 * beside a kernel's templated ones. */
static __device__ __forceinline__ float float_element(const void *data, int64_t index, int dtype)
{
    switch (dtype) {
    case FP8Q_FLOAT16: return dtype_traits<FP8Q_FLOAT16>::load(((const uint16_t *)data)[index]);
    case FP8Q_BFLOAT16: return dtype_traits<FP8Q_BFLOAT16>::load(((const uint16_t *)data)[index]);
    default: return ((const float *)data)[index];
    }
}

/* ------------------------------------------------------------------------- */
/* Indices                                                                   */

static __device__ __forceinline__ int64_t global_thread_index(void)
{
    return (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
}

static __device__ __forceinline__ int64_t global_thread_count(void)
{
    return (int64_t)gridDim.x * blockDim.x;
}

/* The maximum of `bits` over the block, valid in thread 0. Every thread of
 * the block must call it; blockDim.x must be a multiple of 32, at most
 * FP8Q_MAX_BLOCK_THREADS. */
static __device__ uint32_t block_max_bits(uint32_t bits)
{
    __shared__ uint32_t warp_max[FP8Q_MAX_BLOCK_THREADS / FP8Q_WARP_SIZE];
    const unsigned lane = threadIdx.x % FP8Q_WARP_SIZE;
    const unsigned warp = threadIdx.x / FP8Q_WARP_SIZE;
    int offset;

    for (offset = FP8Q_WARP_SIZE / 2; offset > 0; offset /= 2) {
        bits = max(bits, __shfl_xor_sync(0xFFFFFFFFu, bits, offset));
    }
    if (lane == 0) {
        warp_max[warp] = bits;
    }
    __syncthreads();
    if (warp == 0) {
        bits = lane < blockDim.x / FP8Q_WARP_SIZE ? warp_max[lane] : 0u;
        for (offset = FP8Q_WARP_SIZE / 2; offset > 0; offset /= 2) {
            bits = max(bits, __shfl_xor_sync(0xFFFFFFFFu, bits, offset));
        }
    }
    __syncthreads(); /* warp_max may be reused by a following call */
    return bits;
}

#endif /* FP8Q_KERNELS_COMMON_CUH */
