/*
 * cuda_ops.c - csrc/cuda/ops.h on the fake CUDA driver (tests/
 * fake_cuda_driver.c, which runs the kernels' launch contracts on the
 * host): gathers of strided inputs (the gather and the transpose kernels),
 * the cast's scale addressing and its refusals, the amax's three
 * reductions and calibration's finite amax, each against an oracle
 * computed here on the host or by csrc/core's CPU cast.
 * tests/test_c_cuda_ops.py builds it with the fake driver and runs it:
 *
 *   cuda_ops KERNEL_FOLDER     (FP8Q_CUDA_DRIVER naming the fake driver)
 *
 * Prints "ok NAME" per test, or "FAIL NAME: why", and exits 1 on a failure.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/cast.h"
#include "cuda/driver.h"
#include "cuda/memory.h"
#include "cuda/ops.h"

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
    int i, j, k;

    fill_values(values);
    values[1 + 8 * 2 + 2 * 3] = (float)NAN;
    values[8 * 1 + 2 * 1] = (float)INFINITY;
    for (i = 0; i < 2; i++) {
        for (j = 0; j < 3; j++) {
            for (k = 0; k < 4; k++) {
                const float value = fabsf(values[i + j * 8 + k * 2]);
                if (value == value && value != (float)INFINITY &&
                    value > expected[j]) {
                    expected[j] = value;
                }
            }
        }
    }
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
    return failures != 0;
}
