"""CUDA tensors and operations on the fake CUDA driver (tests/fake_gpu.py):
allocation, copies, views, streams, DLPack, cast and amax dispatch, and
their errors, on machines without a GPU. Each scenario of
tests/fake_gpu_scenarios.py runs in a fresh interpreter. What the real GPU
computes is tested by the `cuda`-marked tests (tests/test_cuda_ops.py).
"""
from pathlib import Path

import pytest

import fp8q

from fake_gpu import build_fake_driver, run_child

TESTS = Path(__file__).parent


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    build = fp8q._C._build_info()
    if not build["cuda_kernels"]:
        pytest.skip("this fp8q was built without CUDA kernels: "
                    + build["cuda_kernels_reason"])
    return build_fake_driver(tmp_path_factory.mktemp("fake-cuda"))


def run_scenario(driver, name, tmp_path, environment=None, **fake):
    code = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); "
            f"import fake_gpu_scenarios; fake_gpu_scenarios.{name}()")
    run_child(driver, code, log=tmp_path / "calls.log",
              environment=environment, **fake)


@pytest.mark.parametrize("name", [
    "round_trip_every_dtype",
    "views_and_strided_copies",
    "strided_inputs_are_gathered_on_the_gpu",
    "empty_and_zeros",
    "memory_is_returned_on_the_last_stream",
    "allocations_are_balanced",
    "cast_matches_the_cpu",
    "cast_with_every_scale_layout",
    "cast_into_out_with_amax",
    "amax_matches_the_cpu",
    "quantize_matches_the_cpu",
    "quantize_with_given_scales",
    "qtensor_moves_and_dequantizes",
    "quantize_transposed",
    "calibrators_take_gpu_batches",
    "nonfinite_groups_on_the_gpu",
    "quantize_empty_groups",
    "scaled_mm_matches_the_cpu",
    "scaled_mm_paths",
    "plan_cache_is_bounded",
    "scaled_mm_amax_and_out",
    "scaled_mm_errors",
    "streams_order_work",
    "synchronize_waits_for_the_stream",
    "dlpack_on_cuda",
    "errors_are_clear",
])
def test_scenario(fake_driver, name, tmp_path):
    run_scenario(fake_driver, name, tmp_path)


def test_devices_without_memory_pools(fake_driver, tmp_path):
    run_scenario(fake_driver, "without_memory_pools", tmp_path, no_pools=1)


def test_out_of_memory(fake_driver, tmp_path):
    run_scenario(fake_driver, "out_of_memory", tmp_path, alloc_error=2)


def test_no_driver(tmp_path):
    run_scenario("/nonexistent/libcuda.so.1", "no_driver", tmp_path)


def test_scaled_mm_on_gpus_without_fp8(fake_driver, tmp_path):
    for name in ("scaled_mm_matches_the_cpu", "scaled_mm_paths"):
        run_scenario(fake_driver, name, tmp_path, cc="8.6")


def test_scaled_mm_without_an_algorithm(fake_driver, tmp_path):
    run_scenario(fake_driver, "scaled_mm_without_an_algorithm", tmp_path,
                 cublaslt_no_algo=1)


def test_scaled_mm_when_fp8_is_refused(fake_driver, tmp_path):
    run_scenario(fake_driver, "scaled_mm_when_fp8_is_refused", tmp_path,
                 cublaslt_no_fp8=1)


def test_scaled_mm_without_cublaslt(fake_driver, tmp_path):
    run_scenario(fake_driver, "scaled_mm_without_cublaslt", tmp_path,
                 environment={"FP8Q_CUBLASLT":
                              "/nonexistent/libcublasLt.so.13"})
