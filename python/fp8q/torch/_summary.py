"""What fp8q.torch.quantize did to a model, in numbers: the Linear layers it
quantized, the modules it left in float by kind, and the bytes of the
model's weights before and after."""
import dataclasses

import torch


@dataclasses.dataclass(frozen=True)
class QuantizeSummary:
    """quantized: nn.Linear modules replaced by fp8q.torch.Linear in this
    call. already_quantized: fp8q.torch.Linear modules the call's patterns
    matched that had the same settings already (left as they were).
    left_in_float: {class name: count} of the other modules that hold
    floating-point parameters or buffers of their own (Embedding,
    LayerNorm, Conv2d, and nn.Linear modules that include / exclude left
    out). weight_bytes_before / weight_bytes_after: bytes of all the
    model's parameters and buffers (each tensor once) before and after.
    fused_norms: qualified names of the norms fused with the per-token
    quantize of their output (quantize(..., fuse_norms=True)), in model
    order. unfused_norms: (qualified name, reason) for each norm in the
    fused pattern's place that stayed unfused (the reason says why: a
    following layer that is not W8A8 per-token, a norm fp8q does not
    compute, a probe that failed). str() gives one line for a log or a
    notebook."""

    quantized: int
    already_quantized: int
    left_in_float: dict
    weight_bytes_before: int
    weight_bytes_after: int
    fused_norms: tuple = ()
    unfused_norms: tuple = ()

    def __str__(self):
        left = ", ".join(f"{count} {kind}" for kind, count
                         in sorted(self.left_in_float.items())) or "nothing"
        already = (f" ({self.already_quantized} already were)"
                   if self.already_quantized else "")
        fused = (f"; norms fused with the activation quantize: "
                 f"{len(self.fused_norms)} ({', '.join(self.fused_norms)})"
                 if self.fused_norms else "")
        unfused = (f"; norms left unfused: {len(self.unfused_norms)} ("
                   + "; ".join(f"{name}: {reason}"
                               for name, reason in self.unfused_norms)
                   + ")" if self.unfused_norms else "")
        return (f"fp8q.torch.quantize: {self.quantized} Linear layers "
                f"quantized{already}; left in float: {left}; weights "
                f"{_mib(self.weight_bytes_before)} -> "
                f"{_mib(self.weight_bytes_after)}{fused}{unfused}")


def _mib(count):
    return f"{count / 2 ** 20:.2f} MiB"


def weight_bytes(model):
    """Bytes of model's parameters and buffers, each tensor counted once
    (tied weights share one)."""
    tensors = {id(t): t for t in (*model.parameters(), *model.buffers())}
    return sum(t.numel() * t.element_size() for t in tensors.values())


def float_modules(model, skip):
    """{class name: count} of model's modules that hold floating-point
    parameters or buffers of their own, except those whose type is one of
    `skip`."""
    counts = {}
    for module in model.modules():
        if isinstance(module, skip):
            continue
        own = (*module.parameters(recurse=False),
               *module.buffers(recurse=False))
        if any(t.is_floating_point() for t in own):
            kind = type(module).__name__
            counts[kind] = counts.get(kind, 0) + 1
    return counts
