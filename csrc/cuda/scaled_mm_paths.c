/*
 * scaled_mm_paths.c - the names of scaled_mm's GPU paths, FP8Q_LOG's line
 * per product and the last path per device and scaling mode (see
 * scaled_mm_paths.h).
 */
#include <stdio.h>
#include <string.h>

#include "cuda/scaled_mm_paths.h"

#include "cuda/cublaslt.h"
#include "platform.h"

/* fp8q_scaling's modes: tensorwise, rowwise, blockwise. */
#define SCALING_MODES 3

/* Per device and scaling mode, the last path taken plus one (0: none yet),
 * written and read with atomics. */
static volatile int64_t last_paths[FP8Q_CUBLASLT_MAX_DEVICES][SCALING_MODES];

const char *fp8q_cuda_mm_path_name(fp8q_cuda_mm_path path)
{
    switch (path) {
    case FP8Q_CUDA_MM_ONE_CALL: return "one cuBLASLt call";
    case FP8Q_CUDA_MM_ONE_CALL_PADDED:
        return "one cuBLASLt call on operands padded to multiples of 16";
    case FP8Q_CUDA_MM_FP8: return "cuBLASLt FP8 product + epilogue kernel";
    case FP8Q_CUDA_MM_FP8_PADDED:
        return "cuBLASLt FP8 product of operands padded to multiples of 16 "
               "+ epilogue kernel";
    case FP8Q_CUDA_MM_BFLOAT16:
        return "bfloat16 product of the decoded codes + epilogue kernel";
    default:
        return "float32 product of block-scaled operands + epilogue kernel";
    }
}

/* Nonzero when FP8Q_LOG is set to something other than "" or "0" (read
 * once; the race of two first calls reads the same value). */
static int logging(void)
{
    static volatile int state = -1;
    char value[8];
    if (state < 0) {
        const int length = fp8q_getenv_utf8("FP8Q_LOG", value, sizeof value);
        state = length > 0 && strcmp(value, "0") != 0;
    }
    return state;
}

static int in_range(int device_index, fp8q_scaling mode)
{
    return device_index >= 0 && device_index < FP8Q_CUBLASLT_MAX_DEVICES &&
           (int)mode >= 0 && (int)mode < SCALING_MODES;
}

void fp8q_cuda_mm_path_taken(int device_index, fp8q_scaling mode, int64_t m,
                             int64_t n, int64_t k, fp8q_cuda_mm_path path)
{
    if (in_range(device_index, mode)) {
        fp8q_atomic_store_i64(&last_paths[device_index][mode],
                              (int64_t)path + 1);
    }
    if (logging()) {
        fprintf(stderr, "fp8q: scaled_mm M=%lld N=%lld K=%lld on cuda:%d: %s\n",
                (long long)m, (long long)n, (long long)k, device_index,
                fp8q_cuda_mm_path_name(path));
    }
}

int fp8q_cuda_mm_last_path(int device_index, fp8q_scaling mode)
{
    if (!in_range(device_index, mode)) {
        return -1;
    }
    return (int)fp8q_atomic_load_i64(&last_paths[device_index][mode]) - 1;
}
