/*
 * launch.c - grid sizing and cuLaunchKernel for fp8q's kernels (see
 * launch.h).
 */
#include <stdio.h>

#include "core/view.h"
#include "cuda/launch.h"
#include "cuda/memory.h"

#if FP8Q_CUDA_THREADS_PER_BLOCK != FP8Q_TRANSPOSE_THREADS
#error "the transpose kernel's tiles assume its blocks' thread count"
#endif
#if FP8Q_CUDA_THREADS_PER_BLOCK > FP8Q_CAST_THREADS
#error "the cast kernels' launch bounds allow fewer threads per block"
#endif
/* fp8q_cuda_device's occupancy figures are for blocks of
 * FP8Q_CUDA_THREADS_PER_BLOCK threads; these kernels' grids use them. */
#if FP8Q_CUDA_THREADS_PER_BLOCK != FP8Q_GEMV_THREADS
#error "the weight-only kernels' grids assume the occupancy's block size"
#endif
/* Elements a thread handles per grid-stride step of the elementwise
 * kernels: 16 bytes of float16 / bfloat16 input. */
#define ELEMENTS_PER_THREAD 8
/* The largest grid.x of the per-row and per-block kernels (any size would
 * do up to 2^31 - 1; their blocks loop over the rest). */
#define MAX_ROW_BLOCKS 65535

/* The blocks of `kernel` resident on the whole device at once: its grid
 * when the work would keep more blocks busy. */
static int64_t full_device(const fp8q_cuda_device *device,
                           fp8q_cuda_kernel kernel)
{
    return (int64_t)device->multiprocessor_count *
           device->blocks_per_multiprocessor[kernel];
}

/* Blocks of grid-stride `kernel` for a run of `count` elements: enough to
 * give every thread ELEMENTS_PER_THREAD of them, at most a full device. */
static unsigned int elementwise_blocks(const fp8q_cuda_device *device,
                                       fp8q_cuda_kernel kernel, int64_t count)
{
    const int64_t per_block =
        (int64_t)FP8Q_CUDA_THREADS_PER_BLOCK * ELEMENTS_PER_THREAD;
    const int64_t full = full_device(device, kernel);
    int64_t blocks = (count + per_block - 1) / per_block;

    if (blocks > full) {
        blocks = full;
    }
    return blocks < 1 ? 1u : (unsigned int)blocks;
}

/* The smallest segment of the segmented row kernels: 16 elements a thread
 * (two 16-byte vectors of float16), so that a block's fixed costs (its
 * reduction and atomic) stay small against its reads. */
#define MIN_SEGMENT_LENGTH (FP8Q_CUDA_THREADS_PER_BLOCK * 16)

/* The segment length (kernels/amax.cuh) for n_rows rows of row_length
 * elements: whole rows when they alone fill `kernel`'s device, else rows
 * cut into as many segments (multiples of 16 elements, at least
 * MIN_SEGMENT_LENGTH) as it takes to, so that one long row is reduced by
 * the whole device and not by one block. */
static int64_t segment_length(const fp8q_cuda_device *device,
                              fp8q_cuda_kernel kernel, int64_t n_rows,
                              int64_t row_length)
{
    const int64_t full = full_device(device, kernel);
    const int64_t per_row =
        n_rows >= full ? 1 : (full + n_rows - 1) / n_rows;
    int64_t length = (row_length + per_row - 1) / per_row;

    length = (length + 15) / 16 * 16;
    if (length < MIN_SEGMENT_LENGTH) {
        length = MIN_SEGMENT_LENGTH;
    }
    return length < row_length ? length : (row_length > 0 ? row_length : 1);
}

/* Blocks for `items` work items of a per-row or per-block kernel: one
 * each, up to MAX_ROW_BLOCKS (the blocks loop over the rest). */
static unsigned int item_blocks(int64_t items)
{
    return (unsigned int)(items < MAX_ROW_BLOCKS ? items : MAX_ROW_BLOCKS);
}

/* Launches `kernel` on a grid of blocks x blocks_y blocks of `threads`
 * with one parameter, the struct at `args`. */
static fp8q_status launch_grid(const fp8q_cuda_device *device,
                               fp8q_cuda_kernel kernel, unsigned int blocks,
                               unsigned int blocks_y, unsigned int threads,
                               const void *args, fp8q_cu_stream stream,
                               fp8q_error *error)
{
    void *parameters[1];
    fp8q_cu_result result;
    char what[96];

    /* cuLaunchKernel copies the arguments before it returns. */
    parameters[0] = (void *)args;
    if (fp8q_cuda_context_enter(device, error) != FP8Q_OK) {
        return error->status;
    }
    result = fp8q_cuda_driver_load()->api.launch_kernel(
        device->kernels[kernel], blocks, blocks_y, 1, threads, 1, 1, 0,
        stream, parameters, NULL);
    fp8q_cuda_context_leave();
    if (result != FP8Q_CUDA_SUCCESS) {
        (void)snprintf(what, sizeof what,
                       "launching %s (%u x %u blocks of %u)",
                       fp8q_cuda_kernel_name(kernel), blocks, blocks_y,
                       threads);
        return fp8q_cuda_fail(device, "cuLaunchKernel", result, what, error);
    }
    return FP8Q_OK;
}

fp8q_status fp8q_cuda_launch_kernel(const fp8q_cuda_device *device,
                                    fp8q_cuda_kernel kernel,
                                    unsigned int blocks,
                                    unsigned int blocks_y,
                                    unsigned int threads, const void *args,
                                    fp8q_cu_stream stream, fp8q_error *error)
{
    return launch_grid(device, kernel, blocks, blocks_y, threads, args,
                       stream, error);
}

/* launch_grid with a one-dimensional grid. */
static fp8q_status launch_blocks(const fp8q_cuda_device *device,
                                 fp8q_cuda_kernel kernel, unsigned int blocks,
                                 unsigned int threads, const void *args,
                                 fp8q_cu_stream stream, fp8q_error *error)
{
    return launch_grid(device, kernel, blocks, 1u, threads, args, stream,
                       error);
}

/* launch_blocks with FP8Q_CUDA_THREADS_PER_BLOCK threads. */
static fp8q_status launch(const fp8q_cuda_device *device,
                          fp8q_cuda_kernel kernel, unsigned int blocks,
                          const void *args, fp8q_cu_stream stream,
                          fp8q_error *error)
{
    return launch_blocks(device, kernel, blocks, FP8Q_CUDA_THREADS_PER_BLOCK,
                         args, stream, error);
}

/* launch over `count` elements of grid-stride `kernel` (elementwise_blocks);
 * nothing to launch when count is 0. */
static fp8q_status launch_elements(const fp8q_cuda_device *device,
                                   fp8q_cuda_kernel kernel, int64_t count,
                                   const void *args, fp8q_cu_stream stream,
                                   fp8q_error *error)
{
    if (count == 0) {
        return FP8Q_OK;
    }
    return launch(device, kernel, elementwise_blocks(device, kernel, count),
                  args, stream, error);
}

/* launch over `tiles` tiles of a tiled `kernel`: one block a tile up to a
 * full device (its blocks loop over the rest); nothing when tiles is 0. */
static fp8q_status launch_tiles(const fp8q_cuda_device *device,
                                fp8q_cuda_kernel kernel, int64_t tiles,
                                const void *args, fp8q_cu_stream stream,
                                fp8q_error *error)
{
    const int64_t full = full_device(device, kernel);

    if (tiles == 0) {
        return FP8Q_OK;
    }
    return launch(device, kernel, (unsigned int)(tiles < full ? tiles : full),
                  args, stream, error);
}

fp8q_status fp8q_cuda_launch_cast(const fp8q_cuda_device *device,
                                  const fp8q_cast_args *args,
                                  fp8q_cu_stream stream, fp8q_error *error)
{
    fp8q_cast_args with_divisors = *args;
    fp8q_cuda_kernel kernel;

    if (args->count == 0) {
        return FP8Q_OK;
    }
    if (args->infinity_to_nan && !fp8q_cast_to_fp8_takes(args)) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "fp8q_cuda_launch_cast: infinity_to_nan needs a "
                         "float source, a saturating E4M3FN / E5M2 "
                         "destination and one scale to divide by");
    }
    with_divisors.by_row_length =
        fp8q_fast_divisor_make((uint64_t)args->row_length);
    with_divisors.by_block_rows =
        fp8q_fast_divisor_make((uint64_t)args->scale_block_rows);
    with_divisors.by_block_cols =
        fp8q_fast_divisor_make((uint64_t)args->scale_block_cols);
    if (fp8q_cast_to_fp8_takes(args)) {
        kernel = FP8Q_KERNEL_CAST_TO_FP8;
    }
    else if (fp8q_cast_from_fp8_wide_takes(args)) {
        /* One 16-code vector a thread: the grid grows with the run. */
        return launch(device, FP8Q_KERNEL_CAST_FROM_FP8_WIDE,
                      fp8q_cast_wide_blocks(args->count,
                                            FP8Q_CUDA_THREADS_PER_BLOCK),
                      &with_divisors, stream, error);
    }
    else if (fp8q_cast_from_fp8_takes(args)) {
        kernel = FP8Q_KERNEL_CAST_FROM_FP8;
    }
    else if (fp8q_cast_uniform_takes(args)) {
        kernel = FP8Q_KERNEL_CAST_UNIFORM;
    }
    else {
        kernel = FP8Q_KERNEL_CAST;
    }
    return launch_elements(device, kernel, args->count, &with_divisors,
                           stream, error);
}

fp8q_status fp8q_cuda_launch_amax(const fp8q_cuda_device *device,
                                  const fp8q_amax_args *args,
                                  fp8q_cu_stream stream, fp8q_error *error)
{
    return launch_elements(device, FP8Q_KERNEL_AMAX, args->count, args,
                           stream, error);
}

/* The segmented row kernels' common launch (kernels/amax.cuh): clears
 * amax_bits[0 .. n_rows) on the stream, stores the segment length into
 * *segment (a field of `args`, the kernel's argument struct) and launches one
 * block per work item. */
static fp8q_status launch_segmented_rows(const fp8q_cuda_device *device,
                                         fp8q_cuda_kernel kernel,
                                         const void *args, int64_t *segment,
                                         uint32_t *amax_bits, int64_t n_rows,
                                         int64_t row_length,
                                         fp8q_cu_stream stream,
                                         fp8q_error *error)
{
    if (n_rows == 0) {
        return FP8Q_OK;
    }
    *segment = segment_length(device, kernel, n_rows, row_length);
    if (fp8q_cuda_zero(device, amax_bits, (size_t)n_rows * 4, stream,
                       error) != FP8Q_OK) {
        return error->status;
    }
    return launch(device, kernel,
                  item_blocks(n_rows * fp8q_block_count(row_length, *segment)),
                  args, stream, error);
}

fp8q_status fp8q_cuda_launch_amax_rows(const fp8q_cuda_device *device,
                                       const fp8q_amax_rows_args *args,
                                       fp8q_cu_stream stream,
                                       fp8q_error *error)
{
    fp8q_amax_rows_args segmented = *args;

    return launch_segmented_rows(device, FP8Q_KERNEL_AMAX_ROWS, &segmented,
                                 &segmented.segment_length, args->amax_bits,
                                 args->n_rows, args->row_length, stream,
                                 error);
}

fp8q_status fp8q_cuda_launch_amax_blocks(const fp8q_cuda_device *device,
                                         const fp8q_amax_blocks_args *args,
                                         fp8q_cu_stream stream,
                                         fp8q_error *error)
{
    const int64_t blocks =
        fp8q_block_count(args->n_rows, args->block_rows) *
        fp8q_block_count(args->row_length, args->block_cols);

    if (blocks == 0) {
        return FP8Q_OK;
    }
    return launch(device, FP8Q_KERNEL_AMAX_BLOCKS, item_blocks(blocks), args,
                  stream, error);
}

fp8q_status fp8q_cuda_launch_amax_columns(const fp8q_cuda_device *device,
                                          const fp8q_amax_columns_args *args,
                                          fp8q_cu_stream stream,
                                          fp8q_error *error)
{
    return launch_tiles(
        device, FP8Q_KERNEL_AMAX_COLUMNS,
        fp8q_block_count(args->n_rows, FP8Q_AMAX_COLUMNS_ROWS) *
            fp8q_block_count(args->row_length, FP8Q_CUDA_THREADS_PER_BLOCK),
        args, stream, error);
}

fp8q_status fp8q_cuda_launch_amax_finite_rows(
    const fp8q_cuda_device *device, const fp8q_amax_finite_rows_args *args,
    fp8q_cu_stream stream, fp8q_error *error)
{
    fp8q_amax_finite_rows_args segmented = *args;

    return launch_segmented_rows(device, FP8Q_KERNEL_AMAX_FINITE_ROWS,
                                 &segmented, &segmented.segment_length,
                                 args->amax_bits, args->n_rows,
                                 args->row_length, stream, error);
}

fp8q_status fp8q_cuda_launch_scales_from_amax(
    const fp8q_cuda_device *device, const fp8q_scales_from_amax_args *args,
    fp8q_cu_stream stream, fp8q_error *error)
{
    return launch_elements(device, FP8Q_KERNEL_SCALES_FROM_AMAX, args->count,
                           args, stream, error);
}

/* fp8q_quantize_rows_warps (kernels/quantize_rows.cuh), for the
 * arguments fp8q_quantize_rows_warps_take accepts: G warps a row, R rows a
 * block, one block per R rows up to the blocks the device holds at once
 * (estimated as for the block loop), each block then taking several. */
static fp8q_status launch_quantize_rows_warps(
    const fp8q_cuda_device *device, const fp8q_quantize_rows_args *args,
    fp8q_cu_stream stream, fp8q_error *error)
{
    fp8q_quantize_rows_args warps = *args;
    const int warps_per_row =
        fp8q_quantize_rows_warps_per_row(args->row_length);
    const int rows_per_block =
        FP8Q_QUANTIZE_ROWS_WARPS_PER_BLOCK / warps_per_row;
    const int64_t threads = 32 * (int64_t)warps_per_row * rows_per_block;
    const int64_t steps =
        (args->n_rows + rows_per_block - 1) / rows_per_block;
    const int64_t per_multiprocessor =
        device->blocks_per_multiprocessor[FP8Q_KERNEL_QUANTIZE_ROWS_WARPS] *
        FP8Q_CUDA_THREADS_PER_BLOCK / threads;
    const int64_t resident =
        (int64_t)device->multiprocessor_count *
        (per_multiprocessor > 1 ? per_multiprocessor : 1);

    warps.warps_per_row = warps_per_row;
    return launch_blocks(device, FP8Q_KERNEL_QUANTIZE_ROWS_WARPS,
                         item_blocks(steps < resident ? steps : resident),
                         (unsigned int)threads, &warps, stream, error);
}

fp8q_status fp8q_cuda_launch_quantize_rows(
    const fp8q_cuda_device *device, const fp8q_quantize_rows_args *args,
    fp8q_cu_stream stream, fp8q_error *error)
{
    /* The fewest whole warps that hold the row, FP8Q_QUANTIZE_ROWS_PER_THREAD
     * elements a thread: short rows do not idle a large block. */
    const int64_t warp_elements = 32 * FP8Q_QUANTIZE_ROWS_PER_THREAD;
    const int64_t threads =
        32 * ((args->row_length + warp_elements - 1) / warp_elements);
    fp8q_quantize_rows_args block_loop;
    int64_t per_multiprocessor, resident;

    if (args->n_rows == 0) {
        return FP8Q_OK;
    }
    if (args->row_length < 1 ||
        args->row_length > FP8Q_QUANTIZE_ROWS_MAX_LENGTH) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "fp8q_cuda_launch_quantize_rows: row_length must "
                         "be 1 to %d, got %lld",
                         FP8Q_QUANTIZE_ROWS_MAX_LENGTH,
                         (long long)args->row_length);
    }
    if (fp8q_quantize_rows_warps_take(args)) {
        return launch_quantize_rows_warps(device, args, stream, error);
    }
    /* Blocks of `threads` resident at once (the kernel is bound by its
     * registers, so a multiprocessor holds as many of its threads as in
     * blocks of FP8Q_CUDA_THREADS_PER_BLOCK; an estimate above the
     * hardware's block limit costs only a second wave of equal blocks):
     * the grid when there are more rows, each block then loading its next
     * row while it quantizes one (kernels/quantize_rows_loop.cuh). */
    block_loop = *args;
    block_loop.warps_per_row = 0; /* ignored; sent as 0 */
    per_multiprocessor =
        device->blocks_per_multiprocessor[FP8Q_KERNEL_QUANTIZE_ROWS] *
        FP8Q_CUDA_THREADS_PER_BLOCK / threads;
    resident = (int64_t)device->multiprocessor_count *
               (per_multiprocessor > 1 ? per_multiprocessor : 1);
    return launch_blocks(device, FP8Q_KERNEL_QUANTIZE_ROWS,
                         item_blocks(args->n_rows < resident ? args->n_rows
                                                             : resident),
                         (unsigned int)threads, &block_loop, stream, error);
}

fp8q_status fp8q_cuda_launch_epilogue(const fp8q_cuda_device *device,
                                      const fp8q_epilogue_args *args,
                                      fp8q_cu_stream stream,
                                      fp8q_error *error)
{
    return launch_elements(device, FP8Q_KERNEL_EPILOGUE, args->m * args->n,
                           args, stream, error);
}

fp8q_status fp8q_cuda_launch_transpose(const fp8q_cuda_device *device,
                                       const fp8q_transpose_args *args,
                                       fp8q_cu_stream stream,
                                       fp8q_error *error)
{
    return launch_tiles(device, FP8Q_KERNEL_TRANSPOSE,
                        fp8q_block_count(args->rows, FP8Q_TRANSPOSE_TILE) *
                            fp8q_block_count(args->cols, FP8Q_TRANSPOSE_TILE),
                        args, stream, error);
}

fp8q_status fp8q_cuda_launch_gather(const fp8q_cuda_device *device,
                                    const fp8q_gather_args *args,
                                    fp8q_cu_stream stream, fp8q_error *error)
{
    return launch_elements(device, FP8Q_KERNEL_GATHER, args->count, args,
                           stream, error);
}

/* The fold kernels run on one block: their work is a few thousand values,
 * and one block can order its two phases with __syncthreads. */
fp8q_status fp8q_cuda_launch_calib_fold_max(
    const fp8q_cuda_device *device, const fp8q_calib_fold_max_args *args,
    fp8q_cu_stream stream, fp8q_error *error)
{
    return launch(device, FP8Q_KERNEL_CALIB_FOLD_MAX, 1u, args, stream,
                  error);
}

fp8q_status fp8q_cuda_launch_histogram_count(
    const fp8q_cuda_device *device, const fp8q_histogram_count_args *args,
    fp8q_cu_stream stream, fp8q_error *error)
{
    return launch_elements(device, FP8Q_KERNEL_HISTOGRAM_COUNT, args->count,
                           args, stream, error);
}

fp8q_status fp8q_cuda_launch_calib_fold_histogram(
    const fp8q_cuda_device *device,
    const fp8q_calib_fold_histogram_args *args, fp8q_cu_stream stream,
    fp8q_error *error)
{
    return launch(device, FP8Q_KERNEL_CALIB_FOLD_HISTOGRAM, 1u, args, stream,
                  error);
}

fp8q_status fp8q_cuda_launch_pad(const fp8q_cuda_device *device,
                                 const fp8q_pad_args *args,
                                 fp8q_cu_stream stream, fp8q_error *error)
{
    return launch_elements(device, FP8Q_KERNEL_PAD, args->rows * args->cols,
                           args, stream, error);
}

/* Nonzero when the tensor-core kernels take args->m rows of x on `device`
 * (kernels/gemv.cuh): from FP8Q_GEMV_TC_MIN_ROWS rows (at 8 rows, the
 * CUDA-core kernel measured slower on an H200 than tc16 at 9) to the
 * larger tile's, fewer with block scales; float16 x on compute capability
 * 7.0+, bfloat16 on 8.0+; x 32-byte aligned. */
static int tensor_cores_take(const fp8q_cuda_device *device,
                             const fp8q_gemv_fp8_args *args)
{
    const int major = device->compute_capability_major;
    const int64_t most = args->scale_kind == FP8Q_GEMV_SCALE_BLOCK
                             ? FP8Q_GEMV_TC_MAX_BLOCK_SCALED_ROWS
                             : FP8Q_GEMV_TC_MAX_ROWS;

    return args->m >= FP8Q_GEMV_TC_MIN_ROWS && args->m <= most &&
           ((uintptr_t)args->x & 31u) == 0u &&
           ((args->x_dtype == FP8Q_FLOAT16 && major >= 7) ||
            (args->x_dtype == FP8Q_BFLOAT16 && major >= 8));
}

/* fp8q_cuda_gemv_fp8_takes, given tensor_cores_take's answer. */
static int gemv_takes(const fp8q_gemv_fp8_args *args, int tensor_cores)
{
    return tensor_cores || (args->m >= 1 && args->m <= FP8Q_GEMV_MAX_ROWS);
}

int fp8q_cuda_gemv_fp8_takes(const fp8q_cuda_device *device,
                             const fp8q_gemv_fp8_args *args)
{
    return gemv_takes(args, tensor_cores_take(device, args));
}

/* The kernel of kernels/gemv.cuh for args->m rows: the tensor cores' when
 * they take them (tc16 up to 16 rows, tc64 beyond), else the CUDA cores'
 * smallest tile that holds m. */
static fp8q_cuda_kernel gemv_kernel(const fp8q_gemv_fp8_args *args,
                                    int tensor_cores)
{
    const int64_t m = args->m;
    return tensor_cores ? (m <= 16 ? FP8Q_KERNEL_GEMV_FP8_TC16
                                   : FP8Q_KERNEL_GEMV_FP8_TC64)
           : m <= 1     ? FP8Q_KERNEL_GEMV_FP8_1
           : m <= 2     ? FP8Q_KERNEL_GEMV_FP8_2
           : m <= 4     ? FP8Q_KERNEL_GEMV_FP8_4
                        : FP8Q_KERNEL_GEMV_FP8_8;
}

/* Values of k a split takes at least. Tensor cores: 8 warps x 4 chunks of
 * 32, so that each warp's 3-stage copy pipeline runs full for most of its
 * split. CUDA cores: one block step (FP8Q_GEMV_STEP, 4096: 256 threads x
 * 16), so that every thread of every split's block loads (a block's bytes
 * in flight are its threads' loads; a shorter split would only spread the
 * same loads over more multiprocessors) and, their splits being every
 * splits-th step, none is empty. Neither has been measured on a GPU
 * (kernels/README.md, "Weight-only product"). */
#define GEMV_MIN_SPLIT_K 1024
#define GEMV_CUDA_CORE_MIN_SPLIT_K FP8Q_GEMV_STEP

int fp8q_cuda_gemv_fp8_splits(const fp8q_cuda_device *device,
                              const fp8q_gemv_fp8_args *args)
{
    const int tensor_cores = tensor_cores_take(device, args);
    const int64_t blocks = fp8q_block_count(
        args->n, tensor_cores ? FP8Q_GEMV_TC_WEIGHT_ROWS
                              : FP8Q_GEMV_WEIGHT_ROWS);
    int64_t full, splits, most;

    if (!gemv_takes(args, tensor_cores) || args->k < 1) {
        return 1;
    }
    full = full_device(device, gemv_kernel(args, tensor_cores));
    if (blocks >= full) {
        return 1;
    }
    /* Tensor cores: enough splits to fill the device. CUDA cores: as many
     * whole copies of the grid as fit in it at once (none where fewer than
     * 2 do), so that the split grid never runs a second, partial wave of
     * blocks after the first (about 1000 weight rows or fewer on a
     * 132-multiprocessor H100 or H200 at fp8q_gemv_fp8_1's 4 blocks a
     * multiprocessor; unmeasured, so kept to grids that clearly leave the
     * device idle). */
    splits = tensor_cores ? (full + blocks - 1) / blocks : full / blocks;
    /* Each split at least GEMV_MIN_SPLIT_K values (tensor cores) or
     * GEMV_CUDA_CORE_MIN_SPLIT_K (CUDA cores), and the scratch's traffic
     * (8 bytes a sum: written, then read by the reduce) at most a quarter
     * of the weight's bytes: 8 splits m n <= n k / 4. */
    most = args->k / (tensor_cores ? GEMV_MIN_SPLIT_K
                                   : GEMV_CUDA_CORE_MIN_SPLIT_K);
    if (most > args->k / (32 * args->m)) {
        most = args->k / (32 * args->m);
    }
    if (most > FP8Q_GEMV_MAX_SPLITS) {
        most = FP8Q_GEMV_MAX_SPLITS;
    }
    if (splits > most) {
        splits = most;
    }
    if (splits <= 1 || !tensor_cores) {
        return splits <= 1 ? 1 : (int)splits;
    }
    /* Tensor cores: whole 128-value blocks a split, no split left empty. */
    return (int)((args->k + fp8q_gemv_split_span(args->k, (int32_t)splits) -
                  1) /
                 fp8q_gemv_split_span(args->k, (int32_t)splits));
}

fp8q_status fp8q_cuda_launch_gemv_fp8(const fp8q_cuda_device *device,
                                      const fp8q_gemv_fp8_args *args,
                                      fp8q_cu_stream stream,
                                      fp8q_error *error)
{
    const int64_t m = args->m;
    const int tensor_cores = tensor_cores_take(device, args);
    const fp8q_cuda_kernel kernel = gemv_kernel(args, tensor_cores);
    const int split = args->partial != NULL;
    int64_t reduce_blocks;
    fp8q_status status;

    if (!gemv_takes(args, tensor_cores) || args->k % 16 != 0 ||
        (split && (args->splits < 1 ||
                   args->splits > FP8Q_GEMV_MAX_SPLITS ||
                   ((uintptr_t)args->partial & 15u) != 0u))) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "fp8q_cuda_launch_gemv_fp8: m=%lld rows of x (dtype "
                         "%d, scale kind %d) on compute capability %d.%d, "
                         "k=%lld, %d splits of k: outside the kernels' "
                         "contract (kernels/gemv.cuh)",
                         (long long)m, (int)args->x_dtype,
                         (int)args->scale_kind,
                         device->compute_capability_major,
                         device->compute_capability_minor, (long long)args->k,
                         split ? (int)args->splits : 1);
    }
    status = launch_grid(
        device, kernel,
        item_blocks(fp8q_block_count(args->n, tensor_cores
                                                   ? FP8Q_GEMV_TC_WEIGHT_ROWS
                                                   : FP8Q_GEMV_WEIGHT_ROWS)),
        split ? (unsigned int)args->splits : 1u, FP8Q_GEMV_THREADS, args,
        stream, error);
    if (status != FP8Q_OK || !split) {
        return status;
    }
    /* The reduce: a thread per output, at most a full device (its blocks
     * stride over the rest). */
    reduce_blocks = fp8q_block_count(m * args->n, FP8Q_GEMV_THREADS);
    if (reduce_blocks > full_device(device, FP8Q_KERNEL_GEMV_FP8_REDUCE)) {
        reduce_blocks = full_device(device, FP8Q_KERNEL_GEMV_FP8_REDUCE);
    }
    return launch_blocks(device, FP8Q_KERNEL_GEMV_FP8_REDUCE,
                         (unsigned int)reduce_blocks, FP8Q_GEMV_THREADS, args,
                         stream, error);
}
