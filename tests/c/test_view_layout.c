/*
 * test_view_layout.c - core/view_layout.c: the shapes of reshapes (one
 * extent inferred, every refusal and its message), re-cuts of the last axis
 * for another itemsize (checked element by element against the bytes),
 * 2-D transposes, Fortran contiguity, byte counts, what a buffer
 * request gets, type characters, views of byte strides, extent checks and
 * new contiguous host views.
 */
#include <string.h>

#include "core/view_layout.h"
#include "platform.h"
#include "harness.h"
#include "helpers.h"

void test_view_reshape_shape(void)
{
    float data[24];
    const int64_t source_shape[3] = {2, 3, 4};
    const int64_t empty_shape[2] = {0, 5};
    int64_t shape[4];
    fp8q_view view = make_view(data, FP8Q_FLOAT32, 3, source_shape, NULL);
    fp8q_view empty = make_view(data, FP8Q_FLOAT32, 2, empty_shape, NULL);
    fp8q_error error;

    shape[0] = 4;
    shape[1] = -1;
    CHECK_OK(fp8q_view_reshape_shape(&view, 2, shape, "R", &error), &error);
    CHECK_INT(shape[1], 6);
    shape[0] = 24;
    CHECK_OK(fp8q_view_reshape_shape(&view, 1, shape, "R", &error), &error);

    shape[0] = -1;
    shape[1] = -1;
    CHECK_ERROR(fp8q_view_reshape_shape(&view, 2, shape, "R", &error), &error,
                FP8Q_ERROR_VALUE,
                "R: extents must be >= 0, with at most one -1, got -1 at "
                "axis 1",
                NULL, NULL);
    shape[0] = 5;
    shape[1] = 5;
    CHECK_ERROR(fp8q_view_reshape_shape(&view, 2, shape, "R", &error), &error,
                FP8Q_ERROR_VALUE,
                "R: cannot reshape a tensor of shape (2, 3, 4) (24 elements) "
                "into (5, 5)",
                NULL, NULL);
    shape[0] = 5;
    shape[1] = -1;
    CHECK_ERROR(fp8q_view_reshape_shape(&view, 2, shape, "R", &error), &error,
                FP8Q_ERROR_VALUE, "into (5, -1)", NULL, NULL);
    /* Left as given by a refusal; no 0 extent, so no word of one. */
    CHECK_INT(shape[1], -1);
    CHECK(strstr(error.message, "extent of 0") == NULL);
    shape[0] = 48;
    CHECK_ERROR(fp8q_view_reshape_shape(&view, 2, shape, "R", &error), &error,
                FP8Q_ERROR_VALUE, "(24 elements) into (48, -1)", NULL, NULL);
    CHECK(strstr(error.message, "extent of 0") == NULL);
    shape[0] = INT64_C(1) << 40;
    shape[1] = INT64_C(1) << 40;
    CHECK_ERROR(fp8q_view_reshape_shape(&view, 2, shape, "R", &error), &error,
                FP8Q_ERROR_VALUE,
                "R: the shape (1099511627776, 1099511627776) has too many "
                "elements",
                NULL, NULL);

    /* Empty: any shape with a 0; -1 beside a 0 cannot be inferred. */
    shape[0] = 7;
    shape[1] = 0;
    shape[2] = INT64_C(1) << 62;
    CHECK_OK(fp8q_view_reshape_shape(&empty, 3, shape, "R", &error), &error);
    shape[0] = 0;
    shape[1] = -1;
    CHECK_ERROR(fp8q_view_reshape_shape(&empty, 2, shape, "R", &error),
                &error, FP8Q_ERROR_VALUE, "into (0, -1)",
                "(-1 cannot be inferred next to an extent of 0)", NULL);
}

/* The longest refusal of a reshape (16 extents of 18 digits on both sides,
 * each shape text at its cap) keeps its whole message: the binding
 * raised it unbounded before it moved into fp8q_error. */
void test_view_reshape_longest_message(void)
{
    float data[1];
    int64_t source_shape[FP8Q_MAX_DIMS];
    int64_t shape[FP8Q_MAX_DIMS];
    fp8q_view empty;
    fp8q_error error;
    int axis;

    for (axis = 0; axis < FP8Q_MAX_DIMS; axis++) {
        source_shape[axis] = axis == 0 ? 0 : INT64_C(100000000000000000);
        shape[axis] = axis == 0   ? -1
                      : axis == 1 ? 0
                                  : INT64_C(100000000000000000);
    }
    empty = make_view(data, FP8Q_FLOAT32, FP8Q_MAX_DIMS, source_shape, NULL);
    CHECK_ERROR(fp8q_view_reshape_shape(&empty, FP8Q_MAX_DIMS, shape, "R",
                                        &error),
                &error, FP8Q_ERROR_VALUE,
                "R: cannot reshape a tensor of shape (0, 100000000000000000, ",
                " (0 elements) into (-1, 0, 100000000000000000, ",
                "(-1 cannot be inferred next to an extent of 0)");
    CHECK(strlen(error.message) > 600);
}

void test_view_recut_and_transpose(void)
{
    uint32_t words[12];
    const int64_t shape[2] = {3, 4};
    const int64_t wide_shape[2] = {3, 2};
    const int64_t gapped[2] = {4, 1};
    fp8q_view view;
    fp8q_view out;
    fp8q_view back;
    fp8q_error error;
    int64_t row;
    int64_t col;

    /* float32 (3, 4) as uint8: (3, 16), every byte where it was. */
    view = make_view(words, FP8Q_FLOAT32, 2, shape, NULL);
    CHECK_OK(fp8q_view_recut_last_axis(&view, FP8Q_UINT8, &out, "V", &error),
             &error);
    CHECK_INT(out.dtype, FP8Q_UINT8);
    CHECK_INT(out.shape[0], 3);
    CHECK_INT(out.shape[1], 16);
    CHECK_INT(out.strides[0], 16);
    CHECK_INT(out.strides[1], 1);
    for (row = 0; row < 3; row++) {
        for (col = 0; col < 16; col++) {
            CHECK(fp8q_view_element_2d(&out, row, col) ==
                  (char *)words + row * 16 + col);
        }
    }
    /* ... and back to float32, then to bfloat16 (3, 8). */
    CHECK_OK(fp8q_view_recut_last_axis(&out, FP8Q_FLOAT32, &back, "V",
                                       &error),
             &error);
    CHECK_INT(back.shape[1], 4);
    CHECK_INT(back.strides[0], 4);
    CHECK_OK(fp8q_view_recut_last_axis(&view, FP8Q_BFLOAT16, &out, "V",
                                       &error),
             &error);
    CHECK_INT(out.shape[1], 8);
    CHECK_INT(out.strides[0], 8);

    /* A (3, 2) view with row stride 4 (a gap) still re-cuts; its
     * transpose (non-contiguous last axis) does not; neither does a 0-d
     * view nor a misaligned one. */
    view = make_view(words, FP8Q_FLOAT32, 2, wide_shape, gapped);
    CHECK_OK(fp8q_view_recut_last_axis(&view, FP8Q_FLOAT16, &out, "V",
                                       &error),
             &error);
    CHECK_INT(out.shape[1], 4);
    CHECK_INT(out.strides[0], 8);
    fp8q_view_transpose_2d(&view, &out);
    CHECK_INT(out.shape[0], 2);
    CHECK_INT(out.shape[1], 3);
    CHECK_INT(out.strides[0], 1);
    CHECK_INT(out.strides[1], 4);
    CHECK(fp8q_view_element_2d(&out, 1, 2) ==
          fp8q_view_element_2d(&view, 2, 1));
    CHECK_ERROR(fp8q_view_recut_last_axis(&out, FP8Q_UINT8, &back, "V",
                                          &error),
                &error, FP8Q_ERROR_VALUE,
                "V: cannot read a tensor of float32 (itemsize 4) as uint8 "
                "(itemsize 1): that needs at least one dimension",
                NULL, NULL);
    view = make_view(words, FP8Q_FLOAT32, 0, NULL, NULL);
    CHECK_ERROR(fp8q_view_recut_last_axis(&view, FP8Q_UINT8, &out, "V",
                                          &error),
                &error, FP8Q_ERROR_VALUE, "V: cannot read", NULL, NULL);
    view = make_view((char *)words + 2, FP8Q_FLOAT16, 2, shape, NULL);
    CHECK_ERROR(fp8q_view_recut_last_axis(&view, FP8Q_FLOAT32, &out, "V",
                                          &error),
                &error, FP8Q_ERROR_VALUE, "as float32 (itemsize 4)",
                "a multiple of 4", NULL);

    /* An empty float32 (0, 2**61 + 1) as uint8: its last extent would pass
     * INT64_MAX (it once wrapped to a negative one); as float16 the
     * same, its row stride (2**61 + 1) too. */
    {
        const int64_t huge[2] = {0, ((int64_t)1 << 61) + 1};
        view = make_view(words, FP8Q_FLOAT32, 2, huge, NULL);
        CHECK_ERROR(fp8q_view_recut_last_axis(&view, FP8Q_UINT8, &out, "V",
                                              &error),
                    &error, FP8Q_ERROR_VALUE,
                    "V: cannot read a tensor of float32 as uint8: its "
                    "extents or strides in uint8 elements would not fit in "
                    "an int64",
                    NULL, NULL);
        CHECK_ERROR(fp8q_view_recut_last_axis(&view, FP8Q_FLOAT16, &out, "V",
                                              &error),
                    &error, FP8Q_ERROR_VALUE, "would not fit in an int64",
                    NULL, NULL);
        /* To a larger itemsize nothing grows: uint8 (0, 2**62) as
         * float32 is (0, 2**60). */
        view.dtype = FP8Q_UINT8;
        view.shape[1] = (int64_t)1 << 62;
        view.strides[0] = (int64_t)1 << 62;
        CHECK_OK(fp8q_view_recut_last_axis(&view, FP8Q_FLOAT32, &out, "V",
                                           &error),
                 &error);
        CHECK_INT(out.shape[1], (int64_t)1 << 60);
        /* Growing, the products shape * old itemsize overflow as well:
         * float16 (0, 2**62 + 2) as float32. */
        view.dtype = FP8Q_FLOAT16;
        view.shape[1] = ((int64_t)1 << 62) + 2;
        view.strides[0] = ((int64_t)1 << 62) + 2;
        CHECK_ERROR(fp8q_view_recut_last_axis(&view, FP8Q_FLOAT32, &out, "V",
                                              &error),
                    &error, FP8Q_ERROR_VALUE, "would not fit in an int64",
                    NULL, NULL);
    }
}

void test_view_fortran_contiguous(void)
{
    /* (shape, strides, Fortran-contiguous?) of 2-D float32 views. */
    static const struct {
        int64_t shape[2];
        int64_t strides[2];
        int expected;
    } cases[] = {
        {{3, 4}, {1, 3}, 1},  /* column-major */
        {{3, 4}, {4, 1}, 0},  /* row-major */
        {{3, 4}, {1, 4}, 0},  /* a gap between columns */
        {{1, 4}, {99, 1}, 1}, /* extents of 1: any stride */
        {{0, 4}, {5, 7}, 1},  /* empty */
    };
    float data[64];
    fp8q_view view;
    size_t index;

    for (index = 0; index < sizeof cases / sizeof cases[0]; index++) {
        view = make_view(data, FP8Q_FLOAT32, 2, cases[index].shape,
                         cases[index].strides);
        CHECK_INT(fp8q_view_is_fortran_contiguous(&view),
                  cases[index].expected);
    }
    view = make_view(data, FP8Q_FLOAT32, 0, NULL, NULL);
    CHECK(fp8q_view_is_fortran_contiguous(&view));
}

void test_view_overlaps_unsafely(void)
{
    /* Shapes, and strides (transposed, odd). */
    static const struct {
        int64_t square[2], half[2], flat[1], transposed[2], row[2], odd[2],
            empty[2];
    } dims = {{4, 4}, {2, 4}, {16}, {1, 4}, {1, 4}, {7, 1}, {0, 4}};
    float data[64];
    uint8_t bytes[64];
    fp8q_view a = make_view(data, FP8Q_FLOAT32, 2, dims.square, NULL);
    fp8q_view b;

    /* The very same elements: safe in place. */
    b = a;
    CHECK_INT(fp8q_view_overlaps_unsafely(&a, &b), 0);
    /* Same bytes, another itemsize: unsafe. */
    b = make_view(data, FP8Q_FLOAT16, 2, dims.square, NULL);
    CHECK_INT(fp8q_view_overlaps_unsafely(&a, &b), 1);
    /* Same first element, transposed strides: unsafe. */
    b = make_view(data, FP8Q_FLOAT32, 2, dims.square, dims.transposed);
    CHECK_INT(fp8q_view_overlaps_unsafely(&a, &b), 1);
    /* Same elements seen with another ndim: unsafe. */
    b = make_view(data, FP8Q_FLOAT32, 1, dims.flat, NULL);
    CHECK_INT(fp8q_view_overlaps_unsafely(&a, &b), 1);
    /* Shifted by one row inside: unsafe; right after the end: disjoint. */
    b = make_view(data + 4, FP8Q_FLOAT32, 2, dims.square, NULL);
    CHECK_INT(fp8q_view_overlaps_unsafely(&a, &b), 1);
    b = make_view(data + 16, FP8Q_FLOAT32, 2, dims.square, NULL);
    CHECK_INT(fp8q_view_overlaps_unsafely(&a, &b), 0);
    CHECK_INT(fp8q_view_overlaps_unsafely(&b, &a), 0);
    /* An extent of 1 may have any stride and still be the same elements. */
    a = make_view(data, FP8Q_FLOAT32, 2, dims.row, NULL);
    b = make_view(data, FP8Q_FLOAT32, 2, dims.row, dims.odd);
    CHECK_INT(fp8q_view_overlaps_unsafely(&a, &b), 0);
    /* Another shape over the same start: unsafe. */
    a = make_view(data, FP8Q_FLOAT32, 2, dims.square, NULL);
    b = make_view(data, FP8Q_FLOAT32, 2, dims.half, NULL);
    CHECK_INT(fp8q_view_overlaps_unsafely(&a, &b), 1);
    /* An empty view overlaps nothing; bytes inside a float: unsafe. */
    b = make_view(data, FP8Q_FLOAT32, 2, dims.empty, NULL);
    CHECK_INT(fp8q_view_overlaps_unsafely(&a, &b), 0);
    a = make_view(bytes, FP8Q_UINT8, 1, dims.flat, NULL);
    b = make_view(bytes + 1, FP8Q_FLOAT32, 1, dims.half + 1, NULL);
    CHECK_INT(fp8q_view_overlaps_unsafely(&a, &b), 1);
}

void test_view_drop_axes(void)
{
    float data[24];
    const int64_t shape[4] = {2, 1, 3, 1};
    const int drop_middle[4] = {0, 1, 0, 1};
    const int drop_all[4] = {1, 1, 1, 1};
    fp8q_view view = make_view(data, FP8Q_FLOAT32, 4, shape, NULL);
    fp8q_view out;

    fp8q_view_drop_axes(&view, drop_middle, &out);
    CHECK_INT(out.ndim, 2);
    CHECK_INT(out.shape[0], 2);
    CHECK_INT(out.shape[1], 3);
    CHECK_INT(out.strides[0], 3);
    CHECK_INT(out.strides[1], 1);
    CHECK(out.data == (void *)data && out.dtype == FP8Q_FLOAT32);
    fp8q_view_drop_axes(&view, drop_all, &out);
    CHECK_INT(out.ndim, 0);
    CHECK(out.data == (void *)data);
}

void test_view_bytes_and_buffer_requests(void)
{
    uint16_t data[24];
    const int64_t shape[3] = {2, 3, 4};
    fp8q_view view = make_view(data, FP8Q_FLOAT16, 3, shape, NULL);
    fp8q_view fortran;
    fp8q_view gapped;
    const unsigned strided = FP8Q_BUFFER_STRIDES;
    const char *refusal;
    int axis;

    /* Byte counts: 24 float16 elements, 0 for an empty view. */
    CHECK_INT(fp8q_view_nbytes(&view), 48);
    view.shape[1] = 0;
    CHECK_INT(fp8q_view_nbytes(&view), 0);
    view.shape[1] = 3;

    /* C order serves every request but Fortran order. */
    CHECK(fp8q_view_buffer_refusal(&view, 0, 0) == NULL);
    CHECK(fp8q_view_buffer_refusal(&view, 0, FP8Q_BUFFER_WRITABLE |
                                                 FP8Q_BUFFER_C_CONTIGUOUS |
                                                 FP8Q_BUFFER_ANY_CONTIGUOUS |
                                                 strided) == NULL);
    refusal = fp8q_view_buffer_refusal(&view, 0, FP8Q_BUFFER_F_CONTIGUOUS);
    CHECK(refusal != NULL &&
          strcmp(refusal, "a Fortran-contiguous buffer was requested but "
                          "the tensor is not Fortran-contiguous") == 0);
    refusal = fp8q_view_buffer_refusal(&view, 1, FP8Q_BUFFER_WRITABLE);
    CHECK(refusal != NULL &&
          strcmp(refusal, "the tensor is read-only; a writable buffer was "
                          "requested") == 0);
    CHECK(fp8q_view_buffer_refusal(&view, 1, 0) == NULL);

    /* Fortran order: only with strides; C order refused, any order not. */
    fortran = view;
    fortran.strides[0] = 1;
    fortran.strides[1] = 2;
    fortran.strides[2] = 6;
    refusal = fp8q_view_buffer_refusal(&fortran, 0, 0);
    CHECK(refusal != NULL &&
          strcmp(refusal, "the tensor is not C-contiguous and the consumer "
                          "did not ask for strides; use .contiguous()") == 0);
    CHECK(fp8q_view_buffer_refusal(&fortran, 0,
                                   strided | FP8Q_BUFFER_F_CONTIGUOUS |
                                       FP8Q_BUFFER_ANY_CONTIGUOUS) == NULL);
    refusal = fp8q_view_buffer_refusal(&fortran, 0,
                                       strided | FP8Q_BUFFER_C_CONTIGUOUS);
    CHECK(refusal != NULL &&
          strcmp(refusal, "a C-contiguous buffer was requested but the "
                          "tensor is not C-contiguous; use .contiguous()") ==
              0);

    /* Gaps: neither order, so only a plain strided request. */
    gapped = view;
    for (axis = 0; axis < 3; axis++) {
        gapped.strides[axis] *= 2;
    }
    gapped.shape[0] = 1;
    CHECK(fp8q_view_buffer_refusal(&gapped, 0, strided) == NULL);
    refusal = fp8q_view_buffer_refusal(&gapped, 0,
                                       strided | FP8Q_BUFFER_ANY_CONTIGUOUS);
    CHECK(refusal != NULL &&
          strcmp(refusal, "a contiguous buffer was requested but the tensor "
                          "is neither C- nor Fortran-contiguous") == 0);

    /* Formats: PEP 3118 characters, raw codes where it has none. */
    CHECK(strcmp(fp8q_dtype_buffer_format(FP8Q_FLOAT32), "f") == 0);
    CHECK(strcmp(fp8q_dtype_buffer_format(FP8Q_FLOAT16), "e") == 0);
    CHECK(strcmp(fp8q_dtype_buffer_format(FP8Q_BFLOAT16), "H") == 0);
    CHECK(strcmp(fp8q_dtype_buffer_format(FP8Q_UINT8), "B") == 0);
    CHECK(strcmp(fp8q_dtype_buffer_format(FP8Q_FLOAT8_E4M3FN), "B") == 0);
    CHECK(strcmp(fp8q_dtype_buffer_format(FP8Q_FLOAT8_E5M2FNUZ), "B") == 0);
}

void test_view_same_itemsize_recut(void)
{
    uint8_t bytes[24];
    const int64_t shape[2] = {3, 4};
    const int64_t odd_strides[2] = {-1, 3};
    fp8q_view view;
    fp8q_view out;
    fp8q_error error;

    /* Same itemsize: any layout (a 0-d view, negative and non-unit strides)
     * keeps shape, strides and address; only the dtype changes. */
    view = make_view(bytes + 12, FP8Q_UINT8, 2, shape, odd_strides);
    CHECK_OK(fp8q_view_recut_last_axis(&view, FP8Q_FLOAT8_E4M3FN, &out, "V",
                                       &error),
             &error);
    CHECK_INT(out.dtype, FP8Q_FLOAT8_E4M3FN);
    CHECK(out.data == bytes + 12);
    CHECK_INT(out.ndim, 2);
    CHECK_INT(out.shape[0], 3);
    CHECK_INT(out.shape[1], 4);
    CHECK_INT(out.strides[0], -1);
    CHECK_INT(out.strides[1], 3);
    view = make_view(bytes + 1, FP8Q_FLOAT16, 0, NULL, NULL);
    CHECK_OK(fp8q_view_recut_last_axis(&view, FP8Q_BFLOAT16, &out, "V",
                                       &error),
             &error);
    CHECK_INT(out.dtype, FP8Q_BFLOAT16);
    CHECK_INT(out.ndim, 0);
    CHECK(out.data == bytes + 1);
}

void test_dtype_from_type_char(void)
{
    fp8q_dtype dtype = FP8Q_FLOAT8_E5M2;
    const char *others = "HhbdgFDUSOV?il";

    CHECK_INT(fp8q_dtype_from_type_char('f', &dtype), 1);
    CHECK_INT(dtype, FP8Q_FLOAT32);
    CHECK_INT(fp8q_dtype_from_type_char('e', &dtype), 1);
    CHECK_INT(dtype, FP8Q_FLOAT16);
    CHECK_INT(fp8q_dtype_from_type_char('B', &dtype), 1);
    CHECK_INT(dtype, FP8Q_UINT8);
    /* Inverse of fp8q_dtype_buffer_format where a dtype has its own
     * character; raw-code characters and any other are not dtypes. */
    dtype = FP8Q_FLOAT8_E5M2;
    for (; *others != '\0'; others++) {
        CHECK_INT(fp8q_dtype_from_type_char(*others, &dtype), 0);
    }
    CHECK_INT(dtype, FP8Q_FLOAT8_E5M2);
    CHECK_INT(fp8q_dtype_from_type_char(
                  fp8q_dtype_buffer_format(FP8Q_FLOAT16)[0], &dtype),
              1);
    CHECK_INT(dtype, FP8Q_FLOAT16);
}

void test_dtype_numpy_conversion(void)
{
    /* (kind, type) of np.dtype(bool), int8, int64, uint16, float64,
     * longdouble, '>f4', '>f2', complex64, 'U', 'S', object, datetime64,
     * a structured dtype. */
    static const signed char cases[][3] = {
        {'b', '?', FP8Q_FLOAT32}, {'i', 'b', FP8Q_FLOAT32},
        {'i', 'l', FP8Q_FLOAT32}, {'u', 'H', FP8Q_FLOAT32},
        {'f', 'd', FP8Q_FLOAT32}, {'f', 'g', FP8Q_FLOAT32},
        {'f', 'f', FP8Q_FLOAT32}, {'f', 'e', FP8Q_FLOAT16},
        {'c', 'F', -1},           {'U', 'U', -1},
        {'S', 'S', -1},           {'O', 'O', -1},
        {'M', 'M', -1},           {'V', 'V', -1},
    };
    size_t index;

    for (index = 0; index < sizeof cases / sizeof cases[0]; index++) {
        CHECK_INT(fp8q_dtype_numpy_conversion((char)cases[index][0],
                                              (char)cases[index][1]),
                  cases[index][2]);
    }
}

void test_view_init_byte_strided(void)
{
    float values[12];
    const int64_t shape[3] = {2, 3, 1};
    const int64_t byte_strides[3] = {-24, 8, 6};
    const int64_t half_element[3] = {12, 6, 4};
    const int64_t single[2] = {1, 0};
    const int64_t odd_single[2] = {3, 5};
    fp8q_view view;

    /* Whole-element byte strides, negative ones included, become element
     * strides; the stride of an extent of 1 that is not whole becomes 0. */
    CHECK_INT(fp8q_view_init_byte_strided(&view, values + 6, FP8Q_FLOAT32, 3,
                                          shape, byte_strides),
              1);
    CHECK(view.data == values + 6);
    CHECK_INT(view.dtype, FP8Q_FLOAT32);
    CHECK_INT(view.ndim, 3);
    CHECK_INT(view.shape[1], 3);
    CHECK_INT(view.strides[0], -6);
    CHECK_INT(view.strides[1], 2);
    CHECK_INT(view.strides[2], 0);
    CHECK_INT(view.shape[3], 0);
    CHECK_INT(view.strides[3], 0);
    /* Extents of 1 and 0 never apply their stride. */
    CHECK_INT(fp8q_view_init_byte_strided(&view, values, FP8Q_FLOAT32, 2,
                                          single, odd_single),
              1);
    CHECK_INT(view.strides[0], 0);
    CHECK_INT(view.strides[1], 0);
    /* A stride of half an element on an axis of extent 3: not a view. */
    CHECK_INT(fp8q_view_init_byte_strided(&view, values, FP8Q_FLOAT32, 3,
                                          shape, half_element),
              0);
    /* 0-d. */
    CHECK_INT(fp8q_view_init_byte_strided(&view, values, FP8Q_FLOAT16, 0,
                                          NULL, NULL),
              1);
    CHECK_INT(view.ndim, 0);
    CHECK_INT(view.dtype, FP8Q_FLOAT16);
}

void test_shape_check_extents(void)
{
    const int64_t good[3] = {0, 5, 1};
    const int64_t bad[3] = {2, -3, -1};
    fp8q_error error;

    CHECK_OK(fp8q_shape_check_extents(3, good, "shape: ", &error), &error);
    CHECK_OK(fp8q_shape_check_extents(0, NULL, "shape: ", &error), &error);
    CHECK_ERROR(fp8q_shape_check_extents(3, bad, "shape: ", &error), &error,
                FP8Q_ERROR_VALUE, "shape: extents must be >= 0, got -3 at "
                "axis 1", NULL, NULL);
    CHECK(strcmp(error.message,
                 "shape: extents must be >= 0, got -3 at axis 1") == 0);
}

void test_view_alloc_contiguous(void)
{
    const int64_t shape[2] = {3, 5};
    const int64_t empty[2] = {0, 7};
    const int64_t negative[1] = {-2};
    const int64_t huge[2] = {INT64_MAX / 4, 2};
    fp8q_view view;
    fp8q_error error;
    void *allocation = &view;

    CHECK_OK(fp8q_view_alloc_contiguous(&view, FP8Q_FLOAT16, 2, shape,
                                        &allocation, &error),
             &error);
    CHECK(allocation != NULL && view.data == allocation);
    CHECK_INT((uintptr_t)allocation % 64, 0);
    CHECK_INT(view.dtype, FP8Q_FLOAT16);
    CHECK_INT(view.strides[0], 5);
    CHECK_INT(view.strides[1], 1);
    memset(allocation, 0xA5, 30); /* all 30 bytes are usable */
    fp8q_aligned_free(allocation);
    /* No elements: still a valid, unique block. */
    CHECK_OK(fp8q_view_alloc_contiguous(&view, FP8Q_UINT8, 2, empty,
                                        &allocation, &error),
             &error);
    CHECK(allocation != NULL && view.data == allocation);
    fp8q_aligned_free(allocation);
    /* fp8q_view_init_contiguous's errors, with no block. */
    CHECK_ERROR(fp8q_view_alloc_contiguous(&view, FP8Q_UINT8, 1, negative,
                                           &allocation, &error),
                &error, FP8Q_ERROR_VALUE, "extents must be >= 0", NULL, NULL);
    CHECK(allocation == NULL);
    CHECK_ERROR(fp8q_view_alloc_contiguous(&view, FP8Q_FLOAT32, 2, huge,
                                           &allocation, &error),
                &error, FP8Q_ERROR_VALUE, "is too large", NULL, NULL);
    CHECK(allocation == NULL);
}
