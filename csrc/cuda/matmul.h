/*
 * matmul.h - one matrix multiply through cuBLASLt, in fp8q's row-major
 * terms: D (m x n, row-major) = A (m x k, row-major) @ B (k x n, stored
 * column-major: its transpose is a row-major n x k matrix, as w in
 * x @ w.T), with float32 accumulation.
 *
 * cuBLASLt is column-major, so the product it runs is D^T = B^T-op @ A^T:
 * its "A" is our B (n x k row-major = k x n column-major, transposed), its
 * "B" is our A (k x m column-major, not transposed), its D is n x m
 * column-major, which is our D row-major. This "TN" form is the one
 * cuBLASLt's FP8 kernels take.
 *
 * Every descriptor attribute, the scale pointers included, is set before
 * cuBLASLt's heuristic is asked, so the algorithm is chosen for the problem
 * that runs. Matmul descriptors, layouts and the heuristic's algorithm are
 * cached per
 * (device, m, n, k, dtypes, scaling mode, bias type, D scale and amax
 * present, fast accumulation,
 * pointer alignments, told to the heuristic), the 256 most recently used
 * ones (a server sees a new m with almost every batch size); a process-wide
 * lock keeps the cache and each cached plan to one caller at a time (setting
 * the scale pointers and enqueueing are all that runs under it, and the
 * timing below, once per key). The device's one
 * workspace carries an event recorded after each product; the next product
 * waits for it, so concurrent streams never share the scratch memory. Call
 * without holding Python's GIL.
 *
 * Algorithm choice (docs/scaled_mm.md, "Algorithm choice"): the heuristic
 * is asked for its FP8Q_MATMUL_CANDIDATES best algorithms. The first
 * product of a plan outside a CUDA graph capture runs each once to warm
 * up, then FP8Q_MATMUL_TIMED_REPEATS times between two timing events on
 * the caller's stream, waits for the last event (one host synchronization
 * per plan) and keeps the fastest; a candidate cuBLASLt refuses is
 * skipped. The choice is also kept for the plan's M bucket
 * (fp8q_matmul_m_bucket; the rest of the key as is): a later m of that
 * bucket takes it without timing when the heuristic offers the same
 * algorithm for it. During a capture nothing is timed: the plan's choice,
 * or the heuristic's first while it has none. FP8Q_CUDA_GEMM_TUNING=0
 * (cuda/switches.h) asks for one algorithm and times none.
 */
#ifndef FP8Q_CUDA_MATMUL_H
#define FP8Q_CUDA_MATMUL_H

#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"
#include "cuda/cublaslt.h"

/* How cuBLASLt reads the scale pointers of a product. */
typedef enum fp8q_matmul_scaling {
    FP8Q_MATMUL_UNSCALED, /* no scales: the plain sums */
    FP8Q_MATMUL_TENSORWISE, /* one float32 each */
    /* a: M float32 values, b: N (cuBLASLt's OUTER_VEC_32F) */
    FP8Q_MATMUL_ROWWISE,
    /* a: one float32 per 1 x 128 block, b: one per 128 x 128 block
     * (VEC128_32F and BLK128x128_32F), in cuBLASLt's layouts: a's
     * (ceil(K/128), M) row-major, b's (ceil(N/128), L4) row-major with
     * L4 = ceil(K/128) rounded up to a multiple of 4 (docs/scaled_mm.md) */
    FP8Q_MATMUL_BLOCKWISE
} fp8q_matmul_scaling;

typedef struct fp8q_matmul {
    int64_t m, n, k;
    fp8q_dtype a_dtype; /* FP8 (e4m3fn / e5m2), bfloat16, float16 or float32 */
    fp8q_dtype b_dtype;
    /* float32, bfloat16, float16, or float8_e4m3fn (scaled FP8 only) */
    fp8q_dtype d_dtype;
    const void *a;      /* device pointers, 16-byte aligned for FP8 */
    const void *b;
    void *d;
    /* Device pointers to the scales (FP8 operands only), read as `scaling`
     * says; both NULL when unscaled. */
    fp8q_matmul_scaling scaling;
    const float *a_scale;
    const float *b_scale;
    /* Optional, FP8 operands only (NULL when unused): N bias values of
     * bias_dtype added to the scaled sums; D's scale (the result is
     * multiplied by *d_scale before its rounding into d_dtype) and where
     * max |scaled sums + bias| goes (before d_scale), both float32. */
    const void *bias;
    fp8q_dtype bias_dtype;
    const float *d_scale;
    float *amax_d;
    int fast_accumulation; /* FP8 only: cuBLASLt's faster, less exact mode */
} fp8q_matmul;

/* The heuristic's algorithms timed per plan, and the timed products of
 * each after its warm-up. */
#define FP8Q_MATMUL_CANDIDATES 4
#define FP8Q_MATMUL_TIMED_REPEATS 3

/* The M bucket of m: the smallest power of two >= m (1 for m <= 1). */
int64_t fp8q_matmul_m_bucket(int64_t m);

/* The number of candidate algorithms timed so far in this process (each
 * counted once per timing), for tests and fp8q.info(). */
int64_t fp8q_matmul_candidates_timed(void);

/* Room for one line of fp8q_matmul_choices_format, newline and NUL. */
#define FP8Q_MATMUL_CHOICE_LINE_SIZE 512

/*
 * The tuner's choices of device `device_index` as text, one line each:
 * "M_BUCKET N K A_DTYPE B_DTYPE D_DTYPE SCALING BIAS_DTYPE D_SCALE AMAX
 * FAST A_ALIGNMENT B_ALIGNMENT D_ALIGNMENT ALGORITHM" (integers as in the
 * plan key: fp8q_dtype and fp8q_matmul_scaling values, -1 for no bias,
 * 0/1 flags, alignments in bytes; ALGORITHM the 64 bytes of
 * cublasLtMatmulAlgo_t as 128 lowercase hex digits), most recent first.
 * Writes what fits of it (whole lines, NUL-terminated) into `text` and
 * returns the length of all of it, so a caller can size a second call.
 * Meaningful only with the same GPU model, driver, cuBLASLt and fp8q
 * version: the caller keys a saved copy by them (fp8q.gemm_tuning).
 */
size_t fp8q_matmul_choices_format(int device_index, char *text, size_t size);

/* Adds `count` lines of fp8q_matmul_choices_format to device
 * `device_index`'s choices (each replacing its bucket's), all or none:
 * FP8Q_ERROR_VALUE saying what a line must hold, with nothing added, when
 * one is not such a line. A choice is used only where the heuristic offers
 * exactly that algorithm for a product of its bucket. */
fp8q_status fp8q_matmul_choices_add(int device_index,
                                    const char *const *lines, size_t count,
                                    fp8q_error *error);

/* cuBLASLt's name for a scaling mode, for messages ("rowwise scales
 * (OUTER_VEC_32F)", ...). */
const char *fp8q_matmul_scaling_name(fp8q_matmul_scaling scaling);

/* Nonzero when `library` on `device` can be asked for `scaling` at all:
 * tensorwise where scaled_mm uses FP8 tensor cores (device->
 * fp8_tensor_cores: sm_89+ unless switched off); rowwise and blockwise need
 * cuBLASLt 12.9 or newer (the scale modes) and sm_90+ too. Whether cuBLASLt
 * then takes a given problem is its heuristic's answer. */
int fp8q_matmul_scaling_available(const fp8q_cublaslt *library,
                                  const fp8q_cuda_device *device,
                                  fp8q_matmul_scaling scaling);

/* The oldest cuBLASLt with the outer-vector and block scale modes. */
#define FP8Q_CUBLASLT_SCALE_MODES_VERSION 120900

/*
 * Nonzero when cuBLASLt refused `problem` on `device` before and the plan
 * cache still remembers it, so fp8q_cuda_matmul would refuse it again at
 * once: a caller can take its next path without preparing this one's
 * operands. Reads `problem` as the plan cache's key does: m, n, k, the
 * dtypes, the scaling, which of bias (with bias_dtype), d_scale and amax_d
 * are set, fast accumulation, and the alignments (up to 256 bytes) of a, b
 * and d, never what they point to; so operands still to be made in scratch
 * memory (256-byte aligned) can be given as NULL, which counts as 256-byte
 * aligned. Marks the plan most recently used. Runs no CUDA call.
 */
int fp8q_matmul_refused(const fp8q_cuda_device *device,
                        const fp8q_matmul *problem);

/* Nonzero when cuBLASLt's FP8 kernels take these operands as they are: k
 * and n multiples of 16, a and b 16-byte aligned. */
int fp8q_matmul_fp8_aligned(const fp8q_matmul *problem);

/*
 * Runs `problem` on `device`, ordered on `stream`, with the device's
 * cuBLASLt handle and workspace (an empty product does nothing; k = 0
 * writes zeros, without cuBLASLt). FP8Q_ERROR_CUDA naming the cuBLASLt
 * call, its status and the problem's shapes and dtypes on failure, with
 * *refused set when cuBLASLt refused the problem itself (no algorithm, or
 * CUBLAS_STATUS_NOT_SUPPORTED / INVALID_VALUE from the heuristic or from
 * cublasLtMatmul: a smaller or other-typed problem may still run). A
 * refusal is remembered: the same problem is refused again at once.
 */
fp8q_status fp8q_cuda_matmul(const fp8q_cublaslt *library,
                             const fp8q_cuda_device *device,
                             const fp8q_matmul *problem, fp8q_cu_stream stream,
                             int *refused, fp8q_error *error);

/* What cuBLASLt did with each scaling mode on a device so far, for
 * fp8q.info(): a bit per fp8q_matmul_scaling, set when a product of that
 * mode ran (`accepted`) or was refused (`refused`). */
void fp8q_matmul_modes_seen(int device_index, unsigned *accepted,
                            unsigned *refused);

#endif /* FP8Q_CUDA_MATMUL_H */
