/*
 * quantize.c - FP8 quantization and dequantization with per-tensor, per-row,
 * per-column or per-block float32 scales, and the amax -> scale rule.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "core/amax.h"
#include "core/cast.h"
#include "core/float_codec.h"
#include "core/quantize.h"
#include "core/scale_formula.h"

/* ------------------------------------------------------------------------- */
/* Scale shapes                                                              */

static const char *granularity_name(fp8q_granularity_kind kind)
{
    switch (kind) {
    case FP8Q_GRANULARITY_TENSOR:
        return "tensor";
    case FP8Q_GRANULARITY_ROW:
        return "row";
    case FP8Q_GRANULARITY_COL:
        return "col";
    case FP8Q_GRANULARITY_BLOCK:
        return "block";
    }
    return "unknown";
}

fp8q_status fp8q_scale_shape(const fp8q_granularity *granularity, int ndim,
                             const int64_t *shape, int *scale_ndim,
                             int64_t *scale_shape, fp8q_error *error)
{
    int axis;

    switch (granularity->kind) {
    case FP8Q_GRANULARITY_TENSOR:
        *scale_ndim = 0;
        return FP8Q_OK;
    case FP8Q_GRANULARITY_ROW:
    case FP8Q_GRANULARITY_COL:
        if (ndim < 1) {
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "granularity: \"%s\" needs at least 1 "
                             "dimension, got a 0-d input",
                             granularity_name(granularity->kind));
        }
        *scale_ndim = ndim;
        for (axis = 0; axis < ndim - 1; axis++) {
            scale_shape[axis] =
                granularity->kind == FP8Q_GRANULARITY_ROW ? shape[axis] : 1;
        }
        scale_shape[ndim - 1] =
            granularity->kind == FP8Q_GRANULARITY_ROW ? 1 : shape[ndim - 1];
        return FP8Q_OK;
    case FP8Q_GRANULARITY_BLOCK:
        if (ndim != 2) {
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "granularity: blocks need 2-D input, got %d "
                             "dimensions",
                             ndim);
        }
        if (granularity->block_rows < 1 || granularity->block_cols < 1) {
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "granularity: block extents must be >= 1, got "
                             "(%" PRId64 ", %" PRId64 ")",
                             granularity->block_rows,
                             granularity->block_cols);
        }
        *scale_ndim = 2;
        scale_shape[0] = fp8q_block_count(shape[0], granularity->block_rows);
        scale_shape[1] = fp8q_block_count(shape[1], granularity->block_cols);
        return FP8Q_OK;
    }
    return fp8q_fail(error, FP8Q_ERROR_VALUE,
                     "granularity: unknown kind %d", (int)granularity->kind);
}

/* Checks that `scale` is float32 with exactly the granularity's scale shape
 * for data of `data`'s shape. */
fp8q_status fp8q_check_scale_shape(const fp8q_granularity *granularity,
                                   const fp8q_view *data,
                                   const fp8q_view *scale, fp8q_error *error)
{
    int64_t expected[FP8Q_MAX_DIMS];
    int expected_ndim = 0;
    int same;
    int axis;
    fp8q_status status;

    status = fp8q_scale_shape(granularity, data->ndim, data->shape,
                              &expected_ndim, expected, error);
    if (status != FP8Q_OK) {
        return status;
    }
    if (scale->dtype != FP8Q_FLOAT32) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE,
                         "scale: expected dtype float32, got %s",
                         fp8q_dtype_name(scale->dtype));
    }
    same = scale->ndim == expected_ndim;
    for (axis = 0; same && axis < expected_ndim; axis++) {
        same = scale->shape[axis] == expected[axis];
    }
    if (!same) {
        char expected_text[256];
        char received_text[256];
        char data_text[256];
        fp8q_format_shape(expected_text, sizeof expected_text, expected_ndim,
                          expected);
        fp8q_format_shape(received_text, sizeof received_text, scale->ndim,
                          scale->shape);
        fp8q_format_shape(data_text, sizeof data_text, data->ndim,
                          data->shape);
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "scale: expected shape %s for \"%s\" granularity on "
                         "input of shape %s, got %s",
                         expected_text, granularity_name(granularity->kind),
                         data_text, received_text);
    }
    return FP8Q_OK;
}

/* ------------------------------------------------------------------------- */
/* Scale values, walked in C order (they are few: serial and simple)        */

typedef enum scale_pass {
    SCALE_PASS_CHECK_AMAX,  /* every value finite, >= 0, amax / max finite */
    SCALE_PASS_CHECK_GIVEN, /* every value finite and > 0 */
    SCALE_PASS_AMAX_TO_SCALE
} scale_pass;

typedef struct scale_walk {
    scale_pass pass;
    float max;       /* finfo(target).max * 2^-margin, as float32 */
    int power_of_2;
    int64_t index;   /* C-order index of the next value */
    int64_t bad_index;
    float bad_value; /* the first value a check rejected */
} scale_walk;

static int is_finite(float value)
{
    return (fp8q_float_to_bits(value) & 0x7F800000u) != 0x7F800000u;
}

/* The smallest power of two >= `value` (positive and finite), exactly. */
/* Checks or converts one value; records the first value a check rejects. */
static void visit_scale(scale_walk *walk, char *address)
{
    float value;
    int good = 1;

    memcpy(&value, address, sizeof value);
    switch (walk->pass) {
    case SCALE_PASS_CHECK_AMAX:
        good = is_finite(value) && value >= 0.0f &&
               is_finite(fp8q_scale_from_amax(value, walk->max, walk->power_of_2));
        break;
    case SCALE_PASS_CHECK_GIVEN:
        good = is_finite(value) && value > 0.0f;
        break;
    case SCALE_PASS_AMAX_TO_SCALE:
        value = fp8q_scale_from_amax(value, walk->max, walk->power_of_2);
        memcpy(address, &value, sizeof value);
        break;
    }
    if (!good && walk->bad_index < 0) {
        walk->bad_index = walk->index;
        walk->bad_value = value;
    }
}

/* Runs one pass over the float32 view `scales` (any strides) in C order, so
 * that walk->index is the flat C-order position of each value. */
static void walk_scales(scale_walk *walk, const fp8q_view *scales)
{
    const int64_t size = fp8q_view_size(scales);
    int64_t index[FP8Q_MAX_DIMS];
    int64_t offset = 0;
    int axis;

    for (axis = 0; axis < scales->ndim; axis++) {
        index[axis] = 0;
    }
    walk->bad_index = -1;
    for (walk->index = 0; walk->index < size; walk->index++) {
        visit_scale(walk, (char *)scales->data +
                              offset * (int64_t)sizeof(float));
        for (axis = scales->ndim - 1; axis >= 0; axis--) {
            index[axis]++;
            offset += scales->strides[axis];
            if (index[axis] < scales->shape[axis]) {
                break;
            }
            offset -= scales->shape[axis] * scales->strides[axis];
            index[axis] = 0;
        }
    }
}

fp8q_status fp8q_scales_from_amax(const fp8q_view *amax, fp8q_dtype target,
                                  int margin, int power_of_2,
                                  fp8q_error *error)
{
    fp8q_finfo info;
    scale_walk walk;

    if (amax->dtype != FP8Q_FLOAT32) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE,
                         "amax: expected dtype float32, got %s",
                         fp8q_dtype_name(amax->dtype));
    }
    if (!fp8q_dtype_is_fp8(target) || !fp8q_dtype_finfo(target, &info)) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE,
                         "dtype: expected an FP8 dtype, got %s",
                         fp8q_dtype_name(target));
    }

    if (margin < -FP8Q_SCALE_MARGIN_LIMIT || margin > FP8Q_SCALE_MARGIN_LIMIT) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "margin: expected an integer in [%d, %d], got %d",
                         -FP8Q_SCALE_MARGIN_LIMIT, FP8Q_SCALE_MARGIN_LIMIT,
                         margin);
    }
    /* Exact: a power-of-two multiple of a small integer, far from float32's
     * limits for any allowed margin. */
    walk.max = (float)ldexp(info.max, -margin);
    walk.power_of_2 = power_of_2;

    /* Check everything first, so a failure leaves the values untouched. */
    walk.pass = SCALE_PASS_CHECK_AMAX;
    walk_scales(&walk, amax);
    if (walk.bad_index >= 0) {
        if (is_finite(walk.bad_value) && walk.bad_value >= 0.0f) {
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "cannot compute a scale for group %" PRId64
                             " (C-order index into the scale): amax %s / "
                             "%s%s overflows float32",
                             walk.bad_index,
                             fp8q_number((double)walk.bad_value).text,
                             fp8q_number((double)walk.max).text,
                             power_of_2 ? " rounded up to a power of two"
                                        : "");
        }
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "cannot compute a scale for group %" PRId64
                         " (C-order index into the scale): its amax is %s%s",
                         walk.bad_index,
                         fp8q_number((double)walk.bad_value).text,
                         is_finite(walk.bad_value)
                             ? ", but an amax must be >= 0"
                             : " (the data contain NaN or infinity)");
    }
    walk.pass = SCALE_PASS_AMAX_TO_SCALE;
    walk_scales(&walk, amax);
    return FP8Q_OK;
}

/* ------------------------------------------------------------------------- */
/* Quantize and dequantize                                                   */

/* `scale` seen with data's ndim and extent 1 everywhere: the keepdims
 * destination of a whole-tensor amax. */
static void as_tensor_amax_output(const fp8q_view *scale, int ndim,
                                  fp8q_view *out)
{
    int axis;
    *out = *scale;
    out->ndim = ndim;
    for (axis = 0; axis < ndim; axis++) {
        out->shape[axis] = 1;
        out->strides[axis] = 0;
    }
}

static fp8q_status compute_scales(const fp8q_view *source,
                                  const fp8q_view *scale,
                                  const fp8q_granularity *granularity,
                                  fp8q_dtype target, int power_of_2,
                                  fp8q_error *error)
{
    fp8q_status status;

    if (granularity->kind == FP8Q_GRANULARITY_BLOCK) {
        status = fp8q_block_amax(source, granularity->block_rows,
                                 granularity->block_cols, scale, error);
    }
    else if (granularity->kind == FP8Q_GRANULARITY_TENSOR) {
        fp8q_view whole;
        as_tensor_amax_output(scale, source->ndim, &whole);
        status = fp8q_amax(source, &whole, error);
    }
    else {
        /* Row and col scale shapes are exactly amax's keepdims layout. */
        status = fp8q_amax(source, scale, error);
    }
    if (status != FP8Q_OK) {
        return status;
    }
    status = fp8q_scales_from_amax(scale, target, 0, power_of_2, error);
    if (status != FP8Q_OK && error != NULL) {
        /* Say which argument holds the non-finite values, and the way out. */
        char reason[FP8Q_ERROR_MESSAGE_SIZE];
        memcpy(reason, error->message, sizeof reason);
        return fp8q_fail(error, status,
                         "x: %s; pass scale= to quantize it anyway", reason);
    }
    return status;
}

fp8q_status fp8q_check_scale_values(const fp8q_view *scale,
                                    const char *argument_name,
                                    fp8q_error *error)
{
    scale_walk walk;

    if (scale->dtype != FP8Q_FLOAT32) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE,
                         "%s: expected dtype float32, got %s", argument_name,
                         fp8q_dtype_name(scale->dtype));
    }
    walk.pass = SCALE_PASS_CHECK_GIVEN;
    walk_scales(&walk, scale);
    if (walk.bad_index >= 0) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: every value must be finite and > 0 (it is "
                         "the dequantization scale, x ~= q * scale), but "
                         "element %" PRId64 " (C order) is %s",
                         argument_name, walk.bad_index,
                         fp8q_number((double)walk.bad_value).text);
    }
    return FP8Q_OK;
}

/* Casts with the scale laid out for `granularity`. */
static fp8q_status scaled_cast(const fp8q_view *source,
                               const fp8q_view *destination,
                               const fp8q_view *scale,
                               const fp8q_granularity *granularity,
                               fp8q_scale_op op, int saturate,
                               fp8q_error *error)
{
    if (granularity->kind == FP8Q_GRANULARITY_BLOCK) {
        return fp8q_block_cast(source, destination, scale,
                               granularity->block_rows,
                               granularity->block_cols, op, saturate, error);
    }
    return fp8q_cast(source, destination, scale, op, saturate, error);
}

fp8q_status fp8q_quantize(const fp8q_view *source,
                          const fp8q_view *destination,
                          const fp8q_view *scale,
                          const fp8q_quantize_options *options,
                          fp8q_error *error)
{
    fp8q_status status;

    if (!fp8q_dtype_is_fp8(destination->dtype)) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE,
                         "dtype: quantize produces an FP8 dtype, got %s",
                         fp8q_dtype_name(destination->dtype));
    }
    status = fp8q_view_check_same_shape(source, destination, "out", error);
    if (status != FP8Q_OK) {
        return status;
    }
    status = fp8q_check_scale_shape(&options->granularity, source, scale, error);
    if (status != FP8Q_OK) {
        return status;
    }
    if (options->compute_scale) {
        status = compute_scales(source, scale, &options->granularity,
                                destination->dtype, options->power_of_2,
                                error);
    }
    else {
        status = fp8q_check_scale_values(scale, "scale", error);
    }
    if (status != FP8Q_OK) {
        return status;
    }
    return scaled_cast(source, destination, scale, &options->granularity,
                       FP8Q_SCALE_DIVIDE, options->saturate, error);
}

fp8q_status fp8q_dequantize(const fp8q_view *data, const fp8q_view *scale,
                            const fp8q_granularity *granularity,
                            const fp8q_view *destination, fp8q_error *error)
{
    fp8q_status status =
        fp8q_check_scale_shape(granularity, data, scale, error);
    if (status != FP8Q_OK) {
        return status;
    }
    return scaled_cast(data, destination, scale, granularity,
                       FP8Q_SCALE_MULTIPLY, 1, error);
}

fp8q_status fp8q_check_quantize_dtype(int dequantize, fp8q_dtype dtype,
                                      fp8q_error *error)
{
    if (!dequantize && !fp8q_dtype_is_fp8(dtype)) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "quantize: dtype= must be an FP8 format "
                         "(float8_e4m3fn, float8_e5m2, float8_e4m3fnuz or "
                         "float8_e5m2fnuz), got %s",
                         fp8q_dtype_name(dtype));
    }
    if (dequantize && dtype != FP8Q_FLOAT32 && dtype != FP8Q_FLOAT16 &&
        dtype != FP8Q_BFLOAT16) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "dequantize: dtype= must be float32, float16 or "
                         "bfloat16, got %s",
                         fp8q_dtype_name(dtype));
    }
    return FP8Q_OK;
}

fp8q_status fp8q_refuse_scale_shape(const char *granularity_text,
                                    const fp8q_view *x, int scale_ndim,
                                    const int64_t *scale_shape,
                                    const fp8q_view *given,
                                    fp8q_error *error)
{
    char expected_text[FP8Q_SHAPE_TEXT_SIZE];
    char x_text[FP8Q_SHAPE_TEXT_SIZE];
    char given_text[FP8Q_SHAPE_TEXT_SIZE];

    fp8q_format_shape(expected_text, sizeof expected_text, scale_ndim,
                      scale_shape);
    fp8q_format_shape(x_text, sizeof x_text, x->ndim, x->shape);
    fp8q_format_shape(given_text, sizeof given_text, given->ndim,
                      given->shape);
    return fp8q_fail(error, FP8Q_ERROR_VALUE,
                     "quantize: scale= must have shape %s (the scale shape "
                     "of granularity=%s for x of shape %s) or broadcast to "
                     "it, got shape %s",
                     expected_text, granularity_text, x_text, given_text);
}
