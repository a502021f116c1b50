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
 * every chunk once, in order, its own codes. Built and run by
 * tests/test_cuda_fp8_emulation.py:
 *
 *     g++ -O2 -Ikernels tests/gemv_pipeline_emulation.cpp -o pipeline
 *
 * Prints "MUST ...: N mismatches" lines and exits 1 on any mismatch.
 */
#include <stdint.h>
#include <stdio.h>

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
    return walks == 0 && mutant > 0 && splits == 0 && registers == 0 ? 0 : 1;
}
