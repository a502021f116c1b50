"""Helpers shared by the GPU halves of the bench commands: whether a GPU
can be measured here, CUDA-event medians of device time, and the host's
enqueueing time per call. Wall-time medians (CPU) are fp8q._cli._bench's
median_seconds, which host_microseconds reuses.
"""
import statistics

from fp8q import _C
from fp8q._cli._bench import median_seconds

CALLS_PER_ROUND = 5  # calls per CUDA-event sample
HOST_CALLS = 200  # calls enqueued per host-time sample


def unavailable_reason(torch):
    """Why the GPU benchmarks cannot run here (a sentence), or None when
    PyTorch has a CUDA device and fp8q can use it."""
    if not torch.cuda.is_available():
        return "this PyTorch has no usable CUDA device"
    cuda = _C._cuda_info()
    if not cuda["available"]:
        return f"fp8q cannot use CUDA here: {cuda['reason']}"
    return None


def gpu_torch():
    """The torch module, when the GPU benchmarks can run here; otherwise
    RuntimeError saying why: "needs PyTorch (for the peers and CUDA
    events)" when torch is not installed, else unavailable_reason's
    sentence."""
    try:
        import torch
    except ImportError:
        raise RuntimeError("needs PyTorch (for the peers and CUDA events)")
    reason = unavailable_reason(torch)
    if reason is not None:
        raise RuntimeError(reason)
    return torch


def median_ms_cuda(torch, functions, repeats):
    """Median device milliseconds per call of each of `functions`: one
    warm-up call each, then `repeats` rounds in which every function, in
    turn, runs CALLS_PER_ROUND times between two CUDA events on the current
    stream (the time between the events, divided by CALLS_PER_ROUND, is
    one sample)."""
    for function in functions:
        function()
    torch.cuda.synchronize()
    samples = [[] for _ in functions]
    for _ in range(repeats):
        for index, function in enumerate(functions):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(CALLS_PER_ROUND):
                function()
            end.record()
            end.synchronize()
            samples[index].append(start.elapsed_time(end) / CALLS_PER_ROUND)
    return [statistics.median(values) for values in samples]


def host_microseconds(torch, function):
    """The host's time per call, in microseconds, to enqueue HOST_CALLS
    calls of `function` on the GPU with no synchronisation in between (one
    sample after a warm-up; the device is synchronised before and after,
    outside the timed span)."""
    return median_seconds([function], 1, calls=HOST_CALLS,
                          synchronize=torch.cuda.synchronize)[0] * 1e6
