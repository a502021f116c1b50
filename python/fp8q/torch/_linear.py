"""fp8q.torch.Linear: an nn.Linear whose weight is FP8 with float32
dequantization scales, computed through fp8q (inference only)."""
import torch

import fp8q
from fp8q.torch._convert import current_stream, from_torch, to_torch

# granularity argument -> fp8q.quantize granularity of the weight.
WEIGHT_GRANULARITIES = {"row": "row", "tensor": "tensor",
                        "block": (128, 128)}
# Names accepted for the FP8 formats of weights and activations.
FORMATS = {"e4m3": "float8_e4m3fn", "float8_e4m3fn": "float8_e4m3fn",
           "e5m2": "float8_e5m2", "float8_e5m2": "float8_e5m2"}


def dtype_name(dtype):
    """fp8q's name of a torch dtype ("float32", "float8_e4m3fn", ...)."""
    return str(dtype).split(".")[-1]


def parse_format(value, argument):
    """The fp8q dtype name for "e4m3" / "e5m2" (or their full names)."""
    if value not in FORMATS:
        raise ValueError(f"{argument}: expected \"e4m3\" or \"e5m2\", got "
                         f"{value!r}")
    return FORMATS[value]


class _InferenceOnly(torch.autograd.Function):
    """Runs the layer; a backward pass through it raises."""

    @staticmethod
    def forward(ctx, x, layer):
        return layer._compute(x)

    @staticmethod
    def backward(ctx, grad_output):
        raise RuntimeError(
            "fp8q.torch.Linear is inference-only: it has no backward pass "
            "(run the model under torch.no_grad() or torch.inference_mode(), "
            "or train the float model and quantize it afterwards)")


class Linear(torch.nn.Module):
    """y = x @ dequantize(weight).T + bias with an FP8 weight.

    Buffers (the names and layout FP8 checkpoints use, e.g. vLLM's and
    compressed-tensors'): `weight` (out_features, in_features) in
    torch.float8_e4m3fn or float8_e5m2; `weight_scale`, float32
    dequantization scales (weight ~= weight * weight_scale): shape
    (out_features, 1) for "row", () for "tensor", (ceil(N/128), ceil(K/128))
    for "block"; `bias` (float, or None); `input_scale`, a float32 () static
    activation scale once fp8q.torch.freeze has set it (absent before, and
    with activations=None).

    forward(x): x (..., in_features) float32, float16 or bfloat16 on the
    layer's device (the CPU, or a GPU after model.to("cuda"); fp8q's work
    runs on PyTorch's current stream there). With activations=None
    (weight-only) the weight is dequantized into x's dtype and torch
    multiplies; with activations="e4m3", x is quantized to e4m3fn — with
    input_scale when set (static, per tensor), else dynamically per token
    (1x128 blocks for block weights) — and fp8q.linear computes the FP8
    product (on a GPU: cuBLASLt's FP8 GEMM on sm_89+, the emulated bfloat16
    one below). The result has x's dtype and shape (..., out_features).
    Inference only: a backward pass raises RuntimeError.
    """

    def __init__(self, in_features, out_features, bias=True, *,
                 weights="e4m3", activations=None, granularity="row"):
        super().__init__()
        if granularity not in WEIGHT_GRANULARITIES:
            raise ValueError("granularity: expected \"row\", \"tensor\" or "
                             f"\"block\", got {granularity!r}")
        weight_dtype = parse_format(weights, "weights")
        if activations not in (None, "e4m3", "float8_e4m3fn"):
            raise ValueError("activations: expected None (weight-only) or "
                             f"\"e4m3\", got {activations!r}")
        self.activations = (None if activations is None
                            else "float8_e4m3fn")
        self.in_features = in_features
        self.out_features = out_features
        self.granularity = granularity
        scale_shape = {"row": (out_features, 1), "tensor": (),
                       "block": (-(-out_features // 128),
                                 -(-in_features // 128))}[granularity]
        self.register_buffer("weight", torch.zeros(
            (out_features, in_features), dtype=getattr(torch, weight_dtype)))
        self.register_buffer("weight_scale",
                             torch.ones(scale_shape, dtype=torch.float32))
        self.register_buffer("bias", torch.zeros(out_features)
                             if bias else None)
        # Set by fp8q.torch.freeze, or by loading a frozen state dict.
        self.register_buffer("input_scale", None)

    @classmethod
    def from_linear(cls, linear, *, weights="e4m3", activations=None,
                    granularity="row"):
        """A Linear holding `linear`'s weight quantized by fp8q.quantize
        (scales from each group's amax: float32(amax) / finfo.max) and its
        bias unchanged."""
        layer = cls(linear.in_features, linear.out_features,
                    bias=linear.bias is not None, weights=weights,
                    activations=activations, granularity=granularity)
        q = fp8q.quantize(from_torch(linear.weight.detach().cpu()),
                          dtype_name(layer.weight.dtype),
                          granularity=WEIGHT_GRANULARITIES[granularity])
        layer.weight.copy_(to_torch(q.data))
        layer.weight_scale.copy_(to_torch(q.scale))
        if linear.bias is not None:
            layer.bias = linear.bias.detach().clone()
        # On the device of the layer it replaces.
        return layer.to(linear.weight.device)

    def extra_repr(self):
        return (f"in_features={self.in_features}, "
                f"out_features={self.out_features}, "
                f"bias={self.bias is not None}, weight={self.weight.dtype}, "
                f"granularity={self.granularity!r}, "
                f"activations={self.activations!r}")

    def _quantized_weight(self):
        return fp8q.QTensor(from_torch(self.weight),
                            from_torch(self.weight_scale),
                            WEIGHT_GRANULARITIES[self.granularity])

    def _compute(self, x):
        if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise TypeError("fp8q.torch.Linear: x must be float32, float16 "
                            f"or bfloat16, got {x.dtype}")
        if x.device != self.weight.device:
            raise ValueError(f"fp8q.torch.Linear: x is on {x.device} but the "
                             f"layer's weight is on {self.weight.device}")
        stream = current_stream(x)
        weight = self._quantized_weight()
        if self.activations is None:
            dequantized = to_torch(weight.dequantize(dtype_name(x.dtype),
                                                     stream=stream))
            return torch.nn.functional.linear(
                x, dequantized, None if self.bias is None
                else self.bias.to(x.dtype))
        source = from_torch(x.contiguous())
        if self.input_scale is not None:  # static, per tensor
            source = fp8q.quantize(
                source.reshape(-1, self.in_features), self.activations,
                scale=from_torch(self.input_scale), stream=stream)
        bias = None if self.bias is None else from_torch(self.bias)
        y = fp8q.linear(source, weight, bias=bias,
                        out_dtype=dtype_name(x.dtype), stream=stream)
        return to_torch(y).reshape(*x.shape[:-1], self.out_features)

    def set_input_scale(self, scale):
        """Makes activations static: x is quantized with this float32
        dequantization scale (finite, > 0) instead of per token. Needs
        activations="e4m3" and row or tensor weight scales (a per-tensor
        activation scale has no pairing with 128x128 weight blocks)."""
        if self.activations is None:
            raise ValueError("set_input_scale: this layer keeps activations "
                             "in floating point (activations=None)")
        if self.granularity == "block":
            raise ValueError(
                "set_input_scale: static per-tensor activation scales need "
                "\"row\" or \"tensor\" weight scales, this layer has "
                "\"block\" ones (keep its activations dynamic)")
        value = torch.as_tensor(scale, dtype=torch.float32).reshape(())
        if not (torch.isfinite(value) and value > 0):
            raise ValueError(f"set_input_scale: expected a finite scale > 0, "
                             f"got {float(value)}")
        self.input_scale = value.clone()

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # A frozen checkpoint has input_scale: make room for it.
        if self.input_scale is None and prefix + "input_scale" in state_dict:
            self.set_input_scale(state_dict[prefix + "input_scale"])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, x):
        if torch.is_grad_enabled() and x.requires_grad:
            return _InferenceOnly.apply(x, self)
        return self._compute(x)
