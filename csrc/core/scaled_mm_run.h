/*
 * scaled_mm_run.h - one CPU FP8 scaled matmul from its checked views:
 * operands decoded, product (core's kernels, or the caller's float32
 * sgemm), epilogue, amax and the rounding into the result, with the
 * temporaries it needs. The binding (csrc/python/scaled_mm.c) checks the
 * arguments and hands NumPy's BLAS in as the sgemm.
 */
#ifndef FP8Q_CORE_SCALED_MM_RUN_H
#define FP8Q_CORE_SCALED_MM_RUN_H

#include "core/quantize.h"
#include "core/scaled_mm.h"

/* product (m, n) = a (m, k) @ b (k, n), float32 views, a and b C- or
 * Fortran-contiguous, product C-contiguous: a BLAS sgemm. Called on the
 * thread that called fp8q_scaled_mm_run, with `context`. */
typedef fp8q_status (*fp8q_sgemm)(void *context, const fp8q_view *a,
                                  const fp8q_view *b,
                                  const fp8q_view *product,
                                  fp8q_error *error);

typedef struct fp8q_scaled_mm_run_call {
    const fp8q_view *a;        /* (M, K) FP8                              */
    const fp8q_view *b;        /* (K, N) FP8                              */
    const fp8q_view *scale_a;  /* float32, laid out for `mode`            */
    const fp8q_view *scale_b;
    const fp8q_view *bias;     /* NULL or N values (float dtypes)         */
    const fp8q_view *amax_out; /* NULL or one float32: max |product|      */
    const fp8q_view *out;      /* (M, N) of the result's dtype            */
    fp8q_scaling mode;
    float scale_result; /* an FP8 result is product / scale_result       */
    int out_is_new;     /* nothing aliases out: the product may go there */
    fp8q_sgemm sgemm;   /* for b without a core kernel                    */
    void *sgemm_context;
} fp8q_scaled_mm_run_call;

/*
 * out = round((a * scale_a) @ (b * scale_b) + bias) on the CPU
 * (docs/scaled_mm.md, "The CPU path"): a decoded exactly into float32
 * (blockwise scales applied), multiplied by core's kernel where
 * fp8q_scaled_mm_has_kernel takes b, else b decoded too and call->sgemm
 * multiplies (float32 accumulation either way); the epilogue's scales and
 * bias in double; amax_out = max |product|; then one rounding into out's
 * dtype (an FP8 out divided by scale_result, saturating). With out_is_new
 * and a C-contiguous float32 out, the kernel writes the product into out
 * itself. Temporaries are allocated and freed here.
 */
fp8q_status fp8q_scaled_mm_run(const fp8q_scaled_mm_run_call *call,
                               fp8q_error *error);

/*
 * The weight-only product on the CPU (fp8q.linear(weight_only=True)):
 * out (M, N) = round(x32 @ w32.T + bias32), x32 the exact float32 values
 * of rows (M, K, any float dtype), w32 = weight (N, K, FP8) times
 * weight_scale at `granularity` rounded once to float32, bias32 bias (NULL
 * or N values) in float32, added in float32 after the product; `sgemm`
 * multiplies (float32 accumulation), and the result is rounded once into
 * out's dtype. Temporaries are allocated and freed here.
 */
fp8q_status fp8q_weight_only_run(
    const fp8q_view *rows, const fp8q_view *weight,
    const fp8q_view *weight_scale, const fp8q_granularity *granularity,
    const fp8q_view *bias, const fp8q_view *out, fp8q_sgemm sgemm,
    void *sgemm_context, fp8q_error *error);

#endif /* FP8Q_CORE_SCALED_MM_RUN_H */
