"""fp8q.info() and `python -m fp8q info`: what fp8q is, how it was built,
where it runs (CPU and the x86 features its code uses, CUDA driver and
devices, which path each operation takes on each device), and whether its
main job works here (a small quantize / dequantize round trip).

Nothing here imports torch: its version is shown if it is already imported,
otherwise from its installed metadata. Nothing here runs at `import fp8q`:
CUDA is looked at only when info() is called.
"""
import importlib.metadata
import json
import os
import platform
import sys
import time

import numpy as np

import fp8q
from fp8q import _C, _scaled_mm_probe

CUBLASLT_NOT_LOOKED_UP = "not looked up: no usable CUDA device"
# What each operation does with tensors on a device where fp8q's kernels
# load, and where they do not.
CUDA_KERNELS = "cuda: fp8q's kernels"
NO_KERNELS = "unavailable: fp8q's kernels do not load on this device"
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


def _device_ops(device):
    """Which implementation each operation uses on `device` (an entry of
    _C._cuda_info()["devices"]): fp8q's CUDA kernels where they load there;
    scaled_mm per scaling mode, the path a small product of that mode took
    there (fp8q._scaled_mm_probe)."""
    if not device.get("kernels"):
        return {"cast": NO_KERNELS, "quantize": NO_KERNELS,
                "amax": NO_KERNELS,
                "scaled_mm": dict.fromkeys(_scaled_mm_probe.SCALE_SHAPES,
                                           NO_KERNELS)}
    return {"cast": CUDA_KERNELS, "quantize": CUDA_KERNELS,
            "amax": CUDA_KERNELS,
            "scaled_mm": _scaled_mm_probe.scaled_mm_paths(device["index"])}


def cublaslt_facts(cuda):
    """The "cublaslt" section of info(): {found, version, path, error,
    search, scale_modes}, with cuBLASLt loaded as the first GPU scaled_mm would,
    where a GPU is usable (after cuda_facts, so scale_modes holds what
    cuBLASLt accepted and refused of its products); else found None and a
    note."""
    if not cuda["available"]:
        return {"found": None, "note": CUBLASLT_NOT_LOOKED_UP}
    return _C._cublaslt_info()


def cuda_facts():
    """The "cuda" section of info(): _C._cuda_info() (available, reason,
    driver, devices, switches) with each device's `ops`, which runs a small
    product of each scaling mode on each device where fp8q's kernels
    load."""
    cuda = _C._cuda_info()
    for device in cuda["devices"]:
        device["ops"] = _device_ops(device)
    return cuda


def info():
    """All facts as a JSON-ready dict; see fp8q.info."""
    build = _C._build_info()
    cuda = cuda_facts()
    return {
        "fp8q": fp8q.__version__,
        "build": {
            "compiler": build["compiler"],
            "cuda_kernels": build["cuda_kernels"],
            "cuda_kernels_reason": build["cuda_kernels_reason"],
            "nvcc_version": build["nvcc_version"],
            "ptxas_version": build["ptxas_version"],
            "numpy_headers": build["numpy_build_version"],
            "build_system": build["build_system"],
            "kernel_archs": build["kernel_archs"],
            "kernel_file": build["kernel_file"],
            "kernel_ptx_file": build["kernel_ptx_file"],
            "cuda_min_driver_version": build["cuda_min_driver_version"],
            "cuda_ptx_min_driver_version": build["cuda_ptx_min_driver_version"],
        },
        "platform": {
            "system": platform.platform(),
            "machine": platform.machine(),
            "cpu": cpu_model(),
            "logical_cpus": os.cpu_count(),
        },
        "cpu_features": _C._cpu_features(),
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
        "cuda": cuda,
        "cublaslt": cublaslt_facts(cuda),
        "round_trip": round_trip(),
    }


def _cublaslt_lines(cublaslt):
    """The report's lines for info()["cublaslt"]: the outcome, then, when
    no cuBLASLt is usable, every place the search tried and why."""
    if cublaslt["found"] is None:
        return [("cublaslt", cublaslt["note"])]
    if cublaslt["found"]:
        return [("cublaslt", f"{cublaslt['version']} ({cublaslt['path']})")]
    return [("cublaslt", f"not usable: {cublaslt['error']}")] + [
        ("  tried", place) for place in cublaslt["search"]]


def _switches_text(switches):
    """The report's value for info()["cuda"]["switches"]."""
    if switches["error"] is not None:
        return f"refused: {switches['error']}"
    return (f"FP8Q_CUDA_NO_FP8_TENSOR_CORES="
            f"{int(switches['FP8Q_CUDA_NO_FP8_TENSOR_CORES'])}, "
            f"FP8Q_CUDA_GEMM_TUNING="
            f"{int(switches['FP8Q_CUDA_GEMM_TUNING'])}, "
            f"FP8Q_CUDA_SCALED_MM_PATH="
            f"{switches['FP8Q_CUDA_SCALED_MM_PATH']}, "
            f"FP8Q_CUDA_FP8_LAYER_PATH="
            f"{switches['FP8Q_CUDA_FP8_LAYER_PATH']} "
            "(docs/scaled_mm.md, \"Switches\"; docs/torch.md)")


def _cuda_lines(cuda):
    """The report's lines (name, value) for info()["cuda"]."""
    driver = cuda["driver"]
    lines = []
    if cuda["available"]:
        lines.append(("cuda", "available"))
    else:
        lines.append(("cuda", f"not available: {cuda['reason']}"))
    lines.append(("  switches", _switches_text(cuda["switches"])))
    if driver is not None:
        lines.append(("  driver", f"{driver['version'] or 'unknown version'}"
                                  f" ({driver['path']})"))
    for device in cuda["devices"]:
        name = f"  cuda:{device['index']}"
        if "error" in device:
            lines.append((name, device["error"]))
            continue
        memory = device["memory_bytes"] / 2**30
        fp8 = "native FP8" if device["native_fp8"] else "no native FP8"
        lines.append((name, f"{device['name']}, compute capability "
                            f"{device['compute_capability']}, "
                            f"{memory:.1f} GiB, {fp8}"))
        ops = device["ops"]
        lines.append(("    cast/quantize/amax", ops["cast"]))
        lines += [(f"    scaled_mm {mode}", path)
                  for mode, path in ops["scaled_mm"].items()]
        if device["fp8_layer_weight_only_tokens"] is not None:
            lines.append(("    W8A8 layer, weight-only up to",
                          f"{device['fp8_layer_weight_only_tokens']} tokens"))
        if device["kernels_error"] and cuda["available"]:
            lines.append(("    kernels", device["kernels_error"]))
    return lines


def _cpu_feature_lines(features):
    """The report's lines (name, value) for info()["cpu_features"]."""
    return [(f"  {name}", f"used by {use['by']}" if use["used"]
             else f"not used: {use['why_not']}")
            for name, use in features.items()]


def _kernel_file_lines(build):
    """The report's lines for the two kernel files: each one's path and
    what it holds (the real code's sm_ targets; the compute_ PTX, which
    only a GPU none of the real code fits reads); none without kernels."""
    archs = build["kernel_archs"]
    real = ", ".join(arch for arch in archs if arch.startswith("sm_"))
    ptx = ", ".join(arch for arch in archs if arch.startswith("compute_"))
    lines = []
    if build["kernel_file"]:
        lines.append(("  kernel file", f"{build['kernel_file']} (real code: {real})"))
    if build["kernel_ptx_file"]:
        lines.append(("  kernel PTX file",
                      f"{build['kernel_ptx_file']} ({ptx}; read only for a GPU "
                      "newer than the real code)"))
    return lines


def print_info(as_json=False):
    """Prints info(), as a readable report or as JSON."""
    facts = info()
    if as_json:
        print(json.dumps(facts, indent=2))
        return
    build = facts["build"]
    machine = facts["platform"]
    python = facts["python"]
    trip = facts["round_trip"]
    if build["cuda_kernels"]:
        driver = build["cuda_min_driver_version"]
        kernels = (f"yes: {', '.join(build['kernel_archs'])} (driver >= "
                   f"{driver // 1000}.{driver % 1000 // 10})")
    else:
        kernels = f"no ({build['cuda_kernels_reason']})"
    nvcc = f"; nvcc {build['nvcc_version']}" if build["nvcc_version"] else ""
    if build["ptxas_version"]:
        nvcc += f", ptxas {build['ptxas_version']}"
    lines = [
        ("fp8q", facts["fp8q"]),
        ("compiler", build["compiler"]),
        ("cuda kernels", f"{kernels}{nvcc}"),
        *_kernel_file_lines(build),
        ("numpy headers", build["numpy_headers"]),
        ("platform", f"{machine['system']} ({machine['machine']})"),
        ("cpu", f"{machine['cpu']}, {machine['logical_cpus']} logical CPUs"),
        *_cpu_feature_lines(facts["cpu_features"]),
        ("python", f"{python['version']} ({python['implementation']}) "
                   f"{python['executable']}"),
    ]
    lines += [(name, version or "not installed")
              for name, version in facts["packages"].items()]
    lines += [
        ("threads", str(facts["threads"])),
    ]
    lines += _cuda_lines(facts["cuda"])
    lines += _cublaslt_lines(facts["cublaslt"])
    lines += [
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
