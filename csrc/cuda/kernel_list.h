/*
 * kernel_list.h - fp8q's kernels, one line each: the one table a new
 * kernel is registered in on the host. Each line pairs the kernel's
 * fp8q_cuda_kernel value (driver.h builds the enum from it) with its name
 * in the image, the macro its launch contract in kernels/ defines (driver.c
 * builds fp8q_cuda_kernel_name from it and finds every listed kernel in
 * the image when a device opens). A new kernel family adds its lines and,
 * below, its header.
 *
 *   FP8Q_CUDA_KERNEL_LIST(X) expands X(VALUE, NAME) for every kernel, in
 *   the enum's order.
 */
#ifndef FP8Q_CUDA_KERNEL_LIST_H
#define FP8Q_CUDA_KERNEL_LIST_H

/* The kernels' headers, for their names: only where the names are
 * expanded (driver.c defines FP8Q_CUDA_KERNEL_NAMES first), so that
 * driver.h's users do not read the kernels' contracts. */
#ifdef FP8Q_CUDA_KERNEL_NAMES
#include "amax.cuh"
#include "calibrate.cuh"
#include "cast.cuh"
#include "epilogue.cuh"
#include "gather.cuh"
#include "gemv.cuh"
#include "norm_quantize.cuh"
#include "pad.cuh"
#include "quantize_rows.cuh"
#include "scale.cuh"
#include "transpose.cuh"
#endif

#define FP8Q_CUDA_KERNEL_LIST(X)                                         \
    X(FP8Q_KERNEL_CAST, FP8Q_CAST_KERNEL)                                \
    X(FP8Q_KERNEL_AMAX, FP8Q_AMAX_KERNEL)                                \
    X(FP8Q_KERNEL_AMAX_ROWS, FP8Q_AMAX_ROWS_KERNEL)                      \
    X(FP8Q_KERNEL_AMAX_BLOCKS, FP8Q_AMAX_BLOCKS_KERNEL)                  \
    X(FP8Q_KERNEL_AMAX_COLUMNS, FP8Q_AMAX_COLUMNS_KERNEL)                \
    X(FP8Q_KERNEL_AMAX_FINITE_ROWS, FP8Q_AMAX_FINITE_ROWS_KERNEL)        \
    X(FP8Q_KERNEL_SCALES_FROM_AMAX, FP8Q_SCALES_FROM_AMAX_KERNEL)        \
    X(FP8Q_KERNEL_QUANTIZE_ROWS, FP8Q_QUANTIZE_ROWS_KERNEL)              \
    X(FP8Q_KERNEL_EPILOGUE, FP8Q_EPILOGUE_KERNEL)                        \
    X(FP8Q_KERNEL_TRANSPOSE, FP8Q_TRANSPOSE_KERNEL)                      \
    X(FP8Q_KERNEL_GATHER, FP8Q_GATHER_KERNEL)                            \
    X(FP8Q_KERNEL_CALIB_FOLD_MAX, FP8Q_CALIB_FOLD_MAX_KERNEL)            \
    X(FP8Q_KERNEL_HISTOGRAM_COUNT, FP8Q_HISTOGRAM_COUNT_KERNEL)          \
    X(FP8Q_KERNEL_CALIB_FOLD_HISTOGRAM, FP8Q_CALIB_FOLD_HISTOGRAM_KERNEL) \
    X(FP8Q_KERNEL_PAD, FP8Q_PAD_KERNEL)                                  \
    X(FP8Q_KERNEL_CAST_UNIFORM, FP8Q_CAST_UNIFORM_KERNEL)                \
    X(FP8Q_KERNEL_GEMV_FP8_1, FP8Q_GEMV_FP8_KERNEL_1)                    \
    X(FP8Q_KERNEL_GEMV_FP8_2, FP8Q_GEMV_FP8_KERNEL_2)                    \
    X(FP8Q_KERNEL_GEMV_FP8_4, FP8Q_GEMV_FP8_KERNEL_4)                    \
    X(FP8Q_KERNEL_GEMV_FP8_8, FP8Q_GEMV_FP8_KERNEL_8)                    \
    X(FP8Q_KERNEL_GEMV_FP8_TC16, FP8Q_GEMV_FP8_KERNEL_TC16)              \
    X(FP8Q_KERNEL_GEMV_FP8_TC64, FP8Q_GEMV_FP8_KERNEL_TC64)              \
    X(FP8Q_KERNEL_CAST_TO_FP8, FP8Q_CAST_TO_FP8_KERNEL)                  \
    X(FP8Q_KERNEL_CAST_FROM_FP8, FP8Q_CAST_FROM_FP8_KERNEL)              \
    X(FP8Q_KERNEL_QUANTIZE_ROWS_WARPS, FP8Q_QUANTIZE_ROWS_WARPS_KERNEL)  \
    X(FP8Q_KERNEL_NORM_QUANTIZE, FP8Q_NORM_QUANTIZE_KERNEL)              \
    X(FP8Q_KERNEL_GEMV_FP8_REDUCE, FP8Q_GEMV_FP8_KERNEL_REDUCE)          \
    X(FP8Q_KERNEL_CAST_FROM_FP8_WIDE, FP8Q_CAST_FROM_FP8_WIDE_KERNEL)    \
    X(FP8Q_KERNEL_GEMV_FP8_1_SPLIT, FP8Q_GEMV_FP8_KERNEL_1_SPLIT)        \
    X(FP8Q_KERNEL_GEMV_FP8_2_SPLIT, FP8Q_GEMV_FP8_KERNEL_2_SPLIT)        \
    X(FP8Q_KERNEL_GEMV_FP8_4_SPLIT, FP8Q_GEMV_FP8_KERNEL_4_SPLIT)        \
    X(FP8Q_KERNEL_GEMV_FP8_8_SPLIT, FP8Q_GEMV_FP8_KERNEL_8_SPLIT)

#endif /* FP8Q_CUDA_KERNEL_LIST_H */
