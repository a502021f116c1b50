/*
 * device_report.c - one CUDA device's report for fp8q.info()
 * (cuda/device_report.h).
 */
#include <stdio.h>
#include <string.h>

#include "cuda/device_report.h"
#include "cuda/layer_path.h"

void fp8q_cuda_device_report_get(int index, const fp8q_error *backend,
                                 fp8q_cuda_device_report *report)
{
    const fp8q_cuda_device *device = NULL;

    memset(report, 0, sizeof *report);
    fp8q_error_clear(&report->error);
    fp8q_error_clear(&report->kernels);
    if (fp8q_cuda_device_properties_get(index, &report->properties,
                                        &report->error) != FP8Q_OK) {
        return;
    }
    (void)snprintf(report->compute_capability,
                   sizeof report->compute_capability, "%d.%d",
                   report->properties.compute_capability_major,
                   report->properties.compute_capability_minor);
    if (backend->status != FP8Q_OK) {
        report->kernels = *backend;
    }
    else if (fp8q_cuda_device_open(index, &device, &report->kernels) ==
             FP8Q_OK) {
        report->weight_only_tokens = fp8q_cuda_fp8_layer_crossover(device);
    }
}
