"""CUDA tensors and operations on the fake CUDA driver (tests/fake_gpu.py):
allocation, copies, views, streams, DLPack, cast and amax dispatch, and
their errors, on machines without a GPU. Each scenario of
tests/fake_gpu_scenarios.py runs in a fresh interpreter. What the real GPU
computes is tested by the `cuda`-marked tests (tests/test_cuda_ops.py).
"""
import subprocess
import sys
from pathlib import Path

import pytest

import fp8q

from fake_gpu import build_fake_driver, child_environment, run_child

TESTS = Path(__file__).parent


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    build = fp8q._C._build_info()
    if not build["cuda_kernels"]:
        pytest.skip("this fp8q was built without CUDA kernels: "
                    + build["cuda_kernels_reason"])
    return build_fake_driver(tmp_path_factory.mktemp("fake-cuda"))


def run_scenario(driver, name, tmp_path, environment=None,
                 module="fake_gpu_scenarios", **fake):
    code = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); "
            f"import {module}; {module}.{name}()")
    run_child(driver, code, log=tmp_path / "calls.log",
              environment=environment, **fake)


@pytest.mark.parametrize("name", [
    "round_trip_every_dtype",
    "views_and_strided_copies",
    "strided_inputs_are_gathered_on_the_gpu",
    "empty_and_zeros",
    "memory_is_returned_on_the_last_stream",
    "allocations_are_balanced",
    "memory_pool_keeps_its_memory",
    "cast_matches_the_cpu",
    "cast_with_every_scale_layout",
    "cast_into_out_with_amax",
    "amax_matches_the_cpu",
    "quantize_matches_the_cpu",
    "quantize_with_given_scales",
    "quantize_rows_in_one_pass",
    "column_amax_reads_rows",
    "qtensor_moves_and_dequantizes",
    "quantize_transposed",
    "calibrators_take_gpu_batches",
    "calibrator_reconfigured_while_reducing_on_the_gpu",
    "loaded_calibrator_takes_another_channel_count_on_the_gpu",
    "max_calibrator_reduces_on_the_gpu",
    "calibrators_keep_their_state_on_the_gpu",
    "max_calibrator_history_on_the_gpu_matches_the_cpu",
    "histogram_calibrator_counts_on_the_gpu",
    "deferred_nonfinite_error",
    "device_state_is_settled_by_every_reader",
    "nonfinite_groups_on_the_gpu",
    "linear_gives_a_nan_row_for_a_nonfinite_token",
    "linear_layer_is_fp8q_linear",
    "linear_takes_a_bias_on_x_device_or_the_cpu",
    "static_scale_layer_gives_nan_rows_for_infinities",
    "quantize_empty_groups",
    "scaled_mm_matches_the_cpu",
    "scaled_mm_paths",
    "scaled_mm_padded_matches_the_cpu",
    "plan_cache_is_bounded",
    "heuristic_sees_the_scales",
    "scaled_mm_amax_and_out",
    "cached_plan_allocates_nothing",
    "scaled_mm_errors",
    "streams_order_work",
    "synchronize_waits_for_the_stream",
    "dlpack_on_cuda",
    "errors_are_clear",
])
def test_scenario(fake_driver, name, tmp_path):
    run_scenario(fake_driver, name, tmp_path)


def test_calibrate_names_the_layer_of_a_refused_gpu_batch(fake_driver,
                                                          tmp_path):
    pytest.importorskip("torch", reason="fp8q.torch.calibrate needs PyTorch")
    run_scenario(fake_driver,
                 "calibrate_names_the_layer_of_a_refused_gpu_batch", tmp_path)


def test_calibrator_reconfigured_while_an_old_state_is_read_back(
        fake_driver, tmp_path):
    run_scenario(fake_driver,
                 "calibrator_reconfigured_while_an_old_state_is_read_back",
                 tmp_path, devices=2, read_delay_ms=1000)


def test_devices_without_memory_pools(fake_driver, tmp_path):
    run_scenario(fake_driver, "without_memory_pools", tmp_path, no_pools=1)


@pytest.mark.parametrize("fake", [{"pool_error": 801},
                                  {"missing": "cuMemPoolSetAttribute"},
                                  {"missing": "cuDeviceGetDefaultMemPool"}],
                         ids=["pool refuses", "no threshold entry point",
                              "no default pool entry point"])
def test_memory_pools_that_refuse_the_threshold(fake_driver, tmp_path, fake):
    """cuMemAlloc instead of a pool that would unmap its memory at every
    synchronize."""
    run_scenario(fake_driver, "without_memory_pools", tmp_path, **fake)


def test_grids_follow_occupancy(fake_driver, tmp_path):
    run_scenario(fake_driver, "grids_follow_occupancy", tmp_path,
                 occupancy=1, max_grid=4)
    run_scenario(fake_driver, "grids_beyond_occupancy_are_refused", tmp_path,
                 occupancy=3, max_grid=4)


def test_out_of_memory(fake_driver, tmp_path):
    run_scenario(fake_driver, "out_of_memory", tmp_path, alloc_error=2)


def test_no_driver(tmp_path):
    run_scenario("/nonexistent/libcuda.so.1", "no_driver", tmp_path)


def test_scaled_mm_on_gpus_without_fp8(fake_driver, tmp_path):
    for name in ("scaled_mm_matches_the_cpu", "scaled_mm_paths",
                 "cached_plan_allocates_nothing"):
        run_scenario(fake_driver, name, tmp_path, cc="8.6")


def test_scaled_mm_without_an_algorithm(fake_driver, tmp_path):
    run_scenario(fake_driver, "scaled_mm_without_an_algorithm", tmp_path,
                 cublaslt_no_algo=1)


@pytest.mark.parametrize("status", [3, 13, 14])
@pytest.mark.parametrize("cc", ["8.9", "9.0"])
def test_cublaslt_failures_name_the_call(fake_driver, tmp_path, status, cc):
    run_scenario(fake_driver, "cublaslt_failures_name_the_call", tmp_path,
                 cc=cc, cublaslt_matmul_status=status)


def test_scaled_mm_when_fp8_is_refused(fake_driver, tmp_path):
    run_scenario(fake_driver, "scaled_mm_when_fp8_is_refused", tmp_path,
                 cublaslt_no_fp8=1)


@pytest.mark.parametrize("name", [
    "scaled_mm_when_the_fp8_product_is_refused",
    "refused_products_are_not_prepared_again",
])
def test_scaled_mm_when_the_fp8_product_is_refused(fake_driver, tmp_path,
                                                  name):
    run_scenario(fake_driver, name, tmp_path, cublaslt_refuse_fp8_matmul=1)


def test_scratch_memory_is_freed(fake_driver, tmp_path):
    """fp8q.empty_cache(), and the same at interpreter exit: the last
    product's scratch block is freed after it (FAKE_CUDA_LOG)."""
    code = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); "
            "import fake_gpu_scenarios; "
            "fake_gpu_scenarios.scratch_memory_is_freed_on_request()")
    log = tmp_path / "calls.log"
    before_exit = run_child(fake_driver, code, log=log)
    at_exit = [line.split()[0]
               for line in log.read_text().splitlines()[before_exit:]]
    # (After the scenario's own tensors are freed.)
    wait = at_exit.index("cuStreamWaitEvent")
    assert at_exit[wait:wait + 7] == [
        "cuStreamWaitEvent", "cuCtxPopCurrent", "cuCtxPushCurrent",
        "cuStreamGetCaptureInfo", "cuCtxPopCurrent", "cuCtxPushCurrent",
        "cuMemFreeAsync"], at_exit


def test_scaled_mm_without_cublaslt(fake_driver, tmp_path):
    run_scenario(fake_driver, "scaled_mm_without_cublaslt", tmp_path,
                 environment={"FP8Q_CUBLASLT":
                              "/nonexistent/libcublasLt.so.13"})


def test_scaled_mm_in_one_call_on_sm90(fake_driver, tmp_path):
    """(scaled_mm_matches_the_cpu on sm_90: rowwise scales with one side a
    single value, which cuBLASLt's rowwise mode cannot take.)"""
    for name in ("scaled_mm_in_one_call", "cached_plan_allocates_nothing",
                 "scaled_mm_matches_the_cpu"):
        run_scenario(fake_driver, name, tmp_path, cc="9.0")


@pytest.mark.parametrize("fake", [{"cc": "8.9"},
                                  {"cc": "9.0", "cublaslt_version": 120800},
                                  {"cc": "9.0",
                                   "cublaslt_refuse_scale_modes": 1}],
                         ids=["sm_89", "cuBLASLt 12.8", "modes refused"])
def test_scale_modes_fall_back(fake_driver, tmp_path, fake):
    run_scenario(fake_driver, "scaled_mm_scale_modes_fall_back", tmp_path,
                 **fake)


def scaled_mm_stderr(driver, tmp_path, k=512, **fake):
    """stderr of one rowwise and one blockwise product (4, k) @ (k, 32) with
    FP8Q_LOG=1."""
    code = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); "
            "import numpy as np, fp8q; from fake_gpu_scenarios import operands; "
            "rng = np.random.default_rng(1)\n"
            "for g in ('row', 'block'):\n"
            f"    a, b, sa, sb = operands(rng, 4, {k}, 32, g)\n"
            "    fp8q.scaled_mm(a.to('cuda'), b.T.to('cuda').T, sa, sb)")
    environment = child_environment(driver, log=tmp_path / "calls.log",
                                    **fake)
    environment["FP8Q_LOG"] = "1"
    completed = subprocess.run([sys.executable, "-c", code],
                               env=environment, capture_output=True,
                               text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    return completed.stderr.splitlines()


@pytest.mark.parametrize("fake, paths", [
    ({"cc": "9.0"}, ["one cuBLASLt call"] * 2),
    ({"cc": "9.0", "cublaslt_refuse_scale_modes": 1},
     ["cuBLASLt FP8 product + epilogue kernel",
      "float32 product of block-scaled operands + epilogue kernel"]),
    ({"cc": "8.6"},
     ["bfloat16 product of the decoded codes + epilogue kernel",
      "float32 product of block-scaled operands + epilogue kernel"]),
], ids=["sm_90", "modes refused", "sm_86"])
def test_fp8q_log_names_each_path(fake_driver, tmp_path, fake, paths):
    lines = scaled_mm_stderr(fake_driver, tmp_path, **fake)
    assert lines == [f"fp8q: scaled_mm M=4 N=32 K=512 on cuda:0: {path}"
                     for path in paths], lines


PADDED_ONE_CALL = "one cuBLASLt call on operands padded to multiples of 16"
PADDED_EPILOGUE = ("cuBLASLt FP8 product of operands padded to multiples of "
                   "16 + epilogue kernel")


@pytest.mark.parametrize("cc, paths", [
    ("8.9", [PADDED_EPILOGUE] * 2),
    ("9.0", [PADDED_ONE_CALL, PADDED_EPILOGUE])])
def test_fp8q_log_names_the_padded_path(fake_driver, tmp_path, cc, paths):
    """(With K = 40 the blocks' scales, (4, 1) and (1, 1), are rowwise
    ones too, with b's a single value: cuBLASLt's rowwise mode reads N
    values, so that product takes the epilogue kernel on sm_90 too.)"""
    lines = scaled_mm_stderr(fake_driver, tmp_path, k=40, cc=cc)
    assert lines == [f"fp8q: scaled_mm M=4 N=32 K=40 on cuda:0: {path}"
                     for path in paths], lines


@pytest.mark.parametrize("version, first", [(12020, "libcublasLt.so.12"),
                                            (12090, "libcublasLt.so.12"),
                                            (13000, "libcublasLt.so.13")])
def test_driver_version_picks_the_cublaslt_release(fake_driver, tmp_path,
                                                   version, first):
    """A CUDA 12 driver cannot run cuBLASLt 13: libcublasLt.so.12 is tried
    first under it, in every place searched."""
    toolkit = tmp_path / "toolkit"
    code = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); "
            "import fake_gpu_scenarios; "
            "fake_gpu_scenarios.cublaslt_search_order()")
    tried = run_child(fake_driver, code, version=version,
                      environment={"FP8Q_CUBLASLT": "",
                                   "CUDA_PATH": str(toolkit),
                                   "CUDA_HOME": str(toolkit)})
    if tried is None:
        pytest.skip("a real cuBLASLt is installed here (NVIDIA's pip wheels "
                    "or a toolkit): the search stops at it, so the order of "
                    "the places tried is not visible")
    second = ({"libcublasLt.so.12", "libcublasLt.so.13"} - {first}).pop()
    names = [path.rsplit("/", 1)[-1] for path in tried]
    # Every place, in pairs.
    assert len(names) >= 2 and len(names) % 2 == 0 and all(
        names[index:index + 2] == [first, second]
        for index in range(0, len(names) - 1, 2)), tried


# --------------------------------------------------------------------------
# CUDA graph capture (tests/fake_gpu_capture.py)


@pytest.mark.parametrize("name", [
    "fake_models_the_driver",
    "warm_cast_and_quantize_capture",
    "warm_layer_calls_capture",
    "uncaptured_work_is_not_waited_for",
    "forked_streams_of_one_capture_are_ordered",
    "cold_calls_are_refused",
    "streams_that_cannot_be_ordered_are_refused",
    "memory_a_graph_uses_is_kept",
])
def test_capture(fake_driver, name, tmp_path):
    run_scenario(fake_driver, name, tmp_path, module="fake_gpu_capture")


@pytest.mark.parametrize("cc", ["8.9", "9.0", "8.6"])
def test_warm_scaled_mm_captures(fake_driver, tmp_path, cc):
    """Every path: one cuBLASLt call (sm_90 for rowwise and blockwise),
    FP8 product + epilogue, padded K or N, blockwise float32, and the
    bfloat16 product of GPUs without FP8 tensor cores (sm_86)."""
    run_scenario(fake_driver, "warm_scaled_mm_captures", tmp_path,
                 module="fake_gpu_capture", cc=cc)


def test_capture_without_memory_pools(fake_driver, tmp_path):
    run_scenario(fake_driver,
                 "without_memory_pools_nothing_is_allocated_in_a_capture",
                 tmp_path, module="fake_gpu_capture", no_pools=1)


def test_drivers_without_capture_info(fake_driver, tmp_path):
    run_scenario(fake_driver, "without_capture_info", tmp_path,
                 module="fake_gpu_capture",
                 missing="cuStreamGetCaptureInfo")
