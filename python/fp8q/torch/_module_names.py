"""How a list of module names covers a module: the one matching rule for
the names fp8q keeps in float (a quantization config's
modules_to_not_convert, a transformers model's _keep_in_fp32_modules)."""


def covered(name, fragments):
    """Whether a name in `fragments` covers the module `name`, as whole
    dotted parts: "lm_head" covers "lm_head", "mlp" covers
    "layers.0.mlp.up_proj", "wo" covers "block.0.layer.1.DenseReluDense.wo"
    (but "w" does not)."""
    return any(f".{fragment}." in f".{name}." for fragment in fragments)
