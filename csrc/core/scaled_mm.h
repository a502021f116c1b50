/*
 * scaled_mm.h - the CPU parts of the FP8 scaled matrix multiply
 * out = (a * scale_a) @ (b * scale_b) + bias: how the scales' shapes pick the
 * scaling mode, the float32 operands, and the epilogue. The float32 product
 * itself is scaled_mm's own kernels' or a BLAS sgemm called by the binding
 * (docs/scaled_mm.md).
 */
#ifndef FP8Q_CORE_SCALED_MM_H
#define FP8Q_CORE_SCALED_MM_H

#include <stdint.h>

#include "core/status.h"
#include "core/view.h"

/* Blocks of the blockwise mode: 1 x 128 of a, 128 x 128 of b. */
#define FP8Q_SCALED_MM_BLOCK 128

typedef enum fp8q_scaling {
    FP8Q_SCALING_TENSORWISE, /* scale_a, scale_b: one value each           */
    FP8Q_SCALING_ROWWISE,    /* scale_a (M, 1), scale_b (1, N)               */
    FP8Q_SCALING_BLOCKWISE   /* scale_a (M, ceil(K/128)),
                              scale_b (ceil(K/128), ceil(N/128))           */
} fp8q_scaling;

/* The name of a mode ("tensorwise", "rowwise", "blockwise"). */
const char *fp8q_scaling_name(fp8q_scaling mode);

/*
 * The scaling mode of a product of a (m, k) and b (k, n), from the float32
 * scales' shapes, tried in this order: both hold one element (shape (),
 * (1,) or (1, 1)) -> tensorwise; (m, 1) and (1, n), or one of them a
 * single element (repeated) -> rowwise;
 * (m, ceil(k / 128)) and (ceil(k / 128), ceil(n / 128)) -> blockwise.
 * Shapes that fit several modes describe the same product. Anything else:
 * FP8Q_ERROR_VALUE listing the accepted shapes for this m, k, n and the
 * shapes received.
 */
fp8q_status fp8q_scaled_mm_mode(int64_t m, int64_t k, int64_t n,
                                const fp8q_view *scale_a,
                                const fp8q_view *scale_b,
                                fp8q_scaling *mode, fp8q_error *error);

/*
 * The float32 operand for the sgemm, in `destination` (same shape as
 * `source`, an FP8 matrix; C- or Fortran-contiguous, the latter filled by
 * rows of its transpose, so match the source's order to stream both):
 * decode(source) exactly, times its
 * block's scale (float32 product, rounded once) in the blockwise mode.
 * `is_a` selects a's (1 x 128) or b's (128 x 128) blocks; `scale` is the
 * operand's scale view. Tensorwise and rowwise scales are applied by the
 * epilogue instead, to the exact-product sums.
 */
fp8q_status fp8q_scaled_mm_operand(const fp8q_view *source,
                                   const fp8q_view *scale,
                                   fp8q_scaling mode, int is_a,
                                   const fp8q_view *destination,
                                   fp8q_error *error);

/*
 * scaled_mm's own float32 product, for b whose columns are contiguous
 * (b = w.T of a row-major weight w), without a float32 copy of b.
 *
 * With AVX2 + FMA + F16C (csrc/core/scaled_mm_avx2.c), for any number of
 * rows of a: up to FP8Q_SCALED_MM_DOT_M rows, pairs of b's columns are
 * decoded straight into their dot products with up to 4 rows at a time;
 * beyond, blocks of 256 columns of b are decoded 256 rows at a time into
 * panels of 16 columns that stay in cache and multiplied with a's rows in
 * register tiles of 6 rows x 16 columns (as fast per core as OpenBLAS's
 * sgemm, without the float32 copy of b; docs/scaled_mm.md). Blockwise
 * scales are applied to b's decoded values as fp8q_scaled_mm_operand
 * would; columns (or blocks of them) run in parallel.
 * Without them (or with fp8q_convert_allow_avx2(0)): up to
 * FP8Q_SCALED_MM_DOT_M rows only, each column decoded into a buffer and
 * dotted with every row of a. Sums are float32 either way.
 */
#define FP8Q_SCALED_MM_DOT_M 8

/* Nonzero when fp8q_scaled_mm_product runs the AVX2 + FMA kernels: the
 * processor has AVX2, FMA and F16C and fp8q_convert_allow_avx2 has not
 * switched them off. */
int fp8q_scaled_mm_uses_avx2_fma(void);

/* Nonzero when fp8q_scaled_mm_product takes a product of m rows of a with
 * this b (k rows), on this processor; else the caller multiplies float32
 * operands with a BLAS sgemm. */
int fp8q_scaled_mm_has_kernel(int64_t m, int64_t k, const fp8q_view *b);

/*
 * The float32 product (m, n), C-contiguous, of float32 a (m, k),
 * C-contiguous (from fp8q_scaled_mm_operand), and the FP8 matrix b (k, n),
 * where fp8q_scaled_mm_has_kernel says so. The blockwise scales of b come
 * from scale_b; other modes' scales are left to the epilogue.
 */
fp8q_status fp8q_scaled_mm_product(const fp8q_view *a, const fp8q_view *b,
                                   const fp8q_view *scale_b,
                                   fp8q_scaling mode,
                                   const fp8q_view *product,
                                   fp8q_error *error);

/*
 * In place on the float32 product P (m, n), C-contiguous:
 * P[i, j] = float32(P[i, j] * sa_i * sb_j + bias_j), computed in double,
 * where sa_i, sb_j are the tensorwise or rowwise scales (1 in the blockwise
 * mode, whose scales are in the operands) and bias_j is 0 without a bias
 * (`bias` NULL, else a view of n elements of any float dtype). Rows run in
 * parallel.
 */
fp8q_status fp8q_scaled_mm_epilogue(const fp8q_view *product,
                                    fp8q_scaling mode,
                                    const fp8q_view *scale_a,
                                    const fp8q_view *scale_b,
                                    const fp8q_view *bias, fp8q_error *error);

#endif /* FP8Q_CORE_SCALED_MM_H */
