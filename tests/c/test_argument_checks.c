/*
 * test_argument_checks.c - the argument checks that moved below the
 * binding: scaled_mm's (core/scaled_mm_checks.h), the layer call's
 * (core/layer_checks.h), an out= argument's (core/output_check.h) and
 * core/activation.h's non-finite row flags, quantize's dtype= and scale=
 * shape refusals (core/quantize.h) and norm_quantize's tensor arguments'
 * (core/norm_quantize.h). Each check passes a valid
 * argument and refuses each kind of invalid one with the status and the
 * message fragments the Python errors show.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/activation.h"
#include "core/layer_checks.h"
#include "core/norm_quantize.h"
#include "core/output_check.h"
#include "core/quantize.h"
#include "core/scaled_mm_checks.h"
#include "harness.h"
#include "helpers.h"

void test_scaled_mm_checks(void)
{
    static uint8_t codes[64];
    const int64_t shape_45[2] = {4, 5}, shape_43[2] = {4, 3};
    const int64_t shape_53[2] = {5, 3}, shape_5[1] = {5}, shape_3[1] = {3};
    const int64_t shape_2[1] = {2}, shape_11[2] = {1, 1};
    const fp8q_place cpu = {FP8Q_DEVICE_CPU, 0}, cuda = {FP8Q_DEVICE_CUDA, 0};
    const fp8q_place other = {FP8Q_DEVICE_CUDA, 1};
    fp8q_view a = make_view(codes, FP8Q_FLOAT8_E4M3FN, 2, shape_45, NULL);
    fp8q_view b = make_view(codes, FP8Q_FLOAT8_E5M2, 2, shape_53, NULL);
    fp8q_view view;
    fp8q_error error;

    CHECK(fp8q_scaled_mm_out_dtype_ok(FP8Q_BFLOAT16));
    CHECK(fp8q_scaled_mm_out_dtype_ok(FP8Q_FLOAT8_E4M3FN));
    CHECK(!fp8q_scaled_mm_out_dtype_ok(FP8Q_FLOAT8_E5M2));
    CHECK(!fp8q_scaled_mm_out_dtype_ok(FP8Q_UINT8));
    CHECK_OK(fp8q_scaled_mm_check_matrix(&a, "a", &error), &error);
    view = make_view(codes, FP8Q_FLOAT32, 2, shape_45, NULL);
    CHECK_ERROR(fp8q_scaled_mm_check_matrix(&view, "a", &error), &error,
                FP8Q_ERROR_TYPE, "scaled_mm: a must be float8_e4m3fn or "
                "float8_e5m2 (quantize it first", "got float32", NULL);
    view = make_view(codes, FP8Q_FLOAT8_E4M3FN, 1, shape_5, NULL);
    CHECK_ERROR(fp8q_scaled_mm_check_matrix(&view, "b", &error), &error,
                FP8Q_ERROR_VALUE,
                "scaled_mm: b must be a matrix (2 dimensions), got shape "
                "(5,)", NULL, NULL);
    CHECK_OK(fp8q_scaled_mm_check_pair(&a, &b, &error), &error);
    view = make_view(codes, FP8Q_FLOAT8_E5M2, 2, shape_45, NULL);
    CHECK_ERROR(fp8q_scaled_mm_check_pair(&view, &b, &error), &error,
                FP8Q_ERROR_TYPE, "a and b cannot both be float8_e5m2", NULL,
                NULL);
    view = make_view(codes, FP8Q_FLOAT8_E4M3FN, 2, shape_43, NULL);
    CHECK_ERROR(fp8q_scaled_mm_check_pair(&a, &view, &error), &error,
                FP8Q_ERROR_VALUE,
                "scaled_mm: a is (4, 5) and b is (4, 3): a's columns must "
                "equal b's rows", NULL, NULL);
    view = make_view(codes, FP8Q_FLOAT16, 1, shape_3, NULL);
    CHECK_OK(fp8q_scaled_mm_check_bias(&view, 3, &error), &error);
    CHECK_ERROR(fp8q_scaled_mm_check_bias(&view, 4, &error), &error,
                FP8Q_ERROR_VALUE, "a vector of N = 4 values", "got shape (3,)",
                NULL);
    view.dtype = FP8Q_UINT8;
    CHECK_ERROR(fp8q_scaled_mm_check_bias(&view, 3, &error), &error,
                FP8Q_ERROR_TYPE, "bias must be float32, float16 or bfloat16, "
                "got uint8", NULL, NULL);
    CHECK_ERROR(fp8q_scaled_mm_check_scale_result(NULL, FP8Q_BFLOAT16,
                                                  &error),
                &error, FP8Q_ERROR_VALUE, "scale_result applies to an FP8 "
                "result", "but the result is bfloat16", NULL);
    view = make_view(codes, FP8Q_FLOAT32, 1, shape_2, NULL);
    CHECK_ERROR(fp8q_scaled_mm_check_scale_result(&view, FP8Q_FLOAT8_E4M3FN,
                                                  &error),
                &error, FP8Q_ERROR_VALUE, "scale_result must be one float32 "
                "value, got 2 values", NULL, NULL);
    view = make_view(codes, FP8Q_FLOAT32, 2, shape_11, NULL);
    CHECK_OK(fp8q_scaled_mm_check_scale_result(&view, FP8Q_FLOAT8_E4M3FN,
                                               &error),
             &error);
    CHECK_OK(fp8q_scaled_mm_check_amax_out(&view, 0, &error), &error);
    CHECK_ERROR(fp8q_scaled_mm_check_amax_out(&view, 1, &error), &error,
                FP8Q_ERROR_VALUE, FP8Q_SCALED_MM_AMAX_OUT_RULE,
                "got a read-only float32 tensor of shape (1, 1)", NULL);
    view = make_view(codes, FP8Q_FLOAT16, 1, shape_2, NULL);
    CHECK_ERROR(fp8q_scaled_mm_check_amax_out(&view, 0, &error), &error,
                FP8Q_ERROR_VALUE, "got a float16 tensor of shape (2,)", NULL,
                NULL);
    CHECK_OK(fp8q_scaled_mm_check_place("bias", cpu, cuda, 1, &error),
             &error);
    CHECK_OK(fp8q_scaled_mm_check_place("b", cuda, cuda, 0, &error), &error);
    CHECK_ERROR(fp8q_scaled_mm_check_place("b", cpu, cuda, 0, &error),
                &error, FP8Q_ERROR_VALUE, "scaled_mm: b is on cpu, but a is "
                "on cuda:0; b must be on cuda:0 (tensor.to(...))", NULL, NULL);
    CHECK_ERROR(fp8q_scaled_mm_check_place("bias", cuda, cpu, 1, &error),
                &error, FP8Q_ERROR_VALUE, "bias is on cuda:0, but a is on "
                "cpu; bias must be on cpu (tensor.to(...))", NULL, NULL);
    CHECK_ERROR(fp8q_scaled_mm_check_place("scale_a", other, cuda, 1,
                                           &error),
                &error, FP8Q_ERROR_VALUE, "must be on cuda:0 or the CPU (",
                NULL, NULL);
}

void test_layer_checks(void)
{
    static uint8_t storage[256];
    uint8_t *bytes = storage + (16 - (uintptr_t)storage % 16) % 16;
    const int64_t shape_25[2] = {2, 5}, shape_34[2] = {3, 4};
    const int64_t shape_3[1] = {3}, shape_1[1] = {1}, shape_20[2] = {2, 0};
    const int64_t strided[2] = {8, 1};
    fp8q_place cpu = {FP8Q_DEVICE_CPU, 0}, cuda = {FP8Q_DEVICE_CUDA, 1};
    fp8q_view view = make_view(bytes, FP8Q_BFLOAT16, 2, shape_25, NULL);
    fp8q_error error;

    CHECK_OK(fp8q_layer_check_x("L", &view, 0, &error), &error);
    CHECK_ERROR(fp8q_layer_check_x("L", &view, 1, &error), &error,
                FP8Q_ERROR_TYPE, "L: x must be float8_e4m3fn or float8_e5m2 "
                "codes, got bfloat16", NULL, NULL);
    view = make_view(bytes, FP8Q_FLOAT32, 0, shape_1, NULL);
    CHECK_ERROR(fp8q_layer_check_x("L", &view, 0, &error), &error,
                FP8Q_ERROR_VALUE, "L: x must have at least one axis", NULL,
                NULL);
    CHECK_OK(fp8q_layer_check_place("L", cuda, cuda, "bias", &error),
             &error);
    CHECK_ERROR(fp8q_layer_check_place("L", cuda, cpu, "bias", &error),
                &error, FP8Q_ERROR_VALUE, "L: x is on cuda:1 but the layer's "
                "bias is on cpu; move one of them (model.to(\"cuda\"))", NULL,
                NULL);
    view = make_view(bytes, FP8Q_FLOAT8_E5M2, 2, shape_34, NULL);
    CHECK_OK(fp8q_layer_check_weight("L", &view, &error), &error);
    view = make_view(bytes, FP8Q_FLOAT8_E4M3FNUZ, 1, shape_3, NULL);
    CHECK_ERROR(fp8q_layer_check_weight("L", &view, &error), &error,
                FP8Q_ERROR_TYPE, "got 1-D float8_e4m3fnuz", NULL, NULL);
    view = make_view(bytes, FP8Q_FLOAT32, 1, shape_3, NULL);
    CHECK_OK(fp8q_layer_check_bias("L", &view, 3, &error), &error);
    CHECK_ERROR(fp8q_layer_check_bias("L", &view, 4, &error), &error,
                FP8Q_ERROR_VALUE, "L: bias must hold out_features = 4 values",
                NULL, NULL);
    view.dtype = FP8Q_UINT8;
    CHECK_ERROR(fp8q_layer_check_bias("L", &view, 3, &error), &error,
                FP8Q_ERROR_TYPE, "got uint8", NULL, NULL);
    view = make_view(bytes, FP8Q_FLOAT32, 1, shape_1, NULL);
    CHECK_OK(fp8q_layer_check_input_scale("L", &view, FP8Q_GRANULARITY_ROW,
                                          &error),
             &error);
    CHECK_ERROR(fp8q_layer_check_input_scale(
                    "L", &view, FP8Q_GRANULARITY_BLOCK, &error),
                &error, FP8Q_ERROR_VALUE, "a static input_scale needs", NULL,
                NULL);
    view = make_view(bytes, FP8Q_FLOAT32, 1, shape_3, NULL);
    CHECK_ERROR(fp8q_layer_check_input_scale("L", &view,
                                             FP8Q_GRANULARITY_ROW, &error),
                &error, FP8Q_ERROR_VALUE, "input_scale must be one float32",
                NULL, NULL);
    view = make_view(bytes, FP8Q_FLOAT32, 2, shape_25, NULL);
    CHECK_OK(fp8q_layer_check_features("L", &view, 5, &error), &error);
    CHECK_ERROR(fp8q_layer_check_features("L", &view, 4, &error), &error,
                FP8Q_ERROR_VALUE, "L: x has shape (2, 5), but the layer has "
                "4 input features", NULL, NULL);
    view = make_view(bytes, FP8Q_FLOAT32, 2, shape_20, NULL);
    CHECK_ERROR(fp8q_layer_check_features("L", &view, 0, &error), &error,
                FP8Q_ERROR_VALUE, "L: in_features is 0", NULL, NULL);
    /* Given activations: codes (2, 5) at 16-byte aligned `bytes + 64`. */
    view = make_view(bytes + 64, FP8Q_FLOAT8_E4M3FN, 2, shape_25, NULL);
    CHECK_OK(fp8q_layer_check_given("L", "codes", &view, FP8Q_FLOAT8_E4M3FN,
                                    2, 5, 16, &error),
             &error);
    CHECK_ERROR(fp8q_layer_check_given("L", "codes", &view, FP8Q_FLOAT32, 2,
                                       5, 16, &error),
                &error, FP8Q_ERROR_VALUE, "L: quantized codes must be float32, "
                "got float8_e4m3fn", NULL, NULL);
    CHECK_ERROR(fp8q_layer_check_given("L", "codes", &view,
                                       FP8Q_FLOAT8_E4M3FN, 5, 2, 16, &error),
                &error, FP8Q_ERROR_VALUE, "x's 5 rows of 2 values", "got 10 "
                "values with a last axis of 5", NULL);
    view = make_view(bytes + 64, FP8Q_FLOAT8_E4M3FN, 2, shape_25, strided);
    CHECK_ERROR(fp8q_layer_check_given("L", "codes", &view,
                                       FP8Q_FLOAT8_E4M3FN, 2, 5, 16, &error),
                &error, FP8Q_ERROR_VALUE, "must be C-contiguous", NULL, NULL);
    view = make_view(bytes + 65, FP8Q_FLOAT8_E4M3FN, 2, shape_25, NULL);
    CHECK_ERROR(fp8q_layer_check_given("L", "codes", &view,
                                       FP8Q_FLOAT8_E4M3FN, 2, 5, 16, &error),
                &error, FP8Q_ERROR_VALUE, "must start on a 16-byte boundary",
                NULL, NULL);
}

void test_output_checks(void)
{
    static uint8_t bytes[64];
    const int64_t shape_23[2] = {2, 3}, shape_32[2] = {3, 2};
    const int64_t shape_1[1] = {1}, aliased[2] = {0, 1};
    fp8q_place cpu = {FP8Q_DEVICE_CPU, 0}, cuda = {FP8Q_DEVICE_CUDA, 0};
    fp8q_view out = make_view(bytes, FP8Q_FLOAT16, 2, shape_23, NULL);
    fp8q_error error;

    CHECK_OK(fp8q_check_output(&out, cpu, 0, "f", "out", FP8Q_FLOAT16, cpu,
                               "x's shape", 2, shape_23, &error),
             &error);
    CHECK_ERROR(fp8q_check_output(&out, cpu, 0, "f", "out", FP8Q_FLOAT32,
                                  cpu, "x's shape", 2, shape_23, &error),
                &error, FP8Q_ERROR_TYPE, "f: out= must have dtype float32, got "
                "a tensor of dtype float16", NULL, NULL);
    CHECK_ERROR(fp8q_check_output(&out, cpu, 0, "f", "out", FP8Q_FLOAT16,
                                  cuda, "x's shape", 2, shape_23, &error),
                &error, FP8Q_ERROR_VALUE, "f: out= must be on the inputs' "
                "device, cuda:0; got a tensor on cpu", NULL, NULL);
    CHECK_ERROR(fp8q_check_output(&out, cpu, 0, "f", "out", FP8Q_FLOAT16,
                                  cpu, "x's shape", 2, shape_32, &error),
                &error, FP8Q_ERROR_VALUE, "f: out= must have x's shape (3, 2), "
                "got shape (2, 3)", NULL, NULL);
    CHECK_ERROR(fp8q_check_output(&out, cpu, 1, "f", "out", FP8Q_FLOAT16,
                                  cpu, "x's shape", 2, shape_23, &error),
                &error, FP8Q_ERROR_VALUE, "f: out= must be writable, got a "
                "read-only tensor", NULL, NULL);
    out = make_view(bytes, FP8Q_FLOAT16, 2, shape_23, aliased);
    CHECK_ERROR(fp8q_check_output(&out, cpu, 0, "f", "out", FP8Q_FLOAT16,
                                  cpu, "x's shape", 2, shape_23, &error),
                &error, FP8Q_ERROR_VALUE, "f: out", NULL, NULL);
    out = make_view(bytes, FP8Q_FLOAT32, 1, shape_1, NULL);
    CHECK_OK(fp8q_check_amax_output(&out, cuda, 0, cuda, &error), &error);
    CHECK_ERROR(fp8q_check_amax_output(&out, cpu, 0, cuda, &error), &error,
                FP8Q_ERROR_VALUE, "cast: amax_out= must be a writable float32 "
                "tensor of one element on cuda:0 (x's device), got a tensor "
                "on another device", NULL, NULL);
    CHECK_ERROR(fp8q_check_amax_output(&out, cpu, 1, cpu, &error), &error,
                FP8Q_ERROR_VALUE, "got a read-only tensor", NULL, NULL);
    out.dtype = FP8Q_FLOAT16;
    CHECK_ERROR(fp8q_check_amax_output(&out, cpu, 0, cpu, &error), &error,
                FP8Q_ERROR_VALUE, "got another dtype", NULL, NULL);
    out = make_view(bytes, FP8Q_FLOAT32, 2, shape_23, NULL);
    CHECK_ERROR(fp8q_check_amax_output(&out, cpu, 0, cpu, &error), &error,
                FP8Q_ERROR_VALUE, "got another number of elements", NULL,
                NULL);
}

void test_flag_nonfinite_rows(void)
{
    float values[8] = {1.0f, 2.0f, 0.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f};
    const int64_t shape[2] = {4, 2};
    const fp8q_view view = make_view(values, FP8Q_FLOAT32, 2, shape, NULL);
    uint8_t rows[4];

    memset(rows, 0xAA, sizeof rows);
    CHECK_INT(fp8q_flag_nonfinite_rows(&view, rows), 0);
    CHECK(rows[0] == 0 && rows[1] == 0 && rows[2] == 0 && rows[3] == 0);
    values[3] = NAN;
    values[6] = -INFINITY;
    CHECK_INT(fp8q_flag_nonfinite_rows(&view, rows), 2);
    CHECK(rows[0] == 0 && rows[1] == 1 && rows[2] == 0 && rows[3] == 1);
    CHECK(values[6] == -INFINITY); /* flags only: nothing reset */
}

void test_operation_checks(void)
{
    static float values[16];
    const int64_t shape_43[2] = {4, 3}, shape_41[2] = {4, 1};
    const int64_t shape_2[1] = {2}, strided[2] = {6, 2};
    const fp8q_place cpu = {FP8Q_DEVICE_CPU, 0}, cuda = {FP8Q_DEVICE_CUDA, 0};
    const fp8q_view x = make_view(values, FP8Q_FLOAT32, 2, shape_43, NULL);
    const fp8q_view given = make_view(values, FP8Q_FLOAT32, 1, shape_2, NULL);
    fp8q_view view;
    fp8q_error error;

    CHECK_OK(fp8q_check_quantize_dtype(0, FP8Q_FLOAT8_E5M2FNUZ, &error),
             &error);
    CHECK_OK(fp8q_check_quantize_dtype(1, FP8Q_BFLOAT16, &error), &error);
    CHECK_ERROR(fp8q_check_quantize_dtype(0, FP8Q_FLOAT16, &error), &error,
                FP8Q_ERROR_VALUE, "quantize: dtype= must be an FP8 format",
                "got float16", NULL);
    CHECK_ERROR(fp8q_check_quantize_dtype(1, FP8Q_FLOAT8_E4M3FN, &error),
                &error, FP8Q_ERROR_VALUE, "dequantize: dtype= must be "
                "float32, float16 or bfloat16, got float8_e4m3fn", NULL,
                NULL);
    CHECK_ERROR(fp8q_refuse_scale_shape("'row'", &x, 2, shape_41, &given,
                                        &error),
                &error, FP8Q_ERROR_VALUE, "quantize: scale= must have shape "
                "(4, 1) (the scale shape of granularity='row' for x of shape "
                "(4, 3)) or broadcast to it, got shape (2,)", NULL, NULL);
    CHECK_OK(fp8q_norm_quantize_check_tensor("weight", &given, cuda, 1, &cuda,
                                             0, &error),
             &error);
    CHECK_ERROR(fp8q_norm_quantize_check_tensor("weight", &given, cpu, 0,
                                                &cuda, 0, &error),
                &error, FP8Q_ERROR_VALUE, "norm_quantize: weight is not on "
                "x's device", NULL, NULL);
    view = make_view(values, FP8Q_FLOAT32, 2, shape_43, strided);
    CHECK_ERROR(fp8q_norm_quantize_check_tensor("x", &view, cpu, 0, NULL, 0,
                                                &error),
                &error, FP8Q_ERROR_VALUE, "norm_quantize: x must be "
                "C-contiguous", NULL, NULL);
    CHECK_ERROR(fp8q_norm_quantize_check_tensor("codes", &x, cpu, 1, &cpu, 1,
                                                &error),
                &error, FP8Q_ERROR_VALUE, "norm_quantize: codes is an output "
                "and must be writable, got a read-only tensor", NULL, NULL);
}
