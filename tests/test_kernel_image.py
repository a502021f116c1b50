"""The kernels' fatbins are data files beside fp8q._C (fp8q_kernels.fatbin,
the real code, and fp8q_kernels_ptx.fatbin, the PTX; csrc/cuda/kernel_image.h),
read at the first use of a GPU that needs them: found wherever the package
is, and when one is missing or damaged CUDA work fails naming the file while
CPU work is unaffected. The PTX file is read only for a GPU that none of
the real code fits. On the fake driver, with a copy of the package whose
files are removed, truncated or replaced.
"""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fp8q
from fake_gpu import build_fake_driver, child_environment
from test_fatbin_images import entry
from test_fatbin_images import fatbin as fatbin_bytes

FILE = "fp8q_kernels.fatbin"
PTX_FILE = "fp8q_kernels_ptx.fatbin"

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


def run(fake_driver, kernel_file, **fake):
    environment = child_environment(fake_driver, **fake)
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


def test_info_names_the_ptx_file_beside_the_real_code():
    build = fp8q._C._build_info()
    if not build["cuda_kernels"]:
        assert build["kernel_ptx_file"] is None
        return
    assert Path(build["kernel_ptx_file"]) == Path(fp8q._C.__file__).parent / PTX_FILE
    assert fp8q.info()["build"]["kernel_ptx_file"] == build["kernel_ptx_file"]


# --- Which file a GPU loads: synthetic fatbins on a fake driver that refuses
# an image with no code for the device (FAKE_CUDA_FIT_IMAGES), as the real
# one does with CUDA_ERROR_NO_BINARY_FOR_GPU.

ELF, PTX = 2, 1
ZSTD = 0x8000


def fatbin(*images):
    """A fatbin of (kind, arch, flags) images, each with an 8-byte payload
    (test_fatbin_images's layout, that of kernels/fatbin_images.py)."""
    return fatbin_bytes(*(entry(kind, arch, b"\x11" * 8, flags, 8)
                          for kind, arch, flags in images))


def split_package(tmp_path, real, ptx):
    """A package copy whose real-code file holds `real` and PTX file `ptx`
    (bytes; None: no such file); returns the two paths."""
    kernel_file = package_copy(tmp_path)
    ptx_file = kernel_file.with_name(PTX_FILE)
    for path, data in ((kernel_file, real), (ptx_file, ptx)):
        if data is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(data)
    return kernel_file, ptx_file


REAL_90 = fatbin((ELF, 90, 0))
PTX_90 = fatbin((PTX, 90, ZSTD))


@pytest.mark.parametrize("cc", ["9.0", "9.9"])
@pytest.mark.parametrize("ptx", [None, b"not a fatbin", PTX_90])
def test_a_gpu_with_real_code_never_reads_the_ptx_file(fake_driver, tmp_path,
                                                       cc, ptx):
    kernel_file, _ = split_package(tmp_path, REAL_90, ptx)
    log = tmp_path / "calls.log"
    assert run(fake_driver, kernel_file, fit_images=1, cc=cc, log=log) == "loaded"
    assert log.read_text().split().count("cuLibraryLoadData") == 1


@pytest.mark.parametrize("cc", ["10.0", "12.0"])
def test_a_newer_gpu_loads_the_ptx_file(fake_driver, tmp_path, cc):
    kernel_file, _ = split_package(tmp_path, REAL_90, PTX_90)
    log = tmp_path / "calls.log"
    assert run(fake_driver, kernel_file, fit_images=1, cc=cc, log=log) == "loaded"
    # The real code refused, then the PTX loaded.
    assert log.read_text().split().count("cuLibraryLoadData") == 2


def test_a_newer_gpu_loads_the_ptx_file_through_the_module_api(fake_driver,
                                                               tmp_path):
    kernel_file, _ = split_package(tmp_path, REAL_90, PTX_90)
    assert run(fake_driver, kernel_file, fit_images=1, cc="10.0",
               no_library=1) == "loaded"


def test_no_fitting_code_in_either_file_names_both(fake_driver, tmp_path):
    kernel_file, _ = split_package(tmp_path, REAL_90, PTX_90)
    archs = ", ".join(fp8q._C._build_info()["kernel_archs"]).replace(", ", ",")
    message = run(fake_driver, kernel_file, fit_images=1, cc="8.6")
    assert message == (
        "no fp8q kernel for CUDA device 0 (Fake GPU 0, sm_86): fp8q's kernels "
        f"were built for {archs} (real code in {FILE}, PTX in {PTX_FILE}); "
        "cuLibraryLoadData returned CUDA_ERROR_NO_BINARY_FOR_GPU (fake driver "
        "description)")


@pytest.mark.parametrize("ptx, reason", [
    (None, "cannot be read (No such file or directory)"),
    (b"\x7fELF" + PTX_90[4:], "it is not a CUDA fatbin")])
def test_a_newer_gpu_without_a_usable_ptx_file_names_it(fake_driver, tmp_path,
                                                        ptx, reason):
    kernel_file, ptx_file = split_package(tmp_path, REAL_90, ptx)
    message = run(fake_driver, kernel_file, fit_images=1, cc="10.0")
    assert message.startswith(
        "no fp8q kernel for CUDA device 0 (Fake GPU 0, sm_100): fp8q's kernels "
        f"were built for ")
    assert (f"; {FILE} has no real code for it (cuLibraryLoadData returned "
            "CUDA_ERROR_NO_BINARY_FOR_GPU (fake driver description)) and its PTX "
            "cannot be used: "
            f"the PTX of fp8q's CUDA kernels are ") in message
    assert str(ptx_file) in message and reason in message
