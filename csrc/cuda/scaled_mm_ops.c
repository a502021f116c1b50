/*
 * scaled_mm_ops.c - fp8q.scaled_mm on device views (cuda/scaled_mm_ops.h):
 * which path a product takes on the GPU, the operands and temporaries it
 * needs there, and the cuBLASLt product and epilogue kernel that compute
 * it. docs/scaled_mm.md, "On the GPU".
 *
 * Layout: a row-major and b column-major (b = w.T of a row-major (N, K) w)
 * are used in place; any other layout through contiguous copies gathered
 * on the GPU (cuda/ops.h, fp8q_cuda_contiguous), as are strided scales and
 * biases.
 *
 * Paths, tried in this order (scaled_mm_paths.c names them, records them
 * and, with FP8Q_LOG=1, prints the one each call took; the switches of
 * cuda/switches.h make a GPU start further down the order):
 *   one call native FP8 (compute capability 8.9+) and everything inside one
 *            cuBLASLt product: the scales (tensorwise; rowwise and blockwise
 *            through cuBLASLt 12.9's scale modes on sm_90+), a bias of the
 *            type cuBLASLt takes for out_dtype, an FP8 result's scale and
 *            amax. With K not a multiple of 16 (or operands misaligned)
 *            while N is, where the padding rule pays: the same one call on
 *            zero-padded copies of the codes (cuda/matmul_padding.h).
 *            Refused (remembered per plan): the next path.
 *   native   native FP8, tensorwise or rowwise: cuBLASLt's FP8 product of
 *            the raw codes into float32, then fp8q's epilogue kernel
 *            (scales, bias, amax, rounding into out_dtype).
 *   padded   native FP8, tensorwise or rowwise, K or N not a multiple of
 *            16 (or misaligned) where the padding rule pays
 *            (cuda/matmul_padding.h): zero-padded copies of the codes in
 *            scratch memory, the FP8 product, its real columns, then the
 *            epilogue.
 *   emulated GPUs without FP8 tensor cores, operands cuBLASLt's FP8
 *            kernels do not take where padding does not pay, or an FP8
 *            product cuBLASLt refuses (no algorithm, status):
 *            the codes decoded exactly into bfloat16 (every float8_e4m3fn
 *            and float8_e5m2 value is a bfloat16 value), a bfloat16 product
 *            into float32, then the epilogue.
 *   blockwise the blockwise scales act inside the sums: both operands are
 *            decoded times their block's scale into float32 (as on the
 *            CPU), a float32 product (no TF32), then the epilogue.
 */
#include <stdio.h>
#include <string.h>

#include "cuda/scaled_mm_ops.h"

#include "core/cast.h"
#include "core/view_layout.h"
#include "cuda/launch.h"
#include "cuda/matmul.h"
#include "cuda/matmul_padding.h"
#include "cuda/matmul_scales.h"
#include "cuda/memory.h"
#include "cuda/ops.h"
#include "cuda/scaled_mm_paths.h"
#include "cuda/scratch.h"
#include "cuda/switches.h"
#include "cuda/view_copy.h"

/* ------------------------------------------------------------------------- */
/* One call's operands                                                       */

/* The gathered copies one call may make, released at its end. */
enum { COPY_A, COPY_W, COPY_SCALE_A, COPY_SCALE_B, COPY_BIAS, COPIES };

/* A call on its way: its C-contiguous operands (copies where the caller's
 * views are not) and the memory they took. */
typedef struct product_call {
    const fp8q_cublaslt *library;
    const fp8q_cuda_device *device;
    const fp8q_cuda_scaled_mm_call *call;
    fp8q_view a;       /* (M, K) */
    fp8q_view w;       /* b.T, (N, K) */
    fp8q_view scale_a;
    fp8q_view scale_b; /* C-contiguous, or the weight layout read in place */
    fp8q_view bias;    /* when bias_ready */
    int bias_ready;
    fp8q_cuda_buffer copies[COPIES];
} product_call;

/* state->bias, a C-contiguous view of call->bias (gathered once). */
static fp8q_status contiguous_bias(product_call *state, fp8q_cu_stream stream,
                                   fp8q_error *error)
{
    fp8q_status status;
    if (state->bias_ready) {
        return FP8Q_OK;
    }
    status = fp8q_cuda_contiguous(state->device, state->call->bias, stream,
                                  &state->copies[COPY_BIAS], &state->bias,
                                  error);
    state->bias_ready = status == FP8Q_OK;
    return status;
}

/* destination (count elements of `dtype`, on the GPU) = decode(source)
 * (times its scale when `scale` is not NULL, addressed as `addressing`
 * says), for `count` values `source` of `source_dtype` on the GPU (FP8
 * codes, or a 16-bit bias). */
static fp8q_status decode(const fp8q_cuda_device *cuda, const void *source,
                          fp8q_dtype source_dtype, int64_t count,
                          fp8q_dtype dtype, const float *scale,
                          const fp8q_cast_args *addressing, void *destination,
                          fp8q_cu_stream stream, fp8q_error *error)
{
    fp8q_cast_args args;

    if (addressing != NULL) {
        args = *addressing;
    }
    else {
        memset(&args, 0, sizeof args);
        args.row_length = 1;
        args.scale_block_rows = 1;
        args.scale_block_cols = 1;
    }
    args.source = source;
    args.destination = destination;
    args.scale = scale;
    args.count = count;
    args.source_dtype = (int32_t)source_dtype;
    args.destination_dtype = (int32_t)dtype;
    args.scale_op = FP8Q_SCALE_MULTIPLY;
    args.saturate = 1;
    return fp8q_cuda_launch_cast(cuda, &args, stream, error);
}

/* The blockwise addressing of a's (1 x 128) scales over a (M, K) and of
 * b's (128 x 128) scales (ceil(K/128), ceil(N/128)) over w = b.T (N, K). */
static void block_addressing(int64_t k, int64_t n, fp8q_cast_args *a_args,
                             fp8q_cast_args *b_args)
{
    const int64_t k_blocks = fp8q_block_count(k, FP8Q_SCALED_MM_BLOCK);
    const int64_t n_blocks = fp8q_block_count(n, FP8Q_SCALED_MM_BLOCK);

    memset(a_args, 0, sizeof *a_args);
    a_args->row_length = k > 0 ? k : 1;
    a_args->scale_block_rows = 1;
    a_args->scale_block_cols = FP8Q_SCALED_MM_BLOCK;
    a_args->scale_row_stride = k_blocks;
    a_args->scale_col_stride = 1;
    *b_args = *a_args;
    b_args->scale_block_rows = FP8Q_SCALED_MM_BLOCK;
    b_args->scale_row_stride = 1;        /* w's row n: scale_b[., n / 128] */
    b_args->scale_col_stride = n_blocks; /* w's column k: scale_b[k / 128, .] */
}

/* Puts "scaled_mm (MODE scaling, path: PATH): " before the message of a
 * failure on `path`, so that an error from cuBLASLt or the driver (which
 * names its call, status and the M, N, K and types of the product it ran)
 * also says which call of scaled_mm and which of its paths it was. */
static void name_the_path(fp8q_error *error, fp8q_scaling mode,
                          fp8q_cuda_mm_path path)
{
    char message[FP8Q_ERROR_MESSAGE_SIZE];
    memcpy(message, error->message, sizeof message);
    (void)fp8q_fail(error, error->status,
                    "scaled_mm (%s scaling, path: %s): %s",
                    fp8q_scaling_name(mode), fp8q_cuda_mm_path_name(path),
                    message);
}

/* Records the path `state`'s product took. */
static void path_taken(const product_call *state, fp8q_cuda_mm_path path)
{
    fp8q_cuda_mm_path_taken(state->device->index, state->call->mode,
                            state->a.shape[0], state->w.shape[0],
                            state->a.shape[1], path);
}

/* ------------------------------------------------------------------------- */
/* One cuBLASLt call                                                         */

/* Whether cuBLASLt's FP8 kernels take a bias of `bias` for a result of
 * `out` (cuBLASLt's table of FP8 types): bfloat16 for bfloat16, float32 and
 * FP8 results, float16 for float16 and FP8 results. Other biases take the
 * epilogue kernel, rather than being rounded. */
static int cublaslt_takes_bias(fp8q_dtype out, fp8q_dtype bias)
{
    switch (out) {
    case FP8Q_BFLOAT16:
    case FP8Q_FLOAT32: return bias == FP8Q_BFLOAT16;
    case FP8Q_FLOAT16: return bias == FP8Q_FLOAT16;
    case FP8Q_FLOAT8_E4M3FN:
        return bias == FP8Q_BFLOAT16 || bias == FP8Q_FLOAT16;
    default: return 0;
    }
}

/* fp8q's scaling mode as cuBLASLt's. */
static fp8q_matmul_scaling matmul_scaling(fp8q_scaling mode)
{
    switch (mode) {
    case FP8Q_SCALING_ROWWISE: return FP8Q_MATMUL_ROWWISE;
    case FP8Q_SCALING_BLOCKWISE: return FP8Q_MATMUL_BLOCKWISE;
    default: return FP8Q_MATMUL_TENSORWISE;
    }
}

/* Whether the call can be one cuBLASLt product (its FP8 operands aligned):
 * the mode available; K a multiple of 128 for block scales (each block
 * whole); rowwise scales of M and N values (cuBLASLt's OUTER_VEC_32F reads
 * that many: one side given as a single value, repeated, takes the
 * epilogue kernel, which repeats it); a bias cuBLASLt takes; amax only of
 * an FP8 result (cuBLASLt's AMAX_D); K > 0 (cuBLASLt refuses empty sums,
 * whose result is the bias). */
static int one_call_fits(const product_call *state)
{
    const fp8q_cuda_scaled_mm_call *call = state->call;
    const fp8q_dtype out = call->out->dtype;
    const fp8q_matmul_scaling scaling = matmul_scaling(call->mode);
    const int64_t k = state->a.shape[1];
    if (k == 0 || !fp8q_matmul_scaling_available(state->library,
                                                 state->device, scaling)) {
        return 0;
    }
    if (scaling == FP8Q_MATMUL_BLOCKWISE && k % FP8Q_SCALED_MM_BLOCK != 0) {
        return 0;
    }
    if (scaling == FP8Q_MATMUL_ROWWISE &&
        (fp8q_view_size(call->scale_a) != state->a.shape[0] ||
         fp8q_view_size(call->scale_b) != state->w.shape[0])) {
        return 0;
    }
    if (call->bias != NULL && !cublaslt_takes_bias(out, call->bias->dtype)) {
        return 0;
    }
    return call->amax_out == NULL || out == FP8Q_FLOAT8_E4M3FN;
}

/* Whether cuBLASLt needs D's scale: an FP8 result with a scale_result on
 * the GPU, or one other than 1 on the host. */
static int needs_d_scale(const fp8q_cuda_scaled_mm_call *call)
{
    return call->scale_result_on_device != NULL ||
           (call->has_scale_result && call->scale_result != 1.0f);
}

/* The scratch parts of one call before any padded operands: D's scale,
 * then the block scales. */
static size_t one_call_scales_bytes(const fp8q_matmul *problem)
{
    return FP8Q_MATMUL_D_SCALE_BYTES +
           (problem->scaling == FP8Q_MATMUL_BLOCKWISE
                ? fp8q_cuda_scratch_rounded(fp8q_matmul_block_scales_bytes(
                      problem->m, problem->n, problem->k))
                : 0);
}

/*
 * The whole product as one cuBLASLt call into out, when it fits: scales in
 * cuBLASLt's layouts (block scales transposed and padded on the GPU), bias,
 * an FP8 result's D scale (1 / scale_result, on the GPU) and amax, every
 * temporary in the device's reused scratch memory. With `padded` (K not
 * a multiple of 16 or operands misaligned, N a multiple of 16) the product
 * runs on zero-padded copies of a and w there (cuda/matmul_padding.h): the
 * result, bias and row scales are untouched. *done = 1 when done, 0 when
 * cuBLASLt refused it (remembered: the next path runs; a refusal
 * remembered before leaves at once, nothing made). With
 * `scale_b_transposed`, block scale_b is the transposed view of a
 * C-contiguous (ceil(N/128), K/128) array (scale_b_is_weight_layout), read
 * in place.
 */
static fp8q_status one_call(product_call *state, const fp8q_matmul *codes,
                            int padded, int scale_b_transposed,
                            fp8q_cu_stream stream, int *done,
                            fp8q_error *error)
{
    const fp8q_cuda_mm_path path =
        padded ? FP8Q_CUDA_MM_ONE_CALL_PADDED : FP8Q_CUDA_MM_ONE_CALL;
    const fp8q_cuda_scaled_mm_call *call = state->call;
    const fp8q_cuda_device *cuda = state->device;
    fp8q_matmul problem = *codes;
    fp8q_cuda_scratch scratch;
    fp8q_status status;
    int refused = 0;

    *done = 0;
    problem.scaling = matmul_scaling(call->mode);
    problem.d = call->out->data;
    problem.d_dtype = call->out->dtype;
    problem.a_scale = (const float *)state->scale_a.data;
    problem.b_scale = (const float *)state->scale_b.data;
    /* A refusal cuBLASLt gave before: the next path, with nothing made.
     * (The plan's key sees only whether bias and D's scale are set.) */
    problem.bias = call->bias != NULL ? call->bias->data : NULL;
    problem.bias_dtype = call->bias != NULL ? call->bias->dtype
                                            : FP8Q_FLOAT32;
    problem.d_scale = needs_d_scale(call) ? &call->scale_result : NULL;
    problem.amax_d = (float *)call->amax_out;
    if (padded ? fp8q_matmul_padded_refused(cuda, &problem)
               : fp8q_matmul_refused(cuda, &problem)) {
        return FP8Q_OK;
    }
    problem.d_scale = NULL; /* made in the scratch memory below */
    if (call->bias != NULL) {
        status = contiguous_bias(state, stream, error);
        if (status != FP8Q_OK) {
            return status;
        }
        problem.bias = state->bias.data;
    }
    status = fp8q_cuda_scratch_acquire(
        cuda,
        one_call_scales_bytes(&problem) +
            (padded ? fp8q_matmul_padding_bytes(problem.m, problem.n,
                                                problem.k)
                    : 0),
        stream, &scratch, error);
    if (status == FP8Q_OK && needs_d_scale(call)) {
        status = fp8q_matmul_d_scale(cuda, call->scale_result_on_device,
                                     call->scale_result, scratch.memory,
                                     stream, &problem.d_scale, error);
    }
    if (status == FP8Q_OK && problem.scaling == FP8Q_MATMUL_BLOCKWISE) {
        status = fp8q_matmul_block_scales(
            cuda, problem.a_scale, problem.b_scale, scale_b_transposed,
            problem.m, problem.n, problem.k,
            (char *)scratch.memory + FP8Q_MATMUL_D_SCALE_BYTES, stream,
            &problem.a_scale, &problem.b_scale, error);
    }
    if (status == FP8Q_OK && padded) {
        const fp8q_matmul real = problem;
        status = fp8q_matmul_pad(
            cuda, &real,
            (char *)scratch.memory + one_call_scales_bytes(&real), stream,
            &problem, error);
    }
    if (status == FP8Q_OK) {
        status = fp8q_cuda_matmul(state->library, cuda, &problem, stream,
                                  &refused, error);
    }
    fp8q_cuda_scratch_release(&scratch, stream);
    if (refused) {
        fp8q_error_clear(error);
        return FP8Q_OK;
    }
    if (status != FP8Q_OK) {
        name_the_path(error, call->mode, path);
        return status;
    }
    path_taken(state, path);
    *done = 1;
    return FP8Q_OK;
}

/* ------------------------------------------------------------------------- */
/* The sums and the epilogue                                                 */

/* The float32 sums of a product, then the epilogue kernel, are made along
 * one of the paths FP8Q_CUDA_MM_FP8 (cuBLASLt's FP8 product of the codes
 * as they are), FP8Q_CUDA_MM_FP8_PADDED (the same of zero-padded copies,
 * matmul_padding.h), FP8Q_CUDA_MM_BFLOAT16 (the codes decoded exactly into
 * bfloat16) or FP8Q_CUDA_MM_BLOCKWISE (the codes decoded times their block
 * scales, float32). */

/* The element size of the decoded operands of `path` (0: none). */
static size_t decoded_size(fp8q_cuda_mm_path path)
{
    return path == FP8Q_CUDA_MM_BFLOAT16     ? 2
           : path == FP8Q_CUDA_MM_BLOCKWISE ? 4
                                             : 0;
}

/* Scratch bytes of the operands `path` makes for an (m, k) @ (k, n)
 * product: its padded or decoded copies of a and w. */
static size_t operand_bytes(fp8q_cuda_mm_path path, int64_t m, int64_t n,
                            int64_t k)
{
    if (path == FP8Q_CUDA_MM_FP8_PADDED) {
        return fp8q_matmul_padding_bytes(m, n, k);
    }
    return fp8q_cuda_scratch_rounded((size_t)(m * k) * decoded_size(path)) +
           fp8q_cuda_scratch_rounded((size_t)(n * k) * decoded_size(path));
}

/*
 * The float32 sums of a @ w.T into codes->d (float32 (m, n)) along `path`,
 * its operands made in `operands` (operand_bytes of scratch memory), with
 * the device scales of the blockwise mode. *refused as fp8q_cuda_matmul
 * says.
 */
static fp8q_status sums(const fp8q_cublaslt *library,
                        const fp8q_cuda_device *cuda, const fp8q_matmul *codes,
                        fp8q_cuda_mm_path path, const float *scale_a,
                        const float *scale_b, void *operands,
                        fp8q_cu_stream stream, int *refused, fp8q_error *error)
{
    const size_t size = decoded_size(path);
    fp8q_matmul problem = *codes;
    fp8q_cast_args a_addressing, b_addressing;
    char *a_operand = (char *)operands;
    char *b_operand = a_operand + fp8q_cuda_scratch_rounded(
                                      (size_t)(codes->m * codes->k) * size);

    *refused = 0;
    if (path == FP8Q_CUDA_MM_FP8_PADDED) {
        fp8q_matmul padded;
        if (fp8q_matmul_pad(cuda, codes, operands, stream, &padded, error) !=
                FP8Q_OK ||
            fp8q_cuda_matmul(library, cuda, &padded, stream, refused,
                             error) != FP8Q_OK) {
            return error->status;
        }
        return fp8q_matmul_crop(cuda, codes, &padded, stream, error);
    }
    if (path == FP8Q_CUDA_MM_BFLOAT16 || path == FP8Q_CUDA_MM_BLOCKWISE) {
        const fp8q_dtype dtype =
            path == FP8Q_CUDA_MM_BFLOAT16 ? FP8Q_BFLOAT16 : FP8Q_FLOAT32;
        const int blockwise = path == FP8Q_CUDA_MM_BLOCKWISE;
        block_addressing(codes->k, codes->n, &a_addressing, &b_addressing);
        if (decode(cuda, codes->a, codes->a_dtype, codes->m * codes->k, dtype,
                   blockwise ? scale_a : NULL,
                   blockwise ? &a_addressing : NULL, a_operand, stream,
                   error) != FP8Q_OK ||
            decode(cuda, codes->b, codes->b_dtype, codes->n * codes->k, dtype,
                   blockwise ? scale_b : NULL,
                   blockwise ? &b_addressing : NULL, b_operand, stream,
                   error) != FP8Q_OK) {
            return error->status;
        }
        problem.a = a_operand;
        problem.b = b_operand;
        problem.a_dtype = dtype;
        problem.b_dtype = dtype;
        problem.fast_accumulation = 0;
    }
    return fp8q_cuda_matmul(library, cuda, &problem, stream, refused, error);
}

/* out (FP8) = float32 result / *scale_result, saturating: the cast
 * kernel's correctly rounded division and single rounding, as the
 * epilogue's own division with a host scale_result. */
static fp8q_status divide_into_out(const fp8q_cuda_device *cuda,
                                   const float *result,
                                   const float *scale_result,
                                   const fp8q_view *out,
                                   fp8q_cu_stream stream, fp8q_error *error)
{
    fp8q_cast_args args;
    memset(&args, 0, sizeof args);
    args.source = result;
    args.destination = out->data;
    args.scale = scale_result;
    args.count = fp8q_view_size(out);
    args.row_length = 1;
    args.scale_block_rows = 1;
    args.scale_block_cols = 1;
    args.source_dtype = (int32_t)FP8Q_FLOAT32;
    args.destination_dtype = (int32_t)out->dtype;
    args.scale_op = FP8Q_SCALE_DIVIDE;
    args.saturate = 1;
    return fp8q_cuda_launch_cast(cuda, &args, stream, error);
}

/*
 * The epilogue of float32 sums `product` (M, N) into out: scales (but the
 * blockwise ones, already inside the sums), bias (a 16-bit one decoded
 * into float32 at `bias_float32` first), amax, rounding into out_dtype; a
 * scale_result on the GPU through the epilogue's float32 result in place,
 * then divided by it into out by the cast kernel (the same correctly
 * rounded float32 division and single rounding).
 */
static fp8q_status epilogue(product_call *state, float *product,
                            float *bias_float32, fp8q_cu_stream stream,
                            fp8q_error *error)
{
    const fp8q_cuda_scaled_mm_call *call = state->call;
    fp8q_epilogue_args args;
    fp8q_status status;

    memset(&args, 0, sizeof args);
    if (call->bias != NULL) {
        status = contiguous_bias(state, stream, error);
        if (status != FP8Q_OK) {
            return status;
        }
        args.bias = (const float *)state->bias.data;
        if (state->bias.dtype != FP8Q_FLOAT32) {
            status = decode(state->device, state->bias.data,
                            state->bias.dtype, state->w.shape[0],
                            FP8Q_FLOAT32, NULL, NULL, bias_float32, stream,
                            error);
            if (status != FP8Q_OK) {
                return status;
            }
            args.bias = bias_float32;
        }
    }
    args.divide = call->has_scale_result &&
                  call->scale_result_on_device == NULL;
    args.scale_result = call->scale_result;
    if (call->mode != FP8Q_SCALING_BLOCKWISE) {
        args.scale_a = (const float *)state->scale_a.data;
        args.scale_b = (const float *)state->scale_b.data;
        args.scale_a_stride = fp8q_view_size(&state->scale_a) > 1;
        args.scale_b_stride = fp8q_view_size(&state->scale_b) > 1;
    }
    if (call->amax_out != NULL) {
        args.amax_bits = (uint32_t *)call->amax_out;
        status = fp8q_cuda_zero(state->device, args.amax_bits, 4, stream,
                                error);
        if (status != FP8Q_OK) {
            return status;
        }
    }
    args.product = product;
    args.destination = call->out->data;
    args.m = state->a.shape[0];
    args.n = state->w.shape[0];
    args.destination_dtype = (int32_t)call->out->dtype;
    if (call->scale_result_on_device != NULL) {
        args.destination = product;
        args.destination_dtype = (int32_t)FP8Q_FLOAT32;
    }
    status = fp8q_cuda_launch_epilogue(state->device, &args, stream, error);
    if (status == FP8Q_OK && call->scale_result_on_device != NULL) {
        status = divide_into_out(state->device, product,
                                 call->scale_result_on_device, call->out,
                                 stream, error);
    }
    return status;
}

/* ------------------------------------------------------------------------- */
/* Path policy                                                               */

/* 0 while fp8q_cuda_scaled_mm_set_padding(0) has switched padding off (for
 * the benchmark that times padded against exact products). */
static volatile int padding_enabled = 1;

int fp8q_cuda_scaled_mm_set_padding(int enabled)
{
    const int previous = padding_enabled;
    padding_enabled = enabled != 0;
    return previous;
}

/*
 * The FP8 path of `problem` on `cuda` (cuda/switches.h has the switches):
 * FP8Q_CUDA_MM_FP8 for operands cuBLASLt's FP8 kernels take as they are,
 * else FP8Q_CUDA_MM_FP8_PADDED where padding_enabled and the padding rule
 * say so, and always under FP8Q_CUDA_SCALED_MM_PATH=padded;
 * FP8Q_CUDA_MM_BFLOAT16 where neither applies, without FP8 tensor cores
 * (or switched off) and under FP8Q_CUDA_SCALED_MM_PATH=exact. The one call
 * runs along the first two too.
 */
static fp8q_cuda_mm_path fp8_path_of(const fp8q_cuda_device *cuda,
                                     const fp8q_matmul *problem)
{
    const fp8q_scaled_mm_path_switch forced =
        fp8q_cuda_switches_get()->scaled_mm_path;

    if (!cuda->fp8_tensor_cores || forced == FP8Q_SCALED_MM_PATH_EXACT) {
        return FP8Q_CUDA_MM_BFLOAT16;
    }
    if (forced == FP8Q_SCALED_MM_PATH_PADDED) {
        return FP8Q_CUDA_MM_FP8_PADDED;
    }
    if (fp8q_matmul_fp8_aligned(problem)) {
        return FP8Q_CUDA_MM_FP8;
    }
    return padding_enabled &&
                   fp8q_matmul_padding_pays(problem->m, problem->n,
                                            problem->k)
               ? FP8Q_CUDA_MM_FP8_PADDED
               : FP8Q_CUDA_MM_BFLOAT16;
}

/* Whether block scale_b is the transpose of a C-contiguous (ceil(N/128),
 * K/128) array: a weight's own block scales passed as weight_scale.T
 * (fp8q.torch's layer does), which the one cuBLASLt call reads in place
 * (cuda/matmul_scales.h) instead of a contiguous copy made per call. */
static int scale_b_is_weight_layout(const fp8q_cuda_scaled_mm_call *call)
{
    const fp8q_view *view = call->scale_b;
    return call->mode == FP8Q_SCALING_BLOCKWISE && view->ndim == 2 &&
           !fp8q_view_is_contiguous(view) && view->strides[0] == 1 &&
           view->strides[1] == view->shape[0];
}

/* Whether the product may be one cuBLASLt call along `fp8_path` (its
 * fp8_path_of): on the FP8 operands as they are, or on padded copies
 * when N needs no padding (a padded N would need a padded result, which
 * only the sums paths crop); not under FP8Q_CUDA_SCALED_MM_PATH=epilogue;
 * and one_call_fits. */
static int one_call_allowed(const product_call *state,
                            fp8q_cuda_mm_path fp8_path)
{
    return (fp8_path == FP8Q_CUDA_MM_FP8 ||
            (fp8_path == FP8Q_CUDA_MM_FP8_PADDED &&
             state->w.shape[0] % 16 == 0)) &&
           fp8q_cuda_switches_get()->scaled_mm_path !=
               FP8Q_SCALED_MM_PATH_EPILOGUE &&
           one_call_fits(state);
}

/* The path the sums of `problem` (float32 d) take: blockwise for block
 * scales; else fp8_path_of's, unless cuBLASLt refused that FP8 product
 * before (remembered in its plan: then no operand of it is made, nor
 * scratch memory acquired for them) and the sums are made in bfloat16. */
static fp8q_cuda_mm_path first_sums_path(const product_call *state,
                                         const fp8q_matmul *problem)
{
    const fp8q_cuda_device *cuda = state->device;
    fp8q_matmul sums_problem = *problem;
    fp8q_cuda_mm_path path;

    if (state->call->mode == FP8Q_SCALING_BLOCKWISE) {
        return FP8Q_CUDA_MM_BLOCKWISE;
    }
    path = fp8_path_of(cuda, problem);
    sums_problem.d = NULL; /* the sums lie in the scratch memory */
    if ((path == FP8Q_CUDA_MM_FP8 &&
         fp8q_matmul_refused(cuda, &sums_problem)) ||
        (path == FP8Q_CUDA_MM_FP8_PADDED &&
         fp8q_matmul_padded_refused(cuda, &sums_problem))) {
        return FP8Q_CUDA_MM_BFLOAT16;
    }
    return path;
}

/* ------------------------------------------------------------------------- */
/* The product                                                               */

int fp8q_cuda_scaled_mm_uses_cublaslt(const fp8q_cuda_scaled_mm_call *call)
{
    return fp8q_view_is_contiguous(call->out) && call->a->shape[0] > 0 &&
           call->b->shape[1] > 0;
}

/* The sums along the first path that takes them, in the device's reused
 * scratch memory with the operands their path makes and a float32 copy of
 * a 16-bit bias, then the epilogue: an FP8 product cuBLASLt refuses now (a
 * refusal remembered before took the bfloat16 path in first_sums_path) is
 * made again from exact bfloat16 operands (their scratch acquired anew). */
static fp8q_status sums_and_epilogue(product_call *state,
                                     fp8q_matmul *problem,
                                     fp8q_cu_stream stream, fp8q_error *error)
{
    const int64_t m = problem->m, n = problem->n, k = problem->k;
    const fp8q_cuda_scaled_mm_call *call = state->call;
    fp8q_cuda_scratch product = {NULL, NULL, 0, {0, 0}};
    const size_t product_bytes = fp8q_cuda_scratch_rounded((size_t)(m * n) * 4);
    const size_t bias_bytes =
        call->bias != NULL && call->bias->dtype != FP8Q_FLOAT32
            ? fp8q_cuda_scratch_rounded((size_t)n * 4)
            : 0;
    fp8q_cuda_mm_path path;
    fp8q_status status;
    int refused = 0;

    problem->d_dtype = FP8Q_FLOAT32;
    path = first_sums_path(state, problem);
    for (;;) {
        status = fp8q_cuda_scratch_acquire(
            state->device,
            product_bytes + operand_bytes(path, m, n, k) + bias_bytes,
            stream, &product, error);
        if (status != FP8Q_OK) {
            break;
        }
        problem->d = product.memory;
        status = sums(state->library, state->device, problem, path,
                      (const float *)state->scale_a.data,
                      (const float *)state->scale_b.data,
                      (char *)product.memory + product_bytes, stream,
                      &refused, error);
        if (!refused || (path != FP8Q_CUDA_MM_FP8 &&
                         path != FP8Q_CUDA_MM_FP8_PADDED)) {
            break;
        }
        fp8q_cuda_scratch_release(&product, stream);
        path = FP8Q_CUDA_MM_BFLOAT16;
    }
    if (status != FP8Q_OK) {
        name_the_path(error, call->mode, path);
        fp8q_cuda_scratch_release(&product, stream);
        return status;
    }
    status = epilogue(state, (float *)product.memory,
                      (float *)((char *)product.memory + product_bytes +
                                operand_bytes(path, m, n, k)),
                      stream, error);
    if (status == FP8Q_OK) {
        path_taken(state, path);
    }
    fp8q_cuda_scratch_release(&product, stream);
    return status;
}

/* The product of a C-contiguous a and w (state's), scale_a ready: the one
 * cuBLASLt call where it is allowed and cuBLASLt takes it, else the sums
 * and the epilogue. */
static fp8q_status run(product_call *state, fp8q_cu_stream stream,
                       fp8q_error *error)
{
    const fp8q_cuda_scaled_mm_call *call = state->call;
    fp8q_matmul problem;
    fp8q_cuda_mm_path fp8_path;
    fp8q_status status;
    int one_call_first, scale_b_in_place, done = 0;

    memset(&problem, 0, sizeof problem);
    problem.m = state->a.shape[0];
    problem.n = state->w.shape[0];
    problem.k = state->a.shape[1];
    problem.a = state->a.data;
    problem.b = state->w.data;
    problem.a_dtype = state->a.dtype;
    problem.b_dtype = state->w.dtype;
    problem.fast_accumulation = call->use_fast_accum;
    problem.d = call->out->data;
    fp8_path = fp8_path_of(state->device, &problem);
    /* A weight's block scales as its layer passes them are read in place
     * by the one call; a contiguous copy only for the other paths. */
    one_call_first = one_call_allowed(state, fp8_path);
    scale_b_in_place = one_call_first && scale_b_is_weight_layout(call);
    if (scale_b_in_place) {
        state->scale_b = *call->scale_b;
    }
    else {
        status = fp8q_cuda_contiguous(
            state->device, call->scale_b, stream,
            &state->copies[COPY_SCALE_B], &state->scale_b, error);
        if (status != FP8Q_OK) {
            return status;
        }
    }
    if (one_call_first) {
        status = one_call(state, &problem,
                          fp8_path == FP8Q_CUDA_MM_FP8_PADDED,
                          scale_b_in_place, stream, &done, error);
        if (status != FP8Q_OK || done) {
            return status;
        }
    }
    if (scale_b_in_place) {
        /* Refused: the blockwise path reads a contiguous scale_b. */
        status = fp8q_cuda_contiguous(
            state->device, call->scale_b, stream,
            &state->copies[COPY_SCALE_B], &state->scale_b, error);
        if (status != FP8Q_OK) {
            return status;
        }
    }
    return sums_and_epilogue(state, &problem, stream, error);
}

fp8q_status fp8q_cuda_scaled_mm(const fp8q_cublaslt *library,
                                const fp8q_cuda_device *device,
                                const fp8q_cuda_scaled_mm_call *call,
                                fp8q_cu_stream stream, fp8q_error *error)
{
    product_call state;
    fp8q_view w_view;
    fp8q_status status;
    int index;

    if (!fp8q_view_is_contiguous(call->out)) {
        char strides[256];
        fp8q_format_shape(strides, sizeof strides, call->out->ndim,
                          call->out->strides);
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "scaled_mm: on CUDA, out= must be C-contiguous, got "
                         "strides %s (pass a C-contiguous out, or none)",
                         strides);
    }
    if (call->a->shape[0] == 0 || call->b->shape[1] == 0) {
        /* Nothing to compute; the amax of no values is 0. */
        return call->amax_out == NULL
                   ? FP8Q_OK
                   : fp8q_cuda_zero(device, call->amax_out, 4, stream, error);
    }
    if (library == NULL || library->error.status != FP8Q_OK) {
        return fp8q_fail(error, FP8Q_ERROR_CUDA,
                         "scaled_mm: cuBLASLt is not loaded");
    }
    memset(&state, 0, sizeof state);
    state.library = library;
    state.device = device;
    state.call = call;
    /* The fast layout, a row-major and b = w.T of a row-major w, is used
     * as it is; other layouts through contiguous copies made on the GPU. */
    w_view = *call->b;
    w_view.shape[0] = call->b->shape[1];
    w_view.shape[1] = call->b->shape[0];
    w_view.strides[0] = call->b->strides[1];
    w_view.strides[1] = call->b->strides[0];
    status = fp8q_cuda_contiguous(device, call->a, stream,
                                  &state.copies[COPY_A], &state.a, error);
    if (status == FP8Q_OK) {
        status = fp8q_cuda_contiguous(device, &w_view, stream,
                                      &state.copies[COPY_W], &state.w, error);
    }
    if (status == FP8Q_OK) {
        status = fp8q_cuda_contiguous(device, call->scale_a, stream,
                                      &state.copies[COPY_SCALE_A],
                                      &state.scale_a, error);
    }
    if (status == FP8Q_OK) {
        status = run(&state, stream, error);
    }
    for (index = 0; index < COPIES; index++) {
        fp8q_cuda_buffer_release(&state.copies[index], stream);
    }
    return status;
}

/* The host view `source` copied into `buffer` on the device, *copy its
 * C-contiguous view there. */
static fp8q_status host_to_device(const fp8q_cuda_device *device,
                                  const fp8q_view *source,
                                  fp8q_cu_stream stream,
                                  fp8q_cuda_buffer *buffer, fp8q_view *copy,
                                  fp8q_error *error)
{
    fp8q_status status = fp8q_cuda_buffer_alloc(
        device, (size_t)fp8q_view_nbytes(source), stream, buffer, error);

    if (status == FP8Q_OK) {
        status = fp8q_view_init_contiguous(copy, buffer->data, source->dtype,
                                           source->ndim, source->shape,
                                           error);
    }
    return status != FP8Q_OK
               ? status
               : fp8q_cuda_copy_view(device, source, 1, buffer->data, 0,
                                     stream, error);
}

/* fp8q_cuda_scaled_mm with the flagged host scales and bias copied to
 * `device` first (when the product reads them). */
static fp8q_status scaled_mm_from_host(const fp8q_cublaslt *library,
                                       const fp8q_cuda_device *device,
                                       const fp8q_cuda_scaled_mm_call *call,
                                       fp8q_cu_stream stream,
                                       fp8q_error *error)
{
    const int on_host[3] = {call->scale_a_on_host, call->scale_b_on_host,
                            call->bias_on_host && call->bias != NULL};
    const fp8q_view *given[3] = {call->scale_a, call->scale_b, call->bias};
    const int reads = fp8q_cuda_scaled_mm_uses_cublaslt(call);
    fp8q_cuda_scaled_mm_call on_device = *call;
    const fp8q_view **used[3];
    fp8q_cuda_buffer copies[3];
    fp8q_view views[3];
    fp8q_status status = FP8Q_OK;
    int index;

    used[0] = &on_device.scale_a;
    used[1] = &on_device.scale_b;
    used[2] = &on_device.bias;
    memset(copies, 0, sizeof copies);
    for (index = 0; index < 3 && status == FP8Q_OK; index++) {
        if (reads && on_host[index]) {
            status = host_to_device(device, given[index], stream,
                                    &copies[index], &views[index], error);
            if (status == FP8Q_OK) {
                *used[index] = &views[index];
            }
        }
    }
    if (status == FP8Q_OK) {
        status = fp8q_cuda_scaled_mm(library, device, &on_device, stream,
                                     error);
    }
    for (index = 0; index < 3; index++) {
        fp8q_cuda_buffer_release(&copies[index], stream);
    }
    return status;
}

fp8q_status fp8q_scaled_mm_on_device(const fp8q_cublaslt *library,
                                     const fp8q_cuda_device *device,
                                     const fp8q_cuda_scaled_mm_call *call,
                                     fp8q_cu_stream stream, fp8q_sgemm sgemm,
                                     void *sgemm_context, int out_is_new,
                                     fp8q_error *error)
{
    fp8q_scaled_mm_run_call run;
    fp8q_view amax;

    if (device != NULL) {
        return scaled_mm_from_host(library, device, call, stream, error);
    }
    memset(&run, 0, sizeof run);
    memset(&amax, 0, sizeof amax);
    amax.data = call->amax_out;
    amax.dtype = FP8Q_FLOAT32;
    run.a = call->a;
    run.b = call->b;
    run.scale_a = call->scale_a;
    run.scale_b = call->scale_b;
    run.bias = call->bias;
    run.amax_out = call->amax_out != NULL ? &amax : NULL;
    run.out = call->out;
    run.mode = call->mode;
    run.scale_result = call->has_scale_result ? call->scale_result : 1.0f;
    run.out_is_new = out_is_new;
    run.sgemm = sgemm;
    run.sgemm_context = sgemm_context;
    return fp8q_scaled_mm_run(&run, error);
}
