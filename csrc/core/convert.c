/*
 * convert.c - run loops between every dtype and float32, over the scalar
 * codec of core/float_codec.h.
 *
 * Loads are written here; stores and the scaling of staged values live in
 * convert_loops.h, compiled twice (baseline here, AVX2 in convert_avx2.c)
 * and chosen once at run time by what the processor supports. See
 * convert_loops.h for how the loops are shaped so that compilers vectorise
 * them.
 */
#include <string.h>

#include "core/convert.h"
#include "core/convert_loops.h"
#include "core/float_codec.h"
#include "platform.h"

/* Elements per vectorised block (see convert_loops.h). */
#define BLOCK FP8Q_CONVERT_BLOCK

/* ------------------------------------------------------------------------- */
/* Loads into float32                                                        */

/*
 * FP8 decodes through a 256-entry table per format, filled from the codec on
 * first use: one load per element beats the compiled arithmetic decode with
 * every compiler. Where AVX2 runs, contiguous float8_e4m3fn and float8_e5m2
 * codes take the hand-vectorised decoder of convert_avx2.c instead (about 3x
 * the table's speed; docs/benchmarks.md). The first caller fills the tables;
 * any other caller that arrives meanwhile waits the few microseconds that
 * takes.
 */
enum { FP8_FORMAT_COUNT = 4 };

static float fp8_tables[FP8_FORMAT_COUNT][256];
static volatile int64_t fp8_tables_claimed = 0;
static volatile int64_t fp8_tables_ready = 0;

static void fill_fp8_tables(void)
{
    int code;
    for (code = 0; code < 256; code++) {
        fp8_tables[0][code] = fp8q_decode_e4m3fn((uint8_t)code);
        fp8_tables[1][code] = fp8q_decode_e5m2((uint8_t)code);
        fp8_tables[2][code] = fp8q_decode_e4m3fnuz((uint8_t)code);
        fp8_tables[3][code] = fp8q_decode_e5m2fnuz((uint8_t)code);
    }
}

/* The decode table of FP8 format `format` (0: E4M3FN, 1: E5M2,
 * 2: E4M3FNUZ, 3: E5M2FNUZ). */
static const float *fp8_table(int format)
{
    if (!fp8q_atomic_load_i64(&fp8_tables_ready)) {
        if (fp8q_atomic_fetch_add_i64(&fp8_tables_claimed, 1) == 0) {
            fill_fp8_tables();
            fp8q_atomic_store_i64(&fp8_tables_ready, 1);
        }
        else {
            while (!fp8q_atomic_load_i64(&fp8_tables_ready)) {
                /* another thread is filling them */
            }
        }
    }
    return fp8_tables[format];
}

static void load_fp8(const char *source, int64_t byte_stride, float *values,
                     int64_t count, int format)
{
    const float *FP8Q_RESTRICT table = fp8_table(format);
    const uint8_t *codes = (const uint8_t *)source;
    int64_t i;

    if (byte_stride == 1) {
        for (i = 0; i < count; i++) {
            values[i] = table[codes[i]];
        }
        return;
    }
    for (i = 0; i < count; i++) {
        values[i] = table[codes[i * byte_stride]];
    }
}

/* One float16 (is_bfloat16 == 0) or bfloat16 code, decoded. Callers pass a
 * constant is_bfloat16, so each inlined loop keeps a single codec. */
FP8Q_FORCE_INLINE float decode_half(uint16_t code, int is_bfloat16)
{
    return is_bfloat16 ? fp8q_decode_bfloat16(code)
                       : fp8q_decode_float16(code);
}

/* float16 and bfloat16 elements may be unaligned: read them with memcpy. */
FP8Q_FORCE_INLINE void decode_half_block(const char *FP8Q_RESTRICT source,
                                         float *FP8Q_RESTRICT values,
                                         int64_t count, int is_bfloat16)
{
    int64_t i;
    for (i = 0; i < count; i++) {
        uint16_t code;
        memcpy(&code, source + 2 * i, sizeof code);
        values[i] = decode_half(code, is_bfloat16);
    }
}

/* Loads float16 (is_bfloat16 == 0) or bfloat16 elements. */
FP8Q_FORCE_INLINE void load_half(const char *source, int64_t byte_stride,
                                 float *values, int64_t count, int is_bfloat16)
{
    int64_t i;
    if (byte_stride == 2) {
        for (; count >= BLOCK; count -= BLOCK) {
            decode_half_block(source, values, BLOCK, is_bfloat16);
            source += 2 * BLOCK;
            values += BLOCK;
        }
        decode_half_block(source, values, count, is_bfloat16);
        return;
    }
    for (i = 0; i < count; i++) {
        uint16_t code;
        memcpy(&code, source + i * byte_stride, sizeof code);
        values[i] = decode_half(code, is_bfloat16);
    }
}

FP8Q_FORCE_INLINE void decode_uint8_block(const uint8_t *FP8Q_RESTRICT bytes,
                                          float *FP8Q_RESTRICT values,
                                          int64_t count)
{
    int64_t i;
    for (i = 0; i < count; i++) {
        values[i] = (float)bytes[i];
    }
}

static void load_uint8(const char *source, int64_t byte_stride, float *values,
                       int64_t count)
{
    const uint8_t *bytes = (const uint8_t *)source;
    int64_t i;
    if (byte_stride == 1) {
        for (; count >= BLOCK; count -= BLOCK) {
            decode_uint8_block(bytes, values, BLOCK);
            bytes += BLOCK;
            values += BLOCK;
        }
        decode_uint8_block(bytes, values, count);
        return;
    }
    for (i = 0; i < count; i++) {
        values[i] = (float)bytes[i * byte_stride];
    }
}

static void load_float32(const char *source, int64_t byte_stride,
                         float *values, int64_t count)
{
    int64_t i;
    if (byte_stride == (int64_t)sizeof(float)) {
        memcpy(values, source, (size_t)count * sizeof(float));
        return;
    }
    for (i = 0; i < count; i++) {
        memcpy(&values[i], source + i * byte_stride, sizeof(float));
    }
}

/* The float16 and bfloat16 loads, each with its codec fixed. */
static void load_float16(const char *source, int64_t byte_stride,
                         float *values, int64_t count)
{
    load_half(source, byte_stride, values, count, 0);
}

static void load_bfloat16(const char *source, int64_t byte_stride,
                          float *values, int64_t count)
{
    load_half(source, byte_stride, values, count, 1);
}

/* The loads of the dtypes before the FP8 formats, by dtype. */
typedef void (*load_fn)(const char *source, int64_t byte_stride,
                        float *values, int64_t count);
static const load_fn loads[FP8Q_FLOAT8_E4M3FN] = {
    load_float32, load_float16, load_bfloat16, load_uint8};

static int stores_use_avx2(void);

void fp8q_load_float32(fp8q_dtype dtype, const char *source,
                       int64_t byte_stride, float *values, int64_t count)
{
    /* The two GEMM formats, contiguous: the AVX2 decoder where it runs. */
    if ((dtype == FP8Q_FLOAT8_E4M3FN || dtype == FP8Q_FLOAT8_E5M2) &&
        byte_stride == 1 && stores_use_avx2()) {
        fp8q_load_fp8_avx2((const uint8_t *)source, values, count,
                           dtype == FP8Q_FLOAT8_E5M2);
        return;
    }
    if ((unsigned)dtype < FP8Q_FLOAT8_E4M3FN) {
        loads[dtype](source, byte_stride, values, count);
    }
    else if ((unsigned)dtype < FP8Q_DTYPE_COUNT) {
        /* The FP8 formats, in fp8_table's order. */
        load_fp8(source, byte_stride, values, count,
                 (int)(dtype - FP8Q_FLOAT8_E4M3FN));
    }
}

/* ------------------------------------------------------------------------- */
/* Stores and scaling: the loops of convert_loops.h, for AVX2 or baseline    */

/* 0 until first use, then 1 (baseline loops) or 2 (AVX2 loops). */
static volatile int64_t store_variant = 0;

static int stores_use_avx2(void)
{
    int64_t variant = fp8q_atomic_load_i64(&store_variant);
    if (variant == 0) {
        variant = fp8q_cpu_has_avx2() ? 2 : 1;
        fp8q_atomic_store_i64(&store_variant, variant);
    }
    return variant == 2;
}

void fp8q_convert_allow_avx2(int allow)
{
    fp8q_atomic_store_i64(&store_variant, allow ? 0 : 1);
}

int fp8q_convert_uses_avx2(void)
{
    return stores_use_avx2();
}

void fp8q_store_float32(fp8q_dtype dtype, const float *values,
                        char *destination, int64_t byte_stride, int64_t count,
                        int saturate)
{
    if (stores_use_avx2()) {
        fp8q_store_float32_avx2(dtype, values, destination, byte_stride,
                                count, saturate);
    }
    else {
        store_float32_loops(dtype, values, destination, byte_stride, count,
                            saturate);
    }
}

void fp8q_scale_float32(float *values, const float *scales, int each,
                        int divide, int64_t count)
{
    if (stores_use_avx2()) {
        fp8q_scale_float32_avx2(values, scales, each, divide, count);
    }
    else {
        scale_float32_loops(values, scales, each, divide, count);
    }
}
