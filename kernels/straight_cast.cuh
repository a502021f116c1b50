/*
 * straight_cast.cuh - one thread's share of the straight casts of
 * kernels/cast.cu, each (source, destination, scaling) compiled as its own
 * loop with no per-element flags:
 *
 *   fp8q_cast_to_fp8    float32 / float16 / bfloat16 -> saturating E4M3FN /
 *                       E5M2, divided by no scale, one scale or one per row;
 *                       four codes at a time, the codes of x / s from
 *                       x * RN(1 / s) where they provably agree
 *                       (fp8_hardware.cuh), dividing only where they might
 *                       not.
 *   fp8q_cast_from_fp8  E4M3FN / E5M2 -> float32 / float16 / bfloat16, times
 *                       no scale, one scale, one per row or one per block;
 *                       four codes decoded at a time, one float32 product
 *                       each, paired conversions to 16 bits; a vector holding
 *                       an infinity or NaN code, or a non-finite scale, goes
 *                       element by element through the codec.
 *
 * Vectors of 4 (float32 side) or 8 elements, two in flight a thread, a
 * grid-stride step, row and block scales found by a row tracker without a
 * division per vector, then the run's last elements one by one. Which
 * arguments each kernel takes: kernels/cast.cuh.
 *
 *   fp8q_cast_from_fp8_wide  the same function as fp8q_cast_from_fp8 for
 *                       runs of whole 16-code vectors: one 16-byte load of
 *                       16 codes a thread, 16-byte stores, a grid as large
 *                       as the run (no loop in practice), the scale found
 *                       by one multiply-high per vector.
 *
 * __host__ __device__: the kernels run straight_cast_thread on every GPU
 * thread; tests/straight_cast_emulation.cpp runs it on the host for every
 * thread of a grid and compares the result with the codec.
 */
#ifndef FP8Q_KERNELS_STRAIGHT_CAST_CUH
#define FP8Q_KERNELS_STRAIGHT_CAST_CUH

#include <stdint.h>

#include "cast.cuh"
#include "core/fast_divide.h"
#include "elements.cuh"

/* How a straight cast finds its scale (kernels/cast.cuh's addressing). */
enum straight_scaling {
    STRAIGHT_NO_SCALE,  /* scale NULL                                        */
    STRAIGHT_ONE_SCALE, /* one scale for the whole run                       */
    STRAIGHT_PER_ROW,   /* row r: scale[r * scale_row_stride]                */
    STRAIGHT_PER_BLOCK  /* the general addressing, blocks a whole number of
                           vectors wide (fp8q_cast_from_fp8 only)            */
};

/* The scaling of `args`, which a straight kernel takes (cast.cuh). */
static __host__ __device__ __forceinline__ int straight_scaling_of(const fp8q_cast_args &args)
{
    if (args.scale == NULL) {
        return STRAIGHT_NO_SCALE;
    }
    if (fp8q_cast_one_scale(&args)) {
        return STRAIGHT_ONE_SCALE;
    }
    return args.scale_col_stride == 0 && args.scale_block_rows == 1 ? STRAIGHT_PER_ROW
                                                                    : STRAIGHT_PER_BLOCK;
}

/* The row and column of vector w + k * step for k = 0, 1, ... of rows of
 * `per_row` vectors of `vector` elements, without a division per vector:
 * the quotients by the row length (by_row_length: the launch's
 * fp8q_fast_divisor of it) are taken once. */
struct row_tracker {
    int64_t row, column; /* column: the vector's index in its row */
    int64_t per_row, step_rows, step_columns;

    __host__ __device__ row_tracker() : row(0), column(0), per_row(1), step_rows(0), step_columns(0)
    {
    }

    __host__ __device__ row_tracker(int64_t w, int64_t step, int64_t per_row_, int vector,
                                    const fp8q_fast_divisor &by_row_length)
        : row((int64_t)fp8q_fast_divide((uint64_t)(w * vector), by_row_length)),
          column(w - row * per_row_), per_row(per_row_),
          step_rows((int64_t)fp8q_fast_divide((uint64_t)(step * vector), by_row_length)),
          step_columns(step - step_rows * per_row_)
    {
    }

    __host__ __device__ __forceinline__ void advance()
    {
        row += step_rows;
        column += step_columns;
        if (column >= per_row) {
            column -= per_row;
            row += 1;
        }
    }
};

/* The scale of element (row, column) under a row or block scaling. */
template <int SCALING>
static __host__ __device__ __forceinline__ float scale_at(const fp8q_cast_args &args, int64_t row,
                                                          int64_t column)
{
    if constexpr (SCALING == STRAIGHT_PER_ROW) {
        return args.scale[row * args.scale_row_stride];
    }
    else {
        return args.scale[(int64_t)fp8q_fast_divide((uint64_t)row, args.by_block_rows) *
                              args.scale_row_stride +
                          (int64_t)fp8q_fast_divide((uint64_t)column, args.by_block_cols) *
                              args.scale_col_stride];
    }
}

/* The scale of element i (1 for no scale). */
template <int SCALING>
static __host__ __device__ __forceinline__ float element_scale(const fp8q_cast_args &args,
                                                               int64_t i)
{
    if constexpr (SCALING == STRAIGHT_NO_SCALE) {
        return 1.0f;
    }
    else if constexpr (SCALING == STRAIGHT_ONE_SCALE) {
        return *args.scale;
    }
    else {
        const int64_t row = (int64_t)fp8q_fast_divide((uint64_t)i, args.by_row_length);
        return scale_at<SCALING>(args, row, i - row * args.row_length);
    }
}

/* ------------------------------------------------------------------------- */
/* To FP8: x / s                                                             */

/* The VECTOR values of `in` (S: float32, float16 or bfloat16) as float32
 * into value[]; *amax raised to their largest magnitude's bits when
 * track_amax. */
template <int S, int VECTOR>
static __host__ __device__ __forceinline__ void
load_vector(const packed<typename dtype_traits<S>::storage, VECTOR> &in, float value[VECTOR],
            int track_amax, uint32_t *amax)
{
#pragma unroll
    for (int k = 0; k < VECTOR; k++) {
        value[k] = dtype_traits<S>::load(in.values[k]);
    }
    if (track_amax) {
#pragma unroll
        for (int k = 0; k < VECTOR; k++) {
            const uint32_t bits = magnitude_bits(value[k]);
            *amax = bits > *amax ? bits : *amax;
        }
    }
}

/* ------------------------------------------------------------------------- */
/* From FP8: code * s                                                        */

/* A factor s, and whether it is finite (the product's fast path). */
struct product_scale {
    float factor;
    int finite;

    __host__ __device__ product_scale() : factor(1.0f), finite(1) {}

    __host__ __device__ __forceinline__ void set(float s)
    {
        factor = s;
        finite = (fp8q_float_to_bits(s) & 0x7FFFFFFFu) < 0x7F800000u;
    }
};

/* The VECTOR codes of `in` (S: E4M3FN or E5M2, four to a word) as D
 * (float32, float16 or bfloat16), times `scale` when SCALED: with finite
 * codes and a finite scale every product is a number or an infinity, so
 * decode4, one float32 product and float_store4 give the codec's bits;
 * otherwise each element goes through cast_element. */
template <int S, int D, bool SCALED, int VECTOR>
static __host__ __device__ __forceinline__ packed<typename dtype_traits<D>::storage, VECTOR>
from_fp8_vector(const packed<uint32_t, VECTOR / 4> &in, const product_scale &scale)
{
    packed<typename dtype_traits<D>::storage, VECTOR> out;
    uint32_t special = 0u; /* a NaN code (E4M3FN), an infinity or NaN (E5M2) */
#pragma unroll
    for (int q = 0; q < VECTOR / 4; q++) {
        special |= fp8q_nan_bytes<S == FP8Q_FLOAT8_E4M3FN>(in.values[q]);
    }
    if (special == 0u && (!SCALED || scale.finite)) {
#pragma unroll
        for (int q = 0; q < VECTOR / 4; q++) {
            if constexpr (!SCALED && D == FP8Q_FLOAT16 && decode4_route<S>::THROUGH_FLOAT16) {
                /* The float16 values themselves: no round trip through
                 * float32 (exact either way). */
                uint32_t pairs[2];
                fp8q_decode4_to_float16<decode4_route<S>::E4M3>(in.values[q], pairs);
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    out.values[4 * q + k] = (uint16_t)(pairs[k / 2] >> (16 * (k % 2)));
                }
                continue;
            }
            float value[4];
            decode4<S>(in.values[q], value);
            if (SCALED) {
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    value[k] = fp8q_multiply_rn(value[k], scale.factor);
                }
            }
            float_store4<D>()(value, out.values + 4 * q);
        }
        return out;
    }
#pragma unroll
    for (int k = 0; k < VECTOR; k++) {
        out.values[k] = cast_element<S, D>((uint8_t)(in.values[k / 4] >> (8 * (k % 4))), SCALED,
                                           scale.factor, 1, 1);
    }
    return out;
}

/* ------------------------------------------------------------------------- */
/* A thread's share                                                          */

template <bool CONDITION, typename A, typename B> struct choose_type {
    typedef A type;
};
template <typename A, typename B> struct choose_type<false, A, B> {
    typedef B type;
};

/* The elements of the run (kernels/cast.cuh's fp8q_cast_args) that thread
 * `first` of `threads` casts in a grid-stride loop, cast from S to D with
 * scaling SCALING (straight_scaling_of(args)); returns the bits of their
 * largest source magnitude when args.amax_bits is set (to FP8 only), else
 * 0. The caller combines those into *args.amax_bits. INFINITY_NAN (to FP8,
 * args.infinity_to_nan): infinities cast as the quiet NaN of their sign. */
template <int S, int D, int SCALING, bool INFINITY_NAN = false>
static __host__ __device__ __forceinline__ uint32_t
straight_cast_thread(const fp8q_cast_args &args, int64_t first, int64_t threads)
{
    constexpr bool TO_FP8 = D == FP8Q_FLOAT8_E4M3FN || D == FP8Q_FLOAT8_E5M2;
    constexpr bool SCALED = SCALING != STRAIGHT_NO_SCALE;
    typedef cast_vectors<S, D> vectors;
    typedef typename vectors::source_t source_t;
    typedef typename vectors::destination_t destination_t;
    constexpr int VECTOR = vectors::VECTOR; /* 4 (float32 side) or 8 elements */
    constexpr int STEP = 2;                 /* vectors in flight a thread     */
    typedef packed<uint32_t, VECTOR / 4> code_vector;
    typedef typename choose_type<TO_FP8, typename vectors::source_vector, code_vector>::type
        in_vector;
    typedef typename choose_type<TO_FP8, code_vector, typename vectors::destination_vector>::type
        out_vector;
    typedef typename choose_type<TO_FP8, quotient_scale, product_scale>::type scale_state;

    const source_t *source = (const source_t *)args.source;
    destination_t *destination = (destination_t *)args.destination;
    const in_vector *in_vectors = (const in_vector *)args.source;
    out_vector *out_vectors = (out_vector *)args.destination;
    const int track_amax = TO_FP8 && args.amax_bits != NULL;
    const int64_t n_vectors =
        is_aligned16(source) && is_aligned16(destination) ? args.count / VECTOR : 0;
    /* Vector first + u * threads of each step is in row tracker[u].row;
     * rows hold row_length / VECTOR vectors (a whole number, cast.cuh). */
    row_tracker tracker[STEP];
    if constexpr (SCALING >= STRAIGHT_PER_ROW) {
#pragma unroll
        for (int u = 0; u < STEP; u++) {
            tracker[u] = row_tracker(first + u * threads, STEP * threads,
                                     args.row_length / VECTOR, VECTOR, args.by_row_length);
        }
    }
    scale_state scale;
    if constexpr (SCALING == STRAIGHT_ONE_SCALE) {
        scale.set(*args.scale);
    }
    uint32_t amax = 0u;

    for (int64_t v = first; v < n_vectors; v += STEP * threads) {
        in_vector in[STEP];
        float step_scale[STEP];
        load_step<STEP>(in_vectors, v, threads, n_vectors, in);
        /* The step's row or block scales, read beside its vectors: read
         * after a vector's store, each would wait for its load in turn (a
         * store may alias them, so the compiler cannot read them earlier). */
        if constexpr (SCALING >= STRAIGHT_PER_ROW) {
#pragma unroll
            for (int u = 0; u < STEP; u++) {
                if (v + u * threads < n_vectors) {
                    step_scale[u] =
                        scale_at<SCALING>(args, tracker[u].row, tracker[u].column * VECTOR);
                    tracker[u].advance();
                }
            }
        }
#pragma unroll
        for (int u = 0; u < STEP; u++) {
            const int64_t w = v + u * threads;
            if (w >= n_vectors) {
                break;
            }
            if constexpr (SCALING >= STRAIGHT_PER_ROW) {
                scale.set(step_scale[u]);
            }
            if constexpr (TO_FP8) {
                float value[VECTOR];
                load_vector<S, VECTOR>(in[u], value, track_amax, &amax);
                if constexpr (INFINITY_NAN) {
#pragma unroll
                    for (int k = 0; k < VECTOR; k++) {
                        value[k] = fp8q_infinity_as_nan(value[k]);
                    }
                }
                out_vectors[w] = to_fp8_codes<D, SCALED, VECTOR>(value, scale);
            }
            else {
                out_vectors[w] = from_fp8_vector<S, D, SCALED, VECTOR>(in[u], scale);
            }
        }
    }
    for (int64_t i = n_vectors * VECTOR + first; i < args.count; i += threads) {
        if (track_amax) {
            const uint32_t bits = magnitude_bits(dtype_traits<S>::load(source[i]));
            amax = bits > amax ? bits : amax;
        }
        if constexpr (INFINITY_NAN) {
            destination[i] = cast_element<FP8Q_FLOAT32, D>(
                fp8q_infinity_as_nan(dtype_traits<S>::load(source[i])), SCALED,
                element_scale<SCALING>(args, i), 0, 1);
        }
        else {
            destination[i] = cast_element<S, D>(source[i], SCALED,
                                                element_scale<SCALING>(args, i), !TO_FP8, 1);
        }
    }
    return amax;
}

/* ------------------------------------------------------------------------- */
/* From FP8, 16 codes a thread: fp8q_cast_from_fp8_wide                      */

/* Vector w of a run that fp8q_cast_from_fp8_wide_takes (cast.cuh): codes
 * [16 w, 16 w + 16) from one 16-byte load, times their one scale (a
 * vector never crosses a scale group), stored as 16-byte vectors of D
 * (4 float32 or 8 float16 / bfloat16 values each) through
 * from_fp8_vector: the bits of fp8q_cast_from_fp8 and the codec. */
template <int S, int D, int SCALING>
static __host__ __device__ __forceinline__ void wide_from_fp8_vector(const fp8q_cast_args &args,
                                                                     int64_t w)
{
    typedef typename dtype_traits<D>::storage destination_t;
    constexpr int OUT = 16 / (int)sizeof(destination_t); /* values a 16-byte store */
    constexpr int STORES = FP8Q_CAST_WIDE_CODES / OUT;
    typedef packed<uint32_t, 4> code_vector;
    typedef packed<uint32_t, OUT / 4> code_part;
    typedef packed<destination_t, OUT> out_vector;

    const code_vector in = ((const code_vector *)args.source)[w];
    product_scale scale;
    if constexpr (SCALING == STRAIGHT_ONE_SCALE) {
        scale.set(*args.scale);
    }
    else if constexpr (SCALING >= STRAIGHT_PER_ROW) {
        const int64_t first = w * FP8Q_CAST_WIDE_CODES;
        const int64_t row = (int64_t)fp8q_fast_divide((uint64_t)first, args.by_row_length);
        scale.set(scale_at<SCALING>(args, row, first - row * args.row_length));
    }
    out_vector *out = (out_vector *)args.destination + w * STORES;
#pragma unroll
    for (int p = 0; p < STORES; p++) {
        code_part part;
#pragma unroll
        for (int q = 0; q < OUT / 4; q++) {
            part.values[q] = in.values[p * (OUT / 4) + q];
        }
        out[p] = from_fp8_vector<S, D, SCALING != STRAIGHT_NO_SCALE, OUT>(part, scale);
    }
}

/* The vectors first, first + threads, ... of a run that
 * fp8q_cast_from_fp8_wide_takes, with scaling SCALING
 * (straight_scaling_of(args)): what thread `first` of a grid of `threads`
 * computes (one vector when the grid is fp8q_cast_wide_blocks'). */
template <int S, int D, int SCALING>
static __host__ __device__ __forceinline__ void wide_from_fp8_thread(const fp8q_cast_args &args,
                                                                     int64_t first,
                                                                     int64_t threads)
{
    const int64_t n_vectors = args.count / FP8Q_CAST_WIDE_CODES;
    for (int64_t w = first; w < n_vectors; w += threads) {
        wide_from_fp8_vector<S, D, SCALING>(args, w);
    }
}

#endif /* FP8Q_KERNELS_STRAIGHT_CAST_CUH */
