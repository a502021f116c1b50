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

/* `problem` with k and n padded (its pointers left as they are). */
static void padded_extents(const fp8q_matmul *problem, fp8q_matmul *padded)
{
    *padded = *problem;
    padded->k = fp8q_matmul_padded_extent(problem->k);
    padded->n = fp8q_matmul_padded_extent(problem->n);
}

int fp8q_matmul_padded_refused(const fp8q_cuda_device *device,
                               const fp8q_matmul *problem)
{
    fp8q_matmul padded;
    padded_extents(problem, &padded);
    /* The padded operands (and a padded d) lie in the scratch memory,
     * 256-byte aligned: NULL stands for them (fp8q_matmul_refused). */
    padded.a = NULL;
    padded.b = NULL;
    if (padded.n != problem->n) {
        padded.d = NULL;
    }
    return fp8q_matmul_refused(device, &padded);
}

fp8q_status fp8q_matmul_pad(const fp8q_cuda_device *device,
                            const fp8q_matmul *problem, void *scratch,
                            fp8q_cu_stream stream, fp8q_matmul *padded,
                            fp8q_error *error)
{
    char *a = (char *)scratch;
    char *b;

    padded_extents(problem, padded);
    b = a + fp8q_cuda_scratch_rounded((size_t)(problem->m * padded->k));
    padded->a = a;
    padded->b = b;
    if (padded->n != problem->n) {
        padded->d = b + fp8q_cuda_scratch_rounded(
                            (size_t)(padded->n * padded->k));
    }
    if (pad(device, problem->a, problem->m, problem->k, a, problem->m,
            padded->k, 1, stream, error) != FP8Q_OK) {
        return error->status;
    }
    return pad(device, problem->b, problem->n, problem->k, b, padded->n,
               padded->k, 1, stream, error);
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
