/*
 * fp8_layer.c - the W8A8 layer forward on the CPU or its GPU
 * (cuda/fp8_layer.h): the scratch block's layout, the activations'
 * quantize, the scaled product with the weight read as b = weight.T.
 */
#include <string.h>

#include "cuda/fp8_layer.h"

#include "core/activation.h"
#include "core/scaled_mm.h"
#include "cuda/layer_path.h"
#include "cuda/ops.h"
#include "cuda/scaled_mm_ops.h"

/* Where the parts of the scratch block start (bytes; -1: absent) and its
 * size. */
typedef struct scratch_layout {
    int64_t codes, scales, row_amax, nonfinite, bytes;
    int64_t scale_columns; /* of the dynamic (M, G) scales */
} scratch_layout;

static int64_t round_up(int64_t bytes, int64_t alignment)
{
    return (bytes + alignment - 1) / alignment * alignment;
}

static scratch_layout layout_of(const fp8q_fp8_layer_call *call)
{
    const fp8q_view *x = call->rows != NULL ? call->rows : call->codes;
    const int64_t m = x->shape[0], k = x->shape[1];
    const int quantized_here = call->rows != NULL;
    scratch_layout layout;

    layout.codes = layout.scales = layout.row_amax = layout.nonfinite = -1;
    layout.bytes = 0;
    layout.scale_columns =
        call->granularity == FP8Q_GRANULARITY_BLOCK
            ? (k + FP8Q_SCALED_MM_BLOCK - 1) / FP8Q_SCALED_MM_BLOCK
            : 1;
    if (quantized_here) {
        layout.codes = 0;
        layout.bytes = m * k;
    }
    if (quantized_here && call->input_scale == NULL) {
        layout.scales =
            round_up(layout.bytes, FP8Q_FP8_LAYER_SCALES_ALIGNMENT);
        layout.bytes = layout.scales +
                       m * layout.scale_columns * (int64_t)sizeof(float);
    }
    if (call->device == NULL && quantized_here && call->input_scale != NULL) {
        layout.row_amax = round_up(layout.bytes, sizeof(float));
        layout.bytes = layout.row_amax + m * (int64_t)sizeof(float);
    }
    if (call->device == NULL &&
        (quantized_here || call->flag_nonfinite_scales)) {
        layout.nonfinite = layout.bytes;
        layout.bytes += m;
    }
    return layout;
}

int64_t fp8q_fp8_layer_scratch_bytes(const fp8q_fp8_layer_call *call)
{
    return layout_of(call).bytes;
}

/* A C-contiguous (rows, cols) view of `dtype` at `offset` in `scratch`. */
static fp8q_view carve(void *scratch, int64_t offset, fp8q_dtype dtype,
                       int64_t rows, int64_t cols)
{
    fp8q_view view;

    memset(&view, 0, sizeof view);
    view.data = (char *)scratch + offset;
    view.dtype = dtype;
    view.ndim = 2;
    view.shape[0] = rows;
    view.shape[1] = cols;
    view.strides[0] = cols > 0 ? cols : 1;
    view.strides[1] = 1;
    return view;
}

/* The view transposed when 2-D (weight (N, K) as scaled_mm's b (K, N), its
 * scales laid out for b), else unchanged. */
static fp8q_view transposed(const fp8q_view *view)
{
    fp8q_view result = *view;

    if (view->ndim == 2) {
        result.shape[0] = view->shape[1];
        result.shape[1] = view->shape[0];
        result.strides[0] = view->strides[1];
        result.strides[1] = view->strides[0];
    }
    return result;
}

/* The activations' quantize on the CPU (rows holding NaN or infinity
 * flagged, *n_nonfinite counting them) or the GPU (cuda/layer_path.h's
 * options: the NaN carried by the scales). */
static fp8q_status quantize(const fp8q_fp8_layer_call *call,
                            const scratch_layout *layout, void *scratch,
                            const fp8q_view *codes, const fp8q_view *scale,
                            uint8_t *nonfinite, int64_t *n_nonfinite,
                            fp8q_error *error)
{
    const int64_t m = call->rows->shape[0], k = call->rows->shape[1];
    fp8q_quantize_options options;
    fp8q_view row_amax;

    if (call->device != NULL) {
        fp8q_cuda_fp8_layer_activation_options(
            call->granularity, call->input_scale != NULL, &options);
        return fp8q_cuda_quantize(call->device, call->rows, &options, codes,
                                  scale, call->stream, error);
    }
    if (call->input_scale != NULL) {
        row_amax = carve(scratch, layout->row_amax, FP8Q_FLOAT32, m, 1);
    }
    return fp8q_quantize_activations(
        call->rows, codes, scale,
        call->input_scale != NULL ? 0
        : call->granularity == FP8Q_GRANULARITY_BLOCK ? FP8Q_SCALED_MM_BLOCK
                                                      : k,
        call->input_scale != NULL ? &row_amax : NULL, nonfinite, n_nonfinite,
        error);
}

/* out = (codes * scale_a) @ b + bias on the call's device. */
static fp8q_status multiply(const fp8q_fp8_layer_call *call,
                            const fp8q_view *codes, const fp8q_view *scale_a,
                            fp8q_error *error)
{
    const fp8q_view b = transposed(call->weight);
    const fp8q_view scale_b = transposed(call->weight_scale);
    fp8q_cuda_scaled_mm_call product;
    fp8q_status status;

    memset(&product, 0, sizeof product);
    product.a = codes;
    product.b = &b;
    product.scale_a = scale_a;
    product.scale_b = &scale_b;
    product.bias = call->bias;
    product.out = call->out;
    status = fp8q_scaled_mm_mode(codes->shape[0], codes->shape[1],
                                 b.shape[1], scale_a, &scale_b,
                                 &product.mode, error);
    return status != FP8Q_OK
               ? status
               : fp8q_scaled_mm_on_device(call->library, call->device,
                                          &product, call->stream, call->sgemm,
                                          call->sgemm_context, 1, error);
}

fp8q_status fp8q_fp8_layer_forward(const fp8q_fp8_layer_call *call,
                                   void *scratch, fp8q_error *error)
{
    const scratch_layout layout = layout_of(call);
    const fp8q_view *x = call->rows != NULL ? call->rows : call->codes;
    const int64_t m = x->shape[0], k = x->shape[1];
    uint8_t *nonfinite =
        layout.nonfinite >= 0 ? (uint8_t *)scratch + layout.nonfinite : NULL;
    int64_t n_nonfinite = 0;
    fp8q_view codes, scale;
    fp8q_status status = FP8Q_OK;

    if (call->rows != NULL) {
        codes = carve(scratch, layout.codes, FP8Q_FLOAT8_E4M3FN, m, k);
        scale = call->input_scale != NULL
                    ? *call->input_scale
                    : carve(scratch, layout.scales, FP8Q_FLOAT32, m,
                            layout.scale_columns);
        status = quantize(call, &layout, scratch, &codes, &scale, nonfinite,
                          &n_nonfinite, error);
    }
    else {
        codes = *call->codes;
        scale = *call->x_scale;
        if (nonfinite != NULL) {
            n_nonfinite = fp8q_flag_nonfinite_rows(&scale, nonfinite);
        }
    }
    if (status == FP8Q_OK) {
        status = multiply(call, &codes, &scale, error);
    }
    if (status == FP8Q_OK && n_nonfinite > 0) {
        status = fp8q_fill_rows_nan(call->out, nonfinite, error);
    }
    return status;
}
