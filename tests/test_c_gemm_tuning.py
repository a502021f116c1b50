"""csrc/cuda/gemm_tuning.h tested from C on the fake CUDA driver and the fake
cuBLASLt: builds tests/c/cuda_ops/gemm_tuning.c with csrc/platform.c,
csrc/core and csrc/cuda (no Python, no binding; as test_c_cuda_ops.py does)
and runs it with the fakes' name, compute capability and versions set here:
the key fp8q.gemm_tuning saves (as text) and the choices' text, two added
lines read back whole, most recent first, an import with a bad line
adding nothing."""
import os
import subprocess

from fake_gpu import CUBLASLT_NAME, build_fake_driver
from test_c_cuda_ops import FATBIN_HEADER, build


def test_gemm_tuning_key_and_choices_from_c_on_the_fake_driver(tmp_path):
    driver = build_fake_driver(tmp_path)
    program = build(tmp_path, "gemm_tuning")
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "fp8q_kernels.fatbin").write_bytes(FATBIN_HEADER)
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith(("FAKE_CUDA_", "FAKE_CUBLASLT_", "FP8Q_CUDA_",
                                           "FP8Q_CUBLASLT", "FP8Q_LOG"))}
    environment.update({"FP8Q_CUDA_DRIVER": str(driver),
                        "FP8Q_CUBLASLT": str(driver.with_name(CUBLASLT_NAME)),
                        "FAKE_CUDA_NAME": "Fake H100", "FAKE_CUDA_CC": "9.0",
                        "FAKE_CUDA_VERSION": "12080", "FAKE_CUBLASLT_VERSION": "120901"})
    result = subprocess.run([str(program), str(kernels)], capture_output=True, text=True,
                            env=environment, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split("\n")[:-1] == ["ok key", "ok choices"]
