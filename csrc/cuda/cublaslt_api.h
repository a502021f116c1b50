/*
 * cublaslt_api.h - the part of cuBLASLt's binary interface fp8q calls,
 * declared from NVIDIA's cuBLASLt reference (cublasLt.h, library_types.h):
 * fp8q includes no CUDA header and links no CUDA library; csrc/cuda/
 * cublaslt.c finds these functions in the library at run time.
 *
 * Handles are opaque pointers; enums are int-sized; sizes are size_t; on
 * 64-bit Linux and Windows cuBLASLt uses the platform's one C calling
 * convention.
 */
#ifndef FP8Q_CUDA_CUBLASLT_API_H
#define FP8Q_CUDA_CUBLASLT_API_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/driver_api.h"

/* ------------------------------------------------------------------------- */
/* Types                                                                     */

typedef int fp8q_lt_status; /* cublasStatus_t: 0 is CUBLAS_STATUS_SUCCESS */
typedef struct fp8q_lt_context_opaque *fp8q_lt_handle;      /* cublasLtHandle_t */
typedef struct fp8q_lt_desc_opaque *fp8q_lt_matmul_desc;    /* cublasLtMatmulDesc_t */
typedef struct fp8q_lt_layout_opaque *fp8q_lt_layout;       /* cublasLtMatrixLayout_t */
typedef struct fp8q_lt_preference_opaque *fp8q_lt_preference; /* ..._Preference_t */

/* cublasLtMatmulAlgo_t: 64 bytes, copied by value. */
typedef struct fp8q_lt_algo {
    uint64_t data[8];
} fp8q_lt_algo;

/* cublasLtMatmulHeuristicResult_t */
typedef struct fp8q_lt_heuristic {
    fp8q_lt_algo algo;
    size_t workspace_size;
    fp8q_lt_status state;
    float waves_count;
    int reserved[4];
} fp8q_lt_heuristic;

/* ------------------------------------------------------------------------- */
/* Constants                                                                 */

#define FP8Q_LT_SUCCESS 0
#define FP8Q_LT_INVALID_VALUE 7
#define FP8Q_LT_NOT_SUPPORTED 15

/* cudaDataType_t */
#define FP8Q_LT_R_32F 0
#define FP8Q_LT_R_16F 2
#define FP8Q_LT_R_16BF 14
#define FP8Q_LT_R_8F_E4M3 28
#define FP8Q_LT_R_8F_E5M2 29

/* cublasComputeType_t: float accumulation, IEEE products (no TF32). */
#define FP8Q_LT_COMPUTE_32F 68

/* cublasOperation_t */
#define FP8Q_LT_OP_N 0
#define FP8Q_LT_OP_T 1

/* cublasLtMatmulDescAttributes_t */
#define FP8Q_LT_DESC_TRANSA 3           /* int32_t */
#define FP8Q_LT_DESC_TRANSB 4           /* int32_t */
#define FP8Q_LT_DESC_EPILOGUE 7         /* int32_t, cublasLtEpilogue_t */
#define FP8Q_LT_DESC_BIAS_POINTER 8     /* const void * */
#define FP8Q_LT_DESC_A_SCALE_POINTER 17 /* const void * */
#define FP8Q_LT_DESC_B_SCALE_POINTER 18 /* const void * */
#define FP8Q_LT_DESC_D_SCALE_POINTER 20 /* const void * */
#define FP8Q_LT_DESC_AMAX_D_POINTER 21  /* void * */
#define FP8Q_LT_DESC_FAST_ACCUM 25      /* int8_t */
#define FP8Q_LT_DESC_BIAS_DATA_TYPE 26  /* int32_t, cudaDataType_t */
/* int32_t, cublasLtMatmulMatrixScale_t (cuBLASLt 12.9 and newer) */
#define FP8Q_LT_DESC_A_SCALE_MODE 31
#define FP8Q_LT_DESC_B_SCALE_MODE 32

/* cublasLtEpilogue_t */
#define FP8Q_LT_EPILOGUE_DEFAULT 1
#define FP8Q_LT_EPILOGUE_BIAS 4

/* cublasLtMatmulMatrixScale_t: how a scale pointer is read. */
#define FP8Q_LT_SCALE_SCALAR_32F 0     /* one float */
#define FP8Q_LT_SCALE_OUTER_VEC_32F 3  /* one float per row of op(A) / column
                                          of op(B) */
#define FP8Q_LT_SCALE_VEC128_32F 4     /* one float per 128 values along K */
#define FP8Q_LT_SCALE_BLK128x128_32F 5 /* one float per 128 x 128 block */

/* cublasLtMatmulPreferenceAttributes_t */
#define FP8Q_LT_PREF_MAX_WORKSPACE_BYTES 1 /* uint64_t */
#define FP8Q_LT_PREF_MIN_ALIGNMENT_A_BYTES 5 /* uint32_t, default 256 */
#define FP8Q_LT_PREF_MIN_ALIGNMENT_B_BYTES 6
#define FP8Q_LT_PREF_MIN_ALIGNMENT_C_BYTES 7
#define FP8Q_LT_PREF_MIN_ALIGNMENT_D_BYTES 8

/* ------------------------------------------------------------------------- */
/* Functions                                                                 */

typedef fp8q_lt_status (*fp8q_lt_create_fn)(fp8q_lt_handle *handle);
typedef size_t (*fp8q_lt_get_version_fn)(void);
typedef const char *(*fp8q_lt_get_status_name_fn)(fp8q_lt_status status);
typedef fp8q_lt_status (*fp8q_lt_matmul_desc_create_fn)(
    fp8q_lt_matmul_desc *desc, int compute_type, int scale_type);
typedef fp8q_lt_status (*fp8q_lt_matmul_desc_set_attribute_fn)(
    fp8q_lt_matmul_desc desc, int attribute, const void *value, size_t size);
typedef fp8q_lt_status (*fp8q_lt_matmul_desc_destroy_fn)(
    fp8q_lt_matmul_desc desc);
typedef fp8q_lt_status (*fp8q_lt_matrix_layout_create_fn)(
    fp8q_lt_layout *layout, int type, uint64_t rows, uint64_t cols,
    int64_t leading_dimension);
typedef fp8q_lt_status (*fp8q_lt_matrix_layout_destroy_fn)(
    fp8q_lt_layout layout);
typedef fp8q_lt_status (*fp8q_lt_preference_create_fn)(
    fp8q_lt_preference *preference);
typedef fp8q_lt_status (*fp8q_lt_preference_set_attribute_fn)(
    fp8q_lt_preference preference, int attribute, const void *value,
    size_t size);
typedef fp8q_lt_status (*fp8q_lt_preference_destroy_fn)(
    fp8q_lt_preference preference);
typedef fp8q_lt_status (*fp8q_lt_algo_get_heuristic_fn)(
    fp8q_lt_handle handle, fp8q_lt_matmul_desc desc, fp8q_lt_layout a,
    fp8q_lt_layout b, fp8q_lt_layout c, fp8q_lt_layout d,
    fp8q_lt_preference preference, int requested, fp8q_lt_heuristic *results,
    int *returned);
typedef fp8q_lt_status (*fp8q_lt_matmul_fn)(
    fp8q_lt_handle handle, fp8q_lt_matmul_desc desc, const void *alpha,
    const void *a, fp8q_lt_layout a_layout, const void *b,
    fp8q_lt_layout b_layout, const void *beta, const void *c,
    fp8q_lt_layout c_layout, void *d, fp8q_lt_layout d_layout,
    const fp8q_lt_algo *algo, void *workspace, size_t workspace_size,
    fp8q_cu_stream stream);

#endif /* FP8Q_CUDA_CUBLASLT_API_H */
