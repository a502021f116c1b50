/*
 * cast.cuh - launch contract of the cast kernel (kernels/cast.cu).
 *
 * Plain C as well as CUDA C++: the host side (csrc/cuda/, plain C) includes
 * this header for the argument struct and the kernel's name, and launches
 * the kernel from the embedded fatbin through the driver API.
 *
 * Kernels "fp8q_cast" (FP8Q_CAST_KERNEL) and "fp8q_cast_uniform"
 * (FP8Q_CAST_UNIFORM_KERNEL), extern "C", one parameter:
 *
 *     __global__ void fp8q_cast(const fp8q_cast_args args);
 *     __global__ void fp8q_cast_uniform(const fp8q_cast_args args);
 *
 *   The same function; fp8q_cast_uniform only for scale NULL or one scale
 *   for the whole run (both strides 0; it never reads the strides, the
 *   block extents or the divisors), and fp8q_cast for the rest (fp8q_cast
 *   with scale NULL is not allowed). The uniform kernel keeps fewer
 *   registers, so more of its blocks fit on a multiprocessor.
 *
 *   cuLaunchKernel(function, grid, 1, 1, block, 1, 1, 0, stream,
 *                  params, NULL) with void *params[] = {&args}.
 *
 *   block  FP8Q_CAST_THREADS (256) threads at most (the kernels' launch
 *          bounds), a multiple of 32; no dynamic shared memory.
 *   grid   any size >= 1: a grid-stride loop covers `count` (enough blocks
 *          to fill the device, e.g. ceil(count / (block * 16)) capped at a
 *          few blocks per multiprocessor, suffices).
 *
 * For i in [0, count):
 *     destination[i] = store(load(source[i]) op scale(i))
 * with load/store the exact decode and single-rounding encode of
 * csrc/core/float_codec.h (bit-identical to csrc/core/cast.c), op a correctly
 * rounded float32 division or multiplication, and no scaling when scale is
 * NULL. A same-dtype cast without a scale copies the bits (NaN payloads
 * kept), as on the CPU.
 *
 * Scale addressing: the run is read as rows of row_length elements; element
 * i = row * row_length + column uses
 *     scale[(row / scale_block_rows) * scale_row_stride
 *           + (column / scale_block_cols) * scale_col_stride]
 * (strides in float32 elements, 0 to broadcast). Both strides 0 is one
 * scale for the whole run; row scales of an (M, N) run are row_length N,
 * blocks 1 x N, strides (1, 0); column scales strides (0, 1) with blocks
 * 1 x 1; (1, 128) blocks are blocks 1 x 128 with strides (ceil(N / 128), 1).
 *
 * Pointers are device pointers aligned to their element size; when source
 * and destination are both 16-byte aligned the kernel moves 16-byte vectors
 * and finishes the run element by element. source and destination must not
 * overlap, except as the very same address with equal element sizes.
 *
 * Kernel "fp8q_cast_to_fp8" (FP8Q_CAST_TO_FP8_KERNEL), the same parameter,
 * launch and function, for the arguments fp8q_cast_to_fp8_takes accepts
 * only: source float32, float16 or bfloat16; destination float8_e4m3fn or
 * float8_e5m2; saturate nonzero; scale NULL, or divide with one scale for
 * the run or one scale per row (scale_col_stride 0, scale_block_rows 1:
 * row r divides by scale[r * scale_row_stride]) with row_length a multiple
 * of 4 (float32 source) or 8 (16-bit source) elements, the kernel's vector.
 * It alone takes infinity_to_nan (nonzero), with one scale for the run: the
 * static-scale quantize of fp8q.torch's W8A8 layer, where a token holding an
 * infinity must give NaN codes (so its row of the product is NaN) rather
 * than the saturated largest code. fp8q_cast, fp8q_cast_uniform and
 * fp8q_cast_from_fp8 take infinity_to_nan 0 only.
 *
 * Kernel "fp8q_cast_from_fp8" (FP8Q_CAST_FROM_FP8_KERNEL), the same
 * parameter, launch and function, for the arguments
 * fp8q_cast_from_fp8_takes accepts only: source float8_e4m3fn or
 * float8_e5m2; destination float32, float16 or bfloat16; amax_bits NULL;
 * scale NULL, or multiply with one scale for the run, or with any scale
 * addressing above whose groups hold whole vectors: row_length a multiple
 * of the vector (4 elements for a float32 destination, else 8) and, unless
 * scale_col_stride is 0, scale_block_cols too.
 *
 * Both: any compute capability; faster than fp8q_cast / fp8q_cast_uniform
 * for these arguments (kernels/straight_cast.cuh), and launched in their
 * place by fp8q_cuda_launch_cast.
 *
 * Kernel "fp8q_cast_from_fp8_wide" (FP8Q_CAST_FROM_FP8_WIDE_KERNEL), the
 * same parameter and function as fp8q_cast_from_fp8, for the arguments
 * fp8q_cast_from_fp8_wide_takes accepts only: those of fp8q_cast_from_fp8
 * with source and destination 16-byte aligned, count a multiple of
 * FP8Q_CAST_WIDE_CODES (16) and, when the scales have a stride, row_length
 * and (unless scale_col_stride is 0) scale_block_cols multiples of 16 too:
 * each thread reads 16 codes with one 16-byte load and writes them with
 * 16-byte stores (two for float16 / bfloat16, four for float32), one scale
 * read per 16 codes. The weight decode of the W8A16 layer above the
 * weight-only kernels' token counts, and every fp8q.dequantize of whole
 * 16-code vectors. Launch: FP8Q_CAST_THREADS threads a block and a grid
 * that grows with the input, fp8q_cast_wide_blocks(count, threads) (one
 * vector a thread); a smaller grid is correct too (a grid-stride loop).
 * fp8q_cuda_launch_cast launches it in fp8q_cast_from_fp8's place where it
 * takes the arguments; the others (unaligned pointers, an odd row length,
 * a tail) keep fp8q_cast_from_fp8.
 */
#ifndef FP8Q_KERNELS_CAST_CUH
#define FP8Q_KERNELS_CAST_CUH

#include <stdint.h>

#include "core/cast.h"
#include "core/dtype.h"
#include "core/fast_divide.h"

#define FP8Q_CAST_KERNEL "fp8q_cast"
#define FP8Q_CAST_UNIFORM_KERNEL "fp8q_cast_uniform"
#define FP8Q_CAST_TO_FP8_KERNEL "fp8q_cast_to_fp8"
#define FP8Q_CAST_FROM_FP8_KERNEL "fp8q_cast_from_fp8"
#define FP8Q_CAST_FROM_FP8_WIDE_KERNEL "fp8q_cast_from_fp8_wide"

/* This file's kernels, X(fp8q_cuda_kernel value, name in the image)
 * each: csrc/registries.py collects every header's list into
 * cuda/kernel_list.h's FP8Q_CUDA_KERNEL_LIST. */
#define FP8Q_CAST_KERNELS(X)                                          \
    X(FP8Q_KERNEL_CAST, FP8Q_CAST_KERNEL)                             \
    X(FP8Q_KERNEL_CAST_UNIFORM, FP8Q_CAST_UNIFORM_KERNEL)             \
    X(FP8Q_KERNEL_CAST_TO_FP8, FP8Q_CAST_TO_FP8_KERNEL)               \
    X(FP8Q_KERNEL_CAST_FROM_FP8, FP8Q_CAST_FROM_FP8_KERNEL)           \
    X(FP8Q_KERNEL_CAST_FROM_FP8_WIDE, FP8Q_CAST_FROM_FP8_WIDE_KERNEL)

/* Codes a thread of fp8q_cast_from_fp8_wide reads at once (16 bytes). */
#define FP8Q_CAST_WIDE_CODES 16
#define FP8Q_CAST_THREADS 256

/* 152 bytes, no padding: pointers first, then 64-bit integers and the
 * 8-byte aligned divisors, then 32-bit integers, so the host's C compiler
 * and nvcc lay it out identically on 64-bit targets. */
typedef struct fp8q_cast_args {
    const void *source;       /* count elements of source_dtype             */
    void *destination;        /* count elements of destination_dtype        */
    const float *scale;       /* NULL (no scale) or float32 scales, above   */
    uint32_t *amax_bits;      /* NULL, or raised (atomicMax) to the float32
                                 bits of max |load(source[i])| over the run,
                                 before scaling; NaN wins. Holds the bits
                                 of a non-negative float32, e.g. 0.0f. */
    int64_t count;            /* elements, >= 0                             */
    int64_t row_length;       /* >= 1; used only when scale has a stride    */
    int64_t scale_block_rows; /* >= 1                                       */
    int64_t scale_block_cols; /* >= 1                                       */
    int64_t scale_row_stride; /* >= 0, in float32 elements                  */
    int64_t scale_col_stride; /* >= 0, in float32 elements                  */
    /* fp8q_fast_divisor_make of row_length, scale_block_rows and
     * scale_block_cols: the kernel divides with these (no 64-bit division
     * per element); fp8q_cuda_launch_cast fills them. */
    fp8q_fast_divisor by_row_length;
    fp8q_fast_divisor by_block_rows;
    fp8q_fast_divisor by_block_cols;
    int32_t source_dtype;     /* an fp8q_dtype value (core/dtype.h)         */
    int32_t destination_dtype;/* an fp8q_dtype value                        */
    int32_t scale_op;         /* an fp8q_scale_op value: 0 divide, 1 multiply */
    int32_t saturate;         /* nonzero: FP8 overflow saturates to +-max   */
    int32_t infinity_to_nan;  /* nonzero: each infinite source element is
                                 cast as the quiet NaN of its sign
                                 (fp8q_infinity_as_nan), so it becomes the
                                 FP8 NaN code instead of saturating;
                                 fp8q_cast_to_fp8 with one scale only      */
    int32_t unused;           /* 0                                          */
} fp8q_cast_args;

/* Nonzero when `args` has one scale for the whole run (both strides 0). */
FP8Q_CODEC int fp8q_cast_one_scale(const fp8q_cast_args *args)
{
    return args->scale_row_stride == 0 && args->scale_col_stride == 0;
}

/* Nonzero when fp8q_cast_uniform takes `args` (no scale or one scale); the
 * host's choice and the fake driver's check. */
FP8Q_CODEC int fp8q_cast_uniform_takes(const fp8q_cast_args *args)
{
    return !args->infinity_to_nan && (args->scale == NULL || fp8q_cast_one_scale(args));
}

/* Nonzero when fp8q_cast_to_fp8 takes `args` (above); the host's choice and
 * the fake driver's check. */
static inline int fp8q_cast_to_fp8_takes(const fp8q_cast_args *args)
{
    const int64_t vector = args->source_dtype == FP8Q_FLOAT32 ? 4 : 8;
    const int source_ok = args->source_dtype == FP8Q_FLOAT32 ||
                          args->source_dtype == FP8Q_FLOAT16 ||
                          args->source_dtype == FP8Q_BFLOAT16;
    const int destination_ok = args->destination_dtype == FP8Q_FLOAT8_E4M3FN ||
                               args->destination_dtype == FP8Q_FLOAT8_E5M2;
    const int one_scale = fp8q_cast_one_scale(args);
    const int scale_per_row = args->scale_col_stride == 0 && args->scale_block_rows == 1 &&
                              args->row_length % vector == 0;
    return source_ok && destination_ok && args->saturate != 0 &&
           (args->infinity_to_nan ? args->scale != NULL && args->scale_op == FP8Q_SCALE_DIVIDE &&
                                        one_scale
                                  : args->scale == NULL ||
                                        (args->scale_op == FP8Q_SCALE_DIVIDE &&
                                         (one_scale || scale_per_row)));
}

/* Nonzero when fp8q_cast_from_fp8 takes `args` (above); the host's choice
 * and the fake driver's check. */
static inline int fp8q_cast_from_fp8_takes(const fp8q_cast_args *args)
{
    const int64_t vector = args->destination_dtype == FP8Q_FLOAT32 ? 4 : 8;
    const int source_ok = args->source_dtype == FP8Q_FLOAT8_E4M3FN ||
                          args->source_dtype == FP8Q_FLOAT8_E5M2;
    const int destination_ok = args->destination_dtype == FP8Q_FLOAT32 ||
                               args->destination_dtype == FP8Q_FLOAT16 ||
                               args->destination_dtype == FP8Q_BFLOAT16;
    const int one_scale = fp8q_cast_one_scale(args);
    const int whole_vectors = args->row_length % vector == 0 &&
                              (args->scale_col_stride == 0 ||
                               args->scale_block_cols % vector == 0);
    return source_ok && destination_ok && args->amax_bits == NULL && !args->infinity_to_nan &&
           (args->scale == NULL ||
            (args->scale_op == FP8Q_SCALE_MULTIPLY && (one_scale || whole_vectors)));
}

/* Nonzero when fp8q_cast_from_fp8_wide takes `args` (above): those of
 * fp8q_cast_from_fp8 whose pointers, count and scale groups hold whole
 * 16-code vectors; the host's choice and the fake driver's check. */
static inline int fp8q_cast_from_fp8_wide_takes(const fp8q_cast_args *args)
{
    const int64_t codes = FP8Q_CAST_WIDE_CODES;
    const int aligned = ((uintptr_t)args->source & 15u) == 0 &&
                        ((uintptr_t)args->destination & 15u) == 0;
    const int whole_vectors = args->scale == NULL || fp8q_cast_one_scale(args) ||
                              (args->row_length % codes == 0 &&
                               (args->scale_col_stride == 0 ||
                                args->scale_block_cols % codes == 0));
    return fp8q_cast_from_fp8_takes(args) && aligned && args->count % codes == 0 &&
           whole_vectors;
}

/* The grid of fp8q_cast_from_fp8_wide over `count` codes with `threads` a
 * block: one 16-code vector a thread (at least 1 block, at most the
 * driver's 2^31 - 1; the kernel's loop takes any remainder). */
static inline unsigned int fp8q_cast_wide_blocks(int64_t count, int64_t threads)
{
    const int64_t per_block = threads * FP8Q_CAST_WIDE_CODES;
    const int64_t blocks = (count + per_block - 1) / per_block;
    return blocks < 1 ? 1u : blocks > 0x7FFFFFFF ? 0x7FFFFFFFu : (unsigned int)blocks;
}

#endif /* FP8Q_KERNELS_CAST_CUH */
