/*
 * helpers.c - view construction and scalar reference conversions for the
 * core tests.
 */
#include <string.h>

#include "core/float_codec.h"
#include "harness.h"
#include "helpers.h"

fp8q_view make_view(void *data, fp8q_dtype dtype, int ndim,
                    const int64_t *shape, const int64_t *strides)
{
    fp8q_view view;
    int64_t stride = 1;
    int axis;

    memset(&view, 0, sizeof view);
    view.data = data;
    view.dtype = dtype;
    view.ndim = ndim;
    for (axis = ndim - 1; axis >= 0; axis--) {
        view.shape[axis] = shape[axis];
        view.strides[axis] = strides != NULL ? strides[axis] : stride;
        if (strides == NULL) {
            /* Wrapping (unsigned) product: the tests of oversized shapes
             * make views whose strides are never used. */
            stride = (int64_t)((uint64_t)stride *
                               (uint64_t)(shape[axis] > 0 ? shape[axis] : 1));
        }
    }
    return view;
}

char *element_at(const fp8q_view *view, const int64_t *index)
{
    int64_t offset = 0;
    int axis;
    for (axis = 0; axis < view->ndim; axis++) {
        offset += index[axis] * view->strides[axis];
    }
    return (char *)view->data +
           offset * (int64_t)fp8q_dtype_itemsize(view->dtype);
}

int next_index(int ndim, const int64_t *shape, int64_t *index)
{
    int axis;
    for (axis = ndim - 1; axis >= 0; axis--) {
        if (++index[axis] < shape[axis]) {
            return 1;
        }
        index[axis] = 0;
    }
    return 0;
}

float reference_load(fp8q_dtype dtype, const void *element)
{
    const uint8_t *bytes = (const uint8_t *)element;
    uint16_t half;
    float value;

    switch (dtype) {
    case FP8Q_FLOAT32:
        memcpy(&value, element, sizeof value);
        return value;
    case FP8Q_FLOAT16:
        memcpy(&half, element, sizeof half);
        return fp8q_decode_float16(half);
    case FP8Q_BFLOAT16:
        memcpy(&half, element, sizeof half);
        return fp8q_decode_bfloat16(half);
    case FP8Q_UINT8:
        return (float)bytes[0];
    case FP8Q_FLOAT8_E4M3FN:
        return fp8q_decode_e4m3fn(bytes[0]);
    case FP8Q_FLOAT8_E5M2:
        return fp8q_decode_e5m2(bytes[0]);
    case FP8Q_FLOAT8_E4M3FNUZ:
        return fp8q_decode_e4m3fnuz(bytes[0]);
    case FP8Q_FLOAT8_E5M2FNUZ:
        return fp8q_decode_e5m2fnuz(bytes[0]);
    default:
        return 0.0f;
    }
}

void reference_store(fp8q_dtype dtype, float value, int saturate,
                     void *element)
{
    uint8_t *bytes = (uint8_t *)element;
    uint16_t half;

    switch (dtype) {
    case FP8Q_FLOAT32:
        memcpy(element, &value, sizeof value);
        break;
    case FP8Q_FLOAT16:
        half = fp8q_encode_float16(value);
        memcpy(element, &half, sizeof half);
        break;
    case FP8Q_BFLOAT16:
        half = fp8q_encode_bfloat16(value);
        memcpy(element, &half, sizeof half);
        break;
    case FP8Q_UINT8:
        bytes[0] = fp8q_encode_uint8(value);
        break;
    case FP8Q_FLOAT8_E4M3FN:
        bytes[0] = fp8q_encode_e4m3fn(value, saturate);
        break;
    case FP8Q_FLOAT8_E5M2:
        bytes[0] = fp8q_encode_e5m2(value, saturate);
        break;
    case FP8Q_FLOAT8_E4M3FNUZ:
        bytes[0] = fp8q_encode_e4m3fnuz(value, saturate);
        break;
    case FP8Q_FLOAT8_E5M2FNUZ:
        bytes[0] = fp8q_encode_e5m2fnuz(value, saturate);
        break;
    default:
        break;
    }
}

void fill_random_bytes(void *data, int64_t size)
{
    uint8_t *bytes = (uint8_t *)data;
    int64_t i;
    for (i = 0; i < size; i++) {
        bytes[i] = (uint8_t)(harness_random() >> 56);
    }
}

void fill_random_floats(float *values, int64_t count, float limit)
{
    int64_t i;
    for (i = 0; i < count; i++) {
        const uint64_t kind = harness_random_below(16);
        if (kind == 0) {
            values[i] = harness_random_below(2) ? 0.0f : -0.0f;
        }
        else if (kind == 1) {
            /* Tiny values (down to float32 subnormals). */
            values[i] = harness_random_float(1.0f) *
                        fp8q_bits_to_float((uint32_t)harness_random_below(
                                               0x0B000000u));
        }
        else if (kind == 2) {
            values[i] = harness_random_float(limit * 1000.0f);
        }
        else {
            values[i] = harness_random_float(limit);
        }
    }
}

int same_element(fp8q_dtype dtype, const void *left, const void *right)
{
    return memcmp(left, right, fp8q_dtype_itemsize(dtype)) == 0;
}
