"""`python -m fp8q info`: what fp8q is, how it was built, where it runs, and
whether its main job works here (a small quantize / dequantize round trip).

Nothing here imports torch: its version is shown if it is already imported,
otherwise from its installed metadata.
"""
import importlib.metadata
import json
import os
import platform
import sys
import time

import numpy as np

import fp8q
from fp8q import _C

CUDA_UNAVAILABLE_REASON = ("fp8q was built without CUDA kernels (CUDA backend "
                           "arrives in a later release)")
ROUND_TRIP_SHAPE = (1024, 1024)
ROUND_TRIP_SEED = 0


def cpu_model():
    """The processor's marketing name where the OS tells it, else
    platform.processor()."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _package_version(name):
    """Version of an imported module, else of the installed distribution
    (without importing it), else None."""
    module = sys.modules.get(name)
    if module is not None:
        return getattr(module, "__version__", "unknown")
    try:
        return importlib.metadata.version(name) + " (installed, not imported)"
    except importlib.metadata.PackageNotFoundError:
        return None


def round_trip():
    """Quantizes N(0, 1) float32 data to float8_e4m3fn with row scales and
    back; returns the errors and the time taken."""
    x = np.random.default_rng(ROUND_TRIP_SEED).standard_normal(
        ROUND_TRIP_SHAPE, dtype=np.float32)
    start = time.perf_counter()
    q = fp8q.quantize(x, "float8_e4m3fn", granularity="row")
    restored = q.dequantize().numpy()
    seconds = time.perf_counter() - start

    x64 = x.astype(np.float64)
    error = np.abs(restored.astype(np.float64) - x64)
    nonzero = x64 != 0
    relative = error[nonzero] / np.abs(x64[nonzero])
    # Within the format's normal range the bound is half an ulp, 2**-4.
    scaled = np.abs(x64) / q.scale.numpy().astype(np.float64)
    normal = scaled >= fp8q.finfo("float8_e4m3fn").tiny
    return {
        "input": f"{ROUND_TRIP_SHAPE[0]}x{ROUND_TRIP_SHAPE[1]} float32 "
                 f"N(0, 1), seed {ROUND_TRIP_SEED}",
        "dtype": "float8_e4m3fn",
        "granularity": "row",
        "max_relative_error_normal_range":
            float((error[normal] / np.abs(x64[normal])).max()),
        "mean_relative_error": float(relative.mean()),
        "max_abs_error": float(error.max()),
        "milliseconds": seconds * 1e3,
    }


def collect():
    """All facts as a JSON-ready dict."""
    build = _C._build_info()
    return {
        "fp8q": fp8q.__version__,
        "build": {
            "compiler": build["compiler"],
            "cuda_kernels": build["cuda_kernels"],
            "cuda_kernels_reason": build["cuda_kernels_reason"],
            "nvcc_version": build["nvcc_version"],
            "numpy_headers": build["numpy_build_version"],
            "build_system": build["build_system"],
        },
        "platform": {
            "system": platform.platform(),
            "machine": platform.machine(),
            "cpu": cpu_model(),
            "logical_cpus": os.cpu_count(),
        },
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "packages": {
            "numpy": np.__version__,
            "ml_dtypes": _package_version("ml_dtypes"),
            "torch": _package_version("torch"),
        },
        "threads": fp8q.get_num_threads(),
        "cuda": {"available": False, "reason": CUDA_UNAVAILABLE_REASON},
        "round_trip": round_trip(),
    }


def print_info(as_json=False):
    """Prints the facts, as text or as JSON."""
    facts = collect()
    if as_json:
        print(json.dumps(facts, indent=2))
        return
    build = facts["build"]
    machine = facts["platform"]
    python = facts["python"]
    trip = facts["round_trip"]
    kernels = "yes" if build["cuda_kernels"] else "no"
    nvcc = f"; nvcc {build['nvcc_version']}" if build["nvcc_version"] else ""
    lines = [
        ("fp8q", facts["fp8q"]),
        ("compiler", build["compiler"]),
        ("cuda kernels", f"{kernels} ({build['cuda_kernels_reason']}){nvcc}"),
        ("numpy headers", build["numpy_headers"]),
        ("platform", f"{machine['system']} ({machine['machine']})"),
        ("cpu", f"{machine['cpu']}, {machine['logical_cpus']} logical CPUs"),
        ("python", f"{python['version']} ({python['implementation']}) "
                   f"{python['executable']}"),
    ]
    lines += [(name, version or "not installed")
              for name, version in facts["packages"].items()]
    lines += [
        ("threads", str(facts["threads"])),
        ("cuda", f"not available: {facts['cuda']['reason']}"),
        ("round trip", f"{trip['input']} -> {trip['dtype']} "
                       f"({trip['granularity']} scales) -> float32"),
        ("  max rel error", f"{trip['max_relative_error_normal_range']:.6f} "
                            "(values in the normal range; bound 2**-4 = "
                            "0.0625)"),
        ("  mean rel error", f"{trip['mean_relative_error']:.6f} "
                             "(all nonzero values)"),
        ("  time", f"{trip['milliseconds']:.1f} ms (quantize + dequantize)"),
    ]
    width = max(len(name) for name, _ in lines)
    for name, value in lines:
        print(f"{name:<{width}}  {value}")
