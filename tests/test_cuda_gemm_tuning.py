"""The GEMM tuner (csrc/cuda/matmul.h, "Algorithm choice"; docs/scaled_mm.md)
on the fake CUDA driver and cuBLASLt (tests/fake_gpu.py): cuBLASLt's
candidates timed once per key with the driver's timing events and the
fastest kept, refused candidates skipped, nothing timed during a CUDA graph
capture, FP8Q_CUDA_GEMM_TUNING=0, and the fast-accumulation flag on the
descriptor. The scenarios are in tests/fake_gpu_tuning.py.
"""
import pytest

from fake_gpu import TESTS, run_child
from test_cuda_fake_device import fake_driver  # noqa: F401 (a fixture)

COSTS = "30,10,20"


def run_scenario(driver, name, tmp_path, environment=None, **fake):
    code = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); "
            f"import fake_gpu_tuning; fake_gpu_tuning.{name}()")
    run_child(driver, code, log=tmp_path / "calls.log",
              cublaslt_algo_log=tmp_path / "algos.log",
              cublaslt_algo_costs=COSTS, cc="9.0",
              environment=environment, **fake)


@pytest.mark.parametrize("name", [
    "the_fastest_candidate_is_timed_once_and_kept",
    "never_timed_while_capturing",
    "fast_accumulation_reaches_the_descriptor",
    "weight_block_scales_are_read_in_place",
])
def test_tuner(fake_driver, tmp_path, name):
    run_scenario(fake_driver, name, tmp_path)


def test_a_refused_candidate_is_skipped(fake_driver, tmp_path):
    run_scenario(fake_driver, "a_refused_candidate_is_skipped", tmp_path,
                 cublaslt_refuse_algo=2)


def test_tuning_switched_off(fake_driver, tmp_path):
    run_scenario(fake_driver, "tuning_switched_off", tmp_path,
                 {"FP8Q_CUDA_GEMM_TUNING": "0"})
