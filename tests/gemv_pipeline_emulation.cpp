/*
 * gemv_pipeline_emulation.cpp - runs the weight-only tensor-core kernel's
 * copy pipeline (kernels/gemv_pipeline.cuh: fp8q_gemv_pipeline_walk) and
 * its cut of k into splits and warps (fp8q_gemv_split_chunks,
 * fp8q_gemv_warp_chunks) on the host, against a model of the GPU's
 * asynchronous copies: a copy issued into a stage lands at some moment
 * between its issue and the wait that covers its group (here: at a
 * random moment a group may complete early, and at the latest when
 * wait<N> leaves at most N groups pending), so a chunk read before its
 * group is waited for reads another chunk's codes, and a copy issued into
 * a stage whose chunk is not read yet overwrites it.
 *
 * Checks, for 2 to 5 stages and 0 to 40 chunks: every chunk is read once,
 * in order, from the stage it was copied into, with its own codes; no
 * copy targets a stage still holding an unread chunk; and the mutant
 * walk that waits for one group fewer (WAIT = STAGES) is caught. Then, for
 * k from 16 to 20,000 (multiples of 16) and 1 to FP8Q_GEMV_MAX_SPLITS
 * splits, that the splits' chunks of 32 and the 8 warps' shares of them
 * cover the chunks of k exactly once, each split starting on a 128-value
 * boundary; and that sm_75's register walk (fp8q_gemv_register_walk) uses
 * every chunk once, in order, its own codes. And the CUDA-core kernels'
 * walk over k (kernels/gemv.cu, fp8q_gemv_thread_first / _stride, stepped
 * as the kernel's loop steps them) for k from 16 to 20,000 and around
 * whole block steps up to 17 of them, 1 to FP8Q_GEMV_MAX_SPLITS splits:
 * over the 256 threads and the splits every 16 values of k are loaded
 * once, 16-byte aligned, nothing past k, each split only its own block
 * steps (gemv.cuh "Split k"), none empty where k holds a step a split, and
 * the unsplit walk is the one before the split existed; a walk that drops
 * the split from its stride or from its start is caught. With the
 * kernel's float32 order (fused multiply-adds along a thread's walk, the
 * warp's shuffle tree, the warps in order) each split's sum, added in
 * split order as fp8q_gemv_fp8_reduce adds them, is the exact product for
 * integer operands, and the same bits for random ones whatever order the
 * splits finish in (adding them in the order they finish is caught).
 * Built and run by tests/test_cuda_fp8_emulation.py:
 *
 *     g++ -O2 -Ikernels tests/gemv_pipeline_emulation.cpp -o pipeline
 *
 * Prints "MUST ...: N mismatches" lines and exits 1 on any mismatch.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include <algorithm>
#include <vector>

#include "gemv_pipeline.cuh"

/* A fixed-seed generator (xorshift64). */
static uint64_t random_state = 0x9E3779B97F4A7C15ull;
static uint64_t next_random(void)
{
    random_state ^= random_state << 13;
    random_state ^= random_state >> 7;
    random_state ^= random_state << 17;
    return random_state;
}

/* The GPU's asynchronous copies into a ring of stages, as the walk's Pipe. */
struct emulated_pipe {
    struct copy {
        int64_t chunk;
        int stage;
    };
    std::vector<int64_t> stage_codes;     /* what each stage holds now     */
    std::vector<int64_t> stage_unread;    /* chunk copied, not yet read    */
    std::vector<std::vector<copy>> groups; /* committed, not yet landed   */
    std::vector<copy> open;               /* issued since the last commit  */
    int64_t next_to_read = 0;
    long mismatches = 0;

    explicit emulated_pipe(int stages) : stage_codes(stages, -1), stage_unread(stages, -1) {}

    void land_oldest()
    {
        for (const copy &c : groups.front()) {
            stage_codes[c.stage] = c.chunk;
        }
        groups.erase(groups.begin());
    }
    void issue(int64_t chunk, int stage)
    {
        if (stage_unread[stage] >= 0) {
            mismatches++; /* overwrites a chunk nobody has read */
        }
        stage_unread[stage] = chunk;
        open.push_back(copy{chunk, stage});
        /* the oldest groups may land at any moment */
        while (!groups.empty() && next_random() % 4 == 0) {
            land_oldest();
        }
    }
    void commit()
    {
        groups.push_back(open);
        open.clear();
    }
    template <int N> void wait()
    {
        while ((int)groups.size() > N) {
            land_oldest();
        }
    }
    void consume(int64_t chunk, int stage)
    {
        if (chunk != next_to_read || stage_codes[stage] != chunk || stage_unread[stage] != chunk) {
            mismatches++;
        }
        stage_unread[stage] = -1;
        next_to_read = chunk + 1;
    }
};

/* Mismatches of the walk with STAGES stages and WAIT over 0..40 chunks, a
 * few random landing orders each (chunks never read count too). */
template <int STAGES, int WAIT> static long walk_mismatches(void)
{
    long mismatches = 0;
    for (int64_t count = 0; count <= 40; count++) {
        for (int trial = 0; trial < 8; trial++) {
            emulated_pipe pipe(STAGES);
            fp8q_gemv_pipeline_walk<STAGES, WAIT>(count, pipe);
            mismatches += pipe.mismatches + (pipe.next_to_read != count);
        }
    }
    return mismatches;
}

/* The register walk's Pipe (sm_75): a chunk's "codes" are its number;
 * checks each chunk is used once, in order, with its own codes, and that
 * no more than two chunks are held at once. */
struct register_pipe {
    struct codes_t {
        int64_t chunk;
    };
    int64_t next_to_use = 0;
    int64_t loaded = 0;
    long mismatches = 0;

    void load(int64_t chunk, codes_t &codes)
    {
        if (chunk != loaded || chunk > next_to_use + 1) {
            mismatches++;
        }
        codes.chunk = chunk;
        loaded = chunk + 1;
    }
    void use_codes(int64_t chunk, const codes_t &codes)
    {
        if (chunk != next_to_use || codes.chunk != chunk) {
            mismatches++;
        }
        next_to_use = chunk + 1;
    }
};

static long register_walk_mismatches(void)
{
    long mismatches = 0;
    for (int64_t count = 0; count <= 40; count++) {
        register_pipe pipe;
        fp8q_gemv_register_walk(count, pipe);
        mismatches += pipe.mismatches + (pipe.next_to_use != count);
    }
    return mismatches;
}

/* Mismatches of the cut of k: each chunk of 32 values below k taken by
 * exactly one (split, warp), splits starting at multiples of 128, no
 * chunk past k's last. */
static long split_mismatches(void)
{
    long mismatches = 0;
    for (int64_t k = 16; k <= 20000; k += 16) {
        const int64_t chunks = (k + 31) / 32;
        for (int32_t splits = 1; splits <= FP8Q_GEMV_MAX_SPLITS; splits++) {
            std::vector<int> taken(chunks, 0);
            for (int32_t split = 0; split < splits; split++) {
                int64_t first, end;
                fp8q_gemv_split_chunks(k, splits, split, 32, &first, &end);
                if (first < end && (first * 32) % FP8Q_GEMV_BLOCK != 0) {
                    mismatches++;
                }
                for (int warp = 0; warp < 8; warp++) {
                    const int64_t count = fp8q_gemv_warp_chunks(first, end, warp, 8);
                    for (int64_t c = 0; c < count; c++) {
                        const int64_t chunk = first + warp + c * 8;
                        if (chunk < first || chunk >= end || chunk >= chunks) {
                            mismatches++;
                        }
                        else {
                            taken[chunk]++;
                        }
                    }
                }
            }
            for (int64_t chunk = 0; chunk < chunks; chunk++) {
                mismatches += taken[chunk] != 1;
            }
        }
    }
    return mismatches;
}

/* The k0 values (each the first of 16) thread `thread` of split `split`
 * of `splits` loads, in the order the kernel's loop takes them. MUTANT 1
 * strides as if unsplit, 2 starts as split 0. */
static std::vector<int64_t> cuda_core_walk(int64_t k, uint32_t splits, uint32_t split,
                                           uint32_t thread, int mutant)
{
    std::vector<int64_t> loads;
    const int64_t stride = fp8q_gemv_thread_stride(mutant == 1 ? 1u : splits);
    for (int64_t k0 = fp8q_gemv_thread_first(mutant == 2 ? 0u : split, thread); k0 < k;
         k0 += stride) {
        loads.push_back(k0);
    }
    return loads;
}

/* Mismatches of the CUDA-core walk for one k and splits (see the top). */
static long cuda_core_k_mismatches(int64_t k, uint32_t splits, int mutant)
{
    std::vector<int> loaded((size_t)(k / FP8Q_GEMV_LANE_K), 0);
    long mismatches = 0;
    for (uint32_t split = 0; split < splits; split++) {
        size_t count = 0;
        for (uint32_t thread = 0; thread < FP8Q_GEMV_THREADS; thread++) {
            const std::vector<int64_t> loads = cuda_core_walk(k, splits, split, thread, mutant);
            if (splits == 1) { /* the walk before the split: warp w, lane l */
                const int64_t old_start = ((int64_t)(thread / 32) * 32 + thread % 32) * 16;
                for (size_t i = 0; i < loads.size(); i++) {
                    mismatches += loads[i] != old_start + (int64_t)i * 4096;
                }
                mismatches += loads.size() != (size_t)((k - old_start + 4095) / 4096 > 0
                                                           ? (k - old_start + 4095) / 4096
                                                           : 0);
            }
            for (int64_t k0 : loads) {
                if (k0 % FP8Q_GEMV_LANE_K != 0 || k0 + FP8Q_GEMV_LANE_K > k ||
                    (k0 / FP8Q_GEMV_STEP) % splits != split) {
                    mismatches++;
                }
                else {
                    loaded[(size_t)(k0 / FP8Q_GEMV_LANE_K)]++;
                }
            }
            count += loads.size();
        }
        mismatches += k >= (int64_t)splits * FP8Q_GEMV_STEP && count == 0;
    }
    for (int value : loaded) {
        mismatches += value != 1;
    }
    return mismatches;
}

static long cuda_core_walk_mismatches(int mutant)
{
    long mismatches = 0;
    for (uint32_t splits = 1; splits <= FP8Q_GEMV_MAX_SPLITS; splits++) {
        for (int64_t k = 16; k <= 20000; k += 16) {
            mismatches += cuda_core_k_mismatches(k, splits, mutant);
        }
        for (int64_t steps = 5; steps <= 17; steps++) {
            for (int64_t k = steps * FP8Q_GEMV_STEP - 32; k <= steps * FP8Q_GEMV_STEP + 32;
                 k += 16) {
                mismatches += cuda_core_k_mismatches(k, splits, mutant);
            }
        }
    }
    return mismatches;
}

/* Split `split`'s float32 sum of x . w (k values) as a block of the
 * CUDA-core kernel forms it: each thread's fused multiply-adds along its
 * walk, the warp's xor-shuffle tree, then the 8 warps in order. */
static float cuda_core_split_sum(const std::vector<float> &x, const std::vector<float> &w,
                                 uint32_t splits, uint32_t split)
{
    const int64_t k = (int64_t)x.size();
    float lanes[FP8Q_GEMV_THREADS];
    for (uint32_t thread = 0; thread < FP8Q_GEMV_THREADS; thread++) {
        float sum = 0.0f;
        for (int64_t k0 : cuda_core_walk(k, splits, split, thread, 0)) {
            for (int c = 0; c < FP8Q_GEMV_LANE_K; c++) {
                sum = fmaf(x[(size_t)(k0 + c)], w[(size_t)(k0 + c)], sum);
            }
        }
        lanes[thread] = sum;
    }
    float block = 0.0f;
    for (int warp = 0; warp < FP8Q_GEMV_THREADS / 32; warp++) {
        float *lane = lanes + warp * 32;
        for (int offset = 16; offset > 0; offset /= 2) {
            float next[32];
            for (int l = 0; l < 32; l++) {
                next[l] = lane[l] + lane[l ^ offset];
            }
            std::copy(next, next + 32, lane);
        }
        block = warp == 0 ? lane[0] : block + lane[0];
    }
    return block;
}

/* The reduce's sum of the splits' sums in split order, the splits having
 * finished in `finished` order (each writing its own slot); MUTANT adds
 * them in the order they finished instead. */
static float reduced(const std::vector<float> &x, const std::vector<float> &w, uint32_t splits,
                     const std::vector<uint32_t> &finished, int mutant)
{
    std::vector<float> partial(splits, 0.0f);
    float sum = 0.0f;
    for (size_t i = 0; i < finished.size(); i++) {
        partial[finished[i]] = cuda_core_split_sum(x, w, splits, finished[i]);
        if (mutant) {
            sum = i == 0 ? partial[finished[i]] : sum + partial[finished[i]];
        }
    }
    if (!mutant) {
        sum = partial[0];
        for (uint32_t split = 1; split < splits; split++) {
            sum = sum + partial[split];
        }
    }
    return sum;
}

/* Mismatches of the split sums: integer operands (exact in float32) give
 * the exact product for 1 to 16 splits; random ones the bits of splits
 * finishing in order 0, 1, ... for every other order tried. Returns the
 * mismatches, and through *mutant_caught whether adding in finishing
 * order changed some result. */
static long split_sum_mismatches(int *mutant_caught)
{
    long mismatches = 0;
    *mutant_caught = 0;
    for (int64_t k : {4096 * 3 + 48, 4096 * 16, 4096 * 17 - 16}) {
        std::vector<float> x((size_t)k), w((size_t)k);
        int64_t exact = 0;
        for (int64_t c = 0; c < k; c++) {
            const int xi = (int)(next_random() % 9) - 4, wi = (int)(next_random() % 15) - 7;
            x[(size_t)c] = (float)xi;
            w[(size_t)c] = (float)wi;
            exact += (int64_t)xi * wi;
        }
        for (uint32_t splits = 1; splits <= FP8Q_GEMV_MAX_SPLITS; splits++) {
            std::vector<uint32_t> order(splits);
            for (uint32_t s = 0; s < splits; s++) {
                order[s] = s;
            }
            mismatches += reduced(x, w, splits, order, 0) != (float)exact;
        }
        for (int64_t c = 0; c < k; c++) {
            x[(size_t)c] = (float)((double)(next_random() >> 11) / 9007199254740992.0 - 0.5);
            w[(size_t)c] = (float)((double)(next_random() >> 11) / 4503599627370496.0 - 1.0);
        }
        for (uint32_t splits = 2; splits <= FP8Q_GEMV_MAX_SPLITS; splits += 3) {
            std::vector<uint32_t> order(splits);
            for (uint32_t s = 0; s < splits; s++) {
                order[s] = s;
            }
            const float first = reduced(x, w, splits, order, 0);
            for (int trial = 0; trial < 4; trial++) {
                for (uint32_t s = splits - 1; s > 0; s--) {
                    std::swap(order[s], order[(size_t)(next_random() % (s + 1))]);
                }
                mismatches += reduced(x, w, splits, order, 0) != first;
                *mutant_caught |= reduced(x, w, splits, order, 1) != first;
            }
        }
    }
    return mismatches;
}

int main(void)
{
    const long walks = walk_mismatches<2, 1>() + walk_mismatches<3, 2>() +
                       walk_mismatches<4, 3>() + walk_mismatches<5, 4>();
    const long mutant = walk_mismatches<3, 3>();
    const long splits = split_mismatches();
    const long registers = register_walk_mismatches();
    printf("MUST pipeline walk, 2 to 5 stages, 0 to 40 chunks: %ld mismatches\n", walks);
    printf("MUST mutant walk waiting one group fewer caught: %ld mismatches\n",
           mutant > 0 ? 0L : 1L);
    printf("MUST splits and warps cover k once: %ld mismatches\n", splits);
    printf("MUST register walk (sm_75), 0 to 40 chunks: %ld mismatches\n", registers);
    const long cuda_core = cuda_core_walk_mismatches(0);
    const long cuda_core_mutants = (cuda_core_walk_mismatches(1) > 0 ? 0 : 1) +
                                   (cuda_core_walk_mismatches(2) > 0 ? 0 : 1);
    int order_mutant = 0;
    const long sums = split_sum_mismatches(&order_mutant);
    printf("MUST CUDA-core split walk covers k once, each split its steps: %ld mismatches\n",
           cuda_core);
    printf("MUST CUDA-core split walk mutants caught: %ld mismatches\n", cuda_core_mutants);
    printf("MUST CUDA-core split sums added in split order, exact and the same bits: "
           "%ld mismatches\n",
           sums);
    printf("MUST adding the splits as they finish caught: %ld mismatches\n",
           order_mutant ? 0L : 1L);
    return walks == 0 && mutant > 0 && splits == 0 && registers == 0 && cuda_core == 0 &&
                   cuda_core_mutants == 0 && sums == 0 && order_mutant
               ? 0
               : 1;
}
