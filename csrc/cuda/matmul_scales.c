/*
 * matmul_scales.c - block scales and D's scale of a one-call cuBLASLt
 * product, prepared on the device (see matmul_scales.h).
 */
#include <string.h>

#include "core/cast.h"
#include "core/dtype.h"
#include "core/float_codec.h"
#include "core/view.h"
#include "cuda/launch.h"
#include "cuda/matmul_scales.h"
#include "cuda/memory.h"
#include "cuda/scratch.h"

#define BLOCK 128
/* float8_e4m3fn's code of 1.0: the dividend of the reciprocal. */
#define E4M3FN_ONE 0x38

/* K/128 rounded up to a multiple of 4: the row length of b's scales. */
static int64_t padded_k_blocks(int64_t k)
{
    return (fp8q_block_count(k, BLOCK) + 3) / 4 * 4;
}

size_t fp8q_matmul_block_scales_bytes(int64_t m, int64_t n, int64_t k)
{
    const size_t k_blocks = (size_t)fp8q_block_count(k, BLOCK);
    const size_t n_blocks = (size_t)fp8q_block_count(n, BLOCK);
    const size_t padded = (size_t)padded_k_blocks(k);
    /* a's, b's, and b's padded (L4, N/128) before its transpose. */
    return fp8q_cuda_scratch_rounded(k_blocks * (size_t)m * 4) +
           2 * fp8q_cuda_scratch_rounded(padded * n_blocks * 4);
}

/* destination (cols, rows) = source (rows, cols).T, float32. */
static fp8q_status transpose(const fp8q_cuda_device *device,
                             const float *source, float *destination,
                             int64_t rows, int64_t cols,
                             fp8q_cu_stream stream, fp8q_error *error)
{
    fp8q_transpose_args args;
    memset(&args, 0, sizeof args);
    args.source = source;
    args.destination = destination;
    args.rows = rows;
    args.cols = cols;
    args.element_size = 4;
    return fp8q_cuda_launch_transpose(device, &args, stream, error);
}

/* destination[0, count) = source[0, count), float32, by the gather kernel
 * (device-to-device copies are left out so that a cached product makes no
 * cuMemcpy call at all). */
static fp8q_status copy(const fp8q_cuda_device *device, const float *source,
                        float *destination, int64_t count,
                        fp8q_cu_stream stream, fp8q_error *error)
{
    fp8q_gather_args args;
    memset(&args, 0, sizeof args);
    args.source = source;
    args.destination = destination;
    args.count = count;
    args.shape[0] = count;
    args.strides[0] = 1;
    args.ndim = 1;
    args.element_size = 4;
    return fp8q_cuda_launch_gather(device, &args, stream, error);
}

fp8q_status fp8q_matmul_block_scales(
    const fp8q_cuda_device *device, const float *scale_a, const float *scale_b,
    int scale_b_transposed, int64_t m, int64_t n, int64_t k, void *scratch,
    fp8q_cu_stream stream, const float **a_scale, const float **b_scale,
    fp8q_error *error)
{
    const int64_t k_blocks = fp8q_block_count(k, BLOCK);
    const int64_t n_blocks = fp8q_block_count(n, BLOCK);
    const int64_t padded = padded_k_blocks(k);
    char *base = (char *)scratch;
    float *a_layout = (float *)base;
    float *b_layout = (float *)(base + fp8q_cuda_scratch_rounded(
                                           (size_t)(k_blocks * m) * 4));
    float *b_padded = (float *)((char *)b_layout +
                                fp8q_cuda_scratch_rounded(
                                    (size_t)(padded * n_blocks) * 4));
    const float *b_source = scale_b;

    if (transpose(device, scale_a, a_layout, m, k_blocks, stream, error) !=
        FP8Q_OK) {
        return error->status;
    }
    *a_scale = a_layout;
    if (scale_b_transposed) {
        if (padded == k_blocks && (uintptr_t)scale_b % 16 == 0) {
            *b_scale = scale_b; /* (N/128, L4) row-major already */
            return FP8Q_OK;
        }
        /* Back to (K/128, N/128) in b_padded, then padded as below. */
        if (transpose(device, scale_b, b_padded, n_blocks, k_blocks, stream,
                      error) != FP8Q_OK) {
            return error->status;
        }
        b_source = b_padded;
    }
    if (padded != k_blocks) {
        /* (K/128, N/128) then zero rows up to L4, transposed below. */
        if ((b_source != b_padded &&
             copy(device, scale_b, b_padded, k_blocks * n_blocks, stream,
                  error) != FP8Q_OK) ||
            fp8q_cuda_zero(device, b_padded + k_blocks * n_blocks,
                           (size_t)((padded - k_blocks) * n_blocks) * 4,
                           stream, error) != FP8Q_OK) {
            return error->status;
        }
        b_source = b_padded;
    }
    if (transpose(device, b_source, b_layout, padded, n_blocks, stream,
                  error) != FP8Q_OK) {
        return error->status;
    }
    *b_scale = b_layout;
    return FP8Q_OK;
}

fp8q_status fp8q_matmul_d_scale(const fp8q_cuda_device *device,
                                const float *scale_result_on_device,
                                float scale_result, void *scratch,
                                fp8q_cu_stream stream, const float **d_scale,
                                fp8q_error *error)
{
    float *reciprocal = (float *)scratch;
    unsigned char *one = (unsigned char *)scratch + 16;
    fp8q_cast_args args;

    *d_scale = reciprocal;
    if (scale_result_on_device == NULL) {
        return fp8q_cuda_fill_words(device, reciprocal,
                                    fp8q_float_to_bits(1.0f / scale_result),
                                    1, stream, error);
    }
    if (fp8q_cuda_fill(device, one, E4M3FN_ONE, 1, stream, error) !=
        FP8Q_OK) {
        return error->status;
    }
    memset(&args, 0, sizeof args);
    args.source = one;
    args.destination = reciprocal;
    args.scale = scale_result_on_device;
    args.count = 1;
    args.row_length = 1;
    args.scale_block_rows = 1;
    args.scale_block_cols = 1;
    args.source_dtype = (int32_t)FP8Q_FLOAT8_E4M3FN;
    args.destination_dtype = (int32_t)FP8Q_FLOAT32;
    args.scale_op = FP8Q_SCALE_DIVIDE;
    args.saturate = 1;
    return fp8q_cuda_launch_cast(device, &args, stream, error);
}
