/*
 * scaled_mm_kernels.h - the AVX2 + FMA kernels of scaled_mm's own product
 * (core/scaled_mm.c), compiled in scaled_mm_avx2.c: b's FP8 columns decoded
 * into float32 panels, and a's rows multiplied with those panels in register
 * tiles. Only scaled_mm.c, scaled_mm_avx2.c and the C tests include this.
 */
#ifndef FP8Q_CORE_SCALED_MM_KERNELS_H
#define FP8Q_CORE_SCALED_MM_KERNELS_H

#include <stdint.h>

/* Columns of b in one panel: two AVX registers of float32. */
#define FP8Q_PANEL_COLUMNS 16
/* Rows of a in one register tile (6 rows x 2 registers of sums). */
#define FP8Q_TILE_ROWS 6
/* Most rows of b decoded into panels at a time. */
#define FP8Q_PANEL_MAX_DEPTH 256
/* Rows of b (K) whose blockwise scale is one value: the blockwise mode's
 * block size (FP8Q_SCALED_MM_BLOCK). */
#define FP8Q_PANEL_SCALE_ROWS 128

/*
 * Decodes k_count (<= FP8Q_PANEL_MAX_DEPTH) rows and n_columns columns of b
 * into `packed`: panel p
 * (columns 16p .. 16p + 15) holds k_count rows of 16 floats, at
 * packed + p * k_count * 16, row-major; columns past n_columns are 0.
 * Column j of b is the k_count codes at codes + j * column_stride,
 * contiguous (b = w.T), float8_e5m2 when is_e5m2, else float8_e4m3fn.
 * `scales`: NULL, or the blockwise scale of rows [128 s, 128 s + 128) of
 * panel p at scales[s * n_panels + p], each decoded value times its scale
 * rounded once (as fp8q_scaled_mm_operand does). `packed` is 32-byte
 * aligned.
 */
void fp8q_pack_panels_avx2(const uint8_t *codes, int64_t column_stride,
                           int is_e5m2, int64_t n_columns, int64_t k_count,
                           const float *scales, float *packed);

/*
 * c[i * c_stride + j] = (accumulate ? c[i * c_stride + j] : 0) + the sum
 * over k < k_count of a[i * a_stride + k] * (column j, row k of the panels),
 * for i < m and j < n_columns, with `packed` as fp8q_pack_panels_avx2 left
 * it. Float32 fused multiply-adds in the order of k.
 */
void fp8q_multiply_panels_avx2(const float *a, int64_t a_stride, int64_t m,
                               const float *packed, int64_t n_columns,
                               int64_t k_count, float *c, int64_t c_stride,
                               int accumulate);

/* Rows of a in one call of fp8q_dot_columns_avx2. */
#define FP8Q_DOT_ROWS 4

/*
 * For a few rows, without packing: out[c * FP8Q_DOT_ROWS + r] = the sum
 * over k < k_count of a[r * a_stride + k] * b(k, c), for r < rows <=
 * FP8Q_DOT_ROWS and the two columns c in {0, 1} of b at codes (column c's
 * codes at codes + c * column_stride, contiguous; pass the same column
 * twice for one), each decoded 8 codes at a time straight into float32
 * fused multiply-adds (8 partial sums per row and column). `scales`: NULL,
 * or column c's blockwise scale of rows [128 s, 128 s + 128) at
 * scales[c * scale_stride + s].
 */
void fp8q_dot_columns_avx2(const float *a, int64_t a_stride, int rows,
                           const uint8_t *codes, int64_t column_stride,
                           int is_e5m2, int64_t k_count, const float *scales,
                           int64_t scale_stride, float *out);

#endif /* FP8Q_CORE_SCALED_MM_KERNELS_H */
