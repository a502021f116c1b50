/*
 * ops.c - cast, amax, quantize and dequantize on device views (cuda/ops.h):
 * the tensors turned into kernel arguments (the launch contracts of
 * kernels/<family>.cuh), temporaries from fp8q_cuda_buffer, launches on the
 * caller's stream.
 */
#include <string.h>

#include "cuda/ops.h"

#include "core/cast.h"
#include "core/view_layout.h"
#include "cuda/launch.h"
#include "cuda/memory.h"

#if FP8Q_GATHER_MAX_DIMS != FP8Q_MAX_DIMS
#error "the gather kernel must take every view fp8q has"
#endif

/* ------------------------------------------------------------------------- */
/* Buffers and gathers                                                       */

fp8q_status fp8q_cuda_buffer_alloc(const fp8q_cuda_device *device,
                                   size_t bytes, fp8q_cu_stream stream,
                                   fp8q_cuda_buffer *buffer,
                                   fp8q_error *error)
{
    void *memory = NULL;
    fp8q_status status;

    memset(buffer, 0, sizeof *buffer);
    status = fp8q_cuda_alloc(device, bytes, stream, &memory,
                             &buffer->allocated_in, error);
    if (status == FP8Q_OK) {
        buffer->device = device;
        buffer->data = memory;
    }
    return status;
}

void fp8q_cuda_buffer_release(fp8q_cuda_buffer *buffer,
                              fp8q_cu_stream stream)
{
    if (buffer->device != NULL) {
        fp8q_cuda_free(buffer->device, buffer->data, &buffer->allocated_in,
                       stream);
    }
    memset(buffer, 0, sizeof *buffer);
}

/* Nonzero for the transpose of a C-contiguous matrix: a 2-D view with
 * strides (1, rows), which the tiled transpose kernel copies fastest. */
static int is_transposed_matrix(const fp8q_view *view)
{
    return view->ndim == 2 && view->strides[0] == 1 &&
           view->strides[1] == view->shape[0];
}

fp8q_status fp8q_cuda_gather(const fp8q_cuda_device *device,
                             const fp8q_view *source, void *destination,
                             fp8q_cu_stream stream, fp8q_error *error)
{
    fp8q_gather_args args;
    int axis;

    if (is_transposed_matrix(source)) {
        /* source = m.T for a C-contiguous m of shape (cols, rows). */
        fp8q_transpose_args transpose;
        memset(&transpose, 0, sizeof transpose);
        transpose.source = source->data;
        transpose.destination = destination;
        transpose.rows = source->shape[1];
        transpose.cols = source->shape[0];
        transpose.element_size = (int32_t)fp8q_dtype_itemsize(source->dtype);
        return fp8q_cuda_launch_transpose(device, &transpose, stream, error);
    }
    memset(&args, 0, sizeof args);
    args.source = source->data;
    args.destination = destination;
    args.count = fp8q_view_size(source);
    args.element_size = (int32_t)fp8q_dtype_itemsize(source->dtype);
    /* Fewer axes, fewer divisions per element: extents of 1 dropped, and
     * each axis merged into the previous one where that walks the same
     * elements (the previous stride is this one's times this extent). */
    for (axis = 0; axis < source->ndim; axis++) {
        const int64_t extent = source->shape[axis];
        const int64_t stride = source->strides[axis];
        if (extent == 1) {
            continue;
        }
        if (args.ndim > 0 &&
            args.strides[args.ndim - 1] == stride * extent) {
            args.shape[args.ndim - 1] *= extent;
            args.strides[args.ndim - 1] = stride;
            continue;
        }
        args.shape[args.ndim] = extent;
        args.strides[args.ndim] = stride;
        args.ndim++;
    }
    return fp8q_cuda_launch_gather(device, &args, stream, error);
}

fp8q_status fp8q_cuda_contiguous(const fp8q_cuda_device *device,
                                 const fp8q_view *source,
                                 fp8q_cu_stream stream,
                                 fp8q_cuda_buffer *buffer,
                                 fp8q_view *contiguous, fp8q_error *error)
{
    fp8q_status status;

    memset(buffer, 0, sizeof *buffer);
    if (fp8q_view_is_contiguous(source)) {
        *contiguous = *source;
        return FP8Q_OK;
    }
    status = fp8q_view_init_contiguous(contiguous, NULL, source->dtype,
                                       source->ndim, source->shape, error);
    if (status != FP8Q_OK) {
        return status;
    }
    status = fp8q_cuda_buffer_alloc(
        device,
        (size_t)(fp8q_view_size(source) *
                 (int64_t)fp8q_dtype_itemsize(source->dtype)),
        stream, buffer, error);
    if (status != FP8Q_OK) {
        return status;
    }
    contiguous->data = buffer->data;
    status = fp8q_cuda_gather(device, source, buffer->data, stream, error);
    if (status != FP8Q_OK) {
        fp8q_cuda_buffer_release(buffer, stream);
    }
    return status;
}

/* ------------------------------------------------------------------------- */
/* cast                                                                      */

/*
 * Fills the scale addressing of `args` from the float32 scale `broadcast`
 * to x's shape (non-empty): the kernel reads scale[(row / block_rows) *
 * row_stride + column * col_stride] for element (row, column) of x seen as
 * rows of its last extent. The innermost leading axes along which the
 * scale is broadcast form the row blocks; the leading axes outside them
 * must collapse into one stride. FP8Q_ERROR_VALUE (naming the scale's own
 * shape, `scale_shape`) otherwise.
 */
static fp8q_status set_scale_addressing(const fp8q_view *broadcast,
                                        const fp8q_view *scale_shape,
                                        fp8q_cast_args *args,
                                        fp8q_error *error)
{
    const int ndim = broadcast->ndim;
    int64_t block_rows = 1;
    int64_t below = 1; /* blocks per step of `axis` */
    int64_t row_stride = 0;
    int found = 0;
    int axis = ndim - 2;
    char shape[32 * FP8Q_MAX_DIMS];

    for (; axis >= 0 && (broadcast->strides[axis] == 0 ||
                         broadcast->shape[axis] == 1);
         axis--) {
        block_rows *= broadcast->shape[axis];
    }
    for (; axis >= 0; axis--) {
        const int64_t stride = broadcast->strides[axis];
        if (broadcast->shape[axis] != 1) {
            if (!found && stride % below == 0) {
                row_stride = stride / below;
                found = 1;
            }
            else if (!found || stride != row_stride * below) {
                fp8q_format_shape(shape, sizeof shape, scale_shape->ndim,
                                  scale_shape->shape);
                return fp8q_fail(error, FP8Q_ERROR_VALUE,
                                 "cast: on CUDA, scale= must be one value, "
                                 "one per row or per group of rows (x's "
                                 "leading extents, or some of them then "
                                 "1s, then 1), one per column (x's last "
                                 "extent) or one per element; got shape %s",
                                 shape);
            }
        }
        below *= broadcast->shape[axis];
    }
    args->row_length = ndim > 0 ? broadcast->shape[ndim - 1] : 1;
    args->scale_block_rows = block_rows;
    args->scale_row_stride = row_stride;
    args->scale_col_stride = ndim > 0 ? broadcast->strides[ndim - 1] : 0;
    return FP8Q_OK;
}

/* The scale addressing and the launch of fp8q_cuda_cast on the contiguous
 * x. */
static fp8q_status cast_contiguous(const fp8q_cuda_device *device,
                                   const fp8q_view *x, const fp8q_view *scale,
                                   const fp8q_view *out, uint32_t *amax_bits,
                                   int saturate, fp8q_cu_stream stream,
                                   fp8q_error *error)
{
    fp8q_cast_args args;
    fp8q_view broadcast;
    fp8q_status status;

    memset(&args, 0, sizeof args);
    args.row_length = 1;
    args.scale_block_rows = 1;
    args.scale_block_cols = 1;
    if (scale != NULL && fp8q_view_size(x) > 0) {
        status = fp8q_view_broadcast_to(scale, x->ndim, x->shape, &broadcast,
                                        "scale", error);
        if (status == FP8Q_OK) {
            status = set_scale_addressing(&broadcast, scale, &args, error);
        }
        if (status != FP8Q_OK) {
            return status;
        }
        args.scale = (const float *)scale->data;
    }
    if (amax_bits != NULL) {
        status = fp8q_cuda_zero(device, amax_bits, 4, stream, error);
        if (status != FP8Q_OK) {
            return status;
        }
        args.amax_bits = amax_bits;
    }
    args.source = x->data;
    args.destination = out->data;
    args.count = fp8q_view_size(x);
    args.source_dtype = (int32_t)x->dtype;
    args.destination_dtype = (int32_t)out->dtype;
    args.scale_op = FP8Q_SCALE_DIVIDE;
    args.saturate = saturate != 0;
    return fp8q_cuda_launch_cast(device, &args, stream, error);
}

fp8q_status fp8q_cuda_cast(const fp8q_cuda_device *device,
                           const fp8q_view *x, const fp8q_view *scale,
                           const fp8q_view *out, uint32_t *amax_bits,
                           int saturate, fp8q_cu_stream stream,
                           fp8q_error *error)
{
    char strides[32 * FP8Q_MAX_DIMS];
    fp8q_cuda_buffer buffer;
    fp8q_view contiguous;
    fp8q_status status;

    if (!fp8q_view_is_contiguous(out)) {
        fp8q_format_shape(strides, sizeof strides, out->ndim, out->strides);
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "cast: out= on CUDA must be C-contiguous, got "
                         "strides %s (in elements)",
                         strides);
    }
    if (x->dtype == out->dtype && scale == NULL && amax_bits == NULL) {
        /* The bits, copied in one pass; in place (out= x, the very same
         * elements, as the caller's overlap check allows) nothing moves. */
        if (x->data == out->data) {
            return FP8Q_OK;
        }
        return fp8q_view_is_contiguous(x)
                   ? fp8q_cuda_copy(device, out->data, x->data,
                                    (size_t)fp8q_view_nbytes(x), stream, 0,
                                    error)
                   : fp8q_cuda_gather(device, x, out->data, stream, error);
    }
    status =
        fp8q_cuda_contiguous(device, x, stream, &buffer, &contiguous, error);
    if (status != FP8Q_OK) {
        return status;
    }
    status = cast_contiguous(device, &contiguous, scale, out, amax_bits,
                             saturate, stream, error);
    fp8q_cuda_buffer_release(&buffer, stream);
    return status;
}

/* ------------------------------------------------------------------------- */
/* amax                                                                      */

/* `x` with its axes regrouped, each group in order: the kept axes then the
 * reduced ones, or with reduced_first the other way round. */
static fp8q_view axes_grouped(const fp8q_view *x, const int *reduce,
                              int reduced_first)
{
    fp8q_view grouped = *x;
    int axis, pass, placed = 0;

    for (pass = 0; pass < 2; pass++) {
        for (axis = 0; axis < x->ndim; axis++) {
            if ((reduce[axis] != 0) == (pass != reduced_first)) {
                grouped.shape[placed] = x->shape[axis];
                grouped.strides[placed] = x->strides[axis];
                placed++;
            }
        }
    }
    return grouped;
}

/* amax_bits[c] = the amax of column c of `source`, n_rows rows of
 * row_length contiguous elements, with the coalesced column kernel. */
static fp8q_status column_amax(const fp8q_cuda_device *device,
                               const fp8q_view *source, int64_t n_rows,
                               int64_t row_length, uint32_t *amax_bits,
                               fp8q_cu_stream stream, fp8q_error *error)
{
    fp8q_amax_columns_args args;
    fp8q_status status;

    memset(&args, 0, sizeof args);
    args.source = source->data;
    args.amax_bits = amax_bits;
    args.n_rows = n_rows;
    args.row_length = row_length;
    args.source_dtype = (int32_t)source->dtype;
    status = fp8q_cuda_zero(device, amax_bits, (size_t)row_length * 4, stream,
                            error);
    return status != FP8Q_OK
               ? status
               : fp8q_cuda_launch_amax_columns(device, &args, stream, error);
}

/* amax_bits[0] = the amax of the `count` contiguous elements of `source`. */
static fp8q_status whole_amax(const fp8q_cuda_device *device,
                              const fp8q_view *source, int64_t count,
                              uint32_t *amax_bits, fp8q_cu_stream stream,
                              fp8q_error *error)
{
    fp8q_amax_args args;
    fp8q_status status;

    memset(&args, 0, sizeof args);
    args.source = source->data;
    args.amax_bits = amax_bits;
    args.count = count;
    args.source_dtype = (int32_t)source->dtype;
    status = fp8q_cuda_zero(device, amax_bits, 4, stream, error);
    return status != FP8Q_OK
               ? status
               : fp8q_cuda_launch_amax(device, &args, stream, error);
}

/* amax_bits[r] = the amax of row r of `source`, n_rows rows of row_length
 * contiguous elements. */
static fp8q_status row_amax(const fp8q_cuda_device *device,
                            const fp8q_view *source, int64_t n_rows,
                            int64_t row_length, uint32_t *amax_bits,
                            fp8q_cu_stream stream, fp8q_error *error)
{
    fp8q_amax_rows_args args;

    memset(&args, 0, sizeof args);
    args.source = source->data;
    args.amax_bits = amax_bits;
    args.n_rows = n_rows;
    args.row_length = row_length;
    args.source_dtype = (int32_t)source->dtype;
    return fp8q_cuda_launch_amax_rows(device, &args, stream, error);
}

fp8q_status fp8q_cuda_amax(const fp8q_cuda_device *device,
                           const fp8q_view *x, const int *reduce,
                           uint32_t *amax_bits, fp8q_cu_stream stream,
                           fp8q_error *error)
{
    int64_t rows = 1, row_length = 1;
    fp8q_cuda_buffer buffer;
    fp8q_view permuted, rows_view;
    fp8q_status status;
    int axis;

    for (axis = 0; axis < x->ndim; axis++) {
        if (reduce[axis]) {
            row_length *= x->shape[axis];
        }
        else {
            rows *= x->shape[axis];
        }
    }
    if (rows > 1 && row_length > 1) {
        const fp8q_view reduced_first = axes_grouped(x, reduce, 1);
        if (fp8q_view_is_contiguous(&reduced_first)) {
            /* Read in place: the reduced elements are the rows, the kept
             * ones the columns, of a row-major matrix. */
            return column_amax(device, x, row_length, rows, amax_bits, stream,
                               error);
        }
    }
    permuted = axes_grouped(x, reduce, 0);
    status = fp8q_cuda_contiguous(device, &permuted, stream, &buffer,
                                  &rows_view, error);
    if (status != FP8Q_OK) {
        return status;
    }
    status = rows == 1 ? whole_amax(device, &rows_view, row_length, amax_bits,
                                    stream, error)
                       : row_amax(device, &rows_view, rows, row_length,
                                  amax_bits, stream, error);
    fp8q_cuda_buffer_release(&buffer, stream);
    return status;
}

fp8q_status fp8q_cuda_amax_finite(const fp8q_cuda_device *device,
                                  const fp8q_view *x, int channel_axis,
                                  uint32_t *amax_bits,
                                  uint64_t *nonfinite_count,
                                  fp8q_cu_stream stream, fp8q_error *error)
{
    int reduce[FP8Q_MAX_DIMS];
    fp8q_amax_finite_rows_args args;
    fp8q_cuda_buffer buffer;
    fp8q_view permuted, rows;
    fp8q_status status;
    int axis;

    memset(&args, 0, sizeof args);
    args.n_rows = channel_axis >= 0 ? x->shape[channel_axis] : 1;
    for (axis = 0; axis < x->ndim; axis++) {
        reduce[axis] = axis != channel_axis;
    }
    permuted = axes_grouped(x, reduce, 0);
    status =
        fp8q_cuda_contiguous(device, &permuted, stream, &buffer, &rows, error);
    if (status != FP8Q_OK) {
        return status;
    }
    args.source = rows.data;
    args.nonfinite_count = nonfinite_count;
    args.amax_bits = amax_bits;
    args.row_length =
        args.n_rows > 0 ? fp8q_view_size(&rows) / args.n_rows : 0;
    args.source_dtype = (int32_t)rows.dtype;
    status = fp8q_cuda_launch_amax_finite_rows(device, &args, stream, error);
    fp8q_cuda_buffer_release(&buffer, stream);
    return status;
}

/* ------------------------------------------------------------------------- */
/* quantize / dequantize                                                     */

/* The kernels' scale addressing of `granularity` for C-contiguous data of
 * `data`'s shape with a C-contiguous scale of the granularity's shape. */
static void granularity_addressing(const fp8q_granularity *granularity,
                                   const fp8q_view *data,
                                   fp8q_cast_args *args)
{
    const int64_t row_length =
        data->ndim > 0 ? data->shape[data->ndim - 1] : 1;

    args->row_length = row_length > 0 ? row_length : 1;
    args->scale_block_rows = 1;
    args->scale_block_cols = 1;
    args->scale_row_stride = 0;
    args->scale_col_stride = 0;
    switch (granularity->kind) {
    case FP8Q_GRANULARITY_ROW:
        args->scale_row_stride = 1;
        break;
    case FP8Q_GRANULARITY_COL:
        args->scale_col_stride = 1;
        break;
    case FP8Q_GRANULARITY_BLOCK:
        args->scale_block_rows = granularity->block_rows;
        args->scale_block_cols = granularity->block_cols;
        args->scale_row_stride =
            fp8q_block_count(row_length, granularity->block_cols);
        args->scale_col_stride = 1;
        break;
    default: /* one scale */
        break;
    }
}

/* Each group's amax of the C-contiguous x, as float32, into `scale` (the
 * granularity's scale shape, C-contiguous). */
static fp8q_status group_amax(const fp8q_cuda_device *device,
                              const fp8q_view *x,
                              const fp8q_granularity *granularity,
                              const fp8q_view *scale, fp8q_cu_stream stream,
                              fp8q_error *error)
{
    const int64_t row_length = x->ndim > 0 ? x->shape[x->ndim - 1] : 1;
    const int64_t size = fp8q_view_size(x);
    const int64_t n_rows = row_length > 0 ? size / row_length : 0;
    uint32_t *amax_bits = (uint32_t *)scale->data;
    fp8q_amax_blocks_args blocks;

    if (size == 0) {
        /* Every group is empty (its amax 0), even where the kernels below
         * would see no rows or columns to visit. */
        return fp8q_cuda_zero(device, amax_bits,
                              (size_t)fp8q_view_size(scale) * 4, stream,
                              error);
    }
    if (granularity->kind == FP8Q_GRANULARITY_TENSOR) {
        return whole_amax(device, x, size, amax_bits, stream, error);
    }
    if (granularity->kind == FP8Q_GRANULARITY_ROW) {
        return row_amax(device, x, n_rows, row_length, amax_bits, stream,
                        error);
    }
    if (granularity->kind == FP8Q_GRANULARITY_COL) {
        return column_amax(device, x, n_rows, row_length, amax_bits, stream,
                           error);
    }
    memset(&blocks, 0, sizeof blocks);
    blocks.source = x->data;
    blocks.amax_bits = amax_bits;
    blocks.n_rows = n_rows;
    blocks.row_length = row_length;
    blocks.block_rows = granularity->block_rows;
    blocks.block_cols = granularity->block_cols;
    blocks.source_dtype = (int32_t)x->dtype;
    return fp8q_cuda_launch_amax_blocks(device, &blocks, stream, error);
}

/* destination = cast(source / scale) (or * scale, by `op`) with the
 * granularity's scale of each element: the scaled cast of quantize and
 * dequantize, for C-contiguous views; infinity_to_nan as in
 * kernels/cast.cuh. */
static fp8q_status grouped_cast(const fp8q_cuda_device *device,
                                const fp8q_view *source,
                                const fp8q_view *destination,
                                const fp8q_view *scale,
                                const fp8q_granularity *granularity,
                                fp8q_scale_op op, int saturate,
                                int infinity_to_nan, fp8q_cu_stream stream,
                                fp8q_error *error)
{
    fp8q_cast_args args;

    memset(&args, 0, sizeof args);
    granularity_addressing(granularity, source, &args);
    args.source = source->data;
    args.destination = destination->data;
    args.scale = (const float *)scale->data;
    args.count = fp8q_view_size(source);
    args.source_dtype = (int32_t)source->dtype;
    args.destination_dtype = (int32_t)destination->dtype;
    args.scale_op = (int32_t)op;
    args.saturate = saturate != 0;
    args.infinity_to_nan = infinity_to_nan != 0;
    return fp8q_cuda_launch_cast(device, &args, stream, error);
}

/* Nonzero when quantize computes row scales of x in one pass
 * (kernels/quantize_rows.cuh): float rows, none empty, none longer than the
 * kernel holds. */
static int one_pass_rows(const fp8q_view *x,
                         const fp8q_quantize_options *options)
{
    const fp8q_dtype dtype = x->dtype;
    const int64_t row_length = x->ndim > 0 ? x->shape[x->ndim - 1] : 0;

    return options->compute_scale &&
           options->granularity.kind == FP8Q_GRANULARITY_ROW &&
           (dtype == FP8Q_FLOAT32 || dtype == FP8Q_FLOAT16 ||
            dtype == FP8Q_BFLOAT16) &&
           fp8q_view_size(x) > 0 && row_length >= 1 &&
           row_length <= FP8Q_QUANTIZE_ROWS_MAX_LENGTH;
}

fp8q_status fp8q_cuda_quantize(const fp8q_cuda_device *device,
                               const fp8q_view *x,
                               const fp8q_quantize_options *options,
                               const fp8q_view *data, const fp8q_view *scale,
                               fp8q_cu_stream stream, fp8q_error *error)
{
    fp8q_finfo info;
    fp8q_status status;

    (void)fp8q_dtype_finfo(data->dtype, &info);
    if (one_pass_rows(x, options)) {
        fp8q_quantize_rows_args rows;
        memset(&rows, 0, sizeof rows);
        rows.source = x->data;
        rows.destination = (uint8_t *)data->data;
        rows.scale = (float *)scale->data;
        rows.row_length = x->shape[x->ndim - 1];
        rows.n_rows = fp8q_view_size(x) / rows.row_length;
        rows.source_dtype = (int32_t)x->dtype;
        rows.destination_dtype = (int32_t)data->dtype;
        rows.max = (float)info.max;
        rows.power_of_2 = options->power_of_2 != 0;
        rows.saturate = options->saturate != 0;
        return fp8q_cuda_launch_quantize_rows(device, &rows, stream, error);
    }
    if (options->compute_scale) {
        fp8q_scales_from_amax_args scales;
        memset(&scales, 0, sizeof scales);
        scales.values = (float *)scale->data;
        scales.count = fp8q_view_size(scale);
        scales.max = (float)info.max;
        scales.power_of_2 = options->power_of_2 != 0;
        status = group_amax(device, x, &options->granularity, scale, stream,
                            error);
        if (status == FP8Q_OK) {
            status = fp8q_cuda_launch_scales_from_amax(device, &scales,
                                                       stream, error);
        }
        if (status != FP8Q_OK) {
            return status;
        }
    }
    return grouped_cast(device, x, data, scale, &options->granularity,
                        FP8Q_SCALE_DIVIDE, options->saturate,
                        options->infinity_to_nan, stream, error);
}

fp8q_status fp8q_cuda_dequantize(const fp8q_cuda_device *device,
                                 const fp8q_view *data,
                                 const fp8q_view *scale,
                                 const fp8q_granularity *granularity,
                                 const fp8q_view *result,
                                 fp8q_cu_stream stream, fp8q_error *error)
{
    return grouped_cast(device, data, result, scale, granularity,
                        FP8Q_SCALE_MULTIPLY, 1, 0, stream, error);
}
