/*
 * gemv_pipeline.cuh - the order of the weight-only tensor-core kernel's
 * multi-stage copy pipeline (kernels/gemv_tensor_cores.cu), kept apart
 * from the CUDA code so that tests/gemv_pipeline_emulation.cpp runs the
 * very same walk on the host against deferred copies: which chunk is
 * copied into which stage, when a group of copies is committed, and how
 * many groups may still be in flight when a chunk is read; which chunks
 * of k a split and a warp take; and which values of k a thread of the
 * CUDA-core kernels (kernels/gemv.cu) loads in a split.
 *
 * Plain C++ (no CUDA header): the caller's Pipe supplies the operations
 * (on the GPU: __pipeline_memcpy_async, __pipeline_commit,
 * __pipeline_wait_prior from <cuda_pipeline.h>; no inline PTX).
 */
#ifndef FP8Q_KERNELS_GEMV_PIPELINE_CUH
#define FP8Q_KERNELS_GEMV_PIPELINE_CUH

#include <stdint.h>

#include "gemv.cuh"

#ifdef __CUDACC__
#define FP8Q_GEMV_PIPELINE_FUNCTION __host__ __device__ __forceinline__
#else
#define FP8Q_GEMV_PIPELINE_FUNCTION inline
#endif

/* Runs `count` chunks (0, 1, ..., count - 1) through a ring of STAGES
 * buffers: chunk c is copied into stage c % STAGES, STAGES - 1 chunks
 * ahead of the one being read. Every step commits exactly one group of
 * copies (empty past the last chunk), so before chunk c is read
 * c + STAGES groups have been committed and waiting until at most WAIT =
 * STAGES - 1 of them are pending leaves chunk c's group complete. A stage
 * is copied into again only in the step after the one that read it, and
 * Pipe::consume must have finished reading it by then (it does: the GPU
 * pipe decodes the stage into the warp's tile and __syncwarp()s before it
 * returns). WAIT is a parameter only so that the host emulation can check
 * that one fewer wait is caught; the kernels use the default.
 *
 * Pipe: issue(chunk, stage) starts the copies of a chunk, commit() closes
 * a group, wait<N>() waits until at most N groups are pending,
 * consume(chunk, stage) reads a chunk's stage. */
template <int STAGES, int WAIT = STAGES - 1, class Pipe>
FP8Q_GEMV_PIPELINE_FUNCTION void fp8q_gemv_pipeline_walk(int64_t count, Pipe &pipe)
{
    static_assert(STAGES >= 2, "a pipeline has at least two stages");
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < count) {
            pipe.issue((int64_t)s, s);
        }
        pipe.commit();
    }
    for (int64_t chunk = 0; chunk < count; chunk++) {
        const int64_t ahead = chunk + STAGES - 1;
        if (ahead < count) {
            pipe.issue(ahead, (int)(ahead % STAGES));
        }
        pipe.commit();
        pipe.template wait<WAIT>();
        pipe.consume(chunk, (int)(chunk % STAGES));
    }
}

/* The walk where copies cannot be asynchronous (sm_75, whose copies
 * through <cuda_pipeline.h> would block): chunk c + 1's codes are loaded
 * into registers (Pipe::codes_t) while chunk c is used, two chunks in
 * flight, no stages. Pipe: load(chunk, codes) reads a chunk into codes,
 * use_codes(chunk, codes) uses them. */
template <class Pipe>
FP8Q_GEMV_PIPELINE_FUNCTION void fp8q_gemv_register_walk(int64_t count, Pipe &pipe)
{
    typename Pipe::codes_t codes, next;

    if (count > 0) {
        pipe.load((int64_t)0, next);
    }
    for (int64_t chunk = 0; chunk < count; chunk++) {
        codes = next;
        if (chunk + 1 < count) {
            pipe.load(chunk + 1, next);
        }
        pipe.use_codes(chunk, codes);
    }
}

/* The chunks of `chunk` values of k (a divisor of FP8Q_GEMV_BLOCK) that
 * split `split` of `splits` takes (kernels/gemv.cuh, "Split k"; splits 1:
 * all of k): [*first, *end), the last one possibly ending past k_total
 * (the kernel's loads stop at k_total); *first == *end for an empty
 * split. */
FP8Q_GEMV_PIPELINE_FUNCTION void fp8q_gemv_split_chunks(int64_t k_total, int32_t splits,
                                                        int32_t split, int chunk,
                                                        int64_t *first, int64_t *end)
{
    const int64_t span = fp8q_gemv_split_span(k_total, splits);
    const int64_t begin = (int64_t)split * span;
    const int64_t stop = begin + span < k_total ? begin + span : k_total;
    *first = begin / chunk;
    *end = stop > begin ? (stop + chunk - 1) / chunk : *first;
}

/* How many of the chunks [first, end) warp `warp` of `warps` takes: first
 * + warp, first + warp + warps, ... (its walk's chunk c is first + warp +
 * c * warps). */
FP8Q_GEMV_PIPELINE_FUNCTION int64_t fp8q_gemv_warp_chunks(int64_t first, int64_t end, int warp,
                                                          int warps)
{
    return first + warp < end ? (end - first - warp + warps - 1) / warps : 0;
}

/* The CUDA-core kernels' walk over k (kernels/gemv.cu; kernels/gemv.cuh,
 * "Split k"): block step t holds the values [t * FP8Q_GEMV_STEP, (t + 1) *
 * FP8Q_GEMV_STEP), FP8Q_GEMV_LANE_K of them for each of the block's
 * FP8Q_GEMV_THREADS threads. A grid of `splits` rows (gridDim.y; 1
 * without a split) gives split s the block steps s, s + splits, s + 2
 * splits, ...: thread `thread` of split `split` loads the
 * FP8Q_GEMV_LANE_K values from fp8q_gemv_thread_first(split, thread),
 * then those every fp8q_gemv_thread_stride(splits) values further on,
 * while below k. */
FP8Q_GEMV_PIPELINE_FUNCTION int64_t fp8q_gemv_thread_first(uint32_t split, uint32_t thread)
{
    return ((int64_t)split * FP8Q_GEMV_THREADS + thread) * FP8Q_GEMV_LANE_K;
}

/* A 32-bit stride: splits is at most 65535 (a grid's y), so the product
 * stays below 2^28. */
FP8Q_GEMV_PIPELINE_FUNCTION int64_t fp8q_gemv_thread_stride(uint32_t splits)
{
    return (int64_t)((uint32_t)FP8Q_GEMV_STEP * splits);
}

#endif /* FP8Q_KERNELS_GEMV_PIPELINE_CUH */
