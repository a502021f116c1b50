/*
 * epilogue.cu - the matrix-multiply epilogue kernel: scales, bias, the
 * result's amax and its rounding into the output dtype, over the float32
 * sums a GEMM wrote. Launch contract: kernels/epilogue.cuh.
 */
#include "common.cuh"
#include "epilogue.cuh"

static_assert(sizeof(fp8q_epilogue_args) == 96, "fp8q_epilogue_args must match the host's layout");

template <int D> static __device__ __noinline__ void epilogue_run(const fp8q_epilogue_args args)
{
    typedef typename dtype_traits<D>::storage destination_t;
    destination_t *destination = (destination_t *)args.destination;
    const int64_t count = args.m * args.n;
    const int divide = args.divide != 0;
    const float scale_result = args.scale_result;
    uint32_t amax = 0u;
    int64_t index;

    for (index = global_thread_index(); index < count; index += global_thread_count()) {
        const int64_t i = index / args.n;
        const int64_t j = index - i * args.n;
        double value = (double)args.product[index];
        float rounded;
        if (args.scale_a != NULL) {
            value = value * (double)args.scale_a[i * args.scale_a_stride];
        }
        if (args.scale_b != NULL) {
            value = value * (double)args.scale_b[j * args.scale_b_stride];
        }
        if (args.bias != NULL) {
            value = value + (double)args.bias[j];
        }
        rounded = __double2float_rn(value);
        amax = max(amax, magnitude_bits(rounded));
        if (divide && rounded == rounded) {
            rounded = __fdiv_rn(rounded, scale_result);
        }
        destination[index] = dtype_traits<D>::store(rounded, 1);
    }
    if (args.amax_bits != NULL) {
        block_raise_max_bits(args.amax_bits, amax);
    }
}

extern "C" __global__ void fp8q_scaled_mm_epilogue(const fp8q_epilogue_args args)
{
    call_for_dtype(args.destination_dtype,
                   [&](auto destination) { epilogue_run<decltype(destination)::value>(args); });
}
