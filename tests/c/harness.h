/*
 * harness.h - a tiny self-contained test harness for the C unit tests of
 * csrc/core and csrc/platform: checks, a seeded random generator, and the
 * list of test functions that main.c runs.
 */
#ifndef FP8Q_TESTS_HARNESS_H
#define FP8Q_TESTS_HARNESS_H

#include <stdint.h>

#include "core/status.h"

/* ------------------------------------------------------------------------- */
/* Checks: record a failure (with its location) and let the test go on.     */

#define CHECK(condition) \
    harness_check((condition) != 0, #condition, __FILE__, __LINE__)
#define CHECK_INT(actual, expected) \
    harness_check_int((int64_t)(actual), (int64_t)(expected), #actual, \
                      __FILE__, __LINE__)
#define CHECK_BITS(actual, expected) \
    harness_check_bits((uint32_t)(actual), (uint32_t)(expected), #actual, \
                       __FILE__, __LINE__)
#define CHECK_DOUBLE(actual, expected) \
    harness_check_double((double)(actual), (double)(expected), #actual, \
                         __FILE__, __LINE__)
#define CHECK_OK(status, error) \
    harness_check_ok((status), (error), #status, __FILE__, __LINE__)
/* The call failed with `expected_status` and its message contains every
 * one of the (up to three, NULL-padded) fragments. */
#define CHECK_ERROR(status, error, expected_status, first, second, third) \
    harness_check_error((status), (error), (expected_status), (first), \
                        (second), (third), #status, __FILE__, __LINE__)

int harness_check(int passed, const char *text, const char *file, int line);
int harness_check_int(int64_t actual, int64_t expected, const char *text,
                      const char *file, int line);
int harness_check_bits(uint32_t actual, uint32_t expected, const char *text,
                       const char *file, int line);
/* Exact comparison; two NaNs are equal. */
int harness_check_double(double actual, double expected, const char *text,
                         const char *file, int line);
int harness_check_ok(fp8q_status status, const fp8q_error *error,
                     const char *text, const char *file, int line);
int harness_check_error(fp8q_status status, const fp8q_error *error,
                        fp8q_status expected_status, const char *first,
                        const char *second, const char *third,
                        const char *text, const char *file, int line);

/* ------------------------------------------------------------------------- */
/* Random numbers (splitmix64; the seed is printed by main)                 */

void harness_seed(uint64_t seed);
uint64_t harness_random(void);
/* Uniform in [0, bound). */
uint64_t harness_random_below(uint64_t bound);
/* A float32 whose bits are uniformly random. */
float harness_random_bits_float(void);
/* A float32 in (-limit, limit). */
float harness_random_float(float limit);

/* ------------------------------------------------------------------------- */
/* The tests                                                                 */

typedef struct harness_test {
    const char *name;
    void (*run)(void);
} harness_test;

/* test_platform.c */
void test_aligned_alloc(void);
void test_fast_divide(void);
void test_parallel_for(void);
void test_parallel_for_nested(void);
void test_atomics(void);
void test_once(void);
void test_mutex_create_once(void);
void test_pointer_table(void);
void test_library_open_and_symbols(void);
void test_library_open_by_path(void);
void test_library_open_errors(void);
void test_cpu_features(void);

/* test_cpu_paths.c */
void test_cpu_paths(void);

/* test_status.c */
void test_number_text(void);
void test_messages_with_non_finite_values(void);

/* test_codec.c */
void test_dtype_names(void);
void test_finfo(void);
void test_codec_hand_values(void);
void test_codec_round_trips(void);
void test_codec_against_brute_force(void);
void test_codec_decode_by_product(void);
void test_float16_bfloat16_uint8(void);

/* test_view.c */
void test_view_layout(void);
void test_broadcast(void);
void test_broadcast_errors(void);
void test_for_each_row_visits(void);
void test_for_each_row_coalescing(void);
void test_for_each_row_axis_order(void);
void test_for_each_row_parallel(void);
void test_thread_settings(void);
void test_view_checks_and_blocks(void);
void test_for_each_unit_range(void);
void test_view_empty_extents_never_overflow(void);
void test_view_self_overlap(void);

/* test_view_layout.c */
void test_view_reshape_shape(void);
void test_view_reshape_longest_message(void);
void test_view_recut_and_transpose(void);
void test_view_fortran_contiguous(void);
void test_view_overlaps_unsafely(void);
void test_view_drop_axes(void);
void test_view_bytes_and_buffer_requests(void);
void test_view_same_itemsize_recut(void);
void test_dtype_from_type_char(void);
void test_dtype_numpy_conversion(void);
void test_view_init_byte_strided(void);
void test_shape_check_extents(void);
void test_view_alloc_contiguous(void);

/* test_dlpack.c */
void test_dlpack_dtype_codes(void);
void test_dlpack_tensor_view(void);
void test_dlpack_tensor_view_refusals(void);
void test_dlpack_tensor_view_longest_message(void);
void test_dlpack_export_values(void);
void test_dlpack_export_blocks(void);
void test_dlpack_managed_view(void);
void test_dlpack_plan_export(void);
void test_dlpack_exchange_api_usable(void);
void test_dlpack_current_stream(void);
void test_device_names(void);

/* test_cast.c */
void test_cast_all_dtype_pairs(void);
void test_cast_scaled(void);
void test_cast_computed_nan(void);
void test_cast_special_layouts(void);
void test_cast_parallel_equals_serial(void);
void test_cast_errors(void);
void test_block_cast(void);
void test_fp8_decode_all_codes(void);
void test_cast_baseline_loops(void);

/* test_amax.c */
void test_amax_axes(void);
void test_amax_nan_and_inf(void);
void test_amax_dtypes_and_strides(void);
void test_amax_empty_and_scalar(void);
void test_amax_parallel_equals_serial(void);
void test_block_amax(void);
void test_amax_errors(void);
void test_amax_interrupt(void);
void test_amax_zero_strides(void);
void test_amax_all(void);

/* test_quantize.c */
void test_scale_shape(void);
void test_scales_from_amax(void);
void test_quantize_granularities(void);
void test_quantize_round_trip(void);
void test_quantize_given_scales(void);
void test_quantize_empty_and_scalar(void);
void test_quantize_errors(void);

/* test_activation.c */
void test_quantize_activations_dynamic(void);
void test_quantize_activations_static(void);
void test_fill_rows_nan(void);

/* test_calibration.c */
void test_amax_finite(void);
void test_histogram_float_rule(void);
void test_histogram_counts(void);
void test_histogram_merge_equals_one_pass(void);
void test_histogram_zeros_nonfinite_and_checks(void);
void test_histogram_thresholds(void);
void test_amax_history(void);

/* test_calibrator.c */
void test_calibrator_max(void);
void test_calibrator_max_fold(void);
void test_calibrator_histogram(void);
void test_calibrator_reconfigured_while_counting(void);

/* test_scaled_mm.c */
void test_scaled_mm_product(void);
void test_scaled_mm_modes(void);

/* test_scaled_mm_run.c */
void test_scaled_mm_run(void);
void test_weight_only_run(void);
void test_norm_quantize(void);
void test_norm_quantize_describe(void);

/* test_argument_checks.c */
void test_scaled_mm_checks(void);
void test_layer_checks(void);
void test_output_checks(void);
void test_flag_nonfinite_rows(void);
void test_operation_checks(void);

/* test_op_checks.c */
void test_op_checks(void);
void test_layer_call_checks(void);
void test_scaled_mm_argument_checks(void);
void test_stream_on_cpu_check(void);

#endif /* FP8Q_TESTS_HARNESS_H */
