/*
 * view_layout.c - reshape shapes, last-axis re-cuts, 2-D transposes and
 * Fortran contiguity of views, unsafe overlap of two views, views of
 * NumPy-style byte strides, new contiguous host views, and the PEP 3118
 * format characters of the dtypes (core/view_layout.h).
 */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "core/view_layout.h"
#include "platform.h"

fp8q_status fp8q_view_reshape_shape(const fp8q_view *view, int ndim,
                                    int64_t *shape, const char *name,
                                    fp8q_error *error)
{
    const int64_t size = fp8q_view_size(view);
    int64_t known = 1;
    int64_t inferred_extent = -1; /* stays -1 beside an extent of 0 */
    int inferred = -1;
    int axis;
    char into[FP8Q_SHAPE_TEXT_SIZE]; /* the shape as given, for messages */
    char from[FP8Q_SHAPE_TEXT_SIZE];

    for (axis = 0; axis < ndim; axis++) {
        if (shape[axis] == -1 && inferred < 0) {
            inferred = axis;
        }
        else if (shape[axis] < 0) {
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "%s: extents must be >= 0, with at most one -1, "
                             "got %lld at axis %d",
                             name, (long long)shape[axis], axis);
        }
        else if (shape[axis] == 0) {
            known = 0; /* whatever the other extents */
        }
    }
    for (axis = 0; axis < ndim && known != 0; axis++) {
        if (axis == inferred) {
            continue;
        }
        if (known > INT64_MAX / shape[axis]) {
            fp8q_format_shape(into, sizeof into, ndim, shape);
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "%s: the shape %s has too many elements", name,
                             into);
        }
        known *= shape[axis];
    }
    if (inferred >= 0 && known != 0) {
        inferred_extent = size / known;
        known *= inferred_extent;
    }
    if (known != size || (inferred >= 0 && inferred_extent < 0)) {
        /* Formatted here only: a reshape that works writes no text. */
        fp8q_format_shape(into, sizeof into, ndim, shape);
        fp8q_format_shape(from, sizeof from, view->ndim, view->shape);
        return fp8q_fail(error, FP8Q_ERROR_VALUE,
                         "%s: cannot reshape a tensor of shape %s (%lld "
                         "elements) into %s%s",
                         name, from, (long long)size, into,
                         inferred >= 0 && inferred_extent < 0
                             ? " (-1 cannot be inferred next to an extent of "
                               "0)"
                             : "");
    }
    if (inferred >= 0) {
        shape[inferred] = inferred_extent;
    }
    return FP8Q_OK;
}

fp8q_status fp8q_view_recut_last_axis(const fp8q_view *view, fp8q_dtype dtype,
                                      fp8q_view *out, const char *name,
                                      fp8q_error *error)
{
    const int64_t old_size = (int64_t)fp8q_dtype_itemsize(view->dtype);
    const int64_t new_size = (int64_t)fp8q_dtype_itemsize(dtype);
    const int last = view->ndim - 1;
    int axis;

    *out = *view;
    out->dtype = dtype;
    if (old_size == new_size) {
        return FP8Q_OK;
    }
    /* Extents and strides times the old itemsize (the products below)
     * must stay int64: an empty tensor's may be as large as any int64. */
    for (axis = 0; axis <= last; axis++) {
        const int64_t limit = INT64_MAX / old_size;
        if (view->shape[axis] > limit || view->strides[axis] > limit ||
            view->strides[axis] < -limit) {
            return fp8q_fail(error, FP8Q_ERROR_VALUE,
                             "%s: cannot read a tensor of %s as %s: its "
                             "extents or strides in %s elements would not "
                             "fit in an int64",
                             name, fp8q_dtype_name(view->dtype),
                             fp8q_dtype_name(dtype), fp8q_dtype_name(dtype));
        }
    }
    if (last < 0 || (view->shape[last] != 1 && view->strides[last] != 1) ||
        (view->shape[last] * old_size) % new_size != 0 ||
        (uintptr_t)view->data % (uintptr_t)new_size != 0) {
        goto fail;
    }
    for (axis = 0; axis < last; axis++) {
        if ((view->strides[axis] * old_size) % new_size != 0) {
            goto fail;
        }
        out->strides[axis] = view->strides[axis] * old_size / new_size;
    }
    out->shape[last] = view->shape[last] * old_size / new_size;
    out->strides[last] = 1;
    return FP8Q_OK;

fail:
    return fp8q_fail(error, FP8Q_ERROR_VALUE,
                     "%s: cannot read a tensor of %s (itemsize %d) as %s "
                     "(itemsize %d): that needs at least one dimension, a "
                     "contiguous last axis whose byte length is a multiple "
                     "of %d, and strides and an address aligned to it",
                     name, fp8q_dtype_name(view->dtype), (int)old_size,
                     fp8q_dtype_name(dtype), (int)new_size, (int)new_size);
}

void fp8q_view_transpose_2d(const fp8q_view *view, fp8q_view *out)
{
    *out = *view;
    out->shape[0] = view->shape[1];
    out->shape[1] = view->shape[0];
    out->strides[0] = view->strides[1];
    out->strides[1] = view->strides[0];
}

int fp8q_view_is_fortran_contiguous(const fp8q_view *view)
{
    int64_t expected = 1;
    int axis;

    if (fp8q_view_size(view) == 0) {
        return 1;
    }
    for (axis = 0; axis < view->ndim; axis++) {
        if (view->shape[axis] == 1) {
            continue;
        }
        if (view->strides[axis] != expected) {
            return 0;
        }
        expected *= view->shape[axis];
    }
    return 1;
}

int fp8q_view_spans_overlap(const fp8q_view *first, const fp8q_view *second)
{
    int64_t first_low, first_high, second_low, second_high;
    uintptr_t first_begin, first_end, second_begin, second_end;

    if (fp8q_view_size(first) == 0 || fp8q_view_size(second) == 0) {
        return 0;
    }
    fp8q_view_byte_extent(first, &first_low, &first_high);
    fp8q_view_byte_extent(second, &second_low, &second_high);
    first_begin = (uintptr_t)((const char *)first->data + first_low);
    first_end = (uintptr_t)((const char *)first->data + first_high);
    second_begin = (uintptr_t)((const char *)second->data + second_low);
    second_end = (uintptr_t)((const char *)second->data + second_high);
    return first_end > second_begin && second_end > first_begin;
}

int fp8q_view_overlaps_unsafely(const fp8q_view *first,
                                const fp8q_view *second)
{
    int axis;

    if (!fp8q_view_spans_overlap(first, second)) {
        return 0;
    }
    if (first->data != second->data || first->ndim != second->ndim ||
        fp8q_dtype_itemsize(first->dtype) !=
            fp8q_dtype_itemsize(second->dtype)) {
        return 1;
    }
    for (axis = 0; axis < first->ndim; axis++) {
        if (first->shape[axis] != second->shape[axis] ||
            (first->shape[axis] != 1 &&
             first->strides[axis] != second->strides[axis])) {
            return 1;
        }
    }
    return 0;
}

void fp8q_view_drop_axes(const fp8q_view *view, const int *drop,
                         fp8q_view *out)
{
    int axis;

    *out = *view;
    out->ndim = 0;
    for (axis = 0; axis < view->ndim; axis++) {
        if (!drop[axis]) {
            out->shape[out->ndim] = view->shape[axis];
            out->strides[out->ndim] = view->strides[axis];
            out->ndim++;
        }
    }
}

int64_t fp8q_view_nbytes(const fp8q_view *view)
{
    return fp8q_view_size(view) * (int64_t)fp8q_dtype_itemsize(view->dtype);
}

const char *fp8q_view_buffer_refusal(const fp8q_view *view, int readonly,
                                     unsigned request)
{
    const int c_contiguous = fp8q_view_is_contiguous(view);
    const int f_contiguous = fp8q_view_is_fortran_contiguous(view);

    if ((request & FP8Q_BUFFER_WRITABLE) && readonly) {
        return "the tensor is read-only; a writable buffer was requested";
    }
    if (!(request & FP8Q_BUFFER_STRIDES) && !c_contiguous) {
        return "the tensor is not C-contiguous and the consumer did not ask "
               "for strides; use .contiguous()";
    }
    if ((request & FP8Q_BUFFER_C_CONTIGUOUS) && !c_contiguous) {
        return "a C-contiguous buffer was requested but the tensor is not "
               "C-contiguous; use .contiguous()";
    }
    if ((request & FP8Q_BUFFER_F_CONTIGUOUS) && !f_contiguous) {
        return "a Fortran-contiguous buffer was requested but the tensor is "
               "not Fortran-contiguous";
    }
    if ((request & FP8Q_BUFFER_ANY_CONTIGUOUS) && !c_contiguous &&
        !f_contiguous) {
        return "a contiguous buffer was requested but the tensor is neither "
               "C- nor Fortran-contiguous";
    }
    return NULL;
}

const char *fp8q_dtype_buffer_format(fp8q_dtype dtype)
{
    static const char *const formats[FP8Q_DTYPE_COUNT] = {
        [FP8Q_FLOAT32] = "f",
        [FP8Q_FLOAT16] = "e",
        [FP8Q_BFLOAT16] = "H",
    };
    const char *format =
        (unsigned)dtype < FP8Q_DTYPE_COUNT ? formats[dtype] : NULL;

    return format != NULL ? format : "B";
}

int fp8q_dtype_from_type_char(char type, fp8q_dtype *dtype)
{
    switch (type) {
    case 'f':
        *dtype = FP8Q_FLOAT32;
        return 1;
    case 'e':
        *dtype = FP8Q_FLOAT16;
        return 1;
    case 'B':
        *dtype = FP8Q_UINT8;
        return 1;
    default:
        return 0;
    }
}

int fp8q_dtype_numpy_conversion(char kind, char type)
{
    switch (kind) {
    case 'b':
    case 'i':
    case 'u':
        return FP8Q_FLOAT32;
    case 'f':
        /* float16 of another byte order stays float16. */
        return type == 'e' ? FP8Q_FLOAT16 : FP8Q_FLOAT32;
    default:
        return -1;
    }
}

int fp8q_view_init_byte_strided(fp8q_view *view, void *data, fp8q_dtype dtype,
                                int ndim, const int64_t *shape,
                                const int64_t *byte_strides)
{
    const int64_t itemsize = (int64_t)fp8q_dtype_itemsize(dtype);
    int axis;

    memset(view, 0, sizeof *view);
    view->data = data;
    view->dtype = dtype;
    view->ndim = ndim;
    for (axis = 0; axis < ndim; axis++) {
        view->shape[axis] = shape[axis];
        if (byte_strides[axis] % itemsize == 0) {
            view->strides[axis] = byte_strides[axis] / itemsize;
        }
        else if (shape[axis] > 1) {
            return 0;
        }
        /* else: the stride of an extent of 0 or 1 is never applied (0). */
    }
    return 1;
}

fp8q_status fp8q_view_alloc_contiguous(fp8q_view *view, fp8q_dtype dtype,
                                       int ndim, const int64_t *shape,
                                       void **allocation, fp8q_error *error)
{
    const fp8q_status status =
        fp8q_view_init_contiguous(view, NULL, dtype, ndim, shape, error);
    const int64_t nbytes = status == FP8Q_OK ? fp8q_view_nbytes(view) : 0;

    *allocation = NULL;
    if (status != FP8Q_OK) {
        return status;
    }
    if ((uint64_t)nbytes > (uint64_t)SIZE_MAX) {
        return fp8q_fail(error, FP8Q_ERROR_MEMORY,
                         "fp8q: cannot allocate %" PRId64
                         " bytes on this platform",
                         nbytes);
    }
    *allocation = fp8q_aligned_alloc((size_t)nbytes);
    if (*allocation == NULL) {
        return fp8q_fail(error, FP8Q_ERROR_MEMORY,
                         "fp8q: failed to allocate %" PRId64
                         " bytes for a tensor",
                         nbytes);
    }
    view->data = *allocation;
    return FP8Q_OK;
}
