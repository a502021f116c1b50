"""Decode steps with a static KV cache over the Llama-shaped decoder of
`python -m fp8q bench model` (fp8q._cli._bench_llama), and the CUDA graph
capture that replays a step: the same code runs eagerly on the CPU (mode
"decode eager") and captured on the GPU (mode "decode CUDA graph").

The step calls the model's own submodules by the names transformers'
Llama and the plain-torch decoder share (embed_tokens, layers[i].
input_layernorm, self_attn.q_proj/k_proj/v_proj/o_proj,
post_attention_layernorm, mlp, norm, lm_head), so it runs on the float
model and on every quantized copy of it (fp8q, torchao, optimum-quanto
keep those names), fused norms included (each norm's output goes straight
to the layers that read it).
"""
from fp8q._cli._bench_llama import rotary_tables, rotate


def _parts(model):
    """(body, lm_head): the module holding embed_tokens, layers and norm,
    and the output projection, of a Llama-shaped `model`."""
    body = next(module for module in model.modules()
                if hasattr(module, "embed_tokens")
                and hasattr(module, "layers"))
    head = next(module.lm_head for module in model.modules()
                if hasattr(module, "lm_head"))
    return body, head


class KVCacheDecoder:
    """Runs `model` (Llama-shaped, of `shape`) over a static KV cache for
    one sequence of at most context + tokens positions: prefill(ids) fills
    positions 0 .. context - 1 from `context` token ids; step(ids) takes
    `tokens` ids at positions context .. context + tokens - 1 and returns
    their logits (1, tokens, vocab), attending causally to the whole
    cache. A step writes the same cache positions every time, so it can be
    repeated (and replayed from a CUDA graph) with the same result. Every
    tensor a step uses is allocated here, none per call but the layers'
    outputs."""

    def __init__(self, torch, model, shape, context, tokens):
        self.torch = torch
        self.body, self.lm_head = _parts(model)
        self.shape = shape
        self.context, self.tokens = context, tokens
        self.head_dim = shape.hidden // shape.heads
        weight = self.body.embed_tokens.weight
        dtype, device = weight.dtype, weight.device
        total = context + tokens
        cache_shape = (shape.layers, 1, shape.kv_heads, total, self.head_dim)
        self.keys = torch.zeros(cache_shape, dtype=dtype, device=device)
        self.values = torch.zeros(cache_shape, dtype=dtype, device=device)
        self.cos, self.sin = rotary_tables(torch, self.head_dim, total,
                                           dtype, device)
        # mask[i, j]: position i may attend to position j.
        self.mask = torch.ones(total, total, dtype=torch.bool,
                               device=device).tril()

    def prefill(self, ids):
        """Fills the cache from `context` token ids (1, context); returns
        their logits."""
        return self._run(ids, 0)

    def step(self, ids):
        """The decode step (class docstring): logits of `tokens` ids."""
        return self._run(ids, self.context)

    def _rotate(self, x, start, end):
        return rotate(self.torch, x, self.cos[start:end],
                      self.sin[start:end])

    def _run(self, ids, start):
        torch, shape, head_dim = self.torch, self.shape, self.head_dim
        count = ids.shape[-1]
        end = start + count
        x = self.body.embed_tokens(ids)
        for index, layer in enumerate(self.body.layers):
            normed = layer.input_layernorm(x)
            attention = layer.self_attn

            def heads(projection, number, normed=normed):
                return projection(normed).view(1, count, number,
                                               head_dim).transpose(1, 2)

            q = self._rotate(heads(attention.q_proj, shape.heads), start, end)
            k = self._rotate(heads(attention.k_proj, shape.kv_heads),
                             start, end)
            v = heads(attention.v_proj, shape.kv_heads)
            self.keys[index, :, :, start:end].copy_(k)
            self.values[index, :, :, start:end].copy_(v)
            attended = torch.nn.functional.scaled_dot_product_attention(
                q, self.keys[index, :, :, :end],
                self.values[index, :, :, :end],
                attn_mask=self.mask[start:end, :end], enable_gqa=True)
            x = x + attention.o_proj(attended.transpose(1, 2).reshape(
                1, count, shape.heads * head_dim))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return self.lm_head(self.body.norm(x))


def cuda_graph_runner(torch, function, example, warm_up_calls):
    """Captures function(static) into a CUDA graph, where static is a copy
    of `example`, after `warm_up_calls` calls on a side stream (as
    torch.cuda.graph asks); returns replay(inputs): copies `inputs` into
    static, replays the graph on the current stream and returns the
    captured output tensor (overwritten by the next replay)."""
    static = example.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warm_up_calls):
            function(static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        output = function(static)

    def replay(inputs):
        static.copy_(inputs)
        graph.replay()
        return output
    return replay
