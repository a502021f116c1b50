"""fp8q.torch.Linear: an nn.Linear whose weight is FP8 with float32
dequantization scales, computed by one fp8q._C call per forward, or by
fp8q's custom operators (torch.ops.fp8q, fp8q.torch._ops) when traced or
differentiated."""
import torch

from fp8q.torch import _checks, _ops

# Names accepted for the FP8 formats of weights and activations.
FORMATS = {"e4m3": torch.float8_e4m3fn, "float8_e4m3fn": torch.float8_e4m3fn,
           "e5m2": torch.float8_e5m2, "float8_e5m2": torch.float8_e5m2}
# Buffers that keep their dtype when the module's dtype changes.
STORAGE_BUFFERS = ("weight", "weight_scale", "input_scale")


def parse_format(value, argument):
    """The torch FP8 dtype for "e4m3" / "e5m2" (or their full names)."""
    if value not in FORMATS:
        raise ValueError(f"{argument}: expected \"e4m3\" or \"e5m2\", got "
                         f"{value!r}")
    return FORMATS[value]


def _keeping_dtype(fn, tensor):
    """fn(tensor) when fn keeps the dtype (a move, pinning, sharing), else
    tensor moved to the device fn would put it on: a dtype conversion
    (module.to(dtype), .half(), .bfloat16(), .float()) never touches FP8
    codes or float32 scales. fn is probed on an empty tensor first, so the
    weight is never converted, not even temporarily."""
    probe = fn(tensor.new_empty(0))
    if probe.dtype == tensor.dtype:
        return fn(tensor)
    return tensor.to(probe.device)


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
    runs on PyTorch's current stream there, and the result comes from
    torch's allocator). Eagerly it is one call into fp8q._C; under
    torch.compile and torch.export, for tensor subclasses and when x
    requires grad, it goes through the custom operators
    torch.ops.fp8q.linear_weight_only / linear_fp8 (one opaque op per
    layer), which compute the same bits. With activations=None
    (weight-only) the weight is dequantized into x's dtype and torch
    multiplies; with activations="e4m3", x is quantized to e4m3fn — with
    input_scale when set (static, per tensor), else dynamically per token
    (1x128 blocks for block weights) — and fp8q.scaled_mm's product
    computes the FP8 GEMM, exactly as fp8q.linear would (on a GPU:
    cuBLASLt's FP8 GEMM on sm_89+, the emulated bfloat16 one below). The result has x's dtype and shape (..., out_features). A
    token holding NaN or infinity gives NaN in its row of the result (as
    the float layer would); forward never raises for non-finite values.

    Gradients reach x and the bias (when they require grad): grad_x =
    grad_y @ W with W the weight dequantized into grad_y's dtype (straight
    through the activation quantization of W8A8), grad_bias = grad_y summed
    over the tokens; the FP8 weight and the scales are buffers and never
    train. So adapters (LoRA) and anything upstream of the layer can train.

    Dtype conversions of the module (.to(dtype), .half(), .bfloat16(),
    .float()) convert the bias only: the FP8 weight and the float32
    weight_scale and input_scale keep their dtypes, and the compute and
    output dtype follows x. Device moves (.to(device), .cuda(), .cpu())
    move every buffer.
    """

    def __init__(self, in_features, out_features, bias=True, *,
                 weights="e4m3", activations=None, granularity="row"):
        super().__init__()
        if granularity not in _ops.WEIGHT_GRANULARITIES:
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
        self.register_buffer("weight", torch.zeros(
            (out_features, in_features), dtype=weight_dtype))
        self.register_buffer("weight_scale", torch.ones(
            _ops.weight_scale_shape(out_features, in_features, granularity),
            dtype=torch.float32))
        self.register_buffer("bias", torch.zeros(out_features)
                             if bias else None)
        # Set by fp8q.torch.freeze, or by loading a frozen state dict.
        self.register_buffer("input_scale", None)

    @classmethod
    def from_linear(cls, linear, *, weights="e4m3", activations=None,
                    granularity="row"):
        """A Linear on `linear`'s device holding its weight quantized by
        torch.ops.fp8q.quantize_weight (exactly fp8q.quantize: per group,
        scale = float32(amax) / finfo.max) and its bias unchanged.
        ValueError naming the problem for NaN or infinity in the weight."""
        layer = cls(linear.in_features, linear.out_features,
                    bias=linear.bias is not None, weights=weights,
                    activations=activations, granularity=granularity)
        codes, scale = _ops.quantize_weight(
            linear.weight.detach(), layer.weight.dtype, granularity)
        layer.weight = codes
        layer.weight_scale = scale
        if linear.bias is not None:
            layer.bias = linear.bias.detach().clone()
        return layer.to(linear.weight.device)

    def extra_repr(self):
        return (f"in_features={self.in_features}, "
                f"out_features={self.out_features}, "
                f"bias={self.bias is not None}, weight={self.weight.dtype}, "
                f"granularity={self.granularity!r}, "
                f"activations={self.activations!r}")

    def _apply(self, fn, recurse=True):
        storage = {name: self._buffers[name] for name in STORAGE_BUFFERS
                   if self._buffers.get(name) is not None}
        converted = {name: _keeping_dtype(fn, tensor)
                     for name, tensor in storage.items()}
        for name in storage:  # hidden from torch's float conversion
            self._buffers[name] = None
        try:
            super()._apply(fn, recurse)
        finally:
            for name, tensor in storage.items():
                self._buffers[name] = tensor
        self._buffers.update(converted)
        return self

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
        self.input_scale = value.to(self.weight.device, copy=True)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata,
                              strict, missing_keys, unexpected_keys,
                              error_msgs):
        # Another weight format would load converted values, not codes:
        # torch's load_state_dict raises with this message, and nothing of
        # this layer loads.
        mismatch = _checks.weight_format_error(self, state_dict, prefix)
        if mismatch is not None:
            error_msgs.append(mismatch)
            return
        # A frozen checkpoint has input_scale: make room for it.
        if self.input_scale is None and prefix + "input_scale" in state_dict:
            self.set_input_scale(state_dict[prefix + "input_scale"])
        super()._load_from_state_dict(state_dict, prefix, local_metadata,
                                      strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def forward(self, x):
        if not self._eager_call_reads(x):
            return self._traced_forward(x)
        # Eager: one fp8q._C call (the custom operator's own computation,
        # without its Python dispatch); x's dtype, device and shape are
        # checked there.
        buffers = self._buffers
        try:
            if self.activations is None:
                return _ops.weight_only_forward(
                    x, buffers["weight"], buffers["weight_scale"],
                    self._bias(), self.granularity)
            return _ops.fp8_forward(x, buffers["weight"],
                                    buffers["weight_scale"], self._bias(),
                                    buffers["input_scale"], self.granularity)
        except (ValueError, RuntimeError):
            # A failed call explains a wrong shape as nn.Linear would (the
            # try block is free on the way through from Python 3.11 on).
            shape_error = _checks.input_shape_error(self, x)
            if shape_error is not None:
                raise shape_error from None
            raise

    def _bias(self):
        """The bias: a buffer, or a Parameter once made trainable, or None
        (read from the module's dicts: nn.Module.__getattr__ costs 0.4 us
        per call)."""
        bias = self._buffers.get("bias")
        return bias if bias is not None else self._parameters.get("bias")

    def _eager_call_reads(self, x):
        """Whether the one-call path may read x: a plain CPU or CUDA tensor
        with no negative bit (DLPack cannot express it), outside
        torch.compile, torch.jit.trace and functorch transforms (vmap,
        grad), and no gradient to record. Everything else goes through the
        custom operators, which these tools see."""
        # is_compiling() first: under torch.compile the rest is not traced.
        if (torch.compiler.is_compiling() or type(x) is not torch.Tensor
                or not (x.is_cpu or x.is_cuda) or x.is_neg()
                or torch.jit.is_tracing()
                or torch._C._are_functorch_transforms_active()):
            return False
        if not torch.is_grad_enabled():
            return True
        bias = self._bias()
        return not (x.requires_grad
                    or (bias is not None and bias.requires_grad))

    def _traced_forward(self, x):
        """forward through the custom operators: what torch.compile,
        torch.export, torch.jit.trace, functorch, tensor subclasses, the
        meta device and autograd see."""
        if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise TypeError("fp8q.torch.Linear: x must be float32, float16 "
                            f"or bfloat16, got {x.dtype}")
        shape_error = _checks.input_shape_error(self, x)
        if shape_error is not None:
            raise shape_error
        if self.activations is None:
            return _ops.linear_weight_only(x, self.weight, self.weight_scale,
                                           self.bias, self.granularity)
        return _ops.linear_fp8(x, self.weight, self.weight_scale, self.bias,
                               self.input_scale, self.granularity)
