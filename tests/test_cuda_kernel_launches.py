"""The kernels' launches on the fake CUDA driver (tests/fake_gpu.py): grids
that grow with the input for every kernel, and the weight-only product's
contract (tests/fake_gpu_kernels.py has the scenarios, each run in a fresh
interpreter). What the kernels compute on a real GPU is tested by the
`cuda`-marked tests of tests/test_cuda_ops.py.
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


@pytest.mark.parametrize("name", [
    "grids_grow_with_the_input",
    "gemv_matches_the_reference",
    "gemv_declines_what_it_does_not_take",
])
def test_kernel_scenario(fake_driver, name, tmp_path):
    code = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); "
            f"import fake_gpu_kernels; fake_gpu_kernels.{name}()")
    run_child(fake_driver, code, launch_log=tmp_path / "launches.log")
