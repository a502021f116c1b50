/*
 * cast.cu - the cast kernel: any dtype to any dtype over a contiguous run,
 * through float32, with an optional scale (divide to quantize, multiply to
 * dequantize), saturating or not, optionally recording the input's amax in
 * the same pass. Launch contract: kernels/cast.cuh.
 *
 * One kernel, specialised inside for each (source, destination) dtype pair
 * so that every element conversion is straight-line codec code; the scale
 * mode is a uniform branch. 16-byte vectors where both pointers allow it, a
 * scalar tail, a grid-stride loop. Numerics: csrc/core/float_codec.h and
 * __fdiv_rn / __fmul_rn (correctly rounded, never contracted) with
 * fp8q_scaling_result's NaN, so results are bit-identical to
 * csrc/core/cast.c.
 */
#include "cast.cuh"
#include "common.cuh"

static_assert(sizeof(fp8q_cast_args) == 144, "fp8q_cast_args must match the host's layout");

/* ------------------------------------------------------------------------- */
/* Scales                                                                    */

/* Where element i finds its scale, and how it applies (see cast.cuh). The
 * divisions by the row length and the block extents are multiply-highs
 * (core/fast_divide.h). */
struct scale_reader {
    const float *scale; /* NULL: no scaling */
    float scalar;       /* the one scale when both strides are 0 */
    int is_scalar;
    int multiply;
    int64_t row_length, row_stride, col_stride;
    fp8q_fast_divisor by_row_length, by_block_rows, by_block_cols;

    __device__ explicit scale_reader(const fp8q_cast_args &args)
        : scale(args.scale), scalar(1.0f),
          is_scalar(args.scale_row_stride == 0 && args.scale_col_stride == 0),
          multiply(args.scale_op == FP8Q_SCALE_MULTIPLY), row_length(args.row_length),
          row_stride(args.scale_row_stride), col_stride(args.scale_col_stride),
          by_row_length(args.by_row_length), by_block_rows(args.by_block_rows),
          by_block_cols(args.by_block_cols)
    {
        if (scale != NULL && is_scalar) {
            scalar = *scale;
        }
    }

    __device__ __forceinline__ int64_t scale_index(int64_t i) const
    {
        const uint64_t row = fp8q_fast_divide((uint64_t)i, by_row_length);
        const uint64_t column = (uint64_t)i - row * (uint64_t)row_length;
        return (int64_t)fp8q_fast_divide(row, by_block_rows) * row_stride +
               (int64_t)fp8q_fast_divide(column, by_block_cols) * col_stride;
    }

    __device__ __forceinline__ float apply(float value, int64_t i) const
    {
        const float factor = is_scalar ? scalar : scale[scale_index(i)];
        return apply_scale(value, factor, multiply);
    }
};

/* ------------------------------------------------------------------------- */
/* One element                                                               */

template <int S, int D>
static __device__ __forceinline__ typename dtype_traits<D>::storage
cast_element(typename dtype_traits<S>::storage x, int64_t i, int saturate,
             const scale_reader &scale, uint32_t &amax)
{
    float value = dtype_traits<S>::load(x);
    amax = max(amax, magnitude_bits(value));
    if constexpr (S == D) {
        if (scale.scale == NULL) {
            return x; /* a copy keeps the bits, NaN payloads included */
        }
    }
    if (scale.scale != NULL) {
        value = scale.apply(value, i);
    }
    return dtype_traits<D>::store(value, saturate);
}

/* ------------------------------------------------------------------------- */
/* A run                                                                     */

/* Takes args by value: a reference to the kernel parameter would make the
 * kernel copy it to local memory and reload fields from there in the loops. */
template <int S, int D> static __device__ __noinline__ void cast_run(const fp8q_cast_args args)
{
    typedef typename dtype_traits<S>::storage source_t;
    typedef typename dtype_traits<D>::storage destination_t;
    /* Elements per step: 16 bytes of the wider side, at most 8 elements (the
     * narrower side moves 4 or 8 bytes per thread, still coalesced; short
     * steps keep the 64 specialisations small enough for a quick ptxas). */
    constexpr int WIDEST = sizeof(source_t) > sizeof(destination_t) ? sizeof(source_t)
                                                                     : sizeof(destination_t);
    constexpr int VECTOR = 16 / WIDEST < 8 ? 16 / WIDEST : 8;
    typedef packed<source_t, VECTOR> source_vector;
    typedef packed<destination_t, VECTOR> destination_vector;

    const source_t *source = (const source_t *)args.source;
    destination_t *destination = (destination_t *)args.destination;
    const scale_reader scale(args);
    const int saturate = args.saturate;
    uint32_t amax = 0u;
    const int64_t n_vectors =
        is_aligned16(source) && is_aligned16(destination) ? args.count / VECTOR : 0;
    int64_t v, i;

    for (v = global_thread_index(); v < n_vectors; v += global_thread_count()) {
        const source_vector in = ((const source_vector *)source)[v];
        destination_vector out;
#pragma unroll
        for (int k = 0; k < VECTOR; k++) {
            out.values[k] = cast_element<S, D>(in.values[k], v * VECTOR + k, saturate, scale, amax);
        }
        ((destination_vector *)destination)[v] = out;
    }
    for (i = n_vectors * VECTOR + global_thread_index(); i < args.count; i += global_thread_count()) {
        destination[i] = cast_element<S, D>(source[i], i, saturate, scale, amax);
    }

    if (args.amax_bits != NULL) {
        amax = block_max_bits(amax);
        if (threadIdx.x == 0) {
            atomicMax(args.amax_bits, amax);
        }
    }
}

/* dispatch_dtype bodies: the source dtype, then the destination dtype. */
template <int S> struct cast_to {
    const fp8q_cast_args &args;
    template <int D> __device__ void run() { cast_run<S, D>(args); }
};

struct cast_from {
    const fp8q_cast_args &args;
    template <int S> __device__ void run()
    {
        cast_to<S> body = {args};
        dispatch_dtype(args.destination_dtype, body);
    }
};

/* ------------------------------------------------------------------------- */
/* Kernel                                                                    */

extern "C" __global__ void fp8q_cast(const fp8q_cast_args args)
{
    cast_from body = {args};
    dispatch_dtype(args.source_dtype, body);
}
