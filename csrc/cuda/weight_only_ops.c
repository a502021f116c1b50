/*
 * weight_only_ops.c - the weight-only product on a GPU (weight_only_ops.h):
 * the kernels' contract checked on views, x's rows batched into launches
 * of kernels/gemv.cuh (cuda/launch.h) and the split-K scratch sized and
 * handed to each launch.
 */
#include <string.h>

#include "cuda/launch.h"
#include "cuda/weight_only_ops.h"

static int aligned16(const void *pointer)
{
    return ((uintptr_t)pointer & 15u) == 0u;
}

/* The address of row `row` of a C-contiguous matrix view. */
static void *matrix_row(const fp8q_view *matrix, int64_t row)
{
    return (char *)matrix->data +
           row * matrix->shape[1] * (int64_t)fp8q_dtype_itemsize(matrix->dtype);
}

/* *args zeroed, then what rows first_row .. first_row + count - 1 of
 * `rows`, the (N, K) weight (NULL: n, k and the weight's dtype stay 0) and
 * scale_kind say. */
static void gemv_args(const fp8q_view *rows, int64_t first_row, int64_t count,
                      const fp8q_view *weight, int scale_kind,
                      fp8q_gemv_fp8_args *args)
{
    memset(args, 0, sizeof *args);
    args->x = matrix_row(rows, first_row);
    args->m = count;
    args->x_dtype = (int32_t)rows->dtype;
    args->scale_kind = scale_kind;
    if (weight != NULL) {
        args->weight = (const uint8_t *)weight->data;
        args->n = weight->shape[0];
        args->k = weight->shape[1];
        args->weight_dtype = (int32_t)weight->dtype;
    }
}

/* Nonzero when the kernels take rows first_row .. first_row + count - 1. */
static int takes(const fp8q_cuda_device *device, const fp8q_view *rows,
                 int64_t first_row, int64_t count, int scale_kind)
{
    fp8q_gemv_fp8_args args;

    gemv_args(rows, first_row, count, NULL, scale_kind, &args);
    return fp8q_cuda_gemv_fp8_takes(device, &args);
}

/* Rows from first_row on (of `remaining`) that one launch takes: up to 64
 * on the tensor cores (16 with block scales) where the kernels allow, else
 * up to 8. */
static int64_t launch_rows(const fp8q_cuda_device *device,
                           const fp8q_view *rows, int64_t first_row,
                           int64_t remaining, int scale_kind)
{
    static const int64_t tensor_core_rows[] = {
        FP8Q_GEMV_TC_MAX_ROWS, FP8Q_GEMV_TC_MAX_BLOCK_SCALED_ROWS};
    size_t i;

    for (i = 0; i < sizeof tensor_core_rows / sizeof tensor_core_rows[0];
         i++) {
        const int64_t count = remaining < tensor_core_rows[i]
                                  ? remaining
                                  : tensor_core_rows[i];
        if (takes(device, rows, first_row, count, scale_kind)) {
            return count;
        }
    }
    return remaining < FP8Q_GEMV_MAX_ROWS ? remaining : FP8Q_GEMV_MAX_ROWS;
}

/* The splits of K for the launch of rows first_row .. + count - 1. */
static int launch_splits(const fp8q_cuda_device *device,
                         const fp8q_view *rows, int64_t first_row,
                         int64_t count, const fp8q_view *weight,
                         int scale_kind)
{
    fp8q_gemv_fp8_args args;

    gemv_args(rows, first_row, count, weight, scale_kind, &args);
    return fp8q_cuda_gemv_fp8_splits(device, &args);
}

/* The float32 scratch bytes a launch of `count` rows with `splits` needs
 * (0 for no split). */
static size_t scratch_of(int splits, int64_t count, const fp8q_view *weight)
{
    return splits > 1 ? (size_t)splits * (size_t)count *
                            (size_t)weight->shape[0] * sizeof(float)
                      : 0u;
}

int fp8q_cuda_weight_only_may_take(const fp8q_view *x,
                                   const fp8q_view *weight, int every_row)
{
    const int64_t k = x->ndim > 0 ? x->shape[x->ndim - 1] : 0;
    int64_t m;

    if (k == 0 || weight->ndim != 2 || k != weight->shape[1] || k % 16 != 0) {
        return 0;
    }
    m = fp8q_view_size(x) / k;
    return every_row || (m >= 1 && m <= FP8Q_GEMV_TC_MAX_ROWS);
}

void fp8q_cuda_weight_only_plan_make(const fp8q_cuda_device *device,
                                     const fp8q_view *rows,
                                     const fp8q_view *weight,
                                     const fp8q_view *weight_scale,
                                     fp8q_granularity_kind granularity,
                                     int every_row,
                                     fp8q_cuda_weight_only_plan *plan)
{
    const int64_t m = rows->shape[0];
    int64_t first_row, count;

    memset(plan, 0, sizeof *plan);
    plan->scale_kind = granularity == FP8Q_GRANULARITY_TENSOR
                           ? FP8Q_GEMV_SCALE_TENSOR
                       : granularity == FP8Q_GRANULARITY_ROW
                           ? FP8Q_GEMV_SCALE_ROW
                           : FP8Q_GEMV_SCALE_BLOCK;
    /* No rows: nothing is launched, and an empty view's data pointer may
     * be anything (a zig-built module's was not 16-byte aligned). */
    if (weight_scale->dtype != FP8Q_FLOAT32 ||
        (m > 0 && !aligned16(rows->data)) || !aligned16(weight->data) ||
        (!every_row && !takes(device, rows, 0, m, plan->scale_kind))) {
        return;
    }
    plan->takes = 1;
    for (first_row = 0; first_row < m; first_row += count) {
        size_t bytes;
        count = launch_rows(device, rows, first_row, m - first_row,
                            plan->scale_kind);
        bytes = scratch_of(launch_splits(device, rows, first_row, count,
                                         weight, plan->scale_kind),
                           count, weight);
        if (bytes > plan->scratch_bytes) {
            plan->scratch_bytes = bytes;
        }
    }
}

fp8q_status fp8q_cuda_weight_only_gemv(const fp8q_cuda_device *device,
                                       const fp8q_view *rows,
                                       const fp8q_view *weight,
                                       const fp8q_view *weight_scale,
                                       const fp8q_view *bias,
                                       const fp8q_cuda_weight_only_plan *plan,
                                       const fp8q_view *out, void *scratch,
                                       size_t scratch_bytes,
                                       fp8q_cu_stream stream,
                                       fp8q_error *error)
{
    const int64_t m = rows->shape[0];
    int64_t first_row, count;
    fp8q_gemv_fp8_args args;
    fp8q_status status;

    if (!plan->takes) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "weight-only product: the kernels do not take this "
                         "call (its plan says so)");
    }
    for (first_row = 0; first_row < m; first_row += count) {
        int splits;
        count = launch_rows(device, rows, first_row, m - first_row,
                            plan->scale_kind);
        splits = launch_splits(device, rows, first_row, count, weight,
                               plan->scale_kind);
        if (scratch_of(splits, count, weight) > scratch_bytes) {
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "weight-only product: the split-K scratch holds "
                             "%llu bytes, a launch needs %llu",
                             (unsigned long long)scratch_bytes,
                             (unsigned long long)scratch_of(splits, count,
                                                            weight));
        }
        gemv_args(rows, first_row, count, weight, plan->scale_kind, &args);
        args.scale = (const float *)weight_scale->data;
        args.bias = bias != NULL ? bias->data : NULL;
        args.bias_dtype = bias != NULL ? (int32_t)bias->dtype : 0;
        args.y = matrix_row(out, first_row);
        args.partial = splits > 1 ? (float *)scratch : NULL;
        args.splits = splits > 1 ? splits : 1;
        status = fp8q_cuda_launch_gemv_fp8(device, &args, stream, error);
        if (status != FP8Q_OK) {
            return status;
        }
    }
    return FP8Q_OK;
}
