"""The activation quantize under torch.compile: fp8q.torch._row_quantize's
decomposition (torch.ops.fp8q.quantize_rows) gives fp8q.quantize's codes
and scales bit for bit, eagerly, through aot_eager and through CPU
Inductor's generated C++, for every input class; a compiled W8A8 layer
quantizes in torch ops that Inductor fuses into the kernel producing x,
and compiled models (a tiny Llama, fused norms or not) give the eager
logits bit for bit where the surrounding float ops compile exactly."""

import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: pip install torch to run the "
                    "fp8q.torch tests")

import fp8q  # noqa: E402
import fp8q.torch as fpt  # noqa: E402
from fp8q.torch import _row_quantize  # noqa: E402
from test_norm_quantize import tiny_llama  # noqa: E402

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
BACKENDS = ["eager", "aot_eager", "inductor"]


def bits(tensor):
    """The tensor's raw bits as integers (NaN payloads and -0 compared)."""
    integer = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[
        tensor.element_size()]
    return tensor.contiguous().view(integer)


def reference(x, scale=None):
    """fp8q.quantize of each row of x (the C implementation): codes and
    float32 scales as torch tensors."""
    quantized = fp8q.quantize(fpt.from_torch(x.contiguous()),
                              "float8_e4m3fn", granularity="row",
                              scale=None if scale is None
                              else fpt.from_torch(scale.reshape(1, 1)
                                                  .expand(*x.shape[:-1], 1)
                                                  .contiguous()))
    return fpt.to_torch(quantized.data), fpt.to_torch(quantized.scale)


def run(backend, function, *arguments):
    torch._dynamo.reset()
    if backend != "eager":
        function = torch.compile(function, backend=backend, fullgraph=True)
    return function(*arguments)


def adversarial_rows(dtype, seed):
    """Rows of every class: ordinary values over the dtype's range, zero
    and negative-zero rows, subnormal-only rows, rows at the dtype's
    largest value, rows whose amax / 448 underflows (float32), one huge
    value among small ones, and mixed signs."""
    generator = torch.Generator().manual_seed(seed)
    info = torch.finfo(dtype)
    rows = 48
    x = torch.randn(rows, 80, generator=generator, dtype=torch.float64)
    x *= torch.logspace(np.log10(info.tiny), np.log10(info.max) - 1, rows,
                        dtype=torch.float64)[:, None]
    x = x.to(dtype)
    x[0] = 0
    x[1] = -0.0
    x[2] = info.smallest_normal / 4
    x[3, ::2] = -info.smallest_normal / 3
    x[4] = info.max
    x[5] = -info.max
    x[6, 7] = info.max
    x[7] = torch.linspace(-1, 1, 80, dtype=torch.float64).to(dtype)
    if dtype == torch.float32:
        # amax / 448 below float32's smallest subnormal: scale 2**-149.
        x[8] = 2.0 ** -149
        x[9, 3] = 3 * 2.0 ** -149
    return x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_decomposition_is_fp8q_quantize_bit_for_bit(backend, dtype, seed):
    x = adversarial_rows(dtype, seed)
    codes, scale = run(backend, _row_quantize.quantize_rows, x)
    want_codes, want_scale = reference(x)
    assert codes.dtype == torch.float8_e4m3fn and scale.dtype == torch.float32
    assert scale.shape == (x.shape[0], 1) and scale.is_contiguous()
    assert torch.equal(bits(scale), bits(want_scale)), f"seed={seed}"
    assert torch.equal(bits(codes), bits(want_codes)), f"seed={seed}"
    if dtype == torch.float32:
        assert scale[8].item() == 2.0 ** -149
    assert scale[0].item() == scale[1].item() == 1.0


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_decomposition_on_every_half_precision_value(backend, dtype):
    """All 65,536 bit patterns, finite ones in rows of 256 (each row's
    amax decides its scale); rows with NaN or infinity apart."""
    every = torch.arange(-2 ** 15, 2 ** 15, dtype=torch.int32).to(
        torch.int16).view(dtype)
    finite = every[torch.isfinite(every)]
    finite = finite[: finite.numel() // 256 * 256].reshape(-1, 256)
    codes, scale = run(backend, _row_quantize.quantize_rows, finite)
    want_codes, want_scale = reference(finite)
    assert torch.equal(bits(scale), bits(want_scale))
    assert torch.equal(bits(codes), bits(want_codes))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rows_with_nan_or_infinity_get_a_nan_scale(backend, dtype):
    """As torch.ops.fp8q.norm_quantize and the GPU quantize give them: the
    other rows are unchanged."""
    x = adversarial_rows(dtype, 7)[:12].clone()
    x[3, 5] = float("nan")
    x[6, 0] = float("inf")
    x[9, 79] = -float("inf")
    codes, scale = run(backend, _row_quantize.quantize_rows, x)
    bad = [3, 6, 9]
    good = [row for row in range(12) if row not in bad]
    assert torch.isnan(scale[bad]).all()
    assert torch.isnan(codes[bad].float()).all()
    want_codes, want_scale = reference(x[good])
    assert torch.equal(bits(scale[good]), bits(want_scale))
    assert torch.equal(bits(codes[good]), bits(want_codes))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_static_scale_decomposition_is_fp8q_quantize(backend, dtype, seed):
    """A given scale: fp8q.quantize(x, scale=s)'s codes (saturating where
    x / s passes 448), s in every finite row, NaN in the others."""
    x = adversarial_rows(dtype, seed)[:20].clone()
    x[11, 2] = float("nan")
    static = torch.tensor(0.0123, dtype=torch.float32)
    codes, scale = run(backend, _row_quantize.quantize_rows, x, static)
    good = [row for row in range(20) if row != 11]
    want_codes, _ = reference(x[good], static)
    assert torch.equal(bits(codes[good]), bits(want_codes))
    assert (scale[good] == static).all() and torch.isnan(scale[11]).all()
    assert (codes[4].float() == 448).all()  # info.max / 0.0123 saturates


def test_quantize_rows_is_a_registered_op_that_decomposes():
    """torch.ops.fp8q.quantize_rows runs the decomposition eagerly, and a
    traced graph holds aten ops in its place (nothing opaque)."""
    x = adversarial_rows(torch.bfloat16, 2)
    codes, scale = torch.ops.fp8q.quantize_rows(x)
    want_codes, want_scale = reference(x)
    assert torch.equal(bits(codes), bits(want_codes))
    assert torch.equal(bits(scale), bits(want_scale))
    graph = torch.fx.experimental.proxy_tensor.make_fx(
        lambda x: torch.ops.fp8q.quantize_rows(x))(x)
    targets = {str(node.target) for node in graph.graph.nodes
               if node.op == "call_function"}
    assert not any("fp8q" in target for target in targets), targets
    assert "aten.amax.default" in targets


# ---------------------------------------------------------------------------
# Compiled layers


class ResidualThenLayers(torch.nn.Module):
    """x + residual feeding three layers (q/k/v-like): the add compiles
    exactly, so a compiled model must give the eager bits."""

    def __init__(self, granularity):
        super().__init__()
        self.q = torch.nn.Linear(64, 48)
        self.k = torch.nn.Linear(64, 32, bias=False)
        self.v = torch.nn.Linear(64, 16)
        self.granularity = granularity

    def forward(self, x, residual):
        hidden = x + residual
        return torch.cat([self.q(hidden), self.k(hidden), self.v(hidden)],
                         -1)


def residual_model(seed, granularity, dtype, static=False):
    torch.manual_seed(seed % 2 ** 31)
    model = ResidualThenLayers(granularity)
    fpt.quantize(model, activations="e4m3", granularity=granularity)
    if static:
        with fpt.calibrate(model), torch.no_grad():
            model(torch.randn(8, 64), torch.randn(8, 64))
        fpt.freeze(model)
    return model.to(dtype)


def residual_inputs(dtype, seed):
    generator = torch.Generator().manual_seed(seed % 2 ** 31)
    x = torch.randn(2, 9, 64, generator=generator).to(dtype)
    residual = torch.randn(2, 9, 64, generator=generator).to(dtype)
    residual[0, 1] = -x[0, 1]  # a zero row
    x[0, 2] *= 1e-3
    residual[0, 2] = 0
    x[1, 3, 5] = torch.finfo(dtype).max / 2
    x[1, 4, 0] = float("nan")
    x[1, 5, 6] = float("inf")
    return x, residual


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("granularity,static", [
    ("row", False), ("tensor", False), ("row", True)],
    ids=["row", "tensor", "row-static"])
def test_compiled_layers_give_the_eager_bits(backend, dtype, granularity,
                                             static, seed):
    model = residual_model(seed, granularity, dtype, static)
    x, residual = residual_inputs(dtype, seed)
    with torch.no_grad():
        eager = model(x, residual)
        compiled = run(backend, model, x, residual)
    assert torch.isnan(eager[1, 4]).all() and torch.isnan(eager[1, 5]).all()
    assert torch.equal(bits(compiled), bits(eager)), f"seed={seed}"


def test_inductor_fuses_the_quantize_into_the_producing_kernel():
    """The generated code has no opaque quantize: the add, the row amax and
    the FP8 cast are one generated kernel, and the layers run
    linear_fp8_quantized (linear_fp8, which quantizes inside, is gone)."""
    from torch._inductor.utils import run_and_get_code
    model = residual_model(1, "row", torch.float32)
    x, residual = residual_inputs(torch.float32, 1)
    torch._dynamo.reset()
    with torch.no_grad():
        _, codes = run_and_get_code(torch.compile(model, fullgraph=True), x,
                                    residual)
    code = "\n".join(codes)
    assert "fp8q.linear_fp8_quantized" in code
    assert "fp8q.linear_fp8.default" not in code
    kernels = [line for line in code.splitlines()
               if line.lstrip().startswith("cpp_fused_") and "(" in line]
    fused = [line for line in kernels
             if "add" in line and "amax" in line and "_to_copy" in line]
    assert fused, kernels


def traced_targets_with_eager_bits(model, seed):
    """The targets of the graph torch.compile traces for `model` on
    residual_inputs(float32, seed) (fullgraph), after checking that the
    traced graph gives the eager bits."""
    x, residual = residual_inputs(torch.float32, seed)
    graph_targets = []

    def backend(graph_module, inputs):
        graph_targets.extend(str(node.target)
                             for node in graph_module.graph.nodes)
        return graph_module.forward

    torch._dynamo.reset()
    with torch.no_grad():
        compiled = torch.compile(model, backend=backend,
                                 fullgraph=True)(x, residual)
        assert torch.equal(bits(compiled), bits(model(x, residual)))
    return graph_targets


def test_block_weights_and_static_tensor_weights_stay_opaque():
    """1x128-block activations and static per-tensor activations with
    per-tensor weight scales keep linear_fp8 (its product's scale mode);
    they compile without breaks and give the eager bits."""
    for granularity, static in (("block", False), ("tensor", True)):
        graph_targets = traced_targets_with_eager_bits(
            residual_model(2, granularity, torch.float32, static), 2)
        assert "fp8q.linear_fp8.default" in graph_targets
        assert not any("quantize_rows" in t for t in graph_targets)


def test_compiled_gradients_match_eager():
    """x requiring grad under compile: the input gradient comes from
    linear_fp8_quantized's backward, as linear_fp8's eagerly."""
    model = residual_model(3, "row", torch.float32)
    for layer in (model.q, model.v):
        layer.bias.requires_grad_(True)
    x, residual = (t.nan_to_num(posinf=1.0) for t in
                   residual_inputs(torch.float32, 3))
    results = []
    for compiled in (False, True):
        torch._dynamo.reset()
        leaf = x.clone().requires_grad_(True)
        forward = torch.compile(model, fullgraph=True) if compiled else model
        forward(leaf, residual).square().sum().backward()
        results.append((leaf.grad, model.q.bias.grad.clone()))
        model.zero_grad()
    assert torch.allclose(results[0][0], results[1][0], rtol=1e-5,
                          atol=1e-6)
    assert torch.allclose(results[0][1], results[1][1], rtol=1e-5,
                          atol=1e-6)


# ---------------------------------------------------------------------------
# A tiny Llama


@pytest.mark.parametrize("fuse_norms", [False, True], ids=["plain", "fused"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_compiled_llama_logits_are_the_eager_ones(dtype, fuse_norms):
    """aot_eager runs the traced aten ops themselves: the compiled model
    (fullgraph, so no graph break) gives the eager logits bit for bit, with
    fused norms too (the norm is fp8q's kernel there, as eagerly). Under
    Inductor the attention, rotary and norm code Inductor generates rounds
    differently from eager torch, with or without fp8q (the float model
    differs too), so the logits agree within that."""
    model = fpt.quantize(tiny_llama(dtype), activations="e4m3",
                         fuse_norms=fuse_norms)
    ids = torch.randint(0, 128, (2, 9), generator=torch.Generator()
                        .manual_seed(1))
    with torch.no_grad():
        eager = model(ids, use_cache=False).logits
        compiled = run("aot_eager", model, ids)
    assert torch.equal(bits(compiled.logits), bits(eager))


def test_compiled_fused_norm_layer_is_exact_under_inductor():
    """A decoder block of a fused norm and q/k/v under Inductor: the norm
    is fp8q's kernel and the quantize Inductor's code, the eager bits."""
    model = tiny_llama(torch.bfloat16)
    fpt.quantize(model, activations="e4m3", fuse_norms=True)
    layer = model.model.layers[0]

    def block(hidden):
        normed = layer.input_layernorm(hidden)
        attention = layer.self_attn
        return torch.cat([attention.q_proj(normed), attention.k_proj(normed),
                          attention.v_proj(normed)], -1)

    hidden = torch.randn(2, 9, 64, generator=torch.Generator()
                         .manual_seed(4)).to(torch.bfloat16)
    hidden[1, 2] = 0
    with torch.no_grad():
        eager = block(hidden)
        compiled = run("inductor", block, hidden)
    assert torch.equal(bits(compiled), bits(eager))


@pytest.mark.parametrize("capability,decomposed", [((8, 0), False),
                                                   ((7, 5), False),
                                                   ((8, 9), True),
                                                   ((9, 0), True)])
def test_cuda_below_sm89_keeps_the_opaque_op(monkeypatch, capability,
                                             decomposed):
    """Triton, which Inductor writes GPU code in, refuses float8_e4m3fn
    conversions below compute capability 8.9 ("fp8e4nv data type is not
    supported on CUDA arch < 89"), where fp8q's W8A8 layers run (sm_75 to
    sm_87, the emulated GEMM): there a compiled layer must keep the opaque
    linear_fp8 (the same bits) instead of tracing quantize_rows. The
    tensors here are CPU ones seen as CUDA ones by the predicate (no GPU
    on CPU CI): the graph the layer traces is what is checked."""
    from fp8q.torch import _linear
    monkeypatch.setattr(torch.cuda, "get_device_capability",
                        lambda device=None: capability)
    assert _row_quantize.decomposition_compiles("cuda", 0) is decomposed
    assert _row_quantize.decomposition_compiles("cpu", None) is True
    monkeypatch.setattr(_linear, "_decomposition_compiles",
                        lambda x: _row_quantize.decomposition_compiles(
                            "cuda", 0))
    graph_targets = traced_targets_with_eager_bits(
        residual_model(6, "row", torch.float32), 6)
    assert ("fp8q.linear_fp8_quantized.default" in graph_targets) is (
        decomposed)
    assert ("fp8q.linear_fp8.default" in graph_targets) is (not decomposed)
