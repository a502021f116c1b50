"""Command line of fp8q: `python -m fp8q demo` (the main job),
`python -m fp8q info [--json]`,
`python -m fp8q bench {cast,calib,gemm,linear,model} [--size N]
[--repeats R] [--full] [--device cpu|cuda|all] [--glue] [--weight-only]
[--breakdown] [--tokens T ...]
[--no-compile] [--layers N] [--models llama|flux ...] [--decode-tokens T ...]
[--flux-tokens T ...] [--time-limit S]` and
`python -m fp8q convert IN.safetensors OUT.safetensors [--granularity ...]
[--exclude PATTERN]... [--all-2d] [--quantize-float] [--format fp8q|vllm]`
and
`python -m fp8q inspect PATH`.

info prints the version, build and platform facts and a small quantize round
trip with its error; bench measures the CPU casts (against ml_dtypes and a
memcpy) and, where a GPU and PyTorch with CUDA are present, the GPU cast
(against a device copy and PyTorch), or the calibrators' updates (against
NumPy) in the same run and
prints a markdown table (docs/benchmarks.md); bench gemm times
fp8q.scaled_mm against NumPy's float32 matmul and, on a GPU with PyTorch,
against torch._scaled_mm and a bfloat16 matmul; bench linear times
fp8q.torch.Linear against nn.Linear and optimum-quanto (--glue: the
per-call overhead on tiny CPU shapes); bench model times a Llama-shaped
decoder and a FLUX-shaped block, float and FP8-quantized, eager, as
decode steps replayed from CUDA graphs and compiled; inspect prints an FP8
checkpoint's layout, tensors and what fp8q.torch.load_checkpoint would do
with each layer (docs/checkpoints.md).
"""
import argparse
import errno
import math
import os
import sys

from fp8q import _info
from fp8q._cli import (_bench, _bench_breakdown, _bench_calib,
                       _bench_cast_gpu, _bench_gemm, _bench_gemm_gpu,
                       _bench_linear, _bench_model, _bench_weight_only,
                       _convert_checkpoint, _demo)
from fp8q._cli import _inspect_checkpoint as _inspect

# The largest --size: past it the benchmarks' arrays (up to 16 bytes an
# element) would exceed what an array can address, which NumPy refuses
# with a ValueError rather than a MemoryError.
MAX_SIZE = sys.maxsize // 16


def _parse(argv):
    parser = argparse.ArgumentParser(
        prog="python -m fp8q",
        description="fp8q: exact FP8 casts, quantization, scaled matmul and "
                    "calibration.")
    commands = parser.add_subparsers(dest="command", required=True)

    info = commands.add_parser(
        "info", help="version, build and platform facts, and a quantize "
                     "round trip")
    info.add_argument("--json", action="store_true",
                      help="print the facts as JSON")

    bench = commands.add_parser(
        "bench", help="CPU benchmarks against the peers measured in the "
                      "same run (markdown table)")
    bench.add_argument("what",
                       choices=["cast", "calib", "gemm", "linear", "model"],
                       help="cast: float32 -> float8_e4m3fn casts, quantize "
                            "and dequantize; calib: calibrator updates and "
                            "amax searches; gemm: scaled_mm vs NumPy matmul; "
                            "linear: fp8q.torch.Linear vs bf16 nn.Linear and "
                            "optimum-quanto (needs torch); model: a "
                            "Llama-shaped decoder and a FLUX-shaped block, "
                            "float vs fp8q W8A8 and W8A16 (and torchao, "
                            "optimum-quanto), eager, decode steps replayed "
                            "from CUDA graphs and compiled (needs torch)")
    bench.add_argument("--size", type=int, default=_bench.DEFAULT_SIZE,
                       help="cast (CPU), calib: elements, at least 1024 "
                            "(default 16M = 2**24)")
    bench.add_argument("--repeats", type=int, default=_bench.DEFAULT_REPEATS,
                       help="timed repeats per measurement; the median is "
                            "reported (default %(default)s)")
    bench.add_argument("--full", action="store_true",
                       help="gemm, linear: the issue's whole shape sweep up "
                            "to M = 8192 and N = K = 8192 (long on a CPU); "
                            "default: a CPU-sized part of it")
    bench.add_argument("--device", choices=["cpu", "cuda", "all"],
                       default="all",
                       help="cast, gemm, linear, model: the CPU table, the "
                            "GPU table (printed only where a GPU and PyTorch "
                            "with CUDA are present), or both (default)")
    bench.add_argument("--glue", action="store_true",
                       help="linear: instead of the CPU sweep, the per-call "
                            "overhead on tiny shapes (microseconds per call "
                            "against torch.nn.Linear, float32 and bfloat16)")
    bench.add_argument("--weight-only", action="store_true",
                       help="linear, on the GPU: only the W8A16 table "
                            "(fp8q.torch.Linear with FP8 weights and "
                            "bfloat16 activations against bf16 nn.Linear, "
                            "1 to 1024 tokens)")
    bench.add_argument("--breakdown", action="store_true",
                       help="linear, on the GPU: where the W8A8 layer's time "
                            "goes (quantize, GEMM, weight-only product, "
                            "layer eager and graphed, bf16, host time, the "
                            "kernels it launches)")
    bench.add_argument("--tokens", type=int, nargs="+", metavar="T",
                       help="model: the token counts to run (default: 1 16 "
                            "128 on the CPU, 1 16 2048 8192 on the GPU); "
                            "linear --breakdown: its token counts")
    bench.add_argument("--no-compile", action="store_true",
                       help="model: no torch.compile rows")
    bench.add_argument("--layers", type=int, metavar="N",
                       help="model: decoder layers (default 4 on the GPU, "
                            "2 on the CPU)")
    bench.add_argument("--models", nargs="+",
                       choices=_bench_model.MODEL_NAMES,
                       default=list(_bench_model.MODEL_NAMES),
                       help="model: which models (default: both)")
    bench.add_argument("--decode-tokens", type=int, nargs="+", metavar="T",
                       default=list(_bench_model.DECODE_TOKENS),
                       help="model: tokens per decode step (default "
                            "%(default)s)")
    bench.add_argument("--flux-tokens", type=int, nargs="+", metavar="T",
                       help="model: image tokens of the FLUX block "
                            "(default 4096 on the GPU, 64 on the CPU)")
    bench.add_argument("--time-limit", type=float, metavar="S",
                       help="model: after S seconds (finite, > 0), the "
                            "groups left print 'not run' rows (default: no "
                            "limit)")
    commands.add_parser(
        "demo", help="the main job: FP8-quantize a sentence-embedding model "
                     "(MiniLM) and compare it with the float model")
    convert = commands.add_parser(
        "convert", help="FP8 weights with float32 scales for the Linear "
                        "weights of a safetensors checkpoint")
    convert.add_argument("input", help="the checkpoint (.safetensors)")
    convert.add_argument("output", help="where to write the FP8 checkpoint")
    convert.add_argument("--granularity", choices=["row", "tensor", "block"],
                         default="row",
                         help="one scale per output row (default), per "
                              "tensor, or per 128x128 block")
    convert.add_argument("--exclude", action="append", metavar="PATTERN",
                         help="shell-style pattern of tensor names to copy "
                              "unchanged; repeat for several (--exclude "
                              "'*embed*' --exclude lm_head.weight); a pattern "
                              "that matches no tensor is an error")
    convert.add_argument("--all-2d", action="store_true",
                         help="quantize every 2-D float tensor; default: "
                              "the Linear weights, as fp8q.torch.quantize "
                              "does (2-D tensors named *.weight, except "
                              "embedding tables such as embed_tokens, "
                              "word_embeddings, wte)")
    convert.add_argument("--quantize-float", action="store_true",
                         help="an FP8 checkpoint's float tensors (such as "
                              "an lm_head its writer left in float) are "
                              "copied as they are; this quantizes them as a "
                              "float checkpoint's")
    convert.add_argument("--format", choices=["fp8q", "vllm"],
                         default="fp8q",
                         help="fp8q (default): each weight's scale is "
                              "NAME.weight_scale; vllm: the same, except "
                              "NAME.weight_scale_inv for block scales")
    inspect = commands.add_parser(
        "inspect", help="an FP8 checkpoint's layout, tensors by dtype and "
                        "role, and what load_checkpoint would do with each "
                        "layer")
    inspect.add_argument("path", help="a .safetensors file or a folder of "
                                      "shards")
    return parser.parse_args(argv)


def main(argv=None):
    """Runs the command line; returns the process exit status. When the
    reader of stdout stops early (`python -m fp8q convert ... | head -1`),
    the command ends there quietly with status 0: every command prints its
    results as it finishes them (convert, after the file is complete)."""
    arguments = _parse(sys.argv[1:] if argv is None else argv)
    try:
        return _run(arguments)
    except OSError as error:
        if not _stdout_reader_gone(error):
            raise
        # Python's final flush of stdout would fail again: point it at
        # devnull (the Python docs' recipe for SIGPIPE).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0


def _stdout_reader_gone(error):
    """True when `error` is a write to a pipe whose reader has gone:
    BrokenPipeError (EPIPE) on POSIX; on Windows, where CPython's write() to
    such a pipe fails with EINVAL, an EINVAL OSError that names no file (an
    error opening or writing a named file carries its filename)."""
    if isinstance(error, BrokenPipeError):
        return True
    return (os.name == "nt" and error.errno == errno.EINVAL
            and error.filename is None)


def _run(arguments):
    """Runs the parsed command; returns the exit status."""
    if arguments.command == "info":
        _info.print_info(as_json=arguments.json)
    elif arguments.command == "convert":
        return _convert_checkpoint.main(arguments)
    elif arguments.command == "inspect":
        return _inspect.main(arguments)
    elif arguments.command == "demo":
        return _demo.run()
    else:
        problem = _bench_argument_problem(arguments)
        if problem is not None:
            print(f"fp8q bench: {problem}", file=sys.stderr)
            return 2
        return _run_bench(arguments)
    return 0


def _uses_size(arguments):
    """Whether the benchmark asked for reads --size: calib, and cast's CPU
    table (the others have their own shapes)."""
    return (arguments.what == "calib"
            or (arguments.what == "cast" and arguments.device != "cuda"))


def _bench_argument_problem(arguments):
    """What is wrong with the bench options, one line naming the option,
    or None: --repeats and the model counts below 1, --size below 1024 or
    past MAX_SIZE where it is used (_uses_size), a --time-limit that is no
    finite number of seconds > 0."""
    if arguments.repeats < 1:
        return f"--repeats must be >= 1, not {arguments.repeats}"
    if _uses_size(arguments) and not 1024 <= arguments.size <= MAX_SIZE:
        return (f"--size must be >= 1024 and <= {MAX_SIZE}, not "
                f"{arguments.size}")
    limit = arguments.time_limit
    if limit is not None and not (math.isfinite(limit) and limit > 0):
        return ("--time-limit must be a finite number of seconds > 0, not "
                f"{limit:g}")
    counts = ((arguments.tokens or []) + arguments.decode_tokens
              + (arguments.flux_tokens or [])
              + [1 if arguments.layers is None else arguments.layers])
    if min(counts) < 1:
        return ("--tokens, --decode-tokens, --flux-tokens and --layers must "
                "be >= 1")
    return None


def _sized(arguments, benchmark):
    """Runs a benchmark that allocates --size elements; returns the exit
    status: 2 with one line when there is not memory enough for them."""
    try:
        benchmark()
    except MemoryError:
        print(f"fp8q bench: --size {arguments.size}: not enough memory for "
              f"the arrays of bench {arguments.what} (its float32 input "
              f"alone is {arguments.size * 4 / 2**30:,.1f} GiB); give a "
              "smaller --size", file=sys.stderr)
        return 2
    return 0


def _run_bench(arguments):
    """Runs `bench` with checked options; returns the exit status."""
    model_options = _bench_model.ModelOptions(
        tokens=arguments.tokens, repeats=arguments.repeats,
        compile_models=not arguments.no_compile, layers=arguments.layers,
        models=tuple(dict.fromkeys(arguments.models)),
        decode_tokens=tuple(arguments.decode_tokens),
        flux_tokens=arguments.flux_tokens,
        time_limit=arguments.time_limit)
    if arguments.what == "calib":
        return _sized(arguments, lambda: _bench_calib.print_calib_benchmark(
            arguments.size, arguments.repeats))
    cpu_table, gpu_table = {
        "gemm": (lambda: _bench_gemm.print_gemm_benchmark(
                     arguments.full, arguments.repeats),
                 lambda: _bench_gemm_gpu.print_gpu_gemm_benchmark(
                     arguments.repeats)),
        "linear": (lambda: _bench_linear.print_glue_benchmark(
                       arguments.repeats) if arguments.glue
                   else _bench_linear.print_linear_benchmark(
                       arguments.full, arguments.repeats),
                   lambda: _bench_breakdown.print_breakdown(
                       arguments.repeats, arguments.tokens)
                   if arguments.breakdown
                   else _bench_weight_only.print_weight_only_benchmark(
                       arguments.repeats) if arguments.weight_only
                   else _bench_linear.print_gpu_linear_benchmark(
                       arguments.repeats)),
        "model": (lambda: _bench_model.print_model_benchmark(
                      model_options),
                  lambda: _bench_model.print_gpu_model_benchmark(
                      model_options)),
        "cast": (lambda: _bench.print_cast_benchmark(
                     arguments.size, arguments.repeats),
                 lambda: _bench_cast_gpu.print_gpu_cast_benchmark(
                     arguments.repeats)),
    }[arguments.what]
    if arguments.device in ("cpu", "all"):
        if arguments.what != "cast":
            cpu_table()
        elif _sized(arguments, cpu_table):
            return 2
    if arguments.device == "all":
        print()
    if arguments.device in ("cuda", "all"):
        gpu_table()
    return 0


if __name__ == "__main__":
    sys.exit(main())
