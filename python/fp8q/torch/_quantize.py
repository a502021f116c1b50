"""fp8q.torch.quantize: replaces a model's nn.Linear modules by
fp8q.torch.Linear in place, all of them or none, and logs what it did."""
import fnmatch
import logging
import warnings

import torch

from fp8q.torch._fused_norm import fuse_decoder_norms
from fp8q.torch._linear import Linear
from fp8q.torch._module_names import covered
from fp8q.torch._register_transformers import attach_library_quantizer
from fp8q.torch._summary import QuantizeSummary, float_modules, weight_bytes

logger = logging.getLogger("fp8q.torch")


def _kept_in_fp32(owner):
    """The nn.Linear modules under a transformers model that it declares
    must stay in float32 (its _keep_in_fp32_modules, names matched as
    whole dotted parts), as ids: T5's feed-forward `wo`, whose owner casts
    its input to wo.weight.dtype before the call. As transformers' own
    quantizers (FineGrainedFP8, bitsandbytes), only that list counts, not
    _keep_in_fp32_modules_strict (whole sub-models kept in float32 when a
    float dtype is asked for, which they quantize)."""
    fragments = getattr(owner, "_keep_in_fp32_modules", None)
    if not fragments:
        return set()
    return {id(module) for name, module in owner.named_modules()
            if isinstance(module, torch.nn.Linear)
            and covered(name, fragments)}


def replaceable_linears(model):
    """The modules of `model` that fp8q replaces by fp8q.torch.Linear, as
    {id(module): module}: its nn.Linear modules (subclasses included, as
    optimum-quanto and bitsandbytes replace them: transformers'
    FalconLinear computes x @ W.T + b in a forward of its own) that are
    not fp8q's already, except those their owner reads without calling
    them: nn.MultiheadAttention's out_proj, and
    nn.TransformerEncoderLayer's linear1 / linear2 (its inference fast
    path reads their weights), which stay float, as torch's own
    quantization leaves them; and those a transformers model keeps in
    float32 (_keep_in_fp32_modules: T5's `wo`, whose dtype its owner reads
    to cast the input), as transformers' own quantizers leave them."""
    read_directly = set()
    for module in model.modules():
        if isinstance(module, torch.nn.MultiheadAttention):
            read_directly.add(id(module.out_proj))
        elif isinstance(module, torch.nn.TransformerEncoderLayer):
            read_directly.update((id(module.linear1), id(module.linear2)))
        read_directly.update(_kept_in_fp32(module))
    return {id(module): module for module in model.modules()
            if isinstance(module, torch.nn.Linear)
            and not isinstance(module, Linear)
            and id(module) not in read_directly}


def warn_transposed_linears(model, wanted=lambda name: True,
                            caller="quantize", stacklevel=3):
    """A UserWarning naming transformers' Conv1D modules (GPT-2's linear
    layers, their weight stored transposed) whose name `wanted` accepts
    (the call's include / exclude patterns): they are no nn.Linear and
    stay float. `caller` begins the message (quantize, from_pretrained);
    `stacklevel` points the warning at the user's call. Without it,
    quantize(gpt2, exclude=["lm_head"]) changed nothing and said so only in
    the INFO summary."""
    names = _transposed_linear_names(model, wanted)
    if names:
        warnings.warn(
            f"{caller}: {len(names)} transformers Conv1D modules "
            f"({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}) "
            "stay in float: fp8q quantizes nn.Linear modules, and Conv1D "
            "(GPT-2's layers) is not one", UserWarning, stacklevel=stacklevel)


def _is_transposed_linear(module):
    """Whether `module` is transformers' Conv1D (GPT-2's linear layers,
    their weight stored transposed), which fp8q does not quantize."""
    return (type(module).__name__ == "Conv1D"
            and type(module).__module__ == "transformers.pytorch_utils")


def _transposed_linear_names(model, wanted):
    """Names of model's transformers Conv1D modules that `wanted`
    accepts."""
    return [name for name, module in model.named_modules()
            if _is_transposed_linear(module) and wanted(name)]


def _transposed_note(model, patterns):
    """The end of the unmatched-pattern error: the transformers Conv1D
    modules the patterns match instead, if any."""
    names = _transposed_linear_names(
        model, lambda name: matches_any(name, patterns))
    if not names:
        return ""
    return (f" (it matches transformers Conv1D modules, "
            f"{', '.join(names[:3])}{', ...' if len(names) > 3 else ''}, "
            "which fp8q does not quantize: Conv1D, GPT-2's layer, is no "
            "nn.Linear)")


def check_include_takes_a_layer(model, include, replaceable, note=""):
    """ValueError when the `include` patterns (None: no check) match
    nn.Linear modules of `model` only among those fp8q keeps float (neither
    an fp8q.torch.Linear nor in `replaceable`, replaceable_linears'
    result): quantizing nothing would leave the model other than asked.
    `note` ends the message (quanto_compat: what optimum-quanto does)."""
    if not include:
        return
    kept, taken = [], False
    for name, module in model.named_modules(remove_duplicate=False):
        if isinstance(module, torch.nn.Linear) and matches_any(name, include):
            if isinstance(module, Linear) or id(module) in replaceable:
                taken = True
            else:
                kept.append(name)
    if kept and not taken:
        raise ValueError(
            f"include: {include} match only nn.Linear modules fp8q leaves "
            f"in float ({', '.join(kept[:3])}): its owner reads it "
            "without calling it (nn.MultiheadAttention's out_proj, "
            "nn.TransformerEncoderLayer's linear1 / linear2) or keeps it in "
            "float32 (a transformers model's _keep_in_fp32_modules, such "
            f"as T5's wo){note}")


def matches_any(name, patterns):
    """Whether the module name matches any of the shell-style patterns,
    case-sensitively on every system (fnmatchcase: module names are)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def _patterns(value, argument):
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    patterns = list(value)
    if not all(isinstance(pattern, str) for pattern in patterns):
        raise TypeError(f"{argument}: expected a pattern or a list of "
                        "shell-style patterns (str)")
    return patterns


def _settings(layer):
    """What a quantize call decides for a layer: (weight dtype,
    activations, granularity)."""
    return layer.weight.dtype, layer.activations, layer.granularity


def _describe(settings):
    dtype, activations, granularity = settings
    return (f"weights={str(dtype).split('.')[-1]}, "
            f"activations={activations}, granularity={granularity}")


def _check_requantization(quantized, request):
    """ValueError when an fp8q layer the patterns match was quantized with
    other settings than `request` (an fp8q.torch.Linear built from the
    call's arguments): quantizing FP8 codes again would compound the
    rounding, and ignoring the call would leave the model other than
    asked."""
    wanted = _settings(request)
    for name, layer in quantized:
        if _settings(layer) != wanted:
            raise ValueError(
                f"quantize: {name!r} is quantized already with "
                f"{_describe(_settings(layer))}; this call asks for "
                f"{_describe(wanted)}. Requantizing FP8 weights would round "
                "them twice: quantize a fresh float model instead, or "
                "exclude this layer")


def _weight_problem(weight, name, error):
    """What stopped a weight's quantization, in quantize's terms: the count
    of NaN and infinite values when there are any (looked for only after
    the failure), else fp8q's own message."""
    bad = int((~torch.isfinite(weight.detach())).sum())
    if bad == 0:
        return f"quantizing its weight: {error}"
    return (f"its weight holds {bad} NaN or infinite values, which no FP8 "
            f"scale represents; repair them, or keep the layer in float "
            f"with exclude=[{name!r}]")


def _quantized_layers(chosen, **settings):
    """{name: fp8q.torch.Linear.from_linear(module, **settings)} for every
    (name, nn.Linear) in chosen, built before any module is replaced; an
    error names the module path and says that the model was left
    unchanged."""
    layers = {}
    for name, module in chosen:
        try:
            layer = Linear.from_linear(module, **settings)
        except (ValueError, TypeError, RuntimeError) as error:
            raise type(error)(
                f"quantize: module {name!r} ({type(module).__name__} "
                f"{module.in_features} -> {module.out_features}): "
                f"{_weight_problem(module.weight, name, error)}. No layer "
                "was quantized: the model is unchanged") from error
        layer.set_name(name)  # for the layer's error messages
        layers[name] = layer
    return layers


def reads_per_token_codes(layer):
    """Whether `layer` can take a fused norm's codes: an fp8q.torch.Linear
    quantizing its activations per token (e4m3, no static input_scale,
    "row" or "tensor" weight scales)."""
    return (isinstance(layer, Linear) and layer._takes_input_scale
            and layer.input_scale is None)


def quantize(model, weights="e4m3", activations=None, granularity="row",
             include=None, exclude=None, fuse_norms=False):
    """Replaces, in place, every torch.nn.Linear of `model` whose qualified
    name (as in model.named_modules()) matches `include` (shell-style
    patterns; default: all) and none of `exclude`, by an
    fp8q.torch.Linear with its weight quantized to `weights` ("e4m3" or
    "e5m2") at `granularity` ("row": one scale per output feature,
    "tensor", or "block": 128x128). activations=None keeps activations in
    floating point (weight-only); activations="e4m3" quantizes them to FP8
    in forward (per token, dynamically). Returns the model.

    All or none: every layer is quantized before any is replaced, so an
    error (NaN or infinity in a weight, say) names the module and leaves
    the model unchanged. fp8q.torch.Linear layers (an nn.Linear subclass)
    the patterns match are left as they are when they have the requested settings (so quantizing
    twice with the same arguments changes nothing, and a second call can
    quantize the layers a first one excluded); other settings are a
    ValueError naming the layer. ValueError when a pattern matches no
    Linear (a typo would otherwise quantize nothing silently), or when
    include matches only Linears fp8q leaves in float: those torch's
    modules read without a call (nn.MultiheadAttention's out_proj,
    nn.TransformerEncoderLayer's linear1 / linear2) stay float, and the
    summary counts them there (replaceable_linears). An nn.Linear
    subclass is replaced as nn.Linear is, computing x @ W.T + b: one
    whose forward computes something else must be excluded. A Linear
    registered under several names (a tied or shared layer) is one layer:
    a pattern matches it when it matches any of its names, and it becomes
    one fp8q.torch.Linear set at every one of them (the sharing is kept),
    unless exclude matches one of its names (then it stays float at all
    of them).

    A transformers model (PreTrainedModel) also gets fp8q's transformers
    quantizer and quantization_config, as from_pretrained with
    fp8q.torch.Fp8qConfig gives them, so save_pretrained writes a
    config that from_pretrained rebuilds the FP8 layers from (and refuses
    a model that one config cannot describe); docs/torch.md.

    fuse_norms=True (activations="e4m3", granularity "row" or "tensor"):
    in transformers' Llama-style decoder layers, each norm whose outputs
    feed only FP8 layers — input_layernorm before self_attn.q_proj /
    k_proj / v_proj, post_attention_layernorm before mlp.gate_proj /
    up_proj, all of them fp8q.torch.Linear after this call — computes its
    output and the per-token float8_e4m3fn codes and scales in one fused
    op (torch.ops.fp8q.norm_quantize), which those layers take instead of
    quantizing the same activations each (fp8q.torch._fused_norm). The
    layers compute the same bits as from the norm's output; the norm's
    output itself is rounded once from float32 (transformers' Llama norm
    rounds twice in half precision), within the bound docs/torch.md gives.
    The summary lists the fused norms (none recognised: an empty list)
    and, as unfused_norms, each norm the pattern names that stayed
    unfused with the reason (a following layer excluded or not W8A8
    per-token, a norm fp8q does not compute, a probe that failed).

    Linears a transformers model keeps in float32 (_keep_in_fp32_modules,
    such as T5's wo, whose dtype its owner reads) stay float as those
    torch's modules read. transformers' Conv1D modules (GPT-2) are no
    nn.Linear: they stay float, with a UserWarning naming them.

    Logs a QuantizeSummary (Linear layers quantized, modules left in float
    by kind, weight bytes before and after) at INFO on the "fp8q.torch"
    logger, the object itself as the record's `fp8q_summary`."""
    # The layer's constructor checks and normalizes the request.
    request = Linear(0, 0, bias=False, weights=weights,
                     activations=activations, granularity=granularity)
    if fuse_norms and not reads_per_token_codes(request):
        raise ValueError("fuse_norms=True needs activations=\"e4m3\" and "
                         "\"row\" or \"tensor\" granularity (the fused "
                         "norm writes per-token FP8 codes)")
    include = _patterns(include, "include")
    exclude = _patterns(exclude, "exclude") or []
    # Every name of every Linear: a module registered at several paths (a
    # tied layer) is listed once per path, and grouped by identity below.
    all_linears = [(name, module) for name, module
                   in model.named_modules(remove_duplicate=False)
                   if isinstance(module, torch.nn.Linear)]
    replaceable = replaceable_linears(model)
    linears, kept = [], []  # what quantize may take; names it keeps float
    for name, module in all_linears:
        if isinstance(module, Linear) or id(module) in replaceable:
            linears.append((name, module))
        else:
            kept.append(name)
    for argument, patterns in (("include", include or []),
                               ("exclude", exclude)):
        unused = [pattern for pattern in patterns
                  if not any(fnmatch.fnmatchcase(name, pattern)
                             for name, _ in all_linears)]
        if unused:
            raise ValueError(f"{argument}: no nn.Linear module of the model "
                             f"matches {unused}"
                             + _transposed_note(model, unused))
    check_include_takes_a_layer(model, include, replaceable)
    names = {}  # id(module) -> [its names, in named_modules order]
    modules = {}  # id(module) -> module
    for name, module in linears:
        names.setdefault(id(module), []).append(name)
        modules[id(module)] = module
    # A pattern matches a shared module when it matches any of its names:
    # it is quantized once, at all of them, unless exclude names one.
    chosen = [(names[key][0], module) for key, module in modules.items()
              if (include is None
                  or any(matches_any(name, include) for name in names[key]))
              and not any(matches_any(name, exclude) for name in names[key])]
    if any("" in names[id(module)] for _, module in chosen):
        raise ValueError("quantize: the model itself is an nn.Linear; use "
                         "fp8q.torch.Linear.from_linear(model)")
    already = [(name, module) for name, module in chosen
               if isinstance(module, Linear)]
    _check_requantization(already, request)
    before = weight_bytes(model)
    floats = [(name, module) for name, module in chosen
              if not isinstance(module, Linear)]
    layers = _quantized_layers(floats, weights=weights,
                               activations=activations,
                               granularity=granularity)
    for first, module in floats:
        for name in names[id(module)]:
            parent_name, _, child = name.rpartition(".")
            parent = (model.get_submodule(parent_name) if parent_name
                      else model)
            setattr(parent, child, layers[first])
    fused, unfused = (fuse_decoder_norms(model, reads_per_token_codes)
                      if fuse_norms else ((), ()))
    summary = QuantizeSummary(
        quantized=len(layers), already_quantized=len(already),
        left_in_float=float_modules(model, skip=Linear),
        weight_bytes_before=before, weight_bytes_after=weight_bytes(model),
        fused_norms=tuple(fused), unfused_norms=tuple(unfused))
    logger.info("%s", summary, extra={"fp8q_summary": summary})
    warn_transposed_linears(
        model, lambda name: (include is None or matches_any(name, include))
        and not matches_any(name, exclude))
    attach_library_quantizer(model)
    return model
