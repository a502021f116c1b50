"""The GPU backend's switches (csrc/cuda/switches.h,
FP8Q_CUDA_NO_FP8_TENSOR_CORES, FP8Q_CUDA_SCALED_MM_PATH and the refusals of
FP8Q_CUDA_FP8_LAYER_PATH, whose paths tests/test_cuda_layer_path.py checks)
and the paths
fp8q.info() reports, on the fake CUDA driver and cuBLASLt
(tests/fake_gpu.py): under each switch, on sm_89 and sm_90, every scaled_mm
case takes the path docs/scaled_mm.md gives ("Switches"), as the fake's
log of cuBLASLt products and kernels shows, with the CPU's results; the
products stay capturable and allocation-free; the switches are read once;
values they do not take are refused. On a real GPU, .ci/gpu-check runs the
CUDA tests under them.
"""
import pytest

from fake_gpu import TESTS, run_child
from test_cuda_fake_device import fake_driver  # noqa: F401 (a fixture)

SETTINGS = {
    "auto": {},
    "padded": {"FP8Q_CUDA_SCALED_MM_PATH": "padded"},
    "epilogue": {"FP8Q_CUDA_SCALED_MM_PATH": "epilogue"},
    "exact": {"FP8Q_CUDA_SCALED_MM_PATH": "exact"},
    "no-fp8": {"FP8Q_CUDA_NO_FP8_TENSOR_CORES": "1"},
}


def run_scenario(driver, module, name, tmp_path, environment, **fake):
    code = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); "
            f"import {module}; {module}.{name}()")
    run_child(driver, code, log=tmp_path / "calls.log",
              environment=environment, **fake)


@pytest.mark.parametrize("setting", list(SETTINGS))
@pytest.mark.parametrize("cc", ["8.9", "9.0"])
@pytest.mark.parametrize("name", ["scaled_mm_takes_the_switched_path",
                                  "info_reports_the_switched_paths"])
def test_switched_paths(fake_driver, tmp_path, name, cc, setting):
    run_scenario(fake_driver, "fake_gpu_switches", name, tmp_path,
                 SETTINGS[setting], cc=cc)


@pytest.mark.parametrize("setting", list(SETTINGS))
@pytest.mark.parametrize("name", ["scaled_mm_matches_the_cpu",
                                  "scaled_mm_amax_and_out",
                                  "cached_plan_allocates_nothing"])
def test_scenarios_under_each_switch(fake_driver, tmp_path, name, setting):
    """The scaled_mm scenarios of tests/fake_gpu_scenarios.py that hold on
    every path (results within their bounds, k = 0, nothing allocated by a
    cached product), on sm_90 under each switch."""
    run_scenario(fake_driver, "fake_gpu_scenarios", name, tmp_path,
                 SETTINGS[setting], cc="9.0")


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_warm_products_capture_under_each_switch(fake_driver, tmp_path,
                                                 setting):
    run_scenario(fake_driver, "fake_gpu_capture", "warm_scaled_mm_captures",
                 tmp_path, SETTINGS[setting], cc="9.0")


def test_switches_are_read_once(fake_driver, tmp_path):
    run_scenario(fake_driver, "fake_gpu_switches", "switches_are_read_once",
                 tmp_path, {"FP8Q_CUDA_SCALED_MM_PATH": "exact"}, cc="9.0")


@pytest.mark.parametrize("name, value", [
    ("FP8Q_CUDA_SCALED_MM_PATH", "fast"),
    ("FP8Q_CUDA_SCALED_MM_PATH", "Exact"),
    ("FP8Q_CUDA_NO_FP8_TENSOR_CORES", "yes"),
    ("FP8Q_CUDA_NO_FP8_TENSOR_CORES", "1" * 40),
    ("FP8Q_CUDA_FP8_LAYER_PATH", "gemv"),
    ("FP8Q_CUDA_FP8_LAYER_PATH", "weight_only"),
    ("FP8Q_CUDA_GEMM_TUNING", "off")],
    ids=["unknown path", "path in capitals", "not 0 or 1", "too long",
         "unknown layer path", "layer path with an underscore",
         "tuning not 0 or 1"])
def test_refused_values(fake_driver, tmp_path, name, value):
    run_scenario(fake_driver, "fake_gpu_switches",
                 "refused_values_make_the_backend_unusable", tmp_path,
                 {name: value, "REFUSED": f"{name}={value}"})
