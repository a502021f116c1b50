/*
 * switches.h - the GPU backend's switches: environment variables, read once
 * (at the backend's first use, fp8q_cuda_backend_check), that make one GPU
 * take the scaled_mm paths other GPUs take, so that a single GPU machine
 * tests all of them (docs/scaled_mm.md, "Switches"; .ci/gpu-check runs the
 * CUDA tests under them). Changing the environment afterwards changes
 * nothing.
 *
 *   FP8Q_CUDA_NO_FP8_TENSOR_CORES  "1": every GPU is treated as one without
 *       FP8 tensor cores (sm_75 to sm_87): scaled_mm takes their exact
 *       paths (the bfloat16 product of the decoded codes; float32 for block
 *       scales). "0" or unset: each GPU's own compute capability decides.
 *   FP8Q_CUDA_SCALED_MM_PATH  which step of scaled_mm's fallback order
 *       every product starts from, on GPUs with FP8 tensor cores:
 *       "auto" (or unset): the usual order, one cuBLASLt call first;
 *       "padded": every FP8 product on zero-padded copies of the operands
 *       (made even where K and N are multiples of 16, whatever the padding
 *       rule says): the one call on them where it fits, else cuBLASLt's
 *       FP8 product of them + the epilogue kernel;
 *       "epilogue": never the one call: cuBLASLt's FP8 product (of padded
 *       operands where the padding rule says so) + the epilogue kernel;
 *       "exact": the exact paths (bfloat16 product of the decoded codes;
 *       float32 for block scales).
 *       Block scales have no FP8 product + epilogue path: under "epilogue"
 *       they take the float32 path, under "padded" the one call on padded
 *       operands where it fits, else the float32 path.
 *   FP8Q_CUDA_GEMM_TUNING  "0": cuBLASLt's heuristic's first algorithm
 *       for every product, none timed; "1" or unset: the first time a
 *       product's key is seen outside a CUDA graph capture, cuBLASLt's top
 *       candidates are timed and the fastest kept (cuda/matmul.h,
 *       docs/scaled_mm.md "Algorithm choice").
 *   FP8Q_CUDA_FP8_LAYER_PATH  which product an FP8-activation (W8A8)
 *       fp8q.torch.Linear runs on a GPU (docs/torch.md, "Which product
 *       runs"): "auto" (or unset): the weight-only product for as many
 *       tokens as cuda/layer_path.h's table says for the device, quantize
 *       + FP8 GEMM above; "fp8": quantize + FP8 GEMM for every token count;
 *       "weight-only": the weight-only product wherever its kernels take
 *       the call (up to 64 tokens).
 *
 * Any other value makes the GPU backend unusable, with an error that names
 * the variable, its value and the values it takes.
 */
#ifndef FP8Q_CUDA_SWITCHES_H
#define FP8Q_CUDA_SWITCHES_H

#include "core/status.h"

/* FP8Q_CUDA_SCALED_MM_PATH's values, in the order of its text above. */
typedef enum fp8q_scaled_mm_path_switch {
    FP8Q_SCALED_MM_PATH_AUTO,
    FP8Q_SCALED_MM_PATH_PADDED,
    FP8Q_SCALED_MM_PATH_EPILOGUE,
    FP8Q_SCALED_MM_PATH_EXACT
} fp8q_scaled_mm_path_switch;

/* FP8Q_CUDA_FP8_LAYER_PATH's values, in the order of its text above. */
typedef enum fp8q_layer_path {
    FP8Q_LAYER_PATH_AUTO,
    FP8Q_LAYER_PATH_FP8,
    FP8Q_LAYER_PATH_WEIGHT_ONLY
} fp8q_layer_path;

typedef struct fp8q_cuda_switches {
    int no_fp8_tensor_cores; /* FP8Q_CUDA_NO_FP8_TENSOR_CORES=1 */
    fp8q_scaled_mm_path_switch scaled_mm_path;
    int gemm_tuning; /* 1 unless FP8Q_CUDA_GEMM_TUNING=0 */
    fp8q_layer_path fp8_layer_path;
    /* FP8Q_OK, or the FP8Q_ERROR_CUDA naming the first variable whose
     * value is not one of those above (the others keep their defaults). */
    fp8q_error error;
} fp8q_cuda_switches;

/* The switches, read from the environment on the first call (once per
 * process, thread-safely); never NULL. */
const fp8q_cuda_switches *fp8q_cuda_switches_get(void);

/* FP8Q_CUDA_SCALED_MM_PATH's text for `path` ("auto", "padded", ...). */
const char *fp8q_scaled_mm_path_switch_name(fp8q_scaled_mm_path_switch path);

/* FP8Q_CUDA_FP8_LAYER_PATH's text for `path` ("auto", "fp8", ...). */
const char *fp8q_layer_path_name(fp8q_layer_path path);

/* Sets *path from its text ("auto", "fp8", "weight-only"): 0, or -1 (path
 * unchanged) for any other text. */
int fp8q_layer_path_parse(const char *text, fp8q_layer_path *path);

#endif /* FP8Q_CUDA_SWITCHES_H */
