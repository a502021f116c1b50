/*
 * ops_cuda.c - the CUDA half of cast_op.c, amax_op.c and quantize_op.c:
 * after they have parsed and checked the arguments and allocated the result
 * on x's device, these functions turn the tensors into kernel arguments
 * (the launch contracts of kernels/<family>.cuh) and launch on the caller's
 * stream.
 *
 * The kernels read contiguous runs: strided inputs are gathered into
 * contiguous copies on the GPU first (outputs must be C-contiguous); scales
 * must reduce to the kernels' (row, column) addressing. Everything else is
 * refused with a ValueError that says what is accepted.
 */
#include <string.h>

#include "python/binding.h"

#include "core/cast.h"
#include "core/quantize.h"
#include "cuda/launch.h"
#include "cuda/memory.h"

/* ------------------------------------------------------------------------- */
/* Checks                                                                    */

/* An output the kernels write as one contiguous run. */
static int require_contiguous_output(const fp8q_TensorObject *tensor,
                                     const char *function,
                                     const char *argument)
{
    char strides[32 * FP8Q_MAX_DIMS];

    if (fp8q_view_is_contiguous(&tensor->view)) {
        return 0;
    }
    fp8q_format_shape(strides, sizeof strides, tensor->view.ndim,
                      tensor->view.strides);
    PyErr_Format(PyExc_ValueError,
                 "%s: %s= on CUDA must be C-contiguous, got strides %s (in "
                 "elements)",
                 function, argument, strides);
    return -1;
}

/* Runs a launch (or any fp8q_status-returning step) without the GIL. */
#define RUN_WITHOUT_GIL(status, call) \
    do {                              \
        Py_BEGIN_ALLOW_THREADS        \
        (status) = (call);            \
        Py_END_ALLOW_THREADS          \
    } while (0)

/* ------------------------------------------------------------------------- */
/* cast                                                                      */

/*
 * Fills the scale addressing of `args` from the float32 scale `broadcast`
 * to x's shape (non-empty): the kernel reads scale[(row / block_rows) *
 * row_stride + column * col_stride] for element (row, column) of x seen as
 * rows of its last extent. The innermost leading axes along which the
 * scale is broadcast form the row blocks; the leading axes outside them
 * must collapse into one stride. -1 with ValueError (naming the scale's
 * own shape, `scale_shape`) otherwise.
 */
static int set_scale_addressing(const fp8q_view *broadcast,
                                const fp8q_view *scale_shape,
                                fp8q_cast_args *args)
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
                PyErr_Format(PyExc_ValueError,
                             "cast: on CUDA, scale= must be one value, one "
                             "per row or per group of rows (x's leading "
                             "extents, or some of them then 1s, then 1), "
                             "one per column (x's last extent) or one per "
                             "element; got shape %s",
                             shape);
                return -1;
            }
        }
        below *= broadcast->shape[axis];
    }
    args->row_length = ndim > 0 ? broadcast->shape[ndim - 1] : 1;
    args->scale_block_rows = block_rows;
    args->scale_row_stride = row_stride;
    args->scale_col_stride = ndim > 0 ? broadcast->strides[ndim - 1] : 0;
    return 0;
}

int fp8q_py_cuda_cast(fp8q_TensorObject *input, fp8q_TensorObject *scale,
                      fp8q_TensorObject *out, fp8q_TensorObject *amax_out,
                      int saturate, fp8q_cu_stream stream)
{
    const fp8q_py_device device = {FP8Q_DEVICE_CUDA, input->device_index};
    fp8q_TensorObject *x = NULL;
    fp8q_TensorObject *device_scale = NULL;
    fp8q_cast_args args;
    fp8q_view broadcast;
    fp8q_error error;
    fp8q_status status;
    int result = -1;

    memset(&args, 0, sizeof args);
    args.row_length = 1;
    args.scale_block_rows = 1;
    args.scale_block_cols = 1;
    if (require_contiguous_output(out, "cast", "out") < 0) {
        return -1;
    }
    x = fp8q_py_cuda_contiguous(input, stream);
    if (x == NULL) {
        return -1;
    }
    fp8q_error_clear(&error);
    if (scale != NULL && fp8q_view_size(&x->view) > 0) {
        /* Scales given on the host were checked there; they move over. */
        device_scale =
            scale->device_type == FP8Q_DEVICE_CUDA &&
                    scale->device_index == x->device_index &&
                    fp8q_view_is_contiguous(&scale->view)
                ? (fp8q_TensorObject *)Py_NewRef(scale)
                : fp8q_tensor_copy_to(scale, &device, stream);
        if (device_scale == NULL) {
            goto done;
        }
        if (fp8q_view_broadcast_to(&device_scale->view, x->view.ndim,
                                   x->view.shape, &broadcast, "scale",
                                   &error) != FP8Q_OK) {
            fp8q_py_raise(&error);
            goto done;
        }
        if (set_scale_addressing(&broadcast, &device_scale->view, &args) < 0 ||
            fp8q_py_use_on_stream(device_scale, stream) < 0) {
            goto done;
        }
        args.scale = (const float *)device_scale->view.data;
    }
    if (fp8q_py_use_on_stream(x, stream) < 0 ||
        fp8q_py_use_on_stream(out, stream) < 0) {
        goto done;
    }
    if (amax_out != NULL) {
        if (fp8q_py_use_on_stream(amax_out, stream) < 0) {
            goto done;
        }
        RUN_WITHOUT_GIL(status, fp8q_cuda_zero(x->cuda_device,
                                               amax_out->view.data, 4, stream,
                                               &error));
        if (fp8q_py_raise_on_failure(status, &error) < 0) {
            goto done;
        }
        args.amax_bits = (uint32_t *)amax_out->view.data;
    }
    args.source = x->view.data;
    args.destination = out->view.data;
    args.count = fp8q_view_size(&x->view);
    args.source_dtype = (int32_t)x->view.dtype;
    args.destination_dtype = (int32_t)out->view.dtype;
    args.scale_op = FP8Q_SCALE_DIVIDE;
    args.saturate = saturate != 0;
    RUN_WITHOUT_GIL(status, fp8q_cuda_launch_cast(x->cuda_device, &args,
                                                  stream, &error));
    result = fp8q_py_raise_on_failure(status, &error);
done:
    Py_XDECREF(device_scale);
    Py_DECREF(x);
    return result;
}

fp8q_TensorObject *fp8q_py_cuda_convert(fp8q_TensorObject *source,
                                        fp8q_dtype dtype)
{
    const fp8q_py_device device = {FP8Q_DEVICE_CUDA, source->device_index};
    const fp8q_cu_stream stream = fp8q_py_last_stream(source);
    fp8q_TensorObject *result;

    if (dtype == source->view.dtype) {
        return fp8q_tensor_copy_to(source, &device, stream);
    }
    result = fp8q_tensor_new_empty_on(dtype, source->view.ndim,
                                      source->view.shape, &device, stream);
    if (result != NULL &&
        fp8q_py_cuda_cast(source, NULL, result, NULL, 1, stream) < 0) {
        Py_CLEAR(result);
    }
    return result;
}

/* ------------------------------------------------------------------------- */
/* amax                                                                      */

/* `input`'s view with its axes regrouped, each group in order: the kept
 * axes then the reduced ones, or with reduced_first the other way round. */
static fp8q_view axes_grouped(const fp8q_TensorObject *input,
                              const int *reduce, int reduced_first)
{
    fp8q_view grouped = input->view;
    int axis, pass, placed = 0;

    for (pass = 0; pass < 2; pass++) {
        for (axis = 0; axis < input->view.ndim; axis++) {
            if ((reduce[axis] != 0) == (pass != reduced_first)) {
                grouped.shape[placed] = input->view.shape[axis];
                grouped.strides[placed] = input->view.strides[axis];
                placed++;
            }
        }
    }
    return grouped;
}

/* `input` with its kept axes first and its reduced axes last (each group
 * in order), C-contiguous: itself when it already is, else gathered. */
static fp8q_TensorObject *reduced_axes_last(fp8q_TensorObject *input,
                                            const int *reduce,
                                            fp8q_cu_stream stream)
{
    const fp8q_view permuted = axes_grouped(input, reduce, 0);
    fp8q_TensorObject *view;
    fp8q_TensorObject *result;

    view = fp8q_tensor_new_view(&permuted, (PyObject *)input, 1);
    if (view == NULL) {
        return NULL;
    }
    result = fp8q_py_cuda_contiguous(view, stream);
    Py_DECREF(view);
    return result;
}

/* amax_bits[c] = the amax of column c of `source`, n_rows rows of
 * row_length contiguous elements on `device`, with the coalesced column
 * kernel. Called without the GIL. */
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

int fp8q_py_cuda_amax(fp8q_TensorObject *input, const int *reduce,
                      fp8q_TensorObject *destination, fp8q_cu_stream stream)
{
    fp8q_TensorObject *x;
    int64_t rows = 1, row_length = 1;
    fp8q_error error;
    fp8q_status status;
    int axis;

    for (axis = 0; axis < input->view.ndim; axis++) {
        if (reduce[axis]) {
            row_length *= input->view.shape[axis];
        }
        else {
            rows *= input->view.shape[axis];
        }
    }
    if (rows > 1 && row_length > 1) {
        const fp8q_view reduced_first = axes_grouped(input, reduce, 1);
        if (fp8q_view_is_contiguous(&reduced_first)) {
            if (fp8q_py_use_on_stream(input, stream) < 0 ||
                fp8q_py_use_on_stream(destination, stream) < 0) {
                return -1;
            }
            /* Read in place: the reduced elements are the rows, the kept
             * ones the columns, of a row-major matrix. */
            fp8q_error_clear(&error);
            RUN_WITHOUT_GIL(status,
                            column_amax(input->cuda_device, &input->view,
                                        row_length, rows,
                                        (uint32_t *)destination->view.data,
                                        stream, &error));
            return fp8q_py_raise_on_failure(status, &error);
        }
    }
    x = reduced_axes_last(input, reduce, stream);
    if (x == NULL) {
        return -1;
    }
    if (fp8q_py_use_on_stream(x, stream) < 0 ||
        fp8q_py_use_on_stream(destination, stream) < 0) {
        Py_DECREF(x);
        return -1;
    }
    fp8q_error_clear(&error);
    if (rows == 1) {
        fp8q_amax_args args;
        memset(&args, 0, sizeof args);
        args.source = x->view.data;
        args.amax_bits = (uint32_t *)destination->view.data;
        args.count = row_length;
        args.source_dtype = (int32_t)x->view.dtype;
        RUN_WITHOUT_GIL(status, fp8q_cuda_zero(x->cuda_device,
                                               destination->view.data, 4,
                                               stream, &error));
        if (status == FP8Q_OK) {
            RUN_WITHOUT_GIL(status, fp8q_cuda_launch_amax(
                                        x->cuda_device, &args, stream, &error));
        }
    }
    else {
        fp8q_amax_rows_args args;
        memset(&args, 0, sizeof args);
        args.source = x->view.data;
        args.amax_bits = (uint32_t *)destination->view.data;
        args.n_rows = rows;
        args.row_length = row_length;
        args.source_dtype = (int32_t)x->view.dtype;
        RUN_WITHOUT_GIL(status, fp8q_cuda_launch_amax_rows(
                                    x->cuda_device, &args, stream, &error));
    }
    Py_DECREF(x);
    return fp8q_py_raise_on_failure(status, &error);
}

int fp8q_py_cuda_enqueue_amax_finite(fp8q_TensorObject *x, int channel_axis,
                                     uint32_t *amax_bits,
                                     uint64_t *nonfinite_count,
                                     fp8q_cu_stream stream)
{
    int reduce[FP8Q_MAX_DIMS];
    fp8q_TensorObject *rows;
    fp8q_amax_finite_rows_args args;
    fp8q_error error;
    fp8q_status status;
    int axis, outcome = -1;

    memset(&args, 0, sizeof args);
    args.n_rows = channel_axis >= 0 ? x->view.shape[channel_axis] : 1;
    for (axis = 0; axis < x->view.ndim; axis++) {
        reduce[axis] = axis != channel_axis;
    }
    rows = reduced_axes_last(x, reduce, stream);
    if (rows == NULL || fp8q_py_use_on_stream(rows, stream) < 0) {
        goto done;
    }
    args.source = rows->view.data;
    args.nonfinite_count = nonfinite_count;
    args.amax_bits = amax_bits;
    args.row_length =
        args.n_rows > 0 ? fp8q_view_size(&rows->view) / args.n_rows : 0;
    args.source_dtype = (int32_t)rows->view.dtype;
    fp8q_error_clear(&error);
    RUN_WITHOUT_GIL(status, fp8q_cuda_launch_amax_finite_rows(
                                x->cuda_device, &args, stream, &error));
    outcome = fp8q_py_raise_on_failure(status, &error);
done:
    Py_XDECREF(rows);
    return outcome;
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
 * granularity's scale shape, C-contiguous, on x's device). */
static fp8q_status group_amax(const fp8q_TensorObject *x,
                              const fp8q_granularity *granularity,
                              const fp8q_TensorObject *scale,
                              fp8q_cu_stream stream, fp8q_error *error)
{
    const fp8q_cuda_device *device = x->cuda_device;
    const int64_t row_length =
        x->view.ndim > 0 ? x->view.shape[x->view.ndim - 1] : 1;
    const int64_t size = fp8q_view_size(&x->view);
    const int64_t n_rows = row_length > 0 ? size / row_length : 0;
    uint32_t *amax_bits = (uint32_t *)scale->view.data;
    fp8q_amax_blocks_args blocks;
    fp8q_status status;

    if (size == 0) {
        /* Every group is empty (its amax 0), even where the kernels below
         * would see no rows or columns to visit. */
        return fp8q_cuda_zero(device, amax_bits,
                              (size_t)fp8q_view_size(&scale->view) * 4,
                              stream, error);
    }
    if (granularity->kind == FP8Q_GRANULARITY_TENSOR) {
        fp8q_amax_args args;
        memset(&args, 0, sizeof args);
        args.source = x->view.data;
        args.amax_bits = amax_bits;
        args.count = size;
        args.source_dtype = (int32_t)x->view.dtype;
        status = fp8q_cuda_zero(device, amax_bits, 4, stream, error);
        return status != FP8Q_OK
                   ? status
                   : fp8q_cuda_launch_amax(device, &args, stream, error);
    }
    if (granularity->kind == FP8Q_GRANULARITY_ROW) {
        fp8q_amax_rows_args args;
        memset(&args, 0, sizeof args);
        args.source = x->view.data;
        args.amax_bits = amax_bits;
        args.n_rows = n_rows;
        args.row_length = row_length;
        args.source_dtype = (int32_t)x->view.dtype;
        return fp8q_cuda_launch_amax_rows(device, &args, stream, error);
    }
    if (granularity->kind == FP8Q_GRANULARITY_COL) {
        return column_amax(device, &x->view, n_rows, row_length, amax_bits,
                           stream, error);
    }
    memset(&blocks, 0, sizeof blocks);
    blocks.source = x->view.data;
    blocks.amax_bits = amax_bits;
    blocks.n_rows = n_rows;
    blocks.row_length = row_length;
    blocks.block_rows = granularity->block_rows;
    blocks.block_cols = granularity->block_cols;
    blocks.source_dtype = (int32_t)x->view.dtype;
    return fp8q_cuda_launch_amax_blocks(device, &blocks, stream, error);
}

/* destination = cast(source / scale) (or * scale, by `op`) with the
 * granularity's scale of each element: the scaled cast of quantize and
 * dequantize, for C-contiguous CUDA tensors already used on `stream`;
 * infinity_to_nan as in kernels/cast.cuh. */
static int grouped_cast(const fp8q_TensorObject *source,
                        const fp8q_TensorObject *destination,
                        const fp8q_TensorObject *scale,
                        const fp8q_granularity *granularity, fp8q_scale_op op,
                        int saturate, int infinity_to_nan,
                        fp8q_cu_stream stream)
{
    fp8q_cast_args args;
    fp8q_error error;
    fp8q_status status;

    memset(&args, 0, sizeof args);
    granularity_addressing(granularity, &source->view, &args);
    args.source = source->view.data;
    args.destination = destination->view.data;
    args.scale = (const float *)scale->view.data;
    args.count = fp8q_view_size(&source->view);
    args.source_dtype = (int32_t)source->view.dtype;
    args.destination_dtype = (int32_t)destination->view.dtype;
    args.scale_op = (int32_t)op;
    args.saturate = saturate != 0;
    args.infinity_to_nan = infinity_to_nan != 0;
    fp8q_error_clear(&error);
    RUN_WITHOUT_GIL(status, fp8q_cuda_launch_cast(source->cuda_device, &args,
                                                  stream, &error));
    return fp8q_py_raise_on_failure(status, &error);
}

/* Nonzero when quantize computes row scales of x in one pass
 * (kernels/quantize_rows.cuh): float rows, none empty, none longer than the
 * kernel holds. */
static int one_pass_rows(const fp8q_TensorObject *x,
                         const fp8q_quantize_options *options)
{
    const fp8q_dtype dtype = x->view.dtype;
    const int64_t row_length =
        x->view.ndim > 0 ? x->view.shape[x->view.ndim - 1] : 0;

    return options->compute_scale &&
           options->granularity.kind == FP8Q_GRANULARITY_ROW &&
           (dtype == FP8Q_FLOAT32 || dtype == FP8Q_FLOAT16 ||
            dtype == FP8Q_BFLOAT16) &&
           fp8q_view_size(&x->view) > 0 && row_length >= 1 &&
           row_length <= FP8Q_QUANTIZE_ROWS_MAX_LENGTH;
}

int fp8q_py_cuda_quantize(fp8q_TensorObject *x,
                          const fp8q_quantize_options *options,
                          fp8q_TensorObject *data, fp8q_TensorObject *scale,
                          fp8q_cu_stream stream)
{
    fp8q_finfo info;
    fp8q_error error;
    fp8q_status status = FP8Q_OK;

    if (fp8q_py_use_on_stream(x, stream) < 0 ||
        fp8q_py_use_on_stream(data, stream) < 0 ||
        fp8q_py_use_on_stream(scale, stream) < 0) {
        return -1;
    }
    fp8q_error_clear(&error);
    (void)fp8q_dtype_finfo(data->view.dtype, &info);
    if (one_pass_rows(x, options)) {
        fp8q_quantize_rows_args rows;
        memset(&rows, 0, sizeof rows);
        rows.source = x->view.data;
        rows.destination = (uint8_t *)data->view.data;
        rows.scale = (float *)scale->view.data;
        rows.row_length = x->view.shape[x->view.ndim - 1];
        rows.n_rows = fp8q_view_size(&x->view) / rows.row_length;
        rows.source_dtype = (int32_t)x->view.dtype;
        rows.destination_dtype = (int32_t)data->view.dtype;
        rows.max = (float)info.max;
        rows.power_of_2 = options->power_of_2 != 0;
        rows.saturate = options->saturate != 0;
        RUN_WITHOUT_GIL(status, fp8q_cuda_launch_quantize_rows(
                                    x->cuda_device, &rows, stream, &error));
        return fp8q_py_raise_on_failure(status, &error);
    }
    if (options->compute_scale) {
        fp8q_scales_from_amax_args scales;
        memset(&scales, 0, sizeof scales);
        scales.values = (float *)scale->view.data;
        scales.count = fp8q_view_size(&scale->view);
        scales.max = (float)info.max;
        scales.power_of_2 = options->power_of_2 != 0;
        RUN_WITHOUT_GIL(status, group_amax(x, &options->granularity, scale,
                                           stream, &error));
        if (status == FP8Q_OK) {
            RUN_WITHOUT_GIL(status, fp8q_cuda_launch_scales_from_amax(
                                        x->cuda_device, &scales, stream,
                                        &error));
        }
        if (fp8q_py_raise_on_failure(status, &error) < 0) {
            return -1;
        }
    }
    return grouped_cast(x, data, scale, &options->granularity,
                        FP8Q_SCALE_DIVIDE, options->saturate,
                        options->infinity_to_nan, stream);
}

int fp8q_py_cuda_dequantize(fp8q_TensorObject *data, fp8q_TensorObject *scale,
                            const fp8q_granularity *granularity,
                            fp8q_TensorObject *result, fp8q_cu_stream stream)
{
    if (fp8q_py_use_on_stream(data, stream) < 0 ||
        fp8q_py_use_on_stream(scale, stream) < 0 ||
        fp8q_py_use_on_stream(result, stream) < 0) {
        return -1;
    }
    return grouped_cast(data, result, scale, granularity,
                        FP8Q_SCALE_MULTIPLY, 1, 0, stream);
}

/* ------------------------------------------------------------------------- */
/* weight-only product                                                       */

/* The address of row `row` of a C-contiguous matrix. */
static void *matrix_row(const fp8q_TensorObject *matrix, int64_t row)
{
    return (char *)matrix->view.data +
           row * matrix->view.shape[1] *
               (int64_t)fp8q_dtype_itemsize(matrix->view.dtype);
}

/* *args zeroed, then what rows first_row.. of x, the (N, K) weight (NULL:
 * n, k and the weight's dtype stay 0) and scale_kind say. */
static void gemv_args(fp8q_TensorObject *x, int64_t first_row, int64_t rows,
                      fp8q_TensorObject *weight, int scale_kind,
                      fp8q_gemv_fp8_args *args)
{
    memset(args, 0, sizeof *args);
    args->x = matrix_row(x, first_row);
    args->m = rows;
    args->x_dtype = (int32_t)x->view.dtype;
    args->scale_kind = scale_kind;
    if (weight != NULL) {
        args->weight = (const uint8_t *)weight->view.data;
        args->n = weight->view.shape[0];
        args->k = weight->view.shape[1];
        args->weight_dtype = (int32_t)weight->view.dtype;
    }
}

int fp8q_py_cuda_gemv_fp8_takes(fp8q_TensorObject *x, int64_t first_row,
                                int64_t rows, int scale_kind)
{
    fp8q_gemv_fp8_args args;

    gemv_args(x, first_row, rows, NULL, scale_kind, &args);
    return fp8q_cuda_gemv_fp8_takes(x->cuda_device, &args);
}

int fp8q_py_cuda_gemv_fp8_splits(fp8q_TensorObject *x, int64_t first_row,
                                 int64_t rows, fp8q_TensorObject *weight,
                                 int scale_kind)
{
    fp8q_gemv_fp8_args args;

    gemv_args(x, first_row, rows, weight, scale_kind, &args);
    return fp8q_cuda_gemv_fp8_splits(x->cuda_device, &args);
}

int fp8q_py_cuda_gemv_fp8(fp8q_TensorObject *x, int64_t first_row,
                          int64_t rows, fp8q_TensorObject *weight,
                          fp8q_TensorObject *weight_scale, int scale_kind,
                          fp8q_TensorObject *bias, fp8q_TensorObject *out,
                          fp8q_TensorObject *partial, int splits,
                          fp8q_cu_stream stream)
{
    fp8q_gemv_fp8_args args;
    fp8q_error error;
    fp8q_status status;

    if (fp8q_py_use_on_stream(x, stream) < 0 ||
        fp8q_py_use_on_stream(weight, stream) < 0 ||
        fp8q_py_use_on_stream(weight_scale, stream) < 0 ||
        (bias != NULL && fp8q_py_use_on_stream(bias, stream) < 0) ||
        (partial != NULL && fp8q_py_use_on_stream(partial, stream) < 0) ||
        fp8q_py_use_on_stream(out, stream) < 0) {
        return -1;
    }
    gemv_args(x, first_row, rows, weight, scale_kind, &args);
    args.scale = (const float *)weight_scale->view.data;
    args.bias = bias != NULL ? bias->view.data : NULL;
    args.y = matrix_row(out, first_row);
    args.bias_dtype = bias != NULL ? (int32_t)bias->view.dtype : 0;
    args.partial = partial != NULL ? (float *)partial->view.data : NULL;
    args.splits = partial != NULL ? splits : 1;
    fp8q_error_clear(&error);
    RUN_WITHOUT_GIL(status, fp8q_cuda_launch_gemv_fp8(x->cuda_device, &args,
                                                      stream, &error));
    return fp8q_py_raise_on_failure(status, &error);
}
