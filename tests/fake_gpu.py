"""A fake CUDA driver and a fake cuBLASLt for tests on machines without a GPU.

tests/fake_cuda_driver.c with tests/fake_cuda_streams.c, and
tests/fake_cublaslt.c, are compiled into shared libraries; FP8Q_CUDA_DRIVER and FP8Q_CUBLASLT point fp8q at them, and
FAKE_CUDA_* (keywords of run_child) and FAKE_CUBLASLT_* (keywords starting
with cublaslt_) choose their behaviour. fp8q loads
the driver once per process, so every scenario runs in a fresh interpreter
(`run_child`). The fakes keep "device memory" in host memory, run fp8q's
kernels on the host from their launch contracts and cuBLASLt's matmul with
BLAS's column-major semantics: they test the host side (driver and library
loading, memory, copies, streams, argument packing, dispatch, the cuBLASLt
calls), never the CUDA kernels or cuBLASLt themselves.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
ROOT = TESTS.parent
# The fake cuBLASLt is built beside the fake driver, under this name.
CUBLASLT_NAME = "libfakecublaslt.so"


def write_kernel_list(directory):
    """Writes the generated kernel list (fp8q_kernel_list.h, which
    csrc/cuda/kernel_list.h includes) into `directory` with
    csrc/registries.py, as CMakeLists.txt does for the module; returns
    `directory`, to put on a compiler's include path."""
    subprocess.run([sys.executable, str(ROOT / "csrc" / "registries.py"), "kernels",
                    str(directory)], check=True)
    return Path(directory)


def build_fake_driver(directory):
    """Compiles the fake driver (and the fake cuBLASLt beside it) into
    `directory`; returns the driver's path. Skips without a C compiler or
    off Linux."""
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None or not sys.platform.startswith("linux"):
        pytest.skip("needs a C compiler and Linux to build the fake driver")
    if not (ROOT / "csrc").is_dir() or not (ROOT / "kernels").is_dir():
        pytest.skip(f"the fake driver is built from csrc/ and kernels/, not found beside "
                    f"{TESTS} (copy them from the source tree)")
    directory = Path(directory)
    generated = write_kernel_list(directory / "generated")
    for sources, name in ((("fake_cuda_driver.c", "fake_cuda_streams.c"),
                           "libfakecuda.so"),
                          (("fake_cublaslt.c",), CUBLASLT_NAME)):
        subprocess.run([compiler, "-std=c11", "-O1", "-ffp-contract=off",
                        "-shared", "-fPIC", "-pthread", "-I",
                        str(ROOT / "csrc"), "-I", str(ROOT / "kernels"),
                        "-I", str(generated), "-o", str(directory / name),
                        *(str(TESTS / source) for source in sources)],
                       check=True)
    return directory / "libfakecuda.so"


def fake_variable(name):
    """The environment variable of a run_child keyword: FAKE_CUBLASLT_X
    for cublaslt_x, else FAKE_CUDA_X."""
    if name.startswith("cublaslt_"):
        return "FAKE_CUBLASLT_" + name[len("cublaslt_"):].upper()
    return "FAKE_CUDA_" + name.upper()


def child_environment(driver_path, **fake):
    """os.environ without FAKE_CUDA_* / FP8Q_CUDA_* / FP8Q_CUBLASLT, then
    the fake driver's (and the fake cuBLASLt beside it, when built)."""
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith(("FAKE_CUDA_", "FAKE_CUBLASLT_",
                                           "FP8Q_CUDA_", "FP8Q_CUBLASLT"))}
    environment["FP8Q_CUDA_DRIVER"] = str(driver_path)
    cublaslt = Path(driver_path).with_name(CUBLASLT_NAME)
    if cublaslt.exists():
        environment["FP8Q_CUBLASLT"] = str(cublaslt)
    environment.update({fake_variable(name): str(value)
                        for name, value in fake.items()})
    return environment


def run_child(driver_path, code, *args, environment=None, **fake):
    """Runs `code` in a fresh interpreter on the fake driver (with the
    variables of `environment` set too); returns its stdout parsed as JSON
    when it printed any, else None. Fails the test with the child's stderr
    when it exits non-zero."""
    variables = child_environment(driver_path, **fake)
    variables.update(environment or {})
    completed = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], env=variables,
        capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    output = completed.stdout.strip()
    return json.loads(output) if output else None
