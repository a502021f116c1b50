/*
 * fake_cublaslt.c - a stand-in for cuBLASLt, for testing fp8q's GPU matrix
 * multiply on machines without a GPU, beside the fake CUDA driver (whose
 * "device memory" is host memory). The tests compile it into a shared
 * library and point FP8Q_CUBLASLT at it.
 *
 * It keeps what fp8q sets on descriptors and layouts and runs cublasLtMatmul
 * on the host with cuBLAS's column-major semantics: D = alpha * op(A) @
 * op(B) (times the A and B scales when set) + beta * C, float accumulation
 * in k order, the element types decoded and D encoded with fp8q's codec.
 * FP8 operands must come in cuBLASLt's "TN" form (A transposed, B not) with
 * 16-byte leading dimensions, as the real library requires. Environment:
 *   FAKE_CUBLASLT_VERSION  cublasLtGetVersion's value (default 131000)
 *   FAKE_CUBLASLT_NO_ALGO  when set, the heuristic finds no algorithm
 *   FAKE_CUBLASLT_NO_FP8   when set, it finds none for FP8 operands
 *   FAKE_CUBLASLT_REFUSE_FP8_MATMUL  when set, the heuristic offers an
 *                          algorithm for FP8 operands but cublasLtMatmul
 *                          returns NOT_SUPPORTED for them (logged as
 *                          "cublasLtMatmulRefused A_TYPE B_TYPE D_TYPE")
 *   FAKE_CUDA_LOG          a file each matmul is logged to, as
 *                          "cublasLtMatmul A_TYPE B_TYPE D_TYPE scaled|plain
 *                          LIVE_OBJECTS scaled|plain", the last word being
 *                          whether the scale pointers were set when the
 *                          heuristic chose the algorithm
 * Compile with -I csrc.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/float_codec.h"

typedef int status_t;

#define SUCCESS 0
#define INVALID_VALUE 7
#define NOT_SUPPORTED 15

typedef struct desc {
    int32_t transa, transb;
    const float *a_scale, *b_scale;
    int8_t fast;
    /* Whether both scale pointers were set at the last heuristic call. */
    int scaled_at_heuristic;
} desc;

typedef struct layout {
    int type;
    uint64_t rows, cols;
    int64_t ld;
} layout;

static int handle_storage;
/* Matmul descriptors and layouts created and not yet destroyed (logged
 * with every product, so a test can see that fp8q's plan cache is bounded). */
static long live_objects;
static int preference_storage;

status_t cublasLtCreate(void **handle)
{
    *handle = &handle_storage;
    return SUCCESS;
}

size_t cublasLtGetVersion(void)
{
    const char *text = getenv("FAKE_CUBLASLT_VERSION");
    return text != NULL ? (size_t)strtoull(text, NULL, 10) : 131000;
}

const char *cublasLtGetStatusName(status_t status)
{
    switch (status) {
    case SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

status_t cublasLtMatmulDescCreate(desc **made, int compute_type,
                                  int scale_type)
{
    if (compute_type != 68 || scale_type != 0) {
        return INVALID_VALUE; /* fp8q asks for float compute and scale */
    }
    *made = (desc *)calloc(1, sizeof **made);
    if (*made == NULL) {
        return INVALID_VALUE;
    }
    live_objects++;
    return SUCCESS;
}

status_t cublasLtMatmulDescSetAttribute(desc *target, int attribute,
                                        const void *value, size_t size)
{
    switch (attribute) {
    case 3:
    case 4:
        if (size != sizeof(int32_t)) {
            return INVALID_VALUE;
        }
        memcpy(attribute == 3 ? &target->transa : &target->transb, value,
               size);
        return SUCCESS;
    case 17:
    case 18:
        if (size != sizeof(void *)) {
            return INVALID_VALUE;
        }
        memcpy(attribute == 17 ? (void *)&target->a_scale
                               : (void *)&target->b_scale,
               value, size);
        return SUCCESS;
    case 25:
        if (size != sizeof(int8_t)) {
            return INVALID_VALUE;
        }
        memcpy(&target->fast, value, size);
        return SUCCESS;
    default:
        return INVALID_VALUE;
    }
}

status_t cublasLtMatmulDescDestroy(desc *target)
{
    live_objects--;
    free(target);
    return SUCCESS;
}

status_t cublasLtMatrixLayoutCreate(layout **made, int type, uint64_t rows,
                                    uint64_t cols, int64_t ld)
{
    if (ld < (int64_t)rows) {
        return INVALID_VALUE;
    }
    *made = (layout *)malloc(sizeof **made);
    if (*made == NULL) {
        return INVALID_VALUE;
    }
    (*made)->type = type;
    (*made)->rows = rows;
    (*made)->cols = cols;
    (*made)->ld = ld;
    live_objects++;
    return SUCCESS;
}

status_t cublasLtMatrixLayoutDestroy(layout *target)
{
    live_objects--;
    free(target);
    return SUCCESS;
}

status_t cublasLtMatmulPreferenceCreate(void **preference)
{
    *preference = &preference_storage;
    return SUCCESS;
}

status_t cublasLtMatmulPreferenceSetAttribute(void *preference, int attribute,
                                              const void *value, size_t size)
{
    uint32_t alignment;
    (void)preference;
    if (attribute == 1) {
        return size == sizeof(uint64_t) ? SUCCESS : INVALID_VALUE;
    }
    if (attribute >= 5 && attribute <= 8 && size == sizeof(uint32_t)) {
        memcpy(&alignment, value, size);
        /* A power of two: what fp8q computes from the pointers. */
        return alignment != 0 && (alignment & (alignment - 1)) == 0
                   ? SUCCESS
                   : INVALID_VALUE;
    }
    return INVALID_VALUE;
}

status_t cublasLtMatmulPreferenceDestroy(void *preference)
{
    (void)preference;
    return SUCCESS;
}

typedef struct heuristic {
    uint64_t algo[8];
    size_t workspace_size;
    status_t state;
    float waves_count;
    int reserved[4];
} heuristic;

static int is_fp8(int type)
{
    return type == 28 || type == 29;
}

status_t cublasLtMatmulAlgoGetHeuristic(void *handle, desc *operation,
                                        layout *a, layout *b, layout *c,
                                        layout *d, void *preference,
                                        int requested, heuristic *results,
                                        int *returned)
{
    (void)handle;
    (void)b;
    (void)c;
    (void)d;
    (void)preference;
    *returned = 0;
    if (requested < 1) {
        return INVALID_VALUE;
    }
    if (is_fp8(a->type) && (operation->transa != 1 || operation->transb != 0)) {
        return NOT_SUPPORTED; /* FP8 takes the TN form only */
    }
    if (getenv("FAKE_CUBLASLT_NO_ALGO") != NULL ||
        (is_fp8(a->type) && getenv("FAKE_CUBLASLT_NO_FP8") != NULL)) {
        return SUCCESS;
    }
    operation->scaled_at_heuristic =
        operation->a_scale != NULL && operation->b_scale != NULL;
    memset(results, 0, sizeof *results);
    *returned = 1;
    return SUCCESS;
}

/* ------------------------------------------------------------------------- */
/* The product                                                               */

static float load(const void *base, int64_t index, int type)
{
    const uint8_t *bytes = (const uint8_t *)base;
    uint16_t half;
    float value;
    switch (type) {
    case 28: return fp8q_decode_e4m3fn(bytes[index]);
    case 29: return fp8q_decode_e5m2(bytes[index]);
    case 14:
        memcpy(&half, bytes + 2 * index, 2);
        return fp8q_decode_bfloat16(half);
    case 2:
        memcpy(&half, bytes + 2 * index, 2);
        return fp8q_decode_float16(half);
    default:
        memcpy(&value, bytes + 4 * index, 4);
        return value;
    }
}

static void store(void *base, int64_t index, int type, float value)
{
    uint8_t *bytes = (uint8_t *)base;
    uint16_t half;
    switch (type) {
    case 14:
        half = fp8q_encode_bfloat16(value);
        memcpy(bytes + 2 * index, &half, 2);
        return;
    case 2:
        half = fp8q_encode_float16(value);
        memcpy(bytes + 2 * index, &half, 2);
        return;
    default:
        memcpy(bytes + 4 * index, &value, 4);
        return;
    }
}

static int element_bytes(int type)
{
    return is_fp8(type) ? 1 : type == 0 ? 4 : 2;
}

/* Appends "NAME A_TYPE B_TYPE D_TYPE scaled|plain LIVE scaled|plain" to
 * FAKE_CUDA_LOG (see the header comment). */
static void log_product(const char *name, const desc *operation,
                        const layout *a_layout, const layout *b_layout,
                        const layout *d_layout)
{
    const char *log_path = getenv("FAKE_CUDA_LOG");
    FILE *log;
    if (log_path == NULL) {
        return;
    }
    log = fopen(log_path, "a");
    if (log != NULL) {
        fprintf(log, "%s %d %d %d %s %ld %s\n", name, a_layout->type,
                b_layout->type, d_layout->type,
                operation->a_scale != NULL ? "scaled" : "plain", live_objects,
                operation->scaled_at_heuristic ? "scaled" : "plain");
        fclose(log);
    }
}

status_t cublasLtMatmul(void *handle, desc *operation, const float *alpha,
                        const void *a, layout *a_layout, const void *b,
                        layout *b_layout, const float *beta, const void *c,
                        layout *c_layout, void *d, layout *d_layout,
                        const void *algo, void *workspace,
                        size_t workspace_size, void *stream)
{
    /* op(A) is m x k, op(B) k x n, D m x n; all column-major. */
    const int64_t m = (int64_t)d_layout->rows;
    const int64_t n = (int64_t)d_layout->cols;
    const int64_t k = operation->transa ? (int64_t)a_layout->rows
                                        : (int64_t)a_layout->cols;
    int64_t i, j, p;

    (void)handle;
    (void)c;
    (void)c_layout;
    (void)algo;
    (void)workspace;
    (void)workspace_size;
    (void)stream;
    if (*beta != 0.0f ||
        (is_fp8(a_layout->type) &&
         (operation->transa != 1 || operation->transb != 0 ||
          (a_layout->ld * element_bytes(a_layout->type)) % 16 != 0 ||
          (b_layout->ld * element_bytes(b_layout->type)) % 16 != 0))) {
        return NOT_SUPPORTED;
    }
    if ((operation->transb ? (int64_t)b_layout->cols
                           : (int64_t)b_layout->rows) != k) {
        return INVALID_VALUE;
    }
    if (is_fp8(a_layout->type) &&
        getenv("FAKE_CUBLASLT_REFUSE_FP8_MATMUL") != NULL) {
        log_product("cublasLtMatmulRefused", operation, a_layout, b_layout,
                    d_layout);
        return NOT_SUPPORTED;
    }
    log_product("cublasLtMatmul", operation, a_layout, b_layout, d_layout);
    for (j = 0; j < n; j++) {
        for (i = 0; i < m; i++) {
            float sum = 0.0f;
            for (p = 0; p < k; p++) {
                const float left = load(a, operation->transa
                                               ? p + i * a_layout->ld
                                               : i + p * a_layout->ld,
                                        a_layout->type);
                const float right = load(b, operation->transb
                                                ? j + p * b_layout->ld
                                                : p + j * b_layout->ld,
                                         b_layout->type);
                sum += left * right;
            }
            sum *= *alpha;
            if (operation->a_scale != NULL) {
                sum = sum * *operation->a_scale * *operation->b_scale;
            }
            store(d, i + j * d_layout->ld, d_layout->type, sum);
        }
    }
    return SUCCESS;
}
