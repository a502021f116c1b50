/*
 * scaled_mm_paths.h - the paths of a scaled_mm product on the GPU
 * (scaled_mm_ops.c chooses them; docs/scaled_mm.md, "GPUs"): their names,
 * FP8Q_LOG's line per product, and the last path of each scaling mode on
 * each device (fp8q._C._scaled_mm_paths(), which fp8q.info() reports).
 */
#ifndef FP8Q_CUDA_SCALED_MM_PATHS_H
#define FP8Q_CUDA_SCALED_MM_PATHS_H

#include <stdint.h>

#include "core/scaled_mm.h"

/* The paths, in their order of preference. */
typedef enum fp8q_cuda_mm_path {
    FP8Q_CUDA_MM_ONE_CALL,        /* one cuBLASLt call, the codes as they are */
    FP8Q_CUDA_MM_ONE_CALL_PADDED, /* the same on zero-padded operands         */
    FP8Q_CUDA_MM_FP8,             /* cuBLASLt FP8 sums + epilogue kernel      */
    FP8Q_CUDA_MM_FP8_PADDED,      /* the same on zero-padded operands         */
    FP8Q_CUDA_MM_BFLOAT16,        /* exact bfloat16 decodes + epilogue kernel */
    FP8Q_CUDA_MM_BLOCKWISE,       /* float32 block-scaled decodes + epilogue  */
    FP8Q_CUDA_MM_PATH_COUNT
} fp8q_cuda_mm_path;

/* The path's words in FP8Q_LOG's lines, errors and fp8q.info() (e.g.
 * "one cuBLASLt call"). */
const char *fp8q_cuda_mm_path_name(fp8q_cuda_mm_path path);

/* Called when an (m, k) @ (k, n) product of scaling `mode` on CUDA device
 * `device_index` has run along `path`: remembers it as the last path of
 * that mode on that device and, with FP8Q_LOG set to other than "" or "0",
 * writes "fp8q: scaled_mm M=.. N=.. K=.. on cuda:D: PATH" to stderr. */
void fp8q_cuda_mm_path_taken(int device_index, fp8q_scaling mode, int64_t m,
                             int64_t n, int64_t k, fp8q_cuda_mm_path path);

/* The last path a product of `mode` took on CUDA device `device_index`,
 * or -1 when none has run there (or the index or mode is out of range). */
int fp8q_cuda_mm_last_path(int device_index, fp8q_scaling mode);

#endif /* FP8Q_CUDA_SCALED_MM_PATHS_H */
