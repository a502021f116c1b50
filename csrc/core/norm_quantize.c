/*
 * norm_quantize.c - the CPU reference of the fused RMSNorm / LayerNorm +
 * per-token FP8 quantize (core/norm_quantize.h): float64 row reductions,
 * core/norm_formula.h's float32 element arithmetic, then the row's codes
 * exactly as fp8q.quantize(granularity="row") computes them.
 */
#include <math.h>
#include <string.h>

#include "core/float_codec.h"
#include "core/norm_formula.h"
#include "core/norm_quantize.h"
#include "core/scale_formula.h"
#include "core/view_layout.h"

/* ------------------------------------------------------------------------- */
/* Elements                                                                  */

static int is_float_dtype(int32_t dtype)
{
    return dtype == FP8Q_FLOAT32 || dtype == FP8Q_FLOAT16 ||
           dtype == FP8Q_BFLOAT16;
}

static float load(const void *base, int64_t index, int32_t dtype)
{
    if (dtype == FP8Q_FLOAT16) {
        return fp8q_decode_float16(((const uint16_t *)base)[index]);
    }
    if (dtype == FP8Q_BFLOAT16) {
        return fp8q_decode_bfloat16(((const uint16_t *)base)[index]);
    }
    return ((const float *)base)[index];
}

/* Stores value rounded once into dtype; returns the stored value as
 * float32 (exact: every float16 / bfloat16 is a float32). */
static float store(void *base, int64_t index, int32_t dtype, float value)
{
    uint16_t code;

    if (dtype == FP8Q_FLOAT32) {
        ((float *)base)[index] = value;
        return value;
    }
    code = dtype == FP8Q_FLOAT16 ? fp8q_encode_float16(value)
                                 : fp8q_encode_bfloat16(value);
    ((uint16_t *)base)[index] = code;
    return dtype == FP8Q_FLOAT16 ? fp8q_decode_float16(code)
                                 : fp8q_decode_bfloat16(code);
}

/* The magnitude's float32 bits (NaN above infinity). */
static uint32_t magnitude_bits(float value)
{
    return fp8q_float_to_bits(value) & 0x7FFFFFFFu;
}

/* ------------------------------------------------------------------------- */
/* One row                                                                   */

/* The row's mean (0 for RMSNorm) and spread, float64 sums rounded once. */
static void row_statistics(const fp8q_norm_quantize_args *args, int64_t first,
                           float *mean, float *spread)
{
    const int64_t length = args->row_length;
    double sum = 0.0, squares = 0.0;
    int64_t c;

    *mean = 0.0f;
    if (args->layer_norm) {
        for (c = 0; c < length; c++) {
            sum += (double)load(args->source, first + c, args->source_dtype);
        }
        *mean = (float)(sum / (double)length);
    }
    for (c = 0; c < length; c++) {
        const double centred =
            (double)load(args->source, first + c, args->source_dtype) -
            (double)*mean;
        squares += centred * centred;
    }
    *spread = (float)(squares / (double)length);
}

static void norm_quantize_row(const fp8q_norm_quantize_args *args,
                              int64_t row)
{
    const int64_t length = args->row_length;
    const int64_t first = row * length;
    float mean, spread, inverse, scale;
    uint32_t amax = 0u;
    int64_t c;

    row_statistics(args, first, &mean, &spread);
    inverse = fp8q_norm_inverse(spread, args->epsilon);
    for (c = 0; c < length; c++) {
        const float value = fp8q_norm_value(
            load(args->source, first + c, args->source_dtype), mean, inverse,
            load(args->weight, c, args->weight_dtype),
            args->bias != NULL ? load(args->bias, c, args->weight_dtype)
                               : 0.0f,
            args->bias != NULL);
        const uint32_t bits = magnitude_bits(
            store(args->normed, first + c, args->source_dtype, value));
        amax = bits > amax ? bits : amax;
    }
    scale = fp8q_scale_from_amax(fp8q_bits_to_float(amax), args->max, 0);
    args->scale[row] = scale;
    for (c = 0; c < length; c++) {
        const float value = load(args->normed, first + c, args->source_dtype);
        args->codes[first + c] = fp8q_encode_e4m3fn(
            fp8q_scaling_result(value / scale, value, scale), 1);
    }
}

/* ------------------------------------------------------------------------- */
/* Entry points                                                              */

fp8q_status fp8q_norm_quantize_check(const fp8q_norm_quantize_args *args,
                                     fp8q_error *error)
{
    if (!is_float_dtype(args->source_dtype) ||
        !is_float_dtype(args->weight_dtype)) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE,
                         "norm_quantize: x, weight and bias must be float32, "
                         "float16 or bfloat16");
    }
    if (args->row_length < 1 || args->n_rows < 0) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "norm_quantize: rows need at least one element "
                         "(got row_length %lld)",
                         (long long)args->row_length);
    }
    if (!(args->epsilon >= 0.0f) || isinf(args->epsilon)) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "norm_quantize: epsilon must be finite and >= 0, "
                         "got %g",
                         (double)args->epsilon);
    }
    if (args->n_rows > 0 &&
        (args->source == NULL || args->weight == NULL ||
         args->normed == NULL || args->codes == NULL || args->scale == NULL)) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "norm_quantize: a NULL buffer");
    }
    return FP8Q_OK;
}

fp8q_status fp8q_norm_quantize(const fp8q_norm_quantize_args *args,
                               fp8q_error *error)
{
    int64_t row;
    fp8q_status status = fp8q_norm_quantize_check(args, error);

    if (status != FP8Q_OK) {
        return status;
    }
    for (row = 0; row < args->n_rows; row++) {
        norm_quantize_row(args, row);
    }
    return FP8Q_OK;
}

/* ------------------------------------------------------------------------- */
/* The call from views                                                       */

/* FP8Q_OK when `view` has `dtype` and `size` elements. */
static fp8q_status check_holds(const fp8q_view *view, const char *name,
                               fp8q_dtype dtype, int64_t size,
                               fp8q_error *error)
{
    if (view->dtype == dtype && fp8q_view_size(view) == size) {
        return FP8Q_OK;
    }
    return fp8q_fail(error, FP8Q_ERROR_VALUE,
                     "norm_quantize: %s must hold %lld %s values, got %lld "
                     "%s",
                     name, (long long)size, fp8q_dtype_name(dtype),
                     (long long)fp8q_view_size(view),
                     fp8q_dtype_name(view->dtype));
}

/* FP8Q_ERROR_VALUE "norm_quantize: OUTPUT must not share memory with
 * OTHER" for the first output (normed, codes, scale) whose bytes meet an
 * input's or an earlier output's: a row's scale or codes written into a
 * row not yet read would change it. */
static fp8q_status check_apart(const fp8q_view *x, const fp8q_view *weight,
                               const fp8q_view *bias, const fp8q_view *normed,
                               const fp8q_view *codes, const fp8q_view *scale,
                               fp8q_error *error)
{
    const fp8q_view *views[6];
    static const char *const names[6] = {"x",      "weight", "bias",
                                         "normed", "codes",  "scale"};
    int output, other;

    views[0] = x;
    views[1] = weight;
    views[2] = bias;
    views[3] = normed;
    views[4] = codes;
    views[5] = scale;
    for (output = 3; output < 6; output++) {
        for (other = 0; other < output; other++) {
            if (views[other] != NULL &&
                fp8q_view_spans_overlap(views[output], views[other])) {
                return fp8q_fail(error, FP8Q_ERROR_VALUE,
                                 "norm_quantize: %s must not share memory "
                                 "with %s",
                                 names[output], names[other]);
            }
        }
    }
    return FP8Q_OK;
}

fp8q_status fp8q_norm_quantize_describe(
    const fp8q_view *x, const fp8q_view *weight, const fp8q_view *bias,
    const fp8q_view *normed, const fp8q_view *codes, const fp8q_view *scale,
    float epsilon, int layer_norm, fp8q_norm_quantize_args *args,
    fp8q_error *error)
{
    const int64_t length = x->ndim > 0 ? x->shape[x->ndim - 1] : 0;
    const int64_t size = fp8q_view_size(x);
    const int64_t rows = length > 0 ? size / length : 0;

    if (length < 1) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "norm_quantize: x must have a last axis of at least "
                         "1 element");
    }
    if (check_holds(weight, "weight", weight->dtype, length, error) !=
            FP8Q_OK ||
        (bias != NULL && check_holds(bias, "bias", weight->dtype, length,
                                     error) != FP8Q_OK) ||
        check_holds(normed, "normed", x->dtype, size, error) != FP8Q_OK ||
        check_holds(codes, "codes", FP8Q_FLOAT8_E4M3FN, size, error) !=
            FP8Q_OK ||
        check_holds(scale, "scale", FP8Q_FLOAT32, rows, error) != FP8Q_OK ||
        check_apart(x, weight, bias, normed, codes, scale, error) !=
            FP8Q_OK) {
        return FP8Q_ERROR_VALUE;
    }
    memset(args, 0, sizeof *args);
    args->source = x->data;
    args->weight = weight->data;
    args->bias = bias != NULL ? bias->data : NULL;
    args->normed = normed->data;
    args->codes = (uint8_t *)codes->data;
    args->scale = (float *)scale->data;
    args->n_rows = rows;
    args->row_length = length;
    args->source_dtype = (int32_t)x->dtype;
    args->weight_dtype = (int32_t)weight->dtype;
    args->layer_norm = layer_norm;
    args->epsilon = epsilon;
    args->max = 448.0f; /* float8_e4m3fn */
    return FP8Q_OK;
}

fp8q_status fp8q_norm_quantize_check_tensor(const char *name,
                                            const fp8q_view *view,
                                            fp8q_place place, int readonly,
                                            const fp8q_place *x_place,
                                            int output, fp8q_error *error)
{
    if (x_place != NULL &&
        (place.type != x_place->type || place.index != x_place->index)) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "norm_quantize: %s is not on x's device", name);
    }
    if (!fp8q_view_is_contiguous(view)) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "norm_quantize: %s must be C-contiguous", name);
    }
    if (output && readonly) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "norm_quantize: %s is an output and must be "
                         "writable, got a read-only tensor",
                         name);
    }
    return FP8Q_OK;
}
