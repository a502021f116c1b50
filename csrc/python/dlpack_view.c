/*
 * dlpack_view.c - what both DLPack consumers (dlpack.c: capsules and
 * __dlpack__; dlpack_exchange.c: the C exchange API) share, below both: the
 * checked view of a DLPack tensor (core/dlpack.c checks, this raises) and
 * the opened CUDA device of a DLPack device (binding.h).
 */
#include "core/dlpack.h"
#include "python/binding.h"

int fp8q_py_view_from_dl_tensor(const fp8q_dl_tensor *dl_tensor,
                                const char *argument_name,
                                int reinterpret_dtype, fp8q_view *view,
                                int *unsupported_dtype)
{
    fp8q_error error; /* written whenever the status is not FP8Q_OK */

    if (fp8q_dl_tensor_view(dl_tensor, argument_name, reinterpret_dtype, view,
                            unsupported_dtype, &error) != FP8Q_OK) {
        fp8q_py_raise(&error);
        return -1;
    }
    return 0;
}

int fp8q_py_dl_cuda_device(const fp8q_dl_device *device,
                           const fp8q_cuda_device **cuda)
{
    *cuda = NULL;
    if (device->device_type == FP8Q_DL_CUDA) {
        *cuda = fp8q_py_cuda_device((int)device->device_id);
        return *cuda == NULL ? -1 : 0;
    }
    return 0;
}
