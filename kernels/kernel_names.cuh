/*
 * kernel_names.cuh - the name in the kernel image of every fp8q kernel, in
 * the order of fp8q_cuda_kernel (csrc/cuda/driver.h): the one list that the
 * loader (csrc/cuda/driver.c) and the tests' fake driver
 * (tests/fake_cuda_driver.c) both look kernels up by. A new kernel adds its
 * name here, at the place of its enumerator.
 *
 * Plain C as well as CUDA C++ (the launch contracts it includes are).
 */
#ifndef FP8Q_KERNELS_KERNEL_NAMES_CUH
#define FP8Q_KERNELS_KERNEL_NAMES_CUH

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

/* The initializer of a `const char *const names[FP8Q_KERNEL_COUNT]`:
 * names[kernel] is the image's name of fp8q_cuda_kernel `kernel`. */
#define FP8Q_KERNEL_NAMES                                                              \
    FP8Q_CAST_KERNEL, FP8Q_AMAX_KERNEL, FP8Q_AMAX_ROWS_KERNEL, FP8Q_AMAX_BLOCKS_KERNEL,  \
        FP8Q_AMAX_COLUMNS_KERNEL, FP8Q_AMAX_FINITE_ROWS_KERNEL,                        \
        FP8Q_SCALES_FROM_AMAX_KERNEL, FP8Q_QUANTIZE_ROWS_KERNEL, FP8Q_EPILOGUE_KERNEL, \
        FP8Q_TRANSPOSE_KERNEL, FP8Q_GATHER_KERNEL, FP8Q_CALIB_FOLD_MAX_KERNEL,         \
        FP8Q_HISTOGRAM_COUNT_KERNEL, FP8Q_CALIB_FOLD_HISTOGRAM_KERNEL, FP8Q_PAD_KERNEL, \
        FP8Q_CAST_UNIFORM_KERNEL, FP8Q_GEMV_FP8_KERNEL_1, FP8Q_GEMV_FP8_KERNEL_2,      \
        FP8Q_GEMV_FP8_KERNEL_4, FP8Q_GEMV_FP8_KERNEL_8, FP8Q_GEMV_FP8_KERNEL_TC16,     \
        FP8Q_GEMV_FP8_KERNEL_TC64, FP8Q_CAST_TO_FP8_KERNEL, FP8Q_CAST_FROM_FP8_KERNEL, \
        FP8Q_QUANTIZE_ROWS_WARPS_KERNEL, FP8Q_NORM_QUANTIZE_KERNEL,                    \
        FP8Q_GEMV_FP8_KERNEL_REDUCE, FP8Q_CAST_FROM_FP8_WIDE_KERNEL

#endif /* FP8Q_KERNELS_KERNEL_NAMES_CUH */
