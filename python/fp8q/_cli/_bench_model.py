"""`python -m fp8q bench model`: whole models with random weights, float
against their quantized copies, in three modes, one markdown table per
model (rows printed as they are measured).

Models: a Llama-shaped decoder (fp8q._cli._bench_llama; --layers deep)
and a FLUX-shaped DiT block (fp8q._cli._bench_flux). Variants: the float
model, fp8q W8A8 and W8A16 (fp8q.torch.quantize, e4m3 weights with row
scales; every nn.Linear, lm_head included), for the decoder fp8q W8A8 with
fuse_norms=True (each decoder norm writes the per-token FP8 codes its
q/k/v or gate/up layers read; the FLUX block's norms feed adaLN
modulation, a pattern fuse_norms does not fuse), when torchao imports its
Float8DynamicActivationFloat8WeightConfig(PerRow()) (rowwise dynamic FP8,
on GPUs that have FP8 tensor cores), and when optimum-quanto is installed
its qfloat8 W8A8 (static activation scales from one calibration batch)
and W8A16.

Modes of the decoder: "eager" (a forward pass over `tokens` tokens, the
prefill), "decode eager" and "decode CUDA graph" (a decode step of
`tokens` tokens over a static KV cache already holding CONTEXT positions,
fp8q._cli._bench_decode, run eagerly or replayed from a CUDA graph), and
"torch.compile" (the forward pass compiled). Modes of the FLUX block:
"eager", "CUDA graph" (its forward replayed) and "torch.compile". Without
a GPU the CUDA graph rows say "not run: no GPU".

Per mode, token count and variant: the median time of a call (after
warm-up calls; the variants take turns within every round: wall time on
the CPU, CUDA-event time on the GPU), tokens per second, the speed against
the float model eager on the same work (forward or decode step), against
the float model in the same mode and against torchao in the same mode,
the cosine of the outputs against the float model's eager outputs, and
the weight memory of the linear layers. A variant or mode that fails
(quantization, compilation, a CUDA graph capture) shows the exception's
first line in its row, and the run goes on; once --time-limit seconds
have passed, the groups left print "not run" rows.

The GPU run: bfloat16; the decoder of Llama-3-8B's shape (hidden 4096,
MLP 14336, 32 heads, 8 KV heads, vocab 32000), 4 layers unless --layers,
forward tokens 1, 16, 2048, 8192; the FLUX block (hidden 3072, 24 heads,
MLP 12288) at 4096 image tokens. The CPU run: float32, tiny shapes
(_bench_llama.CPU_SHAPE, _bench_flux.CPU_SHAPE), forward tokens 1, 16,
128, short enough for CI. Decode steps: 1 and 16 tokens on both. Results
go to docs/benchmarks.md; no test asserts timings.
"""
import copy
import dataclasses
import datetime
import functools
import platform
import time

import fp8q
from fp8q import _info
from fp8q._cli import _bench_decode, _bench_flux, _bench_llama
from fp8q._cli._bench import SEED, median_seconds
from fp8q._cli._bench_gpu import median_ms_cuda, unavailable_reason
from fp8q._cli._weight_memory import linear_weight_bytes

CPU_TOKENS = (1, 16, 128)
GPU_TOKENS = (1, 16, 2048, 8192)
DECODE_TOKENS = (1, 16)
CPU_CONTEXT = 32  # positions in the KV cache before a decode step
GPU_CONTEXT = 512
CALIBRATION_TOKENS = 64  # optimum-quanto W8A8's one calibration batch
WARM_UP_CALLS = 3  # before timing: compiles, then records CUDA graphs
# Mode name -> (work: "forward" or "decode", how: None (eager), "graph" or
# "compile"), in table order.
LLAMA_MODES = {"eager": ("forward", None),
               "decode eager": ("decode", None),
               "decode CUDA graph": ("decode", "graph"),
               "torch.compile": ("forward", "compile")}
FLUX_MODES = {"eager": ("forward", None),
              "CUDA graph": ("forward", "graph"),
              "torch.compile": ("forward", "compile")}
ERROR_CHARACTERS = 160  # of an exception's first line, in its row
# Each quantized copy is a new guard set on the model's forward code:
# room for every model at two shapes (static, then dynamic) per mode.
RECOMPILE_LIMIT = 64
MODEL_NAMES = ("llama", "flux")
TORCHAO_NAME = "torchao float8 rowwise W8A8"
FUSED_NAME = "fp8q W8A8 fused norms"


@dataclasses.dataclass
class ModelOptions:
    """What the command line chose: `tokens` (forward token counts, None:
    the device's default), `repeats`, `compile_models` (False: no
    torch.compile rows), `layers` (decoder depth, None: the shape's),
    `models` (names from MODEL_NAMES), `decode_tokens`, `flux_tokens`
    (None: the shape's) and `time_limit` (seconds, None: none)."""

    tokens: tuple = None
    repeats: int = 7
    compile_models: bool = True
    layers: int = None
    models: tuple = MODEL_NAMES
    decode_tokens: tuple = DECODE_TOKENS
    flux_tokens: tuple = None
    time_limit: float = None


class NotRun(Exception):
    """A group or row left out on purpose (its reason is the message)."""


def _first_line(error):
    """`Type: first line of the message` (with the second line too when the
    first ends with a colon, as torch.compile's "backend='inductor'
    raised:" does), shortened and safe in a markdown cell; a NotRun's
    reason as "not run: reason"."""
    if isinstance(error, NotRun):
        return f"not run: {error}"
    lines = [line.strip() for line in str(error).splitlines()
             if line.strip()]
    message = " ".join(lines[:2] if lines and lines[0].endswith(":")
                       else lines[:1])
    text = f"{type(error).__name__}: {message}"
    if len(text) > ERROR_CHARACTERS:
        text = text[:ERROR_CHARACTERS - 3] + "..."
    return "failed: " + text.replace("|", "\\|")


def _quantized_models(torch, model, calibration_input, fuse_norms):
    """(variants, has_quanto): variants are (name, model or the exception
    that building it raised) for each quantized variant of `model` (deep
    copies; `model` is left float; the fused-norms variant only when
    fuse_norms); has_quanto says whether optimum-quanto could be imported
    (its two variants are there only then). calibration_input is the one
    batch optimum-quanto W8A8 calibrates on."""
    import fp8q.torch as fpt

    def fp8q_model(activations, fuse=False):
        return fpt.quantize(copy.deepcopy(model), weights="e4m3",
                            activations=activations, fuse_norms=fuse)

    builders = [("fp8q W8A8", lambda: fp8q_model("e4m3"))]
    if fuse_norms:
        builders.append((FUSED_NAME, lambda: fp8q_model("e4m3", True)))
    builders.append(("fp8q W8A16", lambda: fp8q_model(None)))
    torchao_model = _torchao_builder(model)
    if torchao_model is not None:
        builders.append((TORCHAO_NAME, torchao_model))
    try:
        from optimum import quanto
    except ImportError:
        quanto = None
    if quanto is not None:
        def quanto_model(activations):
            theirs = copy.deepcopy(model)
            quanto.quantize(theirs, weights=quanto.qfloat8,
                            activations=activations)
            if activations is not None:
                with quanto.Calibration(), torch.inference_mode():
                    theirs(calibration_input)
            quanto.freeze(theirs)
            return theirs

        builders += [
            ("optimum-quanto qfloat8 W8A8",
             lambda: quanto_model(quanto.qfloat8)),
            ("optimum-quanto qfloat8 W8A16", lambda: quanto_model(None))]
    built = []
    for name, builder in builders:
        try:
            built.append((name, builder()))
        except Exception as error:  # noqa: BLE001 - reported in its rows
            built.append((name, error))
    return built, quanto is not None


def _torchao_builder(model):
    """A function returning a deep copy of `model` quantized by torchao's
    Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()) (its
    rowwise dynamic FP8 W8A8), or None when torchao does not import."""
    try:
        from torchao.quantization import (
            Float8DynamicActivationFloat8WeightConfig, PerRow, quantize_)
    except ImportError:
        return None

    def build():
        theirs = copy.deepcopy(model)
        quantize_(theirs, Float8DynamicActivationFloat8WeightConfig(
            granularity=PerRow()))
        return theirs
    return build


@dataclasses.dataclass
class _Workload:
    """One model's table: its float `model`, a `title` line, its `modes`
    (LLAMA_MODES or FLUX_MODES), `inputs` ((work, tokens) -> input
    tensor), `prepare(module, work, tokens)` (a function of the input
    running `module` eagerly on that work), `calibration_input`, and
    whether fp8q's fuse_norms applies (`fuse_norms`)."""

    model: object
    title: str
    modes: dict
    inputs: dict
    prepare: object
    calibration_input: object
    fuse_norms: bool


def _llama_workload(torch, device, dtype, options, token_counts):
    """The decoder's _Workload (module docstring)."""
    shape = (_bench_llama.GPU_SHAPE if device == "cuda"
             else _bench_llama.CPU_SHAPE)
    if options.layers is not None:
        shape = dataclasses.replace(shape, layers=options.layers)
    context = GPU_CONTEXT if device == "cuda" else CPU_CONTEXT
    model, source = _bench_llama.build(shape, dtype, device, SEED)
    generator = torch.Generator().manual_seed(SEED)

    def ids(count):
        return torch.randint(0, shape.vocab, (1, count),
                             generator=generator).to(device)

    inputs = {("forward", tokens): ids(tokens) for tokens in token_counts}
    inputs.update({("decode", tokens): ids(tokens)
                   for tokens in options.decode_tokens})
    context_ids = ids(context)

    def prepare(module, work, tokens):
        if work == "forward":
            return module
        decoder = _bench_decode.KVCacheDecoder(torch, module, shape,
                                               context, tokens)
        decoder.prefill(context_ids)
        return decoder.step

    title = (f"Llama-shaped decoder, {source}: {shape.describe()}; decode "
             f"steps over a KV cache of {context} positions")
    return _Workload(model, title, LLAMA_MODES, inputs, prepare,
                     ids(CALIBRATION_TOKENS), True)


def _flux_workload(torch, device, dtype, options):
    """The FLUX block's _Workload (module docstring)."""
    shape = (_bench_flux.GPU_SHAPE if device == "cuda"
             else _bench_flux.CPU_SHAPE)
    model = _bench_flux.build(shape, dtype, device, SEED)
    generator = torch.Generator().manual_seed(SEED)
    inputs = {("forward", tokens): _bench_flux.image_tokens(
                  torch, shape, tokens, dtype, device, generator)
              for tokens in options.flux_tokens or (shape.tokens,)}
    title = f"FLUX-shaped DiT block, plain torch: {shape.describe()}"
    return _Workload(
        model, title, FLUX_MODES, inputs, lambda module, work, tokens: module,
        _bench_flux.image_tokens(torch, shape, CALIBRATION_TOKENS, dtype,
                                 device, generator), False)


def _runner(torch, device, workload, module, work, tokens, how):
    """A function of the input running `module` on (work, tokens) eagerly
    (how None), captured in a CUDA graph ("graph", GPU only: NotRun on the
    CPU) or under torch.compile ("compile"); or the exception preparing it
    raised."""
    try:
        if how == "graph" and device != "cuda":
            raise NotRun("no GPU")
        function = workload.prepare(module, work, tokens)
        if how == "compile":
            return torch.compile(function)
        if how == "graph":
            return _bench_decode.cuda_graph_runner(
                torch, function, workload.inputs[(work, tokens)],
                WARM_UP_CALLS)
        return function
    except Exception as error:  # noqa: BLE001 - reported in its rows
        return error


def _cosine(torch, output, reference):
    """Cosine similarity of two output tensors, flattened, in float32."""
    return float(torch.nn.functional.cosine_similarity(
        output.float().flatten(), reference.flatten(), dim=0))


def _milliseconds(torch, device, functions, repeats):
    """Median milliseconds per call of each function (interleaved): CUDA
    events on the GPU, wall time on the CPU."""
    if device == "cuda":
        return median_ms_cuda(torch, functions, repeats)
    return [seconds * 1e3 for seconds in median_seconds(functions, repeats)]


def _table_row(mode, tokens, name, weight_bytes, milliseconds=None,
               peers=(), cosine=None, note=None):
    """One markdown row; `peers` are the peer milliseconds of the speed
    columns (None: that peer is missing, "-"); `note` replaces the
    measurements ("failed: ..." or "not run: ...")."""
    mib = "-" if weight_bytes is None else f"{weight_bytes / 2 ** 20:.2f}"
    if note is not None:
        dashes = " | ".join(["-"] * (len(peers) + 2))
        return f"| {mode} | {tokens} | {name} | {note} | {dashes} | {mib} |"
    speeds = " | ".join("-" if peer is None else f"{peer / milliseconds:.2f}x"
                        for peer in peers)
    return (f"| {mode} | {tokens} | {name} | {milliseconds:.3f} | "
            f"{tokens / milliseconds * 1e3:.1f} | {speeds} | "
            f"{cosine:.5f} | {mib} |")


def _print_workload(torch, device, dtype_name, workload, options, deadline):
    """Quantizes `workload`'s model and prints its table (module
    docstring), a group of rows (mode, token count) at a time."""
    model = workload.model
    float_name = f"torch {dtype_name}"
    quantized, has_quanto = _quantized_models(
        torch, model, workload.calibration_input, workload.fuse_norms)
    models = [(float_name, model)] + quantized
    weights = {name: (None if isinstance(module, Exception)
                      else linear_weight_bytes(module))
               for name, module in models}
    print(f"{workload.title}; {dtype_name} on {device}; median of "
          f"{options.repeats} interleaved repeats after {WARM_UP_CALLS} "
          f"warm-up calls; cosine of the outputs against {float_name} "
          "eager; weights: the linear layers' (codes and scales)")
    if not has_quanto:
        print("optimum-quanto is not installed: its rows are left out "
              "(pip install optimum-quanto)")
    if not any(name == TORCHAO_NAME for name, _ in models):
        print("torchao is not installed: its rows and column are empty")
    print()
    print(f"| mode | tokens | model | ms | tokens/s | speed vs {float_name} "
          f"eager | speed vs {float_name}, same mode | speed vs torchao, "
          "same mode | cosine | Linear weights MiB |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    eager_float_ms = {}
    with torch.inference_mode():
        references = {key: workload.prepare(model, *key)(value).float()
                      for key, value in workload.inputs.items()}
        for mode, (work, how) in workload.modes.items():
            if how == "compile" and not options.compile_models:
                continue
            torch._dynamo.reset()
            keys = sorted(key for key in workload.inputs if key[0] == work)
            with torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT):
                for key in keys:
                    runners = []
                    expired = time.monotonic() >= deadline
                    for name, module in models:
                        if expired:
                            module = NotRun("--time-limit reached")
                        elif not isinstance(module, Exception):
                            module = _runner(torch, device, workload, module,
                                             work, key[1], how)
                        runners.append((name, module))
                    _measure_group(torch, device, mode, key, runners,
                                   workload.inputs[key], references[key],
                                   weights, eager_float_ms, how is None,
                                   options.repeats)
        torch._dynamo.reset()


def _measure_group(torch, device, mode, key, runners, inputs, reference,
                   weights, eager_float_ms, eager, repeats):
    """Warms up, checks and times every runner of one (mode, (work, token
    count)) group ((name, function of the input, or the exception that
    building or preparing it raised); the float model first) and prints
    its rows. eager_float_ms maps (work, tokens) to the float model's
    eager time (filled by an `eager` group, read by the later ones)."""
    tokens = key[1]
    working, failed = [], {}
    cosines = {}
    for name, function in runners:
        if isinstance(function, Exception):
            failed[name] = _first_line(function)
            continue
        try:
            cosines[name] = _cosine(torch, function(inputs), reference)
            for _ in range(WARM_UP_CALLS - 1):
                function(inputs)
            if device == "cuda":
                torch.cuda.synchronize()
        except Exception as error:  # noqa: BLE001 - reported in its row
            failed[name] = _first_line(error)
            continue
        working.append((name, function))
    timings = dict(zip(
        [name for name, _ in working],
        _milliseconds(torch, device,
                      [functools.partial(function, inputs)
                       for _, function in working], repeats)))
    float_name = runners[0][0]
    if eager and float_name in timings:
        eager_float_ms[key] = timings[float_name]
    peers = (eager_float_ms.get(key), timings.get(float_name),
             timings.get(TORCHAO_NAME))
    for name, _ in runners:
        if name in failed:
            print(_table_row(mode, tokens, name, weights[name], peers=peers,
                             note=failed[name]), flush=True)
        else:
            print(_table_row(mode, tokens, name, weights[name],
                             milliseconds=timings[name], peers=peers,
                             cosine=cosines[name]), flush=True)


def _print_tables(device, dtype_name, options, default_tokens):
    """Both models' tables (those in options.models) on `device`."""
    import torch

    deadline = (float("inf") if options.time_limit is None
                else time.monotonic() + options.time_limit)
    dtype = getattr(torch, dtype_name)
    for name in options.models:
        print()
        if name == "llama":
            workload = _llama_workload(torch, device, dtype, options,
                                       options.tokens or default_tokens)
        else:
            workload = _flux_workload(torch, device, dtype, options)
        _print_workload(torch, device, dtype_name, workload, options,
                        deadline)
        del workload
        if device == "cuda":
            torch.cuda.empty_cache()


def print_model_benchmark(options):
    """The CPU run (module docstring): float32, the CPU shapes, forward
    token counts options.tokens (None: CPU_TOKENS); `options` is a
    ModelOptions."""
    import torch

    print(f"fp8q {fp8q.__version__} on {_info.cpu_model()}, torch "
          f"{torch.__version__} ({torch.get_num_threads()} threads), Python "
          f"{platform.python_version()}, "
          f"{datetime.date.today().isoformat()}")
    _print_tables("cpu", "float32", options, CPU_TOKENS)


def print_gpu_model_benchmark(options):
    """The GPU run (module docstring): bfloat16, the GPU shapes, forward
    token counts options.tokens (None: GPU_TOKENS); or one line saying why
    it cannot run here. `options` is a ModelOptions."""
    import torch

    reason = unavailable_reason(torch)
    if reason is not None:
        print(f"GPU model benchmark not run: {reason}")
        return
    print(f"fp8q {fp8q.__version__} on {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}, "
          f"{datetime.date.today().isoformat()}")
    _print_tables("cuda", "bfloat16", options, GPU_TOKENS)
