"""The GEMM tuner (csrc/cuda/matmul.h, "Algorithm choice"; docs/scaled_mm.md)
on the fake CUDA driver and cuBLASLt (tests/fake_gpu.py): cuBLASLt's
candidates timed once per key with the driver's timing events and the
fastest kept, refused candidates skipped, nothing timed during a CUDA graph
capture, FP8Q_CUDA_GEMM_TUNING=0, the fast-accumulation flag on the
descriptor; and a weight's transposed block scales read in place by the one
cuBLASLt call. The scenarios are in tests/fake_gpu_tuning.py.
"""
from test_cuda_fake_device import fake_driver  # noqa: F401 (a fixture)
from test_cuda_fake_device import run_scenario as run_fake_scenario

COSTS = "30,10,20"


def run_scenario(driver, name, tmp_path, environment=None, **fake):
    """A scenario of tests/fake_gpu_tuning.py on sm_90, the fake cuBLASLt
    offering three algorithms of COSTS microseconds and logging each
    product's algorithm."""
    run_fake_scenario(driver, name, tmp_path, environment,
                      module="fake_gpu_tuning",
                      cublaslt_algo_log=tmp_path / "algos.log",
                      cublaslt_algo_costs=COSTS, cc="9.0", **fake)


def test_the_fastest_candidate_is_timed_once_and_kept(fake_driver, tmp_path):
    run_scenario(fake_driver, "the_fastest_candidate_is_timed_once_and_kept",
                 tmp_path)


def test_never_timed_while_capturing(fake_driver, tmp_path):
    run_scenario(fake_driver, "never_timed_while_capturing", tmp_path)


def test_fast_accumulation_reaches_the_descriptor(fake_driver, tmp_path):
    run_scenario(fake_driver, "fast_accumulation_reaches_the_descriptor",
                 tmp_path)


def test_weight_block_scales_are_read_in_place(fake_driver, tmp_path):
    run_scenario(fake_driver, "weight_block_scales_are_read_in_place",
                 tmp_path)


def test_a_refused_candidate_is_skipped(fake_driver, tmp_path):
    run_scenario(fake_driver, "a_refused_candidate_is_skipped", tmp_path,
                 cublaslt_refuse_algo=2)


def test_tuning_switched_off(fake_driver, tmp_path):
    run_scenario(fake_driver, "tuning_switched_off", tmp_path,
                 {"FP8Q_CUDA_GEMM_TUNING": "0"})


def test_choices_saved_loaded_and_refused_elsewhere(fake_driver, tmp_path):
    """fp8q.gemm_tuning: save in one process, load in another (no timing),
    refused on another GPU model, and with a damaged line not at all."""
    path = str(tmp_path / "tuning.txt")
    for scenario, gpu in (("choices_are_saved", "Fake H100"),
                          ("saved_choices_are_loaded", "Fake H100"),
                          ("another_gpus_choices_are_refused", "Fake H200"),
                          ("a_bad_line_loads_nothing", "Fake H100")):
        run_scenario(fake_driver, scenario, tmp_path,
                     {"TUNING_FILE": path, "FAKE_CUDA_NAME": gpu})
