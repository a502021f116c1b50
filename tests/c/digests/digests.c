/*
 * digests.c - prints a 64-bit FNV-1a digest of the results of csrc/core's
 * operations on fixed inputs, one line per case, so that runs built by
 * different compilers and C runtimes (gcc/clang on glibc, MinGW-w64 on
 * msvcrt, zig on the UCRT under Wine) can be compared byte for byte
 * (.ci/run, step 7). The inputs are generated here, not read: every run sees
 * the same bits.
 *
 * Cases: every float16 and bfloat16 pattern cast to each FP8 format and
 * back; a million float32 values (every exponent, subnormals, zeros, NaN,
 * infinities) cast to each FP8 format, saturating and not; quantize with
 * row and block scales; amax per row; the CPU scaled_mm (product and
 * epilogue) on odd shapes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/amax.h"
#include "core/cast.h"
#include "core/quantize.h"
#include "core/scaled_mm.h"

static const fp8q_dtype fp8_formats[] = {
    FP8Q_FLOAT8_E4M3FN, FP8Q_FLOAT8_E5M2, FP8Q_FLOAT8_E4M3FNUZ,
    FP8Q_FLOAT8_E5M2FNUZ};
#define N_FP8 (sizeof fp8_formats / sizeof fp8_formats[0])

static int failures;

/* ------------------------------------------------------------------------- */
/* Digests and inputs                                                        */

static uint64_t fnv1a(const void *data, size_t size)
{
    const unsigned char *bytes = (const unsigned char *)data;
    uint64_t hash = 14695981039346656037u;
    size_t index;
    for (index = 0; index < size; index++) {
        hash = (hash ^ bytes[index]) * 1099511628211u;
    }
    return hash;
}

static void print_digest(const char *name, const char *detail,
                         const void *data, size_t size)
{
    printf("%-28s %-12s %016" PRIx64 "\n", name, detail, fnv1a(data, size));
}

/* xorshift64*: the same stream on every platform. */
static uint64_t random_state = 0x9E3779B97F4A7C15u;

static uint32_t random_bits(void)
{
    random_state ^= random_state >> 12;
    random_state ^= random_state << 25;
    random_state ^= random_state >> 27;
    return (uint32_t)((random_state * 2685821657736338717u) >> 32);
}

static void check(fp8q_status status, const fp8q_error *error,
                  const char *what)
{
    if (status != FP8Q_OK) {
        printf("FAILED %s: %s\n", what, error->message);
        failures++;
    }
}

static void *allocate(size_t size)
{
    void *memory = calloc(size > 0 ? size : 1, 1);
    if (memory == NULL) {
        printf("FAILED: out of memory\n");
        exit(1);
    }
    return memory;
}

static fp8q_view view_of(void *data, fp8q_dtype dtype, int ndim,
                         const int64_t *shape)
{
    fp8q_view view;
    fp8q_error error;
    check(fp8q_view_init_contiguous(&view, data, dtype, ndim, shape, &error),
          &error, "view");
    return view;
}

/* ------------------------------------------------------------------------- */
/* Cases                                                                     */

/* Casts `count` values of `source` to each FP8 format (saturating and
 * not) and back to float32; one digest per format and mode. */
static void cast_cases(const char *name, void *source, fp8q_dtype dtype,
                       int64_t count)
{
    unsigned char *codes = (unsigned char *)allocate((size_t)count);
    float *back = (float *)allocate((size_t)count * sizeof *back);
    const fp8q_view input = view_of(source, dtype, 1, &count);
    const fp8q_view coded_float = view_of(back, FP8Q_FLOAT32, 1, &count);
    fp8q_error error;
    size_t format;
    int saturate;

    for (format = 0; format < N_FP8; format++) {
        const fp8q_view coded =
            view_of(codes, fp8_formats[format], 1, &count);
        for (saturate = 0; saturate < 2; saturate++) {
            char detail[32];
            check(fp8q_cast(&input, &coded, NULL, FP8Q_SCALE_DIVIDE, saturate,
                            &error),
                  &error, name);
            check(fp8q_cast(&coded, &coded_float, NULL, FP8Q_SCALE_DIVIDE, 1,
                            &error),
                  &error, name);
            (void)snprintf(detail, sizeof detail, "%s%s",
                           fp8q_dtype_name(fp8_formats[format]),
                           saturate ? "/sat" : "");
            print_digest(name, detail, codes, (size_t)count);
            print_digest(name, "  decoded", back,
                         (size_t)count * sizeof *back);
        }
    }
    free(codes);
    free(back);
}

static void every_16_bit_pattern(void)
{
    const int64_t count = 65536;
    uint16_t *patterns = (uint16_t *)allocate((size_t)count * 2);
    int64_t index;
    for (index = 0; index < count; index++) {
        patterns[index] = (uint16_t)index;
    }
    cast_cases("cast float16 (all 65536)", patterns, FP8Q_FLOAT16, count);
    cast_cases("cast bfloat16 (all 65536)", patterns, FP8Q_BFLOAT16, count);
    free(patterns);
}

/* A million float32 values: random bit patterns (every exponent, NaN and
 * infinity among them) and random values in FP8's ranges. */
static float *million_floats(int64_t count)
{
    float *values = (float *)allocate((size_t)count * sizeof *values);
    int64_t index;
    for (index = 0; index < count; index++) {
        uint32_t bits = random_bits();
        if (index % 2 == 1) {
            /* Exponents around FP8's: 2^-20 to 2^17. */
            bits = (bits & 0x807FFFFFu) |
                   ((uint32_t)(107 + random_bits() % 38) << 23);
        }
        memcpy(&values[index], &bits, sizeof bits);
    }
    return values;
}

static void float32_cases(float *values, int64_t count)
{
    cast_cases("cast float32 (1M)", values, FP8Q_FLOAT32, count);
}

/* Quantize (row and 128 x 128 block scales) and amax per row of finite
 * values shaped (rows, columns). */
static void quantize_cases(const float *values, int64_t rows,
                           int64_t columns)
{
    const int64_t shape[2] = {rows, columns};
    const int64_t row_scale_shape[2] = {rows, 1};
    const int64_t block_scale_shape[2] = {(rows + 127) / 128,
                                          (columns + 127) / 128};
    float *finite = (float *)allocate((size_t)(rows * columns) * 4);
    unsigned char *codes = (unsigned char *)allocate((size_t)(rows * columns));
    float *scales = (float *)allocate((size_t)rows * sizeof *scales +
                                      (size_t)(block_scale_shape[0] *
                                               block_scale_shape[1]) * 4);
    fp8q_quantize_options options;
    fp8q_view source, destination, scale, amax;
    fp8q_error error;
    int64_t index;

    for (index = 0; index < rows * columns; index++) {
        const float value = values[index];
        finite[index] = value - value == 0.0f ? value : 0.0f;
    }
    source = view_of(finite, FP8Q_FLOAT32, 2, shape);
    destination = view_of(codes, FP8Q_FLOAT8_E4M3FN, 2, shape);
    memset(&options, 0, sizeof options);
    options.compute_scale = 1;
    options.saturate = 1;

    options.granularity.kind = FP8Q_GRANULARITY_ROW;
    scale = view_of(scales, FP8Q_FLOAT32, 2, row_scale_shape);
    check(fp8q_quantize(&source, &destination, &scale, &options, &error),
          &error, "quantize row");
    print_digest("quantize e4m3 row", "codes", codes, (size_t)(rows * columns));
    print_digest("quantize e4m3 row", "scales", scales, (size_t)rows * 4);

    options.granularity.kind = FP8Q_GRANULARITY_BLOCK;
    options.granularity.block_rows = 128;
    options.granularity.block_cols = 128;
    scale = view_of(scales, FP8Q_FLOAT32, 2, block_scale_shape);
    check(fp8q_quantize(&source, &destination, &scale, &options, &error),
          &error, "quantize block");
    print_digest("quantize e4m3 block", "codes", codes,
                 (size_t)(rows * columns));
    print_digest("quantize e4m3 block", "scales", scales,
                 (size_t)(block_scale_shape[0] * block_scale_shape[1]) * 4);

    amax = view_of(scales, FP8Q_FLOAT32, 2, row_scale_shape);
    check(fp8q_amax(&source, &amax, &error), &error, "amax");
    print_digest("amax per row", "", scales, (size_t)rows * 4);
    free(finite);
    free(codes);
    free(scales);
}

/* The CPU scaled_mm, tensorwise, on odd shapes: float32 a (m, k) times
 * e4m3 b (k, n), then the epilogue with scales and a bias. */
static void scaled_mm_cases(const float *values)
{
    static const int64_t shapes[][3] = {
        {1, 17, 3}, {5, 300, 7}, {9, 257, 45}, {13, 129, 300}, {33, 64, 31}};
    size_t case_index;

    for (case_index = 0; case_index < sizeof shapes / sizeof shapes[0];
         case_index++) {
        const int64_t m = shapes[case_index][0];
        const int64_t k = shapes[case_index][1];
        const int64_t n = shapes[case_index][2];
        const int64_t a_shape[2] = {m, k};
        const int64_t b_shape[2] = {k, n};
        const int64_t product_shape[2] = {m, n};
        const int64_t one = 1;
        float *a = (float *)allocate((size_t)(m * k) * 4);
        unsigned char *b = (unsigned char *)allocate((size_t)(k * n));
        float *product = (float *)allocate((size_t)(m * n) * 4);
        float *bias = (float *)allocate((size_t)n * 4);
        float scale_a = 0.375f;
        float scale_b = 1.0f / 48.0f;
        fp8q_view a_view, b_view, product_view, scale_a_view, scale_b_view;
        fp8q_view bias_view;
        fp8q_error error;
        char detail[32];
        int64_t index;

        for (index = 0; index < m * k; index++) {
            const float value = values[index * 2 + 1]; /* finite ones */
            a[index] = value - value == 0.0f ? value * 0x1p-8f : 0.0f;
        }
        for (index = 0; index < k * n; index++) {
            b[index] = (unsigned char)(random_bits() & 0xFF);
            if ((b[index] & 0x7F) == 0x7F) {
                b[index] = 0; /* no NaN code */
            }
        }
        for (index = 0; index < n; index++) {
            bias[index] = (float)index * 0.25f - 2.0f;
        }
        a_view = view_of(a, FP8Q_FLOAT32, 2, a_shape);
        /* b's columns contiguous (b = w.T of a row-major weight), the
         * layout of the CPU kernels. */
        b_view = view_of(b, FP8Q_FLOAT8_E4M3FN, 2, b_shape);
        b_view.strides[0] = 1;
        b_view.strides[1] = k;
        product_view = view_of(product, FP8Q_FLOAT32, 2, product_shape);
        scale_a_view = view_of(&scale_a, FP8Q_FLOAT32, 0, &one);
        scale_b_view = view_of(&scale_b, FP8Q_FLOAT32, 0, &one);
        bias_view = view_of(bias, FP8Q_FLOAT32, 1, &n);
        if (!fp8q_scaled_mm_has_kernel(m, k, &b_view)) {
            printf("FAILED scaled_mm: no CPU kernel for (%" PRId64
                   ", %" PRId64 ", %" PRId64 ")\n",
                   m, k, n);
            failures++;
        }
        else {
            check(fp8q_scaled_mm_product(&a_view, &b_view, &scale_b_view,
                                         FP8Q_SCALING_TENSORWISE,
                                         &product_view, &error),
                  &error, "scaled_mm product");
            check(fp8q_scaled_mm_epilogue(&product_view,
                                          FP8Q_SCALING_TENSORWISE,
                                          &scale_a_view, &scale_b_view,
                                          &bias_view, &error),
                  &error, "scaled_mm epilogue");
        }
        (void)snprintf(detail, sizeof detail, "%" PRId64 "x%" PRId64
                       "x%" PRId64, m, k, n);
        print_digest("scaled_mm e4m3 tensorwise", detail, product,
                     (size_t)(m * n) * 4);
        free(a);
        free(b);
        free(product);
        free(bias);
    }
}

int main(void)
{
    const int64_t count = 1 << 20;
    float *values;

    every_16_bit_pattern();
    values = million_floats(count);
    float32_cases(values, count);
    quantize_cases(values, 1000, 1048);
    scaled_mm_cases(values);
    free(values);
    return failures == 0 ? 0 : 1;
}
