/*
 * scaled_mm_cuda.c - the CUDA half of fp8q.scaled_mm (scaled_mm.c checks the
 * arguments): which path a product takes on the GPU, the operands and
 * temporaries it needs there, and the cuBLASLt product and epilogue kernel
 * that compute it. docs/scaled_mm.md, "On the GPU".
 *
 * Layout: a row-major and b column-major (b = w.T of a row-major (N, K) w)
 * are used in place; any other layout through contiguous copies gathered
 * on the GPU (kernels/gather.cuh).
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

#include "python/binding.h"

#include "core/cast.h"
#include "core/scaled_mm.h"
#include "cuda/cublaslt.h"
#include "cuda/launch.h"
#include "cuda/matmul.h"
#include "cuda/matmul_padding.h"
#include "cuda/matmul_scales.h"
#include "cuda/memory.h"
#include "cuda/scratch.h"
#include "cuda/switches.h"
#include "platform.h"

#define MAX_WHEEL_DIRECTORIES 192

/* ------------------------------------------------------------------------- */
/* cuBLASLt                                                                  */

/* The NVIDIA wheels' library directories under each install folder of this
 * interpreter (fp8q._install_folders: never the working directory, a
 * script's folder or another sys.path entry), as UTF-8 strings owned by
 * `texts`; their count, or -1 with an exception. */
static int wheel_directories(PyObject **texts, const char **directories)
{
#if defined(_WIN32)
    /* CUDA 13's wheels keep the DLLs in bin/x86_64, CUDA 12's in bin. */
    static const char *const wheel_subdirectories[] = {
        "nvidia/cu13/bin/x86_64", "nvidia/cu13/bin", "nvidia/cublas/bin"};
#else
    static const char *const wheel_subdirectories[] = {"nvidia/cu13/lib",
                                                       "nvidia/cublas/lib"};
#endif
#define N_WHEEL_SUBDIRECTORIES \
    (sizeof wheel_subdirectories / sizeof wheel_subdirectories[0])
    PyObject *folders = NULL;
    PyObject *helper = PyImport_ImportModule("fp8q._install_folders");
    Py_ssize_t entry;
    int count = 0;

    if (helper != NULL) {
        folders = PyObject_CallMethod(helper, "package_folders", NULL);
        Py_DECREF(helper);
    }
    if (folders == NULL) {
        return -1;
    }
    if (!PyList_Check(folders)) {
        Py_DECREF(folders);
        PyErr_SetString(PyExc_TypeError,
                        "fp8q._install_folders.package_folders() must "
                        "return a list");
        return -1;
    }
    for (entry = 0; entry < PyList_GET_SIZE(folders) &&
                    count + (int)N_WHEEL_SUBDIRECTORIES <=
                        MAX_WHEEL_DIRECTORIES;
         entry++) {
        PyObject *folder = PyList_GET_ITEM(folders, entry);
        size_t sub;
        if (!PyUnicode_Check(folder)) {
            continue;
        }
        for (sub = 0; sub < N_WHEEL_SUBDIRECTORIES; sub++) {
            texts[count] = PyUnicode_FromFormat("%U/%s", folder,
                                                wheel_subdirectories[sub]);
            directories[count] = texts[count] != NULL
                                     ? PyUnicode_AsUTF8(texts[count])
                                     : NULL;
            if (directories[count] == NULL) {
                /* Not UTF-8 (a lone surrogate): not a path fp8q can open. */
                Py_XDECREF(texts[count]);
                PyErr_Clear();
                continue;
            }
            count++;
        }
    }
    Py_DECREF(folders);
    return count;
}

/* Loads cuBLASLt (once; GIL released meanwhile). NULL with
 * fp8q.CudaError when none is usable. */
static const fp8q_cublaslt *load_cublaslt(void)
{
    const fp8q_cublaslt *library = fp8q_cublaslt_loaded();
    PyObject *texts[MAX_WHEEL_DIRECTORIES];
    const char *directories[MAX_WHEEL_DIRECTORIES];
    int count;
    int index;

    if (library == NULL) {
        count = wheel_directories(texts, directories);
        if (count < 0) {
            return NULL;
        }
        Py_BEGIN_ALLOW_THREADS
        library = fp8q_cublaslt_load(directories, count);
        Py_END_ALLOW_THREADS
        for (index = 0; index < count; index++) {
            Py_DECREF(texts[index]);
        }
    }
    if (library->error.status != FP8Q_OK) {
        fp8q_py_raise(&library->error);
        return NULL;
    }
    return library;
}

/* ------------------------------------------------------------------------- */
/* Operands                                                                  */

/* `tensor` as a C-contiguous tensor on `device` (itself when it is one);
 * NULL with an exception. */
static fp8q_TensorObject *on_device(fp8q_TensorObject *tensor,
                                    const fp8q_py_device *device,
                                    fp8q_cu_stream stream)
{
    if (tensor->device_type == device->type &&
        tensor->device_index == device->index &&
        fp8q_view_is_contiguous(&tensor->view)) {
        return (fp8q_TensorObject *)Py_NewRef(tensor);
    }
    return fp8q_tensor_copy_to(tensor, device, stream);
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

/* ------------------------------------------------------------------------- */
/* Errors                                                                    */

/* Puts "scaled_mm (MODE scaling, path: PATH): " before the message of a
 * failure on `path`, so that an error from cuBLASLt or the driver (which
 * names its call, status and the M, N, K and types of the product it ran)
 * also says which call of scaled_mm and which of its paths it was. */
static void name_the_path(fp8q_error *error, const fp8q_py_scaled_mm *call,
                          fp8q_py_mm_path path)
{
    char message[FP8Q_ERROR_MESSAGE_SIZE];
    memcpy(message, error->message, sizeof message);
    (void)snprintf(error->message, sizeof error->message,
                   "scaled_mm (%s scaling, path: %s): %s",
                   fp8q_scaling_name(call->mode), fp8q_py_mm_path_name(path),
                   message);
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
static int one_call_fits(const fp8q_cublaslt *library,
                         const fp8q_py_scaled_mm *call, int64_t k)
{
    const fp8q_dtype out = call->out->view.dtype;
    const fp8q_matmul_scaling scaling = matmul_scaling(call->mode);
    if (k == 0 || !fp8q_matmul_scaling_available(library, call->a->cuda_device,
                                                 scaling)) {
        return 0;
    }
    if (scaling == FP8Q_MATMUL_BLOCKWISE && k % FP8Q_SCALED_MM_BLOCK != 0) {
        return 0;
    }
    if (scaling == FP8Q_MATMUL_ROWWISE &&
        (fp8q_view_size(&call->scale_a->view) != call->a->view.shape[0] ||
         fp8q_view_size(&call->scale_b->view) != call->b->view.shape[1])) {
        return 0;
    }
    if (call->bias != NULL &&
        !cublaslt_takes_bias(out, call->bias->view.dtype)) {
        return 0;
    }
    return call->amax_out == NULL || out == FP8Q_FLOAT8_E4M3FN;
}

/* Whether cuBLASLt needs D's scale: an FP8 result with a scale_result on
 * the GPU, or one other than 1 on the host. */
static int needs_d_scale(const fp8q_py_scaled_mm *call)
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
 * result, bias and row scales are untouched. Returns 1 when done, 0
 * when cuBLASLt refused it (remembered: the next path runs; a refusal
 * remembered before returns 0 at once, nothing made), -1 with an
 * exception. `keep` takes the temporaries. With `scale_b_transposed`,
 * block scale_b is the transposed view of a C-contiguous (ceil(N/128),
 * K/128) array (scale_b_is_weight_layout), read in place.
 */
static int one_call(const fp8q_cublaslt *library,
                    const fp8q_py_scaled_mm *call, const fp8q_matmul *codes,
                    int padded, fp8q_TensorObject *scale_a,
                    fp8q_TensorObject *scale_b, int scale_b_transposed,
                    fp8q_cu_stream stream, fp8q_TensorObject **keep,
                    int *n_keep)
{
    const fp8q_py_mm_path path =
        padded ? FP8Q_PY_MM_ONE_CALL_PADDED : FP8Q_PY_MM_ONE_CALL;
    const fp8q_py_device device = {FP8Q_DEVICE_CUDA, call->a->device_index};
    const fp8q_cuda_device *cuda = call->a->cuda_device;
    fp8q_matmul problem = *codes;
    fp8q_TensorObject *bias = NULL;
    fp8q_cuda_scratch scratch;
    const float *scale_result_on_device = NULL;
    fp8q_error error;
    fp8q_status status;
    int refused = 0;

    problem.scaling = matmul_scaling(call->mode);
    problem.d = call->out->view.data;
    problem.d_dtype = call->out->view.dtype;
    problem.a_scale = (const float *)scale_a->view.data;
    problem.b_scale = (const float *)scale_b->view.data;
    /* A refusal cuBLASLt gave before: the next path, with nothing made.
     * (The plan's key sees only whether bias and D's scale are set.) */
    problem.bias = call->bias != NULL ? call->bias->view.data : NULL;
    problem.bias_dtype = call->bias != NULL ? call->bias->view.dtype
                                            : FP8Q_FLOAT32;
    problem.d_scale = needs_d_scale(call) ? &call->scale_result : NULL;
    problem.amax_d =
        call->amax_out != NULL ? (float *)call->amax_out->view.data : NULL;
    if (padded ? fp8q_matmul_padded_refused(cuda, &problem)
               : fp8q_matmul_refused(cuda, &problem)) {
        return 0;
    }
    problem.d_scale = NULL; /* made in the scratch memory below */
    if (call->bias != NULL) {
        bias = on_device(call->bias, &device, stream);
        if (bias == NULL) {
            return -1;
        }
        keep[(*n_keep)++] = bias;
        if (fp8q_py_use_on_stream(bias, stream) < 0) {
            return -1;
        }
        problem.bias = bias->view.data;
    }
    if (call->scale_result_on_device != NULL) {
        if (fp8q_py_use_on_stream(call->scale_result_on_device, stream) < 0) {
            return -1;
        }
        scale_result_on_device =
            (const float *)call->scale_result_on_device->view.data;
    }
    if (call->amax_out != NULL &&
        fp8q_py_use_on_stream(call->amax_out, stream) < 0) {
        return -1;
    }
    fp8q_error_clear(&error);
    Py_BEGIN_ALLOW_THREADS
    status = fp8q_cuda_scratch_acquire(
        cuda,
        one_call_scales_bytes(&problem) +
            (padded ? fp8q_matmul_padding_bytes(problem.m, problem.n,
                                                problem.k)
                    : 0),
        stream, &scratch, &error);
    if (status == FP8Q_OK && needs_d_scale(call)) {
        status = fp8q_matmul_d_scale(cuda, scale_result_on_device,
                                     call->scale_result, scratch.memory,
                                     stream, &problem.d_scale, &error);
    }
    if (status == FP8Q_OK && problem.scaling == FP8Q_MATMUL_BLOCKWISE) {
        status = fp8q_matmul_block_scales(
            cuda, problem.a_scale, problem.b_scale, scale_b_transposed,
            problem.m, problem.n, problem.k,
            (char *)scratch.memory + FP8Q_MATMUL_D_SCALE_BYTES, stream,
            &problem.a_scale, &problem.b_scale, &error);
    }
    if (status == FP8Q_OK && padded) {
        const fp8q_matmul real = problem;
        status = fp8q_matmul_pad(
            cuda, &real,
            (char *)scratch.memory + one_call_scales_bytes(&real), stream,
            &problem, &error);
    }
    if (status == FP8Q_OK) {
        status = fp8q_cuda_matmul(library, cuda, &problem, stream, &refused,
                                  &error);
    }
    fp8q_cuda_scratch_release(&scratch, stream);
    Py_END_ALLOW_THREADS
    if (refused) {
        return 0;
    }
    if (status != FP8Q_OK) {
        name_the_path(&error, call, path);
        return fp8q_py_raise_on_failure(status, &error);
    }
    fp8q_py_mm_path_taken(call, path);
    return 1;
}

/* out (FP8) = float32 result / *scale_result, saturating: the cast
 * kernel's correctly rounded division and single rounding, as the
 * epilogue's own division with a host scale_result. */
static fp8q_status divide_into_out(const fp8q_cuda_device *cuda,
                                   const float *result,
                                   const float *scale_result,
                                   fp8q_TensorObject *out,
                                   fp8q_cu_stream stream, fp8q_error *error)
{
    fp8q_cast_args args;
    memset(&args, 0, sizeof args);
    args.source = result;
    args.destination = out->view.data;
    args.scale = scale_result;
    args.count = fp8q_view_size(&out->view);
    args.row_length = 1;
    args.scale_block_rows = 1;
    args.scale_block_cols = 1;
    args.source_dtype = (int32_t)FP8Q_FLOAT32;
    args.destination_dtype = (int32_t)out->view.dtype;
    args.scale_op = FP8Q_SCALE_DIVIDE;
    args.saturate = 1;
    return fp8q_cuda_launch_cast(cuda, &args, stream, error);
}

/* ------------------------------------------------------------------------- */
/* The product                                                               */

/* The float32 sums of a product, then the epilogue kernel, are made along
 * one of the paths FP8Q_PY_MM_FP8 (cuBLASLt's FP8 product of the codes as
 * they are), FP8Q_PY_MM_FP8_PADDED (the same of zero-padded copies,
 * matmul_padding.h), FP8Q_PY_MM_BFLOAT16 (the codes decoded exactly into
 * bfloat16) or FP8Q_PY_MM_BLOCKWISE (the codes decoded times their block
 * scales, float32). */

/* The element size of the decoded operands of `path` (0: none). */
static size_t decoded_size(fp8q_py_mm_path path)
{
    return path == FP8Q_PY_MM_BFLOAT16 ? 2 : path == FP8Q_PY_MM_BLOCKWISE ? 4 : 0;
}

/* Scratch bytes of the operands `path` makes for an (m, k) @ (k, n)
 * product: its padded or decoded copies of a and w. */
static size_t operand_bytes(fp8q_py_mm_path path, int64_t m, int64_t n, int64_t k)
{
    if (path == FP8Q_PY_MM_FP8_PADDED) {
        return fp8q_matmul_padding_bytes(m, n, k);
    }
    return fp8q_cuda_scratch_rounded((size_t)(m * k) * decoded_size(path)) +
           fp8q_cuda_scratch_rounded((size_t)(n * k) * decoded_size(path));
}

/*
 * The float32 sums of a @ w.T into codes->d (float32 (m, n)) along `path`,
 * its operands made in `operands` (operand_bytes of scratch memory), with
 * the device scales of the blockwise mode. *refused as fp8q_cuda_matmul
 * says. Call without the GIL.
 */
static fp8q_status sums(const fp8q_cublaslt *library,
                        const fp8q_cuda_device *cuda, const fp8q_matmul *codes,
                        fp8q_py_mm_path path, const float *scale_a,
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
    if (path == FP8Q_PY_MM_FP8_PADDED) {
        fp8q_matmul padded;
        if (fp8q_matmul_pad(cuda, codes, operands, stream, &padded, error) !=
                FP8Q_OK ||
            fp8q_cuda_matmul(library, cuda, &padded, stream, refused,
                             error) != FP8Q_OK) {
            return error->status;
        }
        return fp8q_matmul_crop(cuda, codes, &padded, stream, error);
    }
    if (path == FP8Q_PY_MM_BFLOAT16 || path == FP8Q_PY_MM_BLOCKWISE) {
        const fp8q_dtype dtype =
            path == FP8Q_PY_MM_BFLOAT16 ? FP8Q_BFLOAT16 : FP8Q_FLOAT32;
        const int blockwise = path == FP8Q_PY_MM_BLOCKWISE;
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

/* 0 while fp8q._C._scaled_mm_padding(False) has switched padding off (for
 * the benchmark that times padded against exact products). */
static volatile int padding_enabled = 1;

/*
 * The FP8 path of `problem` on `cuda` (cuda/switches.h has the switches):
 * FP8Q_PY_MM_FP8 for operands cuBLASLt's FP8 kernels take as they are,
 * else FP8Q_PY_MM_FP8_PADDED where padding_enabled and the padding rule say
 * so, and always under FP8Q_CUDA_SCALED_MM_PATH=padded; FP8Q_PY_MM_BFLOAT16
 * where neither applies, without FP8 tensor cores (or switched off) and
 * under FP8Q_CUDA_SCALED_MM_PATH=exact. The one call runs along the first
 * two too.
 */
static fp8q_py_mm_path fp8_path_of(const fp8q_cuda_device *cuda,
                                   const fp8q_matmul *problem)
{
    const fp8q_scaled_mm_path_switch forced =
        fp8q_cuda_switches_get()->scaled_mm_path;

    if (!cuda->fp8_tensor_cores || forced == FP8Q_SCALED_MM_PATH_EXACT) {
        return FP8Q_PY_MM_BFLOAT16;
    }
    if (forced == FP8Q_SCALED_MM_PATH_PADDED) {
        return FP8Q_PY_MM_FP8_PADDED;
    }
    if (fp8q_matmul_fp8_aligned(problem)) {
        return FP8Q_PY_MM_FP8;
    }
    return padding_enabled &&
                   fp8q_matmul_padding_pays(problem->m, problem->n,
                                            problem->k)
               ? FP8Q_PY_MM_FP8_PADDED
               : FP8Q_PY_MM_BFLOAT16;
}

/* Whether the product may be one cuBLASLt call along `fp8_path` (its
 * fp8_path_of): on the FP8 operands as they are, or on padded copies
 * when N needs no padding (a padded N would need a padded result, which
 * only the sums paths crop); not under FP8Q_CUDA_SCALED_MM_PATH=epilogue;
 * and one_call_fits. */
/* Whether block scale_b is, on the call's device, the transpose of a
 * C-contiguous (ceil(N/128), K/128) array: a weight's own block scales
 * passed as weight_scale.T (fp8q.torch's layer does), which the one
 * cuBLASLt call reads in place (cuda/matmul_scales.h) instead of a
 * contiguous copy made per call. */
static int scale_b_is_weight_layout(const fp8q_py_scaled_mm *call)
{
    const fp8q_view *view = &call->scale_b->view;
    return call->mode == FP8Q_SCALING_BLOCKWISE && view->ndim == 2 &&
           call->scale_b->device_type == FP8Q_DEVICE_CUDA &&
           call->scale_b->device_index == call->a->device_index &&
           !fp8q_view_is_contiguous(view) && view->strides[0] == 1 &&
           view->strides[1] == view->shape[0];
}

static int one_call_allowed(const fp8q_cublaslt *library,
                            const fp8q_py_scaled_mm *call,
                            fp8q_py_mm_path fp8_path, int64_t n, int64_t k)
{
    return (fp8_path == FP8Q_PY_MM_FP8 ||
            (fp8_path == FP8Q_PY_MM_FP8_PADDED && n % 16 == 0)) &&
           fp8q_cuda_switches_get()->scaled_mm_path !=
               FP8Q_SCALED_MM_PATH_EPILOGUE &&
           one_call_fits(library, call, k);
}

/* The path the sums of `problem` (float32 d) take: blockwise for block
 * scales; else fp8_path_of's, unless cuBLASLt refused that FP8 product
 * before (remembered in its plan: then no operand of it is made, nor
 * scratch memory acquired for them) and the sums are made in bfloat16. */
static fp8q_py_mm_path first_sums_path(const fp8q_py_scaled_mm *call,
                                       const fp8q_matmul *problem)
{
    const fp8q_cuda_device *cuda = call->a->cuda_device;
    fp8q_matmul sums_problem = *problem;
    fp8q_py_mm_path path;

    if (call->mode == FP8Q_SCALING_BLOCKWISE) {
        return FP8Q_PY_MM_BLOCKWISE;
    }
    path = fp8_path_of(cuda, problem);
    sums_problem.d = NULL; /* the sums lie in the scratch memory */
    if ((path == FP8Q_PY_MM_FP8 && fp8q_matmul_refused(cuda, &sums_problem)) ||
        (path == FP8Q_PY_MM_FP8_PADDED &&
         fp8q_matmul_padded_refused(cuda, &sums_problem))) {
        return FP8Q_PY_MM_BFLOAT16;
    }
    return path;
}

int fp8q_py_cuda_scaled_mm(const fp8q_py_scaled_mm *call,
                           fp8q_cu_stream stream)
{
    const fp8q_py_device device = {FP8Q_DEVICE_CUDA, call->a->device_index};
    const int64_t m = call->a->view.shape[0];
    const int64_t k = call->a->view.shape[1];
    const int64_t n = call->b->view.shape[1];
    const fp8q_cuda_device *cuda = call->a->cuda_device;
    const fp8q_cublaslt *library;
    fp8q_TensorObject *a = NULL; /* call->a, C-contiguous */
    fp8q_TensorObject *w = NULL; /* b.T, (N, K) C-contiguous */
    /* Tensors this call made, released at the end: at most a, w's view,
     * w, scale_a, scale_b (twice: in place, then a copy) and bias, and
     * one_call's bias. */
    fp8q_TensorObject *keep[9];
    fp8q_TensorObject *scale_a = NULL, *scale_b = NULL, *bias = NULL;
    fp8q_cuda_scratch product = {NULL, NULL, 0, {0, 0}};
    fp8q_matmul problem;
    fp8q_epilogue_args epilogue;
    fp8q_view w_view;
    fp8q_error error;
    fp8q_status status;
    int n_keep = 0;
    int result = -1;
    int refused = 0;
    int one_call_first, scale_b_in_place;
    fp8q_py_mm_path path, fp8_path;
    size_t product_bytes, bias_bytes;
    int done;
    int index;

    if (!fp8q_view_is_contiguous(&call->out->view)) {
        char strides[256];
        fp8q_format_shape(strides, sizeof strides, call->out->view.ndim,
                          call->out->view.strides);
        PyErr_Format(PyExc_ValueError,
                     "scaled_mm: on CUDA, out= must be C-contiguous, got "
                     "strides %s (pass a C-contiguous out, or none)",
                     strides);
        return -1;
    }
    if (m == 0 || n == 0) {
        /* Nothing to compute; the amax of no values is 0. */
        if (call->amax_out == NULL) {
            return 0;
        }
        fp8q_error_clear(&error);
        if (fp8q_py_use_on_stream(call->amax_out, stream) < 0) {
            return -1;
        }
        Py_BEGIN_ALLOW_THREADS
        status = fp8q_cuda_zero(cuda, call->amax_out->view.data, 4, stream,
                                &error);
        Py_END_ALLOW_THREADS
        return fp8q_py_raise_on_failure(status, &error);
    }
    library = load_cublaslt();
    if (library == NULL) {
        return -1;
    }
    fp8q_error_clear(&error);
    /* The fast layout, a row-major and b = w.T of a row-major w, is used
     * as it is; other layouts through contiguous copies made on the GPU. */
    a = fp8q_py_cuda_contiguous(call->a, stream);
    if (a == NULL) {
        return -1;
    }
    keep[n_keep++] = a;
    w_view = call->b->view;
    w_view.shape[0] = n;
    w_view.shape[1] = k;
    w_view.strides[0] = call->b->view.strides[1];
    w_view.strides[1] = call->b->view.strides[0];
    w = fp8q_tensor_new_view(&w_view, (PyObject *)call->b, 1);
    if (w == NULL) {
        goto done;
    }
    keep[n_keep++] = w;
    w = fp8q_py_cuda_contiguous(w, stream);
    if (w == NULL) {
        goto done;
    }
    keep[n_keep++] = w;

    scale_a = on_device(call->scale_a, &device, stream);
    if (scale_a == NULL) {
        goto done;
    }
    keep[n_keep++] = scale_a;
    memset(&problem, 0, sizeof problem);
    problem.m = m;
    problem.n = n;
    problem.k = k;
    problem.a = a->view.data;
    problem.b = w->view.data;
    problem.a_dtype = a->view.dtype;
    problem.b_dtype = w->view.dtype;
    problem.fast_accumulation = call->use_fast_accum;
    problem.d = call->out->view.data;
    fp8_path = fp8_path_of(cuda, &problem);
    /* A weight's block scales as its layer passes them are read in place
     * by the one call; a contiguous copy only for the other paths. */
    one_call_first = one_call_allowed(library, call, fp8_path, n, k);
    scale_b_in_place = one_call_first && scale_b_is_weight_layout(call);
    scale_b = scale_b_in_place
                  ? (fp8q_TensorObject *)Py_NewRef(call->scale_b)
                  : on_device(call->scale_b, &device, stream);
    if (scale_b == NULL) {
        goto done;
    }
    keep[n_keep++] = scale_b;

    if (fp8q_py_use_on_stream(a, stream) < 0 ||
        fp8q_py_use_on_stream(w, stream) < 0 ||
        fp8q_py_use_on_stream(scale_a, stream) < 0 ||
        fp8q_py_use_on_stream(scale_b, stream) < 0 ||
        fp8q_py_use_on_stream(call->out, stream) < 0) {
        goto done;
    }
    if (one_call_first) {
        done = one_call(library, call, &problem,
                        fp8_path == FP8Q_PY_MM_FP8_PADDED, scale_a, scale_b,
                        scale_b_in_place, stream, keep, &n_keep);
        if (done != 0) {
            result = done < 0 ? -1 : 0;
            goto done;
        }
    }
    if (scale_b_in_place) {
        /* Refused: the blockwise path reads a contiguous scale_b. */
        scale_b = on_device(call->scale_b, &device, stream);
        if (scale_b == NULL || fp8q_py_use_on_stream(scale_b, stream) < 0) {
            Py_XDECREF(scale_b);
            goto done;
        }
        keep[n_keep++] = scale_b;
    }
    /* The float32 sums and the operands their path makes, then a float32
     * copy of a 16-bit bias, in the device's reused scratch memory; an FP8
     * product cuBLASLt refuses now (a refusal remembered before took the
     * bfloat16 path in first_sums_path) is made again from exact bfloat16
     * operands (their scratch acquired anew). */
    product_bytes = fp8q_cuda_scratch_rounded((size_t)(m * n) * 4);
    bias_bytes = call->bias != NULL &&
                         call->bias->view.dtype != FP8Q_FLOAT32
                     ? fp8q_cuda_scratch_rounded((size_t)n * 4)
                     : 0;
    problem.d_dtype = FP8Q_FLOAT32;
    path = first_sums_path(call, &problem);
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        status = fp8q_cuda_scratch_acquire(
            cuda,
            product_bytes + operand_bytes(path, m, n, k) +
                bias_bytes,
            stream, &product, &error);
        if (status != FP8Q_OK) {
            break;
        }
        problem.d = product.memory;
        status = sums(library, cuda, &problem, path,
                      (const float *)scale_a->view.data,
                      (const float *)scale_b->view.data,
                      (char *)product.memory + product_bytes, stream,
                      &refused, &error);
        if (!refused ||
            (path != FP8Q_PY_MM_FP8 && path != FP8Q_PY_MM_FP8_PADDED)) {
            break;
        }
        fp8q_cuda_scratch_release(&product, stream);
        path = FP8Q_PY_MM_BFLOAT16;
    }
    Py_END_ALLOW_THREADS
    if (status != FP8Q_OK) {
        name_the_path(&error, call, path);
        (void)fp8q_py_raise_on_failure(status, &error);
        goto done;
    }

    /* The epilogue: scales, bias, amax, rounding into out_dtype. */
    memset(&epilogue, 0, sizeof epilogue);
    if (call->bias != NULL) {
        bias = on_device(call->bias, &device, stream);
        if (bias == NULL) {
            goto done;
        }
        keep[n_keep++] = bias;
        if (fp8q_py_use_on_stream(bias, stream) < 0) {
            goto done;
        }
        epilogue.bias = (const float *)bias->view.data;
    }
    if (bias_bytes > 0) {
        float *bias_float32 =
            (float *)((char *)product.memory + product_bytes +
                      operand_bytes(path, m, n, k));
        Py_BEGIN_ALLOW_THREADS
        status = decode(cuda, bias->view.data, bias->view.dtype, n,
                        FP8Q_FLOAT32, NULL, NULL, bias_float32, stream,
                        &error);
        Py_END_ALLOW_THREADS
        if (fp8q_py_raise_on_failure(status, &error) < 0) {
            goto done;
        }
        epilogue.bias = bias_float32;
    }
    /* A scale_result on the GPU: the epilogue's float32 result in place,
     * then divided by it into out by the cast kernel (the same correctly
     * rounded float32 division and single rounding). */
    epilogue.divide = call->has_scale_result &&
                      call->scale_result_on_device == NULL;
    epilogue.scale_result = call->scale_result;
    if (call->mode != FP8Q_SCALING_BLOCKWISE) {
        epilogue.scale_a = (const float *)scale_a->view.data;
        epilogue.scale_b = (const float *)scale_b->view.data;
        epilogue.scale_a_stride = fp8q_view_size(&scale_a->view) > 1;
        epilogue.scale_b_stride = fp8q_view_size(&scale_b->view) > 1;
    }
    if (call->amax_out != NULL) {
        if (fp8q_py_use_on_stream(call->amax_out, stream) < 0) {
            goto done;
        }
        epilogue.amax_bits = (uint32_t *)call->amax_out->view.data;
        Py_BEGIN_ALLOW_THREADS
        status = fp8q_cuda_zero(cuda, epilogue.amax_bits, 4, stream, &error);
        Py_END_ALLOW_THREADS
        if (fp8q_py_raise_on_failure(status, &error) < 0) {
            goto done;
        }
    }
    epilogue.product = (const float *)product.memory;
    epilogue.destination = call->out->view.data;
    epilogue.m = m;
    epilogue.n = n;
    epilogue.destination_dtype = (int32_t)call->out->view.dtype;
    if (call->scale_result_on_device != NULL) {
        if (fp8q_py_use_on_stream(call->scale_result_on_device, stream) < 0) {
            goto done;
        }
        epilogue.destination = product.memory;
        epilogue.destination_dtype = (int32_t)FP8Q_FLOAT32;
    }
    Py_BEGIN_ALLOW_THREADS
    status = fp8q_cuda_launch_epilogue(cuda, &epilogue, stream, &error);
    if (status == FP8Q_OK && call->scale_result_on_device != NULL) {
        status = divide_into_out(
            cuda, (const float *)product.memory,
            (const float *)call->scale_result_on_device->view.data,
            call->out, stream, &error);
    }
    Py_END_ALLOW_THREADS
    result = fp8q_py_raise_on_failure(status, &error);
    if (result == 0) {
        fp8q_py_mm_path_taken(call, path);
    }

done:
    Py_BEGIN_ALLOW_THREADS
    fp8q_cuda_scratch_release(&product, stream);
    Py_END_ALLOW_THREADS
    for (index = 0; index < n_keep; index++) {
        Py_DECREF(keep[index]);
    }
    return result;
}

/* ------------------------------------------------------------------------- */
/* fp8q._C._cublaslt_info()                                                  */

/* A list of the names of the scaling modes whose bits are set. */
static PyObject *mode_names(unsigned bits)
{
    static const char *const names[] = {"unscaled", "tensorwise", "rowwise",
                                        "blockwise"};
    PyObject *list = PyList_New(0);
    size_t index;
    for (index = 0; list != NULL && index < sizeof names / sizeof names[0];
         index++) {
        PyObject *name;
        if (!(bits & (1u << index))) {
            continue;
        }
        name = PyUnicode_FromString(names[index]);
        if (name == NULL || PyList_Append(list, name) < 0) {
            Py_XDECREF(name);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(name);
    }
    return list;
}

/* {"DEVICE": {"accepted": [...], "refused": [...]}} for the devices where
 * cuBLASLt ran or refused products so far, by scaling mode. */
static PyObject *scale_modes_seen(void)
{
    PyObject *seen = PyDict_New();
    int index;
    for (index = 0; seen != NULL && index < FP8Q_CUBLASLT_MAX_DEVICES;
         index++) {
        unsigned accepted, refused;
        PyObject *entry;
        char key[16];
        fp8q_matmul_modes_seen(index, &accepted, &refused);
        if (accepted == 0 && refused == 0) {
            continue;
        }
        entry = Py_BuildValue("{s:N,s:N}", "accepted", mode_names(accepted),
                              "refused", mode_names(refused));
        (void)snprintf(key, sizeof key, "%d", index);
        if (entry == NULL || PyDict_SetItemString(seen, key, entry) < 0) {
            Py_XDECREF(entry);
            Py_CLEAR(seen);
            break;
        }
        Py_DECREF(entry);
    }
    return seen;
}

/* The places the search tried before its outcome, a list of "place
 * (reason)" strings (fp8q_cublaslt.search). */
static PyObject *search_lines(const fp8q_cublaslt *library)
{
    PyObject *text = PyUnicode_DecodeUTF8(
        library->search, (Py_ssize_t)strlen(library->search), "replace");
    PyObject *lines;

    if (text == NULL) {
        return NULL;
    }
    lines = PyUnicode_Splitlines(text, 0);
    Py_DECREF(text);
    return lines;
}

static PyObject *cublaslt_info(PyObject *module, PyObject *unused)
{
    const fp8q_cublaslt *library;

    (void)module;
    (void)unused;
    library = load_cublaslt();
    if (library == NULL) {
        PyErr_Clear();
        library = fp8q_cublaslt_loaded();
    }
    if (library->error.status != FP8Q_OK) {
        return Py_BuildValue("{s:O,s:O,s:O,s:s,s:N}", "found", Py_False,
                             "version", Py_None, "path", Py_None, "error",
                             library->error.message, "search",
                             search_lines(library));
    }
    return Py_BuildValue(
        "{s:O,s:N,s:s,s:O,s:N,s:N,s:L}", "found", Py_True, "version",
        PyUnicode_FromFormat("%d.%d.%d", (int)(library->version / 10000),
                             (int)(library->version / 100 % 100),
                             (int)(library->version % 100)),
        "path", library->path, "error", Py_None, "search",
        search_lines(library), "scale_modes", scale_modes_seen(),
        "candidates_timed", (long long)fp8q_matmul_candidates_timed());
}

static PyObject *scaled_mm_padding(PyObject *module, PyObject *enabled)
{
    const int previous = padding_enabled;
    const int wanted = PyObject_IsTrue(enabled);

    (void)module;
    if (wanted < 0) {
        return NULL;
    }
    padding_enabled = wanted;
    return PyBool_FromLong(previous);
}

/* ------------------------------------------------------------------------- */
/* fp8q._C._gemm_tuning_export / _gemm_tuning_import (fp8q.gemm_tuning)     */

/* The index of CUDA device `object` (an int), opened, with cuBLASLt
 * loaded; -1 with an exception. */
static int tuning_device(PyObject *object, const fp8q_cublaslt **library)
{
    const int index = PyLong_Check(object) ? (int)PyLong_AsLong(object) : -1;
    if (!PyLong_Check(object) || (index == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError,
                        "the GEMM tuning functions take a CUDA device index");
        return -1;
    }
    if (fp8q_py_cuda_device(index) == NULL) {
        return -1;
    }
    *library = load_cublaslt();
    return *library == NULL ? -1 : index;
}

static PyObject *gemm_tuning_export(PyObject *module, PyObject *device)
{
    fp8q_cuda_device_properties properties;
    const fp8q_cublaslt *library;
    char driver_version[32];
    fp8q_error error;
    fp8q_status status;
    PyObject *text;
    PyObject *lines;
    char *buffer;
    size_t length;
    const int index = tuning_device(device, &library);

    (void)module;
    if (index < 0) {
        return NULL;
    }
    fp8q_error_clear(&error);
    status = fp8q_cuda_device_properties_get(index, &properties, &error);
    if (fp8q_py_raise_on_failure(status, &error) < 0) {
        return NULL;
    }
    fp8q_cuda_format_version(fp8q_cuda_driver_load()->version,
                             driver_version, sizeof driver_version);
    /* Sized, then written; choices made in between are left out. */
    length = fp8q_matmul_choices_format(index, NULL, 0);
    buffer = (char *)PyMem_Malloc(length + 1);
    if (buffer == NULL) {
        return PyErr_NoMemory();
    }
    (void)fp8q_matmul_choices_format(index, buffer, length + 1);
    text = PyUnicode_DecodeASCII(buffer, (Py_ssize_t)strlen(buffer),
                                 "strict");
    PyMem_Free(buffer);
    if (text == NULL) {
        return NULL;
    }
    lines = PyUnicode_Splitlines(text, 0);
    Py_DECREF(text);
    if (lines == NULL) {
        return NULL;
    }
    return Py_BuildValue(
        "{s:s,s:N,s:s,s:N,s:N}", "gpu", properties.name,
        "compute_capability",
        PyUnicode_FromFormat("%d.%d", properties.compute_capability_major,
                             properties.compute_capability_minor),
        "driver", driver_version, "cublaslt",
        PyUnicode_FromFormat("%d.%d.%d", (int)(library->version / 10000),
                             (int)(library->version / 100 % 100),
                             (int)(library->version % 100)),
        "choices", lines);
}

static PyObject *gemm_tuning_import(PyObject *module, PyObject *args)
{
    const fp8q_cublaslt *library;
    PyObject *device, *lines, *sequence;
    Py_ssize_t position;
    int index;

    (void)module;
    if (!PyArg_ParseTuple(args, "OO:_gemm_tuning_import", &device, &lines)) {
        return NULL;
    }
    index = tuning_device(device, &library);
    if (index < 0) {
        return NULL;
    }
    sequence = PySequence_Fast(lines, "the choices must be a list of str");
    if (sequence == NULL) {
        return NULL;
    }
    for (position = 0; position < PySequence_Fast_GET_SIZE(sequence);
         position++) {
        PyObject *item = PySequence_Fast_GET_ITEM(sequence, position);
        const char *line = PyUnicode_Check(item) ? PyUnicode_AsUTF8(item)
                                                 : NULL;
        fp8q_error error;
        if (line == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError,
                                "the choices must be a list of str");
            }
            Py_DECREF(sequence);
            return NULL;
        }
        fp8q_error_clear(&error);
        if (fp8q_py_raise_on_failure(
                fp8q_matmul_choice_add(index, line, &error), &error) < 0) {
            Py_DECREF(sequence);
            return NULL;
        }
    }
    position = PySequence_Fast_GET_SIZE(sequence);
    Py_DECREF(sequence);
    return PyLong_FromSsize_t(position);
}

static PyMethodDef scaled_mm_cuda_functions[] = {
    {"_scaled_mm_padding", scaled_mm_padding, METH_O,
     "_scaled_mm_padding(enabled)\n--\n\n"
     "Private, for `python -m fp8q bench gemm`: with enabled false, GPU "
     "products whose K or N is not a multiple of 16 take the exact "
     "bfloat16 path instead of zero-padded FP8 operands (the default, "
     "true, follows csrc/cuda/matmul_padding.h's rule). Process-wide; "
     "returns the previous setting."},
    {"_cublaslt_info", cublaslt_info, METH_NOARGS,
     "_cublaslt_info()\n--\n\n"
     "Loads cuBLASLt as the first GPU scaled_mm would (see "
     "csrc/cuda/cublaslt.h for where it is looked for) and returns {found, "
     "version like '13.10.0', path, error, search: the places tried before "
     "it (or all of them), each 'place (reason)', scale_modes: per device "
     "index "
     "{accepted, refused} scaling modes of the products so far, "
     "candidates_timed: cuBLASLt algorithms timed by the GEMM tuner so "
     "far (csrc/cuda/matmul.h)}."},
    {"_gemm_tuning_export", gemm_tuning_export, METH_O,
     "_gemm_tuning_export(device)\n--\n\n"
     "Private, for fp8q.gemm_tuning.save: {gpu, compute_capability, "
     "driver, cublaslt: what the choices are valid for, choices: the GEMM "
     "tuner's choices of CUDA device `device` as lines "
     "(csrc/cuda/matmul.h, fp8q_matmul_choices_format)}."},
    {"_gemm_tuning_import", gemm_tuning_import, METH_VARARGS,
     "_gemm_tuning_import(device, lines)\n--\n\n"
     "Private, for fp8q.gemm_tuning.load: adds choice lines of "
     "_gemm_tuning_export to CUDA device `device`'s (no key check here); "
     "returns their number. ValueError for a line that is not one."},
    {NULL, NULL, 0, NULL},
};

int fp8q_py_scaled_mm_cuda_init(PyObject *module)
{
    return PyModule_AddFunctions(module, scaled_mm_cuda_functions);
}
