/*
 * kernel_list.h - fp8q's kernels: FP8Q_CUDA_KERNEL_LIST(X) expands
 * X(VALUE, NAME) for every kernel, VALUE its fp8q_cuda_kernel value
 * (driver.h builds the enum from it) and NAME the macro of its name in the
 * image that its launch contract in kernels/ defines (driver.c builds
 * fp8q_cuda_kernel_name from it and finds every listed kernel in the image
 * when a device opens).
 *
 * No one edits a list here: each kernel header lists its own kernels in a
 * macro FP8Q_<NAME>_KERNELS(X) (e.g. kernels/amax.cuh's FP8Q_AMAX_KERNELS),
 * and the build's generated fp8q_kernel_list.h (csrc/registries.py, run by
 * CMakeLists.txt into <build>/generated) copies those lists, header by
 * header in file-name order, into FP8Q_CUDA_KERNEL_LIST. Every build of
 * csrc/cuda therefore has that folder on its include path. The kernels'
 * headers, for the names, are included only where the names are expanded
 * (driver.c defines FP8Q_CUDA_KERNEL_NAMES first), so that driver.h's
 * users do not read the kernels' contracts.
 */
#ifndef FP8Q_CUDA_KERNEL_LIST_H
#define FP8Q_CUDA_KERNEL_LIST_H

#include "fp8q_kernel_list.h"

#endif /* FP8Q_CUDA_KERNEL_LIST_H */
