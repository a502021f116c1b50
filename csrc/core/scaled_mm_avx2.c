/*
 * scaled_mm_avx2.c - the dot products of scaled_mm's few-rows path
 * (core/scaled_mm.c) for AVX2 + FMA: up to four rows of a against two
 * decoded columns of b, eight float32 lanes per row and column in
 * registers.
 *
 * The build compiles this file with -mavx2 -mfma (gcc, clang) or /arch:AVX2
 * (MSVC) on x86-64; scaled_mm.c calls it only when fp8q_cpu_has_avx2_fma()
 * says so. On other processors it is built like any other file and never
 * called. Sums are in float32 with fused multiply-adds, so results differ
 * from the portable loop in scaled_mm.c by rounding only (within the
 * accuracy docs/scaled_mm.md states).
 */
#include "core/scaled_mm_kernels.h"
#include "platform.h"

#if defined(__AVX2__)
#include <immintrin.h>

/* The sum of a register's eight lanes, in a fixed order. */
static float sum8(__m256 value)
{
    const __m128 halves = _mm_add_ps(_mm256_castps256_ps128(value),
                                     _mm256_extractf128_ps(value, 1));
    const __m128 pairs = _mm_add_ps(halves, _mm_movehl_ps(halves, halves));
    return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1)));
}

/* The kernel for a constant number of rows, so that the accumulators live
 * in registers: for each row, one register per column, so that every load
 * of a serves both columns. */
FP8Q_FORCE_INLINE void dot_rows(const float *a, int64_t row_stride,
                                const int rows, const float *columns,
                                int64_t count, float *out)
{
    const float *second = columns + count;
    __m256 first_sum[FP8Q_DOT_MAX_ROWS];
    __m256 second_sum[FP8Q_DOT_MAX_ROWS];
    int64_t done = 0;
    int row;

    for (row = 0; row < rows; row++) {
        first_sum[row] = _mm256_setzero_ps();
        second_sum[row] = _mm256_setzero_ps();
    }
    for (; done + 8 <= count; done += 8) {
        const __m256 first_column = _mm256_loadu_ps(columns + done);
        const __m256 second_column = _mm256_loadu_ps(second + done);
        for (row = 0; row < rows; row++) {
            const __m256 values = _mm256_loadu_ps(a + row * row_stride + done);
            first_sum[row] =
                _mm256_fmadd_ps(values, first_column, first_sum[row]);
            second_sum[row] =
                _mm256_fmadd_ps(values, second_column, second_sum[row]);
        }
    }
    for (row = 0; row < rows; row++) {
        const float *values = a + row * row_stride;
        float first_total = sum8(first_sum[row]);
        float second_total = sum8(second_sum[row]);
        int64_t i;
        for (i = done; i < count; i++) {
            first_total += values[i] * columns[i];
            second_total += values[i] * second[i];
        }
        out[row] = first_total;
        out[FP8Q_DOT_MAX_ROWS + row] = second_total;
    }
}

void fp8q_dot_rows_avx2(const float *a, int64_t row_stride, int rows,
                        const float *columns, int64_t count, float *out)
{
    switch (rows) {
    case 1:
        dot_rows(a, row_stride, 1, columns, count, out);
        break;
    case 2:
        dot_rows(a, row_stride, 2, columns, count, out);
        break;
    case 3:
        dot_rows(a, row_stride, 3, columns, count, out);
        break;
    default:
        dot_rows(a, row_stride, 4, columns, count, out);
        break;
    }
}

#else /* not built for AVX2: never called (fp8q_cpu_has_avx2_fma() is 0) */

void fp8q_dot_rows_avx2(const float *a, int64_t row_stride, int rows,
                        const float *columns, int64_t count, float *out)
{
    int column;
    int row;
    for (column = 0; column < 2; column++) {
        for (row = 0; row < rows; row++) {
            float total = 0.0f;
            int64_t i;
            for (i = 0; i < count; i++) {
                total += a[row * row_stride + i] * columns[column * count + i];
            }
            out[column * FP8Q_DOT_MAX_ROWS + row] = total;
        }
    }
}

#endif /* __AVX2__ */
