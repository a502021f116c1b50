/*
 * quantize_rows.cu - one-pass per-row (per-token) dynamic quantization: a
 * block reads its row once into registers, reduces the row's amax, turns it
 * into the row's scale with csrc/core/scale_formula.h and writes the FP8
 * codes from the registers (saturating E4M3FN / E5M2 four at a time, with
 * the quotient shortcut: common.cuh, quotient_codes4). This is what
 * quantize(granularity="row") and so fp8q.linear / fp8q.torch W8A8 run per
 * call for activations.
 * Launch contract: kernels/quantize_rows.cuh.
 */
#include "common.cuh"
#include "core/scale_formula.h"
#include "quantize_rows.cuh"

static_assert(sizeof(fp8q_quantize_rows_args) == 64,
              "fp8q_quantize_rows_args must match the host's layout");

/* Thread t holds the elements (c * blockDim.x + t) * VECTOR + k of its row,
 * for chunk c and k < VECTOR: 16-byte vectors of the source, coalesced
 * across the warp; the register array is indexed by constants only. */
template <int S, int D>
static __device__ __noinline__ void quantize_rows_run(const fp8q_quantize_rows_args args)
{
    typedef typename dtype_traits<S>::storage source_t;
    constexpr int VECTOR = 16 / sizeof(source_t);
    constexpr int CHUNKS = FP8Q_QUANTIZE_ROWS_PER_THREAD / VECTOR;
    typedef packed<source_t, VECTOR> source_vector;
    typedef packed<uint8_t, VECTOR> code_vector;
    /* Saturating E4M3FN / E5M2 codes four at a time, with the quotient
     * shortcut (common.cuh: quotient_codes4); the fnuz formats and the
     * non-saturating modes one at a time. */
    constexpr bool FOUR_AT_A_TIME = D == FP8Q_FLOAT8_E4M3FN || D == FP8Q_FLOAT8_E5M2;
    __shared__ float row_scale;

    const int length = (int)args.row_length;
    const int vectors = length % VECTOR == 0 && is_aligned16(args.source) &&
                        (uintptr_t)args.destination % VECTOR == 0;
    int64_t row;

    for (row = blockIdx.x; row < args.n_rows; row += gridDim.x) {
        const source_t *source = (const source_t *)args.source + row * args.row_length;
        uint8_t *destination = args.destination + row * args.row_length;
        float values[FP8Q_QUANTIZE_ROWS_PER_THREAD];
        uint32_t amax = 0u;
        float scale;

#pragma unroll
        for (int c = 0; c < CHUNKS; c++) {
            const int first = (c * (int)blockDim.x + (int)threadIdx.x) * VECTOR;
            if (vectors && first < length) {
                const source_vector in = *(const source_vector *)(source + first);
#pragma unroll
                for (int k = 0; k < VECTOR; k++) {
                    values[c * VECTOR + k] = dtype_traits<S>::load(in.values[k]);
                }
            }
            else {
#pragma unroll
                for (int k = 0; k < VECTOR; k++) {
                    values[c * VECTOR + k] =
                        first + k < length ? dtype_traits<S>::load(source[first + k]) : 0.0f;
                }
            }
#pragma unroll
            for (int k = 0; k < VECTOR; k++) {
                amax = max(amax, magnitude_bits(values[c * VECTOR + k]));
            }
        }

        amax = block_max_bits(amax);
        if (threadIdx.x == 0) {
            row_scale = fp8q_scale_from_amax(fp8q_bits_to_float(amax), args.max, args.power_of_2);
            args.scale[row] = row_scale;
        }
        __syncthreads(); /* the next row's block_max_bits orders the next write */
        scale = row_scale;
        float reciprocal;
        const int usage = fp8q_quotient_reciprocal(scale, &reciprocal);

#pragma unroll
        for (int c = 0; c < CHUNKS; c++) {
            const int first = (c * (int)blockDim.x + (int)threadIdx.x) * VECTOR;
            code_vector out;
            if (FOUR_AT_A_TIME && args.saturate) {
                uint32_t *codes = (uint32_t *)out.values;
#pragma unroll
                for (int q = 0; q < VECTOR / 4; q++) {
                    codes[q] =
                        quotient_codes4<D>(values + c * VECTOR + 4 * q, scale, reciprocal, usage);
                }
            }
            else {
#pragma unroll
                for (int k = 0; k < VECTOR; k++) {
                    out.values[k] = dtype_traits<D>::store(
                        divide_by_scale(values[c * VECTOR + k], scale), args.saturate);
                }
            }
            if (vectors && first < length) {
                *(code_vector *)(destination + first) = out;
            }
            else {
#pragma unroll
                for (int k = 0; k < VECTOR; k++) {
                    if (first + k < length) {
                        destination[first + k] = out.values[k];
                    }
                }
            }
        }
    }
}

/* The FP8 destination, then the float source: 12 specialisations, not the
 * 64 of dispatch_dtype (the host sends no other dtypes). */
template <int S> static __device__ void quantize_rows_to(const fp8q_quantize_rows_args &args)
{
    switch (args.destination_dtype) {
    case FP8Q_FLOAT8_E4M3FN: quantize_rows_run<S, FP8Q_FLOAT8_E4M3FN>(args); break;
    case FP8Q_FLOAT8_E5M2: quantize_rows_run<S, FP8Q_FLOAT8_E5M2>(args); break;
    case FP8Q_FLOAT8_E4M3FNUZ: quantize_rows_run<S, FP8Q_FLOAT8_E4M3FNUZ>(args); break;
    case FP8Q_FLOAT8_E5M2FNUZ: quantize_rows_run<S, FP8Q_FLOAT8_E5M2FNUZ>(args); break;
    default: break;
    }
}

extern "C" __global__ void __launch_bounds__(FP8Q_QUANTIZE_ROWS_MAX_THREADS)
    fp8q_quantize_rows(const fp8q_quantize_rows_args args)
{
    switch (args.source_dtype) {
    case FP8Q_FLOAT32: quantize_rows_to<FP8Q_FLOAT32>(args); break;
    case FP8Q_FLOAT16: quantize_rows_to<FP8Q_FLOAT16>(args); break;
    case FP8Q_BFLOAT16: quantize_rows_to<FP8Q_BFLOAT16>(args); break;
    default: break;
    }
}
