"""csrc/cuda/scaled_mm_ops.h tested from C on the fake CUDA driver and the
fake cuBLASLt: builds tests/c/cuda_ops/scaled_mm_ops.c with csrc/platform.c,
csrc/core and csrc/cuda (no Python, no binding; as test_c_cuda_ops.py does)
and runs it once per scenario, with the fakes' variables of that scenario:
what cuBLASLt refuses (FP8 products, scale modes), a failing cuBLASLt and a
device without FP8 tensor cores. Each check prints "ok NAME" after
comparing the product's bits and the path it recorded with the program's
oracle; every one must have run and passed."""
import os

import pytest

from fake_gpu import CUBLASLT_NAME, build_fake_driver
from test_c_cuda_ops import FATBIN_HEADER, build

# scenario: (the fakes' variables, the checks it runs in order)
SCENARIOS = {
    "paths": ({"FAKE_CUDA_CC": "9.0"},
              ["one-call", "one-call-gathered", "one-call-rowwise-bfloat16-bias",
               "one-call-fp8-out-amax", "epilogue-strided-float32-bias",
               "one-call-blockwise-weight-scales", "one-call-blockwise", "unaligned-k",
               "unaligned-k-padding-off", "out-not-contiguous", "empty", "layer-row",
               "layer-tensor", "layer-block", "layer-static"]),
    "refused-fp8": ({"FAKE_CUDA_CC": "9.0", "FAKE_CUBLASLT_REFUSE_FP8_MATMUL": "1"},
                    ["refused-fp8", "refused-fp8-remembered"]),
    "no-scale-modes": ({"FAKE_CUDA_CC": "9.0", "FAKE_CUBLASLT_REFUSE_SCALE_MODES": "1"},
                       ["rowwise-epilogue", "blockwise-decoded"]),
    "no-tensor-cores": ({"FAKE_CUDA_CC": "8.6"}, ["bfloat16"]),
    "failing": ({"FAKE_CUDA_CC": "9.0", "FAKE_CUBLASLT_MATMUL_STATUS": "13"}, ["failing"]),
}


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    """The fake driver, the fake cuBLASLt beside it, the test program and a
    kernel folder, built once for the scenarios."""
    directory = tmp_path_factory.mktemp("scaled_mm_ops")
    driver = build_fake_driver(directory)
    kernels = directory / "kernels"
    kernels.mkdir()
    (kernels / "fp8q_kernels.fatbin").write_bytes(FATBIN_HEADER)
    return driver, build(directory, "scaled_mm_ops"), kernels


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scaled_mm_ops_from_c_on_the_fake_driver(program, scenario):
    import subprocess
    driver, executable, kernels = program
    variables, checks = SCENARIOS[scenario]
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith(("FAKE_CUDA_", "FAKE_CUBLASLT_", "FP8Q_CUDA_",
                                           "FP8Q_CUBLASLT", "FP8Q_LOG"))}
    environment["FP8Q_CUDA_DRIVER"] = str(driver)
    environment["FP8Q_CUBLASLT"] = str(driver.with_name(CUBLASLT_NAME))
    environment.update(variables)
    result = subprocess.run([str(executable), str(kernels), scenario], capture_output=True,
                            text=True, env=environment, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split("\n")[:-1] == [f"ok {name}" for name in checks]
