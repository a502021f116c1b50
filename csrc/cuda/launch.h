/*
 * launch.h - launching fp8q's kernels (kernels/<family>.cu) from the host: grid
 * sizes chosen for the device, arguments packed as the launch contracts in
 * kernels/<family>.cuh define them, the device's primary context current.
 *
 * Launches are asynchronous on `stream`; a failure to launch is an
 * FP8Q_ERROR_CUDA naming the kernel, the device and the driver's result.
 * Call without holding Python's GIL.
 */
#ifndef FP8Q_CUDA_LAUNCH_H
#define FP8Q_CUDA_LAUNCH_H

#include "amax.cuh"
#include "calibrate.cuh"
#include "cast.cuh"
#include "epilogue.cuh"
#include "gather.cuh"
#include "gemv.cuh"
#include "pad.cuh"
#include "quantize_rows.cuh"
#include "scale.cuh"
#include "transpose.cuh"
#include "core/status.h"
#include "cuda/driver.h"

/* `kernel` (cuda/kernel_list.h) on a grid of blocks x blocks_y blocks of
 * `threads` with one parameter, the struct at `args` (copied before the
 * call returns), on `stream`: what an op's own launcher (e.g.
 * cuda/norm_quantize_ops.c) calls once it has sized the grid. */
fp8q_status fp8q_cuda_launch_kernel(const fp8q_cuda_device *device,
                                    fp8q_cuda_kernel kernel,
                                    unsigned int blocks,
                                    unsigned int blocks_y,
                                    unsigned int threads, const void *args,
                                    fp8q_cu_stream stream, fp8q_error *error);

/* The cast kernel over args->count elements (kernels/cast.cuh):
 * fp8q_cast_uniform for no scale or one scale for the whole run, else
 * fp8q_cast with the divisors (args->by_*) made here from the fields they
 * divide by. When args->amax_bits is not NULL the caller has set it (e.g.
 * to 0) before. */
fp8q_status fp8q_cuda_launch_cast(const fp8q_cuda_device *device,
                                  const fp8q_cast_args *args,
                                  fp8q_cu_stream stream, fp8q_error *error);

/* The amax kernel: raises *args->amax_bits to the run's amax (set it
 * first, kernels/amax.cuh). */
fp8q_status fp8q_cuda_launch_amax(const fp8q_cuda_device *device,
                                  const fp8q_amax_args *args,
                                  fp8q_cu_stream stream, fp8q_error *error);

/* The per-row amax kernel: writes args->amax_bits[0 .. n_rows) (cleared
 * here on the stream, then raised by the kernel), on rows cut into segments
 * that fill the device (args->segment_length is chosen here). */
fp8q_status fp8q_cuda_launch_amax_rows(const fp8q_cuda_device *device,
                                       const fp8q_amax_rows_args *args,
                                       fp8q_cu_stream stream,
                                       fp8q_error *error);

/* The per-block amax kernel: writes one amax per block of args. */
fp8q_status fp8q_cuda_launch_amax_blocks(const fp8q_cuda_device *device,
                                         const fp8q_amax_blocks_args *args,
                                         fp8q_cu_stream stream,
                                         fp8q_error *error);

/* The per-column amax kernel: raises args->amax_bits[0 .. row_length) (set
 * them first). */
fp8q_status fp8q_cuda_launch_amax_columns(const fp8q_cuda_device *device,
                                          const fp8q_amax_columns_args *args,
                                          fp8q_cu_stream stream,
                                          fp8q_error *error);

/* Calibration's per-row finite amax: writes args->amax_bits[0 .. n_rows)
 * (cleared here, segments as fp8q_cuda_launch_amax_rows) and raises
 * *args->nonfinite_count (set it first). */
fp8q_status fp8q_cuda_launch_amax_finite_rows(
    const fp8q_cuda_device *device, const fp8q_amax_finite_rows_args *args,
    fp8q_cu_stream stream, fp8q_error *error);

/* The scales-from-amax kernel, in place over args->count values. */
fp8q_status fp8q_cuda_launch_scales_from_amax(
    const fp8q_cuda_device *device, const fp8q_scales_from_amax_args *args,
    fp8q_cu_stream stream, fp8q_error *error);

/* The one-pass per-row quantize kernel over args->n_rows rows of
 * args->row_length (1 .. FP8Q_QUANTIZE_ROWS_MAX_LENGTH) elements:
 * fp8q_quantize_rows_warps where fp8q_quantize_rows_warps_take accepts args,
 * else fp8q_quantize_rows (kernels/quantize_rows.cuh); args->warps_per_row
 * is ignored (the launch sets it). */
fp8q_status fp8q_cuda_launch_quantize_rows(
    const fp8q_cuda_device *device, const fp8q_quantize_rows_args *args,
    fp8q_cu_stream stream, fp8q_error *error);

/* The matrix-multiply epilogue over args->m x args->n values (when
 * args->amax_bits is not NULL the caller has set it first). */
fp8q_status fp8q_cuda_launch_epilogue(const fp8q_cuda_device *device,
                                      const fp8q_epilogue_args *args,
                                      fp8q_cu_stream stream,
                                      fp8q_error *error);

/* The transpose kernel over an args->rows x args->cols matrix. */
fp8q_status fp8q_cuda_launch_transpose(const fp8q_cuda_device *device,
                                       const fp8q_transpose_args *args,
                                       fp8q_cu_stream stream,
                                       fp8q_error *error);

/* The gather kernel over args->count elements. */
fp8q_status fp8q_cuda_launch_gather(const fp8q_cuda_device *device,
                                    const fp8q_gather_args *args,
                                    fp8q_cu_stream stream, fp8q_error *error);

/* The max calibrator's fold of a batch into its device state
 * (kernels/calibrate.cuh): one block. */
fp8q_status fp8q_cuda_launch_calib_fold_max(
    const fp8q_cuda_device *device, const fp8q_calib_fold_max_args *args,
    fp8q_cu_stream stream, fp8q_error *error);

/* The histogram of args->count elements into args->batch_counts (clear
 * them first), on a grid sized like the elementwise kernels'. */
fp8q_status fp8q_cuda_launch_histogram_count(
    const fp8q_cuda_device *device, const fp8q_histogram_count_args *args,
    fp8q_cu_stream stream, fp8q_error *error);

/* The histogram calibrator's fold of a batch into its device state: one
 * block. */
fp8q_status fp8q_cuda_launch_calib_fold_histogram(
    const fp8q_cuda_device *device,
    const fp8q_calib_fold_histogram_args *args, fp8q_cu_stream stream,
    fp8q_error *error);

/* The pad kernel over args->rows x args->cols destination elements. */
fp8q_status fp8q_cuda_launch_pad(const fp8q_cuda_device *device,
                                 const fp8q_pad_args *args,
                                 fp8q_cu_stream stream, fp8q_error *error);

/* Nonzero when fp8q_cuda_launch_gemv_fp8 takes args->m rows of x with
 * these dtypes, scales and x address on `device`: 1 to FP8Q_GEMV_MAX_ROWS
 * rows always (CUDA cores); FP8Q_GEMV_TC_MIN_ROWS to FP8Q_GEMV_TC_MAX_ROWS
 * (to FP8Q_GEMV_TC_MAX_BLOCK_SCALED_ROWS with block scales) on the tensor
 * cores, for float16 x on compute capability 7.0+ and bfloat16 on 8.0+,
 * with x 32-byte aligned (the tensor cores run every m they take). */
int fp8q_cuda_gemv_fp8_takes(const fp8q_cuda_device *device,
                             const fp8q_gemv_fp8_args *args);

/* The splits of k (kernels/gemv.cuh, "Split k") that
 * fp8q_cuda_launch_gemv_fp8 should be given for these arguments (m, n, k,
 * dtypes, scale kind and x address; partial and splits are not read) on
 * `device`: 1 (no split: partial NULL) wherever the kernel's
 * ceil(n / FP8Q_GEMV_TC_WEIGHT_ROWS) blocks (tensor cores) or
 * ceil(n / FP8Q_GEMV_WEIGHT_ROWS) blocks (CUDA cores) fill the device's
 * multiprocessors at the kernel's occupancy; else enough splits to fill
 * them (tensor cores) or the whole copies of the grid that fit in them
 * (CUDA cores: none below 2, so only grids of at most half the device
 * split), at most FP8Q_GEMV_MAX_SPLITS, k / 1024 on the tensor cores or
 * k / FP8Q_GEMV_STEP (4096) on the CUDA cores (each split at least that
 * many values of k) and k / (32 m) (the scratch's float32 sums, written
 * and read back, at most a quarter of the weight's bytes), none of them
 * empty. Deterministic: the same arguments on the same device give the
 * same answer, and so the same sums. */
int fp8q_cuda_gemv_fp8_splits(const fp8q_cuda_device *device,
                              const fp8q_gemv_fp8_args *args);

/* The weight-only FP8 product of kernels/gemv.cuh when
 * fp8q_cuda_gemv_fp8_takes(device, args) (the kernel of the smallest tile
 * that holds args->m rows), one block per FP8Q_GEMV_WEIGHT_ROWS (CUDA
 * cores) or FP8Q_GEMV_TC_WEIGHT_ROWS (tensor cores) weight rows; with
 * args->partial (args->splits x m x n float32, 16-byte aligned,
 * args->splits from fp8q_cuda_gemv_fp8_splits) a grid of
 * args->splits rows of those blocks, then fp8q_gemv_fp8_reduce on the same
 * stream. A ValueError status otherwise. The caller has checked the rest
 * of the contract (dtypes, 16-byte alignment, k). */
fp8q_status fp8q_cuda_launch_gemv_fp8(const fp8q_cuda_device *device,
                                      const fp8q_gemv_fp8_args *args,
                                      fp8q_cu_stream stream,
                                      fp8q_error *error);

#endif /* FP8Q_CUDA_LAUNCH_H */
