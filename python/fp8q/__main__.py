"""Command line of fp8q: `python -m fp8q info [--json]` and
`python -m fp8q bench {cast,calib} [--size N] [--repeats R]`.

info prints the version, build and platform facts and a small quantize round
trip with its error; bench measures the CPU casts (against ml_dtypes and a
memcpy) or the calibrators' updates (against NumPy) in the same run and
prints a markdown table (docs/benchmarks.md).
"""
import argparse
import sys

from fp8q import _bench, _bench_calib, _info


def _parse(argv):
    parser = argparse.ArgumentParser(
        prog="python -m fp8q",
        description="fp8q: exact FP8 casts and quantization.")
    commands = parser.add_subparsers(dest="command", required=True)

    info = commands.add_parser(
        "info", help="version, build and platform facts, and a quantize "
                     "round trip")
    info.add_argument("--json", action="store_true",
                      help="print the facts as JSON")

    bench = commands.add_parser(
        "bench", help="CPU benchmarks against the peers measured in the "
                      "same run (markdown table)")
    bench.add_argument("what", choices=["cast", "calib"],
                       help="cast: float32 -> float8_e4m3fn casts, quantize "
                            "and dequantize; calib: calibrator updates and "
                            "amax searches")
    bench.add_argument("--size", type=int, default=_bench.DEFAULT_SIZE,
                       help="elements (default 16M = 2**24)")
    bench.add_argument("--repeats", type=int, default=_bench.DEFAULT_REPEATS,
                       help="timed repeats per measurement; the median is "
                            "reported (default %(default)s)")
    return parser.parse_args(argv)


def main(argv=None):
    """Runs the command line; returns the process exit status."""
    arguments = _parse(sys.argv[1:] if argv is None else argv)
    if arguments.command == "info":
        _info.print_info(as_json=arguments.json)
    else:
        if arguments.size < 1024 or arguments.repeats < 1:
            print("fp8q bench: --size must be >= 1024 and --repeats >= 1",
                  file=sys.stderr)
            return 2
        benchmark = {"cast": _bench.print_cast_benchmark,
                     "calib": _bench_calib.print_calib_benchmark}
        benchmark[arguments.what](arguments.size, arguments.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
