/*
 * test_dlpack.c - the DLPack logic below the binding (core/dlpack.c):
 * dtype codes against the DLPack 1.1 table, the checked view of a DLPack
 * tensor (layouts accepted, every refusal and its status and message), the
 * description of a view for an export, and the producer's stream and device
 * values, the export blocks a producer hands out and their deleters, the
 * producer's plan for a __dlpack__ call, the
 * checked view of a managed tensor, which exchange tables fp8q reads; device
 * names read and written (core/device_name.c).
 */
#include <limits.h>
#include <string.h>

#include "core/device_name.h"
#include "core/dlpack.h"
#include "harness.h"

/* A CPU DLPack tensor over `data` (no byte_offset). */
static fp8q_dl_tensor cpu_tensor(void *data, uint8_t code, uint8_t bits,
                                 int32_t ndim, int64_t *shape,
                                 int64_t *strides)
{
    fp8q_dl_tensor tensor;

    memset(&tensor, 0, sizeof tensor);
    tensor.data = data;
    tensor.device.device_type = FP8Q_DL_CPU;
    tensor.ndim = ndim;
    tensor.dtype.code = code;
    tensor.dtype.bits = bits;
    tensor.dtype.lanes = 1;
    tensor.shape = shape;
    tensor.strides = strides;
    return tensor;
}

void test_dlpack_dtype_codes(void)
{
    /* The DLPack 1.1 (code, bits) of each fp8q dtype, from the standard. */
    static const struct {
        fp8q_dtype dtype;
        int code;
        int bits;
    } table[] = {
        {FP8Q_FLOAT32, 2, 32},          {FP8Q_FLOAT16, 2, 16},
        {FP8Q_BFLOAT16, 4, 16},         {FP8Q_UINT8, 1, 8},
        {FP8Q_FLOAT8_E4M3FN, 10, 8},    {FP8Q_FLOAT8_E5M2, 12, 8},
        {FP8Q_FLOAT8_E4M3FNUZ, 11, 8},  {FP8Q_FLOAT8_E5M2FNUZ, 13, 8},
    };
    fp8q_dl_data_type type;
    fp8q_dtype dtype;
    size_t index;

    CHECK_INT(sizeof table / sizeof table[0], FP8Q_DTYPE_COUNT);
    for (index = 0; index < sizeof table / sizeof table[0]; index++) {
        type = fp8q_dl_data_type_of(table[index].dtype);
        CHECK_INT(type.code, table[index].code);
        CHECK_INT(type.bits, table[index].bits);
        CHECK_INT(type.lanes, 1);
        dtype = FP8Q_DTYPE_COUNT;
        CHECK(fp8q_dtype_from_dl(type, &dtype));
        CHECK_INT(dtype, table[index].dtype);
    }
    /* Not stored by fp8q: int32, float64, float with 2 lanes, 8-bit
     * bfloat, float8_e4m3 (code 8); *dtype untouched. */
    dtype = FP8Q_DTYPE_COUNT;
    type.code = FP8Q_DL_INT;
    type.bits = 32;
    type.lanes = 1;
    CHECK(!fp8q_dtype_from_dl(type, &dtype));
    type.code = FP8Q_DL_FLOAT;
    type.bits = 64;
    CHECK(!fp8q_dtype_from_dl(type, &dtype));
    type.bits = 32;
    type.lanes = 2;
    CHECK(!fp8q_dtype_from_dl(type, &dtype));
    type.code = FP8Q_DL_BFLOAT;
    type.bits = 8;
    type.lanes = 1;
    CHECK(!fp8q_dtype_from_dl(type, &dtype));
    type.code = FP8Q_DL_FLOAT8_E4M3;
    CHECK(!fp8q_dtype_from_dl(type, &dtype));
    CHECK_INT(dtype, FP8Q_DTYPE_COUNT);

    CHECK(strcmp(fp8q_dl_code_name(0), "int") == 0);
    CHECK(strcmp(fp8q_dl_code_name(5), "complex") == 0);
    CHECK(strcmp(fp8q_dl_code_name(9), "float8_e4m3b11fnuz") == 0);
    CHECK(strcmp(fp8q_dl_code_name(17), "float4_e2m1fn") == 0);
    /* The codes fp8q stores read "unknown" (as they always have). */
    CHECK(strcmp(fp8q_dl_code_name(10), "unknown") == 0);
    CHECK(strcmp(fp8q_dl_code_name(13), "unknown") == 0);
    CHECK(strcmp(fp8q_dl_code_name(14), "float8_e8m0fnu") == 0);
    CHECK(strcmp(fp8q_dl_code_name(18), "unknown") == 0);
}

void test_dlpack_tensor_view(void)
{
    float data[32];
    int64_t shape[2] = {3, 4};
    int64_t strides[2] = {1, 3};
    int64_t negative[2] = {-4, 1};
    fp8q_dl_tensor tensor;
    fp8q_view view;
    fp8q_error error;
    int unsupported = 0;

    /* No strides: C-contiguous. */
    tensor = cpu_tensor(data, FP8Q_DL_FLOAT, 32, 2, shape, NULL);
    CHECK_OK(fp8q_dl_tensor_view(&tensor, "x", -1, &view, &unsupported,
                                 &error),
             &error);
    CHECK(view.data == (void *)data);
    CHECK_INT(view.dtype, FP8Q_FLOAT32);
    CHECK_INT(view.ndim, 2);
    CHECK_INT(view.strides[0], 4);
    CHECK_INT(view.strides[1], 1);

    /* Given strides are kept; byte_offset moves the pointer. */
    tensor.strides = strides;
    tensor.byte_offset = 8;
    CHECK_OK(fp8q_dl_tensor_view(&tensor, "x", -1, &view, NULL, &error),
             &error);
    CHECK(view.data == (void *)(data + 2));
    CHECK_INT(view.strides[0], 1);
    CHECK_INT(view.strides[1], 3);

    /* Negative strides, the pointer at the last row. */
    tensor = cpu_tensor(data + 8, FP8Q_DL_FLOAT, 32, 2, shape, negative);
    CHECK_OK(fp8q_dl_tensor_view(&tensor, "x", -1, &view, NULL, &error),
             &error);
    CHECK_INT(view.strides[0], -4);

    /* Reinterpreted: 32-bit floats read as... 32 bits only. */
    tensor = cpu_tensor(data, 1, 8, 2, shape, NULL);
    CHECK_OK(fp8q_dl_tensor_view(&tensor, "x", FP8Q_FLOAT8_E4M3FN, &view,
                                 NULL, &error),
             &error);
    CHECK_INT(view.dtype, FP8Q_FLOAT8_E4M3FN);
    CHECK_ERROR(fp8q_dl_tensor_view(&tensor, "x", FP8Q_BFLOAT16, &view, NULL,
                                    &error),
                &error, FP8Q_ERROR_VALUE,
                "x: dtype=bfloat16 (16 bits) cannot reinterpret DLPack "
                "elements of 8 bits (code 1, uint, lanes 1)",
                NULL, NULL);

    /* 0-d without a shape pointer. */
    tensor = cpu_tensor(data, FP8Q_DL_FLOAT, 16, 0, NULL, NULL);
    CHECK_OK(fp8q_dl_tensor_view(&tensor, "x", -1, &view, NULL, &error),
             &error);
    CHECK_INT(view.ndim, 0);
    CHECK_INT(view.dtype, FP8Q_FLOAT16);

    /* A dtype fp8q does not store: TypeError and the flag. */
    tensor = cpu_tensor(data, FP8Q_DL_INT, 32, 2, shape, NULL);
    CHECK_ERROR(fp8q_dl_tensor_view(&tensor, "obj", -1, &view, &unsupported,
                                    &error),
                &error, FP8Q_ERROR_TYPE,
                "obj: unsupported DLPack dtype (code 0: int, bits 32, "
                "lanes 1)",
                NULL, NULL);
    CHECK_INT(unsupported, 1);
}

void test_dlpack_tensor_view_refusals(void)
{
    float data[32];
    int64_t shape[2] = {3, 4};
    int64_t many[FP8Q_MAX_DIMS + 1];
    int64_t spanning[2] = {INT64_C(1) << 62, 1};
    fp8q_dl_tensor tensor;
    fp8q_view view;
    fp8q_error error;
    int unsupported = 0;
    int axis;

    for (axis = 0; axis <= FP8Q_MAX_DIMS; axis++) {
        many[axis] = 1;
    }
    tensor = cpu_tensor(data, FP8Q_DL_FLOAT, 32, 2, shape, NULL);
    tensor.device.device_type = 13;
    tensor.device.device_id = 2;
    CHECK_ERROR(fp8q_dl_tensor_view(&tensor, "x", -1, &view, &unsupported,
                                    &error),
                &error, FP8Q_ERROR_BUFFER,
                "x: the data is on DLPack device (13, 2); fp8q reads CPU",
                NULL, NULL);
    CHECK_INT(unsupported, 0);

    tensor = cpu_tensor(data, FP8Q_DL_FLOAT, 32, FP8Q_MAX_DIMS + 1, many,
                        NULL);
    CHECK_ERROR(fp8q_dl_tensor_view(&tensor, "x", -1, &view, NULL, &error),
                &error, FP8Q_ERROR_VALUE,
                "x: fp8q tensors have 0 to 16 dims, got 17", NULL, NULL);

    tensor = cpu_tensor(data, FP8Q_DL_FLOAT, 32, 2, NULL, NULL);
    CHECK_ERROR(fp8q_dl_tensor_view(&tensor, "x", -1, &view, NULL, &error),
                &error, FP8Q_ERROR_BUFFER, "x: DLPack tensor without a shape",
                NULL, NULL);

    tensor = cpu_tensor(data, FP8Q_DL_FLOAT, 32, 2, shape, NULL);
    tensor.byte_offset = 6;
    CHECK_ERROR(fp8q_dl_tensor_view(&tensor, "x", -1, &view, NULL, &error),
                &error, FP8Q_ERROR_BUFFER,
                "x: DLPack byte_offset 6 is not a multiple of the 4-byte "
                "elements",
                NULL, NULL);
    tensor.byte_offset = (uint64_t)1 << 63;
    CHECK_ERROR(fp8q_dl_tensor_view(&tensor, "x", -1, &view, NULL, &error),
                &error, FP8Q_ERROR_BUFFER,
                "x: DLPack byte_offset 9223372036854775808 overflows the "
                "data pointer 0x",
                NULL, NULL);

    /* Misaligned and NULL data pointers, printed as Python's %p does. */
    tensor = cpu_tensor((char *)data + 2, FP8Q_DL_FLOAT, 32, 2, shape, NULL);
    CHECK_ERROR(fp8q_dl_tensor_view(&tensor, "x", -1, &view, NULL, &error),
                &error, FP8Q_ERROR_BUFFER, "x: DLPack data pointer 0x",
                "is not aligned to the 4-byte elements", NULL);
    tensor.data = NULL;
    CHECK_ERROR(fp8q_dl_tensor_view(&tensor, "x", -1, &view, NULL, &error),
                &error, FP8Q_ERROR_BUFFER, "x: DLPack data pointer 0x",
                "is not aligned", NULL);

    /* A layout the view checks refuse (bytes beyond int64). */
    tensor = cpu_tensor(data, FP8Q_DL_FLOAT, 32, 2, shape, spanning);
    CHECK_ERROR(fp8q_dl_tensor_view(&tensor, "x", -1, &view, NULL, &error),
                &error, FP8Q_ERROR_BUFFER, "x: unusable DLPack tensor: ",
                "shape and strides", NULL);

    /* Elements beyond the address space: rows 2**58 bytes apart. */
    if (sizeof(void *) >= 8) {
        int64_t huge[2] = {INT64_C(1) << 56, 1};

        tensor = cpu_tensor(data, FP8Q_DL_FLOAT, 32, 2, shape, huge);
        CHECK_ERROR(fp8q_dl_tensor_view(&tensor, "x", -1, &view, NULL,
                                        &error),
                    &error, FP8Q_ERROR_BUFFER,
                    "x: the elements of the DLPack tensor at 0x",
                    "(byte_offset 0 included) lie outside the address space",
                    NULL);
    }
}

/* The longest layout refusal (16 axes, extents and strides of 18 and 20
 * characters, both texts at their cap) keeps its
 * last words after the argument's prefix, as the binding's unbounded
 * message did before the check moved into fp8q_error. */
void test_dlpack_tensor_view_longest_message(void)
{
    float data[1];
    int64_t shape[FP8Q_MAX_DIMS];
    int64_t strides[FP8Q_MAX_DIMS];
    fp8q_dl_tensor tensor;
    fp8q_view view;
    fp8q_error error;
    int axis;

    for (axis = 0; axis < FP8Q_MAX_DIMS; axis++) {
        shape[axis] = INT64_C(100000000000000000);
        strides[axis] = -INT64_C(1000000000000000000);
    }
    tensor = cpu_tensor(data, FP8Q_DL_FLOAT, 32, FP8Q_MAX_DIMS, shape,
                        strides);
    CHECK_ERROR(fp8q_dl_tensor_view(&tensor, "a_long_argument_name", -1,
                                    &view, NULL, &error),
                &error, FP8Q_ERROR_BUFFER,
                "a_long_argument_name: unusable DLPack tensor: shape and "
                "strides: ",
                "spans more bytes than a 64-bit offset holds", NULL);
}

void test_dlpack_export_values(void)
{
    uint16_t data[6];
    const int64_t shape[2] = {2, 3};
    int64_t dl_shape[FP8Q_MAX_DIMS];
    int64_t dl_strides[FP8Q_MAX_DIMS];
    fp8q_dl_tensor tensor;
    fp8q_view view;
    fp8q_error error;
    uintptr_t handle = 0;

    CHECK_OK(fp8q_view_init_contiguous(&view, data, FP8Q_BFLOAT16, 2, shape,
                                       &error),
             &error);
    view.strides[0] = -3;
    memset(&tensor, 0xFF, sizeof tensor);
    fp8q_dl_tensor_describe(&tensor, &view, FP8Q_DL_CUDA, 3, dl_shape,
                            dl_strides);
    CHECK(tensor.data == (void *)data);
    CHECK_INT(tensor.device.device_type, 2);
    CHECK_INT(tensor.device.device_id, 3);
    CHECK_INT(tensor.ndim, 2);
    CHECK_INT(tensor.dtype.code, 4);
    CHECK_INT(tensor.dtype.bits, 16);
    CHECK_INT(tensor.dtype.lanes, 1);
    CHECK(tensor.shape == dl_shape && tensor.strides == dl_strides);
    CHECK_INT(dl_shape[0], 2);
    CHECK_INT(dl_shape[1], 3);
    CHECK_INT(dl_strides[0], -3);
    CHECK_INT(dl_strides[1], 1);
    CHECK_INT(tensor.byte_offset, 0);

    /* Streams: -1 no ordering; 0, < -1, LLONG_MAX and beyond uintptr_t
     * none; 1, 2 and handles are streams. */
    CHECK_INT(fp8q_dl_consumer_stream(-1, &handle), 0);
    CHECK_INT(fp8q_dl_consumer_stream(0, &handle), -1);
    CHECK_INT(fp8q_dl_consumer_stream(-2, &handle), -1);
    CHECK_INT(fp8q_dl_consumer_stream(LLONG_MIN, &handle), -1);
    CHECK_INT(fp8q_dl_consumer_stream(LLONG_MAX, &handle), -1);
    CHECK_INT(handle, 0);
    CHECK_INT(fp8q_dl_consumer_stream(1, &handle), 1);
    CHECK_INT(handle, 1);
    CHECK_INT(fp8q_dl_consumer_stream(2, &handle), 1);
    CHECK_INT(handle, 2);
    CHECK_INT(fp8q_dl_consumer_stream(0x7f0012345600LL, &handle),
              sizeof(uintptr_t) >= 8 ? 1 : -1);

    CHECK(fp8q_dl_copy_target_reachable(1, 0));
    CHECK(!fp8q_dl_copy_target_reachable(1, 1));
    CHECK(fp8q_dl_copy_target_reachable(2, 0));
    CHECK(fp8q_dl_copy_target_reachable(2, INT32_MAX));
    CHECK(!fp8q_dl_copy_target_reachable(2, (long long)INT32_MAX + 1));
    CHECK(!fp8q_dl_copy_target_reachable(2, -1));
    CHECK(!fp8q_dl_copy_target_reachable(13, 0));
}

/* The release callback of the export tests: counts its calls and keeps the
 * owner it was given. */
static int release_calls;
static void *released_owner;

static void count_release(void *owner)
{
    release_calls++;
    released_owner = owner;
}

void test_dlpack_export_blocks(void)
{
    float data[12];
    const int64_t shape[3] = {2, 3, 2};
    int owner = 7;
    fp8q_dl_managed_tensor_versioned *versioned;
    fp8q_dl_managed_tensor *legacy;
    fp8q_view view;
    fp8q_error error;

    CHECK_OK(fp8q_view_init_contiguous(&view, data, FP8Q_FLOAT32, 3, shape,
                                       &error),
             &error);
    view.strides[1] = -2; /* any strides are described as they are */

    /* Versioned: DLPack 1.1, the flags given, the view described. */
    release_calls = 0;
    released_owner = NULL;
    versioned = (fp8q_dl_managed_tensor_versioned *)fp8q_dl_export_new(
        &view, FP8Q_DL_CUDA, 5, 1,
        FP8Q_DLPACK_FLAG_READ_ONLY | FP8Q_DLPACK_FLAG_IS_COPIED, &owner,
        count_release);
    CHECK(versioned != NULL);
    CHECK_INT(versioned->version.major, 1);
    CHECK_INT(versioned->version.minor, 1);
    CHECK_INT(versioned->flags, 3);
    CHECK(versioned->manager_ctx == (void *)&owner);
    CHECK(versioned->deleter != NULL);
    CHECK(versioned->dl_tensor.data == (void *)data);
    CHECK_INT(versioned->dl_tensor.device.device_type, 2);
    CHECK_INT(versioned->dl_tensor.device.device_id, 5);
    CHECK_INT(versioned->dl_tensor.ndim, 3);
    CHECK_INT(versioned->dl_tensor.dtype.code, 2); /* kDLFloat */
    CHECK_INT(versioned->dl_tensor.dtype.bits, 32);
    CHECK_INT(versioned->dl_tensor.shape[0], 2);
    CHECK_INT(versioned->dl_tensor.shape[1], 3);
    CHECK_INT(versioned->dl_tensor.shape[2], 2);
    CHECK_INT(versioned->dl_tensor.strides[0], 6);
    CHECK_INT(versioned->dl_tensor.strides[1], -2);
    CHECK_INT(versioned->dl_tensor.strides[2], 1);
    CHECK_INT(versioned->dl_tensor.byte_offset, 0);
    /* The description is the export's own: changing the view later does
     * not change it. */
    view.shape[0] = 9;
    CHECK_INT(versioned->dl_tensor.shape[0], 2);
    view.shape[0] = 2;
    CHECK_INT(release_calls, 0);
    fp8q_dl_managed_delete(versioned, 1);
    CHECK_INT(release_calls, 1);
    CHECK(released_owner == (void *)&owner);

    /* Legacy: no version or flags; the deleter releases the owner once. */
    release_calls = 0;
    released_owner = NULL;
    legacy = (fp8q_dl_managed_tensor *)fp8q_dl_export_new(
        &view, FP8Q_DL_CPU, 0, 0, FP8Q_DLPACK_FLAG_READ_ONLY, &owner,
        count_release);
    CHECK(legacy != NULL);
    CHECK(legacy->manager_ctx == (void *)&owner);
    CHECK_INT(legacy->dl_tensor.device.device_type, 1);
    CHECK_INT(legacy->dl_tensor.device.device_id, 0);
    CHECK_INT(legacy->dl_tensor.strides[1], -2);
    legacy->deleter(legacy);
    CHECK_INT(release_calls, 1);
    CHECK(released_owner == (void *)&owner);

    /* Without a release callback the block is only freed; deleting NULL
     * or a managed tensor without a deleter does nothing. */
    legacy = (fp8q_dl_managed_tensor *)fp8q_dl_export_new(
        &view, FP8Q_DL_CPU, 0, 0, 0, NULL, NULL);
    CHECK(legacy != NULL && legacy->manager_ctx == NULL);
    fp8q_dl_managed_delete(legacy, 0);
    fp8q_dl_managed_delete(NULL, 1);
    {
        fp8q_dl_managed_tensor bare;

        memset(&bare, 0, sizeof bare);
        fp8q_dl_managed_delete(&bare, 0);
    }
    CHECK_INT(release_calls, 1);
}

void test_dlpack_managed_view(void)
{
    float data[12];
    int64_t shape[2] = {3, 4};
    fp8q_dl_managed_tensor_versioned versioned;
    fp8q_dl_managed_tensor legacy;
    fp8q_dl_device device;
    fp8q_view view;
    fp8q_error error;
    int readonly = -1;
    int unsupported = 0;

    /* Versioned 1.x: its read-only flag and device; the view as
     * fp8q_dl_tensor_view gives it. */
    memset(&versioned, 0, sizeof versioned);
    versioned.version.major = 1;
    versioned.version.minor = 7;
    versioned.flags = FP8Q_DLPACK_FLAG_READ_ONLY | FP8Q_DLPACK_FLAG_IS_COPIED;
    versioned.dl_tensor = cpu_tensor(data, FP8Q_DL_FLOAT, 32, 2, shape, NULL);
    versioned.dl_tensor.device.device_id = 0;
    device.device_type = -1;
    CHECK_OK(fp8q_dl_managed_view(&versioned, 1, "x", -1, &view, &readonly,
                                  &device, &unsupported, &error),
             &error);
    CHECK_INT(readonly, 1);
    CHECK_INT(device.device_type, FP8Q_DL_CPU);
    CHECK(view.data == (void *)data);
    CHECK_INT(view.dtype, FP8Q_FLOAT32);
    CHECK_INT(view.shape[1], 4);
    CHECK_INT(view.strides[0], 4);
    versioned.flags = FP8Q_DLPACK_FLAG_IS_COPIED;
    CHECK_OK(fp8q_dl_managed_view(&versioned, 1, "x", -1, &view, &readonly,
                                  &device, &unsupported, &error),
             &error);
    CHECK_INT(readonly, 0);

    /* Other major versions are refused before their tensor is read. */
    versioned.version.major = 2;
    versioned.version.minor = 3;
    versioned.dl_tensor.ndim = -1;
    CHECK_ERROR(fp8q_dl_managed_view(&versioned, 1, "obj", -1, &view,
                                     &readonly, &device, &unsupported,
                                     &error),
                &error, FP8Q_ERROR_BUFFER,
                "obj: DLPack version 2.3 is not supported (fp8q reads 1.x)",
                NULL, NULL);
    versioned.version.major = 0;
    CHECK_ERROR(fp8q_dl_managed_view(&versioned, 1, "obj", -1, &view,
                                     &readonly, &device, &unsupported,
                                     &error),
                &error, FP8Q_ERROR_BUFFER, "DLPack version 0.3 is not", NULL,
                NULL);

    /* Legacy: never read-only; the tensor's own refusals come through. */
    memset(&legacy, 0, sizeof legacy);
    legacy.dl_tensor = cpu_tensor(data, FP8Q_DL_UINT, 8, 2, shape, NULL);
    legacy.dl_tensor.device.device_type = FP8Q_DL_CUDA;
    legacy.dl_tensor.device.device_id = 3;
    readonly = -1;
    CHECK_OK(fp8q_dl_managed_view(&legacy, 0, "x", FP8Q_FLOAT8_E5M2, &view,
                                  &readonly, &device, &unsupported, &error),
             &error);
    CHECK_INT(readonly, 0);
    CHECK_INT(device.device_type, FP8Q_DL_CUDA);
    CHECK_INT(device.device_id, 3);
    CHECK_INT(view.dtype, FP8Q_FLOAT8_E5M2);
    legacy.dl_tensor.dtype.bits = 64;
    legacy.dl_tensor.dtype.code = FP8Q_DL_FLOAT;
    CHECK_ERROR(fp8q_dl_managed_view(&legacy, 0, "x", -1, &view, &readonly,
                                     &device, &unsupported, &error),
                &error, FP8Q_ERROR_TYPE, "x: ", NULL, NULL);
    CHECK_INT(unsupported, 1);
}

/* A request to export a tensor on DLPack device (type, id) with every
 * argument None. */
static fp8q_dl_export_request export_request(int32_t type, int32_t id)
{
    fp8q_dl_export_request request;

    memset(&request, 0, sizeof request);
    request.device_type = type;
    request.device_id = id;
    request.copy = -1;
    return request;
}

void test_dlpack_plan_export(void)
{
    fp8q_dl_export_request request;
    fp8q_dl_export_plan plan;

    /* CPU, every argument None: the tensor itself, a legacy capsule, no
     * stream work. */
    request = export_request(FP8Q_DL_CPU, 0);
    memset(&plan, 0x5a, sizeof plan);
    CHECK_INT(fp8q_dl_plan_export(&request, &plan), 0);
    CHECK_INT(plan.versioned, 0);
    CHECK_INT(plan.copy, 0);
    CHECK_INT(plan.move, 0);
    CHECK_INT(plan.order, 0);

    /* max_version: versioned from major 1 on. */
    request.has_max_version = 1;
    request.max_major = 0;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan), 0);
    CHECK_INT(plan.versioned, 0);
    request.max_major = LLONG_MAX;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan), 0);
    CHECK_INT(plan.versioned, 1);
    request.max_major = LLONG_MIN;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan), 0);
    CHECK_INT(plan.versioned, 0);

    /* A CPU tensor takes only stream=None, moved or not. */
    request = export_request(FP8Q_DL_CPU, 0);
    request.stream_kind = 1;
    request.stream_value = -1;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan),
              FP8Q_DL_EXPORT_CPU_STREAM);
    request.stream_kind = 2;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan),
              FP8Q_DL_EXPORT_CPU_STREAM);
    request.has_dl_device = 1;
    request.dl_device_type = FP8Q_DL_CUDA;
    request.copy = 1;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan),
              FP8Q_DL_EXPORT_CPU_STREAM);
    request.stream_kind = 0;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan), 0);
    CHECK_INT(plan.copy, 1);
    CHECK_INT(plan.move, 1);
    CHECK_INT(plan.target_type, FP8Q_DL_CUDA);
    CHECK_INT(plan.target_id, 0);
    CHECK_INT(plan.order, 0);

    /* dl_device: its own device is no move; another only with copy=True
     * and only the CPU or a CUDA device in int32 range. */
    request = export_request(FP8Q_DL_CUDA, 3);
    request.has_dl_device = 1;
    request.dl_device_type = FP8Q_DL_CUDA;
    request.dl_device_id = 3;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan), 0);
    CHECK_INT(plan.move, 0);
    CHECK_INT(plan.copy, 0);
    request.copy = 1;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan), 0);
    CHECK_INT(plan.move, 0);
    CHECK_INT(plan.copy, 1);
    request.dl_device_id = 4;
    request.copy = 0;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan),
              FP8Q_DL_EXPORT_BAD_DL_DEVICE);
    CHECK_INT(plan.order, 0);
    request.copy = -1;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan),
              FP8Q_DL_EXPORT_BAD_DL_DEVICE);
    request.copy = 1;
    request.dl_device_id = (long long)INT32_MAX + 1;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan),
              FP8Q_DL_EXPORT_BAD_DL_DEVICE);
    request.dl_device_type = FP8Q_DL_CPU;
    request.dl_device_id = 1;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan),
              FP8Q_DL_EXPORT_BAD_DL_DEVICE);
    request.dl_device_id = 0;
    /* Moved off the GPU: the stream is not looked at, even when no int. */
    request.stream_kind = 2;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan), 0);
    CHECK_INT(plan.move, 1);
    CHECK_INT(plan.target_type, FP8Q_DL_CPU);
    CHECK_INT(plan.order, 0);

    /* A CUDA tensor left in place: None orders the legacy default stream;
     * ints are read by fp8q_dl_consumer_stream; other objects refused. */
    request = export_request(FP8Q_DL_CUDA, 0);
    CHECK_INT(fp8q_dl_plan_export(&request, &plan), 0);
    CHECK_INT(plan.order, 1);
    CHECK(plan.stream == 0);
    request.stream_kind = 1;
    request.stream_value = 1;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan), 0);
    CHECK_INT(plan.order, 1);
    CHECK(plan.stream == 1);
    request.stream_value = 0x7f0012345600LL;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan), 0);
    CHECK(plan.stream == (uintptr_t)0x7f0012345600LL);
    request.stream_value = -1;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan), 0);
    CHECK_INT(plan.order, 0);
    request.stream_value = 0;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan),
              FP8Q_DL_EXPORT_STREAM_VALUE);
    CHECK_INT(plan.order, 0);
    request.stream_value = LLONG_MAX;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan),
              FP8Q_DL_EXPORT_STREAM_VALUE);
    request.stream_kind = 2;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan),
              FP8Q_DL_EXPORT_STREAM_TYPE);
    CHECK_INT(plan.order, 0);
    /* The dl_device refusal comes before the stream's. */
    request.has_dl_device = 1;
    request.dl_device_type = 13;
    CHECK_INT(fp8q_dl_plan_export(&request, &plan),
              FP8Q_DL_EXPORT_BAD_DL_DEVICE);
}

/* Stand-ins for the five entries of an exchange table (never called). */
static int stub_allocator(fp8q_dl_tensor *prototype,
                          fp8q_dl_managed_tensor_versioned **out,
                          void *context,
                          void (*set_error)(void *, const char *,
                                            const char *))
{
    (void)prototype;
    (void)out;
    (void)context;
    (void)set_error;
    return -1;
}

static int stub_from_object(void *object,
                            fp8q_dl_managed_tensor_versioned **out)
{
    (void)object;
    (void)out;
    return -1;
}

static int stub_to_object(fp8q_dl_managed_tensor_versioned *tensor,
                          void **out)
{
    (void)tensor;
    (void)out;
    return -1;
}

static int stub_view(void *object, fp8q_dl_tensor *out)
{
    (void)object;
    (void)out;
    return -1;
}

static int stub_stream(int32_t device_type, int32_t device_id, void **out)
{
    (void)device_type;
    (void)device_id;
    (void)out;
    return -1;
}

void test_dlpack_exchange_api_usable(void)
{
    fp8q_dl_exchange_api api;
    int missing;

    for (missing = -1; missing < 5; missing++) {
        memset(&api, 0, sizeof api);
        api.header.version.major = 1;
        api.header.version.minor = 3;
        api.managed_tensor_allocator = missing == 0 ? NULL : stub_allocator;
        api.managed_tensor_from_py_object_no_sync =
            missing == 1 ? NULL : stub_from_object;
        api.managed_tensor_to_py_object_no_sync =
            missing == 2 ? NULL : stub_to_object;
        api.dltensor_from_py_object_no_sync = missing == 3 ? NULL : stub_view;
        api.current_work_stream = missing == 4 ? NULL : stub_stream;
        CHECK_INT(fp8q_dl_exchange_api_usable(&api), missing < 0);
        api.header.version.major = 2;
        CHECK_INT(fp8q_dl_exchange_api_usable(&api), 0);
        api.header.version.major = 0;
        CHECK_INT(fp8q_dl_exchange_api_usable(&api), 0);
    }
}

/* A producer whose current stream on CUDA device d is (void *)(d + 16),
 * and whose call fails for device 7 (after writing its output). */
static int32_t asked_type, asked_id;

static int counting_stream(int32_t device_type, int32_t device_id, void **out)
{
    asked_type = device_type;
    asked_id = device_id;
    *out = (void *)(intptr_t)(device_id + 16);
    return device_id == 7 ? -1 : 0;
}

void test_dlpack_current_stream(void)
{
    const fp8q_place cpu = {FP8Q_DEVICE_CPU, 0}, cuda = {FP8Q_DEVICE_CUDA, 3};
    const fp8q_place broken = {FP8Q_DEVICE_CUDA, 7};
    fp8q_dl_exchange_api api;
    fp8q_dl_device device;
    void *stream = &api;

    memset(&api, 0, sizeof api);
    api.current_work_stream = counting_stream;
    device = fp8q_dl_device_of(&cpu);
    CHECK_INT(device.device_type, FP8Q_DL_CPU);
    CHECK_INT(device.device_id, 0);
    /* The CPU has no stream: the producer is not asked. */
    CHECK_INT(fp8q_dl_current_stream(&api, &device, &stream), 0);
    CHECK(stream == NULL);
    CHECK_INT(asked_type, 0);
    device = fp8q_dl_device_of(&cuda);
    CHECK_INT(device.device_type, FP8Q_DL_CUDA);
    CHECK_INT(device.device_id, 3);
    CHECK_INT(fp8q_dl_current_stream(&api, &device, &stream), 0);
    CHECK(stream == (void *)(intptr_t)19);
    CHECK_INT(asked_type, FP8Q_DL_CUDA);
    CHECK_INT(asked_id, 3);
    /* Nor on a device that is neither (kDLCUDAHost, pinned host memory). */
    asked_type = 0;
    device.device_type = 3;
    device.device_id = 0;
    stream = &api;
    CHECK_INT(fp8q_dl_current_stream(&api, &device, &stream), 0);
    CHECK(stream == NULL);
    CHECK_INT(asked_type, 0);
    /* A failed call leaves no stream behind. */
    device = fp8q_dl_device_of(&broken);
    CHECK_INT(fp8q_dl_current_stream(&api, &device, &stream), -1);
    CHECK(stream == NULL);
}

void test_device_names(void)
{
    /* (text, parsed?, type, index) */
    static const struct {
        const char *text;
        int parsed;
        int type;
        int index;
    } cases[] = {
        {"cpu", 0, FP8Q_DEVICE_CPU, 0},
        {"cuda", 0, FP8Q_DEVICE_CUDA, 0},
        {"cuda:0", 0, FP8Q_DEVICE_CUDA, 0},
        {"cuda:7", 0, FP8Q_DEVICE_CUDA, 7},
        {"cuda:1000000", 0, FP8Q_DEVICE_CUDA, 1000000},
        {"cuda:1000001", -1, -5, -5},
        {"cuda:99999999999999999999", -1, -5, -5},
        {"cuda:", -1, -5, -5},
        {"cuda:-1", -1, -5, -5},
        {"cuda:+1", -1, -5, -5},
        {"cuda:1x", -1, -5, -5},
        {"cuda:1 ", -1, -5, -5},
        {"CPU", -1, -5, -5},
        {"cpu:0", -1, -5, -5},
        {"", -1, -5, -5},
        {"gpu", -1, -5, -5},
    };
    size_t index;
    int type;
    int device_index;

    for (index = 0; index < sizeof cases / sizeof cases[0]; index++) {
        type = -5;
        device_index = -5;
        CHECK_INT(fp8q_device_parse(cases[index].text, &type, &device_index),
                  cases[index].parsed);
        CHECK_INT(type, cases[index].type);
        CHECK_INT(device_index, cases[index].index);
    }
    CHECK_INT(FP8Q_DEVICE_CPU, FP8Q_DL_CPU);
    CHECK_INT(FP8Q_DEVICE_CUDA, FP8Q_DL_CUDA);

    /* Written back: "cpu" (any index), "cuda:N"; truncated like snprintf;
     * what is written parses back to the same device. */
    {
        char text[16];

        memset(text, 'x', sizeof text);
        fp8q_device_format(FP8Q_DEVICE_CPU, 3, text, sizeof text);
        CHECK(strcmp(text, "cpu") == 0);
        fp8q_device_format(FP8Q_DEVICE_CUDA, 0, text, sizeof text);
        CHECK(strcmp(text, "cuda:0") == 0);
        fp8q_device_format(FP8Q_DEVICE_CUDA, 1000000, text, sizeof text);
        CHECK(strcmp(text, "cuda:1000000") == 0);
        CHECK_INT(fp8q_device_parse(text, &type, &device_index), 0);
        CHECK_INT(type, FP8Q_DEVICE_CUDA);
        CHECK_INT(device_index, 1000000);
        fp8q_device_format(FP8Q_DEVICE_CUDA, 12, text, 5);
        CHECK(strcmp(text, "cuda") == 0);
    }
}
