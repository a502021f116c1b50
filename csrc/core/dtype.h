/*
 * dtype.h - the element types fp8q stores, their names and numeric limits.
 *
 * Names follow ml_dtypes / PyTorch ("float8_e4m3fn", "bfloat16", ...). Parsing
 * also accepts the short aliases users type ("e4m3", "bf16", "half", ...) and a
 * "torch." prefix, so the binding can recognise torch dtypes by their str().
 */
#ifndef FP8Q_CORE_DTYPE_H
#define FP8Q_CORE_DTYPE_H

#include <stddef.h>

typedef enum fp8q_dtype {
    FP8Q_FLOAT32 = 0,
    FP8Q_FLOAT16,
    FP8Q_BFLOAT16,
    FP8Q_UINT8,
    FP8Q_FLOAT8_E4M3FN,
    FP8Q_FLOAT8_E5M2,
    FP8Q_FLOAT8_E4M3FNUZ,
    FP8Q_FLOAT8_E5M2FNUZ,
    FP8Q_DTYPE_COUNT
} fp8q_dtype;

/* Canonical name, e.g. "float8_e4m3fn"; "invalid" for an out-of-range value. */
const char *fp8q_dtype_name(fp8q_dtype dtype);

/* Bytes per element. */
size_t fp8q_dtype_itemsize(fp8q_dtype dtype);

/* Nonzero for the four 8-bit floating-point formats. */
int fp8q_dtype_is_fp8(fp8q_dtype dtype);

/* Nonzero for every floating-point dtype (all but uint8). */
int fp8q_dtype_is_float(fp8q_dtype dtype);

/* Looks up a canonical name or alias (case-sensitive, optional "torch."
 * prefix). Aliases: "fp32", "fp16", "half", "bf16", "e4m3", "e4m3fn",
 * "e5m2", "e4m3fnuz", "e5m2fnuz". Returns 1 and sets *dtype when found, 0
 * otherwise. */
int fp8q_dtype_from_name(const char *name, fp8q_dtype *dtype);

/* Nonzero for the dtypes NumPy has only through an extension (ml_dtypes):
 * bfloat16 and the four FP8 dtypes. */
int fp8q_dtype_is_numpy_extension(fp8q_dtype dtype);

/* The dtype of an extension type NumPy describes by `name` (str() of its
 * dtype) with elements of `itemsize` bytes: 1 and *dtype when name is
 * exactly the canonical name of such a dtype (no alias, no "torch.") and
 * itemsize is its size; 0 otherwise (*dtype untouched). */
int fp8q_dtype_from_numpy_extension(const char *name, size_t itemsize,
                                    fp8q_dtype *dtype);

/* Numeric limits of a floating-point dtype (all values exact). */
typedef struct fp8q_finfo {
    int bits;
    int exponent_bits;
    int mantissa_bits;         /* explicit fraction bits */
    int exponent_bias;
    double max;                /* largest finite value */
    double tiny;               /* smallest positive normal */
    double smallest_subnormal; /* smallest positive subnormal */
    double eps;                /* 1.0's next value minus 1.0 */
    int has_infinity;
    int has_negative_zero;
} fp8q_finfo;

/* Fills *info for a floating-point dtype; returns 0 for uint8 (no finfo). */
int fp8q_dtype_finfo(fp8q_dtype dtype, fp8q_finfo *info);

#endif /* FP8Q_CORE_DTYPE_H */
