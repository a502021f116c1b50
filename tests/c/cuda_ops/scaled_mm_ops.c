/*
 * scaled_mm_ops.c - csrc/cuda/scaled_mm_ops.h on the fake CUDA driver and
 * the fake cuBLASLt (tests/fake_cuda_driver.c runs the kernels' launch
 * contracts on the host, tests/fake_cublaslt.c the matmul, refusing what
 * the real library refuses): each GPU path of scaled_mm, the path it
 * recorded, and its result against a double-precision oracle computed here
 * from the codes (integer-valued codes and power-of-two scales: every path
 * gives the exact result, so the comparison is of bits). The refusals and
 * failures of the fakes (FAKE_CUBLASLT_*, FAKE_CUDA_CC) are set per run by
 * tests/test_c_scaled_mm_ops.py, which builds and runs it:
 *
 *   scaled_mm_ops KERNEL_FOLDER SCENARIO
 *
 * SCENARIO: paths (sm_90, nothing refused), refused-fp8 (cuBLASLt refuses
 * FP8 products), no-scale-modes (it refuses outer-vector and block scale
 * modes), failing (every cuBLASLt matmul fails with status 13), no-tensor-
 * cores (sm_86). "paths" also runs the W8A8 layer forward
 * (cuda/fp8_layer.h) on the GPU and the CPU against an oracle. Prints "ok NAME" per check, or "FAIL NAME: why", and exits
 * 1 on a failure.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/float_codec.h"
#include "cuda/cublaslt.h"
#include "cuda/driver.h"
#include "cuda/fp8_layer.h"
#include "cuda/matmul_padding.h"
#include "cuda/memory.h"
#include "cuda/scaled_mm_ops.h"
#include "cuda/scaled_mm_paths.h"

#include "device_helpers.h"

/* The largest operands of the checks. */
#define MAX_M 4
#define MAX_K 256
#define MAX_N 256

static const fp8q_cublaslt *library;

static fp8q_view matrix(void *data, fp8q_dtype dtype, int64_t rows,
                        int64_t cols, int64_t row_stride, int64_t col_stride)
{
    fp8q_view view;

    memset(&view, 0, sizeof view);
    view.data = data;
    view.dtype = dtype;
    view.ndim = 2;
    view.shape[0] = rows;
    view.shape[1] = cols;
    view.strides[0] = row_stride;
    view.strides[1] = col_stride;
    return view;
}

/* What one check multiplies and how its operands are laid out. */
typedef struct spec {
    const char *scenario; /* the run it belongs to (argv[2])            */
    const char *name;
    int64_t m, k, n;
    fp8q_scaling mode;
    int a_transposed;  /* a given as the transpose of a (K, M) array    */
    int b_contiguous;  /* b given C-contiguous (K, N), not as w.T        */
    int bias;          /* 0 none, 1 float32 with stride 2, 2 bfloat16    */
    int fp8_out;       /* float8_e4m3fn out, scale_result 2, amax_out   */
    int scale_b_weight_layout; /* blockwise: weight_scale.T, in place   */
    int padding_off;           /* run with zero-padded operands off     */
    fp8q_cuda_mm_path path;    /* the path it must take and record      */
} spec;

/* The codes: small integers, so every sum is exact in float32 and
 * bfloat16 operands hold them exactly. */
static float a_value(int64_t row, int64_t col)
{
    return (float)((row * 5 + col * 3) % 7 - 3);
}

static float w_value(int64_t row, int64_t col)
{
    return (float)((row * 3 + col * 7) % 5 - 2);
}

/* Powers of two. */
static float scale_a_value(const spec *s, int64_t row, int64_t block)
{
    return s->mode == FP8Q_SCALING_TENSORWISE
               ? 0.5f
               : ldexpf(1.0f, (int)((row + block) % 3) - 1);
}

static float scale_b_value(const spec *s, int64_t col, int64_t block)
{
    return s->mode == FP8Q_SCALING_TENSORWISE
               ? 4.0f
               : ldexpf(1.0f, (int)((col + 2 * block) % 4) - 2);
}

static float bias_value(int64_t col)
{
    return (float)(col % 9) * 0.25f - 1.0f;
}

/* The call of a @ b into out in `mode`, nothing else set. */
static fp8q_cuda_scaled_mm_call call_of(const fp8q_view *a, const fp8q_view *b,
                                        const fp8q_view *scale_a,
                                        const fp8q_view *scale_b,
                                        const fp8q_view *out,
                                        fp8q_scaling mode)
{
    fp8q_cuda_scaled_mm_call call;

    memset(&call, 0, sizeof call);
    call.a = a;
    call.b = b;
    call.scale_a = scale_a;
    call.scale_b = scale_b;
    call.out = out;
    call.mode = mode;
    return call;
}

/* Runs `s` and compares out (and amax) with the oracle; returns the
 * status of fp8q_cuda_scaled_mm, its error in *error. */
static fp8q_status run_spec(const spec *s, fp8q_error *error)
{
    static unsigned char a_codes[MAX_M * MAX_K], w_codes[MAX_N * MAX_K];
    static float scale_a[MAX_M * 2], scale_b[MAX_N * 2];
    static float bias[MAX_N * 2], got[MAX_M * MAX_N];
    static uint16_t bias16[MAX_N];
    static unsigned char got_codes[MAX_M * MAX_N];
    static double expected[MAX_M * MAX_N];
    const int64_t m = s->m, k = s->k, n = s->n;
    const int64_t k_blocks = (k + 127) / 128, n_blocks = (n + 127) / 128;
    const float poison = -777.0f;
    fp8q_view a, b, view_a, view_b, bias_view, out;
    fp8q_cuda_scaled_mm_call call;
    fp8q_scaling mode;
    fp8q_status status;
    double amax = 0.0;
    uint32_t amax_bits = 0x7fc00000u;
    void *out_memory, *amax_memory;
    int64_t i, j, p;

    for (i = 0; i < m; i++) {
        for (p = 0; p < k; p++) {
            const unsigned char code = fp8q_encode_e4m3fn(a_value(i, p), 1);
            /* a (M, K) row-major, or its transpose's (K, M) array */
            a_codes[s->a_transposed ? p * m + i : i * k + p] = code;
        }
    }
    for (j = 0; j < n; j++) {
        for (p = 0; p < k; p++) {
            const unsigned char code = fp8q_encode_e4m3fn(w_value(j, p), 1);
            /* w (N, K) row-major, or b = w.T (K, N) row-major */
            w_codes[s->b_contiguous ? p * n + j : j * k + p] = code;
        }
    }
    memset(&call, 0, sizeof call);
    a = s->a_transposed
            ? matrix(on_device(a_codes, (size_t)(m * k)), FP8Q_FLOAT8_E4M3FN,
                     m, k, 1, m)
            : matrix(on_device(a_codes, (size_t)(m * k)), FP8Q_FLOAT8_E4M3FN,
                     m, k, k, 1);
    b = s->b_contiguous
            ? matrix(on_device(w_codes, (size_t)(n * k)), FP8Q_FLOAT8_E4M3FN,
                     k, n, n, 1)
            : matrix(on_device(w_codes, (size_t)(n * k)), FP8Q_FLOAT8_E4M3FN,
                     k, n, 1, k);
    if (s->mode == FP8Q_SCALING_TENSORWISE) {
        scale_a[0] = scale_a_value(s, 0, 0);
        scale_b[0] = scale_b_value(s, 0, 0);
        view_a = matrix(on_device(scale_a, 4), FP8Q_FLOAT32, 1, 1, 1, 1);
        view_b = matrix(on_device(scale_b, 4), FP8Q_FLOAT32, 1, 1, 1, 1);
    }
    else if (s->mode == FP8Q_SCALING_ROWWISE) {
        for (i = 0; i < m; i++) {
            scale_a[i] = scale_a_value(s, i, 0);
        }
        for (j = 0; j < n; j++) {
            scale_b[j] = scale_b_value(s, j, 0);
        }
        view_a = matrix(on_device(scale_a, (size_t)m * 4), FP8Q_FLOAT32, m,
                        1, 1, 1);
        view_b = matrix(on_device(scale_b, (size_t)n * 4), FP8Q_FLOAT32, 1,
                        n, n, 1);
    }
    else {
        /* scale_a (M, K/128); scale_b (K/128, N/128), given as the
         * transpose of the weight's C-contiguous (N/128, K/128) scales or
         * C-contiguous itself. */
        for (i = 0; i < m; i++) {
            for (p = 0; p < k_blocks; p++) {
                scale_a[i * k_blocks + p] = scale_a_value(s, i, p);
            }
        }
        for (j = 0; j < n_blocks; j++) {
            for (p = 0; p < k_blocks; p++) {
                scale_b[s->scale_b_weight_layout ? j * k_blocks + p
                                                 : p * n_blocks + j] =
                    scale_b_value(s, j, p);
            }
        }
        view_a = matrix(on_device(scale_a, (size_t)(m * k_blocks) * 4),
                        FP8Q_FLOAT32, m, k_blocks, k_blocks, 1);
        view_b = s->scale_b_weight_layout
                     ? matrix(on_device(scale_b, (size_t)(n_blocks * k_blocks) * 4),
                              FP8Q_FLOAT32, k_blocks, n_blocks, 1, k_blocks)
                     : matrix(on_device(scale_b, (size_t)(n_blocks * k_blocks) * 4),
                              FP8Q_FLOAT32, k_blocks, n_blocks, n_blocks, 1);
    }
    for (j = 0; j < n; j++) {
        bias[2 * j] = bias_value(j);
        bias[2 * j + 1] = poison;
        bias16[j] = fp8q_encode_bfloat16(bias_value(j));
    }
    if (s->bias == 1) {
        bias_view = matrix(on_device(bias, (size_t)n * 8), FP8Q_FLOAT32, 1, n,
                           2 * n, 2);
        bias_view.ndim = 1;
        bias_view.shape[0] = n;
        bias_view.strides[0] = 2;
        call.bias = &bias_view;
    }
    else if (s->bias == 2) {
        bias_view = matrix(on_device(bias16, (size_t)n * 2), FP8Q_BFLOAT16, 1,
                           n, n, 1);
        bias_view.ndim = 1;
        bias_view.shape[0] = n;
        bias_view.strides[0] = 1;
        call.bias = &bias_view;
    }
    for (i = 0; i < m * n; i++) {
        got[i] = poison;
    }
    out_memory = on_device(got, (size_t)(m * n) * 4);
    amax_memory = on_device(&amax_bits, 4);
    if (a.data == NULL || b.data == NULL || out_memory == NULL ||
        amax_memory == NULL) {
        return FP8Q_ERROR_MEMORY;
    }
    out = matrix(out_memory,
                 s->fp8_out ? FP8Q_FLOAT8_E4M3FN : FP8Q_FLOAT32, m, n, n, 1);
    fp8q_error_clear(error);
    if (fp8q_scaled_mm_mode(m, k, n, &view_a, &view_b, &mode, error) !=
            FP8Q_OK ||
        mode != s->mode) {
        fail(s->name, "not the scaling mode meant", error);
        return FP8Q_ERROR_VALUE;
    }
    {
        const fp8q_view *bias_given = call.bias;
        call = call_of(&a, &b, &view_a, &view_b, &out, mode);
        call.bias = bias_given;
    }
    if (s->fp8_out) {
        call.has_scale_result = 1;
        call.scale_result = 2.0f;
        call.amax_out = amax_memory;
    }
    status = fp8q_cuda_scaled_mm(library, device, &call, NULL, error);
    if (status != FP8Q_OK) {
        return status;
    }

    /* The oracle: (a * scale_a) @ (w * scale_b).T + bias, in double. */
    for (i = 0; i < m; i++) {
        for (j = 0; j < n; j++) {
            double sum = 0.0;
            for (p = 0; p < k; p++) {
                /* blockwise: scale_b[p / 128, j / 128] */
                const int64_t scale_column =
                    s->mode == FP8Q_SCALING_BLOCKWISE ? j / 128 : j;
                sum += (double)a_value(i, p) * scale_a_value(s, i, p / 128) *
                       (double)w_value(j, p) *
                       scale_b_value(s, scale_column, p / 128);
            }
            expected[i * n + j] = sum + (s->bias != 0 ? bias_value(j) : 0.0);
            if (fabs(expected[i * n + j]) > amax) {
                amax = fabs(expected[i * n + j]);
            }
        }
    }
    if (s->fp8_out) {
        to_host(got_codes, out_memory, (size_t)(m * n));
        to_host(&amax_bits, amax_memory, 4);
        for (i = 0; i < m * n; i++) {
            if (got_codes[i] !=
                fp8q_encode_e4m3fn((float)(expected[i] / 2.0), 1)) {
                fail(s->name, "an FP8 code is not the oracle's", NULL);
                return FP8Q_OK;
            }
        }
        if (fp8q_bits_to_float(amax_bits) != (float)amax) {
            fail(s->name, "amax_out is not the oracle's", NULL);
            return FP8Q_OK;
        }
    }
    else {
        to_host(got, out_memory, (size_t)(m * n) * 4);
        for (i = 0; i < m * n; i++) {
            if (fp8q_float_to_bits(got[i]) !=
                fp8q_float_to_bits((float)expected[i])) {
                char why[128];
                (void)snprintf(why, sizeof why,
                               "out[%lld] = %g, the oracle's %g",
                               (long long)i, (double)got[i], expected[i]);
                fail(s->name, why, NULL);
                return FP8Q_OK;
            }
        }
    }
    if (fp8q_cuda_mm_last_path(device->index, s->mode) != (int)s->path) {
        char why[256];
        const int taken = fp8q_cuda_mm_last_path(device->index, s->mode);
        (void)snprintf(why, sizeof why, "took %s, not %s",
                       taken < 0 ? "none"
                                 : fp8q_cuda_mm_path_name(
                                       (fp8q_cuda_mm_path)taken),
                       fp8q_cuda_mm_path_name(s->path));
        fail(s->name, why, NULL);
        return FP8Q_OK;
    }
    printf("ok %s\n", s->name);
    return FP8Q_OK;
}

/* Runs the specs of `scenario`; a failure of the call is a failure of
 * the check, but in the scenario "failing", where it must be a CUDA error
 * whose message names the call and its path. */
static void check(const char *scenario, const spec *specs, size_t count)
{
    static const char failing_prefix[] =
        "scaled_mm (tensorwise scaling, path: one cuBLASLt call): ";
    const int failing = strcmp(scenario, "failing") == 0;
    size_t index;
    fp8q_error error;

    for (index = 0; index < count; index++) {
        const spec *s = &specs[index];
        fp8q_status status;
        if (strcmp(s->scenario, scenario) != 0) {
            continue;
        }
        (void)fp8q_cuda_scaled_mm_set_padding(!s->padding_off);
        status = run_spec(s, &error);
        (void)fp8q_cuda_scaled_mm_set_padding(1);
        if (!failing && status != FP8Q_OK) {
            fail(s->name, "fp8q_cuda_scaled_mm failed", &error);
        }
        else if (failing && (status != FP8Q_ERROR_CUDA ||
                             strncmp(error.message, failing_prefix,
                                     sizeof failing_prefix - 1) != 0)) {
            fail(s->name, "not a CUDA error naming the path", &error);
        }
        else if (failing) {
            printf("ok %s\n", s->name);
        }
    }
}

/* out= not C-contiguous: refused with the binding's ValueError text;
 * an empty product only zeroes amax_out, with no cuBLASLt. */
static void check_refusal_and_empty(void)
{
    static const char expected[] =
        "scaled_mm: on CUDA, out= must be C-contiguous, got strides (1, 4) "
        "(pass a C-contiguous out, or none)";
    unsigned char codes[64];
    float scale = 1.0f;
    uint32_t amax_bits = 0x7fc00000u;
    void *memory = on_device(codes, sizeof codes);
    void *scale_memory = on_device(&scale, 4);
    void *amax_memory = on_device(&amax_bits, 4);
    fp8q_view a, b, scale_view, out;
    fp8q_cuda_scaled_mm_call call;
    fp8q_error error;
    fp8q_status status;

    if (memory == NULL || scale_memory == NULL || amax_memory == NULL) {
        return;
    }
    memset(codes, 0x38, sizeof codes); /* 1.0 in float8_e4m3fn */
    a = matrix(memory, FP8Q_FLOAT8_E4M3FN, 4, 16, 16, 1);
    b = matrix(memory, FP8Q_FLOAT8_E4M3FN, 16, 4, 1, 16);
    scale_view = matrix(scale_memory, FP8Q_FLOAT32, 1, 1, 1, 1);
    out = matrix(memory, FP8Q_FLOAT32, 4, 4, 1, 4);
    call = call_of(&a, &b, &scale_view, &scale_view, &out,
                   FP8Q_SCALING_TENSORWISE);
    fp8q_error_clear(&error);
    status = fp8q_cuda_scaled_mm(library, device, &call, NULL, &error);
    if (status != FP8Q_ERROR_VALUE || strcmp(error.message, expected) != 0 ||
        fp8q_cuda_scaled_mm_uses_cublaslt(&call)) {
        fail("out-not-contiguous", "not refused as the binding did", &error);
    }
    else {
        printf("ok out-not-contiguous\n");
    }

    a.shape[0] = 0;
    out = matrix(memory, FP8Q_FLOAT32, 0, 4, 4, 1);
    call.amax_out = amax_memory;
    fp8q_error_clear(&error);
    status = fp8q_cuda_scaled_mm(NULL, device, &call, NULL, &error);
    to_host(&amax_bits, amax_memory, 4);
    if (status != FP8Q_OK || amax_bits != 0 ||
        fp8q_cuda_scaled_mm_uses_cublaslt(&call)) {
        fail("empty", "amax_out not zeroed without cuBLASLt", &error);
    }
    else {
        printf("ok empty\n");
    }
}

/* cuda/fp8_layer.h: the W8A8 layer forward on the GPU against the same
 * call on the CPU (device NULL: csrc/core) and a double oracle, for each
 * weight granularity and a static input scale, every result's bits. x's
 * 128-blocks hold small integers and 448, each block times its own power
 * of two (1/2 to 4, different in every row and block), so each dynamic
 * activation scale differs and is exact, the codes are exact and every sum
 * is exact: a scale ignored, inverted or applied to the wrong row or block
 * changes the result. The static input scale, 2, saturates x's 4 * 448
 * values at 448 codes (the oracle clamps them), which no dynamic scale
 * does. The weight scales are powers of two. The codes and scales come
 * from the forward's own scratch block on each device. */
static void check_layer_forward(void)
{
    enum { M = 3, K = 256, N = 130, K_BLOCKS = 2, N_BLOCKS = 2 };
    static const char *const names[4] = {"layer-row", "layer-tensor",
                                         "layer-block", "layer-static"};
    static float x[M * K], weight_scale[N], bias[N];
    static float out_cpu[M * N], out_gpu[M * N];
    static unsigned char weight[N * K], scratch[4 * M * K + 4096];
    static const float factors[4] = {0.5f, 1.0f, 2.0f, 4.0f};
    const float static_scale = 2.0f;
    int variant;
    int64_t i, j, p;

    for (i = 0; i < M; i++) {
        for (p = 0; p < K; p++) {
            x[i * K + p] = (p % 128 == 5 ? 448.0f : a_value(i, p)) *
                           factors[(i + 2 * (p / 128)) % 4];
        }
    }
    for (j = 0; j < N; j++) {
        for (p = 0; p < K; p++) {
            weight[j * K + p] = fp8q_encode_e4m3fn(w_value(j, p), 1);
        }
        weight_scale[j] = (float)(1 << (j % 3)) / 4.0f;
        bias[j] = bias_value(j);
    }
    for (variant = 0; variant < 4; variant++) {
        const int block = variant == 2;
        fp8q_view rows, w, w_scale, bias_view, out, input_scale;
        fp8q_fp8_layer_call call;
        fp8q_error error;
        fp8q_status status;
        int64_t bytes;
        void *memory[5];
        int on_gpu, failed = 0;

        for (on_gpu = 0; on_gpu < 2 && !failed; on_gpu++) {
            float *out_host = on_gpu ? out_gpu : out_cpu;
            for (i = 0; i < M * N; i++) {
                out_host[i] = -777.0f;
            }
            memory[0] = on_gpu ? on_device(x, sizeof x) : x;
            memory[1] = on_gpu ? on_device(weight, sizeof weight) : weight;
            memory[2] = on_gpu ? on_device(weight_scale, sizeof weight_scale)
                               : weight_scale;
            memory[3] = on_gpu ? on_device(bias, sizeof bias) : bias;
            memory[4] = on_gpu ? on_device(out_host, sizeof out_gpu)
                               : out_host;
            rows = matrix(memory[0], FP8Q_FLOAT32, M, K, K, 1);
            w = matrix(memory[1], FP8Q_FLOAT8_E4M3FN, N, K, K, 1);
            w_scale = variant == 1 ? matrix(memory[2], FP8Q_FLOAT32, 1, 1, 1, 1)
                      : block ? matrix(memory[2], FP8Q_FLOAT32, N_BLOCKS,
                                       K_BLOCKS, K_BLOCKS, 1)
                              : matrix(memory[2], FP8Q_FLOAT32, N, 1, 1, 1);
            bias_view = matrix(memory[3], FP8Q_FLOAT32, 1, N, N, 1);
            bias_view.ndim = 1;
            bias_view.shape[0] = N;
            bias_view.strides[0] = 1;
            out = matrix(memory[4], FP8Q_FLOAT32, M, N, N, 1);
            input_scale =
                matrix(on_gpu ? on_device(&static_scale, 4)
                              : (void *)&static_scale,
                       FP8Q_FLOAT32, 1, 1, 1, 1);
            memset(&call, 0, sizeof call);
            call.device = on_gpu ? device : NULL;
            call.library = library;
            call.granularity = variant == 1 ? FP8Q_GRANULARITY_TENSOR
                               : block      ? FP8Q_GRANULARITY_BLOCK
                                            : FP8Q_GRANULARITY_ROW;
            call.weight = &w;
            call.weight_scale = &w_scale;
            call.bias = &bias_view;
            call.rows = &rows;
            call.input_scale = variant == 3 ? &input_scale : NULL;
            call.out = &out;
            bytes = fp8q_fp8_layer_scratch_bytes(&call);
            if (bytes > (int64_t)sizeof scratch) {
                fail(names[variant], "scratch larger than planned", NULL);
                return;
            }
            fp8q_error_clear(&error);
            status = fp8q_fp8_layer_forward(
                &call, on_gpu ? on_device(NULL, (size_t)bytes) : scratch,
                &error);
            if (status != FP8Q_OK) {
                fail(names[variant], on_gpu ? "GPU" : "CPU", &error);
                failed = 1;
            }
            else if (on_gpu) {
                to_host(out_gpu, memory[4], sizeof out_gpu);
            }
        }
        for (i = 0; i < M && !failed; i++) {
            for (j = 0; j < N && !failed; j++) {
                double sum = 0.0;
                const double scale =
                    variant == 1 ? weight_scale[0]
                    : block      ? 0.0
                                 : weight_scale[j];
                for (p = 0; p < K; p++) {
                    /* What the FP8 codes hold: x itself, or x clamped to
                     * the static scale's +-448 codes. */
                    const double held =
                        variant == 3
                            ? fmax(-448.0, fmin(448.0, x[i * K + p] /
                                                           static_scale)) *
                                  static_scale
                            : (double)x[i * K + p];
                    sum += held * w_value(j, p) *
                           (block ? weight_scale[(j / 128) * K_BLOCKS +
                                                 p / 128]
                                  : scale);
                }
                sum += bias[j];
                if (fp8q_float_to_bits(out_cpu[i * N + j]) !=
                        fp8q_float_to_bits((float)sum) ||
                    fp8q_float_to_bits(out_gpu[i * N + j]) !=
                        fp8q_float_to_bits((float)sum)) {
                    char why[160];
                    (void)snprintf(why, sizeof why,
                                   "out[%lld, %lld]: CPU %g, GPU %g, the "
                                   "oracle's %g",
                                   (long long)i, (long long)j,
                                   (double)out_cpu[i * N + j],
                                   (double)out_gpu[i * N + j], sum);
                    fail(names[variant], why, NULL);
                    failed = 1;
                }
            }
        }
        if (!failed) {
            printf("ok %s\n", names[variant]);
        }
    }
}

int main(int argc, char **argv)
{
    const fp8q_scaling tensor = FP8Q_SCALING_TENSORWISE;
    const fp8q_scaling row = FP8Q_SCALING_ROWWISE;
    const fp8q_scaling block = FP8Q_SCALING_BLOCKWISE;
    /* K = 24: not a multiple of 16; padded where the rule says it pays. */
    const fp8q_cuda_mm_path unaligned =
        fp8q_matmul_padding_pays(4, 16, 24) ? FP8Q_CUDA_MM_ONE_CALL_PADDED
                                            : FP8Q_CUDA_MM_BFLOAT16;
    const spec specs[] = {
        {"paths", "one-call", 4, 32, 16, tensor, 0, 0, 0, 0, 0, 0,
         FP8Q_CUDA_MM_ONE_CALL},
        {"paths", "one-call-gathered", 4, 32, 16, tensor, 1, 1, 0, 0, 0, 0,
         FP8Q_CUDA_MM_ONE_CALL},
        {"paths", "one-call-rowwise-bfloat16-bias", 4, 32, 16, row, 0, 0, 2,
         0, 0, 0, FP8Q_CUDA_MM_ONE_CALL},
        {"paths", "one-call-fp8-out-amax", 4, 32, 16, tensor, 0, 0, 0, 1, 0,
         0, FP8Q_CUDA_MM_ONE_CALL},
        {"paths", "epilogue-strided-float32-bias", 4, 32, 16, tensor, 0, 0,
         1, 0, 0, 0, FP8Q_CUDA_MM_FP8},
        {"paths", "one-call-blockwise-weight-scales", 2, 256, 256, block, 0,
         0, 0, 0, 1, 0, FP8Q_CUDA_MM_ONE_CALL},
        {"paths", "one-call-blockwise", 2, 256, 256, block, 0, 0, 0, 0, 0, 0,
         FP8Q_CUDA_MM_ONE_CALL},
        {"paths", "unaligned-k", 4, 24, 16, tensor, 0, 0, 0, 0, 0, 0,
         unaligned},
        {"paths", "unaligned-k-padding-off", 4, 24, 16, tensor, 0, 0, 0, 0,
         0, 1, FP8Q_CUDA_MM_BFLOAT16},
        /* cuBLASLt refuses FP8 products: the refusal remembered. */
        {"refused-fp8", "refused-fp8", 4, 32, 16, tensor, 0, 0, 1, 0, 0, 0,
         FP8Q_CUDA_MM_BFLOAT16},
        {"refused-fp8", "refused-fp8-remembered", 4, 32, 16, tensor, 0, 0, 1,
         0, 0, 0, FP8Q_CUDA_MM_BFLOAT16},
        {"no-scale-modes", "rowwise-epilogue", 4, 32, 16, row, 0, 0, 0, 0, 0,
         0, FP8Q_CUDA_MM_FP8},
        {"no-scale-modes", "blockwise-decoded", 2, 256, 256, block, 0, 0, 2,
         0, 1, 0, FP8Q_CUDA_MM_BLOCKWISE},
        {"no-tensor-cores", "bfloat16", 4, 32, 16, tensor, 1, 1, 2, 0, 0, 0,
         FP8Q_CUDA_MM_BFLOAT16},
        {"failing", "failing", 4, 32, 16, tensor, 0, 0, 0, 0, 0, 0,
         FP8Q_CUDA_MM_ONE_CALL},
    };
    const int start =
        open_device(argc, argv, 3, "scaled_mm_ops KERNEL_FOLDER SCENARIO");

    if (start != 0) {
        return start;
    }
    library = fp8q_cublaslt_load(NULL, 0);
    if (library->error.status != FP8Q_OK) {
        fail("setup", "no fake cuBLASLt", &library->error);
        return 1;
    }
    check(argv[2], specs, sizeof specs / sizeof specs[0]);
    if (strcmp(argv[2], "paths") == 0) {
        check_refusal_and_empty();
        check_layer_forward();
    }
    return failures != 0;
}
