/*
 * kernel_image.h - the CUDA fatbins of kernels/, two data files installed
 * beside fp8q._C and read at the first use of a GPU that needs them.
 *
 * CMakeLists.txt builds kernels/ with nvcc (every .cu, through its
 * generated fp8q_kernels.cu), or takes
 * FP8Q_PREBUILT_FATBIN (and the PTX file beside it), into two fatbins:
 * <package>/FP8Q_KERNEL_IMAGE_FILE holds the real code (cubins) for the sm_
 * architectures in FP8Q_KERNEL_ARCHS, <package>/FP8Q_KERNEL_PTX_FILE the
 * PTX of the newest (its compute_ entry), zstd-compressed: only a GPU for
 * which no cubin fits needs it (kernels/README.md, "Image size"). No C
 * compiler ever parses them. The binding names the package folder when the
 * module is executed; each file is read at its first get and kept for the
 * life of the process. Nothing here runs without a GPU, so a missing or
 * damaged file fails CUDA work only, with an error naming the file.
 *
 * The image is what cuModuleLoadData / cuLibraryLoadData take: 64-byte
 * aligned, possibly compressed (the driver decompresses it). The driver must
 * be at least FP8Q_CUDA_MIN_DRIVER_VERSION (cuDriverGetVersion units) to run
 * the real code, and FP8Q_CUDA_PTX_MIN_DRIVER_VERSION to JIT-compile the PTX
 * on an architecture newer than any in the image.
 */
#ifndef FP8Q_CUDA_KERNEL_IMAGE_H
#define FP8Q_CUDA_KERNEL_IMAGE_H

#include <stddef.h>

#include "core/status.h"

/* The size of the path buffers of the GPU backend (the kernel image, the
 * driver and cuBLASLt libraries), terminating NUL included. Here, the
 * lowest of the files that use it. */
#define FP8Q_CUDA_PATH_SIZE 1024

/* The files' names in the package folder: the real code, and the PTX. */
#define FP8Q_KERNEL_IMAGE_FILE "fp8q_kernels.fatbin"
#define FP8Q_KERNEL_PTX_FILE "fp8q_kernels_ptx.fatbin"

/* Records the folder (UTF-8) that holds both files: the folder of
 * fp8q._C's file. The first call wins (every interpreter that imports the
 * module names the same folder); later ones change nothing. */
void fp8q_kernel_image_set_folder(const char *folder);

/* fp8q_kernel_image_set_folder of the folder holding `file` (a UTF-8 path,
 * fp8q._C's own: the part before its last '/' or '\\', or "." when it has
 * neither). */
void fp8q_kernel_image_set_folder_of(const char *file);

/* The real-code file's full path ("" before fp8q_kernel_image_set_folder,
 * or when the path is too long). */
const char *fp8q_kernel_image_path(void);

/* The PTX file's full path, as fp8q_kernel_image_path. */
const char *fp8q_kernel_ptx_path(void);

/* The image, read and checked at the first call (once per process; later
 * calls return the same outcome). FP8Q_OK with *image and *size, or
 * FP8Q_ERROR_CUDA naming the file and what is wrong with it (missing,
 * unreadable, not a fatbin, truncated). Call outside any fp8q_once_run
 * function the first time (it runs one). */
fp8q_status fp8q_kernel_image_get(const unsigned char **image, size_t *size,
                                  fp8q_error *error);

/* The PTX image (FP8Q_KERNEL_PTX_FILE), as fp8q_kernel_image_get: read and
 * checked at the first call only, so a process whose GPUs all have real
 * code never opens the file. */
fp8q_status fp8q_kernel_ptx_get(const unsigned char **image, size_t *size,
                                fp8q_error *error);

#endif /* FP8Q_CUDA_KERNEL_IMAGE_H */
