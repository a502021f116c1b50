/*
 * matmul_padding.c - zero-padded FP8 operands for cuBLASLt and the rule
 * that decides when to use them (see matmul_padding.h).
 */
#include <string.h>

#include "cuda/launch.h"
#include "cuda/matmul_padding.h"
#include "cuda/scratch.h"

/* cuBLASLt's FP8 kernels take K and N in multiples of this. */
#define FP8_MULTIPLE 16

int64_t fp8q_matmul_padded_extent(int64_t extent)
{
    return (extent + FP8_MULTIPLE - 1) / FP8_MULTIPLE * FP8_MULTIPLE;
}

int fp8q_matmul_padding_pays(int64_t m, int64_t n, int64_t k)
{
    /* In double: the products of extents may pass 2^63. */
    const double real = (double)m * (double)n * (double)k;
    const double padded = (double)m * (double)fp8q_matmul_padded_extent(n) *
                          (double)fp8q_matmul_padded_extent(k);
    return padded <= FP8Q_MATMUL_PAD_MAX_GROWTH * real;
}

size_t fp8q_matmul_padding_bytes(int64_t m, int64_t n, int64_t k)
{
    const size_t padded_n = (size_t)fp8q_matmul_padded_extent(n);
    const size_t padded_k = (size_t)fp8q_matmul_padded_extent(k);
    return fp8q_cuda_scratch_rounded((size_t)m * padded_k) +
           fp8q_cuda_scratch_rounded(padded_n * padded_k) +
           ((int64_t)padded_n != n
                ? fp8q_cuda_scratch_rounded((size_t)m * padded_n * 4)
                : 0);
}

/* destination (rows, cols) = source (source_rows, source_cols), zeros
 * where the source has none, the rest left out. */
static fp8q_status pad(const fp8q_cuda_device *device, const void *source,
                       int64_t source_rows, int64_t source_cols,
                       void *destination, int64_t rows, int64_t cols,
                       int32_t element_size, fp8q_cu_stream stream,
                       fp8q_error *error)
{
    fp8q_pad_args args;
    memset(&args, 0, sizeof args);
    args.source = source;
    args.destination = destination;
    args.source_rows = source_rows;
    args.source_cols = source_cols;
    args.rows = rows;
    args.cols = cols;
    args.element_size = element_size;
    return fp8q_cuda_launch_pad(device, &args, stream, error);
}

fp8q_status fp8q_matmul_pad(const fp8q_cuda_device *device,
                            const fp8q_matmul *problem, void *scratch,
                            fp8q_cu_stream stream, fp8q_matmul *padded,
                            fp8q_error *error)
{
    const int64_t padded_k = fp8q_matmul_padded_extent(problem->k);
    const int64_t padded_n = fp8q_matmul_padded_extent(problem->n);
    char *a = (char *)scratch;
    char *b = a + fp8q_cuda_scratch_rounded((size_t)(problem->m * padded_k));
    char *d = b + fp8q_cuda_scratch_rounded((size_t)(padded_n * padded_k));

    *padded = *problem;
    padded->k = padded_k;
    padded->n = padded_n;
    padded->a = a;
    padded->b = b;
    if (padded_n != problem->n) {
        padded->d = d;
    }
    if (pad(device, problem->a, problem->m, problem->k, a, problem->m,
            padded_k, 1, stream, error) != FP8Q_OK) {
        return error->status;
    }
    return pad(device, problem->b, problem->n, problem->k, b, padded_n,
               padded_k, 1, stream, error);
}

fp8q_status fp8q_matmul_crop(const fp8q_cuda_device *device,
                             const fp8q_matmul *problem,
                             const fp8q_matmul *padded, fp8q_cu_stream stream,
                             fp8q_error *error)
{
    if (padded->d == problem->d) {
        return FP8Q_OK;
    }
    return pad(device, padded->d, padded->m, padded->n, problem->d,
               problem->m, problem->n, 4, stream, error);
}
