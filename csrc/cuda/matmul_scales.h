/*
 * matmul_scales.h - the scale operands of a one-call cuBLASLt product,
 * prepared on the device in scratch memory (cuda/scratch.h), without
 * allocating, copying from the host or synchronizing:
 *   - block scales in cuBLASLt's layouts: fp8q's (M, K/128) scales of a as a
 *     (K/128, M) row-major array (VEC128_32F, cuBLASLt's B), fp8q's
 *     (K/128, N/128) scales of b as (N/128, L4) row-major with L4 = K/128
 *     rounded up to a multiple of 4, the padding zeros (BLK128x128_32F,
 *     cuBLASLt's A) - the layouts torch._scaled_mm's blockwise checks ask
 *     for; NVIDIA's cublasLt.h does not spell them out;
 *   - D's scale, 1 / scale_result (fp8q's scale_result is a dequantization
 *     scale, cuBLASLt multiplies by D's scale), one correctly rounded
 *     float32 division, on the device for a device scale_result.
 * Call without holding Python's GIL.
 */
#ifndef FP8Q_CUDA_MATMUL_SCALES_H
#define FP8Q_CUDA_MATMUL_SCALES_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "cuda/driver.h"

/* Scratch bytes fp8q_matmul_block_scales needs for an (m, k) @ (k, n)
 * product (k a multiple of 128). */
size_t fp8q_matmul_block_scales_bytes(int64_t m, int64_t n, int64_t k);

/* Writes the block scales (device float32: scale_a C-contiguous (m,
 * K/128); scale_b C-contiguous (K/128, ceil(n/128)), or with
 * `scale_b_transposed` its transpose, C-contiguous (ceil(n/128), K/128), as
 * a weight's own block scales are stored) in cuBLASLt's layouts into
 * `scratch` (fp8q_matmul_block_scales_bytes of it, 256-byte aligned),
 * ordered on `stream`; *a_scale and *b_scale point at them there, except
 * that a transposed scale_b already in cuBLASLt's layout (K/128 a multiple
 * of 4, 16-byte aligned) is used where it is: *b_scale = scale_b, nothing
 * launched for it. */
fp8q_status fp8q_matmul_block_scales(const fp8q_cuda_device *device,
                                     const float *scale_a,
                                     const float *scale_b,
                                     int scale_b_transposed, int64_t m,
                                     int64_t n, int64_t k, void *scratch,
                                     fp8q_cu_stream stream,
                                     const float **a_scale,
                                     const float **b_scale,
                                     fp8q_error *error);

/* Scratch bytes fp8q_matmul_d_scale needs. */
#define FP8Q_MATMUL_D_SCALE_BYTES 256

/* 1 / scale_result into `scratch` (*d_scale points at it), ordered on
 * `stream`: computed there by the cast kernel from `scale_result_on_device`
 * (one float32 on the device) when not NULL, else from the host's
 * `scale_result`, computed on the host and written by a 4-byte fill (no
 * copy, no wait: a memset node in a CUDA graph, holding the value of the
 * call that was captured). Both round 1 / scale_result once, to nearest. */
fp8q_status fp8q_matmul_d_scale(const fp8q_cuda_device *device,
                                const float *scale_result_on_device,
                                float scale_result, void *scratch,
                                fp8q_cu_stream stream, const float **d_scale,
                                fp8q_error *error);

#endif /* FP8Q_CUDA_MATMUL_SCALES_H */
