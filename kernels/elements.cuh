/*
 * elements.cuh - the element conversions every kernel family shares, as
 * __host__ __device__ code: the dtype table (storage type, load as float32,
 * store from float32) built on the one scalar codec csrc/core/float_codec.h
 * and the run-time dispatch over it (dispatch_dtype), packed vectors, the
 * scaling division / multiplication, one element's cast, saturating
 * E4M3FN / E5M2 codes four at a time (with the quotient shortcut of
 * fp8_hardware.cuh), four FP8 codes decoded to float32 and four float32
 * values stored as float16 / bfloat16.
 *
 * Host and device alike so that the host programs of tests/ (cuda_fp8.h's
 * host emulation of the conversions) run the very code the kernels run;
 * the device-only helpers (thread indices, block reductions) are in
 * common.cuh, which includes this file. Every conversion goes through
 * float_codec.h, or is shown equal to it (kernels/README.md), so that the
 * GPU's results are bit-identical to the CPU's.
 */
#ifndef FP8Q_KERNELS_ELEMENTS_CUH
#define FP8Q_KERNELS_ELEMENTS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "core/cast.h"
#include "core/dtype.h"
#include "core/float_codec.h"
#include "fp8_hardware.cuh"

/* ------------------------------------------------------------------------- */
/* The dtype table                                                           */

/* dtype_traits<D>: storage type of fp8q_dtype D, its exact decode to float32
 * and its single rounding encode from float32. */
template <int D> struct dtype_traits;

template <> struct dtype_traits<FP8Q_FLOAT32> {
    typedef float storage;
    static __host__ __device__ __forceinline__ float load(float x) { return x; }
    static __host__ __device__ __forceinline__ float store(float x, int) { return x; }
};

template <> struct dtype_traits<FP8Q_FLOAT16> {
    typedef uint16_t storage;
    static __host__ __device__ __forceinline__ float load(uint16_t x) { return fp8q_decode_float16(x); }
    static __host__ __device__ __forceinline__ uint16_t store(float x, int) { return fp8q_encode_float16(x); }
};

template <> struct dtype_traits<FP8Q_BFLOAT16> {
    typedef uint16_t storage;
    static __host__ __device__ __forceinline__ float load(uint16_t x) { return fp8q_decode_bfloat16(x); }
    static __host__ __device__ __forceinline__ uint16_t store(float x, int) { return fp8q_encode_bfloat16(x); }
};

template <> struct dtype_traits<FP8Q_UINT8> {
    typedef uint8_t storage;
    static __host__ __device__ __forceinline__ float load(uint8_t x) { return (float)x; }
    static __host__ __device__ __forceinline__ uint8_t store(float x, int) { return fp8q_encode_uint8(x); }
};

/* E4M3FN and E5M2 (`format`): decoded by the codec's decode in its product
 * form (the same bits, fewer instructions; float_codec.h), and saturated
 * through the hardware conversion on sm_89+ (fp8_hardware.cuh: the same
 * function as the codec there). */
#define FP8Q_HARDWARE_FP8_TRAITS(D, format)                                  \
    template <> struct dtype_traits<D> {                                     \
        typedef uint8_t storage;                                             \
        static __host__ __device__ __forceinline__ float load(uint8_t x)     \
        {                                                                    \
            return fp8q_decode_##format##_by_product(x);                     \
        }                                                                    \
        static __host__ __device__ __forceinline__ uint8_t store(            \
            float x, int saturate)                                           \
        {                                                                    \
            return FP8Q_HARDWARE_FP8 && saturate                             \
                       ? fp8q_hardware_encode_##format(x)                    \
                       : fp8q_encode_##format(x, saturate);                  \
        }                                                                    \
    };

FP8Q_HARDWARE_FP8_TRAITS(FP8Q_FLOAT8_E4M3FN, e4m3fn)
FP8Q_HARDWARE_FP8_TRAITS(FP8Q_FLOAT8_E5M2, e5m2)

#undef FP8Q_HARDWARE_FP8_TRAITS

template <> struct dtype_traits<FP8Q_FLOAT8_E4M3FNUZ> {
    typedef uint8_t storage;
    static __host__ __device__ __forceinline__ float load(uint8_t x) { return fp8q_decode_e4m3fnuz(x); }
    static __host__ __device__ __forceinline__ uint8_t store(float x, int saturate) { return fp8q_encode_e4m3fnuz(x, saturate); }
};

template <> struct dtype_traits<FP8Q_FLOAT8_E5M2FNUZ> {
    typedef uint8_t storage;
    static __host__ __device__ __forceinline__ float load(uint8_t x) { return fp8q_decode_e5m2fnuz(x); }
    static __host__ __device__ __forceinline__ uint8_t store(float x, int saturate) { return fp8q_encode_e5m2fnuz(x, saturate); }
};

/* Calls body.template operator()<D>() for the runtime dtype; an unknown
 * dtype does nothing (the host validates dtypes before launching). */
template <typename Body>
static __host__ __device__ __forceinline__ void dispatch_dtype(int dtype, Body &body)
{
    switch (dtype) {
    case FP8Q_FLOAT32: body.template run<FP8Q_FLOAT32>(); break;
    case FP8Q_FLOAT16: body.template run<FP8Q_FLOAT16>(); break;
    case FP8Q_BFLOAT16: body.template run<FP8Q_BFLOAT16>(); break;
    case FP8Q_UINT8: body.template run<FP8Q_UINT8>(); break;
    case FP8Q_FLOAT8_E4M3FN: body.template run<FP8Q_FLOAT8_E4M3FN>(); break;
    case FP8Q_FLOAT8_E5M2: body.template run<FP8Q_FLOAT8_E5M2>(); break;
    case FP8Q_FLOAT8_E4M3FNUZ: body.template run<FP8Q_FLOAT8_E4M3FNUZ>(); break;
    case FP8Q_FLOAT8_E5M2FNUZ: body.template run<FP8Q_FLOAT8_E5M2FNUZ>(); break;
    default: break;
    }
}

/* ------------------------------------------------------------------------- */
/* Packed vectors                                                            */

/* N elements of T moved as one 4-, 8- or 16-byte load or store. */
template <typename T, int N> struct alignas(sizeof(T) * N) packed {
    T values[N];
};

/* Nonzero when `pointer` may be accessed with 16-byte vectors. */
static __host__ __device__ __forceinline__ int is_aligned16(const void *pointer)
{
    return ((uintptr_t)pointer & 15u) == 0u;
}

/* ------------------------------------------------------------------------- */
/* Scaling                                                                   */

/* value / factor (FP8Q_SCALE_DIVIDE, quantizing) or value * factor
 * (FP8Q_SCALE_MULTIPLY), correctly rounded and never contracted; a NaN
 * result takes the CPU's bits (fp8q_scaling_result), not the GPU's
 * canonical NaN 0x7FFFFFFF. */
static __host__ __device__ __forceinline__ float apply_scale(float value, float factor,
                                                          int multiply)
{
    return fp8q_scaling_result(multiply ? fp8q_multiply_rn(value, factor)
                                        : fp8q_divide_rn(value, factor),
                               value, factor);
}

static __host__ __device__ __forceinline__ float divide_by_scale(float value, float scale)
{
    return apply_scale(value, scale, 0);
}

/* ------------------------------------------------------------------------- */
/* Saturating E4M3FN / E5M2 codes, four at a time                            */

/* The saturating conversion of value[0..3], byte k for value[k]: on sm_89+
 * the paired conversions, the codec's codes except for NaN (RAW true) or
 * fixed up to them; elsewhere the codec. */
template <int D, bool RAW> struct saturating_encode4 {
    __host__ __device__ __forceinline__ uint32_t operator()(const float value[4]) const
    {
#if FP8Q_HARDWARE_FP8
        return RAW ? fp8q_hardware_encode4_raw<D == FP8Q_FLOAT8_E4M3FN>(value)
                   : fp8q_hardware_encode4<D == FP8Q_FLOAT8_E4M3FN>(value);
#else
        uint32_t codes = 0u;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            codes |= (uint32_t)dtype_traits<D>::store(value[k], 1) << (8 * k);
        }
        return codes;
#endif
    }
};

/* The codes of value[k] / divisor: the quotient shortcut where `usage`
 * (of `reciprocal`, from fp8q_quotient_reciprocal) allows and it gives
 * them (it declines every NaN code, so the raw conversion serves it), else
 * the exact division of the generic kernels. */
template <int D>
static __host__ __device__ __forceinline__ uint32_t quotient_codes4(const float value[4],
                                                                    float divisor,
                                                                    float reciprocal, int usage)
{
    uint32_t codes;
    if (usage != FP8Q_RECIPROCAL_UNUSABLE &&
        fp8q_quotient_codes4<D == FP8Q_FLOAT8_E4M3FN>(value, reciprocal, usage,
                                                        saturating_encode4<D, true>(), &codes)) {
        return codes;
    }
    float quotient[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        quotient[k] = apply_scale(value[k], divisor, 0);
    }
    return saturating_encode4<D, false>()(quotient);
}

/* A divisor s with RN(1 / s) and how the quotient shortcut may use it. */
struct quotient_scale {
    float divisor, reciprocal;
    int usage;

    __host__ __device__ quotient_scale()
        : divisor(1.0f), reciprocal(1.0f), usage(FP8Q_RECIPROCAL_UNUSABLE)
    {
    }

    __host__ __device__ __forceinline__ void set(float s)
    {
        divisor = s;
        usage = fp8q_quotient_reciprocal(s, &reciprocal);
    }
};

/* value[0 .. VECTOR) as saturating D codes (E4M3FN or E5M2), four to a
 * word, divided by `scale` when SCALED. */
template <int D, bool SCALED, int VECTOR>
static __host__ __device__ __forceinline__ packed<uint32_t, VECTOR / 4>
to_fp8_codes(const float value[VECTOR], const quotient_scale &scale)
{
    packed<uint32_t, VECTOR / 4> out;
#pragma unroll
    for (int q = 0; q < VECTOR / 4; q++) {
        out.values[q] = SCALED ? quotient_codes4<D>(value + 4 * q, scale.divisor,
                                                    scale.reciprocal, scale.usage)
                               : saturating_encode4<D, false>()(value + 4 * q);
    }
    return out;
}

/* ------------------------------------------------------------------------- */
/* Maximum of float32 magnitudes, as bits                                    */

/* |value| as bits: for non-negative floats the unsigned bit order is the
 * value order and every NaN lies above infinity, so the largest bits win
 * with NaN propagating (the rule of csrc/core/amax.c). */
static __host__ __device__ __forceinline__ uint32_t magnitude_bits(float value)
{
    return fp8q_float_to_bits(value) & 0x7FFFFFFFu;
}

/* The larger of a's and b's low halves, and of their high halves (16-bit
 * unsigned), in one word: one SIMD instruction on the GPU. */
static __host__ __device__ __forceinline__ uint32_t max_halves(uint32_t a, uint32_t b)
{
#if defined(__CUDA_ARCH__)
    return __vmaxu2(a, b);
#else
    const uint32_t low = (a & 0xFFFFu) > (b & 0xFFFFu) ? a & 0xFFFFu : b & 0xFFFFu;
    const uint32_t high = (a >> 16) > (b >> 16) ? a >> 16 : b >> 16;
    return high << 16 | low;
#endif
}

/* ------------------------------------------------------------------------- */
/* One element, and vectors of them                                          */

/* One element of a cast (kernels/cast.cuh): load, times or divided by
 * `factor` when has_scale, store; a same-dtype cast without a scale copies
 * the bits (NaN payloads kept), as on the CPU. */
template <int S, int D>
static __host__ __device__ __forceinline__ typename dtype_traits<D>::storage
cast_element(typename dtype_traits<S>::storage x, int has_scale, float factor, int multiply,
             int saturate)
{
    float value = dtype_traits<S>::load(x);
    if constexpr (S == D) {
        if (!has_scale) {
            return x;
        }
    }
    if (has_scale) {
        value = apply_scale(value, factor, multiply);
    }
    return dtype_traits<D>::store(value, saturate);
}

/* The vectors a cast from S to D moves in the loops compiled per pair
 * (the straight casts, fp8q_cast's compiled pairs): 16 bytes of the wider
 * side, at most 8 elements (the narrower side moves 4 or 8 bytes per
 * thread, still coalesced). */
template <int S, int D> struct cast_vectors {
    typedef typename dtype_traits<S>::storage source_t;
    typedef typename dtype_traits<D>::storage destination_t;
    static constexpr int WIDEST = sizeof(source_t) > sizeof(destination_t) ? sizeof(source_t)
                                                                            : sizeof(destination_t);
    static constexpr int VECTOR = 16 / WIDEST < 8 ? 16 / WIDEST : 8;
    typedef packed<source_t, VECTOR> source_vector;
    typedef packed<destination_t, VECTOR> destination_vector;
};

/* in[u] = vectors[v + u * threads] for each u < STEP where that is below
 * n_vectors: a grid-stride step's loads, all issued before any is used. */
template <int STEP, typename V>
static __host__ __device__ __forceinline__ void load_step(const V *vectors, int64_t v,
                                                          int64_t threads, int64_t n_vectors,
                                                          V in[STEP])
{
#pragma unroll
    for (int u = 0; u < STEP; u++) {
        if (v + u * threads < n_vectors) {
            in[u] = vectors[v + u * threads];
        }
    }
}

/* ------------------------------------------------------------------------- */
/* FP8 codes to float32, four at a time, and float32 to 16-bit floats         */

/* Whether fp8q_decode4_to_float16 is the fast decode of FP8 format W here:
 * always for E5M2 (a byte move), on sm_89+ for E4M3FN (the hardware
 * conversion); elsewhere the codec's product form is. */
template <int W> struct decode4_route {
    static constexpr bool E4M3 = W == FP8Q_FLOAT8_E4M3FN;
    static constexpr bool THROUGH_FLOAT16 = !E4M3 || FP8Q_HARDWARE_FP8;
};

/* The four values of E4M3FN or E5M2 codes `word` (byte k: value k) as
 * float32, exact for every finite code (a NaN code gives a NaN, not the
 * codec's bits). */
template <int W>
static __host__ __device__ __forceinline__ void decode4(uint32_t word, float out[4])
{
    if constexpr (decode4_route<W>::THROUGH_FLOAT16) {
        uint32_t pairs[2];
        fp8q_decode4_to_float16<decode4_route<W>::E4M3>(word, pairs);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            out[k] = __half2float(
                __ushort_as_half((unsigned short)(pairs[k / 2] >> (16 * (k % 2)))));
        }
    }
    else {
#pragma unroll
        for (int k = 0; k < 4; k++) {
            out[k] = dtype_traits<W>::load((uint8_t)(word >> (8 * k)));
        }
    }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define FP8Q_HARDWARE_PAIRS 1
#else
#define FP8Q_HARDWARE_PAIRS 0
#endif

/* value[0..3], none of them NaN, stored as D (float32, float16 or bfloat16)
 * into out[0..3]: dtype_traits<D>::store, each value rounded once to
 * nearest even, overflowing to infinity. HARDWARE (by default on sm_80+):
 * through the paired conversions cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32,
 * the same function for every value but NaN (kernels/README.md, "Casts
 * from FP8"). */
template <int D, bool HARDWARE = FP8Q_HARDWARE_PAIRS> struct float_store4 {
    __host__ __device__ __forceinline__ void
    operator()(const float value[4], typename dtype_traits<D>::storage out[4]) const
    {
        if constexpr (HARDWARE && D == FP8Q_FLOAT16) {
#pragma unroll
            for (int k = 0; k < 4; k += 2) {
                const __half2 pair = __floats2half2_rn(value[k], value[k + 1]);
                out[k] = __half_as_ushort(__low2half(pair));
                out[k + 1] = __half_as_ushort(__high2half(pair));
            }
        }
        else if constexpr (HARDWARE && D == FP8Q_BFLOAT16) {
#pragma unroll
            for (int k = 0; k < 4; k += 2) {
                const __nv_bfloat162 pair = __floats2bfloat162_rn(value[k], value[k + 1]);
                out[k] = __bfloat16_as_ushort(__low2bfloat16(pair));
                out[k + 1] = __bfloat16_as_ushort(__high2bfloat16(pair));
            }
        }
        else {
#pragma unroll
            for (int k = 0; k < 4; k++) {
                out[k] = dtype_traits<D>::store(value[k], 1);
            }
        }
    }
};

#endif /* FP8Q_KERNELS_ELEMENTS_CUH */
