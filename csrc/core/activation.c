/*
 * activation.c - a layer's activations quantized for an FP8 product, rows
 * holding NaN or infinity flagged instead of refused (activation.h).
 *
 * The scales come from the same reductions and formula as fp8q_quantize's
 * (fp8q_block_amax, fp8q_scales_from_amax) and the codes from the same
 * casts, so every finite row gets exactly fp8q.quantize's codes and scales.
 */
#include <string.h>

#include "core/activation.h"

#include "core/amax.h"
#include "core/cast.h"
#include "core/float_codec.h"
#include "core/quantize.h"

/* ------------------------------------------------------------------------- */
/* Flagging rows                                                             */

static int is_finite(float value)
{
    return (fp8q_float_to_bits(value) & 0x7F800000u) != 0x7F800000u;
}

/* fp8q_flag_nonfinite_rows; with `reset`, also sets every amax of a flagged
 * row to 0 (its scales then come out as 1). */
static int64_t flag_nonfinite_rows(const fp8q_view *amax, int reset,
                                   uint8_t *nonfinite_rows)
{
    int64_t row, group, count = 0;

    for (row = 0; row < amax->shape[0]; row++) {
        float *values = (float *)amax->data + row * amax->strides[0];
        int finite = 1;
        for (group = 0; group < amax->shape[1]; group++) {
            finite &= is_finite(values[group * amax->strides[1]]);
        }
        nonfinite_rows[row] = (uint8_t)!finite;
        count += !finite;
        for (group = 0; reset && !finite && group < amax->shape[1]; group++) {
            values[group * amax->strides[1]] = 0.0f;
        }
    }
    return count;
}

/* ------------------------------------------------------------------------- */
/* Quantizing                                                                */

static fp8q_status check_views(const fp8q_view *x, const fp8q_view *codes,
                               const fp8q_view *scale, int64_t block_cols,
                               const fp8q_view *row_amax, fp8q_error *error)
{
    const fp8q_view *amax = block_cols > 0 ? scale : row_amax;
    const int64_t groups =
        block_cols > 0 ? (x->shape[1] + block_cols - 1) / block_cols : 1;

    if (x->ndim != 2 || codes->ndim != 2 ||
        codes->dtype != FP8Q_FLOAT8_E4M3FN) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE,
                         "quantize_activations: expected a 2-D x and 2-D "
                         "float8_e4m3fn codes");
    }
    if (amax->dtype != FP8Q_FLOAT32 || amax->ndim != 2 ||
        amax->shape[0] != x->shape[0] || amax->shape[1] != groups) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "quantize_activations: the float32 amax view must "
                         "be (%lld, %lld)",
                         (long long)x->shape[0], (long long)groups);
    }
    return fp8q_view_check_same_shape(x, codes, "codes", error);
}

fp8q_status fp8q_quantize_activations(
    const fp8q_view *x, const fp8q_view *codes, const fp8q_view *scale,
    int64_t block_cols, const fp8q_view *row_amax, uint8_t *nonfinite_rows,
    int64_t *n_nonfinite, fp8q_error *error)
{
    const int dynamic = block_cols > 0;
    const fp8q_view *amax = dynamic ? scale : row_amax;
    fp8q_status status;

    status = check_views(x, codes, scale, block_cols, row_amax, error);
    if (status != FP8Q_OK) {
        return status;
    }
    status = fp8q_block_amax(x, 1, dynamic ? block_cols : x->shape[1], amax,
                             error);
    if (status != FP8Q_OK) {
        return status;
    }
    *n_nonfinite = flag_nonfinite_rows(amax, dynamic, nonfinite_rows);
    if (!dynamic) {
        fp8q_view broadcast;
        status = fp8q_view_broadcast_to(scale, 2, x->shape, &broadcast,
                                        "scale", error);
        return status != FP8Q_OK
                   ? status
                   : fp8q_cast(x, codes, &broadcast, FP8Q_SCALE_DIVIDE, 1,
                               error);
    }
    status = fp8q_scales_from_amax(scale, FP8Q_FLOAT8_E4M3FN, 0, 0, error);
    if (status != FP8Q_OK) {
        return status;
    }
    if (block_cols >= x->shape[1]) {
        return fp8q_cast(x, codes, scale, FP8Q_SCALE_DIVIDE, 1, error);
    }
    return fp8q_block_cast(x, codes, scale, 1, block_cols, FP8Q_SCALE_DIVIDE,
                           1, error);
}

/* ------------------------------------------------------------------------- */
/* Marking rows                                                              */

fp8q_status fp8q_fill_rows_nan(const fp8q_view *out, const uint8_t *rows,
                               fp8q_error *error)
{
    const float nan = fp8q_bits_to_float(0x7FC00000u);
    fp8q_view value;
    fp8q_view row;
    int64_t index;

    memset(&value, 0, sizeof value);
    value.data = (void *)&nan;
    value.dtype = FP8Q_FLOAT32;
    value.ndim = 2;
    value.shape[0] = 1;
    value.shape[1] = out->shape[1];
    for (index = 0; index < out->shape[0]; index++) {
        fp8q_status status;
        if (!rows[index]) {
            continue;
        }
        fp8q_view_slice(out, 0, index, index + 1, &row);
        status = fp8q_cast(&value, &row, NULL, FP8Q_SCALE_DIVIDE, 1, error);
        if (status != FP8Q_OK) {
            return status;
        }
    }
    return FP8Q_OK;
}

int64_t fp8q_flag_nonfinite_rows(const fp8q_view *values, uint8_t *rows)
{
    return flag_nonfinite_rows(values, 0, rows);
}
