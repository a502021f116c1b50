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
 *   FAKE_CUBLASLT_MATMUL_STATUS  when set to a cublasStatus_t N (e.g. 13,
 *                          CUBLAS_STATUS_EXECUTION_FAILED), every
 *                          cublasLtMatmul whose problem passes the checks
 *                          returns N instead of running (logged as
 *                          "cublasLtMatmulFailed A_TYPE B_TYPE D_TYPE")
 *   FAKE_CUBLASLT_REFUSE_SCALE_MODES  when set, the heuristic refuses the
 *                          outer-vector and block scale modes (as on sm_89,
 *                          which it also refuses when FAKE_CUDA_CC < 9.0)
 *   FAKE_CUBLASLT_ALGO_COSTS  comma-separated costs in microseconds, one
 *                          per algorithm (default "0": one algorithm): the
 *                          heuristic offers min(requested, count) of them,
 *                          best first, as algorithm ids 1, 2, ... (the
 *                          first 8 bytes of cublasLtMatmulAlgo_t), and each
 *                          cublasLtMatmul with id N advances the fake
 *                          driver's clock (what its timing events measure)
 *                          by cost N; an id the heuristic never offered is
 *                          refused (INVALID_VALUE), as is an all-zero one
 *   FAKE_CUBLASLT_REFUSE_ALGO  an algorithm id cublasLtMatmul refuses with
 *                          NOT_SUPPORTED although the heuristic offers it
 *                          (as the real one may, for a shape it does not fit)
 *   FAKE_CUBLASLT_ALGO_LOG a file each cublasLtMatmul that passes the
 *                          problem's checks is logged to, as "ID FAST
 *                          run|refused" (FAST: the FAST_ACCUM attribute)
 *   FAKE_CUDA_LOG          a file each matmul is logged to, as
 *                          "cublasLtMatmul A_TYPE B_TYPE D_TYPE scaled|plain
 *                          LIVE_OBJECTS scaled|plain A_MODE,B_MODE
 *                          BIAS_TYPE|- dscale|- amax|-", the sixth word being
 *                          whether the scale pointers were set when the
 *                          heuristic chose the algorithm
 *
 * The scale modes (A_SCALE_MODE / B_SCALE_MODE, cuBLASLt 12.9+: refused
 * with INVALID_VALUE when FAKE_CUBLASLT_VERSION is older) are read as
 * fp8q's docs/scaled_mm.md describes cuBLASLt's layouts: OUTER_VEC_32F one
 * float per row of op(A) / column of op(B); VEC128_32F (k/128, rows of
 * op(A) or columns of op(B)) row-major; BLK128x128_32F (blocks of op(A)'s
 * rows or op(B)'s columns, L4) row-major, L4 = k/128 rounded up to a
 * multiple of 4 (its padding never read), both arrays 16-byte aligned. Block
 * modes need k % 128 == 0. The bias epilogue takes the
 * bias types of cuBLASLt's FP8 table; an FP8 D needs a 16-bit C; AMAX_D
 * (the largest |value| before D's scale) only with an FP8 D.
 * Compile with -I csrc.
 */
#define _GNU_SOURCE /* RTLD_NOLOAD; the fakes are built on Linux */

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/float_codec.h"

typedef int status_t;

#define SUCCESS 0
#define INVALID_VALUE 7
#define NOT_SUPPORTED 15

/* cudaDataType_t, cublasLtMatmulMatrixScale_t, cublasLtEpilogue_t */
#define R_32F 0
#define R_16F 2
#define R_16BF 14
#define R_8F_E4M3 28
#define SCALAR 0
#define OUTER_VEC 3
#define VEC128 4
#define BLK128 5
#define EPILOGUE_DEFAULT 1
#define EPILOGUE_BIAS 4

typedef struct desc {
    int32_t transa, transb;
    const float *a_scale, *b_scale;
    int32_t a_mode, b_mode;
    int32_t epilogue;
    const void *bias;
    int32_t bias_type;
    const float *d_scale;
    float *amax;
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
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
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
    (*made)->epilogue = EPILOGUE_DEFAULT;
    (*made)->bias_type = -1;
    live_objects++;
    return SUCCESS;
}

/* Copies an attribute's value of `expected` bytes into `field`. */
static status_t take(void *field, const void *value, size_t size,
                     size_t expected)
{
    if (size != expected) {
        return INVALID_VALUE;
    }
    memcpy(field, value, size);
    return SUCCESS;
}

/* A scale mode fp8q may set, from a cuBLASLt that has the attribute. */
static status_t take_scale_mode(int32_t *field, const void *value,
                                size_t size)
{
    int32_t mode;
    if (cublasLtGetVersion() < 120900 || size != sizeof mode) {
        return INVALID_VALUE; /* no such attribute before 12.9 */
    }
    memcpy(&mode, value, size);
    if (mode != SCALAR && mode != OUTER_VEC && mode != VEC128 &&
        mode != BLK128) {
        return INVALID_VALUE;
    }
    *field = mode;
    return SUCCESS;
}

status_t cublasLtMatmulDescSetAttribute(desc *target, int attribute,
                                        const void *value, size_t size)
{
    int32_t epilogue;
    switch (attribute) {
    case 3: return take(&target->transa, value, size, sizeof(int32_t));
    case 4: return take(&target->transb, value, size, sizeof(int32_t));
    case 7:
        if (size != sizeof epilogue) {
            return INVALID_VALUE;
        }
        memcpy(&epilogue, value, size);
        if (epilogue != EPILOGUE_DEFAULT && epilogue != EPILOGUE_BIAS) {
            return INVALID_VALUE; /* fp8q asks for no other */
        }
        target->epilogue = epilogue;
        return SUCCESS;
    case 8: return take((void *)&target->bias, value, size, sizeof(void *));
    case 17:
        return take((void *)&target->a_scale, value, size, sizeof(void *));
    case 18:
        return take((void *)&target->b_scale, value, size, sizeof(void *));
    case 20:
        return take((void *)&target->d_scale, value, size, sizeof(void *));
    case 21: return take((void *)&target->amax, value, size, sizeof(void *));
    case 25: return take(&target->fast, value, size, sizeof(int8_t));
    case 26: return take(&target->bias_type, value, size, sizeof(int32_t));
    case 31: return take_scale_mode(&target->a_mode, value, size);
    case 32: return take_scale_mode(&target->b_mode, value, size);
    default: return INVALID_VALUE;
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

/* The bias types cuBLASLt's FP8 kernels take for a D (and C) type. */
static int bias_type_allowed(int d_type, int c_type, int bias_type)
{
    switch (d_type) {
    case R_16BF:
    case R_32F: return bias_type == R_16BF;
    case R_16F: return bias_type == R_16F;
    case R_8F_E4M3: return bias_type == c_type;
    default: return 0;
    }
}

/* Whether the descriptor and layouts form an FP8 problem the fake takes
 * (the header comment's rules); NOT_SUPPORTED or INVALID_VALUE if not. */
static status_t check_problem(const desc *operation, const layout *a,
                              const layout *b, const layout *c,
                              const layout *d)
{
    const char *cc = getenv("FAKE_CUDA_CC");
    const int modes = operation->a_mode != SCALAR ||
                      operation->b_mode != SCALAR;
    const int64_t k = operation->transa ? (int64_t)a->rows : (int64_t)a->cols;
    if (!is_fp8(a->type) || !is_fp8(b->type)) {
        /* Only FP8 products take scales, modes, bias, D scale, amax. */
        return operation->a_scale == NULL && !modes &&
                       operation->epilogue == EPILOGUE_DEFAULT &&
                       operation->d_scale == NULL &&
                       operation->amax == NULL && c->type == d->type &&
                       !is_fp8(d->type)
                   ? SUCCESS
                   : INVALID_VALUE;
    }
    if (modes && (getenv("FAKE_CUBLASLT_REFUSE_SCALE_MODES") != NULL ||
                  (cc != NULL && atoi(cc) < 9))) {
        return NOT_SUPPORTED;
    }
    if (modes && !((operation->a_mode == OUTER_VEC &&
                    operation->b_mode == OUTER_VEC) ||
                   (operation->a_mode >= VEC128 &&
                    operation->b_mode >= VEC128 && k % 128 == 0))) {
        return NOT_SUPPORTED;
    }
    if (modes && (operation->a_scale == NULL || operation->b_scale == NULL)) {
        return INVALID_VALUE;
    }
    if (operation->a_mode >= VEC128 &&
        ((uintptr_t)operation->a_scale % 16 != 0 ||
         (uintptr_t)operation->b_scale % 16 != 0)) {
        return INVALID_VALUE; /* block scale arrays start 16-byte aligned */
    }
    if (is_fp8(d->type) ? (c->type != R_16BF && c->type != R_16F)
                        : c->type != d->type) {
        return INVALID_VALUE;
    }
    if (operation->epilogue == EPILOGUE_BIAS &&
        (operation->bias == NULL ||
         !bias_type_allowed(d->type, c->type, operation->bias_type))) {
        return INVALID_VALUE;
    }
    if (operation->amax != NULL && !is_fp8(d->type)) {
        return NOT_SUPPORTED;
    }
    return SUCCESS;
}

/* ------------------------------------------------------------------------- */
/* Algorithms and their costs                                                */

#define MAX_ALGOS 16

/* FAKE_CUBLASLT_ALGO_COSTS's costs (microseconds); returns their count. */
static int algo_costs(double *costs)
{
    const char *text = getenv("FAKE_CUBLASLT_ALGO_COSTS");
    int count = 0;
    char *end;
    if (text == NULL || text[0] == '\0') {
        costs[0] = 0.0;
        return 1;
    }
    while (count < MAX_ALGOS && *text != '\0') {
        const double cost = strtod(text, &end);
        if (end == text) {
            break;
        }
        costs[count++] = cost;
        text = *end == ',' ? end + 1 : end;
    }
    return count > 0 ? count : 1;
}

/* Advances the fake driver's clock (tests/fake_cuda_streams.c), found
 * through its cuGetProcAddress in the library FP8Q_CUDA_DRIVER names,
 * which fp8q has loaded. */
static void advance_clock(double milliseconds)
{
    typedef int (*get_proc_fn)(const char *, void **, int, uint64_t, int *);
    typedef void (*advance_fn)(double);
    const char *path = getenv("FP8Q_CUDA_DRIVER");
    void *library;
    void *symbol;
    void *function = NULL;
    get_proc_fn get_proc;
    advance_fn advance;
    int status = 0;
    if (path == NULL || milliseconds == 0.0) {
        return;
    }
    library = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (library == NULL) {
        return;
    }
    symbol = dlsym(library, "cuGetProcAddress_v2");
    memcpy(&get_proc, &symbol, sizeof symbol);
    if (get_proc != NULL &&
        get_proc("fakeCudaClockAdvance", &function, 12000, 0, &status) == 0 &&
        function != NULL) {
        memcpy(&advance, &function, sizeof function);
        advance(milliseconds);
    }
    dlclose(library);
}

/* Appends "ID FAST run|refused" to FAKE_CUBLASLT_ALGO_LOG. */
static void log_algo(uint64_t id, const desc *operation, const char *what)
{
    const char *path = getenv("FAKE_CUBLASLT_ALGO_LOG");
    FILE *log;
    if (path == NULL) {
        return;
    }
    log = fopen(path, "a");
    if (log != NULL) {
        fprintf(log, "%llu %d %s\n", (unsigned long long)id,
                (int)operation->fast, what);
        fclose(log);
    }
}

status_t cublasLtMatmulAlgoGetHeuristic(void *handle, desc *operation,
                                        layout *a, layout *b, layout *c,
                                        layout *d, void *preference,
                                        int requested, heuristic *results,
                                        int *returned)
{
    status_t status;
    (void)handle;
    (void)preference;
    *returned = 0;
    if (requested < 1) {
        return INVALID_VALUE;
    }
    if (is_fp8(a->type) && (operation->transa != 1 || operation->transb != 0)) {
        return NOT_SUPPORTED; /* FP8 takes the TN form only */
    }
    status = check_problem(operation, a, b, c, d);
    if (status != SUCCESS) {
        return status;
    }
    if (getenv("FAKE_CUBLASLT_NO_ALGO") != NULL ||
        (is_fp8(a->type) && getenv("FAKE_CUBLASLT_NO_FP8") != NULL)) {
        return SUCCESS;
    }
    operation->scaled_at_heuristic =
        operation->a_scale != NULL && operation->b_scale != NULL;
    {
        double costs[MAX_ALGOS];
        const int count = algo_costs(costs);
        int index;
        for (index = 0; index < count && index < requested; index++) {
            memset(&results[index], 0, sizeof results[index]);
            results[index].algo[0] = (uint64_t)(index + 1);
        }
        *returned = index;
    }
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
    case 28: bytes[index] = fp8q_encode_e4m3fn(value, 1); return;
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

/* Appends the product's line to FAKE_CUDA_LOG (see the header comment). */
static void log_product(const char *name, const desc *operation,
                        const layout *a_layout, const layout *b_layout,
                        const layout *d_layout)
{
    const char *log_path = getenv("FAKE_CUDA_LOG");
    char bias[16] = "-";
    FILE *log;
    if (log_path == NULL) {
        return;
    }
    if (operation->epilogue == EPILOGUE_BIAS) {
        (void)snprintf(bias, sizeof bias, "%d", operation->bias_type);
    }
    log = fopen(log_path, "a");
    if (log != NULL) {
        fprintf(log, "%s %d %d %d %s %ld %s %d,%d %s %s %s\n", name,
                a_layout->type, b_layout->type, d_layout->type,
                operation->a_scale != NULL ? "scaled" : "plain", live_objects,
                operation->scaled_at_heuristic ? "scaled" : "plain",
                operation->a_mode, operation->b_mode, bias,
                operation->d_scale != NULL ? "dscale" : "-",
                operation->amax != NULL ? "amax" : "-");
        fclose(log);
    }
}

/* The scale of element `index` (a row of op(A) or column of op(B)) of an
 * operand at k index p, read as `mode` says (header comment); k_blocks4 is
 * ceil(k/128) rounded up to a multiple of 4, extent the operand's rows of
 * op(A) / columns of op(B). */
static float scale_at(const float *scale, int32_t mode, int64_t index,
                      int64_t p, int64_t extent, int64_t k_blocks4)
{
    switch (mode) {
    case OUTER_VEC: return scale[index];
    case VEC128: return scale[(p / 128) * extent + index];
    case BLK128: return scale[(index / 128) * k_blocks4 + p / 128];
    default: return scale[0];
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
    const int64_t k_blocks4 = ((k + 127) / 128 + 3) / 4 * 4;
    /* Block modes scale each 128-long run of the sums; else one run. */
    const int64_t run = operation->a_mode >= VEC128 ? 128 : (k > 0 ? k : 1);
    float amax = 0.0f;
    int64_t i, j, p, start;
    status_t status;

    double costs[MAX_ALGOS];
    const int n_algos = algo_costs(costs);
    uint64_t algo_id = 0;
    const char *refused_id = getenv("FAKE_CUBLASLT_REFUSE_ALGO");

    (void)handle;
    (void)c;
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
    status = check_problem(operation, a_layout, b_layout, c_layout, d_layout);
    if (status != SUCCESS) {
        return status;
    }
    if (algo != NULL) {
        memcpy(&algo_id, algo, sizeof algo_id);
        if (algo_id < 1 || algo_id > (uint64_t)n_algos) {
            return INVALID_VALUE; /* not an algorithm the heuristic offered */
        }
        if (refused_id != NULL &&
            strtoull(refused_id, NULL, 10) == algo_id) {
            log_algo(algo_id, operation, "refused");
            return NOT_SUPPORTED;
        }
        log_algo(algo_id, operation, "run");
        advance_clock(costs[algo_id - 1] / 1000.0);
    }
    if (is_fp8(a_layout->type) &&
        getenv("FAKE_CUBLASLT_REFUSE_FP8_MATMUL") != NULL) {
        log_product("cublasLtMatmulRefused", operation, a_layout, b_layout,
                    d_layout);
        return NOT_SUPPORTED;
    }
    if (getenv("FAKE_CUBLASLT_MATMUL_STATUS") != NULL) {
        log_product("cublasLtMatmulFailed", operation, a_layout, b_layout,
                    d_layout);
        return (status_t)strtol(getenv("FAKE_CUBLASLT_MATMUL_STATUS"), NULL,
                                10);
    }
    log_product("cublasLtMatmul", operation, a_layout, b_layout, d_layout);
    for (j = 0; j < n; j++) {
        for (i = 0; i < m; i++) {
            float total = 0.0f;
            for (start = 0; start < k; start += run) {
                float sum = 0.0f;
                for (p = start; p < k && p < start + run; p++) {
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
                if (operation->a_scale != NULL) {
                    sum = sum *
                          scale_at(operation->a_scale, operation->a_mode, i,
                                   start, m, k_blocks4) *
                          scale_at(operation->b_scale, operation->b_mode, j,
                                   start, n, k_blocks4);
                }
                total += sum;
            }
            total *= *alpha;
            if (operation->epilogue == EPILOGUE_BIAS) {
                total += load(operation->bias, i, operation->bias_type);
            }
            if (total != total || (total < 0 ? -total : total) > amax) {
                amax = total != total ? total : (total < 0 ? -total : total);
            }
            if (operation->d_scale != NULL) {
                total *= *operation->d_scale;
            }
            store(d, i + j * d_layout->ld, d_layout->type, total);
        }
    }
    if (operation->amax != NULL) {
        *operation->amax = amax;
    }
    return SUCCESS;
}
