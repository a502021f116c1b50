/*
 * layer_path.c - the token crossover of W8A8 layers between the weight-only
 * product and quantize + FP8 GEMM (see layer_path.h).
 */
#include <string.h>

#include "core/scaled_mm.h"
#include "cuda/layer_path.h"

/* Up to this many tokens a W8A8 layer runs the weight-only product, by
 * whether the device's FP8 tensor cores are in use (device->fp8_tensor_cores:
 * compute capability 8.9+ and FP8Q_CUDA_NO_FP8_TENSOR_CORES unset).
 *
 * With FP8 tensor cores: 4. H200 (docs/benchmarks.md, 2026-11-26, "W8A16
 * layer" and "W8A8 layer"): the weight-only product took 0.0127-0.0389 ms
 * for 1 to 4 tokens on the three 7-8B shapes, where quantize + GEMM took
 * 0.042 ms at 16 tokens (host-bound: 33.7 us of host time per call); at 8
 * tokens the weight-only product took 0.0765 ms on 4096 x 14336. The
 * crossover between 4 and 16 tokens was not measured on one run; `python -m
 * fp8q bench linear --device cuda --breakdown` prints it per shape.
 *
 * Without them (sm_75 to sm_87, or the switch): 16, an estimate, not a
 * measurement: quantize + "GEMM" there decodes both operands to bfloat16
 * and runs a bfloat16 GEMM, reading and writing the weight twice more than
 * the weight-only product, which measured 0.024-0.071 ms at 16 tokens on
 * the H200's tensor cores. */
#define CROSSOVER_WITH_FP8_TENSOR_CORES 4
#define CROSSOVER_WITHOUT_FP8_TENSOR_CORES 16

int64_t fp8q_cuda_fp8_layer_crossover(const fp8q_cuda_device *device)
{
    return device->fp8_tensor_cores ? CROSSOVER_WITH_FP8_TENSOR_CORES
                                    : CROSSOVER_WITHOUT_FP8_TENSOR_CORES;
}

int64_t fp8q_cuda_fp8_layer_weight_only_tokens(const fp8q_cuda_device *device,
                                               fp8q_layer_path path)
{
    switch (path) {
    case FP8Q_LAYER_PATH_FP8:
        return 0;
    case FP8Q_LAYER_PATH_WEIGHT_ONLY:
        return INT64_MAX;
    default:
        return fp8q_cuda_fp8_layer_crossover(device);
    }
}

void fp8q_cuda_fp8_layer_activation_options(
    fp8q_granularity_kind weight_granularity, int static_scale,
    fp8q_quantize_options *options)
{
    memset(options, 0, sizeof *options);
    options->saturate = 1;
    options->compute_scale = !static_scale;
    options->granularity.kind = FP8Q_GRANULARITY_ROW;
    if (static_scale) {
        options->granularity.kind = FP8Q_GRANULARITY_TENSOR;
        options->infinity_to_nan = 1;
    }
    else if (weight_granularity == FP8Q_GRANULARITY_BLOCK) {
        options->granularity.kind = FP8Q_GRANULARITY_BLOCK;
        options->granularity.block_rows = 1;
        options->granularity.block_cols = FP8Q_SCALED_MM_BLOCK;
    }
}
