/*
 * scaled_mm_ops.h - fp8q.scaled_mm on the GPU, on views of one device's
 * memory queued on the caller's stream: which path a product takes
 * (scaled_mm_paths.h names them), the operands and temporaries it needs
 * there (gathered copies in fp8q_cuda_buffer, the rest in the device's
 * reused scratch memory), and the cuBLASLt product and epilogue kernel that
 * compute it. docs/scaled_mm.md, "On the GPU"; scaled_mm_ops.c has the
 * paths and their order. csrc/python/scaled_mm_cuda.c turns the checked
 * Python call into this one and the status into an exception.
 *
 * Every view's memory is device memory of `device` (the caller has brought
 * host scales and biases there and ordered `stream` after the memory's
 * earlier uses). Functions return FP8Q_OK or write the failure into
 * `error`. Call without holding Python's GIL.
 */
#ifndef FP8Q_CUDA_SCALED_MM_OPS_H
#define FP8Q_CUDA_SCALED_MM_OPS_H

#include "core/scaled_mm.h"
#include "core/scaled_mm_run.h"
#include "core/status.h"
#include "core/view.h"
#include "cuda/cublaslt.h"
#include "cuda/driver.h"

/* A checked scaled_mm call (core/scaled_mm.h's fp8q_scaled_mm_mode gave
 * `mode` for these scales), every view in device memory of one GPU. */
typedef struct fp8q_cuda_scaled_mm_call {
    const fp8q_view *a;       /* (M, K) FP8, any strides                 */
    const fp8q_view *b;       /* (K, N) FP8, any strides (b = w.T of a   */
                              /* C-contiguous (N, K) w is read in place) */
    const fp8q_view *scale_a; /* float32, the mode's shape, any strides  */
    const fp8q_view *scale_b;
    const fp8q_view *bias;    /* NULL or N values (float32, float16,     */
                              /* bfloat16), any strides                  */
    void *amax_out;           /* NULL or one float32                     */
    const fp8q_view *out;     /* (M, N) of out_dtype, C-contiguous       */
    fp8q_scaling mode;
    int use_fast_accum;
    int has_scale_result;
    float scale_result; /* when given on the host */
    /* NULL, or scale_result's one float32 in device memory: used there,
     * never read back */
    const float *scale_result_on_device;
    /* fp8q_scaled_mm_on_device only: nonzero when scale_a, scale_b or the
     * bias is host memory, copied to the device first. */
    int scale_a_on_host, scale_b_on_host, bias_on_host;
} fp8q_cuda_scaled_mm_call;

/* Nonzero when fp8q_cuda_scaled_mm runs a product with cuBLASLt (out
 * C-contiguous and M, N > 0): the caller loads cuBLASLt first then. */
int fp8q_cuda_scaled_mm_uses_cublaslt(const fp8q_cuda_scaled_mm_call *call);

/*
 * out = (a * scale_a) @ (b * scale_b) + bias, rounded into out's dtype
 * (an FP8 out divided by scale_result, saturating), amax_out = the largest
 * |value| before that division; along the first path that takes the call
 * (scaled_mm_ops.c), which fp8q_cuda_mm_path_taken records. `library` is
 * the loaded cuBLASLt (fp8q_cublaslt_load), unused and may be NULL unless
 * fp8q_cuda_scaled_mm_uses_cublaslt. Refused with FP8Q_ERROR_VALUE
 * "scaled_mm: on CUDA, out= must be C-contiguous, got strides (...) (pass
 * a C-contiguous out, or none)"; an empty product only zeroes amax_out. A
 * failure of cuBLASLt or the driver on a path is its message after
 * "scaled_mm (MODE scaling, path: PATH): ".
 */
fp8q_status fp8q_cuda_scaled_mm(const fp8q_cublaslt *library,
                                const fp8q_cuda_device *device,
                                const fp8q_cuda_scaled_mm_call *call,
                                fp8q_cu_stream stream, fp8q_error *error);

/*
 * The product of `call` on its views' device: fp8q_cuda_scaled_mm on
 * `device` (the scales and bias flagged as host memory copied into
 * temporaries there first, when the product needs them: synchronous
 * copies, refused while `stream` captures a CUDA graph), or with `device`
 * NULL on the CPU from host views
 * (core/scaled_mm_run.h's fp8q_scaled_mm_run: `sgemm` and `sgemm_context`
 * for a b without a core kernel, `out_is_new` when nothing aliases out;
 * use_fast_accum has no effect there, and scale_result is the host value,
 * 1 unless has_scale_result).
 */
fp8q_status fp8q_scaled_mm_on_device(const fp8q_cublaslt *library,
                                     const fp8q_cuda_device *device,
                                     const fp8q_cuda_scaled_mm_call *call,
                                     fp8q_cu_stream stream, fp8q_sgemm sgemm,
                                     void *sgemm_context, int out_is_new,
                                     fp8q_error *error);

/* Switches zero-padded FP8 operands on (the default, matmul_padding.h's
 * rule) or off (products whose K or N is not a multiple of 16 take the
 * exact bfloat16 path: for the benchmark that times padded against exact
 * products), process-wide; returns the previous setting. */
int fp8q_cuda_scaled_mm_set_padding(int enabled);

#endif /* FP8Q_CUDA_SCALED_MM_OPS_H */
