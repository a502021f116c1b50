"""Which product a W8A8 fp8q.torch.Linear runs on a GPU for its token
count (csrc/cuda/layer_path.h: the weight-only product up to a crossover
by device kind, quantize + FP8 GEMM above; FP8Q_CUDA_FP8_LAYER_PATH and
_C.linear_layer's path argument force either), and that the bench
breakdown's pieces add up to the layer: on the fake CUDA driver and
cuBLASLt (tests/fake_gpu.py), scenarios in tests/fake_gpu_layer.py.
"""
import pytest

from fake_gpu import TESTS, run_child
from test_cuda_fake_device import fake_driver  # noqa: F401 (a fixture)


def run_scenario(driver, name, tmp_path, environment=None, **fake):
    code = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); "
            f"import fake_gpu_layer; fake_gpu_layer.{name}()")
    run_child(driver, code, log=tmp_path / "calls.log",
              environment=environment, **fake)


@pytest.mark.parametrize("cc, switches, crossover", [
    ("9.0", {}, 4),
    ("8.9", {}, 4),
    ("9.0", {"FP8Q_CUDA_NO_FP8_TENSOR_CORES": "1"}, 16),
    ("8.6", {}, 16),
    ("9.0", {"FP8Q_CUDA_FP8_LAYER_PATH": "fp8"}, 4),
    ("9.0", {"FP8Q_CUDA_FP8_LAYER_PATH": "weight-only"}, 4),
    ("8.6", {"FP8Q_CUDA_FP8_LAYER_PATH": "auto"}, 16),
], ids=["sm_90", "sm_89", "sm_90 without FP8 tensor cores", "sm_86",
        "forced fp8", "forced weight-only", "auto set"])
def test_layer_takes_the_weight_only_product_for_few_tokens(
        fake_driver, tmp_path, cc, switches, crossover):
    run_scenario(fake_driver, "fp8_layer_path_by_tokens", tmp_path,
                 {**switches, "EXPECTED_CROSSOVER": str(crossover)}, cc=cc)


def test_layer_path_argument_is_checked(fake_driver, tmp_path):
    run_scenario(fake_driver, "layer_path_argument_is_checked", tmp_path)


def test_layer_takes_quantized_activations(fake_driver, tmp_path):
    run_scenario(fake_driver, "layer_takes_quantized_activations", tmp_path)


@pytest.mark.parametrize("cc", ["9.0", "8.6"])
def test_breakdown_pieces_add_up_to_the_layer(fake_driver, tmp_path, cc):
    run_scenario(fake_driver, "breakdown_pieces_add_up_to_the_layer",
                 tmp_path, cc=cc)
