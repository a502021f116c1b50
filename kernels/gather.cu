/*
 * gather.cu - the gather kernel: one thread per output element (grid-stride),
 * the source offset found by unravelling the C-order index over the view's
 * extents. Launch contract: kernels/gather.cuh.
 */
#include "common.cuh"
#include "gather.cuh"

static_assert(sizeof(fp8q_gather_args) == 288, "fp8q_gather_args must match the host's layout");

template <typename T> static __device__ __noinline__ void gather_run(const fp8q_gather_args args)
{
    const T *source = (const T *)args.source;
    T *destination = (T *)args.destination;
    int64_t i;

    for (i = global_thread_index(); i < args.count; i += global_thread_count()) {
        int64_t rest = i;
        int64_t offset = 0;
        int axis;
        for (axis = args.ndim - 1; axis >= 0; axis--) {
            const int64_t extent = args.shape[axis];
            const int64_t index = rest % extent;
            rest /= extent;
            offset += index * args.strides[axis];
        }
        destination[i] = source[offset];
    }
}

/* Not call_for_element_size as in pad.cu and transpose.cu: its lambda
 * would take the 288-byte argument struct by reference, and nvcc then
 * copies it to local memory before the call (a 288-byte stack frame more,
 * seen in the PTX); passed by value from the parameter space it is not. */
extern "C" __global__ void fp8q_gather(const fp8q_gather_args args)
{
    if (args.element_size == 1) {
        gather_run<uint8_t>(args);
    }
    else if (args.element_size == 2) {
        gather_run<uint16_t>(args);
    }
    else {
        gather_run<uint32_t>(args);
    }
}
