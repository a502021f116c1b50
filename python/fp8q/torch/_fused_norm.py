"""Norms fused with the per-token FP8 quantize of their output
(fp8q.torch.quantize(..., fuse_norms=True)): in a decoder layer the norm
before q/k/v (and the one before gate/up) computes its output and, in the
same kernel, the float8_e4m3fn codes and row scales that those FP8 layers
would each compute from it (torch.ops.fp8q.norm_quantize); the layers take
them instead of quantizing again.

The handoff: the fused norm's output tensor carries (version, codes,
scale) as an attribute; a layer marked to read it (reads_quantized_input)
uses them when the tensor it is given is that output, unmodified
(tensor._version unchanged), and quantizes x itself otherwise (a view, a
copy, anything else). Under torch.inference_mode, whose tensors have no
version counter, an in-place change cannot be detected: a norm hands
nothing over there while a hook could run before its readers read (its
own forward hook, a global one, a pre-hook of self_attn / mlp, a pre-hook
or hook of a reader). The
codes are exactly fp8q.quantize(output,
granularity="row"), what the layer computes itself, so either way the
layer's result is the same bits. Under torch.compile / export the norm is
torch.ops.fp8q.norm_quantize (one opaque op: the same output as eagerly)
and the layers after it quantize that output in torch ops
(fp8q.torch._row_quantize), which gives the codes the kernel wrote, bit
for bit (no handoff: dynamo cannot compare the output's version there).
With gradients, or when the norm's weight
dtype differs from x's, the norm runs its own float forward (no
handoff), as it does when given any argument besides x. Fused norms pickle as their base class plus the fusion
(torch.save(model) keeps them fused); accelerate's hooked norms are fused
through its _old_forward."""
import copyreg
import types

import torch

from fp8q.torch import _ops

# The attribute of a fused norm's output that holds (version, codes, scale).
HANDOFF = "_fp8q_quantized"
# The attribute of a fused norm that holds (the modules on the way to its
# readers, the readers), as fused (plain tuples: no submodules), whose
# hooks _hooks_before_the_readers checks; a module put in a reader's place
# later (a wrapper) is not among them.
WATCHED = "_fp8q_watched"
# (norm, the modules after it that read its output) in a decoder layer,
# by the names transformers' Llama-style decoders (Llama, Mistral, Qwen2,
# Gemma, ...) give them.
PATTERNS = (
    ("input_layernorm",
     ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")),
    ("post_attention_layernorm", ("mlp.gate_proj", "mlp.up_proj")),
)
_FUSED_CLASSES = {}


def is_fused(module):
    """Whether `module` is a norm fuse() made fused."""
    return type(module) in _FUSED_CLASSES.values()


def quantized_input(x):
    """(codes, scale) a fused norm attached to x, when x is that norm's
    output and unmodified since; else None."""
    held = getattr(x, HANDOFF, None)
    if held is None or (held[0] is not None and held[0] != x._version):
        return None
    return held[1], held[2]


def norm_parameters(norm):
    """(weight, bias, epsilon, layer_norm) of a norm module fp8q can fuse,
    or None: an RMSNorm with a 1-D weight (transformers' *RMSNorm with
    variance_epsilon, torch.nn.RMSNorm with eps) or a torch.nn.LayerNorm
    with a weight."""
    return None if unfusable_reason(norm) else _parameters(norm)


def unfusable_reason(norm):
    """Why fp8q cannot fuse `norm` (a sentence for the quantize summary),
    or None when norm_parameters takes it: no 1-D weight, a class fp8q
    does not know, or an RMSNorm whose probe on one row did not compute
    x * rsqrt(mean(x^2) + epsilon) * weight (Gemma's 1 + weight) or could
    not run (weights on the meta device, say; the error is named)."""
    weight = getattr(norm, "weight", None)
    if not isinstance(weight, torch.Tensor) or weight.dim() != 1:
        return "it has no 1-D weight"
    if isinstance(norm, (torch.nn.LayerNorm, torch.nn.RMSNorm)):
        return None
    if not (type(norm).__name__.endswith("RMSNorm") and isinstance(
            getattr(norm, "variance_epsilon", None), float)):
        return (f"{type(norm).__name__} is neither torch's LayerNorm / "
                "RMSNorm nor a transformers RMSNorm with variance_epsilon")
    return _rms_norm_probe_problem(norm)


def _parameters(norm):
    """norm_parameters' tuple for a norm unfusable_reason accepts."""
    weight = norm.weight
    if isinstance(norm, torch.nn.LayerNorm):
        return weight, norm.bias, norm.eps, True
    if isinstance(norm, torch.nn.RMSNorm):
        epsilon = norm.eps
        if epsilon is None:
            epsilon = torch.finfo(weight.dtype).eps
        return weight, None, epsilon, False
    return weight, None, norm.variance_epsilon, False


def _plain_rms_norm(norm):
    """Whether a transformers RMSNorm multiplies by weight itself (Llama's
    kind), not by 1 + weight (Gemma's), which fp8q's op does not compute:
    probed on one row. A norm that cannot be probed (weights on the meta
    device, say) counts as not plain: it is left unfused."""
    return _rms_norm_probe_problem(norm) is None


def _rms_norm_probe_problem(norm):
    """None when the probe of _plain_rms_norm passes, else what it saw."""
    try:
        row = torch.linspace(-1.0, 1.0, norm.weight.numel(),
                             dtype=torch.float32, device=norm.weight.device)
        with torch.no_grad():
            expected = row * torch.rsqrt(row.pow(2).mean()
                                         + norm.variance_epsilon)
            got = norm(row.to(norm.weight.dtype)).float()
            if bool(torch.allclose(got, expected * norm.weight.float(),
                                   rtol=1e-2, atol=1e-3)):
                return None
    except (RuntimeError, TypeError, ValueError,
            NotImplementedError) as error:
        return (f"probing it on one row failed ({type(error).__name__}: "
                f"{str(error).splitlines()[0] if str(error) else ''})")
    return ("probed on one row, it does not compute x * rsqrt(mean(x^2) + "
            "eps) * weight (Gemma's 1 + weight, say)")


def _fused_forward(self, x, *args, **kwargs):
    """The fused norm's forward: normed output carrying its codes and
    scale, where the eager kernel applies; the norm's own forward
    otherwise (and with any argument besides x)."""
    epsilon, layer_norm = self._fp8q_norm
    weight = self.weight
    bias = self.bias if layer_norm else None
    compiling = torch.compiler.is_compiling()
    # is_compiling() first: under torch.compile, type(x) is not traced.
    if (args or kwargs or (not compiling and type(x) is not torch.Tensor)
            or not (x.is_cpu or x.is_cuda) or x.dtype != weight.dtype
            or x.dtype not in (torch.float32, torch.float16, torch.bfloat16)
            or x.dim() == 0 or x.shape[-1] != weight.shape[0]
            or (torch.is_grad_enabled()
                and (x.requires_grad or weight.requires_grad))):
        return super(type(self), self).forward(x, *args, **kwargs)
    if compiling:
        # Traced: the same output as eagerly (fp8q's kernel, one opaque
        # op). No handoff: dynamo cannot compare the output's version
        # (unbacked there), so the layers quantize it in torch ops, the
        # codes the kernel wrote, bit for bit (fp8q.torch._row_quantize).
        return _ops.norm_quantize(x, weight, bias, epsilon, layer_norm)[0]
    normed, codes, scale = _ops.norm_quantize_forward(
        x, weight, bias, epsilon, layer_norm)
    if normed.is_inference():
        # Inference tensors (torch.inference_mode) have no version
        # counter: a hook that could change the output in place unnoticed
        # before a reader reads it means no handoff.
        if _hooks_before_the_readers(self):
            return normed
        version = None
    else:
        version = normed._version
    setattr(normed, HANDOFF, (version, codes, scale))
    return normed


def _hooks_before_the_readers(norm):
    """Whether a hook runs between the norm's output and its readers'
    reads: a forward hook of the norm, a global forward or forward
    pre-hook, a forward pre-hook of a module on the way to a reader
    (self_attn, mlp: their forward hooks run after the reads), or a
    forward pre-hook or forward hook of a reader itself (one reader's
    hooks run before the next one reads)."""
    hooks = torch.nn.modules.module
    on_the_way, readers = norm.__dict__.get(WATCHED, ((), ()))
    return bool(norm._forward_hooks or hooks._global_forward_hooks
                or hooks._global_forward_pre_hooks
                or any(module._forward_pre_hooks for module in on_the_way)
                or any(module._forward_pre_hooks or module._forward_hooks
                       for module in readers))


def _fused_class(base):
    """The fused subclass of norm class `base` (one per class)."""
    fused = _FUSED_CLASSES.get(base)
    if fused is None:
        fused = type(f"Fp8qFused{base.__name__}", (base,),
                     {"forward": _fused_forward,
                      "__reduce_ex__": _reduce_fused,
                      "__module__": __name__})
        _FUSED_CLASSES[base] = fused
    return fused


def _reduce_fused(self, protocol):
    """A fused norm's pickle reduction: its base class's, re-created on
    load as the fused class (_new_fused) with the same state, so
    torch.save(model) / pickle / copy.deepcopy keep the norm fused."""
    fused = type(self)
    # Protocol 2's reduction (copyreg.__newobj__, a plain function to the
    # older protocols too), whose class argument is replaced below.
    reduced = super(fused, self).__reduce_ex__(max(protocol, 2))
    if (isinstance(reduced, tuple) and len(reduced) >= 2
            and reduced[0] is copyreg.__newobj__
            and reduced[1][:1] == (fused,)):
        return (_new_fused, (fused.__bases__[0], *reduced[1][1:]),
                *reduced[2:])
    return reduced


def _new_fused(base, *args):
    """An uninitialised instance of the fused class of `base` (what
    unpickling a fused norm starts from; its state follows)."""
    fused = _fused_class(base)
    return fused.__new__(fused, *args)


def _hooked_forward_is_own(norm):
    """Whether a norm with an instance `forward` (accelerate's hooks:
    add_hook_to_module, dispatch_model, cpu_offload) still reaches its
    class's forward: accelerate's _old_forward is that forward bound to
    the norm, which fusing can re-point."""
    old_forward = norm.__dict__.get("_old_forward")
    return (getattr(old_forward, "__self__", None) is norm
            and getattr(old_forward, "__func__", None)
            in (type(norm).forward, _fused_forward))


def fuse(norm):
    """Makes `norm` (a module norm_parameters takes) a fused norm in place:
    its class becomes a subclass of its own (named Fp8qFused<class>, so
    isinstance, its parameters and its state_dict keys stay) whose forward
    is _fused_forward. A norm with accelerate's hook (an instance forward
    calling _old_forward, the class's forward) gets _old_forward re-pointed
    at the fused forward."""
    _, _, epsilon, layer_norm = norm_parameters(norm)
    norm.__class__ = _fused_class(type(norm))
    # weight and bias are read at each call (module moves replace them).
    norm._fp8q_norm = (float(epsilon), layer_norm)
    if "_old_forward" in norm.__dict__:
        norm._old_forward = types.MethodType(_fused_forward, norm)


def _paths_on_the_way(readers):
    """The module paths a reader's input passes through below the decoder
    layer: every proper prefix of each reader path ("self_attn" for
    "self_attn.q_proj"), once each, in order."""
    paths = []
    for reader in readers:
        parts = reader.split(".")
        for end in range(1, len(parts)):
            path = ".".join(parts[:end])
            if path not in paths:
                paths.append(path)
    return paths


def fuse_decoder_norms(model, is_reader):
    """Fuses every norm of `model` that PATTERNS name and whose following
    modules all satisfy is_reader (fp8q W8A8 layers with dynamic per-token
    activations), marks those layers to read the handoff, and returns
    (fused, unfused): the fused norms' qualified names, and (name, reason)
    for each norm PATTERNS name that stays unfused — a following module
    that is missing or not such a layer, an instance `forward` that would
    hide the fused one (accelerate's hook aside, which fuse re-points), or
    unfusable_reason's."""
    modules = dict(model.named_modules())
    fused, unfused = [], []
    for parent_name in modules:
        prefix = f"{parent_name}." if parent_name else ""
        for norm_name, readers in PATTERNS:
            norm = modules.get(prefix + norm_name)
            if norm is None:
                continue
            layers = [modules.get(prefix + reader) for reader in readers]
            others = [reader if layer is not None else f"{reader} (absent)"
                      for reader, layer in zip(readers, layers)
                      if not is_reader(layer)]
            if others:
                reason = (f"{', '.join(others)} "
                          + ("is not an fp8q W8A8 layer" if len(others) == 1
                             else "are not fp8q W8A8 layers")
                          + " with dynamic per-token activations")
            elif ("forward" in norm.__dict__
                    and not _hooked_forward_is_own(norm)):
                reason = ("it has an instance forward of its own (not "
                          "accelerate's hook), which would hide the fused "
                          "one")
            else:
                reason = unfusable_reason(norm)
            if reason is not None:
                unfused.append((prefix + norm_name, reason))
                continue
            if not is_fused(norm):
                fuse(norm)
            setattr(norm, WATCHED, (
                tuple(modules[prefix + path]
                      for path in _paths_on_the_way(readers)
                      if prefix + path in modules),
                tuple(layers)))
            for layer in layers:
                layer.reads_quantized_input = True
            fused.append(prefix + norm_name)
    return fused, unfused
