/*
 * view.h - strided N-d views of memory, the currency of every core operation.
 *
 * A view never owns its memory. Strides are in elements (as in DLPack and
 * PyTorch) and may be zero (broadcast) or negative. Core operations take
 * views, check their shapes, and walk them with fp8q_for_each_row().
 */
#ifndef FP8Q_CORE_VIEW_H
#define FP8Q_CORE_VIEW_H

#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"

#define FP8Q_MAX_DIMS 16

typedef struct fp8q_view {
    void *data; /* address of element (0, ..., 0) */
    fp8q_dtype dtype;
    int ndim;
    int64_t shape[FP8Q_MAX_DIMS];
    int64_t strides[FP8Q_MAX_DIMS]; /* in elements */
} fp8q_view;

/* Number of elements (1 for a 0-d view, 0 if any extent is 0, whatever the
 * other extents). */
int64_t fp8q_view_size(const fp8q_view *view);

/* Nonzero when the view is C-contiguous (extents of 1 may have any stride). */
int fp8q_view_is_contiguous(const fp8q_view *view);

/* Fills `view` with a C-contiguous layout of `shape` over `data` (extents of
 * 0 count as 1 in the strides; a view with no elements is never too large,
 * and its strides that would not fit int64 byte offsets are 0). Fails with
 * FP8Q_ERROR_VALUE on ndim outside [0, FP8Q_MAX_DIMS] or a negative extent,
 * and on a byte size that overflows int64. */
fp8q_status fp8q_view_init_contiguous(fp8q_view *view, void *data,
                                      fp8q_dtype dtype, int ndim,
                                      const int64_t *shape, fp8q_error *error);

/* FP8Q_ERROR_VALUE "<prefix>extents must be >= 0, got E at axis A" for the
 * first negative extent of shape[0..ndim), else FP8Q_OK. */
fp8q_status fp8q_shape_check_extents(int ndim, const int64_t *shape,
                                     const char *prefix, fp8q_error *error);

/* Checks that a view described by someone else (a DLPack producer) can be
 * walked with int64 byte offsets: ndim in [0, FP8Q_MAX_DIMS], extents >= 0,
 * and both the number of bytes and the byte span of its elements within
 * int64. FP8Q_ERROR_VALUE naming `argument_name` otherwise, FP8Q_ERROR_TYPE
 * for an invalid dtype. */
fp8q_status fp8q_view_check_layout(const fp8q_view *view,
                                   const char *argument_name,
                                   fp8q_error *error);

/* FP8Q_ERROR_VALUE "<argument_name>: expected shape S (the input's), got T"
 * unless `received` has the shape of `expected`. */
fp8q_status fp8q_view_check_same_shape(const fp8q_view *expected,
                                       const fp8q_view *received,
                                       const char *argument_name,
                                       fp8q_error *error);

/* FP8Q_ERROR_VALUE naming `argument_name` (and the axis, its extent and
 * stride) for an output view whose elements may alias each other (a stride
 * of 0, overlapping as_strided rows): one that would receive several
 * results in one element. Sorted by |stride|, every axis of extent > 1 must
 * step past everything the smaller-stride axes span; layouts that alias
 * nothing yet interleave (rare) are refused too. Also fails as
 * fp8q_view_check_layout does. A view with no elements is always fine. */
fp8q_status fp8q_view_check_writable(const fp8q_view *view,
                                     const char *argument_name,
                                     fp8q_error *error);

/* Bytes spanned by the view's elements: writes the lowest and one-past-the-
 * highest byte offsets, relative to data, that any element touches (both 0 for
 * an empty view). Used for bounds and overlap checks. */
void fp8q_view_byte_extent(const fp8q_view *view, int64_t *low, int64_t *high);

/*
 * NumPy broadcasting: makes `out` a view of `in` with the given target shape
 * (extents of 1 and missing leading dims get stride 0). Fails with
 * FP8Q_ERROR_VALUE naming `argument_name`, both shapes and the first axis that
 * does not match.
 */
fp8q_status fp8q_view_broadcast_to(const fp8q_view *in, int ndim,
                                   const int64_t *shape, fp8q_view *out,
                                   const char *argument_name,
                                   fp8q_error *error);

/* The part [first, end) of `view` along `axis` (0 <= first <= end <=
 * extent), for cutting work into slices. */
void fp8q_view_slice(const fp8q_view *view, int axis, int64_t first,
                     int64_t end, fp8q_view *out);

/* The axis with the largest extent (the first of equals), or -1 for a 0-d
 * view: where to cut a view into the most slices. */
int fp8q_view_longest_axis(const fp8q_view *view);

/* ------------------------------------------------------------------------- */
/* 2-D blocks                                                                */

/* ceil(extent / block) for extent >= 0 and block >= 1, without overflow:
 * the number of blocks of `block` elements that cover `extent`. */
int64_t fp8q_block_count(int64_t extent, int64_t block);

/* Address of element (row, col) of a 2-D view. */
char *fp8q_view_element_2d(const fp8q_view *view, int64_t row, int64_t col);

/*
 * Checks a 2-D source (M, N), block extents (both >= 1) and the float32 view
 * `blocks` holding one value per block, of shape (ceil(M / block_rows),
 * ceil(N / block_cols)). FP8Q_ERROR_VALUE / FP8Q_ERROR_TYPE naming
 * `blocks_name` otherwise.
 */
fp8q_status fp8q_view_check_block_grid(const fp8q_view *source,
                                       int64_t block_rows, int64_t block_cols,
                                       const fp8q_view *blocks,
                                       const char *blocks_name,
                                       fp8q_error *error);

/* Writes "(2, 3, 4)" into buffer (always NUL-terminated); for messages.
 * FP8Q_SHAPE_TEXT_SIZE bytes hold every shape a message shows in full. */
#define FP8Q_SHAPE_TEXT_SIZE 256
void fp8q_format_shape(char *buffer, size_t buffer_size, int ndim,
                       const int64_t *shape);

/* ------------------------------------------------------------------------- */
/* Iteration                                                                 */

#define FP8Q_MAX_OPERANDS 4

/*
 * Called for one innermost run of `count` elements: pointers[k] is the
 * address of operand k's first element of the run and byte_strides[k] its
 * step in bytes (0 for a broadcast operand).
 */
typedef void (*fp8q_row_fn)(void *context, char *const *pointers,
                            const int64_t *byte_strides, int64_t count);

/*
 * Walks the common shape of `n_operands` views (all with the same ndim and
 * shape; use fp8q_view_broadcast_to first) and calls `row` for every
 * innermost run. Dimensions are coalesced where every operand allows it, so
 * contiguous data arrives as a single long run. With parallel != 0, large
 * iteration spaces are split across fp8q_num_threads() threads; `row` must
 * then be safe to call concurrently on disjoint parts (no operand written at
 * the same element from two runs, i.e. no stride-0 output).
 */
fp8q_status fp8q_for_each_row(int n_operands, const fp8q_view *const *views,
                              fp8q_row_fn row, void *context, int parallel,
                              fp8q_error *error);

/* ------------------------------------------------------------------------- */
/* Threading policy                                                          */

/* The most threads fp8q_set_num_threads and FP8Q_NUM_THREADS may ask for:
 * a sanity bound far above any real processor count. */
#define FP8Q_MAX_THREADS 4096

/* Threads core operations may use (default: fp8q_cpu_count(), or the
 * FP8Q_NUM_THREADS environment variable, 1 to FP8Q_MAX_THREADS, read at
 * first use). */
int fp8q_num_threads(void);
/* Sets it (n at most FP8Q_MAX_THREADS); n < 1 restores the default. */
void fp8q_set_num_threads(int n);

/* Work below this many elements runs on the calling thread only. */
#define FP8Q_PARALLEL_MIN_ELEMENTS ((int64_t)1 << 18)

/* Calls `run(context, first, end)` over consecutive ranges that together
 * cover the units [0, n_units) once, spread over fp8q_threads_for(n_elements)
 * threads (a few ranges per thread), or in one call on the calling thread
 * for small work. For operations whose units (e.g. 2-D blocks) each write
 * their own outputs. */
typedef void (*fp8q_units_fn)(void *context, int64_t first_unit,
                              int64_t end_unit);
void fp8q_for_each_unit_range(int64_t n_units, int64_t n_elements,
                              fp8q_units_fn run, void *context);

/* Threads worth using for `n_elements` of work: the smaller of
 * fp8q_num_threads() and n_elements / FP8Q_PARALLEL_MIN_ELEMENTS, at least 1.
 * For operations that split their work themselves. */
int fp8q_threads_for(int64_t n_elements);

#endif /* FP8Q_CORE_VIEW_H */
