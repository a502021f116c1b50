/*
 * gemm_tuning.h - what fp8q.gemm_tuning saves of a device's GEMM tuner
 * choices (cuda/matmul.h), as text: the facts a saved copy is valid for
 * (its key) and the choices themselves.
 */
#ifndef FP8Q_CUDA_GEMM_TUNING_H
#define FP8Q_CUDA_GEMM_TUNING_H

#include "core/status.h"
#include "cuda/cublaslt.h"
#include "cuda/driver.h"

/* What a device's choices are valid for, as fp8q.gemm_tuning keys them. */
typedef struct fp8q_gemm_tuning_key {
    char gpu[FP8Q_CUDA_DEVICE_NAME_SIZE]; /* the device's name */
    char compute_capability[24];          /* "MAJOR.MINOR", e.g. "9.0" */
    char driver[32]; /* the driver's version (fp8q_cuda_format_version) */
    char cublaslt[32]; /* "MAJOR.MINOR.PATCH" (fp8q_cublaslt_format_version) */
} fp8q_gemm_tuning_key;

/* Fills `key` for CUDA device `device_index` (0 <= index < device_count of
 * a usable driver) and the loaded cuBLASLt `library`; the device's
 * properties query's error otherwise. */
fp8q_status fp8q_gemm_tuning_key_get(int device_index,
                                     const fp8q_cublaslt *library,
                                     fp8q_gemm_tuning_key *key,
                                     fp8q_error *error);

/* The whole of fp8q_matmul_choices_format's text for device
 * `device_index`, sized and then written (choices made in between are
 * left out), NUL-terminated, in memory from malloc (the caller frees it);
 * NULL when out of memory. */
char *fp8q_gemm_tuning_choices(int device_index);

#endif /* FP8Q_CUDA_GEMM_TUNING_H */
