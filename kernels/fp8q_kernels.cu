/*
 * fp8q_kernels.cu - the one translation unit nvcc compiles into fp8q's
 * fatbin (nvcc -fatbin takes a single input): it includes every kernel
 * family. CMakeLists.txt builds it and embeds the result in fp8q._C
 * (csrc/cuda/kernel_image.h).
 */
#include "cast.cu"
#include "amax.cu"
#include "scale.cu"
#include "quantize_rows.cu"
#include "norm_quantize.cu"
#include "epilogue.cu"
#include "transpose.cu"
#include "gather.cu"
#include "calibrate.cu"
#include "pad.cu"
#include "gemv.cu"
#include "gemv_tensor_cores.cu"
