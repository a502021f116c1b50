"""The FLUX-shaped transformer block that `python -m fp8q bench model`
times beside the Llama-shaped decoder: a DiT-style block in plain torch
(adaLN modulation from a conditioning vector, LayerNorm without affine
weights, self-attention with RMS-normed queries and keys, a GELU MLP),
every projection a torch.nn.Linear with bias, so fp8q.torch.quantize,
torchao and optimum-quanto swap the same layers. The model maps image
tokens (1, tokens, hidden) to the same shape; its conditioning vector is a
buffer drawn with the weights.
"""
from dataclasses import dataclass

BIAS_STD = 0.02
NORM_EPS = 1e-6
MODULATIONS = 6  # shift, scale, gate for attention; the same for the MLP


@dataclass(frozen=True)
class FluxShape:
    """The sizes of the block (FLUX.1: hidden 3072, 24 heads, MLP ratio
    4) and the image tokens it is timed at."""

    blocks: int
    hidden: int
    heads: int
    mlp: int
    tokens: int

    def describe(self):
        """One line: the sizes as the table header gives them."""
        return (f"{self.blocks} block(s), hidden {self.hidden}, "
                f"{self.heads} heads, MLP {self.mlp}")


GPU_SHAPE = FluxShape(blocks=1, hidden=3072, heads=24, mlp=12288,
                      tokens=4096)
CPU_SHAPE = FluxShape(blocks=1, hidden=128, heads=4, mlp=512, tokens=64)


def build(shape, dtype, device, seed):
    """The model of `shape` (module docstring) with random weights drawn
    after torch.manual_seed(seed), in `dtype` on `device`, eval mode."""
    import torch

    nn = torch.nn
    functional = torch.nn.functional
    head_dim = shape.hidden // shape.heads

    def modulate(x, shift, scale):
        return x * (1 + scale) + shift

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.modulation = nn.Linear(shape.hidden,
                                        MODULATIONS * shape.hidden)
            self.norm1 = nn.LayerNorm(shape.hidden, eps=NORM_EPS,
                                      elementwise_affine=False)
            self.qkv = nn.Linear(shape.hidden, 3 * shape.hidden)
            self.query_norm = nn.RMSNorm(head_dim, eps=NORM_EPS)
            self.key_norm = nn.RMSNorm(head_dim, eps=NORM_EPS)
            self.proj = nn.Linear(shape.hidden, shape.hidden)
            self.norm2 = nn.LayerNorm(shape.hidden, eps=NORM_EPS,
                                      elementwise_affine=False)
            self.mlp_in = nn.Linear(shape.hidden, shape.mlp)
            self.mlp_out = nn.Linear(shape.mlp, shape.hidden)

        def forward(self, x, conditioning):
            (shift1, scale1, gate1, shift2, scale2,
             gate2) = self.modulation(functional.silu(conditioning)).chunk(
                MODULATIONS, dim=-1)
            batch, tokens, _ = x.shape
            qkv = self.qkv(modulate(self.norm1(x), shift1, scale1))
            q, k, v = qkv.view(batch, tokens, 3, shape.heads,
                               head_dim).permute(2, 0, 3, 1, 4)
            attended = functional.scaled_dot_product_attention(
                self.query_norm(q), self.key_norm(k), v)
            x = x + gate1 * self.proj(attended.transpose(1, 2).reshape(
                batch, tokens, shape.hidden))
            hidden = functional.gelu(
                self.mlp_in(modulate(self.norm2(x), shift2, scale2)),
                approximate="tanh")
            return x + gate2 * self.mlp_out(hidden)

    class Flux(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(Block()
                                        for _ in range(shape.blocks))
            for module in self.modules():
                # Weights of standard deviation fan_in ** -0.5 keep each
                # layer's output as large as its input: the adaLN gates and
                # the attention and MLP branches are not negligible beside
                # the residual, so the cosine of the outputs sees their
                # quantization error.
                if isinstance(module, nn.Linear):
                    nn.init.normal_(module.weight,
                                    std=module.in_features ** -0.5)
                    nn.init.normal_(module.bias, std=BIAS_STD)
            self.register_buffer("conditioning",
                                 torch.randn(1, 1, shape.hidden))

        def forward(self, x):
            for block in self.blocks:
                x = block(x, self.conditioning)
            return x

    torch.manual_seed(seed)
    with torch.device(device):
        model = Flux()
    return model.to(dtype).eval()


def image_tokens(torch, shape, tokens, dtype, device, generator):
    """Random image tokens (1, tokens, hidden) in `dtype` on `device`,
    drawn from N(0, 1) with `generator` (a CPU torch.Generator)."""
    return torch.randn(1, tokens, shape.hidden,
                       generator=generator).to(dtype=dtype, device=device)
