/*
 * cast.c - casts between any two dtypes, unscaled, with a broadcast float32
 * scale, or with one scale per 2-D block.
 *
 * Every element goes load -> float32 -> (divide or multiply by its scale,
 * a NaN result made the same on every machine: fp8q_scaling_result) ->
 * store, rounding once on the store. Runs are processed through a small stack
 * buffer of float32 values; float32 sources without a scale skip the buffer.
 */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "core/cast.h"
#include "core/convert.h"
#include "core/float_codec.h"
#include "platform.h"

/* float32 values staged per step of a run: small enough for L1. */
#define STAGE 512

typedef struct cast_plan {
    fp8q_dtype source_dtype;
    fp8q_dtype destination_dtype;
    int has_scale;
    fp8q_scale_op op;
    int saturate;
} cast_plan;

/* ------------------------------------------------------------------------- */
/* Run kernels                                                               */

/* Applies the scale run (`scale`, `scale_byte_stride` apart, possibly 0) to
 * `count` staged values. */
static void apply_scale(fp8q_scale_op op, float *values, const char *scale,
                        int64_t scale_byte_stride, int64_t count)
{
    float scales[STAGE];
    const int each = scale_byte_stride != 0;

    if (each) {
        fp8q_load_float32(FP8Q_FLOAT32, scale, scale_byte_stride, scales,
                          count);
    }
    else {
        memcpy(&scales[0], scale, sizeof scales[0]);
    }
    fp8q_scale_float32(values, scales, each, op == FP8Q_SCALE_DIVIDE, count);
}

/* A same-dtype cast without a scale is a copy of the bits (this keeps NaN
 * payloads that a trip through float32 would canonicalise). */
static void copy_run(size_t itemsize, char *const *pointers,
                     const int64_t *byte_strides, int64_t count)
{
    const char *source = pointers[0];
    char *destination = pointers[1];
    int64_t i;

    if (byte_strides[0] == (int64_t)itemsize &&
        byte_strides[1] == (int64_t)itemsize) {
        memmove(destination, source, (size_t)count * itemsize);
        return;
    }
    for (i = 0; i < count; i++) {
        memmove(destination + i * byte_strides[1],
                source + i * byte_strides[0], itemsize);
    }
}

/* The fp8q_row_fn of every cast: operands are source, destination and (when
 * plan->has_scale) the scale, possibly with a zero stride. */
static void cast_row(void *context, char *const *pointers,
                     const int64_t *byte_strides, int64_t count)
{
    const cast_plan *plan = (const cast_plan *)context;
    float values[STAGE];
    int64_t done;

    if (!plan->has_scale && plan->source_dtype == plan->destination_dtype) {
        copy_run(fp8q_dtype_itemsize(plan->source_dtype), pointers,
                 byte_strides, count);
        return;
    }
    if (!plan->has_scale && plan->source_dtype == FP8Q_FLOAT32 &&
        byte_strides[0] == (int64_t)sizeof(float) &&
        (uintptr_t)pointers[0] % sizeof(float) == 0) {
        /* Contiguous, aligned float32 needs no staging. */
        fp8q_store_float32(plan->destination_dtype,
                           (const float *)pointers[0], pointers[1],
                           byte_strides[1], count, plan->saturate);
        return;
    }
    if (!plan->has_scale && plan->destination_dtype == FP8Q_FLOAT32 &&
        byte_strides[1] == (int64_t)sizeof(float) &&
        (uintptr_t)pointers[1] % sizeof(float) == 0) {
        /* Contiguous, aligned float32 output: decode straight into it. */
        fp8q_load_float32(plan->source_dtype, pointers[0], byte_strides[0],
                          (float *)pointers[1], count);
        return;
    }
    for (done = 0; done < count; done += STAGE) {
        const int64_t step = count - done < STAGE ? count - done : STAGE;
        fp8q_load_float32(plan->source_dtype,
                          pointers[0] + done * byte_strides[0],
                          byte_strides[0], values, step);
        if (plan->has_scale) {
            apply_scale(plan->op, values,
                        pointers[2] + done * byte_strides[2], byte_strides[2],
                        step);
        }
        fp8q_store_float32(plan->destination_dtype, values,
                           pointers[1] + done * byte_strides[1],
                           byte_strides[1], step, plan->saturate);
    }
}

/* ------------------------------------------------------------------------- */
/* Checks                                                                    */

static fp8q_status check_scale_dtype(const fp8q_view *scale,
                                     fp8q_error *error)
{
    if (scale->dtype != FP8Q_FLOAT32) {
        return fp8q_fail(error, FP8Q_ERROR_TYPE,
                         "scale: expected dtype float32, got %s",
                         fp8q_dtype_name(scale->dtype));
    }
    return FP8Q_OK;
}

/* The output `out` must have the source's shape and take one result per
 * element. */
static fp8q_status check_output(const fp8q_view *source,
                                const fp8q_view *destination,
                                fp8q_error *error)
{
    fp8q_status status =
        fp8q_view_check_same_shape(source, destination, "out", error);
    if (status != FP8Q_OK) {
        return status;
    }
    return fp8q_view_check_writable(destination, "out", error);
}

static void init_plan(cast_plan *plan, const fp8q_view *source,
                      const fp8q_view *destination, int has_scale,
                      fp8q_scale_op op, int saturate)
{
    plan->source_dtype = source->dtype;
    plan->destination_dtype = destination->dtype;
    plan->has_scale = has_scale;
    plan->op = op;
    plan->saturate = saturate;
}

/* ------------------------------------------------------------------------- */
/* Element-wise cast                                                         */

fp8q_status fp8q_cast(const fp8q_view *source, const fp8q_view *destination,
                      const fp8q_view *scale, fp8q_scale_op op, int saturate,
                      fp8q_error *error)
{
    const fp8q_view *operands[3];
    fp8q_view broadcast_scale;
    cast_plan plan;
    fp8q_status status;

    status = check_output(source, destination, error);
    if (status != FP8Q_OK) {
        return status;
    }
    operands[0] = source;
    operands[1] = destination;
    if (scale != NULL) {
        status = check_scale_dtype(scale, error);
        if (status != FP8Q_OK) {
            return status;
        }
        status = fp8q_view_broadcast_to(scale, source->ndim, source->shape,
                                        &broadcast_scale, "scale", error);
        if (status != FP8Q_OK) {
            return status;
        }
        operands[2] = &broadcast_scale;
    }
    init_plan(&plan, source, destination, scale != NULL, op, saturate);
    return fp8q_for_each_row(scale != NULL ? 3 : 2, operands, cast_row, &plan,
                             1, error);
}

/* ------------------------------------------------------------------------- */
/* Block-scaled cast                                                         */

/* Work units are (row, column block) runs of at most block_cols elements,
 * numbered row-major. */
typedef struct block_cast_job {
    cast_plan plan;
    const fp8q_view *source;
    const fp8q_view *destination;
    const fp8q_view *scale;
    int64_t block_rows;
    int64_t block_cols;
    int64_t blocks_per_row;
} block_cast_job;

/* fp8q_units_fn: casts units [first, end). */
static void block_cast_units(void *context, int64_t first, int64_t end)
{
    const block_cast_job *job = (const block_cast_job *)context;
    const int64_t source_size =
        (int64_t)fp8q_dtype_itemsize(job->source->dtype);
    const int64_t destination_size =
        (int64_t)fp8q_dtype_itemsize(job->destination->dtype);
    const int64_t n_cols = job->source->shape[1];
    int64_t byte_strides[3];
    int64_t unit;

    byte_strides[0] = job->source->strides[1] * source_size;
    byte_strides[1] = job->destination->strides[1] * destination_size;
    byte_strides[2] = 0;
    for (unit = first; unit < end; unit++) {
        const int64_t row = unit / job->blocks_per_row;
        const int64_t block_col = unit % job->blocks_per_row;
        const int64_t col = block_col * job->block_cols;
        const int64_t remaining = n_cols - col;
        const int64_t count =
            remaining < job->block_cols ? remaining : job->block_cols;
        char *pointers[3];

        pointers[0] = fp8q_view_element_2d(job->source, row, col);
        pointers[1] = fp8q_view_element_2d(job->destination, row, col);
        pointers[2] = fp8q_view_element_2d(job->scale, row / job->block_rows,
                                           block_col);
        cast_row((void *)&job->plan, pointers, byte_strides, count);
    }
}

fp8q_status fp8q_block_cast(const fp8q_view *source,
                            const fp8q_view *destination,
                            const fp8q_view *scale, int64_t block_rows,
                            int64_t block_cols, fp8q_scale_op op, int saturate,
                            fp8q_error *error)
{
    block_cast_job job;
    fp8q_status status;

    status = fp8q_view_check_block_grid(source, block_rows, block_cols, scale,
                                        "scale", error);
    if (status != FP8Q_OK) {
        return status;
    }
    status = check_output(source, destination, error);
    if (status != FP8Q_OK) {
        return status;
    }

    init_plan(&job.plan, source, destination, 1, op, saturate);
    job.source = source;
    job.destination = destination;
    job.scale = scale;
    job.block_rows = block_rows;
    job.block_cols = block_cols;
    job.blocks_per_row = scale->shape[1];
    fp8q_for_each_unit_range(source->shape[0] * job.blocks_per_row,
                             fp8q_view_size(source), block_cast_units, &job);
    return FP8Q_OK;
}
