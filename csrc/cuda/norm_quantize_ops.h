/*
 * norm_quantize_ops.h - the fused RMSNorm / LayerNorm + per-token FP8
 * quantize on a GPU (kernels/norm_quantize.cuh), for the argument block
 * core/norm_quantize.h describes from views (fp8q_norm_quantize_describe):
 * the op's whole host side below the binding, its kernel registered in
 * cuda/kernel_list.h. Call without holding Python's GIL.
 */
#ifndef FP8Q_CUDA_NORM_QUANTIZE_OPS_H
#define FP8Q_CUDA_NORM_QUANTIZE_OPS_H

#include "core/norm_quantize.h"
#include "core/status.h"
#include "cuda/driver.h"

/* The kernel over args->n_rows rows of device memory of `device`, on
 * `stream`: one block of FP8Q_NORM_QUANTIZE_THREADS per row, up to
 * FP8Q_NORM_QUANTIZE_MAX_GRID blocks (each then taking several rows).
 * Nothing for 0 rows; FP8Q_ERROR_VALUE / TYPE as
 * fp8q_norm_quantize_check. */
fp8q_status fp8q_cuda_norm_quantize(const fp8q_cuda_device *device,
                                    const fp8q_norm_quantize_args *args,
                                    fp8q_cu_stream stream, fp8q_error *error);

#endif /* FP8Q_CUDA_NORM_QUANTIZE_OPS_H */
