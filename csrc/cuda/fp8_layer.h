/*
 * fp8_layer.h - the W8A8 forward of an fp8q.torch.Linear (and of
 * fp8q.linear, the same entry) on views of one device's memory: x's
 * activations quantized to float8_e4m3fn (per token, per 1 x 128 block or
 * with a static scale) into a scratch block the caller allocates, then the
 * FP8 scaled product y = codes @ weight.T (scales and bias applied) into
 * out. On the CPU with csrc/core (core/activation.h, core/scaled_mm_run.h;
 * a token holding NaN or infinity gives a row of NaN, every other row as
 * if it were absent); on a GPU with cuda/ops.h and cuda/scaled_mm_ops.h on
 * the caller's stream (the dynamic scales carry a NaN into the row). The
 * numbers are exactly fp8q.quantize of each token followed by
 * fp8q.scaled_mm (docs/torch.md).
 *
 * The binding (csrc/python/linear_layer.c) imports the tensors, allocates
 * the scratch block fp8q_fp8_layer_scratch_bytes asks for (torch's caching
 * allocator for torch tensors, so CUDA graphs capture it), orders the
 * stream after the memory's earlier uses and raises the status. Call
 * without holding Python's GIL.
 */
#ifndef FP8Q_CUDA_FP8_LAYER_H
#define FP8Q_CUDA_FP8_LAYER_H

#include <stdint.h>

#include "core/quantize.h"
#include "core/scaled_mm_run.h"
#include "core/status.h"
#include "core/view.h"
#include "cuda/cublaslt.h"
#include "cuda/driver.h"

/* Where the activation scales start in the scratch block: past the codes,
 * on a boundary any scale reader (cuBLASLt's vectors included) accepts. */
#define FP8Q_FP8_LAYER_SCALES_ALIGNMENT 256

typedef struct fp8q_fp8_layer_call {
    /* NULL: every view is host memory and the CPU computes; else every
     * view is device memory of `device`, the work queued on `stream`, and
     * `library` the loaded cuBLASLt. */
    const fp8q_cuda_device *device;
    fp8q_cu_stream stream;
    const fp8q_cublaslt *library;
    fp8q_granularity_kind granularity; /* of the weight scales          */
    const fp8q_view *weight;       /* (N, K) float8_e4m3fn / e5m2        */
    const fp8q_view *weight_scale; /* float32: () "tensor", (N, 1) "row",
                                      (ceil(N/128), ceil(K/128)) "block" */
    const fp8q_view *bias;         /* NULL or N values                   */
    /* The activations: `rows`, x as a C-contiguous (M, K) float32 /
     * float16 / bfloat16 view, quantized here, with `input_scale` (NULL or
     * one float32) as the static scale; or, with `rows` NULL, `codes`
     * (M, K) FP8 and `x_scale` (float32, as scaled_mm's scale_a takes
     * them) given. */
    const fp8q_view *rows;
    const fp8q_view *input_scale;
    const fp8q_view *codes;
    const fp8q_view *x_scale;
    /* With given codes on the CPU: rows whose x_scale is not finite (a
     * token that held NaN or infinity) give a row of NaN. */
    int flag_nonfinite_scales;
    const fp8q_view *out; /* (M, N), C-contiguous, of the result's dtype */
    fp8q_sgemm sgemm;     /* CPU: the product where core has no kernel  */
    void *sgemm_context;
} fp8q_fp8_layer_call;

/* The bytes of scratch memory (on the call's device) fp8q_fp8_layer_forward
 * needs for `call`'s M rows: the codes and dynamic scales it computes, on
 * the CPU also a row amax workspace and the non-finite row flags; 0 when
 * nothing is needed. */
int64_t fp8q_fp8_layer_scratch_bytes(const fp8q_fp8_layer_call *call);

/*
 * out = (codes * x_scale) @ (weight * weight_scale).T + bias, the codes
 * and scales computed from `rows` into `scratch` (at least
 * fp8q_fp8_layer_scratch_bytes, 16-byte aligned) or given; the product's
 * scaling mode from the scales' shapes (core/scaled_mm.h's
 * fp8q_scaled_mm_mode, whose FP8Q_ERROR_VALUE it returns). M and N > 0.
 */
fp8q_status fp8q_fp8_layer_forward(const fp8q_fp8_layer_call *call,
                                   void *scratch, fp8q_error *error);

#endif /* FP8Q_CUDA_FP8_LAYER_H */
