"""`python -m fp8q bench cast`: CPU throughput of fp8q's casts, quantize and
dequantize against their peers measured in the same run.

Every number is the median of --repeats timed calls after one warm-up call;
an fp8q function and its peer take turns within every round, so load changes
on the machine hit both alike.

The peers: ml_dtypes' astype for the cast (both allocate their result); a
memcpy (NumPy copyto between preallocated buffers) moving as many bytes as the
cast reads and writes, for the cast into a preallocated out=; and the
equivalent NumPy + ml_dtypes expressions for quantize and dequantize. GB/s
counts bytes read plus bytes written. Results go to docs/benchmarks.md; no
test asserts timings.
"""
import dataclasses
import datetime
import platform
import statistics
import time

import numpy as np

import fp8q
from fp8q import _info

DEFAULT_SIZE = 1 << 24
DEFAULT_REPEATS = 7
ROW_LENGTH = 1024
SEED = 0
ACCEPTANCE_RATIO = 10.0


def median_seconds(functions, repeats, calls=1, synchronize=None):
    """Median wall time per call of each of `functions`, in seconds: one
    warm-up call each, then `repeats` rounds in which every function takes
    one sample (in turn, so that a change in the machine's load hits all of
    them alike and their ratios stay fair). A sample times `calls`
    back-to-back calls and is divided by `calls`. `synchronize`, when
    given, is called before and after every sample, outside the timed
    span: with a device's synchronisation there, a sample is the host's
    time to enqueue `calls` calls with no waiting in between."""
    for function in functions:
        function()
    times = [[] for _ in functions]
    for _ in range(repeats):
        for index, function in enumerate(functions):
            if synchronize is not None:
                synchronize()
            start = time.perf_counter()
            for _ in range(calls):
                function()
            times[index].append((time.perf_counter() - start) / calls)
            if synchronize is not None:
                synchronize()
    return [statistics.median(samples) for samples in times]


def _with_threads(count, function):
    """function, run with fp8q using `count` threads."""
    def run():
        previous = fp8q.get_num_threads()
        fp8q.set_num_threads(count)
        try:
            return function()
        finally:
            fp8q.set_num_threads(previous)
    return run


@dataclasses.dataclass
class _Row:
    """One measurement: what ran, how many bytes it moved, and the keys of
    the rows it is compared with, as (peer key, label) pairs; `seconds` is
    set once the row is measured."""

    key: str
    operation: str
    implementation: str
    threads: int
    function: object
    moved: int
    peers: tuple = ()
    seconds: float | None = dataclasses.field(default=None, init=False)


class _Table:
    """Rows measured in interleaved groups."""

    def __init__(self, repeats):
        self.repeats = repeats
        self.rows = []
        self.by_key = {}

    def measure_group(self, rows):
        """Times the rows of one group, interleaved."""
        timings = median_seconds([row.function for row in rows],
                                 self.repeats)
        for row, seconds in zip(rows, timings):
            row.seconds = seconds
            self.rows.append(row)
            self.by_key[row.key] = row

    def speedup(self, key, peer):
        """How many times faster row `key` is than row `peer`."""
        return self.by_key[peer].seconds / self.by_key[key].seconds

    def markdown(self):
        lines = ["| operation | implementation | threads | median ms | GB/s "
                 "| vs peer (same run) |",
                 "|---|---|---:|---:|---:|---|"]
        for row in self.rows:
            comparison = "; ".join(
                f"{self.speedup(row.key, peer):.2f}x {label}"
                for peer, label in row.peers) or "peer"
            lines.append(f"| {row.operation} | {row.implementation} "
                         f"| {row.threads} | {row.seconds * 1e3:.2f} "
                         f"| {row.moved / row.seconds / 1e9:.2f} "
                         f"| {comparison} |")
        return "\n".join(lines)


def measure(size, repeats):
    """Runs every measurement; returns the filled _Table."""
    import ml_dtypes

    e4m3 = ml_dtypes.float8_e4m3fn
    x = np.random.default_rng(SEED).standard_normal(size, dtype=np.float32)
    threads = fp8q.get_num_threads()
    table = _Table(repeats)

    cast = "cast float32 -> float8_e4m3fn"
    cast_bytes = size * (4 + 1)
    out = fp8q.empty(x.shape, "float8_e4m3fn")
    copy_source = np.ones(cast_bytes // 2, dtype=np.uint8)
    copy_destination = np.zeros_like(copy_source)
    table.measure_group([
        _Row("astype", cast, "ml_dtypes astype", 1, lambda: x.astype(e4m3),
             cast_bytes),
        _Row("cast-1", cast, "fp8q.cast", 1,
             _with_threads(1, lambda: fp8q.cast(x, "float8_e4m3fn")),
             cast_bytes, [("astype", "ml_dtypes astype speed")]),
    ])
    table.measure_group([
        _Row("memcpy", "memcpy of the same bytes moved", "numpy copyto", 1,
             lambda: np.copyto(copy_destination, copy_source), cast_bytes),
    ] + [
        _Row(f"cast-out-{count}", cast + " into out=", "fp8q.cast(out=)",
             count, _with_threads(count, lambda: fp8q.cast(
                 x, "float8_e4m3fn", out=out)),
             cast_bytes, [("memcpy", "memcpy speed")])
        for count in sorted({1, threads})
    ])

    matrix = x[:size - size % ROW_LENGTH].reshape(-1, ROW_LENGTH)
    n_rows = matrix.shape[0]
    quantize_bytes = matrix.size * (4 + 1) + n_rows * 4
    e4m3_max = np.float32(fp8q.finfo("float8_e4m3fn").max)

    def numpy_quantize():
        scale = np.abs(matrix).max(axis=-1, keepdims=True) / e4m3_max
        return (matrix / scale).astype(e4m3), scale

    def fp8q_quantize():
        return fp8q.quantize(matrix, "float8_e4m3fn", granularity="row")

    codes, scale = numpy_quantize()
    q = fp8q_quantize()
    operations = [
        ("quantize", f"quantize row ({n_rows}x{ROW_LENGTH}) -> e4m3fn",
         numpy_quantize, fp8q_quantize, "fp8q.quantize"),
        ("dequantize", f"dequantize row ({n_rows}x{ROW_LENGTH}) -> float32",
         lambda: codes.astype(np.float32) * scale, q.dequantize,
         "fp8q.dequantize"),
    ]
    for key, operation, peer, function, name in operations:
        table.measure_group([
            _Row(key, operation, "NumPy + ml_dtypes", 1, peer,
                 quantize_bytes),
        ] + [
            _Row(f"{key}-{count}", operation, name, count,
                 _with_threads(count, function), quantize_bytes,
                 [(key, "NumPy + ml_dtypes speed")])
            for count in sorted({1, threads})
        ])
    return table


def print_cast_benchmark(size, repeats):
    """Runs the benchmark and prints it as markdown, with the verdict on the
    acceptance criterion (single-thread fp8q.cast >= 10x ml_dtypes)."""
    table = measure(size, repeats)
    print(f"fp8q {fp8q.__version__} on {_info.cpu_model()} "
          f"({fp8q.get_num_threads()} threads), Python "
          f"{platform.python_version()}, NumPy {np.__version__}, "
          f"{datetime.date.today().isoformat()}")
    print(f"{size} elements, median of {repeats} interleaved repeats after a "
          "warm-up")
    print()
    print(table.markdown())
    print()
    ratio = table.speedup("cast-1", "astype")
    verdict = "met" if ratio >= ACCEPTANCE_RATIO else "NOT met"
    print(f"single-thread fp8q.cast vs ml_dtypes astype: {ratio:.2f}x "
          f"(criterion >= {ACCEPTANCE_RATIO:g}x: {verdict})")
