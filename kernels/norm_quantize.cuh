/*
 * norm_quantize.cuh - launch contract of the fused RMSNorm / LayerNorm +
 * per-token FP8 quantize kernel (kernels/norm_quantize.cu): what fp8q.torch
 * runs for a norm whose output feeds FP8 linear layers (q/k/v, gate/up), so
 * that they read its codes and row scales instead of quantizing again.
 *
 * Plain C as well as CUDA C++ (the host side includes it).
 *
 * Kernel "fp8q_norm_quantize" (FP8Q_NORM_QUANTIZE_KERNEL):
 *     __global__ void fp8q_norm_quantize(const fp8q_norm_quantize_args args);
 *   The arguments and results of csrc/core/norm_quantize.h, whose CPU
 *   reference computes the same element arithmetic (core/norm_formula.h),
 *   the same rounding into x's dtype and the same codes and scales from
 *   them; the row's sums are float32 here (each thread's strided partial
 *   sum, each warp's by shuffles, then the warps' in order), float64 on
 *   the CPU, so `normed` may differ from the CPU's by float32's summation
 *   error in the statistics, and by overflow (norm_quantize.h).
 *   block: FP8Q_NORM_QUANTIZE_THREADS threads; no dynamic shared memory.
 *   grid: any size >= 1; block b handles rows b, b + grid, ...; the host
 *   launches one block per row up to FP8Q_NORM_QUANTIZE_MAX_GRID. A block
 *   reads its row of x twice for RMSNorm, three times for LayerNorm (mean,
 *   spread, then values: the later reads
 *   mostly from L1/L2), writes normed, reduces the amax of the rounded
 *   values, then writes the codes from normed as it wrote it (re-read by
 *   the same threads that wrote it, so no barrier is needed beyond the
 *   amax's).
 */
#ifndef FP8Q_KERNELS_NORM_QUANTIZE_CUH
#define FP8Q_KERNELS_NORM_QUANTIZE_CUH

#include "core/norm_quantize.h"

#define FP8Q_NORM_QUANTIZE_KERNEL "fp8q_norm_quantize"

/* This file's kernels, X(fp8q_cuda_kernel value, name in the image)
 * each: csrc/registries.py collects every header's list into
 * cuda/kernel_list.h's FP8Q_CUDA_KERNEL_LIST. */
#define FP8Q_NORM_QUANTIZE_KERNELS(X)                       \
    X(FP8Q_KERNEL_NORM_QUANTIZE, FP8Q_NORM_QUANTIZE_KERNEL)

#define FP8Q_NORM_QUANTIZE_THREADS 256
#define FP8Q_NORM_QUANTIZE_MAX_GRID 65535

#endif /* FP8Q_KERNELS_NORM_QUANTIZE_CUH */
