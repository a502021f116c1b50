/*
 * harness.c - check bookkeeping, the random generator and main(): runs every
 * test, prints each failure, and ends with "N passed, N failed".
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/convert.h"
#include "harness.h"

/* ------------------------------------------------------------------------- */
/* Checks                                                                    */

static int current_test_failures;
static const char *current_test_name = "";

static int report(int passed, const char *file, int line, const char *text,
                  const char *detail)
{
    if (!passed) {
        current_test_failures++;
        if (current_test_failures > 20) {
            return passed; /* the first few say enough */
        }
        printf("  FAIL %s (%s:%d): %s%s%s\n", current_test_name, file, line,
               text, detail[0] != '\0' ? ": " : "", detail);
    }
    return passed;
}

int harness_check(int passed, const char *text, const char *file, int line)
{
    return report(passed, file, line, text, "");
}

int harness_check_int(int64_t actual, int64_t expected, const char *text,
                      const char *file, int line)
{
    char detail[128];
    snprintf(detail, sizeof detail, "got %" PRId64 ", expected %" PRId64,
             actual, expected);
    return report(actual == expected, file, line, text, detail);
}

int harness_check_bits(uint32_t actual, uint32_t expected, const char *text,
                       const char *file, int line)
{
    char detail[128];
    snprintf(detail, sizeof detail, "got 0x%" PRIX32 ", expected 0x%" PRIX32,
             actual, expected);
    return report(actual == expected, file, line, text, detail);
}

int harness_check_double(double actual, double expected, const char *text,
                         const char *file, int line)
{
    char detail[128];
    const int both_nan = actual != actual && expected != expected;
    snprintf(detail, sizeof detail, "got %.17g, expected %.17g", actual,
             expected);
    return report(both_nan || actual == expected, file, line, text, detail);
}

int harness_check_ok(fp8q_status status, const fp8q_error *error,
                     const char *text, const char *file, int line)
{
    char detail[FP8Q_ERROR_MESSAGE_SIZE + 64];
    snprintf(detail, sizeof detail, "status %d: %s", (int)status,
             status != FP8Q_OK ? error->message : "");
    return report(status == FP8Q_OK, file, line, text, detail);
}

int harness_check_error(fp8q_status status, const fp8q_error *error,
                        fp8q_status expected_status, const char *first,
                        const char *second, const char *third,
                        const char *text, const char *file, int line)
{
    const char *fragments[3];
    char detail[FP8Q_ERROR_MESSAGE_SIZE + 128];
    int passed = status == expected_status && error->status == status;
    int index;

    fragments[0] = first;
    fragments[1] = second;
    fragments[2] = third;
    for (index = 0; passed && index < 3; index++) {
        if (fragments[index] != NULL &&
            strstr(error->message, fragments[index]) == NULL) {
            passed = 0;
        }
    }
    snprintf(detail, sizeof detail,
             "status %d (expected %d), message \"%s\"", (int)status,
             (int)expected_status, status != FP8Q_OK ? error->message : "");
    return report(passed, file, line, text, detail);
}

/* ------------------------------------------------------------------------- */
/* Random numbers                                                            */

static uint64_t random_state;

void harness_seed(uint64_t seed)
{
    random_state = seed;
}

uint64_t harness_random(void)
{
    uint64_t mixed;
    random_state += 0x9E3779B97F4A7C15u;
    mixed = random_state;
    mixed = (mixed ^ (mixed >> 30)) * 0xBF58476D1CE4E5B9u;
    mixed = (mixed ^ (mixed >> 27)) * 0x94D049BB133111EBu;
    return mixed ^ (mixed >> 31);
}

uint64_t harness_random_below(uint64_t bound)
{
    return harness_random() % bound;
}

float harness_random_bits_float(void)
{
    const uint32_t bits = (uint32_t)(harness_random() >> 32);
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

float harness_random_float(float limit)
{
    const double unit = (double)(harness_random() >> 11) / 9007199254740992.0;
    return (float)((2.0 * unit - 1.0) * (double)limit);
}

/* ------------------------------------------------------------------------- */
/* main                                                                      */

static const harness_test tests[] = {
    {"aligned_alloc", test_aligned_alloc},
    {"fast_divide", test_fast_divide},
    {"parallel_for", test_parallel_for},
    {"parallel_for_nested", test_parallel_for_nested},
    {"atomics", test_atomics},
    {"once", test_once},
    {"mutex_create_once", test_mutex_create_once},
    {"pointer_table", test_pointer_table},
    {"library_open_and_symbols", test_library_open_and_symbols},
    {"library_open_by_path", test_library_open_by_path},
    {"library_open_errors", test_library_open_errors},
    {"cpu_features", test_cpu_features},
    {"cpu_paths", test_cpu_paths},
    {"number_text", test_number_text},
    {"messages_with_non_finite_values",
     test_messages_with_non_finite_values},
    {"dtype_names", test_dtype_names},
    {"finfo", test_finfo},
    {"codec_hand_values", test_codec_hand_values},
    {"codec_decode_by_product", test_codec_decode_by_product},
    {"codec_round_trips", test_codec_round_trips},
    {"codec_against_brute_force", test_codec_against_brute_force},
    {"float16_bfloat16_uint8", test_float16_bfloat16_uint8},
    {"view_layout", test_view_layout},
    {"broadcast", test_broadcast},
    {"broadcast_errors", test_broadcast_errors},
    {"for_each_row_visits", test_for_each_row_visits},
    {"for_each_row_coalescing", test_for_each_row_coalescing},
    {"for_each_row_axis_order", test_for_each_row_axis_order},
    {"for_each_row_parallel", test_for_each_row_parallel},
    {"thread_settings", test_thread_settings},
    {"view_checks_and_blocks", test_view_checks_and_blocks},
    {"for_each_unit_range", test_for_each_unit_range},
    {"view_empty_extents_never_overflow",
     test_view_empty_extents_never_overflow},
    {"view_self_overlap", test_view_self_overlap},
    {"view_reshape_shape", test_view_reshape_shape},
    {"view_reshape_longest_message", test_view_reshape_longest_message},
    {"view_recut_and_transpose", test_view_recut_and_transpose},
    {"view_fortran_contiguous", test_view_fortran_contiguous},
    {"view_overlaps_unsafely", test_view_overlaps_unsafely},
    {"view_drop_axes", test_view_drop_axes},
    {"view_bytes_and_buffer_requests", test_view_bytes_and_buffer_requests},
    {"view_same_itemsize_recut", test_view_same_itemsize_recut},
    {"dtype_from_type_char", test_dtype_from_type_char},
    {"dtype_numpy_conversion", test_dtype_numpy_conversion},
    {"view_init_byte_strided", test_view_init_byte_strided},
    {"shape_check_extents", test_shape_check_extents},
    {"view_alloc_contiguous", test_view_alloc_contiguous},
    {"dlpack_dtype_codes", test_dlpack_dtype_codes},
    {"dlpack_tensor_view", test_dlpack_tensor_view},
    {"dlpack_tensor_view_refusals", test_dlpack_tensor_view_refusals},
    {"dlpack_tensor_view_longest_message",
     test_dlpack_tensor_view_longest_message},
    {"dlpack_export_values", test_dlpack_export_values},
    {"dlpack_export_blocks", test_dlpack_export_blocks},
    {"dlpack_managed_view", test_dlpack_managed_view},
    {"dlpack_plan_export", test_dlpack_plan_export},
    {"dlpack_exchange_api_usable", test_dlpack_exchange_api_usable},
    {"dlpack_current_stream", test_dlpack_current_stream},
    {"device_names", test_device_names},
    {"cast_all_dtype_pairs", test_cast_all_dtype_pairs},
    {"cast_scaled", test_cast_scaled},
    {"cast_computed_nan", test_cast_computed_nan},
    {"cast_special_layouts", test_cast_special_layouts},
    {"cast_parallel_equals_serial", test_cast_parallel_equals_serial},
    {"cast_errors", test_cast_errors},
    {"block_cast", test_block_cast},
    {"fp8_decode_all_codes", test_fp8_decode_all_codes},
    {"cast_baseline_loops", test_cast_baseline_loops},
    {"amax_axes", test_amax_axes},
    {"amax_nan_and_inf", test_amax_nan_and_inf},
    {"amax_dtypes_and_strides", test_amax_dtypes_and_strides},
    {"amax_empty_and_scalar", test_amax_empty_and_scalar},
    {"amax_parallel_equals_serial", test_amax_parallel_equals_serial},
    {"block_amax", test_block_amax},
    {"amax_errors", test_amax_errors},
    {"amax_interrupt", test_amax_interrupt},
    {"amax_zero_strides", test_amax_zero_strides},
    {"amax_all", test_amax_all},
    {"scale_shape", test_scale_shape},
    {"scales_from_amax", test_scales_from_amax},
    {"quantize_granularities", test_quantize_granularities},
    {"quantize_round_trip", test_quantize_round_trip},
    {"quantize_given_scales", test_quantize_given_scales},
    {"quantize_empty_and_scalar", test_quantize_empty_and_scalar},
    {"quantize_errors", test_quantize_errors},
    {"quantize_activations_dynamic", test_quantize_activations_dynamic},
    {"quantize_activations_static", test_quantize_activations_static},
    {"fill_rows_nan", test_fill_rows_nan},
    {"amax_finite", test_amax_finite},
    {"histogram_float_rule", test_histogram_float_rule},
    {"histogram_counts", test_histogram_counts},
    {"histogram_merge_equals_one_pass", test_histogram_merge_equals_one_pass},
    {"histogram_zeros_nonfinite_and_checks",
     test_histogram_zeros_nonfinite_and_checks},
    {"histogram_thresholds", test_histogram_thresholds},
    {"amax_history", test_amax_history},
    {"calibrator_max", test_calibrator_max},
    {"calibrator_max_fold", test_calibrator_max_fold},
    {"calibrator_histogram", test_calibrator_histogram},
    {"calibrator_reconfigured_while_counting",
     test_calibrator_reconfigured_while_counting},
    {"scaled_mm_product", test_scaled_mm_product},
    {"scaled_mm_modes", test_scaled_mm_modes},
    {"scaled_mm_run", test_scaled_mm_run},
    {"weight_only_run", test_weight_only_run},
    {"norm_quantize", test_norm_quantize},
    {"norm_quantize_describe", test_norm_quantize_describe},
    {"scaled_mm_checks", test_scaled_mm_checks},
    {"layer_checks", test_layer_checks},
    {"output_checks", test_output_checks},
    {"flag_nonfinite_rows", test_flag_nonfinite_rows},
    {"operation_checks", test_operation_checks},
    {"op_checks", test_op_checks},
    {"layer_call_checks", test_layer_call_checks},
    {"scaled_mm_argument_checks", test_scaled_mm_argument_checks},
    {"stream_on_cpu_check", test_stream_on_cpu_check},
};

/* The seed when none is given: fixed, so that every run of a commit (CI's
 * included) checks the same cases; pass another (e.g. `$(date +%s)`) to
 * explore. */
#define DEFAULT_SEED 20261128u

/* Usage: fp8q_core_tests [seed] [name-substring] */
int main(int argc, char **argv)
{
    const size_t n_tests = sizeof tests / sizeof tests[0];
    const char *filter = argc > 2 ? argv[2] : NULL;
    uint64_t seed = DEFAULT_SEED;
    int passed = 0;
    int failed = 0;
    size_t index;

    if (argc > 1) {
        seed = (uint64_t)strtoull(argv[1], NULL, 10);
    }
    printf("fp8q core tests, seed %" PRIu64 ", stores on the %s loops\n",
           seed, fp8q_convert_uses_avx2() ? "AVX2" : "baseline");
    for (index = 0; index < n_tests; index++) {
        if (filter != NULL && strstr(tests[index].name, filter) == NULL) {
            continue;
        }
        current_test_name = tests[index].name;
        current_test_failures = 0;
        /* Each test gets its own stream, reproducible from the seed. */
        harness_seed(seed + index * 1000003u);
        tests[index].run();
        if (current_test_failures == 0) {
            passed++;
            printf("ok   %s\n", tests[index].name);
        }
        else {
            failed++;
            printf("FAIL %s (%d checks failed; seed %" PRIu64 ")\n",
                   tests[index].name, current_test_failures, seed);
        }
        fflush(stdout);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
