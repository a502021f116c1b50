/*
 * helpers.h - what the core tests share: building views, and per-element
 * reference conversions written directly on the scalar codec (not on the
 * run loops under test).
 */
#ifndef FP8Q_TESTS_HELPERS_H
#define FP8Q_TESTS_HELPERS_H

#include <stdint.h>

#include "core/view.h"

/* A view over `data`; `strides` NULL means C-contiguous. */
fp8q_view make_view(void *data, fp8q_dtype dtype, int ndim,
                    const int64_t *shape, const int64_t *strides);

/* Byte address of the element at `index` (one entry per axis). */
char *element_at(const fp8q_view *view, const int64_t *index);

/* Advances `index` through `shape` in C order; 0 after the last one. */
int next_index(int ndim, const int64_t *shape, int64_t *index);

/* One element of `dtype` at `element`, as float32 (exact). */
float reference_load(fp8q_dtype dtype, const void *element);

/* Stores `value` into one element of `dtype`, rounding once. */
void reference_store(fp8q_dtype dtype, float value, int saturate,
                     void *element);

/* Fills `size` bytes with random bits. */
void fill_random_bytes(void *data, int64_t size);

/* Fills float32 values: mostly moderate random values, with zeros, signed
 * zeros, subnormals and large magnitudes sprinkled in (no NaN or inf). */
void fill_random_floats(float *values, int64_t count, float limit);

/* Nonzero when the element bytes are equal. */
int same_element(fp8q_dtype dtype, const void *left, const void *right);

#endif /* FP8Q_TESTS_HELPERS_H */
