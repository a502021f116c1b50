"""The kernels' fatbin is a data file beside fp8q._C (fp8q_kernels.fatbin,
csrc/cuda/kernel_image.h), read at the first use of a GPU: found wherever
the package is, and when it is missing or damaged CUDA work fails naming
the file while CPU work is unaffected. On the fake driver, with a copy of
the package whose file is removed, truncated or replaced.
"""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fp8q
from fake_gpu import build_fake_driver, child_environment

FILE = "fp8q_kernels.fatbin"

CHILD = """
import numpy as np
import fp8q
x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
assert fp8q.cast(x, "e4m3").numpy().tobytes()  # CPU work is unaffected
try:
    fp8q.cast(fp8q.asarray(x, device="cuda"), "e4m3")
except fp8q.CudaError as error:
    print(str(error))
else:
    print("loaded")
"""


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    if not fp8q._C._build_info()["cuda_kernels"]:
        pytest.skip("this fp8q was built without CUDA kernels")
    return build_fake_driver(tmp_path_factory.mktemp("fake-cuda"))


def package_copy(tmp_path):
    """A copy of the installed package under tmp_path/site; returns the
    path of its kernel file."""
    source = Path(fp8q.__file__).parent
    if not (source / FILE).is_file():
        pytest.fail(f"{FILE} is not beside fp8q._C in {source}")
    shutil.copytree(source, tmp_path / "site" / "fp8q", symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "site" / "fp8q" / FILE


def run(fake_driver, kernel_file):
    environment = child_environment(fake_driver)
    environment["PYTHONPATH"] = str(kernel_file.parent.parent)
    completed = subprocess.run([sys.executable, "-c", CHILD],
                               cwd=kernel_file.parent.parent.parent,
                               env=environment, capture_output=True,
                               text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.strip()


def test_found_beside_the_module_wherever_the_package_is(fake_driver,
                                                         tmp_path):
    assert run(fake_driver, package_copy(tmp_path)) == "loaded"


def test_a_missing_file_fails_cuda_work_naming_it(fake_driver, tmp_path):
    kernel_file = package_copy(tmp_path)
    kernel_file.unlink()
    assert run(fake_driver, kernel_file) == (
        f"fp8q's CUDA kernels are missing: {kernel_file} cannot be read "
        "(No such file or directory); reinstall fp8q")


@pytest.mark.parametrize("damage, reason", [
    (lambda data: data[:len(data) // 2],
     "its size is not the one its header gives (truncated?)"),
    (lambda data: b"\x7fELF" + data[4:], "it is not a CUDA fatbin"),
    (lambda data: b"", "it is not a CUDA fatbin")])
def test_a_damaged_file_fails_cuda_work_naming_it(fake_driver, tmp_path,
                                                  damage, reason):
    kernel_file = package_copy(tmp_path)
    data = damage(kernel_file.read_bytes())
    kernel_file.write_bytes(data)
    assert run(fake_driver, kernel_file) == (
        f"fp8q's CUDA kernels are damaged: {kernel_file} ({len(data)} "
        f"bytes): {reason}; reinstall fp8q")


def test_info_names_the_kernel_file():
    """(No driver needed: the path is known from the module's folder.)"""
    kernel_file = fp8q._C._build_info()["kernel_file"]
    if not fp8q._C._build_info()["cuda_kernels"]:
        assert kernel_file is None
        return
    assert Path(kernel_file) == Path(fp8q._C.__file__).parent / FILE
    assert fp8q.info()["build"]["kernel_file"] == kernel_file
