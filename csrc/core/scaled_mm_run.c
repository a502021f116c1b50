/*
 * scaled_mm_run.c - one CPU FP8 scaled matmul from checked views
 * (scaled_mm_run.h): operands, product, epilogue, amax, the final rounding,
 * and the float32 temporaries between them.
 */
#include <inttypes.h>
#include <string.h>

#include "core/amax.h"
#include "core/cast.h"
#include "core/scaled_mm_run.h"
#include "platform.h"

/* Nonzero when a 2-D view steps through memory faster down its columns
 * than along its rows (e.g. b = w.T of a row-major weight w). */
static int is_column_major(const fp8q_view *view)
{
    const int64_t down = view->strides[0] < 0 ? -view->strides[0]
                                              : view->strides[0];
    const int64_t across = view->strides[1] < 0 ? -view->strides[1]
                                                : view->strides[1];
    return view->shape[0] > 1 && view->shape[1] > 1 && down < across;
}

/* One float32 (rows, cols) matrix of a call's temporaries, C-contiguous
 * or, with column_major, Fortran-contiguous (a BLAS takes either without a
 * copy), laid out in *view by new_matrices; a NULL view asks for none. */
typedef struct matrix_request {
    int64_t rows;
    int64_t cols;
    int column_major;
    fp8q_view *view;
} matrix_request;

/* Bytes of a (rows, cols) float32 matrix, rounded up to FP8Q_ALIGNMENT so
 * that the next one in the block stays aligned. */
static size_t matrix_bytes(int64_t rows, int64_t cols)
{
    const size_t bytes = (size_t)(rows * cols) * sizeof(float);
    return (bytes + FP8Q_ALIGNMENT - 1) / FP8Q_ALIGNMENT * FP8Q_ALIGNMENT;
}

/* The requested matrices in one new block (one allocation a call, not one
 * a matrix: this runs on every CPU product), *block to free with
 * fp8q_aligned_free. */
static fp8q_status new_matrices(const matrix_request *requests, int count,
                                void **block, fp8q_error *error)
{
    size_t total = 0;
    char *next;
    int index;

    for (index = 0; index < count; index++) {
        if (requests[index].view != NULL) {
            total += matrix_bytes(requests[index].rows, requests[index].cols);
        }
    }
    *block = fp8q_aligned_alloc(total);
    if (*block == NULL) {
        return fp8q_fail(error, FP8Q_ERROR_MEMORY,
                         "no memory for %" PRId64
                         " bytes of float32 scaled_mm temporaries",
                         (int64_t)total);
    }
    next = (char *)*block;
    for (index = 0; index < count; index++) {
        const matrix_request *request = &requests[index];
        fp8q_view *view = request->view;
        if (view == NULL) {
            continue;
        }
        memset(view, 0, sizeof *view);
        view->data = next;
        view->dtype = FP8Q_FLOAT32;
        view->ndim = 2;
        view->shape[0] = request->rows;
        view->shape[1] = request->cols;
        /* (An empty axis's stride is never used; keep strides nonzero.) */
        view->strides[0] = request->column_major
                               ? 1
                               : (request->cols > 0 ? request->cols : 1);
        view->strides[1] = request->column_major
                               ? (request->rows > 0 ? request->rows : 1)
                               : 1;
        next += matrix_bytes(request->rows, request->cols);
    }
    return FP8Q_OK;
}

/* Nonzero when core's product can be written straight into the result (a
 * new one, which nothing else can alias): a C-contiguous float32 (m, n)
 * view. */
static int writes_in_place(const fp8q_view *out)
{
    return out->dtype == FP8Q_FLOAT32 && out->strides[1] == 1 &&
           (out->strides[0] == out->shape[1] || out->shape[0] == 1);
}

/* The float32 product of the operands, epilogue applied, into *product:
 * out itself or a new matrix; the temporaries' block in *owned (to free,
 * also on failure). */
static fp8q_status compute_product(const fp8q_scaled_mm_run_call *call,
                                   fp8q_view *product, void **owned,
                                   fp8q_error *error)
{
    const int64_t m = call->a->shape[0];
    const int64_t k = call->a->shape[1];
    const int64_t n = call->b->shape[1];
    /* core's own product, where it has one: no float32 copy of b. */
    const int own_product = fp8q_scaled_mm_has_kernel(m, k, call->b);
    const int in_place =
        own_product && call->out_is_new && writes_in_place(call->out);
    fp8q_view a_operand, b_operand;
    const matrix_request requests[3] = {
        {m, n, 0, in_place ? NULL : product},
        {m, k, !own_product && is_column_major(call->a), &a_operand},
        {k, n, is_column_major(call->b), own_product ? NULL : &b_operand},
    };
    fp8q_status status = new_matrices(requests, 3, owned, error);

    if (in_place) {
        *product = *call->out; /* the result itself: no copy */
    }
    if (status == FP8Q_OK) {
        status = fp8q_scaled_mm_operand(call->a, call->scale_a, call->mode,
                                        1, &a_operand, error);
    }
    if (status == FP8Q_OK && own_product) {
        status = fp8q_scaled_mm_product(&a_operand, call->b, call->scale_b,
                                        call->mode, product, error);
    }
    else if (status == FP8Q_OK) {
        status = fp8q_scaled_mm_operand(call->b, call->scale_b, call->mode,
                                        0, &b_operand, error);
        if (status == FP8Q_OK) {
            status = call->sgemm(call->sgemm_context, &a_operand, &b_operand,
                                 product, error);
        }
    }
    if (status != FP8Q_OK) {
        return status;
    }
    return fp8q_scaled_mm_epilogue(product, call->mode, call->scale_a,
                                   call->scale_b, call->bias, error);
}

fp8q_status fp8q_scaled_mm_run(const fp8q_scaled_mm_run_call *call,
                               fp8q_error *error)
{
    fp8q_view product, scale_view, amax;
    float scale_result = call->scale_result;
    void *owned = NULL;
    fp8q_status status = compute_product(call, &product, &owned, error);

    if (status == FP8Q_OK && call->amax_out != NULL) {
        amax = *call->amax_out;
        amax.ndim = 2;
        amax.shape[0] = 1;
        amax.shape[1] = 1;
        amax.strides[0] = 0;
        amax.strides[1] = 0;
        status = fp8q_amax(&product, &amax, error);
    }
    /* Round once into out's dtype (FP8: divided by scale_result,
     * saturated), unless the product was computed in the result itself. */
    if (status == FP8Q_OK && product.data != call->out->data) {
        memset(&scale_view, 0, sizeof scale_view);
        scale_view.data = &scale_result;
        scale_view.dtype = FP8Q_FLOAT32;
        scale_view.ndim = 2;
        scale_view.shape[0] = product.shape[0];
        scale_view.shape[1] = product.shape[1];
        status = fp8q_cast(&product, call->out,
                           call->out->dtype == FP8Q_FLOAT8_E4M3FN
                               ? &scale_view
                               : NULL,
                           FP8Q_SCALE_DIVIDE, 1, error);
    }
    fp8q_aligned_free(owned);
    return status;
}

fp8q_status fp8q_weight_only_run(const fp8q_view *rows,
                                 const fp8q_view *weight,
                                 const fp8q_view *weight_scale,
                                 const fp8q_granularity *granularity,
                                 const fp8q_view *bias, const fp8q_view *out,
                                 fp8q_sgemm sgemm, void *sgemm_context,
                                 fp8q_error *error)
{
    const int64_t m = rows->shape[0];
    const int64_t k = rows->shape[1];
    const int64_t n = weight->shape[0];
    fp8q_view x32, w32, bias32, product;
    const matrix_request requests[4] = {
        {m, k, 0, &x32},
        {n, k, 0, &w32},
        {m, n, 0, &product},
        {n, 1, 0, bias != NULL ? &bias32 : NULL},
    };
    void *block;
    fp8q_status status = new_matrices(requests, 4, &block, error);
    int64_t row, column;

    bias32.ndim = 1;
    if (status == FP8Q_OK) {
        status = fp8q_cast(rows, &x32, NULL, FP8Q_SCALE_DIVIDE, 1, error);
    }
    if (status == FP8Q_OK) {
        status = fp8q_dequantize(weight, weight_scale, granularity, &w32,
                                 error);
    }
    if (status == FP8Q_OK && bias != NULL) {
        status = fp8q_cast(bias, &bias32, NULL, FP8Q_SCALE_DIVIDE, 1, error);
    }
    if (status == FP8Q_OK) {
        /* w32.T: (K, N), Fortran-contiguous. */
        w32.shape[0] = k;
        w32.shape[1] = n;
        w32.strides[0] = 1;
        w32.strides[1] = k > 0 ? k : 1;
        status = sgemm(sgemm_context, &x32, &w32, &product, error);
    }
    if (status == FP8Q_OK && bias != NULL) {
        float *values = (float *)product.data;
        const float *added = (const float *)bias32.data;
        for (row = 0; row < m; row++) {
            for (column = 0; column < n; column++) {
                values[row * n + column] += added[column];
            }
        }
    }
    if (status == FP8Q_OK) {
        status = fp8q_cast(&product, out, NULL, FP8Q_SCALE_DIVIDE, 1, error);
    }
    fp8q_aligned_free(block);
    return status;
}
