"""Real-scale check of fp8q.torch on a Hugging Face causal LM built from its
config (no download): quantize (W8A8 with static scales, or W8A16), count
torch.compile's graph breaks, run it under torch.compile(fullgraph=True)
against eager, save with safetensors, reload into a freshly built model and
compare. Inductor compiles the float parts (RMSNorm, SiLU, attention) with
its own fused kernels, so compiled logits differ from eager ones in the last
bits with or without fp8q; the fp8q ops are opaque and run the same code.

    python docs/examples/quantize_causal_lm.py            # Llama-like, ~0.3 B
    python docs/examples/quantize_causal_lm.py --tiny     # the test's config

Needs torch, transformers and safetensors. The model's nn.Linear layers are
quantized except lm_head; embeddings and norms stay in floating point.
"""
import argparse
import os
import tempfile

import torch
import transformers
from safetensors.torch import load_file, save_file

import fp8q.torch as fpt


def llama_config(tiny):
    """A Llama-architecture config: the test's tiny one, or ~0.3 B
    parameters (hidden 1024, 16 layers)."""
    size = (dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, vocab_size=512)
            if tiny else
            dict(hidden_size=1024, intermediate_size=2816,
                 num_hidden_layers=16, num_attention_heads=16,
                 num_key_value_heads=8, vocab_size=32000))
    return transformers.LlamaConfig(max_position_embeddings=256, **size)


def build(config, seed):
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(config).eval()


def quantize(model, activations):
    return fpt.quantize(model, activations=activations,
                        exclude=["lm_head"])


def logits(model, tokens):
    with torch.no_grad():
        return model(input_ids=tokens, use_cache=False).logits


def run(tiny=False, activations="e4m3", seed=0, directory=None):
    """Returns a dict of the checks: graph breaks (torch._dynamo.explain),
    the largest |compiled - eager| logit difference, reloaded == quantized
    (bit for bit), and the relative error of the quantized logits against
    the float model's."""
    config = llama_config(tiny)
    model = build(config, seed)
    tokens = torch.randint(0, config.vocab_size, (2, 16),
                           generator=torch.Generator().manual_seed(seed))
    reference = logits(model, tokens)
    quantize(model, activations)
    if activations is not None:
        with fpt.calibrate(model), torch.no_grad():
            for batch in range(4):
                model(input_ids=torch.randint(
                    0, config.vocab_size, (2, 16),
                    generator=torch.Generator().manual_seed(seed + batch + 1)),
                    use_cache=False)
        fpt.freeze(model)
    eager = logits(model, tokens)
    torch._dynamo.reset()
    with torch.no_grad():
        explanation = torch._dynamo.explain(model)(input_ids=tokens,
                                                   use_cache=False)
    compiled = logits(torch.compile(model, fullgraph=True), tokens)
    with tempfile.TemporaryDirectory(dir=directory) as temporary:
        path = os.path.join(temporary, "model-fp8.safetensors")
        save_file(model.state_dict(), path)
        reloaded = quantize(build(config, seed + 1), activations)
        reloaded.load_state_dict(load_file(path))
    error = float((eager - reference).norm() / reference.norm())
    return {"graph_breaks": explanation.graph_break_count,
            "compiled_max_difference": float((compiled - eager).abs().max()),
            "logit_scale": float(eager.abs().max()),
            "reloaded_equal": torch.equal(logits(reloaded, tokens), eager),
            "relative_error": error}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true",
                        help="the reduced config the test uses")
    parser.add_argument("--weight-only", action="store_true",
                        help="W8A16 instead of W8A8 with static scales")
    arguments = parser.parse_args()
    result = run(arguments.tiny,
                 None if arguments.weight_only else "e4m3")
    for key, value in result.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
