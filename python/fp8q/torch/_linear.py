"""fp8q.torch.Linear: an nn.Linear whose weight is FP8 with float32
dequantization scales, computed by one fp8q._C call per forward, or by
fp8q's custom operators (torch.ops.fp8q, fp8q.torch._ops) when traced or
differentiated.

It subclasses torch.nn.Linear, and its FP8 weight and scales are
parameters that never require grad (as optimum-quanto and bitsandbytes
store theirs; scalar scales are buffers, as FSDP2 refuses scalar
parameters), so the tools that find linear layers (peft, torch's tensor
parallel styles) or move parameters (accelerate's offloading and
dispatch, DDP, FSDP2) treat it as one. What nn.Linear would do to a float
weight is kept away from the FP8 codes: dtype conversions keep them,
reset_parameters quantizes a fresh float initialisation, and a weight or
scale set with another dtype (weight tying to a float tensor, a loader's
dtype= conversion) is refused."""
import warnings

import torch

from fp8q.torch import (_checks, _fused_norm, _ops, _row_quantize,
                        _tensor_parallel)

# Names accepted for the FP8 formats of weights and activations.
FORMATS = {"e4m3": torch.float8_e4m3fn, "float8_e4m3fn": torch.float8_e4m3fn,
           "e5m2": torch.float8_e5m2, "float8_e5m2": torch.float8_e5m2}
# The tensors that keep their dtype when the module's dtype changes.
STORAGE = ("weight", "weight_scale", "input_scale")
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
# The dtypes compute_dtype follows (not an FP8 storage dtype, as diffusers'
# layerwise casting converts modules to between calls).
COMPUTE_DTYPES = (torch.float16, torch.bfloat16, torch.float32,
                  torch.float64)


def parse_format(value, argument):
    """The torch FP8 dtype for "e4m3" / "e5m2" (or their full names)."""
    if value not in FORMATS:
        raise ValueError(f"{argument}: expected \"e4m3\" or \"e5m2\", got "
                         f"{value!r}")
    return FORMATS[value]


def check_granularity(value):
    """ValueError unless value is "row", "tensor" or "block"."""
    if value not in _ops.WEIGHT_GRANULARITIES:
        raise ValueError("granularity: expected \"row\", \"tensor\" or "
                         f"\"block\", got {value!r}")


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


def _storage_parameter(tensor):
    """tensor as a parameter that never requires grad."""
    return torch.nn.Parameter(tensor, requires_grad=False)


class _StorageDict(dict):
    """A Linear's _parameters and _buffers: a tensor given for the FP8
    weight (which must have an FP8 dtype) or a scale (float32) with another
    dtype is refused, whoever sets it: attribute assignment (weight tying:
    transformers' tie_weights sets lm_head.weight to the input embeddings'
    float weight), register_parameter / register_buffer, or a loader
    writing the dict itself (accelerate's set_module_tensor_to_device with
    dtype=, which converts every floating tensor). A float weight cannot
    stand for the codes and converted scales have lost bits, so nothing
    can be repaired there: the error names the layer (`layer`: its
    qualified name, `name`, once fp8q.torch.quantize has set it), the ways
    such a tensor gets there and the fix for each. `holds_fp8` False lifts
    the rule for a subclass that keeps a float weight for a while
    (quanto_compat's QLinear before freeze())."""

    layer = "fp8q.torch.Linear"
    name = None
    holds_fp8 = True

    def __setitem__(self, name, value):
        if value is not None and name in STORAGE and self.holds_fp8:
            expected = (FP8_DTYPES if name == "weight"
                        else (torch.float32,))
            if value.dtype not in expected:
                raise ValueError(self._refusal(name, value, expected))
        super().__setitem__(name, value)

    def _refusal(self, name, value, expected):
        """The message refusing `value` for storage tensor `name`."""
        head = (f"{self.layer}: {name} must stay "
                f"{' or '.join(map(str, expected))}, got {value.dtype} "
                f"(shape {tuple(value.shape)}). ")
        reload = ("load FP8 checkpoints without a dtype and convert the "
                  "model afterwards with model.to(dtype), which keeps FP8 "
                  "weights and scales")
        if name != "weight":
            return head + (
                f"A {value.dtype} tensor is replacing its float32 scales: "
                "a loader converting every floating tensor (accelerate's "
                "load_checkpoint_and_dispatch(dtype=...)) or an assignment "
                f"did it; {reload}, and give scales in float32")
        layer = repr(self.name) if self.name is not None else "'<layer>'"
        return head + (
            f"A {value.dtype} tensor is replacing its FP8 weight, which "
            "holds FP8 codes with separate scales, so it cannot take a "
            "float tensor. One gets there by weight tying "
            "(model.tie_weights(), tie_word_embeddings=True: the output "
            "layer takes the input embeddings' weight), by resizing "
            "(resize_token_embeddings) or assigning a float weight, or by "
            "a loader converting every floating tensor (accelerate's "
            "load_checkpoint_and_dispatch(dtype=...)). Keep this layer in "
            f"float (fp8q.torch.quantize(model, exclude=[{layer}])) or "
            f"tie / resize before quantizing; for a loader, {reload}")


# Whether Linear._warn_trainable_weight has warned (once per process).
_warned_trainable_weight = False


def _decomposition_compiles(x):
    """Whether a compiled layer may quantize x with
    torch.ops.fp8q.quantize_rows's decomposition on x's device
    (_row_quantize.decomposition_compiles: not on CUDA GPUs below compute
    capability 8.9, where Triton has no float8_e4m3fn conversion)."""
    return _row_quantize.decomposition_compiles(x.device.type,
                                                x.device.index)


def _autocast_input(x):
    """A float x in the autocast dtype of its device when autocast is on
    there (torch.autocast: nn.Linear computes in that dtype, so the layer
    takes x in it and returns it), else x."""
    try:
        enabled = torch.is_autocast_enabled(x.device.type)
    except RuntimeError:  # a device autocast does not know (meta)
        return x
    if not enabled or not x.is_floating_point():
        return x
    return x.to(torch.get_autocast_dtype(x.device.type))


def _input_scale_problem(value):
    """What keeps a state dict's input_scale from being a layer's static
    activation scale (a float32 () buffer), in words, or None: not a
    tensor, a shape torch's loading would not copy into a () buffer (it
    takes () and, for old checkpoints, (1,)), or a value that is not
    finite and > 0 as float32."""
    if not isinstance(value, torch.Tensor):
        return f"expected a tensor, got {type(value).__name__}"
    if value.shape not in ((), (1,)):
        return (f"expected a single scale, shape () (the layer's "
                f"input_scale), got shape {tuple(value.shape)}")
    return _checks.scale_problem(value.detach().to(torch.float32))


class Linear(torch.nn.Linear):
    """y = x @ dequantize(weight).T + bias with an FP8 weight.

    Tensors (the names and layout FP8 checkpoints use, e.g. vLLM's and
    compressed-tensors'): `weight` (out_features, in_features) in
    torch.float8_e4m3fn or float8_e5m2; `weight_scale`, float32
    dequantization scales (weight ~= weight * weight_scale): shape
    (out_features, 1) for "row", () for "tensor", (ceil(N/128), ceil(K/128))
    for "block"; `bias` (float, or None); `input_scale`, a float32 () static
    activation scale once fp8q.torch.freeze has set it (absent before, and
    with activations=None). weight, bias and non-scalar weight scales are
    torch.nn.Parameter with requires_grad=False, so tools that move
    parameters (accelerate's offloading and dispatch, FSDP2, DDP) move them
    and no optimizer changes them; `layer.bias.requires_grad_(True)` makes
    the bias train. The scalar scales ("tensor" weight_scale, input_scale)
    are buffers: FSDP2 refuses scalar parameters, and 4 bytes need no
    offloading. Setting the weight or a scale to a tensor of another dtype
    raises ValueError.

    Linear(in_features, out_features, bias=True, *, weights="e4m3",
    activations=None, granularity="row", device=None, dtype=None) holds
    zero codes and unit scales (load a state dict, or use from_linear /
    from_fp8); device and dtype (the bias's) are nn.Linear's arguments.

    It is a torch.nn.Linear subclass, so peft, torch's tensor parallel
    styles and accelerate take it for a linear layer. `compute_dtype` is
    the float dtype the layer was built with or last converted to (the
    source nn.Linear's, then module.to(dtype)'s, FP8 storage dtypes
    aside): what peft gives the LoRA adapters it adds. reset_parameters()
    draws a float weight and bias as nn.Linear does and quantizes the
    weight with the layer's format and granularity.

    forward(x): x (..., in_features) float32, float16 or bfloat16 on the
    layer's device (the CPU, or a GPU after model.to("cuda"); fp8q's work
    runs on PyTorch's current stream there, and the result comes from
    torch's allocator). Eagerly it is one call into fp8q._C; under
    torch.compile and torch.export, for tensor subclasses (DTensor) and
    when x requires grad, it goes through the custom operators
    torch.ops.fp8q.linear_weight_only / linear_fp8 (one opaque op per
    layer), which compute the same bits; under torch.compile /
    torch.export a W8A8 layer ("row" weights, or "tensor" ones without
    input_scale) quantizes x with torch.ops.fp8q.quantize_rows (torch
    ops Inductor fuses into the kernel producing x) and multiplies with
    torch.ops.fp8q.linear_fp8_quantized, the same bits again. With activations=None
    (weight-only) the weight is dequantized into x's dtype and torch
    multiplies; with activations="e4m3", x is quantized to e4m3fn — with
    input_scale when set (static, per tensor), else dynamically per token
    (1x128 blocks for block weights) — and fp8q.scaled_mm's product
    computes the FP8 GEMM, exactly as fp8q.linear would (on a GPU:
    cuBLASLt's FP8 GEMM on sm_89+, the emulated bfloat16 one below), except
    that on a GPU up to a crossover token count (4 with FP8 tensor cores,
    16 without; FP8Q_CUDA_FP8_LAYER_PATH forces either product) the
    weight-only product computes it from x unquantized (docs/torch.md,
    "Which product runs"). The result has x's dtype and shape (...,
    out_features). A token holding NaN or infinity gives NaN in its row of
    the result (the weight-only product: NaN or +-inf, as the float layer
    would); forward never raises for non-finite values.

    Gradients reach x and the bias (when they require grad): grad_x =
    grad_y @ W with W the weight dequantized into grad_y's dtype (straight
    through the activation quantization of W8A8), grad_bias = grad_y summed
    over the tokens; the FP8 weight and the scales never train. So adapters
    (LoRA) and anything upstream of the layer can train.

    Dtype conversions of the module (.to(dtype), .half(), .bfloat16(),
    .float()) convert the bias only: the FP8 weight and the float32
    weight_scale and input_scale keep their dtypes, and the compute and
    output dtype follows x. Device moves (.to(device), .cuda(), .cpu())
    move every parameter.

    reads_quantized_input (False; fp8q.torch.quantize(...,
    fuse_norms=True) sets it on the layers after a fused norm): the eager
    W8A8 forward takes x's codes and row scales from the fused norm that
    produced x (fp8q.torch._fused_norm) instead of quantizing x, the same
    bits either way, while input_scale is None (a static input_scale, from
    freeze or a state_dict, quantizes x with it as in any other layer).
    """

    reads_quantized_input = False

    def __init__(self, in_features, out_features, bias=True, *,
                 weights="e4m3", activations=None, granularity="row",
                 device=None, dtype=None):
        # nn.Linear.__init__ would allocate and initialise a float weight.
        torch.nn.Module.__init__(self)
        self.__dict__["_parameters"] = _StorageDict()
        self.__dict__["_buffers"] = _StorageDict()
        check_granularity(granularity)
        weight_dtype = parse_format(weights, "weights")
        if activations not in (None, "e4m3", "float8_e4m3fn"):
            raise ValueError("activations: expected None (weight-only) or "
                             f"\"e4m3\", got {activations!r}")
        self.activations = (None if activations is None
                            else "float8_e4m3fn")
        self.in_features = in_features
        self.out_features = out_features
        self.granularity = granularity
        self.compute_dtype = dtype or torch.get_default_dtype()
        # The bias first: tools that take a model's dtype from its first
        # floating parameter (diffusers' ModelMixin.dtype) find it before
        # the FP8 weight. state_dict() is by name, so the order is free.
        self.register_parameter("bias", _storage_parameter(torch.zeros(
            out_features, dtype=self.compute_dtype, device=device))
            if bias else None)
        self.weight = _storage_parameter(torch.zeros(
            (out_features, in_features), dtype=weight_dtype, device=device))
        scale = torch.ones(
            _ops.weight_scale_shape(out_features, in_features, granularity),
            dtype=torch.float32, device=device)
        if scale.dim() == 0:
            self.register_buffer("weight_scale", scale)
        else:
            self.weight_scale = _storage_parameter(scale)
        # Set by fp8q.torch.freeze, or by loading a frozen state dict.
        self.register_buffer("input_scale", None)

    @classmethod
    def from_fp8(cls, weight, weight_scale, bias=None, *, input_scale=None,
                 activations=None, granularity="row"):
        """A Linear holding these tensors themselves (no copy): `weight`,
        FP8 codes (out_features, in_features) in float8_e4m3fn or
        float8_e5m2; `weight_scale`, float32 dequantization scales of the
        shape `granularity` gives (see the class); `bias` (out_features,)
        float, or None; `input_scale`, a float32 static activation scale
        (activations="e4m3" only), or None. compute_dtype is the bias's
        dtype (float32 without one). ValueError naming the argument for a
        wrong dtype or shape, for a weight_scale or input_scale value that
        is not finite and > 0, and for NaN codes in the weight (infinite
        ones too in float8_e5m2), which would make the outputs NaN."""
        if weight.dtype not in FP8_DTYPES or weight.dim() != 2:
            raise ValueError(f"from_fp8: weight must be a 2-D float8_e4m3fn "
                             f"or float8_e5m2 tensor, got {weight.dtype} "
                             f"with shape {tuple(weight.shape)}")
        problem = _checks.storage_problem(weight, weight_scale)
        if problem is not None:
            raise ValueError(f"from_fp8: {problem[0]}: {problem[1]}")
        return cls._holding(weight, weight_scale, bias, input_scale,
                            activations, granularity)

    @classmethod
    def _holding(cls, weight, weight_scale, bias, input_scale, activations,
                 granularity):
        """from_fp8 without the checks of the codes' and the weight
        scales' values (for codes and scales fp8q computed itself)."""
        out_features, in_features = weight.shape
        layer = cls(in_features, out_features, bias=bias is not None,
                    weights=str(weight.dtype).removeprefix("torch."),
                    activations=activations, granularity=granularity,
                    device="meta",
                    dtype=None if bias is None else bias.dtype)
        layer._set_storage(weight, weight_scale, bias)
        if input_scale is not None:
            layer.set_input_scale(input_scale)
        return layer

    @classmethod
    def from_linear(cls, linear, *, weights="e4m3", activations=None,
                    granularity="row"):
        """A Linear on `linear`'s device holding its weight quantized by
        torch.ops.fp8q.quantize_weight (exactly fp8q.quantize: per group,
        scale = float32(amax) / finfo.max) and its bias unchanged;
        compute_dtype is linear's weight's dtype. ValueError naming the
        problem for NaN or infinity in the weight, and for a linear that
        is already an fp8q.torch.Linear (quantizing twice would round
        twice); TypeError for a weight that is not float32, float16 or
        bfloat16 (float64, say)."""
        if isinstance(linear, Linear):
            raise ValueError("from_linear: this layer is already an "
                             "fp8q.torch.Linear (its weight holds FP8 codes)")
        check_granularity(granularity)
        if linear.weight.dtype not in (torch.float32, torch.float16,
                                       torch.bfloat16):
            raise TypeError(
                f"from_linear: the weight is {linear.weight.dtype}; fp8q "
                "quantizes float32, float16 and bfloat16 weights (convert "
                "the layer first, e.g. model.float())")
        codes, scale = _ops.quantize_weight(
            linear.weight.detach(), parse_format(weights, "weights"),
            granularity)
        layer = cls._holding(
            codes, scale, None if linear.bias is None
            else linear.bias.detach().clone(), None, activations,
            granularity)
        layer.compute_dtype = linear.weight.dtype
        return layer

    def set_name(self, name):
        """Records the layer's qualified name in the model (as
        model.named_modules() gives it) for its error messages: a loader
        converting its FP8 weight, a state dict it refuses, and every error
        its forward raises (the same exception, the name put in front of
        its message: fp8q.torch._checks.name_error). fp8q.torch.quantize
        and load_checkpoint call it."""
        self.qualified_name = name
        self._parameters.layer = self._buffers.layer = (
            f"fp8q.torch.Linear {name!r}")
        self._parameters.name = self._buffers.name = name

    def _set_storage(self, weight, weight_scale, bias):
        """Replaces the weight, its scales and the bias (shapes checked
        against the layer's) by these tensors: parameters that do not
        require grad, or buffers where the layer has them."""
        expected = {"weight": self.weight, "weight_scale": self.weight_scale,
                    "bias": self.bias}
        given = {"weight": weight, "weight_scale": weight_scale,
                 "bias": bias}
        for name, tensor in given.items():
            shape, wanted = (None if t is None else tuple(t.shape)
                             for t in (tensor, expected[name]))
            if shape != wanted:
                raise ValueError(f"from_fp8: {name} has shape {shape}, "
                                 f"expected {wanted} (granularity "
                                 f"{self.granularity!r})")
            if name in self._buffers:
                self._buffers[name] = tensor
            elif tensor is not None:
                setattr(self, name, _storage_parameter(tensor))

    def reset_parameters(self):
        """Draws a float weight and bias as torch.nn.Linear does
        (kaiming-uniform weight, uniform bias, in float32 on the layer's
        device) and stores the weight quantized with the layer's format and
        granularity: the FP8 counterpart of nn.Linear's initialisation, for
        the tools that call it (meta-device initialisation). input_scale,
        if any, is kept."""
        float_layer = torch.nn.Linear(self.in_features, self.out_features,
                                      bias=self.bias is not None,
                                      device=self.weight.device,
                                      dtype=torch.float32)
        codes, scale = _ops.quantize_weight(
            float_layer.weight.detach(), self.weight.dtype, self.granularity)
        bias = (None if self.bias is None
                else float_layer.bias.detach().to(self.bias.dtype))
        self._set_storage(codes, scale, bias)

    def __prepare_scriptable__(self):
        """torch.jit.script calls this first: refused with a clear message
        (TorchScript cannot compile the forward's Python)."""
        raise RuntimeError(
            f"{_checks.describe(self)}: torch.jit.script cannot compile "
            "fp8q.torch.Linear's forward (Python that TorchScript does not "
            "support); use torch.jit.trace, torch.export or torch.compile, "
            "which record its custom operators (torch.ops.fp8q.*)")

    def extra_repr(self):
        return (f"in_features={self.in_features}, "
                f"out_features={self.out_features}, "
                f"bias={self.bias is not None}, weight={self.weight.dtype}, "
                f"granularity={self.granularity!r}, "
                f"activations={self.activations!r}")

    def _apply(self, fn, recurse=True):
        # torch's own _apply (Parameter identity, swap_tensors, grads) with
        # fn kept from converting the dtype of the weight and the scales.
        # (A float weight, holds_fp8 False, converts as nn.Linear's.)
        kept = STORAGE if self._parameters.holds_fp8 else STORAGE[1:]
        storage = {id(tensor) for tensors in (self._parameters,
                                              self._buffers)
                   for name, tensor in tensors.items()
                   if name in kept and tensor is not None}
        probe = fn(torch.empty(0, dtype=self.compute_dtype))
        if probe.dtype in COMPUTE_DTYPES:
            self.compute_dtype = probe.dtype
        return super()._apply(
            lambda tensor: (_keeping_dtype(fn, tensor)
                            if id(tensor) in storage else fn(tensor)),
            recurse)

    @property
    def _takes_input_scale(self):
        """Whether the layer can hold a static input_scale: FP8 activations
        and "row" or "tensor" weight scales (set_input_scale's rule)."""
        return self.activations is not None and self.granularity != "block"

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
        # Scales that are not finite and > 0, or NaN codes: nothing of this
        # layer loads either. An input_scale counts for a layer that takes
        # one or holds one (quanto_compat's QLinear always does); for
        # another (weight-only, block scales) it is a key torch's loading
        # reports as unexpected (strict) or skips.
        key = prefix + "input_scale"
        problem = _checks.storage_problem(
            state_dict.get(prefix + "weight"),
            state_dict.get(prefix + "weight_scale"))
        if (problem is None and key in state_dict
                and (self._takes_input_scale
                     or self.input_scale is not None)):
            problem = _input_scale_problem(state_dict[key])
            if problem is not None:
                problem = ("input_scale", problem)
        if problem is not None:
            error_msgs.append(f"{_checks.describe(self)}: state_dict"
                              f"[{prefix + problem[0]!r}]: {problem[1]}")
            return
        # A frozen checkpoint has input_scale: make room for it.
        if (self._takes_input_scale and self.input_scale is None
                and key in state_dict):
            self.set_input_scale(state_dict[key])
        super()._load_from_state_dict(state_dict, prefix, local_metadata,
                                      strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def forward(self, input):  # noqa: A002 (nn.Linear's argument name)
        """input @ W.T + bias, as nn.Linear.forward computes it (and named:
        forward(input=x) works), with the FP8 weight; see the class.
        Under torch.autocast a float input is taken in the autocast
        dtype, as nn.Linear computes (the result is in that dtype)."""
        # One C call (~0.2 us here) when autocast is off.
        if torch._C._is_any_autocast_enabled():
            input = _autocast_input(input)
        if not self._eager_call_reads(input):
            return self._traced_forward(input)
        # Eager: one fp8q._C call (the custom operator's own computation,
        # without its Python dispatch); input's dtype, device and shape are
        # checked there.
        # The tensors are read from the module's dicts:
        # nn.Module.__getattr__ costs 0.4 us per call.
        parameters, buffers = self._parameters, self._buffers
        try:
            weight_scale = (buffers if self.granularity == "tensor"
                            else parameters)["weight_scale"]
            if self.activations is None:
                return _ops.weight_only_forward(
                    input, parameters["weight"], weight_scale,
                    parameters["bias"], self.granularity)
            # A fused norm's per-token codes apply while the layer's
            # activations are dynamic: calibrate + freeze or a loaded
            # state_dict give it a static input_scale later.
            input_scale = buffers["input_scale"]
            return _ops.fp8_forward(
                input, parameters["weight"], weight_scale, parameters["bias"],
                input_scale, self.granularity,
                _fused_norm.quantized_input(input)
                if self.reads_quantized_input and input_scale is None
                else None)
        except Exception as error:
            # A failed call explains a wrong shape as nn.Linear would, and
            # names the layer (the try block is free on the way through
            # from Python 3.11 on).
            if isinstance(error, KeyError) and self._transformed_storage():
                # A parametrized or pruned bias (torch.nn.utils.parametrize
                # / prune) is no longer in _parameters: the operator path
                # reads it as an attribute (and refuses a transformed
                # weight or scale).
                return self._traced_forward(input)
            device_error = _checks.device_error(self, input)
            if device_error is not None:
                raise device_error from None
            if isinstance(error, (ValueError, RuntimeError)):
                shape_error = _checks.input_shape_error(self, input)
                if shape_error is not None:
                    raise shape_error from None
            _checks.name_error(self, error)
            raise

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
        parameters = self._parameters
        try:
            weight, bias = parameters["weight"], parameters["bias"]
        except KeyError:  # parametrized or pruned (_transformed_storage)
            return False
        if weight.requires_grad:
            self._warn_trainable_weight()
        return not (x.requires_grad
                    or (bias is not None and bias.requires_grad))

    def _warn_trainable_weight(self):
        """Warns, once per process (naming the first layer), that an FP8
        weight requires grad (set by model.requires_grad_(True), peft's
        modules_to_save, a loop over the parameters) though it never gets a
        gradient. A warning, not an error: peft's modules_to_save trains a
        copy of the layer whose bias does train, and a model-wide
        requires_grad_ is otherwise harmless (the weight stays as it is).
        Outside torch.compile's tracing only."""
        global _warned_trainable_weight
        if _warned_trainable_weight:
            return
        _warned_trainable_weight = True
        warnings.warn(
            f"{_checks.describe(self)} (and any other fp8q.torch.Linear "
            "like it): its FP8 weight requires grad "
            "(model.requires_grad_(True), peft's modules_to_save or a loop "
            "setting requires_grad on every parameter marks it), but FP8 "
            "weights and their scales never get a gradient: no optimizer "
            "changes them, and only float parameters (biases, norms, "
            "embeddings, LoRA adapters) train. To train a layer's weight, "
            "keep it in float (fp8q.torch.quantize(model, exclude=[...])) "
            "or train LoRA adapters on it (peft); "
            "model.requires_grad_(False) before marking what trains "
            "silences this", UserWarning, stacklevel=3)

    def _traced_forward(self, x):
        """forward through the custom operators: what torch.compile,
        torch.export, torch.jit.trace, functorch, tensor subclasses, the
        meta device and autograd see. Its errors name the layer (outside
        torch.compile's tracing, which reports where it failed itself)."""
        if torch.compiler.is_compiling():
            return self._operator_forward(x)
        try:
            return self._operator_forward(x)
        except Exception as error:
            _checks.name_error(self, error)
            raise

    def _operator_forward(self, x):
        """_traced_forward's computation: x checked, then the custom
        operator (per shard under tensor parallelism). Under
        torch.fx.symbolic_trace x is a Proxy, which has no dtype or shape
        to check: the operator call is recorded as it is."""
        if isinstance(x, torch.fx.Proxy):
            return self._operator(x, self.weight, self.weight_scale,
                                  self.bias, self.input_scale)
        transformed = self._transformed_storage()
        if transformed is not None and transformed != "bias":
            raise RuntimeError(self._transformed_message(transformed))
        if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise TypeError("fp8q.torch.Linear: x must be float32, float16 "
                            f"or bfloat16, got {x.dtype}")
        shape_error = _checks.input_shape_error(self, x)
        if shape_error is not None:
            raise shape_error
        try:
            if _tensor_parallel.is_sharded(self.weight):
                return _tensor_parallel.forward(self, x, self._operator)
            return self._operator(x, self.weight, self.weight_scale,
                                  self.bias, self.input_scale)
        except (RuntimeError, ValueError, TypeError):
            # Devices are compared only once a call failed (the operators'
            # fake implementations refuse a real x beside meta weights):
            # the error then names the layer and the tensor.
            device_error = _checks.device_error(self, x)
            if device_error is not None:
                raise device_error from None
            raise

    def _transformed_storage(self):
        """The first of weight, weight_scale and bias that
        torch.nn.utils.parametrize or prune took out of the module's dicts
        (the module computes it from an original: a property, or an
        attribute a pre-hook sets), or None."""
        for name in ("weight", "weight_scale", "bias"):
            if name not in self._parameters and name not in self._buffers:
                value = getattr(self, name, None)
                if value is not None:
                    return name
        return None

    def _transformed_message(self, name):
        """Why a parametrized or pruned weight or weight_scale is
        refused."""
        return (
            f"{_checks.describe(self)}: its {name} is parametrized or pruned "
            "(torch.nn.utils.parametrize / prune), which fp8q does not "
            "support for the FP8 weight or its scales: they hold FP8 codes "
            "and their scales, not weight values, so a parametrization or a "
            "pruning mask (magnitudes of codes) would not act on the "
            "weight. Parametrize or prune the float layer before "
            "quantizing it (a bias may be parametrized or pruned)")

    def _operator(self, x, weight, weight_scale, bias, input_scale):
        """The layer's custom operator on these tensors. Under
        torch.compile / torch.export, a W8A8 layer with "row" weight
        scales, or "tensor" ones without input_scale, off CUDA GPUs below
        compute capability 8.9 (_decomposition_compiles), quantizes x in torch
        ops (torch.ops.fp8q.quantize_rows, a decomposition Inductor fuses
        into the kernel that produced x), and multiplies with
        torch.ops.fp8q.linear_fp8_quantized: the same bits as
        linear_fp8."""
        if self.activations is None:
            return _ops.linear_weight_only(x, weight, weight_scale, bias,
                                           self.granularity)
        if (torch.compiler.is_compiling() and self.in_features > 0
                and _decomposition_compiles(x)
                and (self.granularity == "row"
                     or (self.granularity == "tensor"
                         and input_scale is None))):
            codes, scale = _row_quantize.quantize_rows_op(x, input_scale)
            return _ops.linear_fp8_quantized(x, codes, scale, weight,
                                             weight_scale, bias,
                                             self.granularity)
        return _ops.linear_fp8(x, weight, weight_scale, bias, input_scale,
                               self.granularity)
