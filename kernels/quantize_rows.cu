/*
 * quantize_rows.cu - one-pass per-row (per-token) dynamic quantization: a
 * block holds its row in registers, reduces the row's amax, turns it into
 * the row's scale with csrc/core/scale_formula.h and writes the FP8 codes
 * from the registers, its next row's loads in flight meanwhile (the block
 * loop: kernels/quantize_rows_loop.cuh); and fp8q_quantize_rows_warps, for
 * float16 / bfloat16 rows to saturating E4M3FN / E5M2 (the launch's
 * choice): one to eight warps hold a row, several rows a block, amax by
 * warp shuffles (the warp loop, same file). This is what quantize(granularity="row")
 * and so fp8q.linear / fp8q.torch W8A8 run per call for activations.
 * Launch contract: kernels/quantize_rows.cuh.
 */
#include "common.cuh"
#include "quantize_rows.cuh"
#include "quantize_rows_loop.cuh"

static_assert(sizeof(fp8q_quantize_rows_args) == 64,
              "fp8q_quantize_rows_args must match the host's layout");

/* The GPU's block for quantize_rows_thread. */
struct gpu_block {
    __device__ __forceinline__ int thread() const { return (int)threadIdx.x; }
    __device__ __forceinline__ int threads() const { return (int)blockDim.x; }
    __device__ __forceinline__ int64_t block() const { return blockIdx.x; }
    __device__ __forceinline__ int64_t blocks() const { return gridDim.x; }
    __device__ __forceinline__ uint32_t max_bits(uint32_t bits) const
    {
        return block_max_bits(bits);
    }
    /* The slot is written again only after the next max_bits, whose
     * barriers every thread reaches after reading it. */
    __device__ __forceinline__ float from_first_thread(float value) const
    {
        __shared__ float slot;
        if (threadIdx.x == 0) {
            slot = value;
        }
        __syncthreads();
        return slot;
    }
};

/* The GPU's warps for quantize_rows_warps_thread. */
struct gpu_warps {
    __device__ __forceinline__ int thread() const { return (int)threadIdx.x; }
    __device__ __forceinline__ int threads() const { return (int)blockDim.x; }
    __device__ __forceinline__ int64_t block() const { return blockIdx.x; }
    __device__ __forceinline__ int64_t blocks() const { return gridDim.x; }
    __device__ __forceinline__ uint32_t shuffle_xor(uint32_t value, int lane_mask) const
    {
        return __shfl_xor_sync(0xFFFFFFFFu, value, lane_mask);
    }
    __device__ __forceinline__ void barrier() const { __syncthreads(); }
    __device__ __forceinline__ uint32_t *slots() const
    {
        __shared__ uint32_t warp_amax[2 * FP8Q_QUANTIZE_ROWS_WARPS_PER_BLOCK];
        return warp_amax;
    }
};

template <int S, int D, bool SATURATE>
static __device__ __noinline__ void quantize_rows_run(const fp8q_quantize_rows_args args)
{
    gpu_block block;
    quantize_rows_thread<S, D, SATURATE, gpu_block>(args, block).run();
}

template <int S, int D>
static __device__ void quantize_rows_saturating(const fp8q_quantize_rows_args &args)
{
    if (args.saturate) {
        quantize_rows_run<S, D, true>(args);
    }
    else {
        quantize_rows_run<S, D, false>(args);
    }
}

/* The FP8 destination, then the float source, then saturate: 24
 * specialisations, not the 64 of dispatch_dtype (the host sends no other
 * dtypes). */
template <int S> static __device__ void quantize_rows_to(const fp8q_quantize_rows_args &args)
{
    switch (args.destination_dtype) {
    case FP8Q_FLOAT8_E4M3FN: quantize_rows_saturating<S, FP8Q_FLOAT8_E4M3FN>(args); break;
    case FP8Q_FLOAT8_E5M2: quantize_rows_saturating<S, FP8Q_FLOAT8_E5M2>(args); break;
    case FP8Q_FLOAT8_E4M3FNUZ: quantize_rows_saturating<S, FP8Q_FLOAT8_E4M3FNUZ>(args); break;
    case FP8Q_FLOAT8_E5M2FNUZ: quantize_rows_saturating<S, FP8Q_FLOAT8_E5M2FNUZ>(args); break;
    default: break;
    }
}

extern "C" __global__ void __launch_bounds__(FP8Q_QUANTIZE_ROWS_MAX_THREADS)
    fp8q_quantize_rows(const fp8q_quantize_rows_args args)
{
    call_for_float_dtype(args.source_dtype,
                         [&](auto source) { quantize_rows_to<decltype(source)::value>(args); });
}

/* ------------------------------------------------------------------------- */
/* The warp loop: its own kernel, for its own launch bounds (the block
 * loop's 1024 threads leave 64 registers, and 8 held vectors spill there). */

template <int S, int D> static __device__ void quantize_rows_warps_to(const fp8q_quantize_rows_args &args)
{
    gpu_warps warps;
    quantize_rows_warps_thread<S, D, gpu_warps>(args, warps).run();
}

extern "C" __global__ void __launch_bounds__(32 * FP8Q_QUANTIZE_ROWS_WARPS_PER_BLOCK)
    fp8q_quantize_rows_warps(const fp8q_quantize_rows_args args)
{
    const int e4m3 = args.destination_dtype == FP8Q_FLOAT8_E4M3FN;
    if (args.source_dtype == FP8Q_FLOAT16) {
        if (e4m3) {
            quantize_rows_warps_to<FP8Q_FLOAT16, FP8Q_FLOAT8_E4M3FN>(args);
        }
        else {
            quantize_rows_warps_to<FP8Q_FLOAT16, FP8Q_FLOAT8_E5M2>(args);
        }
    }
    else if (e4m3) {
        quantize_rows_warps_to<FP8Q_BFLOAT16, FP8Q_FLOAT8_E4M3FN>(args);
    }
    else {
        quantize_rows_warps_to<FP8Q_BFLOAT16, FP8Q_FLOAT8_E5M2>(args);
    }
}
