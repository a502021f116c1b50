/*
 * cuda_ops.c - csrc/cuda/ops.h on the fake CUDA driver (tests/
 * fake_cuda_driver.c, which runs the kernels' launch contracts on the
 * host): gathers of strided inputs (the gather and the transpose kernels),
 * the cast's scale addressing and its refusals, the amax's three
 * reductions and calibration's finite amax, the weight-only product's
 * plans, launches and split-K scratch (cuda/weight_only_ops.h), the
 * calibrators' reductions, folds and records (cuda/calibration_ops.h), one
 * operation call (cuda/op_call.h) on the GPU against the same call on the
 * CPU, each against an oracle computed here on the host or by csrc/core.
 * tests/test_c_cuda_ops.py builds it with the fake driver and runs it:
 *
 *   cuda_ops KERNEL_FOLDER     (FP8Q_CUDA_DRIVER naming the fake driver)
 *
 * Prints "ok NAME" per test, or "FAIL NAME: why", and exits 1 on a failure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cast.h"
#include "cuda/driver.h"
#include "cuda/kernel_image.h"
#include "cuda/layer_path.h"
#include "cuda/memory.h"
#include "cuda/op_call.h"
#include "core/histogram.h"
#include "cuda/calibration_ops.h"
#include "cuda/ops.h"
#include "cuda/weight_only_ops.h"

#include "device_helpers.h"

static fp8q_view view_of(void *data, fp8q_dtype dtype, int ndim,
                         const int64_t *shape, const int64_t *strides)
{
    fp8q_view view;
    int axis;

    memset(&view, 0, sizeof view);
    view.data = data;
    view.dtype = dtype;
    view.ndim = ndim;
    for (axis = 0; axis < ndim; axis++) {
        view.shape[axis] = shape[axis];
        view.strides[axis] = strides[axis];
    }
    return view;
}

/* 24 float32 values, all different in magnitude, of both signs. */
static void fill_values(float *values)
{
    int i;

    for (i = 0; i < 24; i++) {
        values[i] = (float)((i * 7) % 24 - 11) * 13.375f;
    }
}

static float bits_float(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* cast of a strided x with one scale per row, against csrc/core's cast of
 * the same views on the host; the amax from the same pass against max|x|. */
static void check_cast(const char *test, const int64_t *shape,
                       const int64_t *strides, int ndim)
{
    float values[24];
    float scales[4] = {0.5f, 2.0f, 8.0f, 0.125f};
    const int64_t scale_shape[3] = {shape[0], 1, 1};
    const int64_t scale_strides[3] = {1, 1, 1};
    int64_t out_strides[3];
    unsigned char expected[24], got[24];
    float amax = 0.0f;
    uint32_t amax_bits = 0;
    fp8q_view x, scale, out, host_x, host_scale, host_out;
    fp8q_error error;
    void *x_memory, *scale_memory, *out_memory, *amax_memory;
    int64_t count = 1;
    int axis, i;

    fill_values(values);
    for (axis = ndim - 1; axis >= 0; axis--) {
        out_strides[axis] = count;
        count *= shape[axis];
    }
    x_memory = on_device(values, sizeof values);
    scale_memory = on_device(scales, sizeof scales);
    out_memory = on_device(NULL, (size_t)count);
    amax_memory = on_device(NULL, 4);
    if (x_memory == NULL || scale_memory == NULL || out_memory == NULL ||
        amax_memory == NULL) {
        return;
    }
    x = view_of(x_memory, FP8Q_FLOAT32, ndim, shape, strides);
    scale = view_of(scale_memory, FP8Q_FLOAT32, ndim, scale_shape,
                    scale_strides);
    out = view_of(out_memory, FP8Q_FLOAT8_E4M3FN, ndim, shape, out_strides);
    fp8q_error_clear(&error);
    if (fp8q_cuda_cast(device, &x, &scale, &out, (uint32_t *)amax_memory, 1,
                       NULL, &error) != FP8Q_OK) {
        fail(test, "fp8q_cuda_cast failed", &error);
        return;
    }
    to_host(got, out_memory, (size_t)count);
    to_host(&amax_bits, amax_memory, 4);
    host_x = view_of(values, FP8Q_FLOAT32, ndim, shape, strides);
    host_scale = view_of(scales, FP8Q_FLOAT32, ndim, scale_shape,
                         scale_strides);
    host_out = view_of(expected, FP8Q_FLOAT8_E4M3FN, ndim, shape,
                       out_strides);
    if (fp8q_cast(&host_x, &host_out, &host_scale, FP8Q_SCALE_DIVIDE, 1,
                  &error) != FP8Q_OK) {
        fail(test, "the host cast failed", &error);
        return;
    }
    for (i = 0; i < count; i++) {
        /* Element i of x in C order, at its strides. */
        int64_t rest = i, offset = 0;
        for (axis = ndim - 1; axis >= 0; axis--) {
            offset += rest % shape[axis] * strides[axis];
            rest /= shape[axis];
        }
        amax = fabsf(values[offset]) > amax ? fabsf(values[offset]) : amax;
    }
    if (memcmp(got, expected, (size_t)count) != 0) {
        fail(test, "the cast's bits differ from csrc/core's", NULL);
    }
    else if (bits_float(amax_bits) != amax) {
        fail(test, "the amax is not max |x|", NULL);
    }
    else {
        printf("ok %s\n", test);
    }
}

/* The refusals, with csrc/python's messages. */
static void check_cast_refusals(void)
{
    float values[24];
    const int64_t shape[3] = {2, 3, 4}, strides[3] = {12, 4, 1};
    const int64_t scale_shape[3] = {1, 3, 4}, scale_strides[3] = {12, 4, 1};
    const int64_t out_shape[2] = {4, 6}, out_strides[2] = {1, 4};
    fp8q_view x, scale, out;
    fp8q_error error;
    fp8q_status status;
    void *memory, *out_memory;

    fill_values(values);
    memory = on_device(values, sizeof values);
    out_memory = on_device(NULL, 24);
    if (memory == NULL || out_memory == NULL) {
        return;
    }
    x = view_of(memory, FP8Q_FLOAT32, 3, shape, strides);
    out = view_of(out_memory, FP8Q_FLOAT8_E4M3FN, 2, out_shape, out_strides);
    fp8q_error_clear(&error);
    status = fp8q_cuda_cast(device, &x, NULL, &out, NULL, 1, NULL, &error);
    if (status != FP8Q_ERROR_VALUE ||
        strcmp(error.message, "cast: out= on CUDA must be C-contiguous, got "
                              "strides (1, 4) (in elements)") != 0) {
        fail("cast-strided-out", "not the strided out= refusal", &error);
    }
    else {
        printf("ok cast-strided-out\n");
    }
    out = view_of(out_memory, FP8Q_FLOAT8_E4M3FN, 3, shape, strides);
    scale = view_of(memory, FP8Q_FLOAT32, 3, scale_shape, scale_strides);
    fp8q_error_clear(&error);
    status = fp8q_cuda_cast(device, &x, &scale, &out, NULL, 1, NULL, &error);
    if (status != FP8Q_ERROR_VALUE ||
        strstr(error.message, "cast: on CUDA, scale= must be one value") ==
            NULL ||
        strstr(error.message, "got shape (1, 3, 4)") == NULL) {
        fail("cast-scale-shape", "not the scale addressing refusal", &error);
    }
    else {
        printf("ok cast-scale-shape\n");
    }
}

/* amax of the (2, 3, 4) float32 values over the axes reduce[] names,
 * against a loop over the elements. */
static void check_amax(const char *test, const int *reduce,
                       const int64_t *strides)
{
    const int64_t shape[3] = {2, 3, 4};
    float values[24];
    float expected[24], got[24];
    int64_t kept = 1;
    fp8q_view x;
    fp8q_error error;
    void *memory, *amax_memory;
    int i, j, k;

    fill_values(values);
    for (i = 0; i < 3; i++) {
        kept *= reduce[i] ? 1 : shape[i];
    }
    memset(expected, 0, sizeof expected);
    for (i = 0; i < 2; i++) {
        for (j = 0; j < 3; j++) {
            for (k = 0; k < 4; k++) {
                const int64_t slot =
                    ((reduce[0] ? 0 : i) * (reduce[1] ? 1 : 3) +
                     (reduce[1] ? 0 : j)) *
                        (reduce[2] ? 1 : 4) +
                    (reduce[2] ? 0 : k);
                const float value = fabsf(
                    values[i * strides[0] + j * strides[1] + k * strides[2]]);
                expected[slot] =
                    value > expected[slot] ? value : expected[slot];
            }
        }
    }
    memory = on_device(values, sizeof values);
    amax_memory = on_device(NULL, (size_t)kept * 4);
    if (memory == NULL || amax_memory == NULL) {
        return;
    }
    x = view_of(memory, FP8Q_FLOAT32, 3, shape, strides);
    fp8q_error_clear(&error);
    if (fp8q_cuda_amax(device, &x, reduce, (uint32_t *)amax_memory, NULL,
                       &error) != FP8Q_OK) {
        fail(test, "fp8q_cuda_amax failed", &error);
        return;
    }
    to_host(got, amax_memory, (size_t)kept * 4);
    if (memcmp(got, expected, (size_t)kept * 4) != 0) {
        fail(test, "not the amax of the reduced elements", NULL);
    }
    else {
        printf("ok %s\n", test);
    }
}

/* expected[j] = the largest finite |x| of channel j (axis 1) of the
 * (2, 3, 4) x with strides (1, 8, 2) over `values` (0 for none). */
static void finite_amax_per_channel(const float *values, float *expected)
{
    int i, j, k;

    for (j = 0; j < 3; j++) {
        expected[j] = 0.0f;
        for (i = 0; i < 2; i++) {
            for (k = 0; k < 4; k++) {
                const float value = fabsf(values[i + j * 8 + k * 2]);
                if (value == value && value != (float)INFINITY &&
                    value > expected[j]) {
                    expected[j] = value;
                }
            }
        }
    }
}

/* Calibration's amax per index of axis 1 of a strided x holding a NaN and
 * an infinity: the largest finite |x| per channel, 2 non-finite values. */
static void check_amax_finite(void)
{
    const int64_t shape[3] = {2, 3, 4}, strides[3] = {1, 8, 2};
    float values[24];
    float expected[3] = {0.0f, 0.0f, 0.0f}, got[3];
    uint64_t zero = 0, count = 0;
    fp8q_view x;
    fp8q_error error;
    void *memory, *amax_memory, *count_memory;

    fill_values(values);
    values[1 + 8 * 2 + 2 * 3] = (float)NAN;
    values[8 * 1 + 2 * 1] = (float)INFINITY;
    finite_amax_per_channel(values, expected);
    memory = on_device(values, sizeof values);
    amax_memory = on_device(NULL, sizeof got);
    count_memory = on_device(&zero, sizeof zero);
    if (memory == NULL || amax_memory == NULL || count_memory == NULL) {
        return;
    }
    x = view_of(memory, FP8Q_FLOAT32, 3, shape, strides);
    fp8q_error_clear(&error);
    if (fp8q_cuda_amax_finite(device, &x, 1, (uint32_t *)amax_memory,
                              (uint64_t *)count_memory, NULL,
                              &error) != FP8Q_OK) {
        fail("amax-finite", "fp8q_cuda_amax_finite failed", &error);
        return;
    }
    to_host(got, amax_memory, sizeof got);
    to_host(&count, count_memory, sizeof count);
    if (memcmp(got, expected, sizeof got) != 0 || count != 2) {
        fail("amax-finite", "not the finite amax per channel and 2", NULL);
    }
    else {
        printf("ok amax-finite\n");
    }
}

/* ------------------------------------------------------------------------- */
/* The weight-only product (cuda/weight_only_ops.h)                          */

/* `count` float32 values converted into `dtype` by csrc/core's cast. */
static void host_convert(const float *values, int64_t count, fp8q_dtype dtype,
                         void *converted)
{
    const int64_t stride = 1;
    fp8q_view source = view_of((void *)values, FP8Q_FLOAT32, 1, &count,
                               &stride);
    fp8q_view destination = view_of(converted, dtype, 1, &count, &stride);
    fp8q_error error;

    fp8q_error_clear(&error);
    if (fp8q_cast(&source, &destination, NULL, FP8Q_SCALE_DIVIDE, 1,
                  &error) != FP8Q_OK) {
        fail("setup", "host conversion", &error);
    }
}

/*
 * y = x . (w * scale)^T + bias on the device for x (m, k) of `dtype`
 * (float32 or float16), an e4m3fn weight (n, k) with row scales and a
 * float32 bias, every row (`every_row`), against the exact sum on the host
 * rounded once into x's dtype by csrc/core (the values are small multiples
 * of 1/2 and powers of two, so every float32 sum is exact). `scratch_short`
 * nonzero: the run is given one float less than the plan's scratch and
 * must refuse. Returns the plan's scratch bytes (0 on a failure).
 */
static size_t check_weight_only(const char *test, int64_t m, int64_t n,
                                int64_t k, fp8q_dtype dtype, int every_row,
                                int scratch_short)
{
    const size_t x_size = fp8q_dtype_itemsize(dtype);
    const int64_t x_shape[2] = {m, k}, x_strides[2] = {k, 1};
    const int64_t w_shape[2] = {n, k}, w_strides[2] = {k, 1};
    const int64_t s_shape[2] = {n, 1}, s_strides[2] = {1, 1};
    const int64_t b_shape[1] = {n}, b_strides[1] = {1};
    const int64_t y_shape[2] = {m, n}, y_strides[2] = {n, 1};
    float *x_values = (float *)calloc((size_t)(m * k), sizeof(float));
    float *w_values = (float *)calloc((size_t)(n * k), sizeof(float));
    float *sums = (float *)calloc((size_t)(m * n), sizeof(float));
    unsigned char *x_host = (unsigned char *)calloc((size_t)(m * k), x_size);
    unsigned char *w_host = (unsigned char *)calloc((size_t)(n * k), 1);
    unsigned char *expected = (unsigned char *)calloc((size_t)(m * n), x_size);
    unsigned char *got = (unsigned char *)calloc((size_t)(m * n), x_size);
    float *scales = (float *)calloc((size_t)n, sizeof(float));
    float *bias = (float *)calloc((size_t)n, sizeof(float));
    fp8q_view x, w, scale, bias_view, y;
    fp8q_cuda_weight_only_plan plan;
    fp8q_error error;
    fp8q_status status;
    void *scratch = NULL;
    size_t result = 0;
    int64_t i, j, kk;

    if (x_values == NULL || w_values == NULL || sums == NULL ||
        x_host == NULL || w_host == NULL || expected == NULL || got == NULL ||
        scales == NULL || bias == NULL) {
        fail(test, "host memory", NULL);
        goto done;
    }
    for (i = 0; i < m * k; i++) {
        x_values[i] = (float)((i * 5 + i / k) % 5 - 2) * 0.5f;
    }
    for (i = 0; i < n * k; i++) {
        w_values[i] = (float)((i * 3 + i / k * 7) % 9 - 4);
    }
    for (j = 0; j < n; j++) {
        scales[j] = j % 3 == 0 ? 0.25f : j % 3 == 1 ? 1.0f : 2.0f;
        bias[j] = (float)(j % 7 - 3);
    }
    for (i = 0; i < m; i++) {
        for (j = 0; j < n; j++) {
            double sum = 0.0;
            for (kk = 0; kk < k; kk++) {
                sum += (double)x_values[i * k + kk] * w_values[j * k + kk];
            }
            sums[i * n + j] = (float)(sum * scales[j] + bias[j]);
        }
    }
    host_convert(x_values, m * k, dtype, x_host);
    host_convert(w_values, n * k, FP8Q_FLOAT8_E4M3FN, w_host);
    host_convert(sums, m * n, dtype, expected);
    x = view_of(on_device(x_host, (size_t)(m * k) * x_size), dtype, 2,
                x_shape, x_strides);
    w = view_of(on_device(w_host, (size_t)(n * k)), FP8Q_FLOAT8_E4M3FN, 2,
                w_shape, w_strides);
    scale = view_of(on_device(scales, (size_t)n * sizeof(float)),
                    FP8Q_FLOAT32, 2, s_shape, s_strides);
    bias_view = view_of(on_device(bias, (size_t)n * sizeof(float)),
                        FP8Q_FLOAT32, 1, b_shape, b_strides);
    y = view_of(on_device(NULL, (size_t)(m * n) * x_size), dtype, 2, y_shape,
                y_strides);
    if (x.data == NULL || w.data == NULL || scale.data == NULL ||
        bias_view.data == NULL || y.data == NULL) {
        goto done;
    }
    if (!fp8q_cuda_weight_only_may_take(&x, &w, every_row)) {
        fail(test, "the shapes are refused", NULL);
        goto done;
    }
    fp8q_cuda_weight_only_plan_make(device, &x, &w, &scale,
                                    FP8Q_GRANULARITY_ROW, every_row, &plan);
    if (!plan.takes) {
        fail(test, "the plan does not take the call", NULL);
        goto done;
    }
    if (plan.scratch_bytes > 0) {
        scratch = on_device(NULL, plan.scratch_bytes);
        if (scratch == NULL) {
            goto done;
        }
    }
    fp8q_error_clear(&error);
    status = fp8q_cuda_weight_only_gemv(
        device, &x, &w, &scale, &bias_view, &plan, &y, scratch,
        scratch_short ? plan.scratch_bytes - sizeof(float)
                      : plan.scratch_bytes,
        NULL, &error);
    if (scratch_short) {
        if (status != FP8Q_ERROR_VALUE ||
            strstr(error.message, "split-K scratch holds") == NULL) {
            fail(test, "a short scratch is not refused", &error);
        }
        else {
            printf("ok %s\n", test);
            result = plan.scratch_bytes;
        }
        goto done;
    }
    if (status != FP8Q_OK) {
        fail(test, "fp8q_cuda_weight_only_gemv failed", &error);
        goto done;
    }
    to_host(got, y.data, (size_t)(m * n) * x_size);
    if (memcmp(got, expected, (size_t)(m * n) * x_size) != 0) {
        fail(test, "y differs from the exact product", NULL);
    }
    else {
        printf("ok %s\n", test);
        result = plan.scratch_bytes > 0 ? plan.scratch_bytes : 1;
    }
done:
    free(x_values);
    free(w_values);
    free(sums);
    free(x_host);
    free(w_host);
    free(expected);
    free(got);
    free(scales);
    free(bias);
    return result;
}

/* What the weight-only path declines: shapes (K not a multiple of 16, K
 * unequal, more than 64 rows in one launch), a misaligned x, a float16
 * weight scale, and a plan that does not take the call given to the run. */
static void check_weight_only_declines(void)
{
    const int64_t x_shape[2] = {65, 64}, x_strides[2] = {64, 1};
    const int64_t w_shape[2] = {8, 64}, w_strides[2] = {64, 1};
    const int64_t k_shape[2] = {8, 24};
    const int64_t s_shape[2] = {8, 1}, s_strides[2] = {1, 1};
    fp8q_view x, w, w24, scale;
    fp8q_cuda_weight_only_plan plan;
    fp8q_error error;
    void *x_memory = on_device(NULL, 65 * 64 * 4 + 16);
    void *w_memory = on_device(NULL, 8 * 64);
    void *s_memory = on_device(NULL, 8 * 4);

    if (x_memory == NULL || w_memory == NULL || s_memory == NULL) {
        return;
    }
    x = view_of(x_memory, FP8Q_FLOAT32, 2, x_shape, x_strides);
    w = view_of(w_memory, FP8Q_FLOAT8_E4M3FN, 2, w_shape, w_strides);
    w24 = view_of(w_memory, FP8Q_FLOAT8_E4M3FN, 2, k_shape, w_strides);
    scale = view_of(s_memory, FP8Q_FLOAT32, 2, s_shape, s_strides);
    if (fp8q_cuda_weight_only_may_take(&x, &w, 0) ||
        !fp8q_cuda_weight_only_may_take(&x, &w, 1) ||
        fp8q_cuda_weight_only_may_take(&x, &w24, 1)) {
        fail("weight-only-declines", "the shape checks", NULL);
        return;
    }
    x.shape[0] = 8;
    fp8q_cuda_weight_only_plan_make(device, &x, &w, &scale,
                                    FP8Q_GRANULARITY_ROW, 0, &plan);
    if (!plan.takes || plan.scratch_bytes != 0) {
        fail("weight-only-declines", "8 aligned float32 rows not taken",
             NULL);
        return;
    }
    x.data = (char *)x_memory + 4;
    fp8q_cuda_weight_only_plan_make(device, &x, &w, &scale,
                                    FP8Q_GRANULARITY_ROW, 1, &plan);
    if (plan.takes) {
        fail("weight-only-declines", "a misaligned x taken", NULL);
        return;
    }
    x.data = x_memory;
    scale.dtype = FP8Q_FLOAT16;
    fp8q_cuda_weight_only_plan_make(device, &x, &w, &scale,
                                    FP8Q_GRANULARITY_ROW, 1, &plan);
    fp8q_error_clear(&error);
    if (plan.takes ||
        fp8q_cuda_weight_only_gemv(device, &x, &w, &scale, NULL, &plan, &x,
                                   NULL, 0, NULL, &error) !=
            FP8Q_ERROR_VALUE) {
        fail("weight-only-declines", "a float16 scale taken", &error);
        return;
    }
    printf("ok weight-only-declines\n");
}

/* ------------------------------------------------------------------------- */
/* The calibrators' reductions (cuda/calibration_ops.h)                      */

/* A started device state of `bytes` (zero bytes). */
static void *started_state(const char *test, size_t bytes)
{
    void *state = on_device(NULL, bytes);
    fp8q_error error;

    fp8q_error_clear(&error);
    if (state != NULL &&
        fp8q_cuda_calib_state_start(device, state, bytes, NULL, NULL,
                                    &error) != FP8Q_OK) {
        fail(test, "fp8q_cuda_calib_state_start failed", &error);
        return NULL;
    }
    return state;
}

/* Reduces x (per channel of axis `channel`, or per tensor for -1) and
 * folds it by max (length 1, a plain window) into `state` as update
 * `update`; FP8Q_OK or the failure. */
static fp8q_status fold_max_batch(const fp8q_view *x, int channel,
                                  int64_t n_channels, void *state,
                                  int64_t update, int skip_nonfinite,
                                  fp8q_error *error)
{
    fp8q_cuda_calib_batch batch;
    fp8q_status status;

    status = fp8q_cuda_calib_reduce(device, x, channel, n_channels, 0, 0, 0,
                                    NULL, &batch, error);
    if (status != FP8Q_OK) {
        return status;
    }
    status = fp8q_cuda_calib_fold_max(device, &batch, n_channels, state, 1,
                                      -1.0, 0, update, skip_nonfinite, NULL,
                                      error);
    fp8q_cuda_calib_batch_release(&batch, NULL);
    return status;
}

/*
 * The max calibrator per channel of axis 1 of a strided (2, 3, 4) x: a
 * batch holding a NaN and an infinity with skip_nonfinite (recorded: its
 * finite amax per channel, 2 skipped values), then the same batch without
 * (refused): the state read back holds the first batch's amax, the record
 * counts 2 and refuses update 2 with the deferred message.
 */
static void check_calib_max(void)
{
    const int64_t shape[3] = {2, 3, 4}, strides[3] = {1, 8, 2};
    const size_t bytes = fp8q_cuda_calib_max_state_bytes(1, 3);
    float values[24];
    float expected[3] = {0.0f, 0.0f, 0.0f};
    unsigned char copy[sizeof(fp8q_calib_max_state) + 3 * sizeof(float)];
    const fp8q_calib_max_state *header = (const fp8q_calib_max_state *)copy;
    int64_t nonfinite = 5;
    fp8q_view x;
    fp8q_error error;
    fp8q_status status;
    void *memory, *state;

    fill_values(values);
    values[1 + 8 * 2 + 2 * 3] = (float)NAN;
    values[8 * 1 + 2 * 1] = (float)-INFINITY;
    finite_amax_per_channel(values, expected);
    memory = on_device(values, sizeof values);
    state = started_state("calib-max", bytes);
    if (memory == NULL || state == NULL || bytes != sizeof copy) {
        fail("calib-max", "setup", NULL);
        return;
    }
    x = view_of(memory, FP8Q_FLOAT32, 3, shape, strides);
    fp8q_error_clear(&error);
    if (fold_max_batch(&x, 1, 3, state, 1, 1, &error) != FP8Q_OK ||
        fold_max_batch(&x, 1, 3, state, 2, 0, &error) != FP8Q_OK ||
        fp8q_cuda_calib_state_read(device, state, bytes, copy, NULL,
                                   &error) != FP8Q_OK) {
        fail("calib-max", "a reduction or fold failed", &error);
        return;
    }
    status = fp8q_cuda_calib_state_record(copy, 0, &nonfinite, &error);
    if (header->filled != 1 ||
        memcmp(copy + sizeof(fp8q_calib_max_state), expected,
               sizeof expected) != 0) {
        fail("calib-max", "the device history is not the first batch's "
                          "finite amax per channel", NULL);
    }
    else if (status != FP8Q_ERROR_VALUE || nonfinite != 7 ||
             strcmp(error.message,
                    "x: update 2 (a batch on cuda:0) held 2 NaN or infinite "
                    "values and was not recorded; 1 batch was refused for "
                    "NaN/inf since the state was last read, every other "
                    "batch is recorded (pass skip_nonfinite=True to skip "
                    "and count them)") != 0) {
        fail("calib-max", "not the refused second batch's record", &error);
    }
    else {
        printf("ok calib-max\n");
    }
}

/*
 * The histogram calibrator per tensor: a strided x (gathered into a
 * contiguous copy) with zeros and a NaN, counted with skip_zeros and
 * skip_nonfinite into a zeroed state, against csrc/core's histogram of the
 * same view: the same counts, grid and amax; the record counts the NaN.
 */
static void check_calib_histogram(void)
{
    const int64_t n_bins = 64;
    const int64_t shape[2] = {4, 6}, strides[2] = {1, 4};
    const size_t bytes = fp8q_cuda_calib_histogram_state_bytes(n_bins);
    float values[24];
    int64_t host_counts[64];
    unsigned char copy[sizeof(fp8q_calib_histogram_state) + 64 * 8];
    const fp8q_calib_histogram_state *header =
        (const fp8q_calib_histogram_state *)copy;
    fp8q_histogram host;
    fp8q_cuda_calib_batch batch;
    int64_t nonfinite = 0, host_nonfinite = 0;
    fp8q_view x, host_x;
    fp8q_error error;
    void *memory, *state;
    int64_t bin;
    int same = 1;

    fill_values(values);
    values[3] = 0.0f;
    values[10] = 0.0f;
    values[17] = (float)NAN;
    memory = on_device(values, sizeof values);
    state = started_state("calib-histogram", bytes);
    if (memory == NULL || state == NULL || bytes != sizeof copy) {
        fail("calib-histogram", "setup", NULL);
        return;
    }
    x = view_of(memory, FP8Q_FLOAT32, 2, shape, strides);
    host_x = view_of(values, FP8Q_FLOAT32, 2, shape, strides);
    fp8q_histogram_init(&host, n_bins, host_counts);
    fp8q_error_clear(&error);
    if (fp8q_histogram_add(&host, &host_x, 1, 1, &host_nonfinite, &error) !=
        FP8Q_OK) {
        fail("calib-histogram", "the host histogram failed", &error);
        return;
    }
    if (fp8q_cuda_calib_reduce(
            device, &x, -1, 1, 1,
            fp8q_cuda_calib_histogram_extra_bytes(n_bins), 1, NULL, &batch,
            &error) != FP8Q_OK) {
        fail("calib-histogram", "fp8q_cuda_calib_reduce failed", &error);
        return;
    }
    if (batch.gathered.data == NULL || batch.source.strides[0] != 6) {
        fail("calib-histogram", "x was not gathered", NULL);
    }
    if (fp8q_cuda_calib_fold_histogram(device, &batch, state, n_bins, 1, 1,
                                       1, NULL, &error) != FP8Q_OK) {
        fail("calib-histogram", "the fold failed", &error);
        fp8q_cuda_calib_batch_release(&batch, NULL);
        return;
    }
    fp8q_cuda_calib_batch_release(&batch, NULL);
    if (batch.scratch.memory != NULL || batch.gathered.data != NULL ||
        fp8q_cuda_calib_state_read(device, state, bytes, copy, NULL,
                                   &error) != FP8Q_OK ||
        fp8q_cuda_calib_state_record(copy, 0, &nonfinite, &error) !=
            FP8Q_OK) {
        fail("calib-histogram", "the release or read-back", &error);
        return;
    }
    for (bin = 0; bin < n_bins; bin++) {
        uint64_t count;
        memcpy(&count, copy + sizeof *header + (size_t)bin * 8, 8);
        same = same && (int64_t)count == host_counts[bin];
    }
    if (!same || !header->has_range ||
        header->bin_exponent != host.bin_exponent ||
        bits_float(header->amax_bits) != host.amax || nonfinite != 1 ||
        host_nonfinite != 1) {
        fail("calib-histogram", "not csrc/core's histogram", NULL);
    }
    else {
        printf("ok calib-histogram\n");
    }
}

/* A W8A8 layer's activation quantize options (cuda/layer_path.h): per
 * token for row / tensor weights, 1 x 128 blocks for block weights, the
 * static scale's tensor granularity with infinities to NaN; always
 * saturating. */
static void check_layer_activation_options(void)
{
    fp8q_quantize_options row, block, fixed;

    fp8q_cuda_fp8_layer_activation_options(FP8Q_GRANULARITY_TENSOR, 0, &row);
    fp8q_cuda_fp8_layer_activation_options(FP8Q_GRANULARITY_BLOCK, 0, &block);
    fp8q_cuda_fp8_layer_activation_options(FP8Q_GRANULARITY_ROW, 1, &fixed);
    if (row.granularity.kind != FP8Q_GRANULARITY_ROW || !row.compute_scale ||
        row.infinity_to_nan || !row.saturate ||
        block.granularity.kind != FP8Q_GRANULARITY_BLOCK ||
        block.granularity.block_rows != 1 ||
        block.granularity.block_cols != 128 || !block.compute_scale ||
        fixed.granularity.kind != FP8Q_GRANULARITY_TENSOR ||
        fixed.compute_scale || !fixed.infinity_to_nan || !fixed.saturate) {
        fail("layer-activation-options", "not the layer's quantize", NULL);
    }
    else {
        printf("ok layer-activation-options\n");
    }
}

/* fp8q_op_run on the GPU against fp8q_op_run on the CPU (csrc/core): a row
 * quantize of a strided x (2, 3, 4) (gathered below the call), then the
 * dequantize of its data and scale read with their first two axes swapped
 * (both gathered); the bits must agree. */
static void check_op_call(void)
{
    const char *test = "op-call-gathered";
    const int64_t shape[3] = {2, 3, 4}, strides[3] = {4, 8, 1};
    const int64_t c_strides[3] = {12, 4, 1};
    const int64_t scale_shape[3] = {2, 3, 1}, scale_strides[3] = {3, 1, 1};
    const int64_t swapped[3] = {3, 2, 4}, data_swapped[3] = {4, 12, 1};
    const int64_t result_strides[3] = {8, 4, 1};
    const int64_t scale_swapped[3] = {3, 2, 1}, scale_swap[3] = {1, 3, 1};
    float values[24], scales[2][6], results[2][24];
    unsigned char codes[2][24];
    void *memory[4]; /* x, codes, scale, result on the device */
    fp8q_quantize_options options;
    fp8q_view views[2][6]; /* [CPU, GPU] x, data, scale, swapped data,
                              swapped scale, result */
    fp8q_op_call call;
    fp8q_error error;
    int side, i, nonzero;

    fill_values(values);
    memset(&options, 0, sizeof options);
    options.granularity.kind = FP8Q_GRANULARITY_ROW;
    options.granularity.block_rows = 1;
    options.granularity.block_cols = 1;
    options.saturate = 1;
    options.compute_scale = 1;
    memory[0] = on_device(values, sizeof values);
    memory[1] = on_device(NULL, sizeof codes[0]);
    memory[2] = on_device(NULL, sizeof scales[0]);
    memory[3] = on_device(NULL, sizeof results[0]);
    if (memory[0] == NULL || memory[1] == NULL || memory[2] == NULL ||
        memory[3] == NULL) {
        return;
    }
    for (side = 0; side < 2; side++) {
        void *x = side == 0 ? (void *)values : memory[0];
        void *data = side == 0 ? (void *)codes[0] : memory[1];
        void *scale = side == 0 ? (void *)scales[0] : memory[2];
        void *result = side == 0 ? (void *)results[0] : memory[3];
        views[side][0] = view_of(x, FP8Q_FLOAT32, 3, shape, strides);
        views[side][1] =
            view_of(data, FP8Q_FLOAT8_E4M3FN, 3, shape, c_strides);
        views[side][2] =
            view_of(scale, FP8Q_FLOAT32, 3, scale_shape, scale_strides);
        views[side][3] =
            view_of(data, FP8Q_FLOAT8_E4M3FN, 3, swapped, data_swapped);
        views[side][4] =
            view_of(scale, FP8Q_FLOAT32, 3, scale_swapped, scale_swap);
        views[side][5] =
            view_of(result, FP8Q_FLOAT32, 3, swapped, result_strides);
        fp8q_error_clear(&error);
        fp8q_op_call_init(&call, FP8Q_OP_QUANTIZE, &views[side][0],
                          &views[side][1], NULL);
        call.device = side == 0 ? NULL : device;
        call.scale = &views[side][2];
        call.options = &options;
        if (fp8q_op_run(&call, &error) != FP8Q_OK) {
            fail(test, "the quantize failed", &error);
            return;
        }
        fp8q_op_call_init(&call, FP8Q_OP_DEQUANTIZE, &views[side][3],
                          &views[side][5], NULL);
        call.device = side == 0 ? NULL : device;
        call.scale = &views[side][4];
        call.granularity = &options.granularity;
        if (fp8q_op_run(&call, &error) != FP8Q_OK) {
            fail(test, "the dequantize failed", &error);
            return;
        }
    }
    to_host(codes[1], memory[1], sizeof codes[1]);
    to_host(scales[1], memory[2], sizeof scales[1]);
    to_host(results[1], memory[3], sizeof results[1]);
    for (i = 0, nonzero = 0; i < 24; i++) {
        nonzero += results[0][i] != 0.0f;
    }
    if (memcmp(codes[0], codes[1], sizeof codes[0]) != 0 ||
        memcmp(scales[0], scales[1], sizeof scales[0]) != 0) {
        fail(test, "the GPU's quantize differs from the CPU's", NULL);
    }
    else if (memcmp(results[0], results[1], sizeof results[0]) != 0) {
        fail(test, "the GPU's dequantize differs from the CPU's", NULL);
    }
    else if (nonzero != 23) { /* x holds one 0 */
        fail(test, "the dequantized values are not x's nonzeros", NULL);
    }
    else {
        printf("ok %s\n", test);
    }
}

int main(int argc, char **argv)
{
    /* x (4, 3) read as its transpose (3, 4): the transpose kernel. */
    const int64_t t_shape[2] = {3, 4}, t_strides[2] = {1, 3};
    /* (2, 3, 4) with its first two axes swapped: the gather kernel. */
    const int64_t p_shape[3] = {2, 3, 4}, p_strides[3] = {4, 8, 1};
    const int64_t c_strides[3] = {12, 4, 1};
    const int64_t s_strides[3] = {1, 8, 2};
    const int none[3] = {0, 0, 0};
    const int all[3] = {1, 1, 1};
    const int first[3] = {1, 0, 0};
    const int outer[3] = {1, 0, 1};
    const int start = open_device(argc, argv, 2, "cuda_ops KERNEL_FOLDER");

    if (start != 0) {
        return start;
    }
    check_cast("cast-transposed", t_shape, t_strides, 2);
    check_cast("cast-gathered", p_shape, p_strides, 3);
    check_cast("cast-contiguous", p_shape, c_strides, 3);
    check_cast_refusals();
    check_amax("amax-columns-in-place", first, c_strides);
    check_amax("amax-rows-gathered", outer, c_strides);
    check_amax("amax-whole-gathered", all, s_strides);
    check_amax("amax-none", none, s_strides);
    check_amax_finite();
    if (check_weight_only("weight-only-cuda-cores", 20, 24, 64, FP8Q_FLOAT32,
                          1, 0) != 1) {
        fail("weight-only-cuda-cores", "a split K of 64 values", NULL);
    }
    if (check_weight_only("weight-only-split-k", 16, 40, 3088, FP8Q_FLOAT16,
                          0, 0) <= 1) {
        fail("weight-only-split-k", "no split-K scratch planned", NULL);
    }
    /* 80 rows: launches of 64 rows (no split) and 16 (K split). */
    if (check_weight_only("weight-only-every-row-split", 80, 40, 3088,
                          FP8Q_FLOAT16, 1, 0) <= 1) {
        fail("weight-only-every-row-split", "no split-K scratch planned",
             NULL);
    }
    (void)check_weight_only("weight-only-short-scratch", 16, 40, 3088,
                            FP8Q_FLOAT16, 0, 1);
    /* The CUDA cores' split (the fake device: 4 multiprocessors x 8
     * blocks = 32): 1 float32 row, 40 weight rows in 10 blocks of 4 (3
     * whole copies fit), K 4 x 4096 + 16 in 3 splits (1 x 40 float32 sums
     * each). */
    if (check_weight_only("weight-only-cuda-cores-split", 1, 40, 16400,
                          FP8Q_FLOAT32, 0, 0) != 3 * 1 * 40 * sizeof(float)) {
        fail("weight-only-cuda-cores-split", "not 3 splits of K", NULL);
    }
    /* 20 rows: launches of 8, 8 and 4 rows, K 8192 in 2 splits each (one
     * block step a split at least); the scratch is the 8-row launches'. */
    if (check_weight_only("weight-only-cuda-cores-split-rows", 20, 40, 8192,
                          FP8Q_FLOAT32, 1, 0) != 2 * 8 * 40 * sizeof(float)) {
        fail("weight-only-cuda-cores-split-rows", "not 2 splits of K",
             NULL);
    }
    /* No split: 128 weight rows (32 blocks fill the fake device), 80 (20
     * blocks: fewer than 2 copies fit) and K 6144 (less than 2 block
     * steps). */
    if (check_weight_only("weight-only-cuda-cores-full", 1, 128, 16384,
                          FP8Q_FLOAT32, 0, 0) != 1 ||
        check_weight_only("weight-only-cuda-cores-one-copy", 1, 80, 16384,
                          FP8Q_FLOAT32, 0, 0) != 1 ||
        check_weight_only("weight-only-cuda-cores-short-k", 2, 40, 6144,
                          FP8Q_FLOAT32, 0, 0) != 1) {
        fail("weight-only-cuda-cores-full", "a split K where none helps",
             NULL);
    }
    (void)check_weight_only("weight-only-cuda-cores-short-scratch", 1, 40,
                            16400, FP8Q_FLOAT32, 0, 1);
    check_weight_only_declines();
    check_calib_max();
    check_calib_histogram();
    check_layer_activation_options();
    check_op_call();
    return failures != 0;
}
