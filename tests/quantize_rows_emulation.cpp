/*
 * quantize_rows_emulation.cpp - runs the loops of fp8q_quantize_rows and
 * fp8q_quantize_rows_warps (kernels/quantize_rows_loop.cuh: the block loop
 * and the warp loop) on the host, each block of a grid as one fiber per GPU
 * thread, run from one __syncthreads or warp shuffle to the next (a
 * shuffle waits for the 32 fibers of its warp only), and compares every
 * row's scale and codes with
 * kernels/quantize_rows.cuh's contract computed through
 * csrc/core/float_codec.h (amax by float32 magnitude bits, the scale
 * formula, the codec's encode of x / scale).
 *
 * What it checks is the loop: the two register sets taking turns over the
 * rows b, b + grid, ... (grids smaller than, equal to and larger than the
 * row count), the held words of 16-bit sources and their amax taken two at
 * a time before one conversion (NaN payloads and subnormals included), vectors and
 * element-by-element rows (lengths not a whole number of vectors,
 * misaligned sources and destinations), the row's end inside a vector,
 * the block reduction and broadcast (threads run in random orders between
 * barriers; no thread may leave while others wait at one), each source,
 * format, saturate and power_of_2, and that nothing is written outside the
 * rows and scales. The warp loop runs the cases the host would give it
 * (fp8q_quantize_rows_warps_take) and more shapes of its own: one to eight
 * warps a row, partly idle last steps, several steps a block (its shared
 * slots' two parities), each warp's amax by emulated shuffles. The
 * conversions run through cuda_fp8.h / cuda_fp16.h's host code here, not
 * the GPU's instructions (tests/cuda_fp8_emulation.cpp checks those,
 * tests/test_cuda_ops.py the GPU). Built and run by
 * tests/test_cuda_fp8_emulation.py:
 *
 *     g++ -O2 -I/usr/local/cuda/include -Icsrc -Ikernels \
 *         tests/quantize_rows_emulation.cpp -o quantize_rows && ./quantize_rows
 *
 * Prints one line per source dtype and loop, and exits 1 on any mismatch.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <ucontext.h>

#include <functional>
#include <iterator>
#include <utility>
#include <vector>

#include "core/float_codec.h"
#include "core/scale_formula.h"
#include "host_random.h"
#include "quantize_rows_loop.cuh"

/* The data's generator, and the scheduler's (the threads' order). */
static host_random generator = {0x2545F4914F6CDD1Dull};
static host_random order_generator = {0x9E3779B97F4A7C15ull};

/* ------------------------------------------------------------------------- */
/* A block of fibers                                                         */

/* A block's threads as fibers (ucontext) run by a scheduler. A thread runs
 * until it reaches __syncthreads (synchronize), a warp shuffle (exchange) or
 * returns. A barrier releases its threads only when every thread of the
 * block that has not returned waits at it; a shuffle releases a warp's
 * lanes only when all 32 of them wait at it, whatever the other warps do
 * (other warps run on meanwhile, up to their own barrier or shuffle), and
 * each lane then reads its partner's value of that very shuffle (a warp's
 * values are double-buffered by its shuffle count). Runnable threads run in
 * a new random order each pass, so that a write by one thread and a read
 * by another with no barrier between them meet in the wrong order in some
 * pass. A barrier reached while some threads of the block have returned,
 * or a shuffle reached while lanes of its warp have returned or wait at a
 * barrier, is divergent (undefined on the GPU) and counted. Also the
 * block's shared memory: one slot per thread for the block loop's
 * reduction, one for its broadcast, and the warp loop's slots (garbage at
 * the start of each block, as on the GPU). */
struct fiber_block {
    static constexpr size_t STACK = 64 * 1024;
    enum { RUNNABLE, AT_BARRIER, AT_SHUFFLE };
    int threads = 0;
    int current = 0;
    ucontext_t scheduler;
    std::vector<ucontext_t> contexts;
    std::vector<std::vector<char>> stacks;
    std::vector<char> finished;
    std::vector<int> waiting;
    std::vector<uint32_t> slots;
    std::vector<uint32_t> exchanged[2]; /* by the warp's shuffle parity */
    std::vector<int> shuffles;          /* per warp: shuffles completed */
    std::vector<uint32_t> warp_slots;
    uint32_t maximum = 0u;
    float first = 0.0f;
    std::function<void(int)> body;
    int64_t divergent_rounds = 0;
    int64_t shuffles_run = 0;

    void synchronize()
    {
        waiting[(size_t)current] = AT_BARRIER;
        swapcontext(&contexts[(size_t)current], &scheduler);
    }

    /* __shfl_xor_sync(0xFFFFFFFF, value, lane_mask) for thread t. */
    uint32_t exchange(int t, uint32_t value, int lane_mask)
    {
        const int warp = t / 32;
        const int parity = shuffles[(size_t)warp] % 2;
        exchanged[parity][(size_t)t] = value;
        waiting[(size_t)t] = AT_SHUFFLE;
        swapcontext(&contexts[(size_t)t], &scheduler);
        return exchanged[parity][(size_t)(warp * 32 + ((t % 32) ^ lane_mask))];
    }

    static void entry(void);

    /* With no thread runnable: releases every warp waiting at a shuffle,
     * or if none, the barrier; false when nothing waits. */
    bool release()
    {
        bool released = false;
        for (int warp = 0; warp * 32 < threads; warp++) {
            int at_shuffle = 0;
            for (int t = warp * 32; t < warp * 32 + 32 && t < threads; t++) {
                at_shuffle += !finished[(size_t)t] && waiting[(size_t)t] == AT_SHUFFLE;
            }
            if (at_shuffle == 0) {
                continue;
            }
            divergent_rounds += at_shuffle != 32; /* lanes returned or at a barrier */
            for (int t = warp * 32; t < warp * 32 + 32 && t < threads; t++) {
                waiting[(size_t)t] = RUNNABLE;
            }
            shuffles[(size_t)warp]++;
            shuffles_run++;
            released = true;
        }
        if (released) {
            return true;
        }
        int at_barrier = 0, returned = 0;
        for (int t = 0; t < threads; t++) {
            at_barrier += !finished[(size_t)t] && waiting[(size_t)t] == AT_BARRIER;
            returned += finished[(size_t)t];
        }
        if (at_barrier == 0) {
            return false;
        }
        divergent_rounds += returned != 0 || at_barrier + returned != threads;
        for (int t = 0; t < threads; t++) {
            waiting[(size_t)t] = RUNNABLE;
        }
        return true;
    }

    /* Runs body(t) on `threads` fibers until all return. */
    void run(int threads_, std::function<void(int)> body_)
    {
        threads = threads_;
        body = std::move(body_);
        contexts.resize((size_t)threads);
        stacks.resize((size_t)threads);
        finished.assign((size_t)threads, 0);
        waiting.assign((size_t)threads, RUNNABLE);
        slots.assign((size_t)threads, 0u);
        exchanged[0].assign((size_t)threads, 0xDEADBEEFu);
        exchanged[1].assign((size_t)threads, 0xDEADBEEFu);
        shuffles.assign((size_t)(threads + 31) / 32, 0);
        warp_slots.assign(2 * FP8Q_QUANTIZE_ROWS_WARPS_PER_BLOCK, 0u);
        for (uint32_t &slot : warp_slots) {
            slot = generator.next();
        }
        for (int t = 0; t < threads; t++) {
            stacks[(size_t)t].resize(STACK);
            getcontext(&contexts[(size_t)t]);
            contexts[(size_t)t].uc_stack.ss_sp = stacks[(size_t)t].data();
            contexts[(size_t)t].uc_stack.ss_size = STACK;
            contexts[(size_t)t].uc_link = &scheduler;
            makecontext(&contexts[(size_t)t], entry, 0);
        }
        std::vector<int> order((size_t)threads);
        for (int t = 0; t < threads; t++) {
            order[(size_t)t] = t;
        }
        for (;;) {
            for (int t = threads - 1; t > 0; t--) { /* a new order each pass */
                std::swap(order[(size_t)t], order[(size_t)(order_generator.next() % (uint32_t)(t + 1))]);
            }
            bool ran = false;
            for (int turn = 0; turn < threads; turn++) {
                current = order[(size_t)turn];
                if (!finished[(size_t)current] && waiting[(size_t)current] == RUNNABLE) {
                    swapcontext(&scheduler, &contexts[(size_t)current]);
                    ran = true;
                }
            }
            if (!ran && !release()) {
                break; /* every thread returned (or a deadlock: counted below) */
            }
        }
        for (int t = 0; t < threads; t++) {
            divergent_rounds += !finished[(size_t)t]; /* never returned */
        }
    }
};

static fiber_block the_block;

void fiber_block::entry(void)
{
    const int t = the_block.current;
    the_block.body(t);
    the_block.finished[(size_t)t] = 1;
}

/* One fiber's place in its block and grid: what both policies share. */
struct host_place {
    fiber_block &shared;
    int index;
    int64_t block_index;
    int64_t grid;

    int thread() const { return index; }
    int threads() const { return shared.threads; }
    int64_t block() const { return block_index; }
    int64_t blocks() const { return grid; }
};

/* The Block policy of quantize_rows_loop.cuh for one fiber, with the GPU's
 * barriers: two in the reduction, one in the broadcast. */
struct host_block : host_place {
    uint32_t max_bits(uint32_t bits)
    {
        shared.slots[(size_t)index] = bits;
        shared.synchronize();
        if (index == 0) {
            uint32_t maximum = 0u;
            for (uint32_t slot : shared.slots) {
                maximum = slot > maximum ? slot : maximum;
            }
            shared.maximum = maximum;
        }
        shared.synchronize();
        return index == 0 ? shared.maximum : 0xDEADBEEFu; /* valid in thread 0 only */
    }

    float from_first_thread(float value)
    {
        if (index == 0) {
            shared.first = value;
        }
        shared.synchronize();
        return shared.first;
    }
};

/* The Warp policy of the warp loop (quantize_rows_warps_thread) for one
 * fiber: shuffles as exchanges among its warp's fibers, __syncthreads as
 * the block's barrier. */
struct host_warps : host_place {
    uint32_t shuffle_xor(uint32_t value, int lane_mask) const
    {
        return shared.exchange(index, value, lane_mask);
    }
    void barrier() const { shared.synchronize(); }
    uint32_t *slots() const { return shared.warp_slots.data(); }
};

template <int S, int D, bool SATURATE> static void run_block(const fp8q_quantize_rows_args &args,
                                                             int threads, int64_t block,
                                                             int64_t grid)
{
    the_block.run(threads, [&](int t) {
        if constexpr (SATURATE && S != FP8Q_FLOAT32 &&
                      (D == FP8Q_FLOAT8_E4M3FN || D == FP8Q_FLOAT8_E5M2)) {
            if (args.warps_per_row != 0) {
                host_warps place{{the_block, t, block, grid}};
                quantize_rows_warps_thread<S, D, host_warps>(args, place).run();
                return;
            }
        }
        host_block place{{the_block, t, block, grid}};
        quantize_rows_thread<S, D, SATURATE, host_block>(args, place).run();
    });
}

/* The launch: the host's block size (csrc/cuda/launch.c), every block of
 * `grid` in turn; the warp loop where args.warps_per_row is set (only for
 * arguments fp8q_quantize_rows_warps_take accepts), with its block. */
template <int S, int D>
static void launch(const fp8q_quantize_rows_args &args, int64_t grid)
{
    const int64_t warp_elements = 32 * FP8Q_QUANTIZE_ROWS_PER_THREAD;
    int threads = (int)(32 * ((args.row_length + warp_elements - 1) / warp_elements));
    if (args.warps_per_row != 0) {
        threads = 32 * args.warps_per_row *
                  (FP8Q_QUANTIZE_ROWS_WARPS_PER_BLOCK / args.warps_per_row);
    }
    for (int64_t block = 0; block < grid; block++) {
        if (args.saturate) {
            run_block<S, D, true>(args, threads, block, grid);
        }
        else {
            run_block<S, D, false>(args, threads, block, grid);
        }
    }
}

/* ------------------------------------------------------------------------- */
/* The contract through the codec                                            */

static float decode_source(const uint8_t *row, int64_t i, int source)
{
    uint16_t half;
    float single;
    switch (source) {
    case FP8Q_FLOAT16: memcpy(&half, row + 2 * i, 2); return fp8q_decode_float16(half);
    case FP8Q_BFLOAT16: memcpy(&half, row + 2 * i, 2); return fp8q_decode_bfloat16(half);
    default: memcpy(&single, row + 4 * i, 4); return single;
    }
}

static uint8_t encode(float value, int format, int saturate)
{
    switch (format) {
    case FP8Q_FLOAT8_E4M3FN: return fp8q_encode_e4m3fn(value, saturate);
    case FP8Q_FLOAT8_E5M2: return fp8q_encode_e5m2(value, saturate);
    case FP8Q_FLOAT8_E4M3FNUZ: return fp8q_encode_e4m3fnuz(value, saturate);
    default: return fp8q_encode_e5m2fnuz(value, saturate);
    }
}

static float format_max(int format)
{
    switch (format) {
    case FP8Q_FLOAT8_E4M3FN: return 448.0f;
    case FP8Q_FLOAT8_E4M3FNUZ: return 240.0f;
    default: return 57344.0f;
    }
}

/* Mismatching scales and codes of args against the contract. */
static int64_t mismatches(const fp8q_quantize_rows_args &args, int source)
{
    const size_t size = source == FP8Q_FLOAT32 ? 4 : 2;
    int64_t wrong = 0;
    for (int64_t r = 0; r < args.n_rows; r++) {
        const uint8_t *row = (const uint8_t *)args.source + (size_t)(r * args.row_length) * size;
        uint32_t amax = 0u;
        for (int64_t i = 0; i < args.row_length; i++) {
            const uint32_t bits = fp8q_float_to_bits(decode_source(row, i, source)) & 0x7FFFFFFFu;
            amax = bits > amax ? bits : amax;
        }
        const float scale =
            fp8q_scale_from_amax(fp8q_bits_to_float(amax), args.max, args.power_of_2);
        wrong += fp8q_float_to_bits(args.scale[r]) != fp8q_float_to_bits(scale);
        for (int64_t i = 0; i < args.row_length; i++) {
            const float x = decode_source(row, i, source);
            const uint8_t code = encode(fp8q_scaling_result(x / scale, x, scale),
                                        args.destination_dtype, args.saturate);
            wrong += args.destination[r * args.row_length + i] != code;
        }
    }
    return wrong;
}

/* ------------------------------------------------------------------------- */
/* Cases                                                                     */

/* Row r's element bits: kind 0 normal values of one magnitude per row
 * (2^-20 .. 2^20, within float16 for it), 1 random bit patterns (NaN
 * payloads, infinities, subnormals), 2 specials, 3 subnormals and zeros
 * only (the amax a subnormal). */
static uint32_t element_of(int source, int kind, int64_t r, int64_t i)
{
    if (kind == 3) {
        const uint32_t bits = generator.next();
        return source == FP8Q_FLOAT32    ? bits & 0x807FFFFFu
               : source == FP8Q_FLOAT16 ? bits & 0x83FFu
                                        : bits & 0x807Fu;
    }
    const int spread = source == FP8Q_FLOAT16 ? 8 : 20;
    const float magnitude = ldexpf(1.0f, (int)(r * 7 % (2 * spread + 1)) - spread);
    const float specials[] = {0.0f, -0.0f, 1e-40f, 448.0f, -57344.0f, 3.0e-5f, 65504.0f};
    float value;
    if (kind == 1) {
        const uint32_t bits = generator.next();
        return source == FP8Q_FLOAT32 ? bits : bits & 0xFFFFu;
    }
    if (kind == 2 && i < 7) {
        value = specials[i];
    }
    else {
        value = ((float)(generator.next() % 2000001u) / 1000000.0f - 1.0f) * magnitude;
    }
    if (r % 5 == 3) {
        value = 0.0f; /* a row of zeros: scale 1 */
    }
    switch (source) {
    case FP8Q_FLOAT16: return fp8q_encode_float16(value);
    case FP8Q_BFLOAT16: return fp8q_encode_bfloat16(value);
    default: return fp8q_float_to_bits(value);
    }
}

struct totals {
    int64_t cases = 0;
    int64_t values = 0;
    int64_t wrong = 0;
};

/* One case through the block loop, or (warps) through the warp loop where
 * the host would take it (else nothing: not counted). */
template <int S, int D>
static void run_case(int64_t n_rows, int64_t length, int64_t grid, int misalign_source,
                     int misalign_destination, int kind, int saturate, int power_of_2,
                     bool warps, totals *total)
{
    const size_t size = S == FP8Q_FLOAT32 ? 4 : 2;
    const size_t count = (size_t)(n_rows * length);
    std::vector<uint8_t> source_memory(count * size + 32);
    std::vector<uint8_t> destination_memory(count + 32);
    std::vector<float> scales((size_t)n_rows + 1);
    uint8_t *source = source_memory.data() + (16 - (uintptr_t)source_memory.data() % 16) % 16 +
                      misalign_source * size;
    uint8_t *destination = destination_memory.data() +
                           (16 - (uintptr_t)destination_memory.data() % 16) % 16 +
                           misalign_destination;
    for (int64_t r = 0; r < n_rows; r++) {
        for (int64_t i = 0; i < length; i++) {
            const uint32_t bits = element_of(S, kind, r, i);
            memcpy(source + (size_t)(r * length + i) * size, &bits, size);
        }
    }
    memset(destination_memory.data(), 0xA5, destination_memory.size());
    scales[(size_t)n_rows] = -1.0f;
    fp8q_quantize_rows_args args;
    memset(&args, 0, sizeof args);
    args.source = source;
    args.destination = destination;
    args.scale = scales.data();
    args.n_rows = n_rows;
    args.row_length = length;
    args.source_dtype = S;
    args.destination_dtype = D;
    args.max = format_max(D);
    args.power_of_2 = power_of_2;
    args.saturate = saturate;
    if (warps) {
        if (!fp8q_quantize_rows_warps_take(&args)) {
            return;
        }
        args.warps_per_row = fp8q_quantize_rows_warps_per_row(length);
    }
    const int64_t divergent = the_block.divergent_rounds;
    launch<S, D>(args, grid);
    int64_t wrong = mismatches(args, S) + the_block.divergent_rounds - divergent;
    for (size_t i = 0; i < destination_memory.size(); i++) { /* nothing outside */
        const bool inside = destination_memory.data() + i >= destination &&
                            destination_memory.data() + i < destination + count;
        wrong += !inside && destination_memory[i] != 0xA5;
    }
    wrong += scales[(size_t)n_rows] != -1.0f;
    if (wrong != 0 && total->wrong == 0) {
        printf("first mismatch: rows %lld length %lld grid %lld source+%d destination+%d "
               "kind %d format %d saturate %d power_of_2 %d: %lld wrong\n",
               (long long)n_rows, (long long)length, (long long)grid, misalign_source,
               misalign_destination, kind, D, saturate, power_of_2, (long long)wrong);
    }
    total->cases++;
    total->values += (int64_t)count;
    total->wrong += wrong;
}

/* The block loop's cases (warps false), or the warp loop's (warps true:
 * those cases it takes, and more shapes for it). */
template <int S, int D> static void run_format(bool warps, totals *total)
{
    struct shape {
        int64_t rows, length, grid;
    };
    /* Grids below, at and above the row count (the loop's turns: odd and
     * even rows per block, a block with no row), short rows, rows ending
     * inside a vector, one to three chunks a thread, the longest rows. */
    const shape shapes[] = {{1, 1, 1},     {7, 7, 2},       {10, 33, 3},   {9, 64, 4},
                            {12, 520, 5},  {5, 1000, 2},    {6, 4096, 7},  {4, 8, 9},
                            {3, 16384, 2}, {2, 16376, 1}};
    /* The warp loop's: 1 to 8 warps a row (G), rows a block (R = 8 / G)
     * with the last step's groups partly idle, several steps a block (the
     * slots' two parities), grids above the steps, rows ending inside a
     * warp's vectors and inside the last chunk. */
    const shape warp_shapes[] = {{17, 8, 1},     {19, 56, 2},    {9, 2040, 1},  {33, 1024, 2},
                                 {13, 2056, 3},  {7, 6144, 2},   {5, 4104, 4},  {11, 4096, 1},
                                 {6, 10248, 2},  {3, 14336, 5},  {5, 8192, 1}};
    const std::vector<shape> all = warps ? std::vector<shape>(std::begin(warp_shapes),
                                                              std::end(warp_shapes))
                                         : std::vector<shape>();
    std::vector<shape> cases(std::begin(shapes), std::end(shapes));
    cases.insert(cases.end(), all.begin(), all.end());
    for (const shape &s : cases) {
        for (int kind = 0; kind < 4; kind++) {
            for (int mode = 0; mode < 3; mode++) {
                const int saturate = mode != 2;
                const int power_of_2 = mode == 1;
                const bool long_row = s.length > 1000;
                if (long_row && (kind != 0 || mode != 0) && !(warps && kind == 1)) {
                    continue; /* rows of 256 threads and more: once each */
                }
                run_case<S, D>(s.rows, s.length, s.grid, 0, 0, kind, saturate, power_of_2,
                               warps, total);
                run_case<S, D>(s.rows, s.length, s.grid, 1, 0, kind, saturate, power_of_2,
                               warps, total);
                run_case<S, D>(s.rows, s.length, s.grid, 0, 3, kind, saturate, power_of_2,
                               warps, total);
            }
        }
    }
}

template <int S> static int run_source(const char *name, bool warps)
{
    totals total;
    run_format<S, FP8Q_FLOAT8_E4M3FN>(warps, &total);
    run_format<S, FP8Q_FLOAT8_E5M2>(warps, &total);
    run_format<S, FP8Q_FLOAT8_E4M3FNUZ>(warps, &total);
    run_format<S, FP8Q_FLOAT8_E5M2FNUZ>(warps, &total);
    printf("MUST %s rows (%s loop), %lld cases, %lld values: %lld mismatches\n", name,
           warps ? "warp" : "block", (long long)total.cases, (long long)total.values,
           (long long)total.wrong);
    return total.wrong != 0 || total.cases == 0;
}

int main(void)
{
    int failed = 0;
    failed |= run_source<FP8Q_FLOAT32>("float32", false);
    failed |= run_source<FP8Q_FLOAT16>("float16", false);
    failed |= run_source<FP8Q_BFLOAT16>("bfloat16", false);
    const int64_t shuffles = the_block.shuffles_run;
    failed |= run_source<FP8Q_FLOAT16>("float16", true);
    failed |= run_source<FP8Q_BFLOAT16>("bfloat16", true);
    printf("warp shuffles emulated: %lld\n", (long long)(the_block.shuffles_run - shuffles));
    return failed;
}
