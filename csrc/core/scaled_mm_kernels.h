/*
 * scaled_mm_kernels.h - the inner kernel of scaled_mm's few-rows path,
 * compiled for AVX2 + FMA in scaled_mm_avx2.c (only scaled_mm.c and that
 * file include this header).
 */
#ifndef FP8Q_CORE_SCALED_MM_KERNELS_H
#define FP8Q_CORE_SCALED_MM_KERNELS_H

#include <stdint.h>

/* Rows of a handled per call. */
#define FP8Q_DOT_MAX_ROWS 4

/* Two columns at once: `columns` holds column 0 then column 1, `count`
 * floats each; out[c * FP8Q_DOT_MAX_ROWS + r] = sum over i < count of
 * a[r * row_stride + i] * columns[c * count + i], for r < rows <=
 * FP8Q_DOT_MAX_ROWS and c in {0, 1}, float32 with fused multiply-adds. */
void fp8q_dot_rows_avx2(const float *a, int64_t row_stride, int rows,
                        const float *columns, int64_t count, float *out);

#endif /* FP8Q_CORE_SCALED_MM_KERNELS_H */
