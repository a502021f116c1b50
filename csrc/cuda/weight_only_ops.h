/*
 * weight_only_ops.h - the weight-only (W8A16) product y = x . (weight *
 * weight_scale)^T + bias straight from the FP8 codes on a GPU
 * (kernels/gemv.cuh), on views + device + stream: whether the kernels take
 * a call, how its rows are batched into launches (up to 64 rows on the
 * tensor cores, 16 with block scales, else 8 on the CUDA cores) and how
 * much split-K scratch they need. What csrc/python/layer_weight_only.c
 * decided and launched above the binding; it now allocates the result and
 * the scratch (from torch's allocator for torch tensors, so the call stays
 * CUDA-graph capturable) and raises.
 *
 * Every view's memory is device memory of `device`, the caller having
 * ordered `stream` after its earlier uses. Call without Python's GIL.
 */
#ifndef FP8Q_CUDA_WEIGHT_ONLY_OPS_H
#define FP8Q_CUDA_WEIGHT_ONLY_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "core/quantize.h"
#include "core/status.h"
#include "core/view.h"
#include "cuda/driver.h"

/* What fp8q_cuda_weight_only_plan decided for one call. */
typedef struct fp8q_cuda_weight_only_plan {
    int takes;            /* nonzero: the kernels take the call        */
    int scale_kind;       /* kernels/gemv.cuh's FP8Q_GEMV_SCALE_*      */
    size_t scratch_bytes; /* split-K scratch the launches need, 0: none */
} fp8q_cuda_weight_only_plan;

/* Nonzero when a product of x (..., K) with an (N, K) weight may be one
 * the kernels take, from the shapes alone: K equal in both, K > 0 and a
 * multiple of 16 and, unless `every_row`, 1 to 64 rows of x (the most one
 * launch takes). Zero means: not on this path (the caller's general path
 * computes it or says what is wrong). */
int fp8q_cuda_weight_only_may_take(const fp8q_view *x,
                                   const fp8q_view *weight, int every_row);

/*
 * The plan of the product of `rows` (M, K), C-contiguous, with `weight`
 * (N, K) FP8 C-contiguous and `weight_scale` (C-contiguous, at
 * `granularity`: tensor, row or 128x128 blocks; shape checked by the
 * caller) on `device`: plan->takes nonzero when the kernels take it
 * (weight_scale float32, rows (when there are any) and weight 16-byte aligned and, unless
 * `every_row`, all M rows in one launch: fp8q_cuda_gemv_fp8_takes), then
 * plan->scale_kind and plan->scratch_bytes, the largest float32 scratch
 * (splits x rows x N values, fp8q_cuda_gemv_fp8_splits) any of the
 * launches of fp8q_cuda_weight_only_gemv needs (0 when none splits K).
 * Deterministic: the same views on the same device give the same plan.
 */
void fp8q_cuda_weight_only_plan_make(
    const fp8q_cuda_device *device, const fp8q_view *rows,
    const fp8q_view *weight, const fp8q_view *weight_scale,
    fp8q_granularity_kind granularity, int every_row,
    fp8q_cuda_weight_only_plan *plan);

/*
 * out (M, N, C-contiguous, rows' dtype) = rows . (weight * weight_scale)^T
 * + bias (NULL or N values of float32 / float16 / bfloat16, C-contiguous)
 * by kernels/gemv.cuh, for a plan that takes the call: the rows in
 * launches of up to 64 (the tensor cores where fp8q_cuda_gemv_fp8_takes
 * allows, 16 with block scales, else 8 on the CUDA cores), each reading the
 * whole weight; a launch that splits K uses `scratch` (at least
 * plan->scratch_bytes, 16-byte aligned; NULL when that is 0), its splits'
 * sums added in a fixed order. FP8Q_ERROR_VALUE when the plan does not
 * take the call or the scratch is too small.
 */
fp8q_status fp8q_cuda_weight_only_gemv(
    const fp8q_cuda_device *device, const fp8q_view *rows,
    const fp8q_view *weight, const fp8q_view *weight_scale,
    const fp8q_view *bias, const fp8q_cuda_weight_only_plan *plan,
    const fp8q_view *out, void *scratch, size_t scratch_bytes,
    fp8q_cu_stream stream, fp8q_error *error);

#endif /* FP8Q_CUDA_WEIGHT_ONLY_OPS_H */
