/*
 * cublaslt.h - cuBLASLt, loaded at first use of a GPU matrix multiply:
 * finding the library, its entry points and version, and per device a
 * handle.
 *
 * Where cuBLASLt is looked for, in this order (the first that opens wins):
 *   1. the environment variable FP8Q_CUBLASLT, when set: the one library
 *      to open (a path; for diagnostics and tests);
 *   2. a cuBLASLt already loaded in the process (PyTorch's, for example):
 *      libcublasLt.so.13, then .so.12 (cublasLt64_13.dll, _12.dll) — .12
 *      first where the driver is older than CUDA 13, in every step;
 *   3. NVIDIA's pip wheels: nvidia/cu13/lib, then nvidia/cublas/lib
 *      (on Windows nvidia/cu13/bin/x86_64, nvidia/cu13/bin, then
 *      nvidia/cublas/bin) under each install folder the caller passes,
 *      in order (the binding passes the running interpreter's install
 *      folders only: site-packages, the user site; never the working
 *      directory, a script's folder or other sys.path entries);
 *   4. CUDA_PATH, then CUDA_HOME: lib64/ and lib/ (bin/ and bin/x64/ on
 *      Windows); a relative one (CUDA_PATH=.) is not searched but logged
 *      ("CUDA_PATH=. (not an absolute path: ...)"), as it would name the
 *      working directory;
 *   5. the system's loader, by bare name (on Windows: the application's
 *      folder, System32 and os.add_dll_directory's folders, never the
 *      working directory nor PATH; fp8q_library_open in platform.h).
 * Paths are joined with '/'; on Windows fp8q_library_open makes them
 * absolute with backslashes and looks beside the DLL for what it needs.
 * The outcome, failure included (with every place tried), is kept for the
 * life of the process. Call without holding Python's GIL.
 */
#ifndef FP8Q_CUDA_CUBLASLT_H
#define FP8Q_CUDA_CUBLASLT_H

#include <stddef.h>

#include "core/status.h"
#include "cuda/cublaslt_api.h"
#include "cuda/driver.h"

/* The oldest cuBLASLt fp8q uses (cublasLtGetVersion units: 10000 * major
 * + 100 * minor + patch): 12.0. */
#define FP8Q_CUBLASLT_MIN_VERSION 120000

/* Room for the search record: about 40 places of 400 bytes each. */
#define FP8Q_CUBLASLT_SEARCH_SIZE 16384

typedef struct fp8q_cublaslt_api {
    fp8q_lt_create_fn create;
    fp8q_lt_get_version_fn get_version;
    fp8q_lt_get_status_name_fn get_status_name;
    fp8q_lt_matmul_desc_create_fn matmul_desc_create;
    fp8q_lt_matmul_desc_set_attribute_fn matmul_desc_set_attribute;
    fp8q_lt_matmul_desc_destroy_fn matmul_desc_destroy;
    fp8q_lt_matrix_layout_create_fn matrix_layout_create;
    fp8q_lt_matrix_layout_destroy_fn matrix_layout_destroy;
    fp8q_lt_preference_create_fn preference_create;
    fp8q_lt_preference_set_attribute_fn preference_set_attribute;
    fp8q_lt_preference_destroy_fn preference_destroy;
    fp8q_lt_algo_get_heuristic_fn algo_get_heuristic;
    fp8q_lt_matmul_fn matmul;
} fp8q_cublaslt_api;

typedef struct fp8q_cublaslt {
    /* FP8Q_OK when a usable cuBLASLt was found (every entry point, version
     * >= FP8Q_CUBLASLT_MIN_VERSION); else FP8Q_ERROR_CUDA saying what was
     * tried and why each failed. */
    fp8q_error error;
    char path[FP8Q_CUDA_PATH_SIZE]; /* the file loaded ("" when none) */
    /* Every place tried before the one that opened (or all of them), one
     * "place (the loader's reason)" line each, in order; the error message
     * repeats them where they fit, else points to `python -m fp8q info`,
     * which prints them. */
    char search[FP8Q_CUBLASLT_SEARCH_SIZE];
    size_t version;                 /* cublasLtGetVersion(), 0 when none */
    fp8q_cublaslt_api api;
} fp8q_cublaslt;

/* Loads cuBLASLt on the first call (once per process; later calls return
 * the same result whatever they pass) and returns what was found; never
 * NULL. The wheels' directories under `install_folders` (n_folders of
 * them, may be 0) are searched in step 3 above. */
const fp8q_cublaslt *fp8q_cublaslt_load(const char *const *install_folders,
                                        int n_folders);

/* The loaded cuBLASLt, or NULL when fp8q_cublaslt_load has not run yet
 * (for fp8q.info(), which never loads it). */
const fp8q_cublaslt *fp8q_cublaslt_loaded(void);

/* Formats a cublasLtGetVersion value as "MAJOR.MINOR.PATCH" (131000 ->
 * "13.10.0"). */
void fp8q_cublaslt_format_version(size_t version, char *text,
                                  size_t text_size);

/* Writes "NAME (N)" for a cuBLASLt status N (e.g.
 * "CUBLAS_STATUS_NOT_SUPPORTED (15)"), or "cublasStatus_t N" when the
 * library has no name for it. */
void fp8q_cublaslt_describe(const fp8q_cublaslt *library, fp8q_lt_status status,
                            char *text, size_t text_size);

/* Devices 0 to FP8Q_CUBLASLT_MAX_DEVICES - 1 can run matrix multiplies. */
#define FP8Q_CUBLASLT_MAX_DEVICES 64

/* What a device needs for cuBLASLt calls: created once per device. (The
 * workspace is matmul.c's: allocated at the first product, and again after
 * a failure, never freed.) */
typedef struct fp8q_cublaslt_device {
    fp8q_lt_handle handle;
} fp8q_cublaslt_device;

/* The cuBLASLt handle of `device` (created on the first call for it, with
 * its primary context current), for a usable `library`. FP8Q_ERROR_CUDA
 * saying what failed otherwise. */
fp8q_status fp8q_cublaslt_device_open(const fp8q_cublaslt *library,
                                      const fp8q_cuda_device *device,
                                      const fp8q_cublaslt_device **out,
                                      fp8q_error *error);

#endif /* FP8Q_CUDA_CUBLASLT_H */
