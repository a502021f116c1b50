"""A fake CUDA driver for tests on machines without a GPU.

tests/fake_cuda_driver.c is compiled into a shared library; FP8Q_CUDA_DRIVER
points fp8q at it and FAKE_CUDA_* variables choose its behaviour. fp8q loads
the driver once per process, so every scenario runs in a fresh interpreter
(`run_child`). The fake keeps "device memory" in host memory and runs fp8q's
kernels on the host from their launch contracts: it tests the host side
(driver loading, memory, copies, streams, argument packing, dispatch), never
the CUDA kernels themselves.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = Path(__file__).with_name("fake_cuda_driver.c")
ROOT = SOURCE.parent.parent


def build_fake_driver(directory):
    """Compiles the fake driver into `directory`; skips without a compiler
    or off Linux."""
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None or not sys.platform.startswith("linux"):
        pytest.skip("needs a C compiler and Linux to build the fake driver")
    library = Path(directory) / "libfakecuda.so"
    subprocess.run([compiler, "-std=c11", "-shared", "-fPIC",
                    "-I", str(ROOT / "csrc"), "-I", str(ROOT / "kernels"),
                    "-o", str(library), str(SOURCE)], check=True)
    return library


def child_environment(driver_path, **fake):
    """os.environ without FAKE_CUDA_* / FP8Q_CUDA_*, then the fake's."""
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith(("FAKE_CUDA_", "FP8Q_CUDA_"))}
    environment["FP8Q_CUDA_DRIVER"] = str(driver_path)
    environment.update({f"FAKE_CUDA_{name.upper()}": str(value)
                        for name, value in fake.items()})
    return environment


def run_child(driver_path, code, *args, **fake):
    """Runs `code` in a fresh interpreter on the fake driver; returns its
    stdout parsed as JSON when it printed any, else None. Fails the test
    with the child's stderr when it exits non-zero."""
    completed = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        env=child_environment(driver_path, **fake), capture_output=True,
        text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    output = completed.stdout.strip()
    return json.loads(output) if output else None
