/*
 * device_report.h - what fp8q.info() reports of one CUDA device, gathered
 * into a C struct below the binding (csrc/python/cuda_info.c turns it into
 * a dict): its properties, whether fp8q's kernels load there and why not,
 * and the W8A8 layer's weight-only crossover.
 */
#ifndef FP8Q_CUDA_DEVICE_REPORT_H
#define FP8Q_CUDA_DEVICE_REPORT_H

#include <stdint.h>

#include "core/status.h"
#include "cuda/driver.h"

typedef struct fp8q_cuda_device_report {
    /* FP8Q_OK, or why the properties could not be read (then nothing else
     * is filled in). */
    fp8q_error error;
    fp8q_cuda_device_properties properties;
    char compute_capability[32]; /* "MAJOR.MINOR", e.g. "8.9" */
    /* FP8Q_OK when fp8q's kernels load on the device, else why not. */
    fp8q_error kernels;
    /* With the kernels loaded: fp8q_cuda_fp8_layer_crossover there. */
    int64_t weight_only_tokens;
} fp8q_cuda_device_report;

/* Fills *report for device `index` of a loaded driver. `backend` is
 * fp8q_cuda_backend_check's outcome: when it failed it is the kernels'
 * error and the device is not opened; else the device is opened as the
 * first operation on it would (fp8q_cuda_device_open). Call without
 * holding Python's GIL. */
void fp8q_cuda_device_report_get(int index, const fp8q_error *backend,
                                 fp8q_cuda_device_report *report);

#endif /* FP8Q_CUDA_DEVICE_REPORT_H */
