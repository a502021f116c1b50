/*
 * matmul.c - cuBLASLt matmul plans (descriptor, layouts, the heuristic's
 * candidate algorithms and the one chosen by timing them), their cache,
 * and running one (see matmul.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/matmul.h"
#include "cuda/memory.h"
#include "cuda/switches.h"
#include "platform.h"

/* ------------------------------------------------------------------------- */
/* Plans                                                                     */

typedef struct plan_key {
    int device;
    int64_t m, n, k;
    int a_dtype, b_dtype, d_dtype;
    int scaling;    /* fp8q_matmul_scaling */
    int bias_dtype; /* -1 without a bias */
    int has_d_scale, has_amax;
    int fast_accumulation;
    /* The pointers' alignments (powers of two up to 256): cuBLASLt picks
     * algorithms for 256-byte aligned buffers unless told otherwise. */
    uint32_t a_alignment, b_alignment, d_alignment;
} plan_key;

typedef struct plan {
    plan_key key;
    fp8q_lt_matmul_desc desc;
    fp8q_lt_layout a_layout; /* cuBLASLt's A: our B */
    fp8q_lt_layout b_layout; /* cuBLASLt's B: our A */
    fp8q_lt_layout c_layout; /* D's, or 16-bit for an FP8 D (never read) */
    fp8q_lt_layout d_layout;
    /* The heuristic's best algorithms, best first (one when tuning is
     * off), and the one products run with. */
    fp8q_lt_algo candidates[FP8Q_MATMUL_CANDIDATES];
    int n_candidates;
    int chosen;
    /* Nonzero once `chosen` is settled: timed, taken from the M bucket's
     * earlier choice, or nothing to choose; until then products run the
     * heuristic's first and the first product outside a capture times. */
    int tuned;
    /* FP8Q_OK, or why cuBLASLt refused the problem (kept, so that a
     * refusal costs one heuristic call, not one per product). */
    fp8q_error refusal;
    struct plan *next;
} plan;

/* At most this many plans are kept (a server sees a new m with almost
 * every batch size); the least recently used one goes first. */
#define MAX_PLANS 256

static fp8q_once lock_once = FP8Q_ONCE_INIT;
static fp8q_mutex *plans_lock;
static plan *plans; /* most recently used first */
static int n_plans;
/* Each device's cuBLASLt workspace (32 MiB on sm_90 and newer, 4 MiB
 * below), allocated at its first product outside a CUDA graph capture
 * (again after a failure) and kept, with the events of
 * fp8q_cuda_shared_order recorded after each product that used it: the
 * next product, on whatever stream, waits for the last one's, so two
 * products never share the scratch memory at once (and no stream handle has
 * to outlive its use). Guarded by plans_lock. */
typedef struct workspace {
    void *memory;
    size_t size;
    fp8q_cuda_shared_order order;
} workspace;

static workspace workspaces[FP8Q_CUBLASLT_MAX_DEVICES];

/* The tuner's choices, keyed as plans are but with m replaced by its M
 * bucket (fp8q_matmul_m_bucket): a new m in a tuned bucket takes the
 * bucket's algorithm when the heuristic offers it for that m too, without
 * timing. At most MAX_CHOICES, most recent first. Guarded by plans_lock. */
typedef struct choice {
    plan_key key;
    fp8q_lt_algo algo;
    struct choice *next;
} choice;

#define MAX_CHOICES 1024

static choice *choices;
static int n_choices;
/* Candidates timed so far, process-wide (fp8q_matmul_candidates_timed). */
static int64_t n_timed;

/* Per device, a bit per fp8q_matmul_scaling: products of that mode that
 * cuBLASLt ran, and refused (fp8q_matmul_modes_seen). Guarded by
 * plans_lock. */
static unsigned modes_accepted[FP8Q_CUBLASLT_MAX_DEVICES];
static unsigned modes_refused[FP8Q_CUBLASLT_MAX_DEVICES];

#define LARGE_WORKSPACE ((size_t)32 << 20)
#define SMALL_WORKSPACE ((size_t)4 << 20)

/* The device's workspace, allocated (ordered on `stream`, which is not
 * capturing) on first use; its end recorded right after the allocation, so
 * a product on another stream waits for the allocation even when the first
 * product never runs (refused, failed). Called with plans_lock held. */
static fp8q_status take_workspace(const fp8q_cuda_device *device,
                                  fp8q_cu_stream stream, workspace **taken,
                                  fp8q_error *error)
{
    static const fp8q_cuda_capture not_captured = {0, 0};
    workspace *space = &workspaces[device->index];
    fp8q_cuda_capture allocated_in;

    if (space->memory == NULL) {
        space->size = device->compute_capability_major >= 9 ? LARGE_WORKSPACE
                                                            : SMALL_WORKSPACE;
        if (fp8q_cuda_alloc(device, space->size, stream, &space->memory,
                            &allocated_in, error) != FP8Q_OK) {
            return error->status;
        }
        if (fp8q_cuda_shared_end(device, &space->order, stream,
                                 &not_captured, error) != FP8Q_OK) {
            fp8q_cuda_free(device, space->memory, &allocated_in, stream);
            space->memory = NULL;
            return error->status;
        }
    }
    *taken = space;
    return FP8Q_OK;
}

/* FP8Q_ERROR_CUDA when `stream` captures a CUDA graph and the device has
 * no cuBLASLt workspace yet (nor, then, a cuBLASLt handle): neither can be
 * made inside a capture. */
static fp8q_status refuse_cold_device(const fp8q_cuda_device *device,
                                      fp8q_cu_stream stream,
                                      const fp8q_cuda_capture *capture,
                                      fp8q_error *error)
{
    int ready;
    char what[96];

    if (!capture->capturing || device->index < 0 ||
        device->index >= FP8Q_CUBLASLT_MAX_DEVICES) {
        return FP8Q_OK; /* (fp8q_cublaslt_device_open refuses the latter) */
    }
    fp8q_mutex_lock(plans_lock);
    ready = workspaces[device->index].memory != NULL;
    fp8q_mutex_unlock(plans_lock);
    if (ready) {
        return FP8Q_OK;
    }
    (void)snprintf(what, sizeof what,
                   "creating the cuBLASLt handle and workspace of CUDA "
                   "device %d",
                   device->index);
    return fp8q_cuda_capture_refuse(
        stream, capture, what,
        "run one scaled_mm on this device before the capture (as "
        "torch.cuda.graph's warm-up does)",
        error);
}

/* Whether a cuBLASLt status says the problem itself is refused (so asking
 * again gives the same answer), rather than something passing. -1 is
 * describe()'s "no algorithm". */
static int is_refusal(fp8q_lt_status status)
{
    return status == -1 || status == FP8Q_LT_NOT_SUPPORTED ||
           status == FP8Q_LT_INVALID_VALUE;
}

static int lt_type(fp8q_dtype dtype)
{
    switch (dtype) {
    case FP8Q_FLOAT8_E4M3FN: return FP8Q_LT_R_8F_E4M3;
    case FP8Q_FLOAT8_E5M2: return FP8Q_LT_R_8F_E5M2;
    case FP8Q_BFLOAT16: return FP8Q_LT_R_16BF;
    case FP8Q_FLOAT16: return FP8Q_LT_R_16F;
    default: return FP8Q_LT_R_32F;
    }
}

/* The largest power of two up to 256 that divides the address. */
static uint32_t alignment_of(const void *pointer)
{
    const uintptr_t address = (uintptr_t)pointer;
    uint32_t alignment = 256;
    while (alignment > 1 && address % alignment != 0) {
        alignment /= 2;
    }
    return alignment;
}

static void key_of(const fp8q_cuda_device *device, const fp8q_matmul *problem,
                   plan_key *key)
{
    memset(key, 0, sizeof *key);
    key->device = device->index;
    key->m = problem->m;
    key->n = problem->n;
    key->k = problem->k;
    key->a_dtype = (int)problem->a_dtype;
    key->b_dtype = (int)problem->b_dtype;
    key->d_dtype = (int)problem->d_dtype;
    key->scaling = (int)problem->scaling;
    key->bias_dtype = problem->bias != NULL ? (int)problem->bias_dtype : -1;
    key->has_d_scale = problem->d_scale != NULL;
    key->has_amax = problem->amax_d != NULL;
    key->fast_accumulation = problem->fast_accumulation != 0;
    key->a_alignment = alignment_of(problem->a);
    key->b_alignment = alignment_of(problem->b);
    key->d_alignment = alignment_of(problem->d);
}

/* Sets one pointer attribute of the descriptor. */
static fp8q_lt_status set_pointer(const fp8q_cublaslt *lt,
                                  fp8q_lt_matmul_desc desc, int attribute,
                                  const void *pointer)
{
    return lt->api.matmul_desc_set_attribute(desc, attribute, &pointer,
                                             sizeof pointer);
}

/* Points the descriptor at the problem's scales, bias, D scale and amax
 * (those it has): before the heuristic, so that the algorithm is chosen
 * for the problem that runs, and again before each product, whose
 * pointers differ. Our A is cuBLASLt's B and the other way round. */
static fp8q_lt_status set_pointers(const fp8q_cublaslt *lt,
                                   fp8q_lt_matmul_desc desc,
                                   const fp8q_matmul *problem)
{
    fp8q_lt_status status = FP8Q_LT_SUCCESS;
    if (problem->scaling != FP8Q_MATMUL_UNSCALED) {
        status = set_pointer(lt, desc, FP8Q_LT_DESC_A_SCALE_POINTER,
                             problem->b_scale);
        if (status == FP8Q_LT_SUCCESS) {
            status = set_pointer(lt, desc, FP8Q_LT_DESC_B_SCALE_POINTER,
                                 problem->a_scale);
        }
    }
    if (status == FP8Q_LT_SUCCESS && problem->bias != NULL) {
        status = set_pointer(lt, desc, FP8Q_LT_DESC_BIAS_POINTER,
                             problem->bias);
    }
    if (status == FP8Q_LT_SUCCESS && problem->d_scale != NULL) {
        status = set_pointer(lt, desc, FP8Q_LT_DESC_D_SCALE_POINTER,
                             problem->d_scale);
    }
    if (status == FP8Q_LT_SUCCESS && problem->amax_d != NULL) {
        status = set_pointer(lt, desc, FP8Q_LT_DESC_AMAX_D_POINTER,
                             problem->amax_d);
    }
    return status;
}

/* Sets the int32 attribute `first` of `desc` to first_value, then (when
 * that succeeds) `second` to second_value. */
static fp8q_lt_status set_int32_pair(const fp8q_cublaslt *lt,
                                     fp8q_lt_matmul_desc desc, int first,
                                     int32_t first_value, int second,
                                     int32_t second_value)
{
    fp8q_lt_status status = lt->api.matmul_desc_set_attribute(
        desc, first, &first_value, sizeof first_value);
    if (status == FP8Q_LT_SUCCESS) {
        status = lt->api.matmul_desc_set_attribute(
            desc, second, &second_value, sizeof second_value);
    }
    return status;
}

/* Sets the scale modes (cuBLASLt 12.9+) of a rowwise or blockwise problem:
 * cuBLASLt's A (our b) and B (our a). Tensorwise and unscaled problems
 * keep the default, one float32 (SCALAR_32F), so that older cuBLASLt
 * releases, which lack these attributes, take them. */
static fp8q_lt_status set_scale_modes(const fp8q_cublaslt *lt,
                                      fp8q_lt_matmul_desc desc,
                                      fp8q_matmul_scaling scaling)
{
    int32_t a_mode, b_mode;
    if (scaling == FP8Q_MATMUL_ROWWISE) {
        a_mode = FP8Q_LT_SCALE_OUTER_VEC_32F;
        b_mode = FP8Q_LT_SCALE_OUTER_VEC_32F;
    }
    else if (scaling == FP8Q_MATMUL_BLOCKWISE) {
        a_mode = FP8Q_LT_SCALE_BLK128x128_32F; /* our b: 128 x 128 blocks */
        b_mode = FP8Q_LT_SCALE_VEC128_32F;     /* our a: 1 x 128 blocks */
    }
    else {
        return FP8Q_LT_SUCCESS;
    }
    return set_int32_pair(lt, desc, FP8Q_LT_DESC_A_SCALE_MODE, a_mode,
                          FP8Q_LT_DESC_B_SCALE_MODE, b_mode);
}

/* Asks for the bias epilogue (and the bias's type) when there is a bias. */
static fp8q_lt_status set_epilogue(const fp8q_cublaslt *lt,
                                   fp8q_lt_matmul_desc desc,
                                   const plan_key *key)
{
    if (key->bias_dtype < 0) {
        return FP8Q_LT_SUCCESS;
    }
    return set_int32_pair(lt, desc, FP8Q_LT_DESC_EPILOGUE,
                          FP8Q_LT_EPILOGUE_BIAS, FP8Q_LT_DESC_BIAS_DATA_TYPE,
                          lt_type((fp8q_dtype)key->bias_dtype));
}

/* C's type: D's, except for an FP8 D, whose C must be 16-bit (cuBLASLt's
 * FP8 table): the bias's type, bfloat16 without one. C is never read
 * (beta = 0). */
static int c_type(const plan_key *key)
{
    if (!fp8q_dtype_is_fp8((fp8q_dtype)key->d_dtype)) {
        return lt_type((fp8q_dtype)key->d_dtype);
    }
    return key->bias_dtype == (int)FP8Q_FLOAT16 ? FP8Q_LT_R_16F
                                                : FP8Q_LT_R_16BF;
}

/* Describes `problem` in `lt`'s terms, every descriptor attribute set
 * (scale pointers included), then asks the heuristic for an algorithm;
 * *step names the failing call. */
static fp8q_lt_status describe(const fp8q_cublaslt *lt,
                               const fp8q_cublaslt_device *state,
                               const workspace *space,
                               const fp8q_matmul *problem, plan *made,
                               const char **step)
{
    const plan_key *key = &made->key;
    const int32_t transpose = FP8Q_LT_OP_T;
    const int32_t no_transpose = FP8Q_LT_OP_N;
    const int8_t fast = (int8_t)key->fast_accumulation;
    const uint64_t workspace_bytes = space->size;
    const int fp8 = fp8q_dtype_is_fp8((fp8q_dtype)key->a_dtype);
    fp8q_lt_preference preference = NULL;
    fp8q_lt_heuristic results[FP8Q_MATMUL_CANDIDATES];
    const int requested =
        fp8q_cuda_switches_get()->gemm_tuning ? FP8Q_MATMUL_CANDIDATES : 1;
    int returned = 0;
    uint32_t alignments[4];
    int index;
    fp8q_lt_status status;

    *step = "cublasLtMatmulDescCreate";
    status = lt->api.matmul_desc_create(&made->desc, FP8Q_LT_COMPUTE_32F,
                                        FP8Q_LT_R_32F);
    if (status == FP8Q_LT_SUCCESS) {
        *step = "cublasLtMatmulDescSetAttribute";
        status = lt->api.matmul_desc_set_attribute(
            made->desc, FP8Q_LT_DESC_TRANSA, &transpose, sizeof transpose);
    }
    if (status == FP8Q_LT_SUCCESS) {
        status = lt->api.matmul_desc_set_attribute(
            made->desc, FP8Q_LT_DESC_TRANSB, &no_transpose,
            sizeof no_transpose);
    }
    if (status == FP8Q_LT_SUCCESS && fp8) {
        status = lt->api.matmul_desc_set_attribute(
            made->desc, FP8Q_LT_DESC_FAST_ACCUM, &fast, sizeof fast);
    }
    if (status == FP8Q_LT_SUCCESS) {
        status = set_scale_modes(lt, made->desc, problem->scaling);
    }
    if (status == FP8Q_LT_SUCCESS) {
        status = set_epilogue(lt, made->desc, key);
    }
    if (status == FP8Q_LT_SUCCESS) {
        status = set_pointers(lt, made->desc, problem);
    }
    if (status == FP8Q_LT_SUCCESS) {
        *step = "cublasLtMatrixLayoutCreate";
        status = lt->api.matrix_layout_create(
            &made->a_layout, lt_type((fp8q_dtype)key->b_dtype),
            (uint64_t)key->k, (uint64_t)key->n, key->k);
    }
    if (status == FP8Q_LT_SUCCESS) {
        status = lt->api.matrix_layout_create(
            &made->b_layout, lt_type((fp8q_dtype)key->a_dtype),
            (uint64_t)key->k, (uint64_t)key->m, key->k);
    }
    if (status == FP8Q_LT_SUCCESS) {
        status = lt->api.matrix_layout_create(
            &made->d_layout, lt_type((fp8q_dtype)key->d_dtype),
            (uint64_t)key->n, (uint64_t)key->m, key->n);
    }
    if (status == FP8Q_LT_SUCCESS) {
        status = lt->api.matrix_layout_create(&made->c_layout, c_type(key),
                                              (uint64_t)key->n,
                                              (uint64_t)key->m, key->n);
    }
    if (status == FP8Q_LT_SUCCESS) {
        *step = "cublasLtMatmulPreferenceCreate";
        status = lt->api.preference_create(&preference);
    }
    if (status == FP8Q_LT_SUCCESS) {
        *step = "cublasLtMatmulPreferenceSetAttribute";
        status = lt->api.preference_set_attribute(
            preference, FP8Q_LT_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
            sizeof workspace_bytes);
    }
    /* The operands' alignments, attributes A, B, C and D in a row:
     * cuBLASLt's A is our B, and the other way round; C is D. */
    alignments[0] = key->b_alignment;
    alignments[1] = key->a_alignment;
    alignments[2] = key->d_alignment;
    alignments[3] = key->d_alignment;
    for (index = 0; index < 4 && status == FP8Q_LT_SUCCESS; index++) {
        status = lt->api.preference_set_attribute(
            preference, FP8Q_LT_PREF_MIN_ALIGNMENT_A_BYTES + index,
            &alignments[index], sizeof alignments[index]);
    }
    if (status == FP8Q_LT_SUCCESS) {
        *step = "cublasLtMatmulAlgoGetHeuristic";
        status = lt->api.algo_get_heuristic(
            state->handle, made->desc, made->a_layout, made->b_layout,
            made->c_layout, made->d_layout, preference, requested, results,
            &returned);
        if (status == FP8Q_LT_SUCCESS && returned < 1) {
            status = -1; /* no algorithm: reported by the caller */
        }
    }
    if (preference != NULL) {
        (void)lt->api.preference_destroy(preference);
    }
    if (status == FP8Q_LT_SUCCESS) {
        made->n_candidates =
            returned < FP8Q_MATMUL_CANDIDATES ? returned
                                              : FP8Q_MATMUL_CANDIDATES;
        for (index = 0; index < made->n_candidates; index++) {
            made->candidates[index] = results[index].algo;
        }
    }
    return status;
}

/* Destroys what describe() made of a refused plan (the plan itself stays,
 * to remember the refusal). */
static void release_descriptors(const fp8q_cublaslt *lt, plan *made)
{
    if (made->a_layout != NULL) {
        (void)lt->api.matrix_layout_destroy(made->a_layout);
    }
    if (made->b_layout != NULL) {
        (void)lt->api.matrix_layout_destroy(made->b_layout);
    }
    if (made->c_layout != NULL) {
        (void)lt->api.matrix_layout_destroy(made->c_layout);
    }
    if (made->d_layout != NULL) {
        (void)lt->api.matrix_layout_destroy(made->d_layout);
    }
    if (made->desc != NULL) {
        (void)lt->api.matmul_desc_destroy(made->desc);
    }
    made->a_layout = NULL;
    made->b_layout = NULL;
    made->c_layout = NULL;
    made->d_layout = NULL;
    made->desc = NULL;
}

/* Turns a plan cuBLASLt refused to run into a remembered refusal: the next
 * product of its key falls back at once. Called with the lock held. */
static void remember_refusal(const fp8q_cublaslt *lt, plan *refused_plan,
                             const fp8q_error *refusal)
{
    release_descriptors(lt, refused_plan);
    refused_plan->refusal = *refusal;
}

/* Destroys the plan at the end of the list (cuBLASLt copies what it needs
 * from the descriptors when a product is enqueued, so products already
 * queued with it are not affected). Called with the lock held. */
static void forget_least_recent_plan(const fp8q_cublaslt *lt)
{
    plan **link = &plans;
    if (plans == NULL) {
        return;
    }
    while ((*link)->next != NULL) {
        link = &(*link)->next;
    }
    release_descriptors(lt, *link);
    free(*link);
    *link = NULL;
    n_plans--;
}

/* "M=.., N=.., K=.., a float8_e4m3fn, ..., rowwise scales
 * (OUTER_VEC_32F), bias bfloat16, D scale, amax" for messages. */
static void describe_problem(const fp8q_matmul *problem, char *text,
                             size_t size)
{
    (void)snprintf(text, size,
                   "M=%lld, N=%lld, K=%lld, a %s, b %s, result %s, %s%s%s%s%s",
                   (long long)problem->m, (long long)problem->n,
                   (long long)problem->k, fp8q_dtype_name(problem->a_dtype),
                   fp8q_dtype_name(problem->b_dtype),
                   fp8q_dtype_name(problem->d_dtype),
                   fp8q_matmul_scaling_name(problem->scaling),
                   problem->bias != NULL ? ", bias " : "",
                   problem->bias != NULL ? fp8q_dtype_name(problem->bias_dtype)
                                         : "",
                   problem->d_scale != NULL ? ", D scale" : "",
                   problem->amax_d != NULL ? ", amax" : "");
}

/* The cached plan of `key`, moved to the front of the list (the most
 * recently used), or NULL. Called with the lock held. */
static plan *cached_plan(const plan_key *key)
{
    plan *found;
    plan *before;
    for (found = plans, before = NULL; found != NULL;
         before = found, found = found->next) {
        if (memcmp(&found->key, key, sizeof *key) == 0) {
            if (before != NULL) {
                before->next = found->next;
                found->next = plans;
                plans = found;
            }
            return found;
        }
    }
    return NULL;
}

/* `key` with m replaced by its M bucket: the key of the tuner's choice.
 * (Copied bytewise, padding included, as keys are compared with memcmp.) */
static void choice_key_of(const plan_key *key, plan_key *bucket)
{
    memcpy(bucket, key, sizeof *bucket);
    bucket->m = fp8q_matmul_m_bucket(key->m);
}

/* Settles a new plan's algorithm where no timing is needed: one candidate
 * (or none to choose from), or the candidate equal to its M bucket's
 * earlier choice. Called with the lock held. */
static void take_bucket_choice(plan *made)
{
    plan_key bucket;
    const choice *found;
    int index;

    made->chosen = 0;
    made->tuned = made->n_candidates <= 1;
    if (made->tuned) {
        return;
    }
    choice_key_of(&made->key, &bucket);
    for (found = choices; found != NULL; found = found->next) {
        if (memcmp(&found->key, &bucket, sizeof bucket) != 0) {
            continue;
        }
        for (index = 0; index < made->n_candidates; index++) {
            if (memcmp(&made->candidates[index], &found->algo,
                       sizeof found->algo) == 0) {
                made->chosen = index;
                made->tuned = 1;
            }
        }
        return;
    }
}

/* Records `timed`'s chosen algorithm as its M bucket's choice (replacing
 * an older one). Called with the lock held; out of memory, nothing is
 * recorded (the next m of the bucket is timed itself). */
static void remember_bucket_choice(const plan *timed)
{
    plan_key bucket;
    choice *entry;
    choice **link;

    choice_key_of(&timed->key, &bucket);
    for (link = &choices; *link != NULL; link = &(*link)->next) {
        if (memcmp(&(*link)->key, &bucket, sizeof bucket) == 0) {
            entry = *link;
            *link = entry->next;
            n_choices--;
            free(entry);
            break;
        }
    }
    entry = (choice *)malloc(sizeof *entry);
    if (entry == NULL) {
        return;
    }
    memcpy(&entry->key, &bucket, sizeof bucket);
    entry->algo = timed->candidates[timed->chosen];
    entry->next = choices;
    choices = entry;
    if (++n_choices > MAX_CHOICES) {
        for (link = &choices; (*link)->next != NULL; link = &(*link)->next) {
        }
        free(*link);
        *link = NULL;
        n_choices--;
    }
}

/* The cached plan for `problem`, made on first use; *refused set when
 * cuBLASLt refuses the problem (remembered). Called with the lock held. */
static fp8q_status find_plan(const fp8q_cublaslt *lt,
                             const fp8q_cuda_device *device,
                             const fp8q_cublaslt_device *state,
                             const workspace *space,
                             const fp8q_matmul *problem, plan **found,
                             int *refused, fp8q_error *error)
{
    plan_key key;
    plan *made;
    const char *step = "";
    fp8q_lt_status status;
    char what[96];
    char shapes[192];

    key_of(device, problem, &key);
    made = cached_plan(&key);
    if (made != NULL) {
        if (made->refusal.status != FP8Q_OK) {
            *error = made->refusal;
            *refused = 1;
            return error->status;
        }
        *found = made;
        return FP8Q_OK;
    }
    made = (plan *)calloc(1, sizeof *made);
    if (made == NULL) {
        return fp8q_fail(error, FP8Q_ERROR_MEMORY,
                         "out of memory for a cuBLASLt matmul plan");
    }
    made->key = key;
    if (fp8q_cuda_context_enter(device, error) != FP8Q_OK) {
        free(made);
        return error->status;
    }
    status = describe(lt, state, space, problem, made, &step);
    fp8q_cuda_context_leave();
    fp8q_error_clear(&made->refusal);
    if (status != FP8Q_LT_SUCCESS) {
        describe_problem(problem, shapes, sizeof shapes);
        if (status == -1) {
            fp8q_fail(&made->refusal, FP8Q_ERROR_CUDA,
                      "cuBLASLt has no algorithm for this matrix multiply on "
                      "CUDA device %d (%s)",
                      device->index, shapes);
        }
        else {
            fp8q_cublaslt_describe(lt, status, what, sizeof what);
            fp8q_fail(&made->refusal, FP8Q_ERROR_CUDA,
                      "%s failed with %s on CUDA device %d (%s)", step, what,
                      device->index, shapes);
        }
        release_descriptors(lt, made);
        *error = made->refusal;
        if (!is_refusal(status)) {
            /* Something passing (memory, ...): not remembered. */
            free(made);
            return error->status;
        }
        *refused = 1;
        modes_refused[device->index] |= 1u << key.scaling;
    }
    else {
        take_bucket_choice(made);
    }
    made->next = plans;
    plans = made;
    if (++n_plans > MAX_PLANS) {
        forget_least_recent_plan(lt);
    }
    if (made->refusal.status != FP8Q_OK) {
        return error->status;
    }
    *found = made;
    return FP8Q_OK;
}

/* ------------------------------------------------------------------------- */
/* Running                                                                   */

/* Enqueues the product with candidate `index` of `found` (its pointers
 * set), on `stream` with the device's workspace. */
static fp8q_lt_status run_product(const fp8q_cublaslt *lt,
                                  const fp8q_cublaslt_device *state,
                                  const plan *found, int index,
                                  const fp8q_matmul *problem,
                                  const workspace *space,
                                  fp8q_cu_stream stream)
{
    const float one = 1.0f;
    const float zero = 0.0f;
    return lt->api.matmul(state->handle, found->desc, &one, problem->b,
                          found->a_layout, problem->a, found->b_layout, &zero,
                          problem->d, found->c_layout, problem->d,
                          found->d_layout, &found->candidates[index],
                          space->memory, space->size, stream);
}

/* Whether products are timed at all: FP8Q_CUDA_GEMM_TUNING not 0 and a
 * driver with timing events. */
static int tuning_possible(void)
{
    const fp8q_cuda_api *api = &fp8q_cuda_driver_load()->api;
    return fp8q_cuda_switches_get()->gemm_tuning &&
           api->event_synchronize != NULL && api->event_elapsed_time != NULL;
}

/*
 * Times each candidate of `found` on `stream` (not capturing, its context
 * current, the pointers set): one warm-up product, then
 * FP8Q_MATMUL_TIMED_REPEATS between two timing events; waits for the last
 * event (the one host synchronization of tuning), keeps the fastest as
 * found->chosen and its M bucket's choice. A candidate cuBLASLt refuses is
 * skipped; when it refuses all, the last refusal's status is returned (the
 * caller remembers it). A timing event that fails leaves the first
 * candidate that ran chosen. Other failures of a product are returned as
 * they are. Every product writes the same D (beta = 0), so the result is
 * the product's whichever ran last. Called with the lock held.
 */
static fp8q_lt_status tune(const fp8q_cublaslt *lt,
                           const fp8q_cublaslt_device *state, plan *found,
                           const fp8q_matmul *problem, const workspace *space,
                           fp8q_cu_stream stream)
{
    const fp8q_cuda_api *api = &fp8q_cuda_driver_load()->api;
    fp8q_cu_event starts[FP8Q_MATMUL_CANDIDATES];
    fp8q_cu_event ends[FP8Q_MATMUL_CANDIDATES];
    int ran[FP8Q_MATMUL_CANDIDATES];
    fp8q_cu_event last_end = NULL;
    fp8q_lt_status status = FP8Q_LT_SUCCESS;
    fp8q_lt_status refusal = FP8Q_LT_SUCCESS;
    int timing = 1;
    int best = -1;
    float best_time = 0.0f;
    int index, repeat;

    memset(starts, 0, sizeof starts);
    memset(ends, 0, sizeof ends);
    memset(ran, 0, sizeof ran);
    for (index = 0; index < found->n_candidates; index++) {
        status = run_product(lt, state, found, index, problem, space, stream);
        if (status != FP8Q_LT_SUCCESS) {
            if (!is_refusal(status)) {
                break;
            }
            refusal = status; /* not for this problem: the next one */
            status = FP8Q_LT_SUCCESS;
            continue;
        }
        ran[index] = 1;
        if (timing &&
            (api->event_create(&starts[index], FP8Q_CU_EVENT_DEFAULT) !=
                 FP8Q_CUDA_SUCCESS ||
             api->event_create(&ends[index], FP8Q_CU_EVENT_DEFAULT) !=
                 FP8Q_CUDA_SUCCESS ||
             api->event_record(starts[index], stream) != FP8Q_CUDA_SUCCESS)) {
            timing = 0;
        }
        for (repeat = 0; repeat < FP8Q_MATMUL_TIMED_REPEATS &&
                         status == FP8Q_LT_SUCCESS;
             repeat++) {
            status =
                run_product(lt, state, found, index, problem, space, stream);
        }
        if (status != FP8Q_LT_SUCCESS) {
            break; /* it ran once: a failure, not a refusal of the shape */
        }
        if (timing) {
            timing = api->event_record(ends[index], stream) ==
                     FP8Q_CUDA_SUCCESS;
            last_end = ends[index];
        }
    }
    if (status == FP8Q_LT_SUCCESS && timing && last_end != NULL &&
        api->event_synchronize(last_end) != FP8Q_CUDA_SUCCESS) {
        timing = 0;
    }
    for (index = 0; index < found->n_candidates; index++) {
        float elapsed = 0.0f;
        if (status == FP8Q_LT_SUCCESS && ran[index]) {
            if (timing && api->event_elapsed_time(&elapsed, starts[index],
                                                  ends[index]) !=
                              FP8Q_CUDA_SUCCESS) {
                timing = 0;
            }
            if (best < 0 || (timing && elapsed < best_time)) {
                best = index;
                best_time = elapsed;
            }
            n_timed++;
        }
        if (starts[index] != NULL) {
            (void)api->event_destroy(starts[index]);
        }
        if (ends[index] != NULL) {
            (void)api->event_destroy(ends[index]);
        }
    }
    if (status != FP8Q_LT_SUCCESS) {
        return status;
    }
    if (best < 0) {
        return refusal; /* every candidate refused */
    }
    found->chosen = best;
    found->tuned = 1;
    remember_bucket_choice(found);
    return FP8Q_LT_SUCCESS;
}

const char *fp8q_matmul_scaling_name(fp8q_matmul_scaling scaling)
{
    switch (scaling) {
    case FP8Q_MATMUL_TENSORWISE: return "tensorwise scales (SCALAR_32F)";
    case FP8Q_MATMUL_ROWWISE: return "rowwise scales (OUTER_VEC_32F)";
    case FP8Q_MATMUL_BLOCKWISE:
        return "blockwise scales (VEC128_32F x BLK128x128_32F)";
    default: return "unscaled";
    }
}

int fp8q_matmul_scaling_available(const fp8q_cublaslt *library,
                                  const fp8q_cuda_device *device,
                                  fp8q_matmul_scaling scaling)
{
    if (!device->fp8_tensor_cores) {
        return scaling == FP8Q_MATMUL_UNSCALED;
    }
    if (scaling == FP8Q_MATMUL_ROWWISE || scaling == FP8Q_MATMUL_BLOCKWISE) {
        return device->compute_capability_major >= 9 &&
               library->version >= FP8Q_CUBLASLT_SCALE_MODES_VERSION;
    }
    return 1;
}

void fp8q_matmul_modes_seen(int device_index, unsigned *accepted,
                            unsigned *refused)
{
    *accepted = 0;
    *refused = 0;
    if (device_index < 0 || device_index >= FP8Q_CUBLASLT_MAX_DEVICES) {
        return;
    }
    if (fp8q_mutex_create_once(&lock_once, &plans_lock) != NULL) {
        fp8q_mutex_lock(plans_lock);
        *accepted = modes_accepted[device_index];
        *refused = modes_refused[device_index];
        fp8q_mutex_unlock(plans_lock);
    }
}

int64_t fp8q_matmul_m_bucket(int64_t m)
{
    int64_t bucket = 1;
    while (bucket < m && bucket < ((int64_t)1 << 62)) {
        bucket *= 2;
    }
    return bucket;
}

/* The fields of a choice's line, before the algorithm's 128 hex digits. */
#define CHOICE_FORMAT "%lld %lld %lld %d %d %d %d %d %d %d %d %u %u %u"

size_t fp8q_matmul_choices_format(int device_index, char *text, size_t size)
{
    static const char digits[] = "0123456789abcdef";
    const choice *entry;
    size_t used = 0;
    char line[FP8Q_MATMUL_CHOICE_LINE_SIZE];

    if (size > 0) {
        text[0] = '\0';
    }
    if (fp8q_mutex_create_once(&lock_once, &plans_lock) == NULL) {
        return 0;
    }
    fp8q_mutex_lock(plans_lock);
    for (entry = choices; entry != NULL; entry = entry->next) {
        const plan_key *key = &entry->key;
        const unsigned char *bytes = (const unsigned char *)&entry->algo;
        size_t index;
        int length;
        if (key->device != device_index) {
            continue;
        }
        length = snprintf(line, sizeof line, CHOICE_FORMAT " ",
                          (long long)key->m, (long long)key->n,
                          (long long)key->k, key->a_dtype, key->b_dtype,
                          key->d_dtype, key->scaling, key->bias_dtype,
                          key->has_d_scale, key->has_amax,
                          key->fast_accumulation, key->a_alignment,
                          key->b_alignment, key->d_alignment);
        if (length < 0 ||
            (size_t)length + 2 * sizeof entry->algo + 2 > sizeof line) {
            continue;
        }
        for (index = 0; index < sizeof entry->algo; index++) {
            line[length++] = digits[bytes[index] >> 4];
            line[length++] = digits[bytes[index] & 15];
        }
        line[length++] = '\n';
        line[length] = '\0';
        if (used + (size_t)length < size) {
            memcpy(text + used, line, (size_t)length + 1);
        }
        used += (size_t)length;
    }
    fp8q_mutex_unlock(plans_lock);
    return used;
}

/* The value of hex digit `digit`, or -1. */
static int hex_value(char digit)
{
    if (digit >= '0' && digit <= '9') {
        return digit - '0';
    }
    if (digit >= 'a' && digit <= 'f') {
        return digit - 'a' + 10;
    }
    return -1;
}

/* One line of fp8q_matmul_choices_format parsed into `timed` (its key for
 * device `device_index`, its one candidate); FP8Q_ERROR_VALUE saying what
 * a line must hold when it is not one. */
static fp8q_status parse_choice(int device_index, const char *line,
                                plan *timed, fp8q_error *error)
{
    plan_key *key = &timed->key;
    long long m, n, k;
    char hex[2 * sizeof(fp8q_lt_algo) + 2];
    unsigned char *bytes = (unsigned char *)&timed->candidates[0];
    size_t index;

    memset(timed, 0, sizeof *timed);
    memset(hex, 0, sizeof hex);
    if (sscanf(line, CHOICE_FORMAT " %129s", &m, &n, &k, &key->a_dtype,
               &key->b_dtype, &key->d_dtype, &key->scaling,
               &key->bias_dtype, &key->has_d_scale, &key->has_amax,
               &key->fast_accumulation, &key->a_alignment,
               &key->b_alignment, &key->d_alignment, hex) != 15 ||
        strlen(hex) != 2 * sizeof(fp8q_lt_algo) || m < 1 || n < 1 ||
        k < 1 || m != fp8q_matmul_m_bucket(m)) {
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "not a GEMM tuning choice: \"%.200s\" (fields: M "
                         "bucket, N, K, dtypes, scaling, bias, D scale, "
                         "amax, fast accumulation, alignments, then the "
                         "algorithm's %d hex digits)",
                         line, (int)(2 * sizeof(fp8q_lt_algo)));
    }
    for (index = 0; index < sizeof(fp8q_lt_algo); index++) {
        const int high = hex_value(hex[2 * index]);
        const int low = hex_value(hex[2 * index + 1]);
        if (high < 0 || low < 0) {
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "not a GEMM tuning choice: \"%.200s\" (the "
                             "algorithm must be lowercase hex digits)",
                             line);
        }
        bytes[index] = (unsigned char)(high * 16 + low);
    }
    key->device = device_index;
    key->m = m;
    key->n = n;
    key->k = k;
    timed->n_candidates = 1;
    return FP8Q_OK;
}

fp8q_status fp8q_matmul_choices_add(int device_index,
                                    const char *const *lines, size_t count,
                                    fp8q_error *error)
{
    plan *parsed;
    size_t index;

    if (count == 0) {
        return FP8Q_OK;
    }
    if (fp8q_mutex_create_once(&lock_once, &plans_lock) == NULL) {
        return fp8q_fail(error, FP8Q_ERROR_MEMORY,
                         "out of memory for the cuBLASLt plan lock");
    }
    parsed = (plan *)calloc(count, sizeof *parsed);
    if (parsed == NULL) {
        return fp8q_fail(error, FP8Q_ERROR_MEMORY,
                         "out of memory for %lld GEMM tuning choices",
                         (long long)count);
    }
    for (index = 0; index < count; index++) {
        const fp8q_status status =
            parse_choice(device_index, lines[index], &parsed[index], error);
        if (status != FP8Q_OK) {
            free(parsed);
            return status;
        }
    }
    fp8q_mutex_lock(plans_lock);
    for (index = 0; index < count; index++) {
        remember_bucket_choice(&parsed[index]);
    }
    fp8q_mutex_unlock(plans_lock);
    free(parsed);
    return FP8Q_OK;
}

int64_t fp8q_matmul_candidates_timed(void)
{
    int64_t timed = 0;
    if (fp8q_mutex_create_once(&lock_once, &plans_lock) != NULL) {
        fp8q_mutex_lock(plans_lock);
        timed = n_timed;
        fp8q_mutex_unlock(plans_lock);
    }
    return timed;
}

int fp8q_matmul_refused(const fp8q_cuda_device *device,
                        const fp8q_matmul *problem)
{
    plan_key key;
    const plan *found;
    int refused;

    if (fp8q_mutex_create_once(&lock_once, &plans_lock) == NULL) {
        return 0;
    }
    key_of(device, problem, &key);
    fp8q_mutex_lock(plans_lock);
    found = cached_plan(&key);
    refused = found != NULL && found->refusal.status != FP8Q_OK;
    fp8q_mutex_unlock(plans_lock);
    return refused;
}

int fp8q_matmul_fp8_aligned(const fp8q_matmul *problem)
{
    return problem->k % 16 == 0 && problem->n % 16 == 0 &&
           alignment_of(problem->a) >= 16 && alignment_of(problem->b) >= 16;
}

fp8q_status fp8q_cuda_matmul(const fp8q_cublaslt *library,
                             const fp8q_cuda_device *device,
                             const fp8q_matmul *problem, fp8q_cu_stream stream,
                             int *refused, fp8q_error *error)
{
    const fp8q_cublaslt_device *state = NULL;
    fp8q_cuda_capture capture;
    fp8q_status result = FP8Q_OK;
    workspace *space = NULL;
    plan *found = NULL;
    fp8q_lt_status status = FP8Q_LT_SUCCESS;
    const char *step = "cublasLtMatmul";
    char what[96];
    char shapes[192];

    *refused = 0;
    if (problem->m == 0 || problem->n == 0) {
        return FP8Q_OK;
    }
    if (problem->k == 0) {
        /* Empty sums: zeros (cuBLASLt refuses k = 0; and is not needed). */
        return fp8q_cuda_zero(device, problem->d,
                              (size_t)(problem->m * problem->n) *
                                  fp8q_dtype_itemsize(problem->d_dtype),
                              stream, error);
    }
    if (fp8q_mutex_create_once(&lock_once, &plans_lock) == NULL) {
        return fp8q_fail(error, FP8Q_ERROR_MEMORY,
                         "out of memory for the cuBLASLt plan lock");
    }
    /* (The handle is made with the workspace's first product.) */
    if (fp8q_cuda_capture_query(device, stream, &capture, error) != FP8Q_OK ||
        refuse_cold_device(device, stream, &capture, error) != FP8Q_OK ||
        fp8q_cublaslt_device_open(library, device, &state, error) !=
            FP8Q_OK) {
        return error->status;
    }
    /* (fp8q_cublaslt_device_open took only devices below
     * FP8Q_CUBLASLT_MAX_DEVICES.) */
    fp8q_mutex_lock(plans_lock);
    if (take_workspace(device, stream, &space, error) != FP8Q_OK ||
        find_plan(library, device, state, space, problem, &found, refused,
                  error) != FP8Q_OK ||
        /* After the workspace's last use, whatever stream that was. */
        fp8q_cuda_shared_begin(device, &space->order, stream, &capture,
                               error) != FP8Q_OK ||
        fp8q_cuda_context_enter(device, error) != FP8Q_OK) {
        fp8q_mutex_unlock(plans_lock);
        return error->status;
    }
    step = "cublasLtMatmulDescSetAttribute";
    status = set_pointers(library, found->desc, problem);
    /* Never timed while capturing: a capture records the heuristic's
     * first (or the choice made before), and the next product outside a
     * capture times. */
    if (status == FP8Q_LT_SUCCESS && !found->tuned && !capture.capturing &&
        tuning_possible()) {
        step = "cublasLtMatmul";
        status = tune(library, state, found, problem, space, stream);
    }
    if (status == FP8Q_LT_SUCCESS) {
        step = "cublasLtMatmul";
        status = run_product(library, state, found, found->chosen, problem,
                             space, stream);
    }
    fp8q_cuda_context_leave();
    if (status == FP8Q_LT_SUCCESS) {
        modes_accepted[device->index] |= 1u << problem->scaling;
        result = fp8q_cuda_shared_end(device, &space->order, stream, &capture,
                                      error);
    }
    if (status != FP8Q_LT_SUCCESS) {
        fp8q_cublaslt_describe(library, status, what, sizeof what);
        describe_problem(problem, shapes, sizeof shapes);
        fp8q_fail(error, FP8Q_ERROR_CUDA,
                  "%s failed with %s on CUDA device %d (%s)", step, what,
                  device->index, shapes);
        if (is_refusal(status)) {
            /* cuBLASLt refused the product itself, after its heuristic had
             * offered the algorithm: a refusal like the heuristic's,
             * remembered in the plan, and the caller falls back. */
            remember_refusal(library, found, error);
            modes_refused[device->index] |= 1u << problem->scaling;
            *refused = 1;
        }
        result = error->status;
    }
    fp8q_mutex_unlock(plans_lock);
    return result;
}
