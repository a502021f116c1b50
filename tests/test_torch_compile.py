"""fp8q.torch under torch.compile and torch.export: the custom operators of
fp8q.torch._ops give zero graph breaks, fullgraph=True works, a plain
compile prints no warning, and compiled and exported models reproduce the
eager result bit for bit (W8A16, W8A8 dynamic and static)."""
import subprocess
import sys

import pytest

torch = pytest.importorskip(
    "torch", reason="PyTorch is not installed: pip install torch to run the "
                    "fp8q.torch tests")

import fp8q.torch as fpt  # noqa: E402

# (activations, static input scale)
MODES = [(None, False), ("e4m3", False), ("e4m3", True)]
MODE_IDS = ["W8A16", "W8A8-dynamic", "W8A8-static"]


def quantized_mlp(seed, activations, static, granularity="row"):
    """A float MLP whose float parts compile exactly (ReLU: inductor's fused
    GELU may differ from eager's in the last bit, with or without fp8q),
    quantized, and calibrated when static."""
    torch.manual_seed(seed % (2 ** 31))
    model = torch.nn.Sequential(
        torch.nn.Linear(200, 160), torch.nn.ReLU(),
        torch.nn.Linear(160, 96, bias=False), torch.nn.Linear(96, 40))
    fpt.quantize(model, activations=activations, granularity=granularity)
    if static:
        with fpt.calibrate(model), torch.no_grad():
            model(torch.randn(8, 200))
        fpt.freeze(model)
    return model


@pytest.mark.parametrize("activations,static", MODES, ids=MODE_IDS)
def test_no_graph_breaks_and_compiled_result_is_eager(activations, static,
                                                      seed):
    model = quantized_mlp(seed, activations, static)
    x = torch.randn(6, 200)
    with torch.no_grad():
        eager = model(x)
        torch._dynamo.reset()
        explanation = torch._dynamo.explain(model)(x)
        assert explanation.graph_break_count == 0, explanation.break_reasons
        assert explanation.graph_count == 1
        compiled = torch.compile(model, fullgraph=True)
        assert torch.equal(compiled(x), eager), f"seed={seed}"
        # A second batch size reuses or recompiles without breaking.
        x2 = torch.randn(3, 7, 200)
        assert torch.equal(compiled(x2), model(x2)), f"seed={seed}"


@pytest.mark.parametrize("activations,static", MODES, ids=MODE_IDS)
def test_export_reproduces_eager(activations, static, seed):
    model = quantized_mlp(seed, activations, static, granularity="block"
                          if activations and not static else "row")
    x = torch.randn(5, 200)
    with torch.no_grad():
        program = torch.export.export(model, (x,))
        targets = {str(node.target) for node in program.graph.nodes
                   if node.op == "call_function"}
        assert any(target.startswith("fp8q.") for target in targets), targets
        assert torch.equal(program.module()(x), model(x)), f"seed={seed}"


def test_plain_compile_prints_no_warning():
    code = (
        "import torch, fp8q.torch as fpt\n"
        "m = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(),\n"
        "                        torch.nn.Linear(32, 8))\n"
        "fpt.quantize(m, activations='e4m3')\n"
        "with torch.no_grad():\n"
        "    torch.compile(m)(torch.randn(4, 64))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                            text=True, check=True)
    assert "Warning" not in result.stderr, result.stderr


def test_fake_implementations_give_shapes_and_dtypes():
    from torch._subclasses.fake_tensor import FakeTensorMode
    layer = quantized_mlp(0, "e4m3", False, granularity="block")[0]
    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.empty(2, 3, 200, dtype=torch.bfloat16)
        y = torch.ops.fp8q.linear_fp8(x, layer.weight, layer.weight_scale,
                                      layer.bias, None, "block")
        w = torch.ops.fp8q.linear_weight_only(
            x, layer.weight, layer.weight_scale, None, "block")
        codes, scale = torch.ops.fp8q.quantize_weight(
            torch.empty(300, 200), torch.float8_e5m2, "block")
    assert y.shape == w.shape == (2, 3, 160) and y.dtype == torch.bfloat16
    assert codes.dtype == torch.float8_e5m2 and codes.shape == (300, 200)
    assert scale.dtype == torch.float32 and scale.shape == (3, 2)


def test_norm_quantize_compiles_to_the_eager_bits():
    """torch.ops.fp8q.norm_quantize traces as one opaque op (its fake
    implementation): fullgraph works and the compiled call gives the eager
    normed output, codes and scales bit for bit."""
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(5, 64, generator=generator).to(torch.bfloat16)
    weight = torch.rand(64, generator=generator).to(torch.bfloat16) + 0.5

    def norm(x):
        return torch.ops.fp8q.norm_quantize(x, weight, None, 1e-6, False)

    torch._dynamo.reset()
    explanation = torch._dynamo.explain(norm)(x)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    compiled = torch.compile(norm, fullgraph=True)(x)
    for got, want in zip(compiled, norm(x)):
        assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))


class _Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = torch.nn.Linear(64, 64)
        self.k_proj = torch.nn.Linear(64, 32)
        self.v_proj = torch.nn.Linear(64, 32)

    def forward(self, x):
        return torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], -1)


class _DecoderLayer(torch.nn.Module):
    """The module names of transformers' Llama decoder layer (the pattern
    fuse_norms recognises), with torch.nn.RMSNorm."""

    def __init__(self):
        super().__init__()
        self.input_layernorm = torch.nn.RMSNorm(64, eps=1e-6)
        self.self_attn = _Attention()

    def forward(self, x):
        return self.self_attn(self.input_layernorm(x))


def test_fused_norms_compile_without_graph_breaks():
    """Under torch.compile a fused norm is fp8q's kernel (one opaque op,
    the eager output) and the layers quantize its output in torch ops,
    the kernel's codes: no graph break, and the compiled model gives the
    eager fused one's bits."""
    torch.manual_seed(4)
    model = _DecoderLayer()
    with torch.no_grad():
        model.input_layernorm.weight.uniform_(0.5, 1.5)
    fpt.quantize(model, activations="e4m3", fuse_norms=True)
    assert type(model.input_layernorm).__name__ == "Fp8qFusedRMSNorm"
    x = torch.randn(2, 7, 64)
    with torch.no_grad():
        eager = model(x)
        assert hasattr(model.input_layernorm(x), "_fp8q_quantized")
        torch._dynamo.reset()
        explanation = torch._dynamo.explain(model)(x)
        assert explanation.graph_break_count == 0, explanation.break_reasons
        compiled = torch.compile(model, fullgraph=True)(x)
    assert torch.equal(compiled, eager)
