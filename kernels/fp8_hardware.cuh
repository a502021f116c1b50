/*
 * fp8_hardware.cuh - the saturating float32 -> E4M3FN / E5M2 encodes of
 * csrc/core/float_codec.h through cuda_fp8.h's conversion, which is one
 * cvt.rn.satfinite instruction on sm_89 and newer (FP8Q_HARDWARE_FP8).
 *
 * Where they are the same function (kernels/README.md, "Hardware FP8
 * conversion", has the argument): cvt.rn.satfinite rounds the float32 once
 * to nearest-even and clamps finite overflow and +-inf to +-max, exactly as
 * fp8q_encode_e4m3fn / fp8q_encode_e5m2 with saturate; it returns one NaN
 * code without the input's sign, so NaN is fixed up here to the codec's
 * (sign | 0x7F for E4M3FN, sign | 0x7E for E5M2). Not used for: the
 * non-saturating modes (no hardware instruction: cuda_fp8.h emulates them
 * in software), the fnuz formats (no hardware conversion at all), sm_75 to
 * sm_86 (FP8Q_HARDWARE_FP8 is 0 there and in host code).
 *
 * __host__ __device__ so that tests/cuda_fp8_emulation.cpp can run these
 * very functions on the host against the codec (through cuda_fp8.h's host
 * emulation of the instruction; the GPU itself is tested by
 * tests/test_cuda_ops.py).
 */
#ifndef FP8Q_KERNELS_FP8_HARDWARE_CUH
#define FP8Q_KERNELS_FP8_HARDWARE_CUH

#include <cuda_fp8.h>
#include <stdint.h>

#include "core/float_codec.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define FP8Q_HARDWARE_FP8 1
#else
#define FP8Q_HARDWARE_FP8 0
#endif

/* `code` from cuda_fp8.h, or the codec's NaN of `value`'s sign. */
static __host__ __device__ __forceinline__ uint8_t fp8q_fix_nan(uint8_t code, float value,
                                                                uint32_t nan_code)
{
    const uint32_t bits = fp8q_float_to_bits(value);
    return (bits & 0x7FFFFFFFu) > 0x7F800000u ? (uint8_t)(((bits >> 24) & 0x80u) | nan_code)
                                               : code;
}

/* fp8q_encode_e4m3fn(value, 1). */
static __host__ __device__ __forceinline__ uint8_t fp8q_hardware_encode_e4m3fn(float value)
{
    return fp8q_fix_nan(__nv_cvt_float_to_fp8(value, __NV_SATFINITE, __NV_E4M3), value, 0x7Fu);
}

/* fp8q_encode_e5m2(value, 1). */
static __host__ __device__ __forceinline__ uint8_t fp8q_hardware_encode_e5m2(float value)
{
    return fp8q_fix_nan(__nv_cvt_float_to_fp8(value, __NV_SATFINITE, __NV_E5M2), value, 0x7Eu);
}

#endif /* FP8Q_KERNELS_FP8_HARDWARE_CUH */
