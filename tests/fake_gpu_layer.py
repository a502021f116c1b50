"""Scenarios of the W8A8 layer's products on a GPU (csrc/cuda/layer_path.h,
_C.linear_layer's path argument, FP8Q_CUDA_FP8_LAYER_PATH) and of the bench
breakdown's pieces (fp8q._cli._bench_breakdown), run in a fresh interpreter on
the fake CUDA driver and cuBLASLt by tests/test_cuda_layer_path.py. Each
function raises AssertionError on failure.
"""
import os

import numpy as np

import fp8q
from fp8q import _C
from fp8q._cli import _bench_breakdown
from fake_gpu_scenarios import calls
from helpers import same_bits

GRANULARITIES = (("tensor", "tensor"), ("row", "row"), ("block", (128, 128)))
# What the layer's work is made of in the fakes' log: kernel launches (the
# kernels' names), cuBLASLt products and copies; allocations and stream
# bookkeeping differ between callers and are left out.
WORK_PREFIXES = ("fp8q_", "cublasLtMatmul", "cuMemcpy", "cuMemset")
N, K = 48, 256


def work_of(function):
    """(result, [the work `function` launched, in order])."""
    before = len(calls())
    result = function()
    return result, [name for name in calls()[before:]
                    if name.startswith(WORK_PREFIXES)]


def host(tensor):
    return fp8q.asarray(tensor).cpu().numpy()


def layer_weights(rng):
    """(granularity name, quantized weight, bias) on the GPU."""
    weight = rng.standard_normal((N, K)).astype(np.float32)
    bias = fp8q.asarray(rng.standard_normal(N).astype(np.float32),
                        device="cuda")
    for name, blocks in GRANULARITIES:
        yield name, fp8q.quantize(fp8q.asarray(weight, device="cuda"),
                                  granularity=blocks), bias


def tokens_on_gpu(rng, m, dtype):
    return fp8q.cast(fp8q.asarray(rng.standard_normal((m, K)).astype(
        np.float32), device="cuda"), dtype)


def fp8_layer_path_by_tokens():
    """The W8A8 layer call takes the weight-only product (layer_gemv's bits,
    its kernel, no cuBLASLt product) for up to the device's crossover
    (EXPECTED_CROSSOVER, as info reports it) where the weight-only kernels
    take x, and quantize + FP8 GEMM (path "fp8"'s bits) elsewhere; "fp8"
    never takes the weight-only product, "weight-only" wherever its kernels
    take x; no path argument follows FP8Q_CUDA_FP8_LAYER_PATH."""
    crossover = int(os.environ["EXPECTED_CROSSOVER"])
    device, = fp8q.info()["cuda"]["devices"]
    assert device["fp8_layer_weight_only_tokens"] == crossover, device
    switch = os.environ.get("FP8Q_CUDA_FP8_LAYER_PATH", "auto")
    assert fp8q.info()["cuda"]["switches"]["FP8Q_CUDA_FP8_LAYER_PATH"] == (
        switch)
    limits = {"auto": crossover, "fp8": 0, "weight-only": 1 << 62}
    rng = np.random.default_rng(43)
    for name, w, bias in layer_weights(rng):
        for dtype in ("float32", "bfloat16"):
            for m in (1, 2, 4, 5, 8, 9, 16, 17, 64, 65):
                x = tokens_on_gpu(rng, m, dtype)
                gemv = _C.layer_gemv(x, w.data, w.scale, bias, name, None)
                fp8 = _C.linear_layer(x, w.data, w.scale, bias, None, name,
                                      None, "fp8")
                for path in (None, "auto", "fp8", "weight-only"):
                    limit = limits[switch if path is None else path]
                    arguments = (x, w.data, w.scale, bias, None, name, None)
                    got, work = work_of(lambda: _C.linear_layer(
                        *arguments, *(() if path is None else (path,))))
                    weight_only = gemv is not None and m <= limit
                    case = (name, dtype, m, path, work)
                    expected = gemv if weight_only else fp8
                    assert same_bits(host(got), host(expected)), case
                    assert ("cublasLtMatmul" in work) != weight_only, case
                    assert any(step.startswith("fp8q_gemv") for step in
                               work) == weight_only, case


def layer_path_argument_is_checked():
    """A path the layer call does not take is a ValueError naming it; a
    wrong argument count a TypeError."""
    rng = np.random.default_rng(47)
    name, w, bias = next(layer_weights(rng))
    x = tokens_on_gpu(rng, 2, "float32")
    arguments = (x, w.data, w.scale, bias, None, name, None)
    for path in ("fast", "FP8", 3):
        try:
            _C.linear_layer(*arguments, path)
        except ValueError as error:
            assert "path must be None, \"auto\", \"fp8\" or \"weight-only\"" \
                in str(error), error
        else:
            raise AssertionError(f"path {path!r} was taken")
    try:
        _C.linear_layer(*arguments, None, None, None)
    except TypeError as error:
        assert "takes 7 to 9 positional arguments (10 given)" in str(error)
    else:
        raise AssertionError("10 arguments were taken")


def breakdown_pieces_add_up_to_the_layer():
    """fp8q._cli._bench_breakdown's pieces launch exactly the layer call's work
    (kernels, cuBLASLt products, copies, in order) and give its bits: the
    activation quantize + the FP8 GEMM on path "fp8" (per token, in blocks,
    with a static scale), the weight-only product on path "weight-only";
    so the bench's pieces add up to the layer. The W8A16 decode piece is
    the wide decode kernel alone, with the CPU's bits."""
    rng = np.random.default_rng(53)
    input_scale = fp8q.asarray(np.float32(0.02), device="cuda")
    for name, w, bias in layer_weights(rng):
        statics = (None,) if name == "block" else (None, input_scale)
        for dtype in ("float32", "bfloat16"):
            for m in (3, 40):
                x = tokens_on_gpu(rng, m, dtype)
                for static in statics:
                    parameters = (x, w.data, w.scale, bias, static, name)
                    layer, layer_work = work_of(_bench_breakdown.layer_call(
                        *parameters, path="fp8"))
                    pieces = _bench_breakdown.fp8_pieces(*parameters)
                    piece_work, result = [], None
                    for _, piece in pieces:
                        result, work = work_of(piece)
                        piece_work += work
                    case = (name, dtype, m, static is not None)
                    assert layer_work == piece_work, (case, layer_work,
                                                      piece_work)
                    assert "cublasLtMatmul" in layer_work, case
                    assert same_bits(host(layer), host(result)), case
                layer, layer_work = work_of(_bench_breakdown.layer_call(
                    *parameters[:4], None, name, path="weight-only"))
                _, piece = _bench_breakdown.weight_only_piece(
                    x, w.data, w.scale, bias, name)
                result, piece_work = work_of(piece)
                if result is None:  # the weight-only kernels decline x
                    continue
                assert layer_work == piece_work, (name, dtype, m, layer_work)
                assert same_bits(host(layer), host(result)), (name, dtype, m)
        # The W8A16 decode piece: the layer's weight in x's dtype, decoded
        # 16 codes a thread (K = 256), the CPU's bits.
        for dtype in ("float32", "bfloat16"):
            x = tokens_on_gpu(rng, 100, dtype)
            _, piece = _bench_breakdown.weight_decode_piece(
                x, w.data, w.scale, name)
            result, piece_work = work_of(piece)
            assert piece_work == ["fp8q_cast_from_fp8_wide"], (name,
                                                               piece_work)
            expected = _C.layer_weight(x.cpu(), w.data.cpu(), w.scale.cpu(),
                                       name, None)
            assert same_bits(host(result), host(expected)), (name, dtype)


def layer_takes_quantized_activations():
    """linear_layer's `quantized` (a fused norm's codes and row scales):
    the FP8 product reads them and launches no quantize kernel, with the
    same bits as quantizing x itself; block weights refuse them."""
    rng = np.random.default_rng(53)
    for name, w, bias in layer_weights(rng):
        x = tokens_on_gpu(rng, 24, "bfloat16")
        weight = fp8q.asarray(np.ones(K, np.float32), device="cuda")
        normed = fp8q.cast(x, "bfloat16")
        codes = fp8q.asarray(np.zeros((24, K), np.uint8)).view(
            "float8_e4m3fn").to("cuda")
        scale = fp8q.asarray(np.zeros((24, 1), np.float32), device="cuda")
        _C.norm_quantize(x, weight, None, normed, codes, scale, 1e-6, False,
                         None)
        # The 5-argument form makes its outputs on x's GPU: the same bits.
        made = _C.norm_quantize(x, weight, None, 1e-6, False)
        assert all(t.device == x.device for t in made), made
        for given, own in zip((normed, codes, scale), made):
            assert same_bits(host(own), host(given)), name
        arguments = (normed, w.data, w.scale, bias, None, name, None, "fp8")
        if name == "block":
            try:
                _C.linear_layer(*arguments, (codes, scale))
            except ValueError as error:
                assert "quantized activations need" in str(error), error
            else:
                raise AssertionError("block weights took codes")
            continue
        expected = _C.linear_layer(*arguments)
        got, work = work_of(lambda: _C.linear_layer(*arguments,
                                                    (codes, scale)))
        assert same_bits(host(got), host(expected)), name
        assert "cublasLtMatmul" in work, work
        assert not any(step.startswith("fp8q_quantize") for step in work), (
            work)
