"""The Llama-shaped decoder that `python -m fp8q bench model` times, with
random weights: transformers' LlamaForCausalLM built from a LlamaConfig
when transformers is installed, else a plain-torch decoder of the same
shapes (token embedding, rotary positions, grouped-query attention,
RMSNorm, SwiGLU MLP, lm_head). Either way the model is a module that maps
token ids (batch, tokens) to logits (batch, tokens, vocab), and every
projection is a torch.nn.Linear without bias, so fp8q.torch.quantize and
optimum-quanto find the same layers.
"""
from dataclasses import dataclass

INIT_STD = 0.02  # transformers' initializer_range for Llama
ROPE_THETA = 10000.0
RMS_EPS = 1e-5


@dataclass(frozen=True)
class LlamaShape:
    """The sizes of a Llama-architecture decoder."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int

    def describe(self):
        """One line: the sizes as the table header gives them."""
        return (f"{self.layers} layers, hidden {self.hidden}, MLP "
                f"{self.intermediate}, {self.heads} heads, {self.kv_heads} "
                f"KV heads, vocab {self.vocab}")


# The GPU model is Llama-3-8B's layer shape, four layers deep by default
# (--layers changes the depth).
GPU_SHAPE = LlamaShape(layers=4, hidden=4096, intermediate=14336, heads=32,
                       kv_heads=8, vocab=32000)
CPU_SHAPE = LlamaShape(layers=2, hidden=256, intermediate=768, heads=8,
                       kv_heads=2, vocab=1000)


def rotary_tables(torch, head_dim, positions, dtype, device):
    """(cos, sin), each (positions, head_dim) in `dtype`: the rotary
    position angles of positions 0 .. positions - 1 (frequencies
    ROPE_THETA ** (-2i / head_dim), repeated for both halves), as
    transformers' Llama computes them."""
    frequencies = 1.0 / ROPE_THETA ** (torch.arange(
        0, head_dim, 2, device=device).float() / head_dim)
    angles = torch.outer(torch.arange(positions, device=device).float(),
                         frequencies)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate(torch, x, cos, sin):
    """Rotary position embedding of x (..., positions, head_dim), the
    half-split convention of transformers' Llama."""
    first, second = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-second, first), dim=-1) * sin


def build(shape, dtype, device, seed):
    """(model, source): the decoder of `shape` with random weights drawn
    after torch.manual_seed(seed), in `dtype` on `device`, in eval mode;
    source says which implementation it is ("transformers X.Y
    LlamaForCausalLM" or "plain torch"). model(ids) gives the logits."""
    import torch

    torch.manual_seed(seed)
    try:
        import transformers
    except ImportError:
        transformers = None
    with torch.device(device):
        if transformers is None:
            model = _plain_decoder(torch, shape)
            source = "plain torch (transformers not installed)"
        else:
            model = _transformers_decoder(torch, transformers, shape)
            source = (f"transformers {transformers.__version__} "
                      "LlamaForCausalLM")
    return model.to(dtype).eval(), source


def _transformers_decoder(torch, transformers, shape):
    """LlamaForCausalLM of `shape`, wrapped to return the logits alone."""
    config = transformers.LlamaConfig(
        hidden_size=shape.hidden, intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads, vocab_size=shape.vocab,
        rms_norm_eps=RMS_EPS, rope_theta=ROPE_THETA,
        initializer_range=INIT_STD)

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = transformers.LlamaForCausalLM(config)

        def forward(self, ids):
            return self.model(input_ids=ids, use_cache=False).logits

    return Logits()


def _plain_decoder(torch, shape):
    """The same decoder in plain torch (what LlamaForCausalLM computes,
    without its cache and masks for padding)."""
    nn = torch.nn
    functional = torch.nn.functional
    head_dim = shape.hidden // shape.heads

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(shape.hidden))
            # transformers' name for it (fp8q's fuse_norms reads it).
            self.variance_epsilon = RMS_EPS

        def forward(self, x):
            x32 = x.float()
            normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True)
                                       + self.variance_epsilon)
            return self.weight * normed.to(x.dtype)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(shape.hidden, shape.heads * head_dim,
                                    bias=False)
            self.k_proj = nn.Linear(shape.hidden, shape.kv_heads * head_dim,
                                    bias=False)
            self.v_proj = nn.Linear(shape.hidden, shape.kv_heads * head_dim,
                                    bias=False)
            self.o_proj = nn.Linear(shape.heads * head_dim, shape.hidden,
                                    bias=False)

        def forward(self, x, cos, sin):
            batch, tokens, _ = x.shape

            def heads(projection, count):
                return projection(x).view(batch, tokens, count,
                                          head_dim).transpose(1, 2)

            q = rotate(torch, heads(self.q_proj, shape.heads), cos, sin)
            k = rotate(torch, heads(self.k_proj, shape.kv_heads), cos, sin)
            v = heads(self.v_proj, shape.kv_heads)
            attended = functional.scaled_dot_product_attention(
                q, k, v, is_causal=True, enable_gqa=True)
            return self.o_proj(attended.transpose(1, 2).reshape(
                batch, tokens, shape.heads * head_dim))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj = nn.Linear(shape.hidden, shape.intermediate,
                                       bias=False)
            self.up_proj = nn.Linear(shape.hidden, shape.intermediate,
                                     bias=False)
            self.down_proj = nn.Linear(shape.intermediate, shape.hidden,
                                       bias=False)

        def forward(self, x):
            return self.down_proj(functional.silu(self.gate_proj(x))
                                  * self.up_proj(x))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = RMSNorm()
            self.self_attn = Attention()
            self.post_attention_layernorm = RMSNorm()
            self.mlp = MLP()

        def forward(self, x, cos, sin):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin)
            return x + self.mlp(self.post_attention_layernorm(x))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(shape.vocab, shape.hidden)
            self.layers = nn.ModuleList(Layer() for _ in range(shape.layers))
            self.norm = RMSNorm()
            self.lm_head = nn.Linear(shape.hidden, shape.vocab, bias=False)
            for module in self.modules():
                if isinstance(module, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(module.weight, std=INIT_STD)

        def forward(self, ids):
            x = self.embed_tokens(ids)
            cos, sin = rotary_tables(torch, head_dim, ids.shape[-1],
                                     x.dtype, ids.device)
            for layer in self.layers:
                x = layer(x, cos, sin)
            return self.lm_head(self.norm(x))

    return Decoder()
