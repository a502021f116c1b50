/*
 * fake_cuda_driver.c - a stand-in for the CUDA driver library, for testing
 * fp8q's driver loading on machines without a GPU. The tests compile it into
 * a shared library and point FP8Q_CUDA_DRIVER at it.
 *
 * It exports only cuGetProcAddress_v2 (as the real driver does, everything
 * else is found through it) and behaves as environment variables say:
 *   FAKE_CUDA_VERSION     cuDriverGetVersion's value (default 13000)
 *   FAKE_CUDA_INIT_ERROR  the CUresult cuInit returns (default 0)
 *   FAKE_CUDA_DEVICES     the device count (default 1)
 *   FAKE_CUDA_NAME        every device's name (default "Fake GPU")
 *   FAKE_CUDA_CC          compute capability "major.minor" (default "8.9")
 *   FAKE_CUDA_MEMORY      total memory in bytes (default 24 GiB)
 *   FAKE_CUDA_MISSING     an entry point cuGetProcAddress reports missing
 *   FAKE_CUDA_LOAD_ERROR  the CUresult of loading a kernel image (default 0)
 *                         once the image has code for the device
 *   FAKE_CUDA_FIT_IMAGES  when set, loading a fatbin refuses as the real
 *                         driver does, with CUDA_ERROR_NO_BINARY_FOR_GPU
 *                         (209), when none of its images fits the device's
 *                         compute capability (fatbin_refusal); a fatbin
 *                         without images (the header alone, which tests use
 *                         as a stand-in) fits every device. Unset, every
 *                         image fits: most tests pick a compute capability
 *                         for the host side's paths, whatever architectures
 *                         the build's image has
 *   FAKE_CUDA_NO_LIBRARY  when set, there is no cuLibraryLoadData
 *   FAKE_CUDA_LOG         a file each call is appended to: its name, and for
 *                         calls on a stream the handle ("cuMemFreeAsync 0");
 *                         a call refused for a CUDA graph capture adds
 *                         "refused NAME RESULT"
 *   FAKE_CUDA_NO_POOLS    when set, the devices lack the stream-ordered
 *                         allocator (cuMemAlloc / cuMemFree are used)
 *   FAKE_CUDA_ALLOC_ERROR the CUresult of every allocation (default 0)
 *   FAKE_CUDA_POOL_ERROR  the CUresult of cuMemPoolSetAttribute (default 0),
 *                         which is logged as "cuMemPoolSetAttribute
 *                         ATTRIBUTE VALUE" (the value a cuuint64_t)
 *   FAKE_CUDA_OCCUPANCY   the blocks per multiprocessor that
 *                         cuOccupancyMaxActiveBlocksPerMultiprocessor
 *                         reports for every kernel (default 2048 threads'
 *                         worth of the block size asked about)
 *   FAKE_CUDA_MAX_GRID    when set, a launch of more blocks fails
 *   FAKE_CUDA_LAUNCH_LOG  a file each kernel launch is appended to as
 *                         "NAME GRID BLOCK" (tests of the grids' sizes)
 *   FAKE_CUDA_INIT_DELAY_MS  milliseconds cuInit sleeps after logging its
 *                         call (default 0): a slow driver load, for tests of
 *                         what other threads do meanwhile
 *   FAKE_CUDA_READ_DELAY_MS  milliseconds every copy into host memory
 *                         (cuMemcpyAsync to an address that is no device
 *                         allocation) sleeps after copying (default 0): a
 *                         slow read-back, for tests of what other threads
 *                         do while a copy holds no GIL
 *
 * "Device memory" is host memory, copies are memcpy, streams and events
 * are immediate, and CUDA graph capture is a state of streams with the real
 * driver's refusals (tests/fake_cuda_streams.c, compiled into the same
 * library). cuLaunchKernel runs fp8q's kernels on the host as their
 * launch contracts (kernels/<family>.cuh) define them, with
 * the shared codec (csrc/core/float_codec.h): enough to test everything
 * the host side does, not the CUDA kernels themselves. Compile with -I
 * csrc -I kernels -I OUT, OUT a folder that `python3 csrc/registries.py
 * kernels OUT` has written (tests/fake_gpu.py does).
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep; the fakes are built on Linux */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_cuda.h"

/* The kernels' names from their headers (cuda/kernel_list.h). */
#define FP8Q_CUDA_KERNEL_NAMES
#include "cuda/kernel_list.h"

#include "amax.cuh"
#include "calibrate.cuh"
#include "cast.cuh"
#include "core/dtype.h"
#include "core/float_codec.h"
#include "core/histogram_bins.h"
#include "core/norm_formula.h"
#include "core/scale_formula.h"
#include "epilogue.cuh"
#include "gather.cuh"
#include "gemv.cuh"
#include "norm_quantize.cuh"
#include "pad.cuh"
#include "quantize_rows.cuh"
#include "scale.cuh"
#include "transpose.cuh"

int setting(const char *name, int fallback)
{
    const char *text = getenv(name);
    return text != NULL && text[0] != '\0' ? atoi(text) : fallback;
}

void sleep_ms(int milliseconds)
{
    struct timespec delay;
    if (milliseconds <= 0) {
        return;
    }
    delay.tv_sec = milliseconds / 1000;
    delay.tv_nsec = (long)(milliseconds % 1000) * 1000000L;
    (void)nanosleep(&delay, NULL);
}

void log_call(const char *name)
{
    const char *path = getenv("FAKE_CUDA_LOG");
    FILE *file;
    if (path == NULL || path[0] == '\0') {
        return;
    }
    file = fopen(path, "a");
    if (file != NULL) {
        fprintf(file, "%s\n", name);
        fclose(file);
    }
}

/* FAKE_CUDA_LAUNCH_LOG: one line per kernel launch, "NAME GRID BLOCK", and
 * " GRID_Y" after them for a two-dimensional grid. */
static void log_launch(const char *name, unsigned int grid_x,
                       unsigned int grid_y, unsigned int block_x)
{
    const char *path = getenv("FAKE_CUDA_LAUNCH_LOG");
    FILE *file;
    if (path == NULL || path[0] == '\0') {
        return;
    }
    file = fopen(path, "a");
    if (file != NULL) {
        if (grid_y == 1) {
            fprintf(file, "%s %u %u\n", name, grid_x, block_x);
        }
        else {
            fprintf(file, "%s %u %u %u\n", name, grid_x, block_x, grid_y);
        }
        fclose(file);
    }
}

void log_stream_call(const char *name, const void *stream)
{
    char line[96];
    (void)snprintf(line, sizeof line, "%s %llu", name,
                   (unsigned long long)(uintptr_t)stream);
    log_call(line);
}

static const char *error_name(result_t error)
{
    switch (error) {
    case 0: return "CUDA_SUCCESS";
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 209: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case 222: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case 900: return "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    case 901: return "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
    case 902: return "CUDA_ERROR_STREAM_CAPTURE_MERGE";
    case 903: return "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED";
    case 904: return "CUDA_ERROR_STREAM_CAPTURE_UNJOINED";
    case 905: return "CUDA_ERROR_STREAM_CAPTURE_ISOLATION";
    case 906: return "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT";
    case 907: return "CUDA_ERROR_CAPTURED_EVENT";
    case 999: return "CUDA_ERROR_UNKNOWN";
    default: return NULL;
    }
}

static result_t fake_get_error_name(result_t error, const char **text)
{
    *text = error_name(error);
    return *text != NULL ? 0 : 1;
}

static result_t fake_get_error_string(result_t error, const char **text)
{
    *text = error_name(error) != NULL ? "fake driver description" : NULL;
    return *text != NULL ? 0 : 1;
}

static int initialised;

static result_t fake_init(unsigned int flags)
{
    const int error = setting("FAKE_CUDA_INIT_ERROR", 0);
    log_call("cuInit");
    sleep_ms(setting("FAKE_CUDA_INIT_DELAY_MS", 0));
    if (flags != 0) {
        return 1;
    }
    initialised = error == 0;
    return error;
}

static result_t fake_driver_get_version(int *version)
{
    *version = setting("FAKE_CUDA_VERSION", 13000);
    return 0;
}

static result_t fake_device_get_count(int *count)
{
    if (!initialised) {
        return 3;
    }
    *count = setting("FAKE_CUDA_DEVICES", 1);
    return 0;
}

static result_t fake_device_get(int *device, int ordinal)
{
    if (!initialised || ordinal < 0 ||
        ordinal >= setting("FAKE_CUDA_DEVICES", 1)) {
        return 101; /* CUDA_ERROR_INVALID_DEVICE */
    }
    *device = ordinal;
    return 0;
}

static result_t fake_device_get_name(char *name, int length, int device)
{
    const char *text = getenv("FAKE_CUDA_NAME");
    (void)snprintf(name, (size_t)length, "%s %d",
                   text != NULL ? text : "Fake GPU", device);
    return 0;
}

static result_t fake_device_get_attribute(int *value, int attribute,
                                          int device)
{
    const char *text = getenv("FAKE_CUDA_CC");
    int major = 8;
    int minor = 9;
    (void)device;
    if (text != NULL && sscanf(text, "%d.%d", &major, &minor) != 2) {
        return 1;
    }
    if (attribute == 75) {
        *value = major;
        return 0;
    }
    if (attribute == 76) {
        *value = minor;
        return 0;
    }
    if (attribute == 16) { /* multiprocessors */
        *value = 4;
        return 0;
    }
    if (attribute == 115) { /* memory pools supported */
        *value = getenv("FAKE_CUDA_NO_POOLS") == NULL;
        return 0;
    }
    return 1;
}

static result_t fake_device_total_mem(size_t *bytes, int device)
{
    const char *text = getenv("FAKE_CUDA_MEMORY");
    (void)device;
    *bytes = text != NULL ? (size_t)strtoull(text, NULL, 10)
                          : (size_t)24 << 30;
    return 0;
}

static int context_storage;

static result_t fake_primary_ctx_retain(void **context, int device)
{
    (void)device;
    log_call("cuDevicePrimaryCtxRetain");
    *context = &context_storage;
    return 0;
}

static result_t fake_primary_ctx_release(int device)
{
    (void)device;
    log_call("cuDevicePrimaryCtxRelease");
    return 0;
}

static result_t fake_ctx_push(void *context)
{
    (void)context;
    log_call("cuCtxPushCurrent");
    return 0;
}

static result_t fake_ctx_pop(void **context)
{
    log_call("cuCtxPopCurrent");
    *context = &context_storage;
    return 0;
}

static int module_storage;
static int library_storage;

static int fake_compute_capability_major(void);
static int fake_compute_capability_minor(void);

/* A little-endian unsigned integer of `n_bytes` bytes at `bytes`. */
static uint64_t read_le(const unsigned char *bytes, int n_bytes)
{
    uint64_t value = 0;
    int index;
    for (index = n_bytes - 1; index >= 0; index--) {
        value = (value << 8) | bytes[index];
    }
    return value;
}

/* What the real driver answers for the fatbin `image` on the fake device:
 * 0 where an image fits it, else 209 (CUDA_ERROR_NO_BINARY_FOR_GPU). The
 * layout is kernels/fatbin_images.py's: a 16-byte container header (magic
 * 0xBA55ED50, version, header size, payload size), then per image a
 * header (kind 1 PTX / 2 ELF at byte 0, its size at 4, the payload's size
 * at 8, the architecture major*10+minor at 28, flags at 40) and the
 * payload. Real code (ELF) fits a device of the same major version and a
 * minor no higher than the device's; PTX fits a device whose architecture
 * is at least the PTX's (the driver JIT-compiles it). Compression (the
 * flags) is not modelled: every image counts as readable. */
static result_t fatbin_refusal(const void *image)
{
    const unsigned char *bytes = (const unsigned char *)image;
    const int device = 10 * fake_compute_capability_major() +
                       fake_compute_capability_minor();
    uint64_t position;
    uint64_t end;
    int images = 0;

    if (getenv("FAKE_CUDA_FIT_IMAGES") == NULL) {
        return 0;
    }
    if (read_le(bytes, 4) != 0xBA55ED50u) {
        return 200; /* CUDA_ERROR_INVALID_IMAGE */
    }
    position = read_le(bytes + 6, 2);
    end = position + read_le(bytes + 8, 8);
    while (position + 64 <= end) {
        const unsigned char *entry = bytes + position;
        const int kind = (int)read_le(entry, 2);
        const int arch = (int)read_le(entry + 28, 4);
        images++;
        if (kind == 2 && arch / 10 == device / 10 && arch <= device) {
            return 0;
        }
        if (kind == 1 && arch <= device) {
            return 0;
        }
        position += read_le(entry + 4, 4) + read_le(entry + 8, 8);
    }
    return images == 0 ? 0 : 209;
}

static result_t fake_library_load_data(void **library, const void *code,
                                       void *options, void **values,
                                       unsigned int n_options,
                                       void *library_options,
                                       void **library_values,
                                       unsigned int n_library_options)
{
    result_t refused;
    (void)options;
    (void)values;
    (void)n_options;
    (void)library_options;
    (void)library_values;
    (void)n_library_options;
    log_call("cuLibraryLoadData");
    refused = fatbin_refusal(code);
    if (refused != 0) {
        return refused;
    }
    *library = &library_storage;
    return 0;
}

static result_t fake_library_get_module(void **module, void *library)
{
    (void)library;
    log_call("cuLibraryGetModule");
    *module = &module_storage;
    return setting("FAKE_CUDA_LOAD_ERROR", 0);
}

static result_t fake_library_unload(void *library)
{
    (void)library;
    log_call("cuLibraryUnload");
    return 0;
}

static result_t fake_module_load_data(void **module, const void *image)
{
    result_t refused;
    log_call("cuModuleLoadData");
    refused = fatbin_refusal(image);
    if (refused != 0) {
        return refused;
    }
    *module = &module_storage;
    return setting("FAKE_CUDA_LOAD_ERROR", 0);
}

/* ------------------------------------------------------------------------- */
/* Kernels, run on the host                                                  */

static float load_element(const void *base, int64_t i, int dtype)
{
    const uint8_t *bytes = (const uint8_t *)base;
    uint16_t half;
    float value;
    switch (dtype) {
    case FP8Q_FLOAT32:
        memcpy(&value, bytes + 4 * i, 4);
        return value;
    case FP8Q_FLOAT16:
        memcpy(&half, bytes + 2 * i, 2);
        return fp8q_decode_float16(half);
    case FP8Q_BFLOAT16:
        memcpy(&half, bytes + 2 * i, 2);
        return fp8q_decode_bfloat16(half);
    case FP8Q_UINT8:
        return (float)bytes[i];
    case FP8Q_FLOAT8_E4M3FN:
        return fp8q_decode_e4m3fn(bytes[i]);
    case FP8Q_FLOAT8_E5M2:
        return fp8q_decode_e5m2(bytes[i]);
    case FP8Q_FLOAT8_E4M3FNUZ:
        return fp8q_decode_e4m3fnuz(bytes[i]);
    default:
        return fp8q_decode_e5m2fnuz(bytes[i]);
    }
}

static void store_element(void *base, int64_t i, int dtype, float value,
                          int saturate)
{
    uint8_t *bytes = (uint8_t *)base;
    uint16_t half;
    switch (dtype) {
    case FP8Q_FLOAT32:
        memcpy(bytes + 4 * i, &value, 4);
        return;
    case FP8Q_FLOAT16:
        half = fp8q_encode_float16(value);
        memcpy(bytes + 2 * i, &half, 2);
        return;
    case FP8Q_BFLOAT16:
        half = fp8q_encode_bfloat16(value);
        memcpy(bytes + 2 * i, &half, 2);
        return;
    case FP8Q_UINT8:
        bytes[i] = fp8q_encode_uint8(value);
        return;
    case FP8Q_FLOAT8_E4M3FN:
        bytes[i] = fp8q_encode_e4m3fn(value, saturate);
        return;
    case FP8Q_FLOAT8_E5M2:
        bytes[i] = fp8q_encode_e5m2(value, saturate);
        return;
    case FP8Q_FLOAT8_E4M3FNUZ:
        bytes[i] = fp8q_encode_e4m3fnuz(value, saturate);
        return;
    default:
        bytes[i] = fp8q_encode_e5m2fnuz(value, saturate);
        return;
    }
}

/* The float32 bits of |value|, NaN above every number. */
static uint32_t magnitude_bits(float value)
{
    return fp8q_float_to_bits(value) & 0x7FFFFFFFu;
}

static void run_cast(const fp8q_cast_args *args)
{
    const size_t itemsize = args->source_dtype == FP8Q_FLOAT32   ? 4
                            : args->source_dtype == FP8Q_FLOAT16 ||
                                      args->source_dtype == FP8Q_BFLOAT16
                                ? 2
                                : 1;
    uint32_t amax = 0;
    int64_t i;
    for (i = 0; i < args->count; i++) {
        float value = load_element(args->source, i, args->source_dtype);
        if (magnitude_bits(value) > amax) {
            amax = magnitude_bits(value);
        }
        if (args->infinity_to_nan) {
            value = fp8q_infinity_as_nan(value);
        }
        if (args->scale == NULL &&
            args->source_dtype == args->destination_dtype) {
            memcpy((char *)args->destination + (size_t)i * itemsize,
                   (const char *)args->source + (size_t)i * itemsize,
                   itemsize);
            continue;
        }
        if (args->scale != NULL) {
            /* With the launch's divisors, as the kernel divides. */
            const uint64_t row =
                fp8q_fast_divide((uint64_t)i, args->by_row_length);
            const uint64_t column = (uint64_t)i - row * args->row_length;
            const float factor =
                args->scale[(int64_t)fp8q_fast_divide(row,
                                                      args->by_block_rows) *
                                args->scale_row_stride +
                            (int64_t)fp8q_fast_divide(column,
                                                      args->by_block_cols) *
                                args->scale_col_stride];
            value = fp8q_scaling_result(
                args->scale_op == 1 ? value * factor : value / factor, value,
                factor);
        }
        store_element(args->destination, i, args->destination_dtype, value,
                      args->saturate);
    }
    if (args->amax_bits != NULL && amax > *args->amax_bits) {
        *args->amax_bits = amax;
    }
}

static uint32_t run_amax(const void *source, int64_t first, int64_t count,
                         int dtype)
{
    uint32_t amax = 0;
    int64_t i;
    for (i = first; i < first + count; i++) {
        const uint32_t bits = magnitude_bits(load_element(source, i, dtype));
        amax = bits > amax ? bits : amax;
    }
    return amax;
}

static void run_amax_blocks(const fp8q_amax_blocks_args *args)
{
    const int64_t n_block_cols =
        (args->row_length + args->block_cols - 1) / args->block_cols;
    int64_t row, column;
    for (row = 0; row < args->n_rows; row++) {
        for (column = 0; column < args->row_length; column++) {
            const int64_t block = (row / args->block_rows) * n_block_cols +
                                  column / args->block_cols;
            const uint32_t bits = magnitude_bits(load_element(
                args->source, row * args->row_length + column,
                args->source_dtype));
            if (row % args->block_rows == 0 &&
                column % args->block_cols == 0) {
                args->amax_bits[block] = 0; /* the block's first element */
            }
            if (bits > args->amax_bits[block]) {
                args->amax_bits[block] = bits;
            }
        }
    }
}

static void quantize_rows(const fp8q_quantize_rows_args *args);

/* Refuses (nonzero) a launch outside the contract's block rule. */
static int run_quantize_rows(const fp8q_quantize_rows_args *args,
                             unsigned int block_x)
{
    if (block_x > FP8Q_QUANTIZE_ROWS_MAX_THREADS ||
        (int64_t)block_x * FP8Q_QUANTIZE_ROWS_PER_THREAD < args->row_length ||
        args->row_length < 1) {
        return 1;
    }
    quantize_rows(args);
    return 0;
}

/* fp8q_quantize_rows_warps: refuses (nonzero) arguments the kernel does not
 * take, a warps_per_row other than the row's, or a block other than
 * R * G * 32 threads; else the same results as fp8q_quantize_rows. */
static int run_quantize_rows_warps(const fp8q_quantize_rows_args *args,
                                   unsigned int block_x)
{
    const int warps_per_row = fp8q_quantize_rows_warps_per_row(args->row_length);
    if (!fp8q_quantize_rows_warps_take(args) ||
        args->warps_per_row != warps_per_row ||
        block_x != 32u * (unsigned int)(warps_per_row *
                                         (FP8Q_QUANTIZE_ROWS_WARPS_PER_BLOCK /
                                          warps_per_row))) {
        return 1;
    }
    quantize_rows(args);
    return 0;
}

/* kernels/quantize_rows.cuh's results through the codec. */
static void quantize_rows(const fp8q_quantize_rows_args *args)
{
    int64_t row, column;
    for (row = 0; row < args->n_rows; row++) {
        const int64_t first = row * args->row_length;
        const float scale = fp8q_scale_from_amax(
            fp8q_bits_to_float(run_amax(args->source, first,
                                        args->row_length,
                                        args->source_dtype)),
            args->max, args->power_of_2);
        args->scale[row] = scale;
        for (column = 0; column < args->row_length; column++) {
            const float value = load_element(args->source, first + column,
                                             args->source_dtype);
            store_element(args->destination, first + column,
                          args->destination_dtype,
                          fp8q_scaling_result(value / scale, value, scale),
                          args->saturate);
        }
    }
}

/* kernels/norm_quantize.cuh on the host: the row's sums in float32 in
 * element order (a block of one thread), then the contract's element
 * arithmetic, rounding and quantize. Refuses (nonzero) another block size. */
static int run_norm_quantize(const fp8q_norm_quantize_args *args,
                             unsigned int block_x)
{
    int64_t row, column;
    if (block_x != FP8Q_NORM_QUANTIZE_THREADS || args->row_length < 1) {
        return 1;
    }
    for (row = 0; row < args->n_rows; row++) {
        const int64_t first = row * args->row_length;
        const float length = (float)args->row_length;
        float mean = 0.0f, sum = 0.0f, inverse, scale;
        uint32_t amax = 0u;
        for (column = 0; args->layer_norm && column < args->row_length;
             column++) {
            sum += load_element(args->source, first + column,
                                args->source_dtype);
        }
        mean = args->layer_norm ? sum / length : 0.0f;
        sum = 0.0f;
        for (column = 0; column < args->row_length; column++) {
            const float centred =
                load_element(args->source, first + column,
                             args->source_dtype) - mean;
            const float square = centred * centred;
            sum += square;
        }
        inverse = fp8q_norm_inverse(sum / length, args->epsilon);
        for (column = 0; column < args->row_length; column++) {
            const float value = fp8q_norm_value(
                load_element(args->source, first + column,
                             args->source_dtype),
                mean, inverse,
                load_element(args->weight, column, args->weight_dtype),
                args->bias == NULL ? 0.0f
                                   : load_element(args->bias, column,
                                                  args->weight_dtype),
                args->bias != NULL);
            store_element(args->normed, first + column, args->source_dtype,
                          value, 1);
        }
        amax = run_amax(args->normed, first, args->row_length,
                        args->source_dtype);
        scale = fp8q_scale_from_amax(fp8q_bits_to_float(amax), args->max, 0);
        args->scale[row] = scale;
        for (column = 0; column < args->row_length; column++) {
            const float value = load_element(args->normed, first + column,
                                             args->source_dtype);
            store_element(args->codes, first + column, FP8Q_FLOAT8_E4M3FN,
                          fp8q_scaling_result(value / scale, value, scale),
                          1);
        }
    }
    return 0;
}

static void run_amax_columns(const fp8q_amax_columns_args *args)
{
    int64_t row, column;
    for (row = 0; row < args->n_rows; row++) {
        for (column = 0; column < args->row_length; column++) {
            const uint32_t bits = magnitude_bits(load_element(
                args->source, row * args->row_length + column,
                args->source_dtype));
            if (bits > args->amax_bits[column]) {
                args->amax_bits[column] = bits; /* raised, as by atomicMax */
            }
        }
    }
}

/* The row kernels' work items (kernels/amax.cuh): each segment of each
 * row raises amax_bits[row], as the kernels' atomicMax does, so a host that
 * forgot to clear them first sees its stale values; with `nonfinite`, NaN
 * and infinity are counted into it instead. Refuses (nonzero) a segment
 * length outside the contract. */
static int run_amax_segments(const void *source, int dtype,
                             uint32_t *amax_bits, uint64_t *nonfinite,
                             int64_t n_rows, int64_t row_length,
                             int64_t segment_length)
{
    int64_t row, first, column;
    if (segment_length < 1) {
        return 1;
    }
    for (row = 0; row < n_rows; row++) {
        for (first = 0; first < row_length; first += segment_length) {
            uint32_t amax = 0;
            for (column = first;
                 column < row_length && column < first + segment_length;
                 column++) {
                const uint32_t bits = magnitude_bits(
                    load_element(source, row * row_length + column, dtype));
                if (nonfinite != NULL && bits >= 0x7F800000u) {
                    *nonfinite += 1u;
                }
                else if (bits > amax) {
                    amax = bits;
                }
            }
            if (amax > amax_bits[row]) {
                amax_bits[row] = amax;
            }
        }
    }
    return 0;
}

/* The device's compute capability major, as fake_device_get_attribute
 * reports it. */
static int fake_compute_capability_major(void)
{
    int major = 0;
    (void)fake_device_get_attribute(&major, 75, 0);
    return major;
}

/* The device's compute capability minor, as fake_device_get_attribute
 * reports it. */
static int fake_compute_capability_minor(void)
{
    int minor = 0;
    (void)fake_device_get_attribute(&minor, 76, 0);
    return minor;
}

/* Nonzero when a tensor-core launch of kernels/gemv.cuh (tile `rows`, 16 or
 * 64) is outside its contract: m must be at least FP8Q_GEMV_TC_MIN_ROWS (past
 * the smaller tile for tc64), x float16 (compute capability 7.0+) or
 * bfloat16 (8.0+) and 32-byte aligned, block scales only for tc16. */
static int gemv_tensor_core_refuses(const fp8q_gemv_fp8_args *args, int rows)
{
    const int major = fake_compute_capability_major();
    return args->m < (rows == 16 ? FP8Q_GEMV_TC_MIN_ROWS : 17) ||
           (uintptr_t)args->x % 32 != 0 ||
           (rows == 64 && args->scale_kind == FP8Q_GEMV_SCALE_BLOCK) ||
           !((args->x_dtype == FP8Q_FLOAT16 && major >= 7) ||
             (args->x_dtype == FP8Q_BFLOAT16 && major >= 8));
}

/* An output of kernels/gemv.cuh from its float32 sum: times the tensor's or
 * weight row j's scale, plus the bias (float32 roundings). */
static float gemv_finish(const fp8q_gemv_fp8_args *args, float value,
                         int64_t j)
{
    if (args->scale_kind == FP8Q_GEMV_SCALE_TENSOR) {
        value *= args->scale[0];
    }
    else if (args->scale_kind == FP8Q_GEMV_SCALE_ROW) {
        value *= args->scale[j];
    }
    if (args->bias != NULL) {
        value += load_element(args->bias, j, args->bias_dtype);
    }
    return value;
}

/* kernels/gemv.cuh's "Split k" finish (fp8q_gemv_fp8_reduce): each
 * output's splits added in split order in float32, then scaled, biased and
 * rounded once into x's dtype. Refuses (nonzero) a launch without partial
 * sums or with a block other than FP8Q_GEMV_THREADS threads. */
static int run_gemv_reduce(const fp8q_gemv_fp8_args *args,
                           unsigned int block_x)
{
    const int64_t outputs = args->m * args->n;
    int64_t index;
    int split;
    if (block_x != FP8Q_GEMV_THREADS || args->partial == NULL ||
        args->splits < 1 || args->splits > FP8Q_GEMV_MAX_SPLITS ||
        (uintptr_t)args->partial % 16 != 0) {
        return 1;
    }
    for (index = 0; index < outputs; index++) {
        const int64_t j = index % args->n;
        float value = args->partial[index];
        for (split = 1; split < args->splits; split++) {
            value += args->partial[split * outputs + index];
        }
        store_element(args->y, index, args->x_dtype,
                      gemv_finish(args, value, j), 0);
    }
    return 0;
}

/* Nonzero when value c of k belongs to split `split` of `splits` of the
 * weight-only product (kernels/gemv.cuh, "Split k"): the tensor-core
 * kernels' splits are ranges of `span` values, the CUDA-core kernels' every
 * splits-th block step of FP8Q_GEMV_STEP values. */
static int gemv_split_holds(int tensor_cores, int64_t c, int split, int splits,
                            int64_t span)
{
    return tensor_cores ? c / span == split
                        : (c / FP8Q_GEMV_STEP) % splits == split;
}

/* kernels/gemv.cuh's product in double (well within its float32 bound),
 * rounded once into x's dtype, for the kernel named "fp8q_gemv_fp8_" +
 * `tile` ("1", "2", "4", "8"; "tc16", "tc64" on the tensor cores); with
 * partial sums (every kernel), each split's double sum over its values of
 * k, rounded once to float32, into partial and y untouched. Refuses
 * (nonzero) a launch outside the contract: the tile must be the smallest
 * that holds m, k a multiple of 16, operands 16-byte aligned,
 * FP8Q_GEMV_THREADS threads, the tensor cores' own conditions, and grid_y
 * 1 without partial sums, the splits with them. */
static int run_gemv_fp8(const fp8q_gemv_fp8_args *args, const char *tile,
                        unsigned int block_x, unsigned int grid_y)
{
    const int64_t k_blocks = (args->k + FP8Q_GEMV_BLOCK - 1) / FP8Q_GEMV_BLOCK;
    const int tensor_cores = strncmp(tile, "tc", 2) == 0;
    const int rows = atoi(tensor_cores ? tile + 2 : tile);
    const int splits = args->partial != NULL ? args->splits : 1;
    const int64_t span =
        args->partial != NULL ? fp8q_gemv_split_span(args->k, splits) : args->k;
    int64_t i, j, c;
    int split;
    if (args->partial != NULL &&
        (splits < 1 || splits > FP8Q_GEMV_MAX_SPLITS ||
         (uintptr_t)args->partial % 16 != 0)) {
        return 1;
    }
    if (grid_y != (unsigned int)splits ||
        block_x != FP8Q_GEMV_THREADS || args->m < 1 || args->m > rows ||
        (!tensor_cores && rows > 1 && args->m <= rows / 2) ||
        (tensor_cores && gemv_tensor_core_refuses(args, rows)) ||
        args->k < 16 || args->k % 16 != 0 || (uintptr_t)args->x % 16 != 0 ||
        (uintptr_t)args->weight % 16 != 0 ||
        (args->weight_dtype != FP8Q_FLOAT8_E4M3FN &&
         args->weight_dtype != FP8Q_FLOAT8_E5M2)) {
        return 1;
    }
    for (split = 0; split < splits; split++) {
        for (i = 0; i < args->m; i++) {
            for (j = 0; j < args->n; j++) {
                double sum = 0.0;
                float value;
                for (c = 0; c < args->k; c++) {
                    double w;
                    if (!gemv_split_holds(tensor_cores, c, split, splits,
                                          span)) {
                        continue;
                    }
                    w = load_element(args->weight, j * args->k + c,
                                     args->weight_dtype);
                    if (args->scale_kind == FP8Q_GEMV_SCALE_BLOCK) {
                        w *= args->scale[(j / FP8Q_GEMV_BLOCK) * k_blocks +
                                         c / FP8Q_GEMV_BLOCK];
                    }
                    sum += (double)load_element(args->x, i * args->k + c,
                                                args->x_dtype) * w;
                }
                value = (float)sum;
                if (args->partial != NULL) {
                    args->partial[(split * args->m + i) * args->n + j] = value;
                    continue;
                }
                store_element(args->y, i * args->n + j, args->x_dtype,
                              gemv_finish(args, value, j), 0);
            }
        }
    }
    return 0;
}

static void run_epilogue(const fp8q_epilogue_args *args)
{
    uint32_t amax = 0;
    int64_t i, j;
    for (i = 0; i < args->m; i++) {
        for (j = 0; j < args->n; j++) {
            double value = (double)args->product[i * args->n + j];
            float rounded;
            if (args->scale_a != NULL) {
                value *= (double)args->scale_a[i * args->scale_a_stride];
            }
            if (args->scale_b != NULL) {
                value *= (double)args->scale_b[j * args->scale_b_stride];
            }
            if (args->bias != NULL) {
                value += (double)args->bias[j];
            }
            rounded = (float)value;
            if (magnitude_bits(rounded) > amax) {
                amax = magnitude_bits(rounded);
            }
            if (args->divide && rounded == rounded) {
                rounded = rounded / args->scale_result;
            }
            store_element(args->destination, i * args->n + j,
                          args->destination_dtype, rounded, 1);
        }
    }
    if (args->amax_bits != NULL && amax > *args->amax_bits) {
        *args->amax_bits = amax;
    }
}

static void run_transpose(const fp8q_transpose_args *args)
{
    const size_t size = (size_t)args->element_size;
    const char *source = (const char *)args->source;
    char *destination = (char *)args->destination;
    int64_t r, c;
    for (r = 0; r < args->rows; r++) {
        for (c = 0; c < args->cols; c++) {
            memcpy(destination + (size_t)(c * args->rows + r) * size,
                   source + (size_t)(r * args->cols + c) * size, size);
        }
    }
}

static void run_gather(const fp8q_gather_args *args)
{
    const size_t size = (size_t)args->element_size;
    int64_t i;
    for (i = 0; i < args->count; i++) {
        int64_t rest = i, offset = 0;
        int axis;
        for (axis = args->ndim - 1; axis >= 0; axis--) {
            offset += (rest % args->shape[axis]) * args->strides[axis];
            rest /= args->shape[axis];
        }
        memcpy((char *)args->destination + (size_t)i * size,
               (const char *)args->source + offset * (int64_t)size, size);
    }
}

/* The fold kernels' admission and record (kernels/calibrate.cuh). */
static int admit_batch(fp8q_calib_record *record, uint64_t nonfinite,
                       int64_t update_number, int skip_nonfinite)
{
    if (nonfinite == 0u || skip_nonfinite) {
        record->nonfinite_count += nonfinite;
        return 1;
    }
    if (record->refused_batches == 0u) {
        record->first_refused_update = (uint64_t)update_number;
        record->first_refused_count = nonfinite;
    }
    record->refused_batches += 1u;
    return 0;
}

/* The push of core/amax_history.c, written from the launch contract. */
static void run_calib_fold_max(const fp8q_calib_fold_max_args *args)
{
    const uint64_t nonfinite = *args->batch_nonfinite;
    const float *amax = (const float *)args->batch_amax_bits;
    fp8q_calib_max_state *state = args->state;
    float *entry;
    int64_t channel;
    if (!admit_batch(&state->record, nonfinite, args->update_number,
                     args->skip_nonfinite) ||
        nonfinite >= (uint64_t)args->batch_size) {
        return;
    }
    if (state->filled > 0 && (args->momentum >= 0.0 || args->running_max)) {
        entry = (float *)(state + 1) + state->newest * args->n_channels;
        for (channel = 0; channel < args->n_channels; channel++) {
            const double old = entry[channel], batch = amax[channel];
            if (args->momentum >= 0.0) {
                const double kept = args->momentum * old;
                const double added = (1.0 - args->momentum) * batch;
                entry[channel] = (float)(kept + added);
            }
            else if (batch > old) {
                entry[channel] = amax[channel];
            }
        }
        return;
    }
    state->newest = (state->newest + 1) % args->length;
    if (state->filled < args->length) {
        state->filled += 1;
    }
    memcpy((float *)(state + 1) + state->newest * args->n_channels, amax,
           (size_t)args->n_channels * sizeof(float));
}

/* The state's exponent once it covers the batch's amax. */
static int covered_exponent(const fp8q_calib_histogram_state *state,
                            int64_t n_bins, uint32_t batch_amax_bits)
{
    return fp8q_histogram_covered_exponent(
        n_bins,
        state->has_range ? state->bin_exponent : FP8Q_HISTOGRAM_NO_RANGE,
        fp8q_bits_to_float(batch_amax_bits));
}

static void run_histogram_count(const fp8q_histogram_count_args *args)
{
    const int exponent =
        covered_exponent(args->state, args->n_bins, *args->batch_amax_bits);
    const double inverse_width =
        exponent == FP8Q_HISTOGRAM_NO_RANGE ? 0.0 : ldexp(1.0, -exponent);
    int64_t i;
    for (i = 0; i < args->count; i++) {
        const int64_t bin = fp8q_histogram_bin(
            load_element(args->source, i, args->source_dtype), inverse_width,
            args->n_bins, args->skip_zeros);
        if (bin < args->n_bins) {
            args->batch_counts[bin] += 1u;
        }
    }
}

static void run_pad(const fp8q_pad_args *args)
{
    const size_t size = (size_t)args->element_size;
    int64_t r, c;
    for (r = 0; r < args->rows; r++) {
        for (c = 0; c < args->cols; c++) {
            char *destination = (char *)args->destination +
                                (size_t)(r * args->cols + c) * size;
            if (r < args->source_rows && c < args->source_cols) {
                memcpy(destination,
                       (const char *)args->source +
                           (size_t)(r * args->source_cols + c) * size,
                       size);
            }
            else {
                memset(destination, 0, size);
            }
        }
    }
}

static void run_calib_fold_histogram(
    const fp8q_calib_fold_histogram_args *args)
{
    fp8q_calib_histogram_state *state = args->state;
    uint64_t *counts = (uint64_t *)(state + 1);
    const uint32_t batch_amax = *args->batch_amax_bits;
    const int exponent = covered_exponent(state, args->n_bins, batch_amax);
    const int shift = state->has_range ? exponent - state->bin_exponent : 0;
    int64_t bin;
    if (!admit_batch(&state->record, *args->batch_nonfinite,
                     args->update_number, args->skip_nonfinite)) {
        return;
    }
    for (bin = 0; bin < args->n_bins; bin++) {
        args->batch_counts[fp8q_histogram_widened_bin(bin, shift)] +=
            counts[bin];
    }
    memcpy(counts, args->batch_counts, (size_t)args->n_bins * 8);
    if (exponent != FP8Q_HISTOGRAM_NO_RANGE) {
        state->has_range = 1;
        state->bin_exponent = exponent;
    }
    if (batch_amax > state->amax_bits) {
        state->amax_bits = batch_amax;
    }
}

/* A function handle is the address of its name in this table. */
#define KERNEL_NAME(value, name) name,
static const char *const kernel_names[] = {
    FP8Q_CUDA_KERNEL_LIST(KERNEL_NAME)};
#undef KERNEL_NAME

static result_t fake_module_get_function(void **function, void *module,
                                         const char *name)
{
    size_t index;
    (void)module;
    log_call("cuModuleGetFunction");
    for (index = 0; index < sizeof kernel_names / sizeof kernel_names[0];
         index++) {
        if (strcmp(name, kernel_names[index]) == 0) {
            *function = (void *)&kernel_names[index];
            return 0;
        }
    }
    return 500; /* CUDA_ERROR_NOT_FOUND */
}

static result_t fake_launch_kernel(void *function, unsigned int grid_x,
                                   unsigned int grid_y, unsigned int grid_z,
                                   unsigned int block_x, unsigned int block_y,
                                   unsigned int block_z, unsigned int shared,
                                   void *stream, void **parameters,
                                   void **extra)
{
    const char *name = *(const char *const *)function;
    result_t refused;
    log_call(name);
    log_launch(name, grid_x, grid_y, block_x);
    refused = stream_check(name, stream);
    if (refused != 0) {
        return refused;
    }
    /* The launch contracts: a 1-D grid of >= 1 blocks of a multiple of 32
     * threads (at most 1024), no shared memory, one parameter; the
     * weight-only product kernels' split k a grid of splits rows (the
     * reduce takes one). */
    if (grid_x < 1 ||
        grid_x > (unsigned int)setting("FAKE_CUDA_MAX_GRID", 0x7FFFFFFF) ||
        grid_y < 1 ||
        (grid_y != 1 && (strncmp(name, "fp8q_gemv_fp8_", 14) != 0 ||
                         strcmp(name, FP8Q_GEMV_FP8_KERNEL_REDUCE) == 0)) ||
        grid_z != 1 || block_x % 32 != 0 ||
        block_x > 1024 || block_y != 1 || block_z != 1 || shared != 0 ||
        extra != NULL || parameters == NULL) {
        return 1;
    }
    if (strcmp(name, FP8Q_CAST_KERNEL) == 0 ||
        strcmp(name, FP8Q_CAST_UNIFORM_KERNEL) == 0 ||
        strcmp(name, FP8Q_CAST_TO_FP8_KERNEL) == 0 ||
        strcmp(name, FP8Q_CAST_FROM_FP8_KERNEL) == 0 ||
        strcmp(name, FP8Q_CAST_FROM_FP8_WIDE_KERNEL) == 0) {
        const fp8q_cast_args *args = (const fp8q_cast_args *)parameters[0];
        const int uniform = fp8q_cast_uniform_takes(args);
        int takes;
        /* Each kernel takes only its own arguments (kernels/cast.cuh). */
        if (strcmp(name, FP8Q_CAST_TO_FP8_KERNEL) == 0) {
            takes = fp8q_cast_to_fp8_takes(args);
        }
        else if (strcmp(name, FP8Q_CAST_FROM_FP8_KERNEL) == 0) {
            takes = fp8q_cast_from_fp8_takes(args);
        }
        else if (strcmp(name, FP8Q_CAST_FROM_FP8_WIDE_KERNEL) == 0) {
            /* ... and a grid that covers the run one vector a thread. */
            takes = fp8q_cast_from_fp8_wide_takes(args) &&
                    grid_x == fp8q_cast_wide_blocks(args->count, block_x);
        }
        else {
            takes = !args->infinity_to_nan &&
                    uniform == (strcmp(name, FP8Q_CAST_UNIFORM_KERNEL) == 0);
        }
        if (block_x > FP8Q_CAST_THREADS || !takes) {
            return 1;
        }
        run_cast(args);
    }
    else if (strcmp(name, FP8Q_GEMV_FP8_KERNEL_REDUCE) == 0) {
        return run_gemv_reduce((const fp8q_gemv_fp8_args *)parameters[0],
                               block_x);
    }
    else if (strncmp(name, "fp8q_gemv_fp8_", 14) == 0) {
        return run_gemv_fp8((const fp8q_gemv_fp8_args *)parameters[0],
                            name + 14, block_x, grid_y);
    }
    else if (strcmp(name, FP8Q_AMAX_KERNEL) == 0) {
        const fp8q_amax_args *args = (const fp8q_amax_args *)parameters[0];
        const uint32_t amax =
            run_amax(args->source, 0, args->count, args->source_dtype);
        if (amax > *args->amax_bits) {
            *args->amax_bits = amax;
        }
    }
    else if (strcmp(name, FP8Q_AMAX_BLOCKS_KERNEL) == 0) {
        run_amax_blocks((const fp8q_amax_blocks_args *)parameters[0]);
    }
    else if (strcmp(name, FP8Q_AMAX_FINITE_ROWS_KERNEL) == 0) {
        const fp8q_amax_finite_rows_args *args =
            (const fp8q_amax_finite_rows_args *)parameters[0];
        return run_amax_segments(args->source, args->source_dtype,
                                 args->amax_bits, args->nonfinite_count,
                                 args->n_rows, args->row_length,
                                 args->segment_length);
    }
    else if (strcmp(name, FP8Q_AMAX_COLUMNS_KERNEL) == 0) {
        run_amax_columns((const fp8q_amax_columns_args *)parameters[0]);
    }
    else if (strcmp(name, FP8Q_CALIB_FOLD_MAX_KERNEL) == 0) {
        if (grid_x != 1) {
            return 1; /* the folds run on one block */
        }
        run_calib_fold_max((const fp8q_calib_fold_max_args *)parameters[0]);
    }
    else if (strcmp(name, FP8Q_HISTOGRAM_COUNT_KERNEL) == 0) {
        run_histogram_count(
            (const fp8q_histogram_count_args *)parameters[0]);
    }
    else if (strcmp(name, FP8Q_CALIB_FOLD_HISTOGRAM_KERNEL) == 0) {
        if (grid_x != 1) {
            return 1;
        }
        run_calib_fold_histogram(
            (const fp8q_calib_fold_histogram_args *)parameters[0]);
    }
    else if (strcmp(name, FP8Q_GATHER_KERNEL) == 0) {
        run_gather((const fp8q_gather_args *)parameters[0]);
    }
    else if (strcmp(name, FP8Q_PAD_KERNEL) == 0) {
        run_pad((const fp8q_pad_args *)parameters[0]);
    }
    else if (strcmp(name, FP8Q_TRANSPOSE_KERNEL) == 0) {
        if (block_x != FP8Q_TRANSPOSE_THREADS) {
            return 1;
        }
        run_transpose((const fp8q_transpose_args *)parameters[0]);
    }
    else if (strcmp(name, FP8Q_QUANTIZE_ROWS_KERNEL) == 0) {
        return run_quantize_rows(
            (const fp8q_quantize_rows_args *)parameters[0], block_x);
    }
    else if (strcmp(name, FP8Q_QUANTIZE_ROWS_WARPS_KERNEL) == 0) {
        return run_quantize_rows_warps(
            (const fp8q_quantize_rows_args *)parameters[0], block_x);
    }
    else if (strcmp(name, FP8Q_NORM_QUANTIZE_KERNEL) == 0) {
        return run_norm_quantize(
            (const fp8q_norm_quantize_args *)parameters[0], block_x);
    }
    else if (strcmp(name, FP8Q_EPILOGUE_KERNEL) == 0) {
        run_epilogue((const fp8q_epilogue_args *)parameters[0]);
    }
    else if (strcmp(name, FP8Q_SCALES_FROM_AMAX_KERNEL) == 0) {
        const fp8q_scales_from_amax_args *args =
            (const fp8q_scales_from_amax_args *)parameters[0];
        int64_t i;
        for (i = 0; i < args->count; i++) {
            args->values[i] = fp8q_scale_from_amax(args->values[i], args->max,
                                                   args->power_of_2);
        }
    }
    else {
        const fp8q_amax_rows_args *args =
            (const fp8q_amax_rows_args *)parameters[0];
        return run_amax_segments(args->source, args->source_dtype,
                                 args->amax_bits, NULL, args->n_rows,
                                 args->row_length, args->segment_length);
    }
    return 0;
}

static result_t fake_occupancy_max_active_blocks(int *blocks, void *function,
                                                int block_size,
                                                size_t shared_bytes)
{
    log_call("cuOccupancyMaxActiveBlocksPerMultiprocessor");
    if (function == NULL || block_size < 1 || block_size > 1024 ||
        shared_bytes != 0) {
        return 1;
    }
    *blocks = setting("FAKE_CUDA_OCCUPANCY", 2048 / block_size);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* cuGetProcAddress                                                          */

typedef struct entry {
    const char *name;
    void *function; /* the function, converted through uintptr_t */
} entry;

result_t cuGetProcAddress_v2(const char *symbol, void **function,
                             int cuda_version, uint64_t flags, int *status)
{
    const entry entries[] = {
        {"cuGetErrorName", FUNCTION(fake_get_error_name)},
        {"cuGetErrorString", FUNCTION(fake_get_error_string)},
        {"cuInit", FUNCTION(fake_init)},
        {"cuDriverGetVersion", FUNCTION(fake_driver_get_version)},
        {"cuDeviceGetCount", FUNCTION(fake_device_get_count)},
        {"cuDeviceGet", FUNCTION(fake_device_get)},
        {"cuDeviceGetName", FUNCTION(fake_device_get_name)},
        {"cuDeviceGetAttribute", FUNCTION(fake_device_get_attribute)},
        {"cuDeviceTotalMem", FUNCTION(fake_device_total_mem)},
        {"cuDevicePrimaryCtxRetain", FUNCTION(fake_primary_ctx_retain)},
        {"cuDevicePrimaryCtxRelease", FUNCTION(fake_primary_ctx_release)},
        {"cuCtxPushCurrent", FUNCTION(fake_ctx_push)},
        {"cuCtxPopCurrent", FUNCTION(fake_ctx_pop)},
        {"cuLibraryLoadData", FUNCTION(fake_library_load_data)},
        {"cuLibraryGetModule", FUNCTION(fake_library_get_module)},
        {"cuLibraryUnload", FUNCTION(fake_library_unload)},
        {"cuModuleLoadData", FUNCTION(fake_module_load_data)},
        {"cuModuleGetFunction", FUNCTION(fake_module_get_function)},
        {"cuLaunchKernel", FUNCTION(fake_launch_kernel)},
        {"cuOccupancyMaxActiveBlocksPerMultiprocessor",
         FUNCTION(fake_occupancy_max_active_blocks)},
    };
    const char *missing = getenv("FAKE_CUDA_MISSING");
    size_t index;
    int ignored;

    *function = NULL;
    if (cuda_version != 12000 || flags != 0) {
        return 1; /* CUDA_ERROR_INVALID_VALUE: fp8q asks for 12.0 */
    }
    if (status == NULL) {
        status = &ignored;
    }
    *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    if ((missing != NULL && strcmp(symbol, missing) == 0) ||
        (getenv("FAKE_CUDA_NO_LIBRARY") != NULL &&
         strncmp(symbol, "cuLibrary", 9) == 0)) {
        return 0;
    }
    for (index = 0; index < sizeof entries / sizeof entries[0]; index++) {
        if (strcmp(symbol, entries[index].name) == 0) {
            *function = entries[index].function;
        }
    }
    if (*function == NULL) {
        *function = stream_entry_point(symbol);
    }
    *status = *function != NULL ? 0 : 1;
    return 0;
}
