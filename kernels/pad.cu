/*
 * pad.cu - the pad kernel: one thread per destination element
 * (grid-stride), copying the source element at the same (row, column) or
 * writing zero where the source has none. Launch contract: kernels/pad.cuh.
 */
#include "common.cuh"
#include "pad.cuh"

static_assert(sizeof(fp8q_pad_args) == 56, "fp8q_pad_args must match the host's layout");

template <typename T> static __device__ __noinline__ void pad_run(const fp8q_pad_args args)
{
    const T *source = (const T *)args.source;
    T *destination = (T *)args.destination;
    const int64_t count = args.rows * args.cols;
    int64_t i;

    for (i = global_thread_index(); i < count; i += global_thread_count()) {
        const int64_t row = i / args.cols;
        const int64_t col = i - row * args.cols;
        destination[i] = row < args.source_rows && col < args.source_cols
                             ? source[row * args.source_cols + col]
                             : (T)0;
    }
}

extern "C" __global__ void fp8q_pad(const fp8q_pad_args args)
{
    call_for_element_size(args.element_size,
                          [&](auto element) { pad_run<typename decltype(element)::type>(args); });
}
