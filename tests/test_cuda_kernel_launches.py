"""The kernels' launches on the fake CUDA driver (tests/fake_gpu.py): grids
that grow with the input for every kernel, the per-row quantize's grid
held to the device's resident blocks, and the weight-only product's
contract (tests/fake_gpu_kernels.py has the scenarios, each run in a fresh
interpreter). What the kernels compute on a real GPU is tested by the
`cuda`-marked tests of tests/test_cuda_ops.py.
"""
import pytest

from fake_gpu import TESTS, run_child
from test_cuda_fake_device import fake_driver  # noqa: F401 (a fixture)


def run_scenario(fake_driver, name, tmp_path, **options):
    """Runs fake_gpu_kernels.NAME() in a fresh interpreter on the fake
    driver, its launches logged (options: run_child's, e.g. environment)."""
    code = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); "
            f"import fake_gpu_kernels; fake_gpu_kernels.{name}()")
    run_child(fake_driver, code, launch_log=tmp_path / "launches.log",
              **options)


@pytest.mark.parametrize("name", [
    "grids_grow_with_the_input",
    "row_quantize_holds_the_device",
    "casts_take_the_fp8_kernel_where_it_applies",
    "wide_decode_takes_one_vector_a_thread",
    "layer_weight_decodes_with_the_wide_kernel",
    "gemv_matches_the_reference",
    "tensor_core_gemv_matches_the_reference",
    "split_gemv_matches_the_reference",
    "gemv_decodes_every_code",
    "gemv_declines_what_it_does_not_take",
    "linear_weight_only_runs_every_row",
    "linear_without_input_features_gives_the_bias",
    "norm_quantize_runs_a_block_per_row",
])
def test_kernel_scenario(fake_driver, name, tmp_path):
    run_scenario(fake_driver, name, tmp_path, log=tmp_path / "calls.log")


def test_narrow_gemv_splits_on_the_cuda_cores(fake_driver, tmp_path):
    run_scenario(fake_driver, "narrow_gemv_splits_on_the_cuda_cores",
                 tmp_path, environment={"FAKE_CUDA_OCCUPANCY": "64"})


def test_tensor_cores_follow_the_device(fake_driver, tmp_path):
    run_scenario(fake_driver, "tensor_cores_follow_the_device", tmp_path,
                 environment={"FAKE_CUDA_CC": "7.5"})
