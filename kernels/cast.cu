/*
 * cast.cu - the cast kernel: any dtype to any dtype over a contiguous run,
 * through float32, with an optional scale (divide to quantize, multiply to
 * dequantize), saturating or not, optionally recording the input's amax in
 * the same pass. Launch contract: kernels/cast.cuh.
 *
 * Two kernels over the loops of generic_cast.cuh: fp8q_cast_uniform (no
 * scale, or one for the whole run: casts, quantize and dequantize per tensor
 * that the straight casts below do not take) runs the compact loop, every
 * dtype pair in one loop with the dtypes' decode and encode picked at run
 * time; fp8q_cast carries the scale addressing (rows, columns, blocks), and
 * reads one scale per vector where a vector never crosses a scale group:
 * float32 / float16 / bfloat16 to E4M3FN / E5M2 (the per-group quantize)
 * through a loop compiled for each of those six pairs, every other pair
 * through the compact loop. A grid-stride loop, a scalar tail, launch
 * bounds that cap registers for occupancy.
 * Numerics: csrc/core/float_codec.h and
 * __fdiv_rn / __fmul_rn (correctly rounded, never contracted) with
 * fp8q_scaling_result's NaN, so results are bit-identical to
 * csrc/core/cast.c.
 *
 * Two more, the straight casts (straight_cast.cuh), compute the same
 * function for the common quantize and dequantize, each of their cases
 * compiled as its own loop: fp8q_cast_to_fp8 (float32 / float16 / bfloat16
 * to saturating E4M3FN or E5M2, no scale, one or one per row: 18 cases;
 * four codes at a time, the codes of x / s from x * RN(1 / s) where they
 * provably agree) and fp8q_cast_from_fp8 (E4M3FN / E5M2 to float32 /
 * float16 / bfloat16, times no scale, one, one per row or one per block:
 * 24 cases; four codes decoded at a time, paired 16-bit conversions), and
 * fp8q_cast_from_fp8_wide, the same decode for runs of whole 16-code
 * vectors with one 16-byte load of codes a thread and a grid as large as
 * the run (the W8A16 layer's weight decode).
 */
#include "cast.cuh"
#include "common.cuh"
#include "generic_cast.cuh"
#include "straight_cast.cuh"

static_assert(sizeof(fp8q_cast_args) == 152, "fp8q_cast_args must match the host's layout");

/* ------------------------------------------------------------------------- */
/* The generic casts: fp8q_cast, fp8q_cast_uniform                           */

/* A thread's amax raised into *args.amax_bits through the block's maximum
 * (every thread of the block calls it). */
static __device__ __forceinline__ void raise_amax(const fp8q_cast_args &args, uint32_t amax)
{
    if (args.amax_bits != NULL) {
        amax = block_max_bits(amax);
        if (threadIdx.x == 0) {
            atomicMax(args.amax_bits, amax);
        }
    }
}

/* The run of the pair compiled as its own loop (generic_cast.cuh). Takes
 * args by value: a reference to the kernel parameter would make the kernel
 * copy it to local memory and reload fields from there in the loops. */
template <int S, int D, bool INDEXED>
static __device__ __noinline__ void compiled_cast_run(const fp8q_cast_args args)
{
    raise_amax(args, compiled_cast_thread<S, D, INDEXED>(args, global_thread_index(),
                                                         global_thread_count()));
}

/* The run of any pair through the compact loop (generic_cast.cuh). */
template <bool INDEXED> static __device__ __noinline__ void compact_cast_run(const fp8q_cast_args args)
{
    raise_amax(args, compact_cast_thread<INDEXED>(args, global_thread_index(),
                                                  global_thread_count()));
}

/* dispatch_dtype bodies for fp8q_cast's compiled pairs (compiled_cast_pair):
 * the source dtype, then the destination dtype. */
template <int S> struct compiled_cast_to {
    const fp8q_cast_args &args;
    template <int D> __device__ void run()
    {
        if constexpr (D == FP8Q_FLOAT8_E4M3FN || D == FP8Q_FLOAT8_E5M2) {
            compiled_cast_run<S, D, true>(args);
        }
    }
};

struct compiled_cast_from {
    const fp8q_cast_args &args;
    template <int S> __device__ void run()
    {
        if constexpr (S == FP8Q_FLOAT32 || S == FP8Q_FLOAT16 || S == FP8Q_BFLOAT16) {
            compiled_cast_to<S> body = {args};
            dispatch_dtype(args.destination_dtype, body);
        }
    }
};

/* ------------------------------------------------------------------------- */
/* The straight casts: fp8q_cast_to_fp8, fp8q_cast_from_fp8                  */

/* The run of a straight kernel (straight_cast.cuh), with the amax of the
 * block raised into *args.amax_bits when asked for (to FP8 only). */
template <int S, int D, int SCALING, bool INFINITY_NAN = false>
static __device__ __forceinline__ void straight_cast_run(const fp8q_cast_args &args)
{
    const uint32_t amax = straight_cast_thread<S, D, SCALING, INFINITY_NAN>(
        args, global_thread_index(), global_thread_count());
    if constexpr (D == FP8Q_FLOAT8_E4M3FN || D == FP8Q_FLOAT8_E5M2) {
        if (args.amax_bits != NULL) {
            const uint32_t block_amax = block_max_bits(amax);
            if (threadIdx.x == 0) {
                atomicMax(args.amax_bits, block_amax);
            }
        }
    }
}

/* Dispatch on the scaling; fp8q_cast_to_fp8 takes no block scales, so its
 * scales with a stride are one per row (cast.cuh). */
template <int S, int D> static __device__ __forceinline__ void straight_cast_scaling(
    const fp8q_cast_args &args)
{
    const int scaling = straight_scaling_of(args);
    if (scaling == STRAIGHT_NO_SCALE) {
        straight_cast_run<S, D, STRAIGHT_NO_SCALE>(args);
    }
    else if (scaling == STRAIGHT_ONE_SCALE) {
        if constexpr (D == FP8Q_FLOAT8_E4M3FN || D == FP8Q_FLOAT8_E5M2) {
            if (args.infinity_to_nan) {
                straight_cast_run<S, D, STRAIGHT_ONE_SCALE, true>(args);
                return;
            }
        }
        straight_cast_run<S, D, STRAIGHT_ONE_SCALE>(args);
    }
    else if constexpr (D == FP8Q_FLOAT8_E4M3FN || D == FP8Q_FLOAT8_E5M2) {
        straight_cast_run<S, D, STRAIGHT_PER_ROW>(args);
    }
    else if (scaling == STRAIGHT_PER_ROW) {
        straight_cast_run<S, D, STRAIGHT_PER_ROW>(args);
    }
    else {
        straight_cast_run<S, D, STRAIGHT_PER_BLOCK>(args);
    }
}

template <int S> static __device__ __forceinline__ void cast_to_fp8_from(
    const fp8q_cast_args &args)
{
    if (args.destination_dtype == FP8Q_FLOAT8_E4M3FN) {
        straight_cast_scaling<S, FP8Q_FLOAT8_E4M3FN>(args);
    }
    else {
        straight_cast_scaling<S, FP8Q_FLOAT8_E5M2>(args);
    }
}

/* fp8q_cast_from_fp8_wide's run (cast.cuh) for source S, destination D. */
template <int S, int D> static __device__ __forceinline__ void wide_from_fp8_to(
    const fp8q_cast_args &args)
{
    const int64_t first = global_thread_index(), threads = global_thread_count();
    switch (straight_scaling_of(args)) {
    case STRAIGHT_NO_SCALE: wide_from_fp8_thread<S, D, STRAIGHT_NO_SCALE>(args, first, threads); break;
    case STRAIGHT_ONE_SCALE: wide_from_fp8_thread<S, D, STRAIGHT_ONE_SCALE>(args, first, threads); break;
    case STRAIGHT_PER_ROW: wide_from_fp8_thread<S, D, STRAIGHT_PER_ROW>(args, first, threads); break;
    default: wide_from_fp8_thread<S, D, STRAIGHT_PER_BLOCK>(args, first, threads); break;
    }
}

/* The casts from FP8 of fp8q_cast_from_fp8 (WIDE false) and
 * fp8q_cast_from_fp8_wide (WIDE true): dispatch on the source, then the
 * destination dtype. */
template <int S, int D, bool WIDE> static __device__ __forceinline__ void from_fp8_to(
    const fp8q_cast_args &args)
{
    if constexpr (WIDE) {
        wide_from_fp8_to<S, D>(args);
    }
    else {
        straight_cast_scaling<S, D>(args);
    }
}

template <int S, bool WIDE> static __device__ __forceinline__ void from_fp8_destination(
    const fp8q_cast_args &args)
{
    switch (args.destination_dtype) {
    case FP8Q_FLOAT32: from_fp8_to<S, FP8Q_FLOAT32, WIDE>(args); break;
    case FP8Q_FLOAT16: from_fp8_to<S, FP8Q_FLOAT16, WIDE>(args); break;
    default: from_fp8_to<S, FP8Q_BFLOAT16, WIDE>(args); break;
    }
}

template <bool WIDE> static __device__ __forceinline__ void from_fp8(const fp8q_cast_args &args)
{
    if (args.source_dtype == FP8Q_FLOAT8_E4M3FN) {
        from_fp8_destination<FP8Q_FLOAT8_E4M3FN, WIDE>(args);
    }
    else {
        from_fp8_destination<FP8Q_FLOAT8_E5M2, WIDE>(args);
    }
}

/* ------------------------------------------------------------------------- */
/* Kernels                                                                   */

/* At most 80 registers, so that at least 3 blocks of 256 threads fit on a
 * multiprocessor: enough loads in flight for memory speed. */
#define CAST_MIN_BLOCKS 3

extern "C" __global__ void __launch_bounds__(FP8Q_CAST_THREADS, CAST_MIN_BLOCKS)
    fp8q_cast(const fp8q_cast_args args)
{
    if (compiled_cast_pair(args.source_dtype, args.destination_dtype)) {
        compiled_cast_from body = {args};
        dispatch_dtype(args.source_dtype, body);
    }
    else {
        compact_cast_run<true>(args);
    }
}

extern "C" __global__ void __launch_bounds__(FP8Q_CAST_THREADS, CAST_MIN_BLOCKS)
    fp8q_cast_uniform(const fp8q_cast_args args)
{
    compact_cast_run<false>(args);
}

/* At most 64 registers: 4 blocks of 256 threads a multiprocessor. */
extern "C" __global__ void __launch_bounds__(FP8Q_CAST_THREADS, 4)
    fp8q_cast_to_fp8(const fp8q_cast_args args)
{
    switch (args.source_dtype) {
    case FP8Q_FLOAT32: cast_to_fp8_from<FP8Q_FLOAT32>(args); break;
    case FP8Q_FLOAT16: cast_to_fp8_from<FP8Q_FLOAT16>(args); break;
    default: cast_to_fp8_from<FP8Q_BFLOAT16>(args); break;
    }
}

/* At most 64 registers: 4 blocks of 256 threads a multiprocessor. */
extern "C" __global__ void __launch_bounds__(FP8Q_CAST_THREADS, 4)
    fp8q_cast_from_fp8(const fp8q_cast_args args)
{
    from_fp8<false>(args);
}

/* 16 codes a thread (cast.cuh); at most 64 registers: 4 blocks of 256
 * threads a multiprocessor, each thread with its 16-byte load in flight. */
extern "C" __global__ void __launch_bounds__(FP8Q_CAST_THREADS, 4)
    fp8q_cast_from_fp8_wide(const fp8q_cast_args args)
{
    from_fp8<true>(args);
}
