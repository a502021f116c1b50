/*
 * generic_cast.cuh - one thread's share of the generic casts of
 * kernels/cast.cu (fp8q_cast, fp8q_cast_uniform): any dtype to any dtype,
 * what the straight casts (straight_cast.cuh) do not take.
 *
 * Two loops over the same element function (elements.cuh's cast_element
 * and the codec under it):
 *
 *   compiled_cast_thread<S, D, INDEXED>  a loop compiled for one (source,
 *                       destination) pair: 16-byte vectors of the wider
 *                       side, two in flight without indexed scales. Only
 *                       fp8q_cast's hot pairs, float32 / float16 / bfloat16
 *                       to E4M3FN / E5M2 with row, column or block scales
 *                       (the per-group quantize of block-scaled layers),
 *                       are compiled this way.
 *   compact_cast_thread<INDEXED>  every other pair, in one loop: vectors of
 *                       GENERIC_VECTOR elements whatever the dtypes, moved
 *                       as raw words; the source decoded, scaled and the
 *                       destination encoded in place, decode and encode
 *                       chosen by a run-time switch on the dtype
 *                       (warp-uniform: the dtypes are launch arguments).
 *                       One copy of each dtype's decode and encode instead
 *                       of one per pair keeps the image small
 *                       (kernels/README.md, "Image size").
 *
 * Both give, for every element, dtype_traits<D>::store(apply_scale(
 * dtype_traits<S>::load(x))) (cast_element): the same bits whichever loop
 * runs. __host__ __device__: the kernels run these on every GPU thread;
 * tests/generic_cast_emulation.cpp runs them on the host for every thread
 * of a grid and compares each element with the codec.
 */
#ifndef FP8Q_KERNELS_GENERIC_CAST_CUH
#define FP8Q_KERNELS_GENERIC_CAST_CUH

#include <stdint.h>

#include "cast.cuh"
#include "core/fast_divide.h"
#include "elements.cuh"

/* ------------------------------------------------------------------------- */
/* Scales                                                                    */

/* Where element i finds its scale, and how it applies (see cast.cuh). With
 * INDEXED false there is one factor for the whole run (or none); with
 * INDEXED true the divisions by the row length and the block extents are
 * multiply-highs (core/fast_divide.h). */
template <bool INDEXED> struct scale_reader;

template <> struct scale_reader<false> {
    float factor; /* the one scale, when has_scale */
    int has_scale;
    int multiply;

    __host__ __device__ scale_reader(const fp8q_cast_args &args, int /* vector */)
        : factor(args.scale != NULL ? *args.scale : 1.0f), has_scale(args.scale != NULL),
          multiply(args.scale_op == FP8Q_SCALE_MULTIPLY)
    {
    }
};

template <> struct scale_reader<true> {
    const float *scale;
    int has_scale; /* always 1: the indexed kernel is launched with scales */
    int multiply;
    int per_vector; /* a vector never straddles two scale groups */
    int64_t row_length, row_stride, col_stride;
    fp8q_fast_divisor by_row_length, by_block_rows, by_block_cols;

    __host__ __device__ scale_reader(const fp8q_cast_args &args, int vector)
        : scale(args.scale), has_scale(1), multiply(args.scale_op == FP8Q_SCALE_MULTIPLY),
          per_vector(args.row_length % vector == 0 &&
                     (args.scale_col_stride == 0 || args.scale_block_cols % vector == 0)),
          row_length(args.row_length), row_stride(args.scale_row_stride),
          col_stride(args.scale_col_stride), by_row_length(args.by_row_length),
          by_block_rows(args.by_block_rows), by_block_cols(args.by_block_cols)
    {
    }

    __host__ __device__ __forceinline__ float element_factor(int64_t i) const
    {
        const uint64_t row = fp8q_fast_divide((uint64_t)i, by_row_length);
        const uint64_t column = (uint64_t)i - row * (uint64_t)row_length;
        return scale[(int64_t)fp8q_fast_divide(row, by_block_rows) * row_stride +
                     (int64_t)fp8q_fast_divide(column, by_block_cols) * col_stride];
    }
};

/* ------------------------------------------------------------------------- */
/* A loop compiled for one pair                                              */

/* The vector of elements [first, first + VECTOR) converted. */
template <int S, int D, bool INDEXED>
static __host__ __device__ __forceinline__ typename cast_vectors<S, D>::destination_vector
cast_vector(const typename cast_vectors<S, D>::source_vector &in, int64_t first,
            const scale_reader<INDEXED> &scale, int saturate)
{
    typename cast_vectors<S, D>::destination_vector out;
    if constexpr (INDEXED) {
        if (scale.per_vector) {
            const float factor = scale.element_factor(first);
#pragma unroll
            for (int k = 0; k < cast_vectors<S, D>::VECTOR; k++) {
                out.values[k] =
                    cast_element<S, D>(in.values[k], 1, factor, scale.multiply, saturate);
            }
            return out;
        }
#pragma unroll
        for (int k = 0; k < cast_vectors<S, D>::VECTOR; k++) {
            out.values[k] = cast_element<S, D>(in.values[k], 1, scale.element_factor(first + k),
                                               scale.multiply, saturate);
        }
    }
    else {
#pragma unroll
        for (int k = 0; k < cast_vectors<S, D>::VECTOR; k++) {
            out.values[k] = cast_element<S, D>(in.values[k], scale.has_scale, scale.factor,
                                               scale.multiply, saturate);
        }
    }
    return out;
}

/* Thread `first` of `threads` of a cast from S to D: its vectors, then its
 * elements of the run's tail; returns the float32 bits of the largest
 * magnitude it read when args.amax_bits is set (else 0). Takes args by
 * value: a reference to the kernel parameter would make the kernel copy it
 * to local memory and reload fields from there in the loops. */
template <int S, int D, bool INDEXED>
static __host__ __device__ __forceinline__ uint32_t compiled_cast_thread(const fp8q_cast_args args,
                                                                         int64_t first,
                                                                         int64_t threads)
{
    typedef cast_vectors<S, D> vectors;
    typedef typename vectors::source_t source_t;
    typedef typename vectors::destination_t destination_t;
    typedef typename vectors::source_vector source_vector;
    typedef typename vectors::destination_vector destination_vector;
    constexpr int VECTOR = vectors::VECTOR;

    const source_t *source = (const source_t *)args.source;
    destination_t *destination = (destination_t *)args.destination;
    const source_vector *source_vectors = (const source_vector *)source;
    destination_vector *destination_vectors = (destination_vector *)destination;
    const scale_reader<INDEXED> scale(args, VECTOR);
    const int saturate = args.saturate;
    /* The amax, when asked for, from the loaded vectors, apart from the
     * conversions: a cast without it does no work for it. */
    const int track_amax = args.amax_bits != NULL;
    uint32_t amax = 0u;
    const int64_t n_vectors =
        is_aligned16(source) && is_aligned16(destination) ? args.count / VECTOR : 0;
    int64_t v, i;

    /* STEP vectors a step, all loaded before any is stored (a thread reads
     * an element before writing it, so an in-place cast is safe); the
     * indexed kernel's scale addressing leaves room for one only. */
    constexpr int STEP = INDEXED ? 1 : 2;
    for (v = first; v < n_vectors; v += STEP * threads) {
        source_vector in[STEP];
        load_step<STEP>(source_vectors, v, threads, n_vectors, in);
#pragma unroll
        for (int u = 0; u < STEP; u++) {
            const int64_t w = v + u * threads;
            if (w < n_vectors) {
                if (track_amax) {
#pragma unroll
                    for (int k = 0; k < VECTOR; k++) {
                        const uint32_t bits = magnitude_bits(dtype_traits<S>::load(in[u].values[k]));
                        amax = bits > amax ? bits : amax;
                    }
                }
                destination_vectors[w] =
                    cast_vector<S, D, INDEXED>(in[u], w * VECTOR, scale, saturate);
            }
        }
    }
    for (i = n_vectors * VECTOR + first; i < args.count; i += threads) {
        float factor;
        if constexpr (INDEXED) {
            factor = scale.element_factor(i);
        }
        else {
            factor = scale.factor;
        }
        if (track_amax) {
            const uint32_t bits = magnitude_bits(dtype_traits<S>::load(source[i]));
            amax = bits > amax ? bits : amax;
        }
        destination[i] = cast_element<S, D>(source[i], scale.has_scale, factor, scale.multiply,
                                            saturate);
    }
    return amax;
}

/* Nonzero when fp8q_cast runs the pair as compiled_cast_thread: float32,
 * float16 or bfloat16 to E4M3FN or E5M2 (the per-group quantize). */
static __host__ __device__ __forceinline__ int compiled_cast_pair(int source_dtype,
                                                                  int destination_dtype)
{
    return (source_dtype == FP8Q_FLOAT32 || source_dtype == FP8Q_FLOAT16 ||
            source_dtype == FP8Q_BFLOAT16) &&
           (destination_dtype == FP8Q_FLOAT8_E4M3FN || destination_dtype == FP8Q_FLOAT8_E5M2);
}

/* ------------------------------------------------------------------------- */
/* The compact loop: any pair, dtypes decided at run time                    */

/* Elements a vector of the compact loop holds, whatever the dtypes: 8, 16
 * or 32 bytes of them. */
#define GENERIC_VECTOR 8

/* Up to GENERIC_VECTOR elements of 1, 2 or 4 bytes, packed little end
 * first as in memory (element k of a 1-byte dtype: byte k % 4 of word
 * k / 4). */
struct generic_raw {
    uint32_t words[GENERIC_VECTOR];
};

/* Element k of `raw` holding elements of dtype D, as its storage. */
template <int D>
static __host__ __device__ __forceinline__ typename dtype_traits<D>::storage
raw_element(const generic_raw &raw, int k)
{
    typedef typename dtype_traits<D>::storage storage;
    constexpr int PER_WORD = 4 / (int)sizeof(storage);
    const uint32_t bits = raw.words[k / PER_WORD] >> (8 * sizeof(storage) * (k % PER_WORD));
    if constexpr (sizeof(storage) == 4) {
        return fp8q_bits_to_float(bits);
    }
    else {
        return (storage)bits;
    }
}

/* The N elements of `raw` (dtype S) loaded as float32 (dtype_traits<S>::load). */
template <int N> struct generic_decode {
    const generic_raw &raw;
    float *value;

    template <int S> __host__ __device__ __forceinline__ void run()
    {
#pragma unroll
        for (int k = 0; k < N; k++) {
            value[k] = dtype_traits<S>::load(raw_element<S>(raw, k));
        }
    }
};

/* value[0 .. N) stored as dtype D (dtype_traits<D>::store) into `raw`. */
template <int N> struct generic_encode {
    const float *value;
    int saturate;
    generic_raw &raw;

    template <int D> __host__ __device__ __forceinline__ void run()
    {
        typedef typename dtype_traits<D>::storage storage;
        constexpr int PER_WORD = 4 / (int)sizeof(storage);
#pragma unroll
        for (int w = 0; w < (N + PER_WORD - 1) / PER_WORD; w++) {
            raw.words[w] = 0u;
        }
#pragma unroll
        for (int k = 0; k < N; k++) {
            const storage code = dtype_traits<D>::store(value[k], saturate);
            uint32_t bits;
            if constexpr (sizeof(storage) == 4) {
                bits = fp8q_float_to_bits(code);
            }
            else {
                bits = code;
            }
            raw.words[k / PER_WORD] |= bits << (8 * sizeof(storage) * (k % PER_WORD));
        }
    }
};

/* Vector `v` (elements [v * GENERIC_VECTOR, ...)) of `data`, elements of
 * `itemsize` bytes (1, 2 or 4), 16-byte aligned, into / from raw words. */
static __host__ __device__ __forceinline__ void load_raw_vector(const void *data, int64_t v,
                                                               int itemsize, generic_raw &raw)
{
    if (itemsize == 1) {
        const packed<uint32_t, 2> in = ((const packed<uint32_t, 2> *)data)[v];
        raw.words[0] = in.values[0];
        raw.words[1] = in.values[1];
    }
    else if (itemsize == 2) {
        const packed<uint32_t, 4> in = ((const packed<uint32_t, 4> *)data)[v];
#pragma unroll
        for (int w = 0; w < 4; w++) {
            raw.words[w] = in.values[w];
        }
    }
    else {
        const packed<uint32_t, 4> low = ((const packed<uint32_t, 4> *)data)[2 * v];
        const packed<uint32_t, 4> high = ((const packed<uint32_t, 4> *)data)[2 * v + 1];
#pragma unroll
        for (int w = 0; w < 4; w++) {
            raw.words[w] = low.values[w];
            raw.words[4 + w] = high.values[w];
        }
    }
}

static __host__ __device__ __forceinline__ void store_raw_vector(void *data, int64_t v,
                                                                int itemsize,
                                                                const generic_raw &raw)
{
    if (itemsize == 1) {
        packed<uint32_t, 2> out;
        out.values[0] = raw.words[0];
        out.values[1] = raw.words[1];
        ((packed<uint32_t, 2> *)data)[v] = out;
    }
    else if (itemsize == 2) {
        packed<uint32_t, 4> out;
#pragma unroll
        for (int w = 0; w < 4; w++) {
            out.values[w] = raw.words[w];
        }
        ((packed<uint32_t, 4> *)data)[v] = out;
    }
    else {
        packed<uint32_t, 4> low, high;
#pragma unroll
        for (int w = 0; w < 4; w++) {
            low.values[w] = raw.words[w];
            high.values[w] = raw.words[4 + w];
        }
        ((packed<uint32_t, 4> *)data)[2 * v] = low;
        ((packed<uint32_t, 4> *)data)[2 * v + 1] = high;
    }
}

/* Element i of `data` (elements of `itemsize` bytes) as the low bits of a
 * word, and back. */
static __host__ __device__ __forceinline__ uint32_t load_raw_element(const void *data, int64_t i,
                                                                    int itemsize)
{
    return itemsize == 1   ? ((const uint8_t *)data)[i]
           : itemsize == 2 ? ((const uint16_t *)data)[i]
                           : ((const uint32_t *)data)[i];
}

static __host__ __device__ __forceinline__ void store_raw_element(void *data, int64_t i,
                                                                 int itemsize, uint32_t bits)
{
    if (itemsize == 1) {
        ((uint8_t *)data)[i] = (uint8_t)bits;
    }
    else if (itemsize == 2) {
        ((uint16_t *)data)[i] = (uint16_t)bits;
    }
    else {
        ((uint32_t *)data)[i] = bits;
    }
}

/* Bytes an element of the cast dtypes takes. */
static __host__ __device__ __forceinline__ int generic_itemsize(int dtype)
{
    return dtype == FP8Q_FLOAT32 ? 4 : dtype == FP8Q_FLOAT16 || dtype == FP8Q_BFLOAT16 ? 2 : 1;
}

/* The elements [first, first + N) of a cast, in place: raw words of the
 * source dtype in `raw` replaced by those of the destination dtype; the
 * amax of what was read raised into `amax` when track_amax. A same-dtype
 * cast without a scale copies the bits (cast_element): `raw` stays. */
template <int N, bool INDEXED>
static __host__ __device__ __forceinline__ void
compact_cast_elements(const fp8q_cast_args &args, const scale_reader<INDEXED> &scale,
                      int64_t first, int track_amax, generic_raw &raw, uint32_t &amax)
{
    const int copy = args.source_dtype == args.destination_dtype && !scale.has_scale;
    float value[N];
    if (track_amax || !copy) {
        generic_decode<N> decode = {raw, value};
        dispatch_dtype(args.source_dtype, decode);
    }
    if (track_amax) {
#pragma unroll
        for (int k = 0; k < N; k++) {
            const uint32_t bits = magnitude_bits(value[k]);
            amax = bits > amax ? bits : amax;
        }
    }
    if (copy) {
        return;
    }
    if (scale.has_scale) {
        if constexpr (INDEXED) {
            const int per_vector = N == 1 || scale.per_vector;
            const float factor = scale.element_factor(first);
#pragma unroll
            for (int k = 0; k < N; k++) {
                value[k] = apply_scale(
                    value[k], per_vector ? factor : scale.element_factor(first + k),
                    scale.multiply);
            }
        }
        else {
#pragma unroll
            for (int k = 0; k < N; k++) {
                value[k] = apply_scale(value[k], scale.factor, scale.multiply);
            }
        }
    }
    generic_encode<N> encode = {value, args.saturate, raw};
    dispatch_dtype(args.destination_dtype, encode);
}

/* Thread `first` of `threads` of any cast fp8q_cast (INDEXED) or
 * fp8q_cast_uniform takes, dtypes read from args: one vector of
 * GENERIC_VECTOR elements at a time (loaded before it is stored, so an
 * in-place cast is safe), then its elements of the run's tail; returns the
 * float32 bits of the largest magnitude it read when args.amax_bits is set
 * (else 0). */
template <bool INDEXED>
static __host__ __device__ __forceinline__ uint32_t compact_cast_thread(const fp8q_cast_args args,
                                                                        int64_t first,
                                                                        int64_t threads)
{
    const int source_size = generic_itemsize(args.source_dtype);
    const int destination_size = generic_itemsize(args.destination_dtype);
    const scale_reader<INDEXED> scale(args, GENERIC_VECTOR);
    const int track_amax = args.amax_bits != NULL;
    uint32_t amax = 0u;
    const int64_t n_vectors = is_aligned16(args.source) && is_aligned16(args.destination)
                                  ? args.count / GENERIC_VECTOR
                                  : 0;
    int64_t v, i;

    for (v = first; v < n_vectors; v += threads) {
        generic_raw raw;
        load_raw_vector(args.source, v, source_size, raw);
        compact_cast_elements<GENERIC_VECTOR, INDEXED>(args, scale, v * GENERIC_VECTOR,
                                                       track_amax, raw, amax);
        store_raw_vector(args.destination, v, destination_size, raw);
    }
    for (i = n_vectors * GENERIC_VECTOR + first; i < args.count; i += threads) {
        generic_raw raw;
        raw.words[0] = load_raw_element(args.source, i, source_size);
        compact_cast_elements<1, INDEXED>(args, scale, i, track_amax, raw, amax);
        store_raw_element(args.destination, i, destination_size, raw.words[0]);
    }
    return amax;
}

#endif /* FP8Q_KERNELS_GENERIC_CAST_CUH */
