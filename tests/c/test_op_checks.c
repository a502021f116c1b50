/*
 * test_op_checks.c - the argument checks of quantize, dequantize and cast
 * (core/op_checks.h) and the layer call's checks of given activations, the
 * weight scales' granularity and the weight-only refusal
 * (core/layer_checks.h: also stream= and fp8q.linear's x_scale dtype) and
 * scaled_mm's result dtype and stream= checks
 * (core/scaled_mm_checks.h) that moved below the binding: each passes a valid
 * argument and refuses each invalid one with the status and the exact
 * message the Python error shows.
 */
#include <stdint.h>
#include <string.h>

#include "core/layer_checks.h"
#include "core/op_checks.h"
#include "core/scaled_mm_checks.h"
#include "harness.h"
#include "helpers.h"

void test_op_checks(void)
{
    static float values[64];
    const int64_t shape_44[2] = {4, 4};
    const int64_t shape_4[1] = {4}, stride_2[1] = {2};
    fp8q_view x = make_view(values, FP8Q_FLOAT32, 2, shape_44, NULL);
    fp8q_view other = make_view(values + 32, FP8Q_FLOAT32, 2, shape_44, NULL);
    fp8q_view part = make_view(values + 2, FP8Q_FLOAT32, 2, shape_44, NULL);
    fp8q_view scale = make_view(values + 48, FP8Q_FLOAT32, 1, shape_4, NULL);
    fp8q_view strided = make_view(values + 33, FP8Q_FLOAT32, 1, shape_4,
                                  stride_2);
    fp8q_error error;

    CHECK_OK(fp8q_check_dequantize_data(FP8Q_FLOAT8_E5M2, &error), &error);
    CHECK_ERROR(fp8q_check_dequantize_data(FP8Q_FLOAT16, &error), &error,
                FP8Q_ERROR_TYPE,
                "dequantize: data must have an FP8 dtype, got float16", NULL,
                NULL);
    CHECK(strcmp(error.message, "dequantize: data must have an FP8 dtype, "
                                "got float16") == 0);
    CHECK_OK(fp8q_check_quantize_transpose(0, 3, &error), &error);
    CHECK_OK(fp8q_check_quantize_transpose(1, 2, &error), &error);
    CHECK_ERROR(fp8q_check_quantize_transpose(1, 3, &error), &error,
                FP8Q_ERROR_VALUE,
                "quantize: transpose=True needs a 2-D x (M, N), got 3 "
                "dimensions",
                NULL, NULL);
    CHECK_OK(fp8q_check_cast_scale(0, FP8Q_FLOAT16, &error), &error);
    CHECK_OK(fp8q_check_cast_scale(1, FP8Q_FLOAT8_E4M3FN, &error), &error);
    CHECK_ERROR(fp8q_check_cast_scale(1, FP8Q_BFLOAT16, &error), &error,
                FP8Q_ERROR_VALUE,
                "cast: scale= is only allowed when dtype= is an FP8 format "
                "(it divides before rounding to FP8), got dtype=bfloat16; to "
                "multiply FP8 data by its scale use fp8q.dequantize",
                NULL, NULL);
    /* out the very same elements as x: allowed; disjoint: allowed. */
    CHECK_OK(fp8q_check_cast_overlap(&x, NULL, &x, &error), &error);
    CHECK_OK(fp8q_check_cast_overlap(&x, &scale, &other, &error), &error);
    CHECK_ERROR(fp8q_check_cast_overlap(&x, NULL, &part, &error), &error,
                FP8Q_ERROR_VALUE,
                "cast: out= must not overlap x in memory (except as the very "
                "same elements of the same itemsize), got a partially "
                "overlapping tensor",
                NULL, NULL);
    /* A strided scale interleaved with out's elements. */
    CHECK_ERROR(fp8q_check_cast_overlap(&x, &strided, &other, &error),
                &error, FP8Q_ERROR_VALUE,
                "cast: out= must not overlap scale= in memory", NULL, NULL);
    CHECK(strcmp(error.message,
                 "cast: out= must not overlap scale= in memory") == 0);
}

void test_layer_call_checks(void)
{
    static uint8_t codes[256 * 256];
    static float scales[4];
    const int64_t weight_shape[2] = {200, 256}, row_shape[2] = {200, 1};
    const int64_t block_shape[2] = {2, 2}, wrong_shape[2] = {2, 3};
    const int64_t one[1] = {1};
    fp8q_view weight =
        make_view(codes, FP8Q_FLOAT8_E4M3FN, 2, weight_shape, NULL);
    fp8q_view scale = make_view(scales, FP8Q_FLOAT32, 2, block_shape, NULL);
    fp8q_granularity granularity;
    fp8q_error error;

    CHECK_OK(fp8q_layer_check_given_allowed("L", 0, FP8Q_GRANULARITY_ROW,
                                            &error),
             &error);
    CHECK_ERROR(fp8q_layer_check_given_allowed("L", 1, FP8Q_GRANULARITY_ROW,
                                               &error),
                &error, FP8Q_ERROR_VALUE,
                "L: quantized activations need dynamic per-token scales (no "
                "input_scale, \"row\" or \"tensor\" weight scales)",
                NULL, NULL);
    CHECK_ERROR(fp8q_layer_check_given_allowed(
                    "L", 0, FP8Q_GRANULARITY_BLOCK, &error),
                &error, FP8Q_ERROR_VALUE, "L: quantized activations", NULL,
                NULL);
    /* "block": 128x128 blocks, (ceil(200/128), ceil(256/128)) scales. */
    CHECK_OK(fp8q_layer_weight_granularity("L", FP8Q_GRANULARITY_BLOCK,
                                           &weight, &scale, &granularity,
                                           &error),
             &error);
    CHECK(granularity.kind == FP8Q_GRANULARITY_BLOCK);
    CHECK_INT(granularity.block_rows, 128);
    CHECK_INT(granularity.block_cols, 128);
    scale = make_view(scales, FP8Q_FLOAT32, 2, row_shape, NULL);
    CHECK_OK(fp8q_layer_weight_granularity("L", FP8Q_GRANULARITY_ROW, &weight,
                                           &scale, &granularity, &error),
             &error);
    CHECK(granularity.kind == FP8Q_GRANULARITY_ROW);
    CHECK_INT(granularity.block_rows, 0);
    CHECK_INT(granularity.block_cols, 0);
    scale = make_view(scales, FP8Q_FLOAT32, 2, wrong_shape, NULL);
    CHECK_ERROR(fp8q_layer_weight_granularity("L", FP8Q_GRANULARITY_BLOCK,
                                              &weight, &scale, &granularity,
                                              &error),
                &error, FP8Q_ERROR_VALUE, "L: weight_scale: ", "(2, 3)",
                "(2, 2)");
    CHECK(strncmp(error.message, "L: weight_scale: ", 17) == 0);
    scale = make_view(scales, FP8Q_FLOAT16, 1, one, NULL);
    CHECK_ERROR(fp8q_layer_weight_granularity("L", FP8Q_GRANULARITY_TENSOR,
                                              &weight, &scale, &granularity,
                                              &error),
                &error, FP8Q_ERROR_TYPE, "L: weight_scale: ", NULL, NULL);
    CHECK_OK(fp8q_layer_check_stream("L", 0, 1, 1, &error), &error);
    CHECK_OK(fp8q_layer_check_stream("L", 1, 0, 0, &error), &error);
    CHECK_ERROR(fp8q_layer_check_stream("L", 1, 1, 0, &error), &error,
                FP8Q_ERROR_VALUE,
                "L: stream must be None for torch tensors: the call runs on "
                "torch's current stream (choose it with "
                "torch.cuda.stream(...))",
                NULL, NULL);
    CHECK_ERROR(fp8q_layer_check_stream("L", 1, 0, 1, &error), &error,
                FP8Q_ERROR_VALUE,
                "L: stream= applies to CUDA tensors; this call runs on the "
                "CPU (pass stream=None)",
                NULL, NULL);
    CHECK_OK(fp8q_layer_check_x_scale("linear", FP8Q_FLOAT32, &error),
             &error);
    CHECK_ERROR(fp8q_layer_check_x_scale("linear", FP8Q_BFLOAT16, &error),
                &error, FP8Q_ERROR_TYPE,
                "linear: x's scales must be float32, got bfloat16", NULL,
                NULL);
    CHECK_ERROR(fp8q_layer_refuse_weight_only("linear", 40, &error), &error,
                FP8Q_ERROR_VALUE,
                "linear: weight_only=True on a GPU needs in_features (K = 40) "
                "a multiple of 16 and 16-byte aligned x and w; use "
                "weight_only=False (x quantized) for this shape",
                NULL, NULL);
}

void test_scaled_mm_argument_checks(void)
{
    fp8q_error error;

    CHECK_OK(fp8q_scaled_mm_check_out_dtype(1, FP8Q_FLOAT16, &error),
             &error);
    CHECK_OK(fp8q_scaled_mm_check_out_dtype(0, FP8Q_FLOAT8_E4M3FN, &error),
             &error);
    CHECK_ERROR(fp8q_scaled_mm_check_out_dtype(1, FP8Q_FLOAT8_E5M2, &error),
                &error, FP8Q_ERROR_TYPE,
                "scaled_mm: out_dtype must be bfloat16, float16, float32 or "
                "float8_e4m3fn, got float8_e5m2",
                NULL, NULL);
    CHECK_ERROR(fp8q_scaled_mm_check_out_dtype(0, FP8Q_UINT8, &error),
                &error, FP8Q_ERROR_TYPE,
                "scaled_mm: out= must have dtype bfloat16, float16, float32 "
                "or float8_e4m3fn, got uint8",
                NULL, NULL);
}

void test_stream_on_cpu_check(void)
{
    fp8q_error error;

    CHECK_OK(fp8q_check_stream_on_cpu("cast", 0, 1, &error), &error);
    CHECK_OK(fp8q_check_stream_on_cpu("cast", 1, 0, &error), &error);
    CHECK_ERROR(fp8q_check_stream_on_cpu("scaled_mm", 1, 1, &error), &error,
                FP8Q_ERROR_VALUE,
                "scaled_mm: stream= applies to CUDA tensors; this call runs "
                "on the CPU (pass stream=None)",
                NULL, NULL);
    CHECK(strcmp(error.message, "scaled_mm: stream= applies to CUDA "
                                "tensors; this call runs on the CPU (pass "
                                "stream=None)") == 0);
}
