/*
 * layer_path.h - which product an FP8-activation (W8A8) fp8q.torch.Linear
 * runs on a GPU for its number of tokens. Few tokens take the weight-only
 * product straight from the FP8 codes (kernels/gemv.cuh: x read in its own
 * dtype, no activation quantize, no GEMM launch), which streams the weight
 * once and beats quantize + FP8 GEMM there; more tokens take quantize +
 * FP8 GEMM. The crossover is a table by device kind (layer_path.c, with
 * where each figure comes from); FP8Q_CUDA_FP8_LAYER_PATH
 * (cuda/switches.h) or the caller can force either product.
 */
#ifndef FP8Q_CUDA_LAYER_PATH_H
#define FP8Q_CUDA_LAYER_PATH_H

#include <stdint.h>

#include "core/quantize.h"
#include "cuda/driver.h"
#include "cuda/switches.h"

/* The largest token count for which a W8A8 layer on `device` takes the
 * weight-only product when `path` is FP8Q_LAYER_PATH_AUTO (the table's
 * figure for the device); 0 for FP8Q_LAYER_PATH_FP8; INT64_MAX for
 * FP8Q_LAYER_PATH_WEIGHT_ONLY (the weight-only kernels' own limits then
 * decide, fp8q_cuda_gemv_fp8_takes). */
int64_t fp8q_cuda_fp8_layer_weight_only_tokens(const fp8q_cuda_device *device,
                                               fp8q_layer_path path);

/* The table's figure for `device` (FP8Q_LAYER_PATH_AUTO's answer). */
int64_t fp8q_cuda_fp8_layer_crossover(const fp8q_cuda_device *device);

/* *options for the quantize of a W8A8 layer's activations on a GPU before
 * the FP8 GEMM (cuda/ops.h, fp8q_cuda_quantize), saturating: with a static
 * input scale (`static_scale` nonzero) that one tensor scale, infinities
 * quantized to the NaN code (so a token holding one gives a NaN row of the
 * product with no masking pass); else scales computed per token ("row"),
 * or per 1 x 128 block for FP8Q_GRANULARITY_BLOCK weights. A token holding
 * NaN or infinity gets a NaN or infinite computed scale and NaN codes. */
void fp8q_cuda_fp8_layer_activation_options(
    fp8q_granularity_kind weight_granularity, int static_scale,
    fp8q_quantize_options *options);

#endif /* FP8Q_CUDA_LAYER_PATH_H */
