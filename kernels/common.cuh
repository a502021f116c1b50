/*
 * common.cuh - device-only helpers shared by every kernel family:
 * grid-stride indices and a block-wide maximum, over the host-and-device
 * element conversions of elements.cuh (which it includes, with the
 * runtime dtype dispatch).
 *
 * Device code only; included by the family .cu files, which the build's
 * generated fp8q_kernels.cu includes (csrc/registries.py).
 */
#ifndef FP8Q_KERNELS_COMMON_CUH
#define FP8Q_KERNELS_COMMON_CUH

#include <stdint.h>

#include "elements.cuh"

/* The largest block any kernel accepts: block_max_bits keeps one slot per
 * warp in shared memory. */
#define FP8Q_MAX_BLOCK_THREADS 1024
#define FP8Q_WARP_SIZE 32

/* ------------------------------------------------------------------------- */
/* Runtime dispatch                                                          */

/* What the dispatchers below hand their function: the dtype, or the
 * element type, as a compile-time constant (decltype(tag)::value,
 * typename decltype(tag)::type), so that a kernel's entry point is one
 * generic lambda: [&](auto source) { run<decltype(source)::value>(args); }. */
template <int D> struct dtype_constant {
    static constexpr int value = D;
};
template <typename T> struct element_type {
    typedef T type;
};

/* dispatch_dtype's body for a function of a dtype_constant. */
template <typename Function> struct dtype_function_body {
    Function &function;
    template <int D> __device__ __forceinline__ void run() { function(dtype_constant<D>()); }
};

/* Calls function(dtype_constant<D>()) for D the runtime dtype (through
 * dispatch_dtype); an unknown dtype does nothing. */
template <typename Function>
__device__ __forceinline__ void call_for_dtype(int dtype, Function function)
{
    dtype_function_body<Function> body = {function};
    dispatch_dtype(dtype, body);
}

/* call_for_dtype restricted to the float dtypes (float32, float16,
 * bfloat16) of activations; any other dtype does nothing. */
template <typename Function>
__device__ __forceinline__ void call_for_float_dtype(int dtype, Function function)
{
    switch (dtype) {
    case FP8Q_FLOAT32: function(dtype_constant<FP8Q_FLOAT32>()); break;
    case FP8Q_FLOAT16: function(dtype_constant<FP8Q_FLOAT16>()); break;
    case FP8Q_BFLOAT16: function(dtype_constant<FP8Q_BFLOAT16>()); break;
    default: break;
    }
}

/* Calls function(element_type<T>()) for T the unsigned integer of
 * `element_size` bytes: uint8_t for 1, uint16_t for 2, uint32_t for any
 * other (the host passes 1, 2 or 4): the kernels that only move elements. */
template <typename Function>
__device__ __forceinline__ void call_for_element_size(int element_size, Function function)
{
    if (element_size == 1) {
        function(element_type<uint8_t>());
    }
    else if (element_size == 2) {
        function(element_type<uint16_t>());
    }
    else {
        function(element_type<uint32_t>());
    }
}

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

/* Raises *target (atomicMax, from thread 0) to the maximum of `bits` over
 * the block; every thread of the block must call it (block_max_bits). */
static __device__ __forceinline__ void block_raise_max_bits(uint32_t *target, uint32_t bits)
{
    bits = block_max_bits(bits);
    if (threadIdx.x == 0) {
        atomicMax(target, bits);
    }
}

#endif /* FP8Q_KERNELS_COMMON_CUH */
