/*
 * gemm_tuning.c - the GEMM tuner's choices of a device and their key as
 * text, for fp8q.gemm_tuning (see gemm_tuning.h).
 */
#include <stdio.h>
#include <stdlib.h>

#include "cuda/gemm_tuning.h"
#include "cuda/matmul.h"

fp8q_status fp8q_gemm_tuning_key_get(int device_index,
                                     const fp8q_cublaslt *library,
                                     fp8q_gemm_tuning_key *key,
                                     fp8q_error *error)
{
    fp8q_cuda_device_properties properties;
    const fp8q_status status =
        fp8q_cuda_device_properties_get(device_index, &properties, error);

    if (status != FP8Q_OK) {
        return status;
    }
    (void)snprintf(key->gpu, sizeof key->gpu, "%s", properties.name);
    (void)snprintf(key->compute_capability, sizeof key->compute_capability,
                   "%d.%d", properties.compute_capability_major,
                   properties.compute_capability_minor);
    fp8q_cuda_format_version(fp8q_cuda_driver_load()->version, key->driver,
                             sizeof key->driver);
    fp8q_cublaslt_format_version(library->version, key->cublaslt,
                                 sizeof key->cublaslt);
    return FP8Q_OK;
}

char *fp8q_gemm_tuning_choices(int device_index)
{
    const size_t length = fp8q_matmul_choices_format(device_index, NULL, 0);
    char *text = (char *)malloc(length + 1);

    if (text != NULL) {
        (void)fp8q_matmul_choices_format(device_index, text, length + 1);
    }
    return text;
}
