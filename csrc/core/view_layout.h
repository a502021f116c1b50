/*
 * view_layout.h - new layouts of an existing view, and layout predicates,
 * that the tensor type's methods need: the shape of a reshape (one extent
 * inferred), the re-cut of the last axis for a view with another itemsize,
 * the transpose of a 2-D view, Fortran contiguity, whether an output may
 * share memory with an input, byte counts, and what a PEP 3118 buffer
 * request of a view may get.
 */
#ifndef FP8Q_CORE_VIEW_LAYOUT_H
#define FP8Q_CORE_VIEW_LAYOUT_H

#include <stdint.h>

#include "core/status.h"
#include "core/view.h"

/*
 * Completes the target shape of a reshape of `view`: shape[0..ndim) are the
 * extents asked for (any signs, as given), of which one may be -1 (the
 * first -1; on success it is replaced by the extent that keeps the element
 * count; a refusal leaves `shape` as given).
 * FP8Q_ERROR_VALUE, "<name>: ...", for another negative extent, for a
 * shape whose product overflows int64, and for an element count other
 * than fp8q_view_size(view) (also when -1 sits beside an extent of 0 and
 * cannot be inferred); the messages show the shapes as fp8q_format_shape.
 */
fp8q_status fp8q_view_reshape_shape(const fp8q_view *view, int ndim,
                                    int64_t *shape, const char *name,
                                    fp8q_error *error);

/*
 * NumPy's rule for reading `view`'s bytes as `dtype`: with the same
 * itemsize, *out is `view` with the new dtype (any layout). With another
 * itemsize, *out is `view` with its last axis re-cut into elements of the
 * new size (extent * old / new, stride 1) and the other strides rescaled;
 * FP8Q_ERROR_VALUE, "<name>: cannot read a tensor of ...", unless the view
 * has a dimension, a contiguous last axis (stride 1, or extent 1) whose
 * byte length is a multiple of the new itemsize, other strides whose byte
 * lengths are multiples of it, and an address aligned to it; or "<name>:
 * cannot read a tensor of X as Y: its extents or strides in Y elements
 * would not fit in an int64" (an empty view's extents may be that large).
 */
fp8q_status fp8q_view_recut_last_axis(const fp8q_view *view, fp8q_dtype dtype,
                                      fp8q_view *out, const char *name,
                                      fp8q_error *error);

/* *out is the 2-D `view` with its two axes (extents and strides) swapped. */
void fp8q_view_transpose_2d(const fp8q_view *view, fp8q_view *out);

/* Nonzero when the view is Fortran-contiguous (the first axis varies
 * fastest, no gaps; extents of 1 may have any stride; an empty view is
 * contiguous). */
int fp8q_view_is_fortran_contiguous(const fp8q_view *view);

/* *out is `view` without the axes with drop[axis] != 0 (the others'
 * extents and strides kept, in order): a reduction's keepdims result seen
 * without its reduced axes. */
void fp8q_view_drop_axes(const fp8q_view *view, const int *drop,
                         fp8q_view *out);

/* Nonzero when the two views touch a common byte without being the very
 * same elements (same address, ndim, itemsize, shape, and strides on every
 * axis of extent > 1): such a pair cannot be an input and an output of one
 * operation. An exact alias is a safe in-place operation, because every
 * element is read before it is written; an empty view overlaps nothing. */
int fp8q_view_overlaps_unsafely(const fp8q_view *first,
                                const fp8q_view *second);

/* Nonzero when the byte ranges the two views' elements span (from their
 * lowest to their highest byte) meet; an empty view meets nothing. */
int fp8q_view_spans_overlap(const fp8q_view *first, const fp8q_view *second);
/* The bytes of the view's elements: fp8q_view_size * itemsize. */
int64_t fp8q_view_nbytes(const fp8q_view *view);

/* What a PEP 3118 buffer request asks of the exported view (bits of the
 * request argument below, in this order; the binding maps the PyBUF_*
 * flags to them). */
#define FP8Q_BUFFER_WRITABLE 1u
#define FP8Q_BUFFER_STRIDES 2u      /* strides may be given */
#define FP8Q_BUFFER_C_CONTIGUOUS 4u /* C order required */
#define FP8Q_BUFFER_F_CONTIGUOUS 8u /* Fortran order required */
#define FP8Q_BUFFER_ANY_CONTIGUOUS 16u /* one of the two required */

/* NULL when a view (read-only when `readonly` is nonzero) can be exported
 * for `request`, else why not, as a sentence for a BufferError: a writable
 * request of a read-only view; a request without strides, or one for a
 * contiguity, the layout does not meet. */
const char *fp8q_view_buffer_refusal(const fp8q_view *view, int readonly,
                                     unsigned request);

/* The PEP 3118 format character of `dtype`'s elements: "f" float32, "e"
 * float16, "H" for bfloat16's raw codes, "B" for uint8, for the FP8 dtypes'
 * raw codes and for anything else. */
const char *fp8q_dtype_buffer_format(fp8q_dtype dtype);

/* The dtype whose own type character (PEP 3118 and NumPy) is `type`: 1 and
 * *dtype for 'f' float32, 'e' float16 and 'B' uint8; 0 for any other
 * character ('H' is uint16, never bfloat16), *dtype untouched. */
int fp8q_dtype_from_type_char(char type, fp8q_dtype *dtype);

/* The dtype input of a NumPy built-in dtype fp8q does not store converts
 * to, by the NumPy dtype's kind and type characters: FP8Q_FLOAT32 for bool
 * ('b'), integers ('i', 'u') and floats ('f'), except float16 (type 'e',
 * e.g. big-endian), which stays FP8Q_FLOAT16; -1 for every other kind
 * (complex, strings, objects, dates, structured, ...). */
int fp8q_dtype_numpy_conversion(char kind, char type);

/* Fills `view` (zeroing it first) over `data` with dtype `dtype`, ndim
 * extents `shape` and the strides `byte_strides` in bytes (as NumPy gives
 * them) converted to elements: 1, or 0 when a stride is not a whole number
 * of elements on an axis of extent > 1, a layout no view describes. The
 * stride of an extent of 0 or 1, which is never applied, becomes 0 when it
 * is not whole. ndim must be in [0, FP8Q_MAX_DIMS]. */
int fp8q_view_init_byte_strided(fp8q_view *view, void *data, fp8q_dtype dtype,
                                int ndim, const int64_t *shape,
                                const int64_t *byte_strides);

/* A new C-contiguous host view of `shape`: fp8q_view_init_contiguous's
 * layout (and its errors) over a new fp8q_aligned_alloc block, which
 * *allocation receives (free it with fp8q_aligned_free; NULL on failure).
 * FP8Q_ERROR_MEMORY "fp8q: cannot allocate N bytes on this platform" when
 * the size does not fit size_t, "fp8q: failed to allocate N bytes for a
 * tensor" when the allocation fails. */
fp8q_status fp8q_view_alloc_contiguous(fp8q_view *view, fp8q_dtype dtype,
                                       int ndim, const int64_t *shape,
                                       void **allocation, fp8q_error *error);

#endif /* FP8Q_CORE_VIEW_LAYOUT_H */
