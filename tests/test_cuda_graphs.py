"""CUDA graph capture of fp8q's operations on a real GPU, with PyTorch:
torch.cuda.graph around fp8q.quantize and fp8q.scaled_mm on torch's
capture stream, replayed on new inputs, gives the bits of the same calls
run eagerly; a call that would grow fp8q's scratch memory inside the
capture raises fp8q.CudaError and leaves the capture valid.

Every test carries the `cuda` marker and skips, saying why, without a GPU
fp8q and PyTorch can use. What the host side queues during a capture is
tested without a GPU on the fake driver (tests/fake_gpu_capture.py).
"""
import numpy as np
import pytest

import fp8q
from helpers import same_bits

pytestmark = pytest.mark.cuda


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA GPU")
    cuda = fp8q.info()["cuda"]
    if not cuda["available"]:
        pytest.skip(f"no usable CUDA GPU: {cuda['reason']}")
    return torch


def warmed_up(torch, step):
    """Runs step(stream) twice on a side stream, as PyTorch's CUDA graph
    recipe does before a capture (fp8q's cuBLASLt workspace and scratch
    memory are made there)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step(torch.cuda.current_stream())
    torch.cuda.current_stream().wait_stream(side)


@pytest.mark.parametrize("granularity", ["tensor", "row"])
def test_graph_replays_quantize_and_scaled_mm_bit_identically(torch, rng,
                                                             granularity):
    m, k, n = 64, 512, 256
    x = torch.empty(m, k, device="cuda")
    weight = torch.randn(n, k, device="cuda")
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    current = torch.cuda.current_stream()
    # Static inputs and output, seen by fp8q through DLPack (zero-copy).
    fx = fp8q.asarray(x, stream=current)
    fout = fp8q.asarray(out, stream=current)
    fbias = fp8q.asarray(bias, stream=current)
    qw = fp8q.quantize(fp8q.asarray(weight, stream=current),
                       granularity=granularity, stream=current)
    w_scale = qw.scale if granularity == "tensor" else qw.scale.T

    def step(stream):
        qx = fp8q.quantize(fx, granularity=granularity, stream=stream)
        fp8q.scaled_mm(qx.data, qw.data.T, qx.scale, w_scale, bias=fbias,
                       out=fout, stream=stream)
        return qx

    x.copy_(torch.randn(m, k, device="cuda"))
    warmed_up(torch, step)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step(torch.cuda.current_stream())
    for trial in range(3):
        x.copy_(torch.from_numpy(
            rng.standard_normal((m, k)).astype(np.float32)).cuda())
        graph.replay()
        torch.cuda.synchronize()
        replayed = (captured.data.cpu(), captured.scale.cpu(),
                    fp8q.asarray(out.cpu()))
        stream = torch.cuda.current_stream()
        eager = step(stream)
        torch.cuda.synchronize()
        expected = (eager.data.cpu(), eager.scale.cpu(),
                    fp8q.asarray(out.cpu()))
        for got, want, what in zip(replayed, expected,
                                   ("data", "scale", "product")):
            assert same_bits(got.numpy(), want.numpy()), (trial, what)


def test_growing_scratch_memory_in_a_capture_is_refused(torch, rng):
    """A product whose float32 sums need more scratch memory than the
    block holds (the epilogue path: rowwise scales and a float32 bias)
    raises before any driver call, and torch ends the capture cleanly."""
    m, k, n = 2048, 128, 4096
    a, b = (fp8q.quantize(rng.standard_normal(shape).astype(np.float32),
                          granularity="row") for shape in ((m, k), (n, k)))
    operands = (a.data.to("cuda"), b.data.to("cuda").T, a.scale.to("cuda"),
                b.scale.to("cuda").T)
    bias = fp8q.zeros(n, device="cuda")
    fp8q.empty_cache()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(fp8q.CudaError, match="growing fp8q's scratch memory"):
        with torch.cuda.graph(graph):
            fp8q.scaled_mm(*operands, bias=bias,
                           stream=torch.cuda.current_stream())
    # The stream captures again, and the same call runs eagerly.
    with torch.cuda.graph(torch.cuda.CUDAGraph()):
        torch.ones(1, device="cuda").add_(1)
    fp8q.scaled_mm(*operands, bias=bias)
    fp8q.synchronize()
