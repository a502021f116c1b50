/*
 * scaled_mm_avx2.c - the kernels of scaled_mm's own product
 * (core/scaled_mm_kernels.h) for AVX2 + FMA: b's FP8 columns decoded into
 * float32 panels of 16 columns (8 x 8 transposes, so that a panel row is
 * two registers), and tiles of 6 rows of a x 16 columns whose 12 registers
 * of sums take one broadcast of a and two loads of the panel per k.
 *
 * The build compiles this file with -mavx2 -mfma (gcc, clang) or /arch:AVX2
 * (MSVC) on x86-64; scaled_mm.c calls it only when fp8q_cpu_has_avx2_fma()
 * says so. On other processors it is built like any other file and never
 * called. Decodes are exact (core/fp8_decode_avx2.h); sums are float32 with
 * fused multiply-adds in the order of k.
 */
#include <string.h>

#include "core/float_codec.h"
#include "core/fp8_decode_avx2.h"
#include "core/scaled_mm_kernels.h"
#include "platform.h"

#if defined(__AVX2__)

/* ------------------------------------------------------------------------- */
/* Packing                                                                   */

/*
 * Decodes rows [k, k + 8) of eight columns of b (column j's codes at
 * codes + j * column_stride + k), times `scale` when `scaled`, and stores
 * them transposed: panel row k + i gets the eight values of row k + i in
 * `lanes` (8 floats of a 16-float panel row). The transposes are spelled out
 * so that the 8 x 8 block stays in registers.
 */
FP8Q_FORCE_INLINE void pack_block(const uint8_t *codes, int64_t column_stride,
                                  const int is_e5m2, int scaled, __m256 scale,
                                  float *lanes)
{
    __m256 column0 = fp8q_decode8_avx2(codes, is_e5m2);
    __m256 column1 = fp8q_decode8_avx2(codes + column_stride, is_e5m2);
    __m256 column2 = fp8q_decode8_avx2(codes + 2 * column_stride, is_e5m2);
    __m256 column3 = fp8q_decode8_avx2(codes + 3 * column_stride, is_e5m2);
    __m256 column4 = fp8q_decode8_avx2(codes + 4 * column_stride, is_e5m2);
    __m256 column5 = fp8q_decode8_avx2(codes + 5 * column_stride, is_e5m2);
    __m256 column6 = fp8q_decode8_avx2(codes + 6 * column_stride, is_e5m2);
    __m256 column7 = fp8q_decode8_avx2(codes + 7 * column_stride, is_e5m2);
    __m256 pair0, pair1, pair2, pair3, pair4, pair5, pair6, pair7;
    __m256 quad0, quad1, quad2, quad3, quad4, quad5, quad6, quad7;

    if (scaled) {
        column0 = _mm256_mul_ps(column0, scale);
        column1 = _mm256_mul_ps(column1, scale);
        column2 = _mm256_mul_ps(column2, scale);
        column3 = _mm256_mul_ps(column3, scale);
        column4 = _mm256_mul_ps(column4, scale);
        column5 = _mm256_mul_ps(column5, scale);
        column6 = _mm256_mul_ps(column6, scale);
        column7 = _mm256_mul_ps(column7, scale);
    }
    /* Pairs of columns interleaved, then quads, then the 128-bit halves. */
    pair0 = _mm256_unpacklo_ps(column0, column1);
    pair1 = _mm256_unpackhi_ps(column0, column1);
    pair2 = _mm256_unpacklo_ps(column2, column3);
    pair3 = _mm256_unpackhi_ps(column2, column3);
    pair4 = _mm256_unpacklo_ps(column4, column5);
    pair5 = _mm256_unpackhi_ps(column4, column5);
    pair6 = _mm256_unpacklo_ps(column6, column7);
    pair7 = _mm256_unpackhi_ps(column6, column7);
    quad0 = _mm256_shuffle_ps(pair0, pair2, 0x44);
    quad1 = _mm256_shuffle_ps(pair0, pair2, 0xEE);
    quad2 = _mm256_shuffle_ps(pair1, pair3, 0x44);
    quad3 = _mm256_shuffle_ps(pair1, pair3, 0xEE);
    quad4 = _mm256_shuffle_ps(pair4, pair6, 0x44);
    quad5 = _mm256_shuffle_ps(pair4, pair6, 0xEE);
    quad6 = _mm256_shuffle_ps(pair5, pair7, 0x44);
    quad7 = _mm256_shuffle_ps(pair5, pair7, 0xEE);
    _mm256_store_ps(lanes, _mm256_permute2f128_ps(quad0, quad4, 0x20));
    _mm256_store_ps(lanes + 16, _mm256_permute2f128_ps(quad1, quad5, 0x20));
    _mm256_store_ps(lanes + 32, _mm256_permute2f128_ps(quad2, quad6, 0x20));
    _mm256_store_ps(lanes + 48, _mm256_permute2f128_ps(quad3, quad7, 0x20));
    _mm256_store_ps(lanes + 64, _mm256_permute2f128_ps(quad0, quad4, 0x31));
    _mm256_store_ps(lanes + 80, _mm256_permute2f128_ps(quad1, quad5, 0x31));
    _mm256_store_ps(lanes + 96, _mm256_permute2f128_ps(quad2, quad6, 0x31));
    _mm256_store_ps(lanes + 112, _mm256_permute2f128_ps(quad3, quad7, 0x31));
}

/* One panel of one format, its codes `column_stride` apart. */
FP8Q_FORCE_INLINE void pack_panel(const uint8_t *codes,
                                  int64_t column_stride, const int is_e5m2,
                                  int64_t k_count, const float *scales,
                                  int64_t scale_stride, float *panel)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t k = 0;
    int column;

    for (; k + 8 <= k_count; k += 8) {
        const __m256 scale =
            scales != NULL
                ? _mm256_set1_ps(
                      scales[(k / FP8Q_PANEL_SCALE_ROWS) * scale_stride])
                : one;
        pack_block(codes + k, column_stride, is_e5m2, scales != NULL, scale,
                   panel + k * FP8Q_PANEL_COLUMNS);
        pack_block(codes + 8 * column_stride + k, column_stride, is_e5m2,
                   scales != NULL, scale, panel + k * FP8Q_PANEL_COLUMNS + 8);
    }
    for (; k < k_count; k++) {
        const float scale =
            scales != NULL
                ? scales[(k / FP8Q_PANEL_SCALE_ROWS) * scale_stride]
                : 1.0f;
        for (column = 0; column < FP8Q_PANEL_COLUMNS; column++) {
            const uint8_t code = codes[column * column_stride + k];
            panel[k * FP8Q_PANEL_COLUMNS + column] =
                (is_e5m2 ? fp8q_decode_e5m2(code) : fp8q_decode_e4m3fn(code)) *
                scale;
        }
    }
}

void fp8q_pack_panels_avx2(const uint8_t *codes, int64_t column_stride,
                           int is_e5m2, int64_t n_columns, int64_t k_count,
                           const float *scales, float *packed)
{
    const int64_t n_panels =
        (n_columns + FP8Q_PANEL_COLUMNS - 1) / FP8Q_PANEL_COLUMNS;
    /* A panel's codes, copied together first (zero codes past n_columns):
     * decoding straight from columns far apart in memory runs at two
     * thirds of the speed. */
    uint8_t staged[FP8Q_PANEL_COLUMNS * FP8Q_PANEL_MAX_DEPTH];
    int64_t panel;
    int64_t column;

    for (panel = 0; panel < n_panels; panel++) {
        const int64_t first = panel * FP8Q_PANEL_COLUMNS;
        const int64_t columns = n_columns - first < FP8Q_PANEL_COLUMNS
                                    ? n_columns - first
                                    : FP8Q_PANEL_COLUMNS;
        for (column = 0; column < columns; column++) {
            memcpy(staged + column * k_count,
                   codes + (first + column) * column_stride, (size_t)k_count);
        }
        if (columns < FP8Q_PANEL_COLUMNS) {
            memset(staged + columns * k_count, 0,
                   (size_t)((FP8Q_PANEL_COLUMNS - columns) * k_count));
        }
        if (is_e5m2) {
            pack_panel(staged, k_count, 1, k_count,
                       scales != NULL ? scales + panel : NULL, n_panels,
                       packed + first * k_count);
        }
        else {
            pack_panel(staged, k_count, 0, k_count,
                       scales != NULL ? scales + panel : NULL, n_panels,
                       packed + first * k_count);
        }
    }
}

/* ------------------------------------------------------------------------- */
/* Register tiles                                                            */

/* One step of row `row` of a tile, present when the tile has more than
 * `row` rows: value = LOAD(a + row * a_stride + k), then the row's two
 * sums first##row += value * first_operand and second##row += value *
 * second_operand. The rows are spelled out (no arrays, no loop over rows)
 * so that every compiler keeps the sums in registers. */
#define ROW_STEP(row, LOAD, first, first_operand, second, second_operand)     \
    if (rows > (row)) {                                                       \
        const __m256 value = LOAD(a + (row) * a_stride + k);                  \
        first##row = _mm256_fmadd_ps(value, first_operand, first##row);       \
        second##row = _mm256_fmadd_ps(value, second_operand, second##row);    \
    }

/* One row of a tile: the sums of row `row` in low##row (columns 0-7) and
 * high##row (8-15), a[row][k] broadcast. */
#define TILE_ROW_STEP(row)                                                    \
    ROW_STEP(row, _mm256_broadcast_ss, low, panel_low, high, panel_high)
#define TILE_ROW_STORE(row)                                                   \
    if (rows > (row)) {                                                       \
        float *out = c + (row) * c_stride;                                    \
        if (accumulate) {                                                     \
            low##row = _mm256_add_ps(_mm256_loadu_ps(out), low##row);         \
            high##row = _mm256_add_ps(_mm256_loadu_ps(out + 8), high##row);   \
        }                                                                     \
        _mm256_storeu_ps(out, low##row);                                      \
        _mm256_storeu_ps(out + 8, high##row);                                 \
    }

/* c (rows x 16, row stride c_stride) = [c +] a (rows x k_count) @ panel,
 * for a constant number of rows (at most FP8Q_TILE_ROWS = 6). */
FP8Q_FORCE_INLINE void multiply_tile(const int rows, const float *a,
                                     int64_t a_stride, const float *panel,
                                     int64_t k_count, float *c,
                                     int64_t c_stride, int accumulate)
{
    __m256 low0 = _mm256_setzero_ps();
    __m256 low1 = low0, low2 = low0, low3 = low0, low4 = low0, low5 = low0;
    __m256 high0 = low0, high1 = low0, high2 = low0, high3 = low0;
    __m256 high4 = low0, high5 = low0;
    int64_t k;

    for (k = 0; k < k_count; k++) {
        const __m256 panel_low = _mm256_load_ps(panel);
        const __m256 panel_high = _mm256_load_ps(panel + 8);
        TILE_ROW_STEP(0)
        TILE_ROW_STEP(1)
        TILE_ROW_STEP(2)
        TILE_ROW_STEP(3)
        TILE_ROW_STEP(4)
        TILE_ROW_STEP(5)
        panel += FP8Q_PANEL_COLUMNS;
    }
    TILE_ROW_STORE(0)
    TILE_ROW_STORE(1)
    TILE_ROW_STORE(2)
    TILE_ROW_STORE(3)
    TILE_ROW_STORE(4)
    TILE_ROW_STORE(5)
}

#undef TILE_ROW_STEP
#undef TILE_ROW_STORE

/* The cases of a switch over a tile's row count for 1, 2 and 3 rows, each
 * expanding TILE(n) with its constant n (one inlined instance per case). */
#define SMALL_ROW_CASES(TILE)                                                 \
    case 1: TILE(1); break;                                                   \
    case 2: TILE(2); break;                                                   \
    case 3: TILE(3); break

/* multiply_tile with a constant row count. */
#define MULTIPLY_TILE(n)                                                      \
    multiply_tile(n, a, a_stride, panel, k_count, c, c_stride, accumulate)

static void multiply_rows(int rows, const float *a, int64_t a_stride,
                          const float *panel, int64_t k_count, float *c,
                          int64_t c_stride, int accumulate)
{
    switch (rows) {
    SMALL_ROW_CASES(MULTIPLY_TILE);
    case 4: MULTIPLY_TILE(4); break;
    case 5: MULTIPLY_TILE(5); break;
    default: MULTIPLY_TILE(6); break;
    }
}

#undef MULTIPLY_TILE

void fp8q_multiply_panels_avx2(const float *a, int64_t a_stride, int64_t m,
                               const float *packed, int64_t n_columns,
                               int64_t k_count, float *c, int64_t c_stride,
                               int accumulate)
{
    float partial[FP8Q_TILE_ROWS * FP8Q_PANEL_COLUMNS];
    int64_t first_row;
    int64_t first;

    for (first_row = 0; first_row < m; first_row += FP8Q_TILE_ROWS) {
        const int rows = m - first_row < FP8Q_TILE_ROWS
                             ? (int)(m - first_row)
                             : FP8Q_TILE_ROWS;
        const float *a_rows = a + first_row * a_stride;
        float *c_rows = c + first_row * c_stride;
        for (first = 0; first < n_columns; first += FP8Q_PANEL_COLUMNS) {
            const float *panel = packed + first * k_count;
            const int64_t columns = n_columns - first;
            int row;
            if (columns >= FP8Q_PANEL_COLUMNS) {
                multiply_rows(rows, a_rows, a_stride, panel, k_count,
                              c_rows + first, c_stride, accumulate);
                continue;
            }
            /* The last, narrower panel: through a full-width tile. */
            for (row = 0; row < rows && accumulate; row++) {
                memcpy(partial + row * FP8Q_PANEL_COLUMNS,
                       c_rows + row * c_stride + first,
                       (size_t)columns * sizeof(float));
            }
            multiply_rows(rows, a_rows, a_stride, panel, k_count, partial,
                          FP8Q_PANEL_COLUMNS, accumulate);
            for (row = 0; row < rows; row++) {
                memcpy(c_rows + row * c_stride + first,
                       partial + row * FP8Q_PANEL_COLUMNS,
                       (size_t)columns * sizeof(float));
            }
        }
    }
}

/* ------------------------------------------------------------------------- */
/* Few rows: columns decoded straight into dot products                      */

/* Row `row` of a dot tile: its sums with the first and the second column,
 * eight values of a's row at a time. */
#define DOT_ROW_STEP(row)                                                     \
    ROW_STEP(row, _mm256_loadu_ps, first, first_column, second, second_column)
#define DOT_ROW_STORE(row)                                                    \
    if (rows > (row)) {                                                       \
        out[row] = sum8(first##row);                                          \
        out[FP8Q_DOT_ROWS + (row)] = sum8(second##row);                       \
    }

/* The sum of a register's eight lanes, in a fixed order. */
static float sum8(__m256 value)
{
    const __m128 halves = _mm_add_ps(_mm256_castps256_ps128(value),
                                     _mm256_extractf128_ps(value, 1));
    const __m128 pairs = _mm_add_ps(halves, _mm_movehl_ps(halves, halves));
    return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1)));
}

/* fp8q_dot_columns_avx2 for a constant number of rows and format, over
 * the rows of b that are a multiple of 8 (the rest is left to the caller). */
FP8Q_FORCE_INLINE void dot_tile(const int rows, const int is_e5m2,
                                const float *a, int64_t a_stride,
                                const uint8_t *codes, int64_t column_stride,
                                int64_t k_count, const float *scales,
                                int64_t scale_stride, float *out)
{
    const uint8_t *second_codes = codes + column_stride;
    __m256 first0 = _mm256_setzero_ps();
    __m256 first1 = first0, first2 = first0, first3 = first0;
    __m256 second0 = first0, second1 = first0, second2 = first0;
    __m256 second3 = first0;
    int64_t start;
    int64_t k;

    for (start = 0; start < k_count; start += FP8Q_PANEL_SCALE_ROWS) {
        const int64_t stop = k_count - start < FP8Q_PANEL_SCALE_ROWS
                                 ? k_count
                                 : start + FP8Q_PANEL_SCALE_ROWS;
        const int64_t segment = start / FP8Q_PANEL_SCALE_ROWS;
        const __m256 first_scale = _mm256_set1_ps(
            scales != NULL ? scales[segment] : 1.0f);
        const __m256 second_scale = _mm256_set1_ps(
            scales != NULL ? scales[scale_stride + segment] : 1.0f);
        for (k = start; k + 8 <= stop; k += 8) {
            __m256 first_column = fp8q_decode8_avx2(codes + k, is_e5m2);
            __m256 second_column =
                fp8q_decode8_avx2(second_codes + k, is_e5m2);
            if (scales != NULL) {
                first_column = _mm256_mul_ps(first_column, first_scale);
                second_column = _mm256_mul_ps(second_column, second_scale);
            }
            DOT_ROW_STEP(0)
            DOT_ROW_STEP(1)
            DOT_ROW_STEP(2)
            DOT_ROW_STEP(3)
        }
    }
    DOT_ROW_STORE(0)
    DOT_ROW_STORE(1)
    DOT_ROW_STORE(2)
    DOT_ROW_STORE(3)
}

#undef DOT_ROW_STEP
#undef DOT_ROW_STORE
#undef ROW_STEP

/* dot_tile for a constant format: one instance per number of rows. */
FP8Q_FORCE_INLINE void dot_rows(int rows, const int is_e5m2, const float *a,
                                int64_t a_stride, const uint8_t *codes,
                                int64_t column_stride, int64_t k_count,
                                const float *scales, int64_t scale_stride,
                                float *out)
{
#define DOT_TILE(n)                                                           \
    dot_tile(n, is_e5m2, a, a_stride, codes, column_stride, k_count, scales, \
             scale_stride, out)
    switch (rows) {
    SMALL_ROW_CASES(DOT_TILE);
    default: DOT_TILE(4); break;
    }
#undef DOT_TILE
}

#undef SMALL_ROW_CASES

void fp8q_dot_columns_avx2(const float *a, int64_t a_stride, int rows,
                           const uint8_t *codes, int64_t column_stride,
                           int is_e5m2, int64_t k_count, const float *scales,
                           int64_t scale_stride, float *out)
{
    const int64_t vector_count = k_count - k_count % 8;
    int64_t k;
    int column;
    int row;

    if (is_e5m2) {
        dot_rows(rows, 1, a, a_stride, codes, column_stride, vector_count,
                 scales, scale_stride, out);
    }
    else {
        dot_rows(rows, 0, a, a_stride, codes, column_stride, vector_count,
                 scales, scale_stride, out);
    }
    for (k = vector_count; k < k_count; k++) {
        for (column = 0; column < 2; column++) {
            const uint8_t code = codes[column * column_stride + k];
            const float value =
                (is_e5m2 ? fp8q_decode_e5m2(code) : fp8q_decode_e4m3fn(code)) *
                (scales != NULL
                     ? scales[column * scale_stride + k / FP8Q_PANEL_SCALE_ROWS]
                     : 1.0f);
            for (row = 0; row < rows; row++) {
                out[column * FP8Q_DOT_ROWS + row] +=
                    a[row * a_stride + k] * value;
            }
        }
    }
}

#else /* not built for AVX2: never called (fp8q_cpu_has_avx2_fma() is 0) */

void fp8q_pack_panels_avx2(const uint8_t *codes, int64_t column_stride,
                           int is_e5m2, int64_t n_columns, int64_t k_count,
                           const float *scales, float *packed)
{
    (void)codes; (void)column_stride; (void)is_e5m2; (void)n_columns;
    (void)k_count; (void)scales; (void)packed;
}

void fp8q_multiply_panels_avx2(const float *a, int64_t a_stride, int64_t m,
                               const float *packed, int64_t n_columns,
                               int64_t k_count, float *c, int64_t c_stride,
                               int accumulate)
{
    (void)a; (void)a_stride; (void)m; (void)packed; (void)n_columns;
    (void)k_count; (void)c; (void)c_stride; (void)accumulate;
}

void fp8q_dot_columns_avx2(const float *a, int64_t a_stride, int rows,
                           const uint8_t *codes, int64_t column_stride,
                           int is_e5m2, int64_t k_count, const float *scales,
                           int64_t scale_stride, float *out)
{
    (void)a; (void)a_stride; (void)rows; (void)codes; (void)column_stride;
    (void)is_e5m2; (void)k_count; (void)scales; (void)scale_stride; (void)out;
}

#endif /* __AVX2__ */
