"""`python -m fp8q bench model`: a Llama-shaped decoder with random weights
(fp8q._cli._bench_llama) as a float model, fp8q W8A8 and W8A16
(fp8q.torch.quantize, e4m3 weights with row scales; every nn.Linear,
lm_head included), fp8q W8A8 with fuse_norms=True (each decoder norm
writes the per-token FP8 codes its q/k/v or gate/up layers read), when
torchao imports its Float8DynamicActivationFloat8WeightConfig(PerRow())
(rowwise dynamic FP8, on GPUs that have FP8 tensor cores), and when
optimum-quanto is installed, its qfloat8 W8A8
(static activation scales from one calibration batch) and W8A16, each
eager, under torch.compile and, on the GPU only, under
torch.compile(mode="reduce-overhead") (CUDA graphs).

Per mode, token count and model: the median time of a forward pass (after
warm-up calls; the models take turns within every round: wall time on the
CPU, CUDA-event time on the GPU), the speed against the float model eager
and in the same mode, the cosine of the logits against the float model's
eager logits, and the weight memory of the linear layers. A model or mode
that fails (quantization, compilation, a CUDA graph capture) shows the
exception's first line in its row, and the run goes on.

The GPU run: bfloat16, GPU_SHAPE (4 layers of Llama-3-8B's shape), tokens
1, 16, 2048, 8192. The CPU run: float32, CPU_SHAPE (2 small layers),
tokens 1, 16, 128, short enough for CI. Rows are printed as they are
measured. Results go to docs/benchmarks.md; no test asserts timings.
"""
import copy
import datetime
import functools
import platform

import fp8q
from fp8q import _info
from fp8q._cli import _bench_llama
from fp8q._cli._bench import SEED, median_seconds
from fp8q._cli._bench_gpu import median_ms_cuda, unavailable_reason
from fp8q._cli._weight_memory import linear_weight_bytes

CPU_TOKENS = (1, 16, 128)
GPU_TOKENS = (1, 16, 2048, 8192)
CALIBRATION_TOKENS = 64  # optimum-quanto W8A8's one calibration batch
WARM_UP_CALLS = 3  # before timing: compiles, then records CUDA graphs
# Mode name -> torch.compile's mode (None: eager).
CPU_MODES = {"eager": None, "torch.compile": "default"}
GPU_MODES = dict(CPU_MODES, **{"reduce-overhead": "reduce-overhead"})
ERROR_CHARACTERS = 160  # of an exception's first line, in its row
# Each quantized copy is a new guard set on the model's forward code:
# room for every model at two shapes (static, then dynamic) per mode.
RECOMPILE_LIMIT = 64


def _first_line(error):
    """`Type: first line of the message` (with the second line too when the
    first ends with a colon, as torch.compile's "backend='inductor'
    raised:" does), shortened and safe in a markdown cell."""
    lines = [line.strip() for line in str(error).splitlines()
             if line.strip()]
    message = " ".join(lines[:2] if lines and lines[0].endswith(":")
                       else lines[:1])
    text = f"{type(error).__name__}: {message}"
    if len(text) > ERROR_CHARACTERS:
        text = text[:ERROR_CHARACTERS - 3] + "..."
    return text.replace("|", "\\|")


def _quantized_models(torch, model, calibration_ids):
    """(variants, has_quanto): variants are (name, model or the exception
    that building it raised) for each quantized variant of `model` (deep
    copies; `model` is left float); has_quanto says whether optimum-quanto
    could be imported (its two variants are there only then)."""
    import fp8q.torch as fpt

    def fp8q_model(activations, fuse_norms=False):
        return fpt.quantize(copy.deepcopy(model), weights="e4m3",
                            activations=activations, fuse_norms=fuse_norms)

    builders = [("fp8q W8A8", lambda: fp8q_model("e4m3")),
                ("fp8q W8A8 fused norms", lambda: fp8q_model("e4m3", True)),
                ("fp8q W8A16", lambda: fp8q_model(None))]
    torchao_model = _torchao_builder(model)
    if torchao_model is not None:
        builders.append(("torchao float8 rowwise W8A8", torchao_model))
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
                    theirs(calibration_ids)
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


def _runner(torch, module, compile_mode):
    """A function of the token ids running `module` eagerly, or compiled
    in `compile_mode` (for "reduce-overhead", each call starts a new CUDA
    graph step, as an inference loop does); or the exception torch.compile
    raised."""
    if compile_mode is None:
        return module
    try:
        compiled = torch.compile(module, mode=compile_mode)
    except Exception as error:  # noqa: BLE001 - reported in its rows
        return error
    if compile_mode != "reduce-overhead":
        return compiled

    def step(ids):
        torch.compiler.cudagraph_mark_step_begin()
        return compiled(ids)
    return step


def _cosine(torch, output, reference):
    """Cosine similarity of two logit tensors, flattened, in float32."""
    return float(torch.nn.functional.cosine_similarity(
        output.float().flatten(), reference.flatten(), dim=0))


def _milliseconds(torch, device, functions, repeats):
    """Median milliseconds per call of each function (interleaved): CUDA
    events on the GPU, wall time on the CPU."""
    if device == "cuda":
        return median_ms_cuda(torch, functions, repeats)
    return [seconds * 1e3 for seconds in median_seconds(functions, repeats)]


def _table_row(mode, tokens, name, weight_bytes, milliseconds=None,
               eager_float_ms=None, mode_float_ms=None, cosine=None,
               error=None):
    """One markdown row; ratios whose float peer is missing print "-"."""
    def speed(peer):
        return "-" if peer is None else f"{peer / milliseconds:.2f}x"

    mib = "-" if weight_bytes is None else f"{weight_bytes / 2 ** 20:.1f}"
    if error is not None:
        return (f"| {mode} | {tokens} | {name} | failed: {error} | - | - "
                f"| - | {mib} |")
    return (f"| {mode} | {tokens} | {name} | {milliseconds:.3f} | "
            f"{speed(eager_float_ms)} | {speed(mode_float_ms)} | "
            f"{cosine:.5f} | {mib} |")


def print_model_table(device, dtype_name, shape, token_counts, modes,
                      repeats):
    """Builds the models on `device` ("cpu" or "cuda") in torch dtype
    `dtype_name` and prints the table (module docstring), a row as soon as
    its group (mode, token count) is measured."""
    import torch

    dtype = getattr(torch, dtype_name)
    model, source = _bench_llama.build(shape, dtype, device, SEED)
    generator = torch.Generator().manual_seed(SEED)
    ids = {tokens: torch.randint(0, shape.vocab, (1, tokens),
                                 generator=generator).to(device)
           for tokens in token_counts}
    calibration_ids = torch.randint(0, shape.vocab, (1, CALIBRATION_TOKENS),
                                    generator=generator).to(device)
    float_name = f"torch {dtype_name}"
    quantized, has_quanto = _quantized_models(torch, model, calibration_ids)
    models = [(float_name, model)] + quantized
    weights = {name: (None if isinstance(module, Exception)
                      else linear_weight_bytes(module))
               for name, module in models}
    print(f"{source}: {shape.describe()}; {dtype_name} on {device}; "
          f"median of {repeats} interleaved repeats after "
          f"{WARM_UP_CALLS} warm-up calls; cosine of the logits against "
          f"{float_name} eager; weights: the linear layers' (codes and "
          "scales)")
    if not has_quanto:
        print("optimum-quanto is not installed: its rows are left out "
              "(pip install optimum-quanto)")
    print()
    print(f"| mode | tokens | model | ms | speed vs {float_name} eager | "
          f"speed vs {float_name}, same mode | cosine | Linear weights MiB |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    eager_float_ms = {}
    with torch.inference_mode():
        references = {tokens: model(ids[tokens]).float()
                      for tokens in token_counts}
        for mode, compile_mode in modes.items():
            torch._dynamo.reset()
            runners = [(name, module if isinstance(module, Exception)
                        else _runner(torch, module, compile_mode))
                       for name, module in models]
            with torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT):
                for tokens in token_counts:
                    _measure_group(torch, device, mode, tokens, runners,
                                   ids[tokens], references[tokens], weights,
                                   eager_float_ms, repeats)
        torch._dynamo.reset()


def _measure_group(torch, device, mode, tokens, runners, ids, reference,
                   weights, eager_float_ms, repeats):
    """Warms up, checks and times every runner of one (mode, token count)
    group ((name, function of the ids, or the exception that building the
    model raised); the float model first) and prints its rows.
    eager_float_ms maps token counts to the float model's eager time
    (filled by the eager group, read by the later ones)."""
    working, failed = [], {}
    cosines = {}
    for name, function in runners:
        if isinstance(function, Exception):
            failed[name] = _first_line(function)
            continue
        try:
            cosines[name] = _cosine(torch, function(ids), reference)
            for _ in range(WARM_UP_CALLS - 1):
                function(ids)
            if device == "cuda":
                torch.cuda.synchronize()
        except Exception as error:  # noqa: BLE001 - reported in its row
            failed[name] = _first_line(error)
            continue
        working.append((name, function))
    timings = dict(zip(
        [name for name, _ in working],
        _milliseconds(torch, device,
                      [functools.partial(function, ids)
                       for _, function in working], repeats)))
    float_name = runners[0][0]
    if mode == "eager" and float_name in timings:
        eager_float_ms[tokens] = timings[float_name]
    for name, _ in runners:
        if name in failed:
            print(_table_row(mode, tokens, name, weights[name],
                             error=failed[name]), flush=True)
        else:
            print(_table_row(mode, tokens, name, weights[name],
                             milliseconds=timings[name],
                             eager_float_ms=eager_float_ms.get(tokens),
                             mode_float_ms=timings.get(float_name),
                             cosine=cosines[name]), flush=True)


def print_model_benchmark(token_counts, repeats, compile_models):
    """The CPU run (module docstring): float32, CPU_SHAPE, `token_counts`
    (None: CPU_TOKENS), eager and, when compile_models, torch.compile."""
    import torch

    print(f"fp8q {fp8q.__version__} on {_info.cpu_model()}, torch "
          f"{torch.__version__} ({torch.get_num_threads()} threads), Python "
          f"{platform.python_version()}, "
          f"{datetime.date.today().isoformat()}")
    modes = CPU_MODES if compile_models else {"eager": None}
    print_model_table("cpu", "float32", _bench_llama.CPU_SHAPE,
                      token_counts or CPU_TOKENS, modes, repeats)


def print_gpu_model_benchmark(token_counts, repeats, compile_models):
    """The GPU run (module docstring): bfloat16, GPU_SHAPE, `token_counts`
    (None: GPU_TOKENS), eager and, when compile_models, torch.compile and
    reduce-overhead; or one line saying why it cannot run here."""
    import torch

    reason = unavailable_reason(torch)
    if reason is not None:
        print(f"GPU model benchmark not run: {reason}")
        return
    print(f"fp8q {fp8q.__version__} on {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}, "
          f"{datetime.date.today().isoformat()}")
    modes = GPU_MODES if compile_models else {"eager": None}
    print_model_table("cuda", "bfloat16", _bench_llama.GPU_SHAPE,
                      token_counts or GPU_TOKENS, modes, repeats)
