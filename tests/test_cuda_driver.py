"""Loading the CUDA driver at first use, on machines without a GPU.

A fake driver (tests/fake_gpu.py) stands in for libcuda; each scenario runs
in a fresh interpreter, since fp8q loads the driver once per process. Tests
that need a real GPU carry the `cuda` marker.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fp8q
from fake_gpu import build_fake_driver, child_environment, run_child

KERNELS = fp8q._C._build_info()["cuda_kernels"]
NO_KERNELS = ("fp8q was built without CUDA kernels: "
              + fp8q._C._build_info()["cuda_kernels_reason"])

# Runs in the child: prints {"cuda": info()["cuda"], "error": CudaError text
# of _cuda_open_device(0) or None, "mapped": the fake driver was mapped
# right after import}.
PROBE = r"""
import json, sys
import fp8q
def mapped():
    with open("/proc/self/maps") as maps:
        return any(sys.argv[1] in line for line in maps)
mapped_after_import = mapped()
cuda = fp8q.info()["cuda"]
try:
    fp8q._C._cuda_open_device(0)
    error = None
except fp8q.CudaError as exc:
    error = str(exc)
print(json.dumps({"cuda": cuda, "error": error,
                  "mapped_after_import": mapped_after_import,
                  "mapped_after_info": mapped()}))
"""


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    return build_fake_driver(tmp_path_factory.mktemp("fake-cuda"))


def probe(driver_path, **fake):
    """Runs PROBE with FP8Q_CUDA_DRIVER=driver_path and FAKE_CUDA_*=fake."""
    return run_child(driver_path, PROBE, Path(driver_path).name, **fake)


def check_unavailable(result, reason):
    assert result["cuda"]["available"] is False
    assert result["cuda"]["reason"] == reason
    assert result["error"] == reason


def test_import_does_not_touch_cuda(fake_driver):
    result = probe(fake_driver)
    assert result["mapped_after_import"] is False
    assert result["mapped_after_info"] is True


def test_no_driver(tmp_path):
    missing = tmp_path / "libcuda-missing.so.1"
    result = probe(missing)
    if sys.platform == "win32":
        # LoadLibraryExW's failure: the system's message for error 126
        # (ERROR_MOD_NOT_FOUND), then its number (csrc/platform.c).
        reason = result["cuda"]["reason"]
        assert reason.startswith(f"no CUDA driver found: tried {missing} "
                                 "(from FP8Q_CUDA_DRIVER): "), reason
        assert reason.endswith(" (Windows error 126)"), reason
        check_unavailable(result, reason)
    else:
        reason = (f"no CUDA driver found: tried {missing} (from "
                  f"FP8Q_CUDA_DRIVER): {missing}: cannot open shared object "
                  "file: No such file or directory")
        check_unavailable(result, reason)
    assert result["cuda"]["driver"] is None
    assert result["cuda"]["devices"] == []


def test_a_non_ascii_driver_path_reaches_the_file(tmp_path):
    """FP8Q_CUDA_DRIVER naming a file in a non-ASCII folder: the path goes
    through the UTF-8 environment read and, on Windows, the wide-character
    LoadLibraryExW (csrc/platform.c) to the file itself, which is found but
    is no library: the loader's "bad format" (Windows error 193), not "not
    found" (126); on Linux dlopen's complaint about the file. The reason
    quotes the path intact."""
    folder = tmp_path / "drïver ✓ 驱动"
    folder.mkdir()
    not_a_library = folder / "nvcuda-fake.dll"
    not_a_library.write_bytes(b"not a shared library\n" * 64)
    result = probe(not_a_library)
    reason = result["cuda"]["reason"]
    prefix = (f"no CUDA driver found: tried {not_a_library} (from "
              "FP8Q_CUDA_DRIVER): ")
    assert reason.startswith(prefix), reason
    if sys.platform == "win32":
        assert reason.endswith(" (Windows error 193)"), reason
    else:
        assert reason[len(prefix):].startswith(f"{not_a_library}: "), reason
        assert "No such file" not in reason, reason
    assert result["cuda"]["available"] is False


def test_default_search_lists_every_path():
    """Without FP8Q_CUDA_DRIVER the system's names are tried; here (no
    driver installed) the reason lists them all."""
    code = ("import fp8q; c = fp8q.info()['cuda']; "
            "print(c['available'], c['reason'])")
    environment = {name: value for name, value in os.environ.items()
                   if name != "FP8Q_CUDA_DRIVER"}
    output = subprocess.run([sys.executable, "-c", code], env=environment,
                            capture_output=True, text=True, check=True,
                            timeout=120).stdout
    if output.startswith("True") or "no CUDA driver found" not in output:
        pytest.skip("a CUDA driver is installed here")
    if sys.platform.startswith("linux"):
        assert "tried libcuda.so.1 (" in output
        assert "; libcuda.so (" in output
    assert "set FP8Q_CUDA_DRIVER" in output


def test_driver_too_old(fake_driver):
    result = probe(fake_driver, version=11080)
    check_unavailable(result, (
        f"the CUDA driver is too old: {fake_driver} is version 11.8, but "
        "fp8q needs 12.0 or newer (update the NVIDIA driver)"))
    assert result["cuda"]["driver"] == {"path": str(fake_driver),
                                        "version": "11.8"}


def test_init_error(fake_driver):
    result = probe(fake_driver, init_error=999)
    check_unavailable(result, (
        "cuInit failed with CUDA_ERROR_UNKNOWN (fake driver description) "
        f"(CUDA driver {fake_driver}, version 13.0)"))


@pytest.mark.parametrize("fake", [{"init_error": 100}, {"devices": 0}])
def test_no_device(fake_driver, fake):
    result = probe(fake_driver, **fake)
    if fake.get("init_error") == 100:
        reason = ("no CUDA device: cuInit reported CUDA_ERROR_NO_DEVICE (fake "
                  f"driver description) (CUDA driver {fake_driver}, version "
                  "13.0; check CUDA_VISIBLE_DEVICES)")
    else:
        reason = (f"no CUDA device: the CUDA driver {fake_driver} (version "
                  "13.0) reports none (check CUDA_VISIBLE_DEVICES)")
    check_unavailable(result, reason)
    assert result["cuda"]["devices"] == []


def test_missing_entry_point(fake_driver):
    result = probe(fake_driver, missing="cuDeviceTotalMem")
    check_unavailable(result, (
        f"the CUDA driver {fake_driver} does not provide cuDeviceTotalMem "
        "(cuGetProcAddress at CUDA 12.0: symbol not found)"))


def test_device_whose_properties_cannot_be_read(fake_driver):
    """A device the driver cannot describe runs nothing: fp8q.info() says
    CUDA is unavailable, with the device's error as the reason (where the
    build has no kernels, the reason names that first), and the device's
    entry holds the device's error."""
    result = probe(fake_driver, cc="unreadable")
    reason = "cuDeviceGetAttribute failed for CUDA device 0 with CUresult 1"
    assert result["cuda"]["available"] is False
    assert result["cuda"]["reason"] == (reason if KERNELS else NO_KERNELS)
    device, = result["cuda"]["devices"]
    assert (device["index"], device["error"]) == (0, reason)
    assert result["error"] is not None


@pytest.mark.parametrize("cc, native", [("8.9", True), ("7.5", False),
                                        ("12.0", True), ("8.6", False)])
def test_one_device(fake_driver, cc, native):
    result = probe(fake_driver, version=12040, cc=cc, name="Fake RTX",
                   memory=12884901888)
    cuda = result["cuda"]
    assert cuda["driver"] == {"path": str(fake_driver), "version": "12.4"}
    device, = cuda["devices"]
    assert {name: device[name] for name in
            ("index", "name", "compute_capability", "memory_bytes",
             "native_fp8")} == {
        "index": 0, "name": "Fake RTX 0", "compute_capability": cc,
        "memory_bytes": 12884901888, "native_fp8": native}
    if device["kernels"]:
        assert device["ops"]["scaled_mm"]["tensorwise"] == (
            "cuda: one cuBLASLt call" if native else
            "cuda: bfloat16 product of the decoded codes + epilogue kernel")
    if not KERNELS:
        check_unavailable(result, NO_KERNELS)
        assert device["kernels"] is False
        assert device["kernels_error"] == NO_KERNELS
    # Where the kernels load (not here with a 12.4 driver when they were
    # built by CUDA 13) cast runs on the GPU, else CUDA tensors cannot be.
    assert device["ops"]["cast"] == ("cuda: fp8q's kernels" if device["kernels"]
                                     else "unavailable: fp8q's kernels do not "
                                     "load on this device")
    if not device["kernels"]:
        assert device["ops"]["scaled_mm"] == dict.fromkeys(
            ("tensorwise", "rowwise", "blockwise"),
            "unavailable: fp8q's kernels do not load on this device")


def test_two_devices(fake_driver):
    result = probe(fake_driver, devices=2)
    assert [device["name"] for device in result["cuda"]["devices"]] == [
        "Fake GPU 0", "Fake GPU 1"]


def test_cuda_error_is_a_runtime_error():
    assert issubclass(fp8q.CudaError, RuntimeError)
    assert "CudaError" in fp8q.__all__
    assert callable(fp8q.info)


def test_info_cli_json_has_cuda_and_cublaslt_sections(fake_driver):
    environment = child_environment(fake_driver)
    output = subprocess.run(
        [sys.executable, "-m", "fp8q", "info", "--json"], env=environment,
        capture_output=True, text=True, check=True, timeout=120).stdout
    facts = json.loads(output)
    assert facts["cuda"]["driver"]["path"] == str(fake_driver)
    if facts["cuda"]["available"]:
        # After info's product of each scaling mode on the fake's sm_89:
        # one tensorwise call, the other modes' unscaled FP8 or float32
        # products.
        assert facts["cublaslt"] == {
            "found": True, "version": "13.10.0", "error": None,
            "path": environment["FP8Q_CUBLASLT"], "search": [],
            "scale_modes": {
                "0": {"accepted": ["unscaled", "tensorwise"],
                      "refused": []}},
            # The fake's heuristic offers one algorithm: nothing to time.
            "candidates_timed": 0}
    else:
        assert facts["cublaslt"]["found"] is None
    text = subprocess.run(
        [sys.executable, "-m", "fp8q", "info"], env=environment,
        capture_output=True, text=True, check=True, timeout=120).stdout
    assert "cuda:0" in text and "Fake GPU 0" in text


def test_info_reports_a_missing_cublaslt(fake_driver):
    environment = child_environment(fake_driver)
    environment["FP8Q_CUBLASLT"] = "/nonexistent/libcublasLt.so.13"
    facts = json.loads(subprocess.run(
        [sys.executable, "-m", "fp8q", "info", "--json"], env=environment,
        capture_output=True, text=True, check=True, timeout=120).stdout)
    if not facts["cuda"]["available"]:
        pytest.skip("fp8q's kernels do not load on the fake GPU here")
    assert facts["cublaslt"]["found"] is False
    assert facts["cublaslt"]["error"].startswith(
        "cuBLASLt not found: tried /nonexistent/libcublasLt.so.13 (")
    assert [line.split(" (")[0] for line in facts["cublaslt"]["search"]] == [
        "/nonexistent/libcublasLt.so.13"]


def _real_gpu_reason():
    """Why the real-GPU tests cannot run here, or None."""
    code = "import fp8q, json; print(json.dumps(fp8q.info()['cuda']))"
    environment = {name: value for name, value in os.environ.items()
                   if name != "FP8Q_CUDA_DRIVER"}
    completed = subprocess.run([sys.executable, "-c", code],
                               env=environment, capture_output=True,
                               text=True, timeout=300)
    if completed.returncode != 0:
        return completed.stderr
    cuda = json.loads(completed.stdout)
    return None if cuda["available"] else cuda["reason"]


@pytest.mark.cuda
def test_real_gpu_loads_kernels():
    reason = _real_gpu_reason()
    if reason is not None:
        pytest.skip(f"no usable GPU: {reason}")
    cuda = fp8q.info()["cuda"]
    assert cuda["driver"]["path"]
    for device in cuda["devices"]:
        assert device["kernels"] is True, device["kernels_error"]
        assert device["ops"]["cast"] == "cuda: fp8q's kernels"
        fp8q._C._cuda_open_device(device["index"])
    with pytest.raises(fp8q.CudaError, match="does not exist"):
        fp8q._C._cuda_open_device(len(cuda["devices"]))
