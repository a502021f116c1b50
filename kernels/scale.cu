/*
 * scale.cu - the scales-from-amax kernel: the step of quantization between
 * the group amaxes and the scaled cast, so that the scales never leave the
 * GPU. The formula is csrc/core/scale_formula.h, shared with the CPU.
 * Launch contract: kernels/scale.cuh.
 */
#include "common.cuh"
#include "core/scale_formula.h"
#include "scale.cuh"

static_assert(sizeof(fp8q_scales_from_amax_args) == 24,
              "fp8q_scales_from_amax_args must match the host's layout");

extern "C" __global__ void fp8q_scales_from_amax(const fp8q_scales_from_amax_args args)
{
    int64_t i;
    for (i = global_thread_index(); i < args.count; i += global_thread_count()) {
        args.values[i] = fp8q_scale_from_amax(args.values[i], args.max, args.power_of_2);
    }
}
