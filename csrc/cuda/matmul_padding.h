/*
 * matmul_padding.h - FP8 operands padded to cuBLASLt's alignment rules, so
 * that a product whose K or N is not a multiple of 16 (or whose operands
 * are not 16-byte aligned) still runs on the FP8 tensor cores instead of
 * the exact bfloat16 path, and the one rule that decides when it does.
 *
 * cuBLASLt's FP8 kernels want K and N multiples of 16 and 16-byte aligned
 * operands (fp8q_matmul_fp8_aligned). Padded operands are copies in the
 * device's reused scratch memory (cuda/scratch.h): a (M, K) as (M, Kp) and
 * w (N, K) as (Np, Kp), Kp and Np rounded up to multiples of 16, the new
 * elements zeros. Zeros along K leave every dot product exactly as it was;
 * the Np - N extra columns of the product are computed and dropped (the
 * product is cropped back to N columns before the epilogue). No scale
 * vector needs padding: the epilogue applies the scales to the real
 * columns only. Call without holding Python's GIL.
 */
#ifndef FP8Q_CUDA_MATMUL_PADDING_H
#define FP8Q_CUDA_MATMUL_PADDING_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "cuda/matmul.h"

/*
 * The padding rule: an unaligned FP8 product is padded when the padded
 * product has at most FP8Q_MATMUL_PAD_MAX_GROWTH times the real one's
 * multiply-adds (M x Np x Kp <= growth x M x N x K), else it takes the
 * exact bfloat16 path. 2 because FP8 tensor cores have twice bfloat16's
 * peak rate. Timed once (H100, 2026-11-24, docs/benchmarks.md): padded
 * products up to 1.33 times the multiply-adds were 1.23x to 3.34x faster
 * than the exact path; the threshold itself is untested
 * (python/fp8q/_cli/_bench_gemm_gpu.py has the rows that measure it).
 */
#define FP8Q_MATMUL_PAD_MAX_GROWTH 2

/* The multiple of 16 at or above `extent`. */
int64_t fp8q_matmul_padded_extent(int64_t extent);

/* Nonzero when the padding rule above pads an (m, k) @ (k, n) product. */
int fp8q_matmul_padding_pays(int64_t m, int64_t n, int64_t k);

/* Scratch bytes fp8q_matmul_pad needs for an (m, k) @ (k, n) product. */
size_t fp8q_matmul_padding_bytes(int64_t m, int64_t n, int64_t k);

/*
 * Pads the unscaled FP8 problem `problem` (a (m, k) and b = w (n, k),
 * C-contiguous, d float32 (m, n) C-contiguous) into `scratch`
 * (fp8q_matmul_padding_bytes of it, 256-byte aligned), ordered on `stream`:
 * on return `padded` is the same product on the padded operands (k and n
 * padded, a and b in scratch, d in scratch too when n was padded), to be
 * run by fp8q_cuda_matmul and then given to fp8q_matmul_crop.
 */
fp8q_status fp8q_matmul_pad(const fp8q_cuda_device *device,
                            const fp8q_matmul *problem, void *scratch,
                            fp8q_cu_stream stream, fp8q_matmul *padded,
                            fp8q_error *error);

/* Nonzero when cuBLASLt has refused before (fp8q_matmul_refused) the
 * padded product fp8q_matmul_pad would make of `problem` into its scratch
 * memory, so that padding the operands again would be wasted. problem->d,
 * kept by the padded product when n needs no padding, is read for its
 * alignment only (NULL: the float32 sums in scratch memory). No CUDA
 * call. */
int fp8q_matmul_padded_refused(const fp8q_cuda_device *device,
                               const fp8q_matmul *problem);

/* Writes the real (m, n) product of `problem` from the padded product
 * `padded` (made by fp8q_matmul_pad) into problem->d, ordered on `stream`;
 * nothing to do when n was not padded. */
fp8q_status fp8q_matmul_crop(const fp8q_cuda_device *device,
                             const fp8q_matmul *problem,
                             const fp8q_matmul *padded, fp8q_cu_stream stream,
                             fp8q_error *error);

#endif /* FP8Q_CUDA_MATMUL_PADDING_H */
