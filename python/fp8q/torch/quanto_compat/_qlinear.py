"""quanto_compat.QLinear: optimum-quanto's QLinear life cycle (a float
weight quantized on the fly until freeze(), then FP8 codes) on top of
fp8q.torch.Linear, whose computation a frozen QLinear uses unchanged."""
import torch

from fp8q.torch import _ops
from fp8q.torch._linear import Linear
from fp8q.torch.quanto_compat import _internals, _qtypes
from fp8q.torch.quanto_compat._qtypes import qfloat8_e5m2

# The tensors a frozen layer takes from fp8q.torch.Linear, as that class
# registers them (parameters; a scalar weight_scale would be a buffer).
_FROZEN_TENSORS = ("weight", "weight_scale")


def layer_formats(weights, activations, optimizer):
    """fp8q's (weight format, activation format or None) for quanto's
    weights / activations qtypes (or names) and optimizer; ValueError naming
    the argument and what fp8q supports otherwise."""
    weight_format = _qtypes.fp8_format(weights, "weights")
    activation_format = None
    if activations is not None:
        activation_format = _qtypes.fp8_format(activations, "activations")
    _internals.check_optimizer(optimizer)
    return weight_format, activation_format


class QModuleMixin:
    """The base of quanto_compat's quantized modules, for isinstance checks
    as in optimum-quanto (transformers' and diffusers' quanto integrations
    make them). QLinear is the only one: fp8q quantizes linear layers, and
    writing new quantized modules on this class is not supported."""


class QuantizedWeight:
    """QLinear.qweight: the layer's weight as FP8 `codes` (out_features,
    in_features) with float32 `scale` (out_features, 1), weight ~= codes *
    scale. `qtype` is the weight qtype, `dtype` the layer's float dtype
    (what dequantize() returns), `shape` and `device` those of the codes.
    Not a tensor subclass (see quanto_compat.QTensor)."""

    __slots__ = ("qtype", "codes", "scale", "dtype")

    def __init__(self, qtype, codes, scale, dtype):
        self.qtype = qtype
        self.codes = codes
        self.scale = scale
        self.dtype = dtype

    @property
    def shape(self):
        return self.codes.shape

    @property
    def device(self):
        return self.codes.device

    def dequantize(self):
        """codes * scale rounded once into `dtype` (fp8q's dequantize), a
        new tensor without gradient."""
        like = self.codes.new_empty(0, dtype=self.dtype)
        return _ops.dequantize_weight(like, self.codes, self.scale, "row")

    def __repr__(self):
        return (f"QuantizedWeight(qtype={self.qtype.name}, shape="
                f"{tuple(self.shape)}, dtype={self.dtype})")


class QLinear(QModuleMixin, Linear):
    """optimum-quanto's QLinear over fp8q.torch.Linear (so fp8q.torch's
    calibrate, freeze and checkpoints treat it as one).

    QLinear(in_features, out_features, bias=True, device=None, dtype=None,
    *, weights, activations=None, optimizer=None, quantize_input=False):
    weights: qfloat8 (= qfloat8_e4m3fn) or qfloat8_e5m2, or their names;
    activations: None (weight-only), qfloat8 or qfloat8_e5m2 (see
    forward); optimizer: None or AbsmaxOptimizer() (fp8q's
    per-output-channel absmax scales); quantize_input is accepted and has
    no effect (a layer with FP8 activations always quantizes its input).
    Other qtypes and optimizers raise ValueError naming the argument and
    what fp8q supports.

    As quanto's, a new layer is not frozen: `weight` is a float
    nn.Parameter (nn.Linear's initialization, `dtype`, trainable) and
    forward quantizes it on the fly (the gradient reaches it straight
    through the rounding, except with qfloat8 activations, where it
    reaches x and the bias only). freeze() replaces it by the FP8 codes
    and `weight_scale` of fp8q.torch.Linear (exactly fp8q.quantize, "row"
    granularity), and `frozen` says which state the layer is in. `bias`
    is a float nn.Parameter throughout.

    `input_scale` (float32, ()) is the static activation scale: 1 until
    Calibration sets it, as in quanto; `output_scale` (the layer's float
    dtype, ()) is recorded by Calibration as quanto's, but fp8q does not
    quantize outputs, so it does not change the result. Both are in the
    state dict. `weight_qtype`, `activation_qtype` and `optimizer` are the
    arguments resolved to objects (quanto's names).

    load_state_dict takes a frozen state dict (FP8 `weight` plus
    `weight_scale`) into a frozen or unfrozen layer, which becomes frozen,
    and a float one into either, which becomes unfrozen; FP8 weights of
    another format than `weights` are refused, naming the key."""

    def __init__(self, in_features, out_features, bias=True, device=None,
                 dtype=None, *, weights=None, activations=None,
                 optimizer=None, quantize_input=False):
        weight_format, activation_format = layer_formats(
            weights, activations, optimizer)
        with torch.device(device or torch.get_default_device()):
            # fp8q.torch.Linear's FP8 product takes e4m3fn activations;
            # e5m2 ones are handled by forward here.
            super().__init__(in_features, out_features, bias=bias,
                             weights=weight_format,
                             activations=activation_format and "e4m3",
                             dtype=dtype)
        # The truth for fp8q.torch.Linear's attribute (forward handles
        # e5m2 here, so the base class never computes with it).
        self.activations = activation_format
        self.weight_qtype = _qtypes.resolve(weights, "weights")
        self.activation_qtype = _qtypes.resolve(activations, "activations")
        self.optimizer = optimizer or _internals.AbsmaxOptimizer()
        self._float_dtype = dtype or torch.get_default_dtype()
        device = self.weight.device
        self._use_float_weight()
        if bias:
            self.bias = torch.nn.Parameter(torch.empty(
                out_features, dtype=self._float_dtype, device=device))
        torch.nn.Linear.reset_parameters(self)
        self.input_scale = torch.ones((), device=device)
        self.register_buffer("output_scale", torch.ones(
            (), dtype=self._float_dtype, device=device))

    @classmethod
    def from_module(cls, module, weights=None, activations=None,
                    optimizer=None):
        """An unfrozen QLinear sharing `module`'s weight and bias
        Parameters (module: a torch.nn.Linear), on its device and in its
        dtype, with input_scale and output_scale 1, as quanto's
        from_module; `module` may be an unfrozen QLinear (quanto's
        quantize makes those again with new qtypes), not a frozen one or
        another fp8q.torch.Linear. freeze() it (or the model) for FP8
        weights."""
        if isinstance(module, QLinear) and module.frozen:
            raise TypeError("from_module: the QLinear is frozen (its float "
                            "weight is gone); expected a float "
                            "torch.nn.Linear or an unfrozen QLinear")
        if not isinstance(module, torch.nn.Linear) or (
                isinstance(module, Linear) and not isinstance(module,
                                                              QLinear)):
            raise TypeError("from_module: expected a float torch.nn.Linear, "
                            f"got {type(module).__name__}")
        # Built on the meta device: nothing is allocated for the float
        # tensors it then takes from the module.
        layer = cls(module.in_features, module.out_features,
                    module.bias is not None, device="meta",
                    dtype=module.weight.dtype, weights=weights,
                    activations=activations, optimizer=optimizer)
        device = module.weight.device
        layer.weight = module.weight
        if module.bias is not None:
            layer.bias = module.bias
        layer.input_scale = torch.ones((), device=device)
        layer.output_scale = torch.ones((), dtype=module.weight.dtype,
                                        device=device)
        return layer

    # -- state -------------------------------------------------------------

    @property
    def frozen(self):
        """Whether the weight is FP8 codes (after freeze()) rather than the
        float Parameter."""
        return self.weight.dtype == self.weight_qtype.dtype

    def _use_float_weight(self):
        """Makes the layer unfrozen: a float weight Parameter (values not
        set) and no weight_scale."""
        weight = torch.nn.Parameter(torch.empty(
            (self.out_features, self.in_features), dtype=self._float_dtype,
            device=self.weight.device))
        for name in _FROZEN_TENSORS:
            _unregister(self, name)
        self._parameters.holds_fp8 = self._buffers.holds_fp8 = False
        self.register_parameter("weight", weight)
        self.register_buffer("weight_scale", None)

    def _use_fp8_tensors(self, layer):
        """Makes the layer frozen with the FP8 weight and weight_scale of
        `layer` (an fp8q.torch.Linear), registered as that class does."""
        self._parameters.holds_fp8 = self._buffers.holds_fp8 = True
        for name in _FROZEN_TENSORS:
            _unregister(self, name)
            if name in layer._parameters:
                self.register_parameter(name, layer._parameters[name])
            else:
                self.register_buffer(name, layer._buffers[name])

    def _quantized_layer(self):
        """The fp8q.torch.Linear holding this unfrozen layer's weight
        quantized as freeze() stores it (ValueError naming the layer for
        NaN or infinity in the weight)."""
        try:
            # Linear.from_linear refuses a layer that is already an
            # fp8q.torch.Linear, as this one is (with a float weight until
            # frozen): its quantization, then from_fp8, as from_linear does.
            codes, scale = self._quantized_float_weight()
            return Linear.from_fp8(codes, scale, granularity="row")
        except ValueError as error:
            raise ValueError(f"freeze: layer {getattr(self, 'name', '')!r}: "
                             f"{error}") from None

    def freeze(self):
        """Replaces the float weight by its FP8 codes and weight_scale (a
        no-op when frozen). ValueError for NaN or infinity in the weight,
        which is then left as it was."""
        if not self.frozen:
            self._use_fp8_tensors(self._quantized_layer())

    @property
    def qweight(self):
        """The quantized weight, a QuantizedWeight: the stored codes when
        frozen, else the float weight quantized now (as forward uses it)."""
        if self.frozen:
            codes, scale = self.weight, self.weight_scale
        else:
            codes, scale = self._quantized_float_weight()
        return QuantizedWeight(self.weight_qtype, codes, scale,
                               self._float_dtype)

    def _quantized_float_weight(self):
        return _ops.quantize_weight(self.weight.detach(),
                                    self.weight_qtype.dtype, "row")

    def reset_parameters(self):
        """nn.Linear's initialization of the float weight and bias when
        unfrozen (quanto's); frozen, fp8q.torch.Linear's (a fresh float
        initialization stored as FP8 codes)."""
        if self.frozen:
            super().reset_parameters()
        else:
            torch.nn.Linear.reset_parameters(self)

    def _apply(self, fn, recurse=True):
        # The float dtype follows .to(dtype) / .half() as the bias does.
        self._float_dtype = fn(torch.empty(0, dtype=self._float_dtype)).dtype
        return super()._apply(fn, recurse)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata,
                              strict, missing_keys, unexpected_keys,
                              error_msgs):
        weight = state_dict.get(prefix + "weight")
        if weight is not None:
            expected = self.weight_qtype.dtype
            if weight.dtype.itemsize == 1 and weight.dtype.is_floating_point:
                if weight.dtype != expected:
                    error_msgs.append(
                        f"{prefix}weight holds {weight.dtype} codes, but "
                        f"this QLinear has weights={self.weight_qtype.name} "
                        f"({expected}); build it with the checkpoint's "
                        "qtype")
                    return
                if prefix + "weight_scale" not in state_dict:
                    error_msgs.append(
                        f"{prefix}weight holds FP8 codes but the state dict "
                        f"has no {prefix}weight_scale to dequantize them")
                    return
                if not self.frozen:
                    with torch.device(self.weight.device):
                        self._use_fp8_tensors(Linear(
                            self.in_features, self.out_features, bias=False,
                            weights=self.weight_qtype.fp8q_format))
            elif self.frozen:
                self._use_float_weight()
        super()._load_from_state_dict(state_dict, prefix, local_metadata,
                                      strict, missing_keys, unexpected_keys,
                                      error_msgs)

    # -- forward -----------------------------------------------------------

    def forward(self, input):  # noqa: A002 (optimum-quanto's argument name)
        """fp8q.torch.Linear's forward when frozen; unfrozen, the same
        computation with the float weight quantized first (weight-only: the
        dequantized weight times input, with the gradient passed straight to
        the float weight; FP8 activations: torch.ops.fp8q.linear_fp8).
        qfloat8_e5m2 activations, which fp8q's FP8 product does not take,
        are input rounded to e5m2 (_e5m2_input) times the dequantized weight,
        torch's float product of the same values."""
        e5m2 = self.activation_qtype == qfloat8_e5m2
        if self.frozen and not e5m2:
            return super().forward(input)
        if self.frozen:
            codes, scale = self.weight, self.weight_scale
        else:
            codes, scale = self._quantized_float_weight()
        if self.activation_qtype is not None and not e5m2:
            return _ops.linear_fp8(input, codes, scale, self.bias,
                                   self.input_scale, "row")
        weight = _ops.dequantize_weight(input.detach(), codes, scale, "row")
        # In x's dtype, as fp8q.torch.Linear computes (a bfloat16 x in a
        # float32 model: bfloat16 out, frozen or not).
        bias = None if self.bias is None else self.bias.to(weight.dtype)
        if not self.frozen:
            # Straight through: forward uses the rounded weight, the
            # gradient reaches the float one.
            weight = weight + (self.weight - self.weight.detach()).to(
                weight.dtype)
        if e5m2:
            input = self._e5m2_input(input)
        return torch.nn.functional.linear(input, weight, bias)

    def _e5m2_input(self, x):
        """x rounded to e5m2 with the static input_scale (float32(x) /
        scale, rounded to nearest even by torch's cast, finite values
        saturated to +-57344, infinities and NaN kept) and scaled back into
        x's dtype; the gradient passes straight through to x."""
        scaled = x.detach().float() / self.input_scale
        limit = self.activation_qtype.qmax
        scaled = torch.where(torch.isinf(scaled), scaled,
                             scaled.clamp(-limit, limit))
        rounded = (scaled.to(torch.float8_e5m2).float()
                   * self.input_scale).to(x.dtype)
        return x + (rounded - x).detach() if x.requires_grad else rounded

    def extra_repr(self):
        return (f"{super().extra_repr()}, weight_qtype="
                f"{self.weight_qtype.name}, activation_qtype="
                f"{getattr(self.activation_qtype, 'name', None)}, "
                f"frozen={self.frozen}")


def _unregister(module, name):
    module._parameters.pop(name, None)
    module._buffers.pop(name, None)
    module._non_persistent_buffers_set.discard(name)
