/*
 * gemv_tensor_cores.cu - the weight-only FP8 product for 9 to 64 rows of x
 * on the tensor cores (kernels/gemv.cuh, "Tensor-core kernels"): past 8
 * rows the multiply-adds of the CUDA-core kernels (gemv.cu) cost more than
 * the weight's bytes, so here each warp decodes a 32-row x 32-value tile of
 * FP8 codes into float16 / bfloat16 (exact: every FP8 value is one of
 * theirs) in its own shared memory and multiplies it with 8-row slices of
 * x, read straight from memory, through WMMA's m8n32k16 shape (float32
 * accumulators). The weight is still read once, one byte a value: each
 * warp streams its chunks of codes through a ring of TC_STAGES buffers in
 * shared memory with asynchronous copies (<cuda_pipeline.h>:
 * __pipeline_memcpy_async, __pipeline_commit, __pipeline_wait_prior; the
 * order in gemv_pipeline.cuh), TC_STAGES - 1 chunks ahead of the one it
 * decodes, so a warp has 2 KiB of loads in flight and a block 16 KiB.
 * x (small) is served from the caches. A block's warps split k (and the
 * grid's y dimension too, where the weight has too few rows to fill the
 * GPU: gemv.cuh, "Split k"); the warps' sums meet in shared memory, added
 * in warp order, and one pass applies the scales and the bias and rounds
 * once into x's dtype (or stores the split's sums). WMMA is CUDA C++
 * (mma.h), no inline asm; its float16 shapes run on sm_70+, bfloat16 on
 * sm_80+; the asynchronous copies are sm_80's: on sm_75, where
 * <cuda_pipeline.h> would make them blocking copies, a warp holds its next
 * chunk in registers instead (gemv_pipeline.cuh's fp8q_gemv_register_walk)
 * and the block has no ring.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline.h>
#include <mma.h>

#include "common.cuh"
#include "gemv.cuh"
#include "gemv_common.cuh"
#include "gemv_pipeline.cuh"

/* WMMA's m8n32k16: 8 rows of x, 32 weight rows, 16 values of k a step. */
#define TC_X_ROWS 8
#define TC_WEIGHT_ROWS FP8Q_GEMV_TC_WEIGHT_ROWS
#define TC_K 16
/* Values of k a warp decodes at a time (one 16-byte load per 16 codes:
 * 32 rows x 32 codes is 2 loads a lane; 64 codes took more registers than
 * two blocks a multiprocessor leave), and the row stride of its tile in
 * shared memory (8 more values keep the rows off the same banks). */
#define TC_CHUNK 32
#define TC_STRIDE (TC_CHUNK + 8)
#define TC_WARPS (FP8Q_GEMV_THREADS / FP8Q_WARP_SIZE)
#define TC_LOADS (TC_WEIGHT_ROWS * TC_CHUNK / 16 / FP8Q_WARP_SIZE)
/* The warps' decoded tiles (20 KiB), then each warp's ring of TC_STAGES
 * chunks of raw codes (1 KiB each, 24 KiB): 44 KiB of static shared
 * memory, under the 48 KiB every architecture gives without opting in. */
#define TC_STAGES 3
#define TC_TILE_BYTES (TC_WARPS * TC_WEIGHT_ROWS * TC_STRIDE * 2)
/* Asynchronous copies exist from sm_80; <cuda_pipeline.h> turns them into
 * blocking copies below, where a copy's load would stall its warp before
 * the decode. There (sm_75) a warp keeps its next chunk in registers
 * instead (fp8q_gemv_register_walk), with no ring: 20 KiB of shared memory, so
 * Turing's 64 KiB hold three blocks, not one. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define TC_ASYNC_COPIES 0
#define TC_RAW_BYTES 0
#else
#define TC_ASYNC_COPIES 1
#define TC_RAW_BYTES (TC_WARPS * TC_STAGES * TC_WEIGHT_ROWS * TC_CHUNK)
#endif
#define TC_SHARED_BYTES (TC_TILE_BYTES + TC_RAW_BYTES)

static_assert(TC_SHARED_BYTES <= 48 * 1024, "static shared memory stays within 48 KiB");

static_assert(TC_LOADS == 2, "a lane loads 2 x 16 codes of a tile");
static_assert(TC_CHUNK <= FP8Q_GEMV_BLOCK && FP8Q_GEMV_BLOCK % TC_CHUNK == 0 &&
                  FP8Q_GEMV_BLOCK % TC_WEIGHT_ROWS == 0,
              "a chunk of a warp's tile lies in one 128 x 128 scale block");

/* The 16-bit type the tensor cores multiply for x's dtype. */
template <int X> struct tensor_core_type;
template <> struct tensor_core_type<FP8Q_FLOAT16> {
    typedef __half type;
    static __device__ __forceinline__ uint32_t pack(float low, float high)
    {
        const __half2 pair = __floats2half2_rn(low, high);
        return *(const uint32_t *)&pair;
    }
};
template <> struct tensor_core_type<FP8Q_BFLOAT16> {
    typedef __nv_bfloat16 type;
    static __device__ __forceinline__ uint32_t pack(float low, float high)
    {
        const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
        return *(const uint32_t *)&pair;
    }
};

/* Four codes of a 32-bit word as two packed pairs of the tensor cores'
 * type (exact: float16 and bfloat16 hold every FP8 value): float16 pairs
 * straight from fp8q_decode4_to_float16 where it is the fast decode, else
 * through float32 (elements.cuh: decode4). */
template <int X, int W>
static __device__ __forceinline__ uint2 decode_word(uint32_t word)
{
    if constexpr (X == FP8Q_FLOAT16 && decode4_route<W>::THROUGH_FLOAT16) {
        uint32_t pairs[2];
        fp8q_decode4_to_float16<decode4_route<W>::E4M3>(word, pairs);
        return make_uint2(pairs[0], pairs[1]);
    }
    else {
        float values[4];
        decode4<W>(word, values);
        return make_uint2(tensor_core_type<X>::pack(values[0], values[1]),
                          tensor_core_type<X>::pack(values[2], values[3]));
    }
}

/* The first row of x that 8-row slice `slice` multiplies: 8 * slice, but
 * the last slice ends at row m - 1 (m >= 8), so no slice reads past x; the
 * rows it shares with the slice before are written by that one. */
static __device__ __forceinline__ int64_t slice_first_row(int slice, int64_t m)
{
    const int64_t first = (int64_t)slice * TC_X_ROWS;
    return first + TC_X_ROWS <= m ? first : m - TC_X_ROWS;
}

/* A warp's copies of its chunks of codes into its ring of raw stages
 * (gemv_pipeline.cuh's Pipe). Chunk c of the walk is the block's chunk
 * first_chunk + c * TC_WARPS (weight rows first_row.., values 32 x that
 * onwards); lane `lane` copies pieces lane and lane + 32 (piece p: weight
 * row p / 2 of the group, codes 16 * (p % 2) onwards: 2 lanes a row's 32
 * contiguous bytes), zeros past n and k, and is the only reader of them,
 * so the lane's own wait suffices. consume hands each chunk to `use`. */
template <class Use> struct code_pipe {
    const fp8q_gemv_fp8_args &args;
    int64_t first_row, first_chunk;
    int lane;
    uint4 (*raw)[TC_LOADS * FP8Q_WARP_SIZE]; /* the warp's TC_STAGES stages */
    Use &use;

    __device__ __forceinline__ int64_t chunk_k(int64_t chunk) const
    {
        return (first_chunk + chunk * TC_WARPS) * TC_CHUNK;
    }
    /* Where the lane's piece t of chunk `chunk` starts in the weight, or
     * NULL past n or k (the piece is zeros). */
    __device__ __forceinline__ const uint8_t *piece_source(int64_t chunk, int t) const
    {
        const int piece = lane + FP8Q_WARP_SIZE * t;
        const int64_t row = first_row + piece / 2;
        const int64_t column = chunk_k(chunk) + 16 * (piece % 2);
        return row < args.n && column < args.k ? args.weight + row * args.k + column : NULL;
    }
    __device__ __forceinline__ void issue(int64_t chunk, int stage)
    {
#pragma unroll
        for (int t = 0; t < TC_LOADS; t++) {
            const uint8_t *source = piece_source(chunk, t);
            uint4 *piece = &raw[stage][lane + FP8Q_WARP_SIZE * t];
            if (source != NULL) {
                __pipeline_memcpy_async(piece, source, sizeof(uint4));
            }
            else {
                *piece = make_uint4(0u, 0u, 0u, 0u);
            }
        }
    }
    /* The register walk's (sm_75): a chunk's pieces held in registers,
     * loaded straight from memory, then used. */
    struct codes_t {
        uint4 piece[TC_LOADS];
    };
    __device__ __forceinline__ void load(int64_t chunk, codes_t &codes) const
    {
#pragma unroll
        for (int t = 0; t < TC_LOADS; t++) {
            const uint8_t *source = piece_source(chunk, t);
            codes.piece[t] =
                source != NULL ? *(const uint4 *)source : make_uint4(0u, 0u, 0u, 0u);
        }
    }
    __device__ __forceinline__ void use_codes(int64_t chunk, const codes_t &codes)
    {
        use(chunk_k(chunk), codes.piece);
    }
    __device__ __forceinline__ void commit() { __pipeline_commit(); }
    template <int N> __device__ __forceinline__ void wait() { __pipeline_wait_prior(N); }
    __device__ __forceinline__ void consume(int64_t chunk, int stage)
    {
        uint4 codes[TC_LOADS];
#pragma unroll
        for (int t = 0; t < TC_LOADS; t++) {
            codes[t] = raw[stage][lane + FP8Q_WARP_SIZE * t];
        }
        use(chunk_k(chunk), codes);
    }
};

/* WMMA's fragments for x's dtype X: 8 rows of x by 16 values of k, 16
 * values of k by 32 weight rows (the decoded tile, column-major), and the
 * 8 x 32 float32 sums. */
template <int X> struct fragments {
    typedef typename tensor_core_type<X>::type mma_t;
    typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, TC_X_ROWS, TC_WEIGHT_ROWS, TC_K,
                                   mma_t, nvcuda::wmma::row_major>
        x;
    typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, TC_X_ROWS, TC_WEIGHT_ROWS, TC_K,
                                   mma_t, nvcuda::wmma::col_major>
        weight;
    typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, TC_X_ROWS, TC_WEIGHT_ROWS, TC_K,
                                   float>
        sum;
};

/* into[s] += x's slice s (of `slices`) times the warp's decoded tile, for
 * the chunk's values k0.. (up to TC_CHUNK, fewer at the end of k). */
template <int X, int SLICES>
static __device__ __forceinline__ void
multiply_chunk(const fp8q_gemv_fp8_args &args, const typename tensor_core_type<X>::type *tile,
               int64_t k0, int slices, typename fragments<X>::sum (&into)[SLICES])
{
    typedef typename tensor_core_type<X>::type mma_t;
    const mma_t *x = (const mma_t *)args.x;
#pragma unroll
    for (int step = 0; step < TC_CHUNK / TC_K; step++) {
        typename fragments<X>::weight b;
        if (k0 + step * TC_K >= args.k) {
            break;
        }
        nvcuda::wmma::load_matrix_sync(b, tile + step * TC_K, TC_STRIDE);
#pragma unroll
        for (int s = 0; s < SLICES; s++) {
            typename fragments<X>::x a;
            if (s < slices) {
                nvcuda::wmma::load_matrix_sync(
                    a, x + slice_first_row(s, args.m) * args.k + k0 + step * TC_K,
                    (unsigned)args.k);
                nvcuda::wmma::mma_sync(into[s], a, b, into[s]);
            }
        }
    }
}

/* SLICES: the most 8-row slices of x (m <= 8 * SLICES); BLOCK_SCALES: the
 * kernel takes FP8Q_GEMV_SCALE_BLOCK (each chunk's sums, multiplied by its
 * block's scale, added to the totals), else only tensor and row scales. */
template <int X, int W, int SLICES, bool BLOCK_SCALES>
static __device__ __forceinline__ void tensor_core_run(const fp8q_gemv_fp8_args &args,
                                                       unsigned char *shared)
{
    using namespace nvcuda;
    typedef typename tensor_core_type<X>::type mma_t;
    typedef typename fragments<X>::sum sum_fragment;

    /* Each warp's decoded tile (weight row r, value c at [r][c]: the
     * column-major 16 x 32 operand B of x . W^T), then, after the k loop,
     * the block's sums (in the same memory). */
    mma_t(*const tiles)[TC_WEIGHT_ROWS][TC_STRIDE] = (mma_t(*)[TC_WEIGHT_ROWS][TC_STRIDE])shared;
    float(*const block_sums)[TC_X_ROWS][TC_WEIGHT_ROWS] =
        (float(*)[TC_X_ROWS][TC_WEIGHT_ROWS])shared;
    /* Each warp's ring of raw stages (none on sm_75: never read there). */
    uint4(*const raws)[TC_STAGES][TC_LOADS * FP8Q_WARP_SIZE] =
        (uint4(*)[TC_STAGES][TC_LOADS * FP8Q_WARP_SIZE])(shared + TC_TILE_BYTES);
    static_assert(TC_TILE_BYTES >= sizeof(float) * SLICES * TC_X_ROWS * TC_WEIGHT_ROWS,
                  "the block's sums fit in the tiles' memory");

    const int lane = (int)threadIdx.x % FP8Q_WARP_SIZE;
    const int warp = (int)threadIdx.x / FP8Q_WARP_SIZE;
    const int slices = (int)((args.m + TC_X_ROWS - 1) / TC_X_ROWS);
    const int64_t k_blocks = (args.k + FP8Q_GEMV_BLOCK - 1) / FP8Q_GEMV_BLOCK;
    int64_t group, first_chunk, end_chunk;

    fp8q_gemv_split_chunks(args.k, args.partial != NULL ? args.splits : 1,
                           args.partial != NULL ? (int32_t)blockIdx.y : 0, TC_CHUNK, &first_chunk,
                           &end_chunk);

    for (group = blockIdx.x; group * TC_WEIGHT_ROWS < args.n; group += gridDim.x) {
        const int64_t first_row = group * TC_WEIGHT_ROWS;
        sum_fragment sums[SLICES];

#pragma unroll
        for (int s = 0; s < SLICES; s++) {
            wmma::fill_fragment(sums[s], 0.0f);
        }
        /* Decode a chunk's codes into the warp's tile, multiply it into
         * the sums (a block scale per chunk: the chunk lies in one block). */
        auto use = [&](int64_t k0, const uint4 (&codes)[TC_LOADS]) {
            __syncwarp(); /* the previous chunk's products have read the tile */
#pragma unroll
            for (int t = 0; t < TC_LOADS; t++) {
                const int piece = lane + FP8Q_WARP_SIZE * t;
                uint4 *to = (uint4 *)&tiles[warp][piece / 2][16 * (piece % 2)];
                const uint2 a = decode_word<X, W>(codes[t].x), b = decode_word<X, W>(codes[t].y);
                const uint2 c = decode_word<X, W>(codes[t].z), d = decode_word<X, W>(codes[t].w);
                to[0] = make_uint4(a.x, a.y, b.x, b.y);
                to[1] = make_uint4(c.x, c.y, d.x, d.y);
            }
            __syncwarp(); /* the tile is whole before the warp reads it */

            if (BLOCK_SCALES) {
                sum_fragment chunk_sums[SLICES];
                const float factor =
                    args.scale[(first_row / FP8Q_GEMV_BLOCK) * k_blocks + k0 / FP8Q_GEMV_BLOCK];
#pragma unroll
                for (int s = 0; s < SLICES; s++) {
                    wmma::fill_fragment(chunk_sums[s], 0.0f);
                }
                multiply_chunk<X, SLICES>(args, &tiles[warp][0][0], k0, slices, chunk_sums);
#pragma unroll
                for (int s = 0; s < SLICES; s++) {
#pragma unroll
                    for (int e = 0; e < chunk_sums[s].num_elements; e++) {
                        sums[s].x[e] = __fmaf_rn(chunk_sums[s].x[e], factor, sums[s].x[e]);
                    }
                }
            }
            else {
                multiply_chunk<X, SLICES>(args, &tiles[warp][0][0], k0, slices, sums);
            }
        };
        code_pipe<decltype(use)> pipe = {args, first_row, first_chunk + warp, lane,
                                         raws[warp], use};
        const int64_t count = fp8q_gemv_warp_chunks(first_chunk, end_chunk, warp, TC_WARPS);
#if TC_ASYNC_COPIES
        fp8q_gemv_pipeline_walk<TC_STAGES>(count, pipe);
#else
        fp8q_gemv_register_walk(count, pipe);
#endif

        /* The warps' sums into block_sums, in warp order. */
        __syncthreads(); /* every warp is done with its tile */
        for (int w = 0; w < TC_WARPS; w++) {
            if (warp == w) {
#pragma unroll
                for (int s = 0; s < SLICES; s++) {
                    if (s < slices) {
                        float *to = &block_sums[s][0][0];
                        if (w > 0) {
                            sum_fragment before;
                            wmma::load_matrix_sync(before, to, TC_WEIGHT_ROWS,
                                                   wmma::mem_row_major);
#pragma unroll
                            for (int e = 0; e < before.num_elements; e++) {
                                sums[s].x[e] = __fadd_rn(before.x[e], sums[s].x[e]);
                            }
                        }
                        wmma::store_matrix_sync(to, sums[s], TC_WEIGHT_ROWS, wmma::mem_row_major);
                    }
                }
            }
            __syncthreads();
        }

        /* Scales, bias, one rounding into x's dtype; a slice writes the
         * rows no slice before it wrote. */
        for (int index = (int)threadIdx.x; index < slices * TC_X_ROWS * TC_WEIGHT_ROWS;
             index += FP8Q_GEMV_THREADS) {
            const int s = index / (TC_X_ROWS * TC_WEIGHT_ROWS);
            const int i = index / TC_WEIGHT_ROWS % TC_X_ROWS;
            const int j = index % TC_WEIGHT_ROWS;
            const int64_t x_row = slice_first_row(s, args.m) + i;
            const int64_t row = first_row + j;
            if (x_row >= (int64_t)s * TC_X_ROWS && row < args.n) {
                write_sum<X>(args, x_row, row, block_sums[s][i][j]);
            }
        }
        __syncthreads(); /* block_sums is the next group's tiles */
    }
}

/* x's dtype (bfloat16 needs sm_80: elsewhere the kernel is empty and the
 * host never launches it), then the weight's format. */
template <int SLICES, bool BLOCK_SCALES, int X>
static __device__ __forceinline__ void tensor_core_weight(const fp8q_gemv_fp8_args &args,
                                                          unsigned char *shared)
{
    if (args.weight_dtype == FP8Q_FLOAT8_E4M3FN) {
        tensor_core_run<X, FP8Q_FLOAT8_E4M3FN, SLICES, BLOCK_SCALES>(args, shared);
    }
    else if (args.weight_dtype == FP8Q_FLOAT8_E5M2) {
        tensor_core_run<X, FP8Q_FLOAT8_E5M2, SLICES, BLOCK_SCALES>(args, shared);
    }
}

template <int SLICES, bool BLOCK_SCALES>
static __device__ __forceinline__ void tensor_core_tile(const fp8q_gemv_fp8_args &args,
                                                        unsigned char *shared)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    if (args.x_dtype == FP8Q_FLOAT16) {
        tensor_core_weight<SLICES, BLOCK_SCALES, FP8Q_FLOAT16>(args, shared);
    }
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (args.x_dtype == FP8Q_BFLOAT16) {
        tensor_core_weight<SLICES, BLOCK_SCALES, FP8Q_BFLOAT16>(args, shared);
    }
#endif
}

/* Up to 16 rows of x, every scale kind. */
extern "C" __global__ void __launch_bounds__(FP8Q_GEMV_THREADS, 2)
    fp8q_gemv_fp8_tc16(const fp8q_gemv_fp8_args args)
{
    __shared__ __align__(32) unsigned char shared[TC_SHARED_BYTES];
    if (args.scale_kind == FP8Q_GEMV_SCALE_BLOCK) {
        tensor_core_tile<2, true>(args, shared);
    }
    else {
        tensor_core_tile<2, false>(args, shared);
    }
}

/* Up to 64 rows of x, tensor and row scales (block scales would need a
 * second set of sums per chunk: more registers than the tile can keep);
 * one block a multiprocessor, so that its 8 x 8 sums a lane stay in
 * registers. */
extern "C" __global__ void __launch_bounds__(FP8Q_GEMV_THREADS, 1)
    fp8q_gemv_fp8_tc64(const fp8q_gemv_fp8_args args)
{
    __shared__ __align__(32) unsigned char shared[TC_SHARED_BYTES];
    tensor_core_tile<8, false>(args, shared);
}
