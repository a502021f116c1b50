/*
 * scaled_mm.c - scale modes, float32 operands and the epilogue of the CPU
 * FP8 scaled matmul (see scaled_mm.h).
 */
#include <inttypes.h>
#include <string.h>

#include "core/cast.h"
#include "core/convert.h"
#include "core/quantize.h"
#include "core/scaled_mm.h"
#include "core/scaled_mm_kernels.h"
#include "platform.h"

const char *fp8q_scaling_name(fp8q_scaling mode)
{
    static const char *const names[] = {"tensorwise", "rowwise", "blockwise"};
    return (unsigned)mode < sizeof names / sizeof names[0] ? names[mode]
                                                           : "unknown";
}

/* ------------------------------------------------------------------------- */
/* Modes                                                                     */

/* Nonzero when the view holds exactly one element in at most 2 dims. */
static int is_single(const fp8q_view *scale)
{
    return scale->ndim <= 2 && fp8q_view_size(scale) == 1;
}

static int has_shape(const fp8q_view *scale, int64_t rows, int64_t cols)
{
    return scale->ndim == 2 && scale->shape[0] == rows &&
           scale->shape[1] == cols;
}

fp8q_status fp8q_scaled_mm_mode(int64_t m, int64_t k, int64_t n,
                                const fp8q_view *scale_a,
                                const fp8q_view *scale_b,
                                fp8q_scaling *mode, fp8q_error *error)
{
    const int64_t k_blocks = fp8q_block_count(k, FP8Q_SCALED_MM_BLOCK);
    const int64_t n_blocks = fp8q_block_count(n, FP8Q_SCALED_MM_BLOCK);
    char received_a[256];
    char received_b[256];

    if (scale_a->dtype != FP8Q_FLOAT32 || scale_b->dtype != FP8Q_FLOAT32) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE,
                         "scale_a, scale_b: expected float32 scales, got %s "
                         "and %s",
                         fp8q_dtype_name(scale_a->dtype),
                         fp8q_dtype_name(scale_b->dtype));
    }
    if (is_single(scale_a) && is_single(scale_b)) {
        *mode = FP8Q_SCALING_TENSORWISE;
        return FP8Q_OK;
    }
    /* Rowwise; one side may be a single value, repeated. */
    if ((has_shape(scale_a, m, 1) || is_single(scale_a)) &&
        (has_shape(scale_b, 1, n) || is_single(scale_b))) {
        *mode = FP8Q_SCALING_ROWWISE;
        return FP8Q_OK;
    }
    if (has_shape(scale_a, m, k_blocks) &&
        has_shape(scale_b, k_blocks, n_blocks)) {
        *mode = FP8Q_SCALING_BLOCKWISE;
        return FP8Q_OK;
    }
    fp8q_format_shape(received_a, sizeof received_a, scale_a->ndim,
                      scale_a->shape);
    fp8q_format_shape(received_b, sizeof received_b, scale_b->ndim,
                      scale_b->shape);
    return fp8q_fail(
        error, FP8Q_ERROR_VALUE,
        "scale_a, scale_b: shapes %s and %s do not describe a scaling of a "
        "(%" PRId64 ", %" PRId64 ") @ b (%" PRId64 ", %" PRId64 "); "
        "accepted: tensorwise () and () (or (1, 1)); rowwise (%" PRId64
        ", 1) and (1, %" PRId64 "), either of them may be one value; "
        "blockwise (%" PRId64 ", %" PRId64
        ") and (%" PRId64 ", %" PRId64 ") for 1x128 blocks of a and "
        "128x128 blocks of b",
        received_a, received_b, m, k, k, n, m, n, m, k_blocks, k_blocks,
        n_blocks);
}

/* ------------------------------------------------------------------------- */
/* Operands                                                                  */

/* The transpose of a 2-D view (a view of the same memory). */
static fp8q_view transposed(const fp8q_view *view)
{
    fp8q_view result = *view;
    result.shape[0] = view->shape[1];
    result.shape[1] = view->shape[0];
    result.strides[0] = view->strides[1];
    result.strides[1] = view->strides[0];
    return result;
}

fp8q_status fp8q_scaled_mm_operand(const fp8q_view *source,
                                   const fp8q_view *scale,
                                   fp8q_scaling mode, int is_a,
                                   const fp8q_view *destination,
                                   fp8q_error *error)
{
    /* A column-major destination is filled as the row-major transpose, so
     * that both sides stream when the source is column-major too. */
    const int by_columns =
        destination->shape[0] > 1 && destination->strides[0] == 1;
    const fp8q_view source_view = by_columns ? transposed(source) : *source;
    const fp8q_view destination_view =
        by_columns ? transposed(destination) : *destination;
    fp8q_view scale_view;
    fp8q_granularity blocks;
    int64_t block_rows = is_a ? 1 : FP8Q_SCALED_MM_BLOCK;
    int64_t block_cols = FP8Q_SCALED_MM_BLOCK;

    if (mode != FP8Q_SCALING_BLOCKWISE) {
        return fp8q_cast(&source_view, &destination_view, NULL,
                         FP8Q_SCALE_DIVIDE, 1, error);
    }
    scale_view = by_columns ? transposed(scale) : *scale;
    blocks.kind = FP8Q_GRANULARITY_BLOCK;
    blocks.block_rows = by_columns ? block_cols : block_rows;
    blocks.block_cols = by_columns ? block_rows : block_cols;
    return fp8q_dequantize(&source_view, &scale_view, &blocks,
                           &destination_view, error);
}

/* ------------------------------------------------------------------------- */
/* The product without a float32 copy of b                                   */

/* Blocks of b packed at a time by the AVX2 kernels: at most 256 columns x
 * 256 rows, 256 KB of float32 panels that stay in L2 while every row of a
 * passes over them; the depth is a multiple of the blockwise block (128), so
 * that each panel's rows of one scale are whole. Narrow products use
 * narrower blocks (block_columns_for). */
#define BLOCK_COLUMNS 256
#define BLOCK_DEPTH 256

/* Lanes of the portable dot product: independent partial sums, so the loop
 * is a plain elementwise one that compilers vectorise. */
#define DOT_LANES 16

static float dot(const float *FP8Q_RESTRICT x, const float *FP8Q_RESTRICT y,
                 int64_t count)
{
    float partial[DOT_LANES] = {0.0f};
    float total = 0.0f;
    int64_t done = 0;
    int lane;

    for (; done + DOT_LANES <= count; done += DOT_LANES) {
        for (lane = 0; lane < DOT_LANES; lane++) {
            partial[lane] += x[done + lane] * y[done + lane];
        }
    }
    for (lane = 0; done < count; done++, lane++) {
        partial[lane] += x[done] * y[done];
    }
    for (lane = 0; lane < DOT_LANES; lane++) {
        total += partial[lane];
    }
    return total;
}

typedef struct product_job {
    const fp8q_view *a;
    const fp8q_view *b;
    const fp8q_view *scale_b; /* blockwise only */
    int blockwise;
    int64_t block_columns; /* AVX2 panels: columns per task */
    float *product;
    volatile int64_t failed; /* set when a task could not get its buffer */
} product_job;

/* The blockwise scale of b at row `row`, column `col`. */
static float block_scale(const product_job *job, int64_t row, int64_t col)
{
    float scale;
    memcpy(&scale,
           fp8q_view_element_2d(job->scale_b, row / FP8Q_SCALED_MM_BLOCK,
                                col / FP8Q_SCALED_MM_BLOCK),
           sizeof scale);
    return scale;
}

/* The blockwise scales of column `col` of b, one per 128 rows, into
 * `scales`. */
static void column_scales(const product_job *job, int64_t col, float *scales)
{
    const int64_t k = job->b->shape[0];
    int64_t row;

    for (row = 0; row < k; row += FP8Q_SCALED_MM_BLOCK) {
        scales[row / FP8Q_SCALED_MM_BLOCK] = block_scale(job, row, col);
    }
}

/* Portable: columns [first, end) one at a time, decoded (times their
 * blockwise scales, as fp8q_scaled_mm_operand would apply them) into a
 * buffer and dotted with every row. */
static void dot_columns(void *context, int64_t first, int64_t end)
{
    product_job *job = (product_job *)context;
    const int64_t m = job->a->shape[0];
    const int64_t k = job->a->shape[1];
    const int64_t n = job->b->shape[1];
    const int64_t k_blocks = fp8q_block_count(k, FP8Q_SCALED_MM_BLOCK);
    float *column =
        (float *)fp8q_aligned_alloc((size_t)(k + k_blocks) * sizeof(float));
    float *scales = column + k;
    int64_t col;
    int64_t row;
    int64_t i;

    if (column == NULL) {
        fp8q_atomic_store_i64(&job->failed, 1);
        return;
    }
    for (col = first; col < end; col++) {
        fp8q_load_float32(job->b->dtype,
                          (const char *)job->b->data +
                              col * job->b->strides[1],
                          1, column, k);
        if (job->blockwise) {
            column_scales(job, col, scales);
            for (i = 0; i < k; i++) {
                column[i] = column[i] * scales[i / FP8Q_SCALED_MM_BLOCK];
            }
        }
        for (row = 0; row < m; row++) {
            job->product[row * n + col] =
                dot((const float *)job->a->data + row * k, column, k);
        }
    }
    fp8q_aligned_free(column);
}

/* AVX2 + FMA, few rows: pairs of columns [first, end) decoded straight into
 * their dot products with every row (a lone last column is paired with
 * itself). */
static void dot_column_pairs(void *context, int64_t first, int64_t end)
{
    product_job *job = (product_job *)context;
    const int64_t m = job->a->shape[0];
    const int64_t k = job->a->shape[1];
    const int64_t n = job->b->shape[1];
    const int64_t k_blocks = fp8q_block_count(k, FP8Q_SCALED_MM_BLOCK);
    const uint8_t *codes = (const uint8_t *)job->b->data;
    float *scales = NULL;
    int64_t pair;
    int64_t row;

    if (job->blockwise) {
        scales = (float *)fp8q_aligned_alloc((size_t)(2 * k_blocks) *
                                             sizeof(float));
        if (scales == NULL) {
            fp8q_atomic_store_i64(&job->failed, 1);
            return;
        }
    }
    for (pair = first; pair < end; pair++) {
        const int64_t col = 2 * pair;
        const int64_t next = col + 1 < n ? col + 1 : col;
        if (scales != NULL) {
            column_scales(job, col, scales);
            column_scales(job, next, scales + k_blocks);
        }
        for (row = 0; row < m; row += FP8Q_DOT_ROWS) {
            float sums[2 * FP8Q_DOT_ROWS];
            const int rows =
                m - row < FP8Q_DOT_ROWS ? (int)(m - row) : FP8Q_DOT_ROWS;
            int r;
            fp8q_dot_columns_avx2(
                (const float *)job->a->data + row * k, k, rows,
                codes + col * job->b->strides[1],
                (next - col) * job->b->strides[1],
                job->b->dtype == FP8Q_FLOAT8_E5M2, k, scales, k_blocks, sums);
            for (r = 0; r < rows; r++) {
                job->product[(row + r) * n + col] = sums[r];
                job->product[(row + r) * n + next] = sums[FP8Q_DOT_ROWS + r];
            }
        }
    }
    fp8q_aligned_free(scales);
}

/* AVX2 + FMA: block `block_index` of BLOCK_COLUMNS columns, packed
 * BLOCK_DEPTH rows at a time and multiplied with all of a. */
static void panel_block(void *context, int64_t block_index)
{
    product_job *job = (product_job *)context;
    const int64_t m = job->a->shape[0];
    const int64_t k = job->a->shape[1];
    const int64_t n = job->b->shape[1];
    const int64_t column_stride = job->b->strides[1];
    const int64_t col = block_index * job->block_columns;
    const int64_t columns =
        n - col < job->block_columns ? n - col : job->block_columns;
    const int64_t n_panels =
        (columns + FP8Q_PANEL_COLUMNS - 1) / FP8Q_PANEL_COLUMNS;
    float scales[(BLOCK_DEPTH / FP8Q_PANEL_SCALE_ROWS) *
                 (BLOCK_COLUMNS / FP8Q_PANEL_COLUMNS)];
    float *packed = (float *)fp8q_aligned_alloc(
        (size_t)BLOCK_DEPTH * BLOCK_COLUMNS * sizeof(float));
    int64_t row;

    if (packed == NULL) {
        fp8q_atomic_store_i64(&job->failed, 1);
        return;
    }
    for (row = 0; row < k; row += BLOCK_DEPTH) {
        const int64_t depth = k - row < BLOCK_DEPTH ? k - row : BLOCK_DEPTH;
        int64_t segment;
        int64_t panel;
        for (segment = 0; job->blockwise && segment < depth;
             segment += FP8Q_PANEL_SCALE_ROWS) {
            for (panel = 0; panel < n_panels; panel++) {
                scales[segment / FP8Q_PANEL_SCALE_ROWS * n_panels + panel] =
                    block_scale(job, row + segment,
                                col + panel * FP8Q_PANEL_COLUMNS);
            }
        }
        fp8q_pack_panels_avx2((const uint8_t *)job->b->data +
                                  col * column_stride + row,
                              column_stride,
                              job->b->dtype == FP8Q_FLOAT8_E5M2, columns,
                              depth, job->blockwise ? scales : NULL, packed);
        fp8q_multiply_panels_avx2((const float *)job->a->data + row, k, m,
                                  packed, columns, depth, job->product + col,
                                  n, row > 0);
    }
    fp8q_aligned_free(packed);
}

/* Columns per panel_block task for n columns on `threads` threads:
 * BLOCK_COLUMNS, or fewer (a multiple of the panel width) when that would
 * leave fewer than two tasks per thread, so that a narrow product (n = 384:
 * one 256-column task and one 128-column one) still keeps every thread
 * equally busy. */
static int64_t block_columns_for(int64_t n, int threads)
{
    const int64_t wanted_tasks = 2 * (int64_t)threads;
    int64_t columns = (n + wanted_tasks - 1) / wanted_tasks;
    columns = (columns + FP8Q_PANEL_COLUMNS - 1) / FP8Q_PANEL_COLUMNS *
              FP8Q_PANEL_COLUMNS;
    return columns < BLOCK_COLUMNS ? columns : BLOCK_COLUMNS;
}

int fp8q_scaled_mm_uses_avx2_fma(void)
{
    /* fp8q_convert_allow_avx2(0) (tests) turns these kernels off too. */
    return fp8q_convert_uses_avx2() && fp8q_cpu_has_avx2_fma();
}

int fp8q_scaled_mm_has_kernel(int64_t m, int64_t k, const fp8q_view *b)
{
    return b->strides[0] == 1 && k > 0 &&
           (fp8q_scaled_mm_uses_avx2_fma() || m <= FP8Q_SCALED_MM_DOT_M);
}

fp8q_status fp8q_scaled_mm_product(const fp8q_view *a, const fp8q_view *b,
                                   const fp8q_view *scale_b,
                                   fp8q_scaling mode,
                                   const fp8q_view *product,
                                   fp8q_error *error)
{
    const int64_t n = b->shape[1];
    const int64_t work = a->shape[0] * b->shape[0] * n;
    product_job job;

    job.a = a;
    job.b = b;
    job.scale_b = scale_b;
    job.blockwise = mode == FP8Q_SCALING_BLOCKWISE;
    job.product = (float *)product->data;
    job.block_columns = BLOCK_COLUMNS;
    job.failed = 0;
    if (!fp8q_scaled_mm_uses_avx2_fma()) {
        fp8q_for_each_unit_range(n, work, dot_columns, &job);
    }
    else if (a->shape[0] <= FP8Q_SCALED_MM_DOT_M) {
        fp8q_for_each_unit_range((n + 1) / 2, work, dot_column_pairs, &job);
    }
    else {
        /* One task per block, not a few ranges per thread: blocks take
         * milliseconds, and a thread that shares its processor (e.g. with
         * a BLAS's idle threads, still spinning) then simply takes fewer. */
        const int threads = fp8q_threads_for(work);
        job.block_columns = block_columns_for(n, threads);
        fp8q_parallel_for((n + job.block_columns - 1) / job.block_columns,
                          threads, panel_block, &job);
    }
    if (fp8q_atomic_load_i64(&job.failed)) {
        return fp8q_fail(error, FP8Q_ERROR_MEMORY,
                         "no memory for the decoded columns of b (%" PRId64
                         " rows)",
                         b->shape[0]);
    }
    return FP8Q_OK;
}

/* ------------------------------------------------------------------------- */
/* Epilogue                                                                  */

typedef struct epilogue_job {
    float *product;        /* m x n, C-contiguous */
    int64_t n;
    const double *row_scale;    /* m values */
    const double *column_scale; /* n values */
    const float *bias;          /* n values, or NULL */
} epilogue_job;

static void epilogue_rows(void *context, int64_t first, int64_t end)
{
    const epilogue_job *job = (const epilogue_job *)context;
    int64_t row;
    int64_t col;

    for (row = first; row < end; row++) {
        float *values = job->product + row * job->n;
        const double row_scale = job->row_scale[row];
        for (col = 0; col < job->n; col++) {
            double value =
                (double)values[col] * row_scale * job->column_scale[col];
            if (job->bias != NULL) {
                value += (double)job->bias[col];
            }
            values[col] = (float)value;
        }
    }
}

/* The `count` values of a tensorwise (one element) or rowwise ((m, 1) or
 * (1, n)) float32 scale, as doubles: one value repeated, or the values along
 * the axis of extent `count`. */
static void load_scales(const fp8q_view *scale, int64_t count, double *out)
{
    int64_t step = 0; /* elements between consecutive values */
    int64_t i;
    int axis;

    for (axis = 0; axis < scale->ndim; axis++) {
        if (count > 1 && scale->shape[axis] == count) {
            step = scale->strides[axis];
        }
    }
    for (i = 0; i < count; i++) {
        float value;
        memcpy(&value,
               (const char *)scale->data + i * step * (int64_t)sizeof(float),
               sizeof value);
        out[i] = (double)value;
    }
}

fp8q_status fp8q_scaled_mm_epilogue(const fp8q_view *product,
                                    fp8q_scaling mode,
                                    const fp8q_view *scale_a,
                                    const fp8q_view *scale_b,
                                    const fp8q_view *bias, fp8q_error *error)
{
    const int64_t m = product->shape[0];
    const int64_t n = product->shape[1];
    /* One block a call: row scales, column scales, then the bias. */
    double *row_scale =
        (double *)fp8q_aligned_alloc((size_t)(m + n + 2) * sizeof(double) +
                                     (size_t)(n + 1) * sizeof(float));
    double *column_scale;
    float *bias_values;
    epilogue_job job;
    int64_t i;

    if (row_scale == NULL) {
        return fp8q_fail(error, FP8Q_ERROR_MEMORY,
                         "no memory for the scales of a (%" PRId64
                         ", %" PRId64 ") product",
                         m, n);
    }
    column_scale = row_scale + m + 1;
    bias_values = (float *)(column_scale + n + 1);
    if (mode == FP8Q_SCALING_BLOCKWISE) {
        for (i = 0; i < m; i++) {
            row_scale[i] = 1.0;
        }
        for (i = 0; i < n; i++) {
            column_scale[i] = 1.0;
        }
    }
    else {
        load_scales(scale_a, m, row_scale);
        load_scales(scale_b, n, column_scale);
    }
    if (bias != NULL) {
        fp8q_load_float32(bias->dtype, (const char *)bias->data,
                          bias->ndim == 0
                              ? 0
                              : bias->strides[0] *
                                    (int64_t)fp8q_dtype_itemsize(bias->dtype),
                          bias_values, n);
    }
    job.product = (float *)product->data;
    job.n = n;
    job.row_scale = row_scale;
    job.column_scale = column_scale;
    job.bias = bias != NULL ? bias_values : NULL;
    fp8q_for_each_unit_range(m, m * n, epilogue_rows, &job);
    fp8q_aligned_free(row_scale);
    return FP8Q_OK;
}
