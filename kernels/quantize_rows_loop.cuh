/*
 * quantize_rows_loop.cuh - one thread's share of fp8q_quantize_rows
 * (kernels/quantize_rows.cuh's contract): a block quantizes rows b, b + grid,
 * ... one after another, each held in its threads' registers as the
 * source's own 16-byte vectors, and loads its next row while it reduces,
 * scales and encodes the current one, so that its loads stay in flight
 * through the row's reduction and stores (a block that read, reduced and
 * wrote in turn left the memory idle between its reads).
 *
 * __host__ __device__ over a Block policy that supplies the thread's place
 * and the block's two collective steps:
 *   int thread(), threads()              threadIdx.x, blockDim.x
 *   int64_t block(), blocks()            blockIdx.x, gridDim.x
 *   uint32_t max_bits(uint32_t bits)     the block's maximum, in thread 0
 *   float from_first_thread(float v)     thread 0's v, in every thread
 * kernels/quantize_rows.cu gives the GPU's (shuffles, shared memory,
 * __syncthreads); tests/quantize_rows_emulation.cpp runs the loop on the
 * host, a fiber per GPU thread run from one barrier to the next, and
 * compares each row with the codec.
 */
#ifndef FP8Q_KERNELS_QUANTIZE_ROWS_LOOP_CUH
#define FP8Q_KERNELS_QUANTIZE_ROWS_LOOP_CUH

#include <stdint.h>

#include "core/scale_formula.h"
#include "elements.cuh"
#include "quantize_rows.cuh"

/* The largest magnitude among N held vectors of a 16-bit source (S float16
 * or bfloat16) as float32 bits (NaN above infinity, as magnitude_bits): the
 * halves' own magnitudes compared two at a time and only the largest
 * converted: the conversion is exact and non-decreasing on magnitudes (NaN
 * payloads too), so it commutes with the maximum. */
template <int S, int N>
static __host__ __device__ __forceinline__ uint32_t
held_amax_bits16(const packed<uint32_t, 4> held[N])
{
    uint32_t amax = 0u;
#pragma unroll
    for (int c = 0; c < N; c++) {
#pragma unroll
        for (int w = 0; w < 4; w++) {
            amax = max_halves(amax, held[c].values[w] & 0x7FFF7FFFu);
        }
    }
    const uint32_t low = amax & 0xFFFFu;
    const uint32_t high = amax >> 16;
    return magnitude_bits(dtype_traits<S>::load((uint16_t)(low > high ? low : high)));
}

/* Thread t holds the elements (c * threads + t) * VECTOR + k of its row, for
 * chunk c and k < VECTOR: 16-byte vectors of the source, coalesced across
 * the warp, held as four 32-bit words whichever the source (16-bit elements
 * two to a word, as loaded; held element by element, a compiler may give
 * each its own register); register arrays indexed by constants only. */
template <int S, int D, bool SATURATE, typename Block> struct quantize_rows_thread {
    typedef typename dtype_traits<S>::storage source_t;
    static constexpr int VECTOR = 16 / sizeof(source_t);
    static constexpr int CHUNKS = FP8Q_QUANTIZE_ROWS_PER_THREAD / VECTOR;
    typedef packed<uint32_t, 4> source_vector;
    typedef packed<uint32_t, VECTOR / 4> code_words; /* VECTOR codes, four a word */
    /* Saturating E4M3FN / E5M2 codes four at a time, with the quotient
     * shortcut (elements.cuh: to_fp8_codes); the fnuz formats and the
     * non-saturating modes one code at a time, through the division. */
    static constexpr bool FOUR_AT_A_TIME =
        SATURATE && (D == FP8Q_FLOAT8_E4M3FN || D == FP8Q_FLOAT8_E5M2);
    /* The next row loaded while this one is quantized: for 16-bit sources
     * four at a time. The second row's registers do not fit beside the
     * division's calls (one code at a time), nor beside a float32 row
     * (16 more registers) on every architecture, within the 64 registers
     * of a 1024-thread block: ptxas spills there. */
    static constexpr bool PREFETCH = FOUR_AT_A_TIME && sizeof(source_t) == 2;

    const fp8q_quantize_rows_args &args;
    Block &block;
    const int length;
    /* Whole rows move in vectors: the length a whole number of them, both
     * rows' starts aligned for them. */
    const bool vectors;

    __host__ __device__ __forceinline__ quantize_rows_thread(const fp8q_quantize_rows_args &args_,
                                                             Block &block_)
        : args(args_), block(block_), length((int)args_.row_length),
          vectors(args_.row_length % VECTOR == 0 && is_aligned16(args_.source) &&
                  (uintptr_t)args_.destination % VECTOR == 0)
    {
    }

    __host__ __device__ __forceinline__ int first_of(int chunk) const
    {
        return (chunk * block.threads() + block.thread()) * VECTOR;
    }

    /* Element k of a held vector. */
    static __host__ __device__ __forceinline__ source_t element(const source_vector &held, int k)
    {
        if constexpr (sizeof(source_t) == 2) {
            return (source_t)(held.values[k / 2] >> (16 * (k % 2)));
        }
        else {
            return fp8q_bits_to_float(held.values[k]);
        }
    }

    /* The bits of source[index], 0 (+0.0) past the row's end. */
    __host__ __device__ __forceinline__ uint32_t element_bits(const source_t *source,
                                                             int index) const
    {
        if (index >= length) {
            return 0u;
        }
        if constexpr (sizeof(source_t) == 2) {
            return source[index];
        }
        else {
            return fp8q_float_to_bits(source[index]);
        }
    }

    /* This thread's elements of `row` into held; zeros past the row's end
     * (they leave the amax as it is and are never stored). Issues the loads
     * and returns: nothing waits for them until the row is quantized. */
    __host__ __device__ __forceinline__ void load(int64_t row, source_vector held[CHUNKS]) const
    {
        const source_t *source = (const source_t *)args.source + row * args.row_length;
#pragma unroll
        for (int c = 0; c < CHUNKS; c++) {
            const int first = first_of(c);
            if (vectors && first < length) {
                held[c] = *(const source_vector *)(source + first);
            }
            else if (sizeof(source_t) == 2) {
#pragma unroll
                for (int w = 0; w < 4; w++) {
                    held[c].values[w] = element_bits(source, first + 2 * w) |
                                        element_bits(source, first + 2 * w + 1) << 16;
                }
            }
            else {
#pragma unroll
                for (int w = 0; w < 4; w++) {
                    held[c].values[w] = element_bits(source, first + w);
                }
            }
        }
    }

    /* The largest magnitude among the held elements as float32 bits (NaN
     * above infinity, as magnitude_bits). 16-bit sources compare their own
     * magnitudes, two at a time, and convert only the largest: the
     * conversion is exact and non-decreasing on magnitudes (NaN payloads
     * too), so it commutes with the maximum; and the encode's conversions
     * are not computed early and held through the block's reduction. */
    __host__ __device__ __forceinline__ uint32_t amax_bits(const source_vector held[CHUNKS]) const
    {
        uint32_t amax = 0u;
        if constexpr (sizeof(source_t) == 2) {
            return held_amax_bits16<S, CHUNKS>(held);
        }
        else {
#pragma unroll
            for (int c = 0; c < CHUNKS; c++) {
#pragma unroll
                for (int w = 0; w < 4; w++) {
                    const uint32_t bits = held[c].values[w] & 0x7FFFFFFFu;
                    amax = bits > amax ? bits : amax;
                }
            }
            return amax;
        }
    }

    /* The row's amax over the block, its scale (written by thread 0) and
     * its codes from the held elements. */
    __host__ __device__ __forceinline__ void quantize(int64_t row,
                                                      const source_vector held[CHUNKS]) const
    {
        uint8_t *destination = args.destination + row * args.row_length;
        float scale = 0.0f;
        const uint32_t amax = block.max_bits(amax_bits(held));
        if (block.thread() == 0) {
            scale = fp8q_scale_from_amax(fp8q_bits_to_float(amax), args.max, args.power_of_2);
            args.scale[row] = scale;
        }
        scale = block.from_first_thread(scale);
        quotient_scale divisor;
        if constexpr (FOUR_AT_A_TIME) {
            divisor.set(scale);
        }

#pragma unroll
        for (int c = 0; c < CHUNKS; c++) {
            const int first = first_of(c);
            float values[VECTOR];
            code_words out;
#pragma unroll
            for (int k = 0; k < VECTOR; k++) {
                values[k] = dtype_traits<S>::load(element(held[c], k));
            }
            if constexpr (FOUR_AT_A_TIME) {
                out = to_fp8_codes<D, true, VECTOR>(values, divisor);
            }
            else {
#pragma unroll
                for (int q = 0; q < VECTOR / 4; q++) {
                    out.values[q] = 0u;
                }
#pragma unroll
                for (int k = 0; k < VECTOR; k++) {
                    out.values[k / 4] |=
                        (uint32_t)dtype_traits<D>::store(divide_by_scale(values[k], scale),
                                                         SATURATE)
                        << (8 * (k % 4));
                }
            }
            if (vectors) {
                if (first < length) {
                    *(code_words *)(destination + first) = out;
                }
            }
            else {
#pragma unroll
                for (int k = 0; k < VECTOR; k++) {
                    if (first + k < length) {
                        destination[first + k] = (uint8_t)(out.values[k / 4] >> (8 * (k % 4)));
                    }
                }
            }
        }
    }

    /* Every row of this block. PREFETCH: two register sets take turns, one
     * quantized while the other's loads (the block's next row) are in
     * flight; otherwise one row at a time. */
    __host__ __device__ __forceinline__ void run() const
    {
        source_vector even[CHUNKS];
        source_vector odd[CHUNKS];
        int64_t row = block.block();

        if constexpr (!PREFETCH) {
            for (; row < args.n_rows; row += block.blocks()) {
                load(row, even);
                quantize(row, even);
            }
            return;
        }
        if (row >= args.n_rows) {
            return;
        }
        load(row, even);
        for (;;) {
            const int64_t next = row + block.blocks();
            if (next < args.n_rows) {
                load(next, odd);
            }
            quantize(row, even);
            if (next >= args.n_rows) {
                return;
            }
            row = next + block.blocks();
            if (row < args.n_rows) {
                load(row, even);
            }
            quantize(next, odd);
            if (row >= args.n_rows) {
                return;
            }
        }
    }
};

/* ------------------------------------------------------------------------- */
/* The warp loop                                                             */

/* One thread's share of fp8q_quantize_rows' warp loop (quantize_rows.cuh:
 * warps_per_row = G > 0), for float16 / bfloat16 rows (S) to saturating
 * E4M3FN / E5M2 (D): a block holds R = threads / (32 G) rows at once, row
 * group g (threads 32 G g .. 32 G g + 32 G - 1) holding row b * R + g, then
 * (b + grid) * R + g, and so on. Thread j of its group holds the row's
 * 16-byte vectors c * 32 G + j for c < FP8Q_QUANTIZE_ROWS_WARP_CHUNKS
 * (coalesced across the group; zeros past the row's end, never stored).
 * The row's amax: each thread's by held_amax_bits16, each warp's by a
 * butterfly of shuffles (every lane holds it), then when G > 1 each warp's
 * in a shared slot, one barrier, and every thread takes the maximum of its
 * group's G slots. Every thread computes the scale from it (the same bits
 * in each), the group's first thread stores it, and each thread writes its
 * codes from its registers. No barrier when G is 1; otherwise one per
 * block step, which every thread of the block reaches (the step count is
 * the block's, not the row's), the slots double-buffered by the step's
 * parity so that one barrier per row suffices: a slot is written again
 * two steps later, after the barrier that follows every read of it.
 *
 * Over a Warp policy:
 *   int thread(), threads()              threadIdx.x, blockDim.x
 *   int64_t block(), blocks()            blockIdx.x, gridDim.x
 *   uint32_t shuffle_xor(uint32_t v, int lane_mask)
 *                                        __shfl_xor_sync over the full warp
 *   void barrier()                       __syncthreads
 *   uint32_t *slots()                    2 * FP8Q_QUANTIZE_ROWS_WARPS_PER_BLOCK
 *                                        words of the block's shared memory
 * kernels/quantize_rows.cu gives the GPU's; tests/quantize_rows_emulation.cpp
 * runs the loop on the host (shuffles as exchanges among a warp's fibers). */
template <int S, int D, typename Warp> struct quantize_rows_warps_thread {
    static_assert(S == FP8Q_FLOAT16 || S == FP8Q_BFLOAT16, "16-bit sources only");
    static_assert(D == FP8Q_FLOAT8_E4M3FN || D == FP8Q_FLOAT8_E5M2,
                  "saturating E4M3FN / E5M2 only");
    static constexpr int VECTOR = 8;
    static constexpr int CHUNKS = FP8Q_QUANTIZE_ROWS_WARP_CHUNKS;
    typedef packed<uint32_t, 4> source_vector;
    typedef packed<uint32_t, 2> code_words;

    const fp8q_quantize_rows_args &args;
    Warp &warp;
    const int group_threads; /* 32 G */
    const int group;         /* the row group of this thread, 0 .. R - 1 */
    const int rank;          /* this thread's place in its group */
    const int rows_per_step; /* R */
    const int row_vectors;   /* row_length / 8 */

    __host__ __device__ __forceinline__ quantize_rows_warps_thread(
        const fp8q_quantize_rows_args &args_, Warp &warp_)
        : args(args_), warp(warp_), group_threads(32 * args_.warps_per_row),
          group(warp_.thread() / group_threads), rank(warp_.thread() % group_threads),
          rows_per_step(warp_.threads() / group_threads),
          row_vectors((int)(args_.row_length / VECTOR))
    {
    }

    /* This thread's vectors of `row`; zeros past its end. */
    __host__ __device__ __forceinline__ void load(int64_t row, source_vector held[CHUNKS]) const
    {
        const source_vector *source = (const source_vector *)args.source + row * row_vectors;
#pragma unroll
        for (int c = 0; c < CHUNKS; c++) {
            const int v = c * group_threads + rank;
            if (v < row_vectors) {
                held[c] = source[v];
            }
            else {
#pragma unroll
                for (int w = 0; w < 4; w++) {
                    held[c].values[w] = 0u;
                }
            }
        }
    }

    /* The maximum of `bits` over the warp, in every lane. */
    __host__ __device__ __forceinline__ uint32_t warp_max(uint32_t bits) const
    {
#pragma unroll
        for (int lane_mask = 16; lane_mask > 0; lane_mask /= 2) {
            const uint32_t other = warp.shuffle_xor(bits, lane_mask);
            bits = other > bits ? other : bits;
        }
        return bits;
    }

    /* The row's scale (stored by the group's first thread) and its codes
     * from the held vectors. */
    __host__ __device__ __forceinline__ void quantize(int64_t row, uint32_t amax,
                                                      const source_vector held[CHUNKS]) const
    {
        const float scale =
            fp8q_scale_from_amax(fp8q_bits_to_float(amax), args.max, args.power_of_2);
        code_words *destination = (code_words *)(args.destination + row * args.row_length);
        quotient_scale divisor;
        if (rank == 0) {
            args.scale[row] = scale;
        }
        divisor.set(scale);
#pragma unroll
        for (int c = 0; c < CHUNKS; c++) {
            const int v = c * group_threads + rank;
            if (v < row_vectors) {
                float values[VECTOR];
#pragma unroll
                for (int k = 0; k < VECTOR; k++) {
                    values[k] = dtype_traits<S>::load(
                        (uint16_t)(held[c].values[k / 2] >> (16 * (k % 2))));
                }
                destination[v] = to_fp8_codes<D, true, VECTOR>(values, divisor);
            }
        }
    }

    __host__ __device__ __forceinline__ void run() const
    {
        const int warps_per_row = args.warps_per_row;
        const int warp_index = warp.thread() / 32; /* in the block */
        uint32_t *slots = warp.slots();
        int parity = 0;

        for (int64_t first = warp.block() * rows_per_step; first < args.n_rows;
             first += warp.blocks() * rows_per_step) {
            const int64_t row = first + group;
            const bool active = group < rows_per_step && row < args.n_rows;
            source_vector held[CHUNKS];
            uint32_t amax = 0u;
            if (active) { /* the whole warp alike */
                load(row, held);
                amax = warp_max(held_amax_bits16<S, CHUNKS>(held));
            }
            if (warps_per_row > 1) {
                uint32_t *step_slots = slots + parity * FP8Q_QUANTIZE_ROWS_WARPS_PER_BLOCK;
                if (warp.thread() % 32 == 0) {
                    step_slots[warp_index] = amax;
                }
                warp.barrier();
                amax = 0u;
                for (int w = 0; w < warps_per_row; w++) {
                    const uint32_t bits = step_slots[group * warps_per_row + w];
                    amax = bits > amax ? bits : amax;
                }
                parity ^= 1;
            }
            if (active) {
                quantize(row, amax, held);
            }
        }
    }
};

#endif /* FP8Q_KERNELS_QUANTIZE_ROWS_LOOP_CUH */
