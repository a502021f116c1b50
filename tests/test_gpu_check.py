""".ci/gpu-check cannot pass without a GPU: its failure paths (no kernels,
no usable GPU, a skipped cuda-marked test, a step that times out or finds
no time left in the budget) and what its test steps run (the switches of
each mode, compute-sanitizer) run here on the CPU machine, with a stand-in
interpreter that answers `-m fp8q info` and `-m pytest` as the case needs
(recording each pytest call with the switches it saw) and runs everything
else with the real one. Also: FP8Q_REQUIRE_GPU=1 turns the skip of a real
cuda-marked test into a failure (tests/conftest.py).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
SCRIPT = ROOT / ".ci" / "gpu-check"

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32",
                       reason=".ci/gpu-check is a bash script"),
    pytest.mark.skipif(not SCRIPT.is_file(),
                       reason=".ci/gpu-check is not beside tests/ (the tests "
                              "were copied to test an installed wheel)")]

GOOD_INFO = {"build": {"cuda_kernels": True, "cuda_kernels_reason": "built"},
             "cuda": {"available": True, "reason": None}}

JUNIT = ('<?xml version="1.0"?><testsuites><testsuite name="pytest" '
         'tests="3" skipped="{skipped}" failures="0" errors="0">{cases}'
         '</testsuite></testsuites>')
# A cuda test that skipped, and a test file skipped whole at import (as
# pytest writes them).
SKIPPED_TEST = ('<testcase classname="tests.test_cuda_ops" name="test_{index}">'
                '<skipped type="pytest.skip" message="no GPU"/></testcase>')
SKIPPED_FILE = ('<testcase classname="" name="tests.test_extra_{index}">'
                '<skipped message="collection skipped"/></testcase>')


def fake_python(directory, info, skipped=0, info_sleep=0, files_skipped=0):
    """A stand-in interpreter: `-m fp8q info --json` prints `info`, `-m
    pytest` writes a junit XML with `skipped` skipped tests and
    `files_skipped` test files skipped at import, appends a line to
    `directory`/pytest-calls (FP8Q_CUDA_NO_FP8_TENSOR_CORES, then
    FP8Q_CUDA_SCALED_MM_PATH, "-" where unset, then its arguments) and
    passes; the rest goes to the real interpreter."""
    directory = Path(directory)
    (directory / "info.json").write_text(json.dumps(info))
    cases = "".join([SKIPPED_TEST.format(index=index) for index in range(skipped)]
                    + [SKIPPED_FILE.format(index=index)
                       for index in range(files_skipped)])
    (directory / "junit.xml").write_text(JUNIT.format(
        skipped=skipped + files_skipped, cases=cases))
    script = directory / "python"
    script.write_text(f"""#!/bin/bash
case "$*" in
  "-m fp8q info --json") sleep {info_sleep}; cat '{directory}/info.json' ;;
  "-m fp8q info") echo "fp8q info" ;;
  "-m pytest "*)
    echo "${{FP8Q_CUDA_NO_FP8_TENSOR_CORES:--}} ${{FP8Q_CUDA_SCALED_MM_PATH:--}} $*" \
      >> '{directory}/pytest-calls'
    for argument in "$@"; do
      case "$argument" in
        --junitxml=*) cp '{directory}/junit.xml' "${{argument#--junitxml=}}" ;;
      esac
    done
    echo "3 passed" ;;
  *) exec '{sys.executable}' "$@" ;;
esac
""")
    script.chmod(0o755)
    return script


def run_check(tmp_path, python, *steps, **environment):
    out = tmp_path / "out"
    variables = dict(os.environ, OUT=str(out), PYTHON=str(python),
                     **environment)
    completed = subprocess.run(["bash", str(SCRIPT), *steps],
                               env=variables, capture_output=True, text=True,
                               timeout=120)
    lines = completed.stdout.strip().splitlines()
    return completed.returncode, lines[-1] if lines else "", out


def test_passes_with_kernels_a_gpu_and_no_skips(tmp_path):
    status, last, out = run_check(tmp_path, fake_python(tmp_path, GOOD_INFO),
                                  "info", "tests")
    assert status == 0, last
    assert last == "gpu-check passed: info tests"
    assert json.loads((out / "info.json").read_text()) == GOOD_INFO
    assert (out / "tests.xml").exists() and (out / "tests.log").exists()


def test_fails_without_kernels(tmp_path):
    info = {"build": {"cuda_kernels": False,
                      "cuda_kernels_reason": "nvcc not found"},
            "cuda": {"available": False, "reason": "no kernels"}}
    status, last, _ = run_check(tmp_path, fake_python(tmp_path, info),
                                "info", "tests")
    assert status == 1
    assert last == ("gpu-check FAILED: fp8q was built without CUDA kernels: "
                    "nvcc not found")


def test_fails_without_a_usable_gpu(tmp_path):
    info = dict(GOOD_INFO, cuda={"available": False,
                                 "reason": "no CUDA driver found"})
    status, last, _ = run_check(tmp_path, fake_python(tmp_path, info), "info")
    assert status == 1
    assert last == "gpu-check FAILED: no usable GPU: no CUDA driver found"


def test_fails_when_a_cuda_test_is_skipped(tmp_path):
    status, last, out = run_check(
        tmp_path, fake_python(tmp_path, GOOD_INFO, skipped=2), "tests")
    assert status == 1
    assert last == (f"gpu-check FAILED: 2 cuda-marked tests were skipped "
                    f"({out}/tests.xml)")


def test_test_files_skipped_at_import_are_listed_not_counted(tmp_path):
    """A test file skipped whole at collection (a library the GPU machine
    lacks) holds no cuda test that could run there: listed, not a failure."""
    status, last, out = run_check(
        tmp_path, fake_python(tmp_path, GOOD_INFO, files_skipped=2), "tests")
    assert status == 0, last
    assert ("not collected here (skipped at import): tests.test_extra_1"
            in (out / "tests.log").read_text())


def test_a_step_that_times_out_still_prints_the_summary(tmp_path):
    status, last, out = run_check(
        tmp_path, fake_python(tmp_path, GOOD_INFO, info_sleep=30), "info",
        GPU_CHECK_TIMEOUT_INFO="1")
    assert status == 1
    assert last == (f"gpu-check FAILED: info timed out after 1s "
                    f"({out}/info.log)")


def test_each_mode_runs_the_cuda_tests_under_its_switch(tmp_path):
    """tests: as they are; no_fp8: with FP8Q_CUDA_NO_FP8_TENSOR_CORES=1;
    mm_*: scaled_mm's tests with FP8Q_CUDA_SCALED_MM_PATH set; each its own
    junit XML."""
    modes = ("tests", "no_fp8", "mm_padded", "mm_epilogue", "mm_exact")
    status, last, out = run_check(tmp_path, fake_python(tmp_path, GOOD_INFO),
                                  *modes)
    assert status == 0, last
    assert last == "gpu-check passed: " + " ".join(modes)
    calls = (tmp_path / "pytest-calls").read_text().splitlines()
    common = "-m pytest -q -rs -m cuda -p no:cacheprovider --junitxml="
    mm_tests = ("tests/test_cuda_ops.py tests/test_cuda_graphs.py -k scaled_mm "
                "or linear or quantized_model or nonfinite_token or paths or "
                "graph")
    assert calls == [
        f"- - {common}{out}/tests.xml tests",
        f"1 - {common}{out}/no_fp8.xml tests",
        f"- padded {common}{out}/mm_padded.xml {mm_tests}",
        f"- epilogue {common}{out}/mm_epilogue.xml {mm_tests}",
        f"- exact {common}{out}/mm_exact.xml {mm_tests}"], calls
    assert all((out / f"{mode}.xml").exists() for mode in modes)


def test_a_step_without_time_left_in_the_budget_is_not_run(tmp_path):
    """With GPU_CHECK_BUDGET=12 and an info step of 5 s, the tests step
    would get less than 10 s: not started, the check fails saying so, and
    the summary still comes."""
    status, last, out = run_check(
        tmp_path, fake_python(tmp_path, GOOD_INFO, info_sleep=5), "info",
        "tests", GPU_CHECK_BUDGET="12")
    assert status == 1
    assert last == ("gpu-check FAILED: no time left for the tests step "
                    "(GPU_CHECK_BUDGET=12)")
    assert not (tmp_path / "pytest-calls").exists()


def test_sanitizer_runs_the_cuda_tests_under_memcheck(tmp_path):
    sanitizer = tmp_path / "compute-sanitizer"
    sanitizer.write_text(f"""#!/bin/bash
echo "$*" > '{tmp_path}/sanitizer-call'
shift 4
exec "$@"
""")
    sanitizer.chmod(0o755)
    python = fake_python(tmp_path, GOOD_INFO)
    status, last, out = run_check(tmp_path, python, "sanitizer",
                                  GPU_CHECK_SANITIZER=str(sanitizer))
    assert status == 0, last
    assert (tmp_path / "sanitizer-call").read_text().split() == [
        "--tool", "memcheck", "--error-exitcode", "99", str(python), "-m",
        "pytest", "-q", "-rs", "-m", "cuda", "-p", "no:cacheprovider",
        "tests/test_cuda_ops.py"]


def test_sanitizer_is_passed_over_where_it_is_not_installed(tmp_path):
    completed = subprocess.run(
        ["bash", str(SCRIPT), "sanitizer"], capture_output=True, text=True,
        timeout=120, env=dict(
            os.environ, OUT=str(tmp_path / "out"),
            PYTHON=str(fake_python(tmp_path, GOOD_INFO)),
            GPU_CHECK_SANITIZER="/nonexistent/compute-sanitizer"))
    lines = completed.stdout.splitlines()
    assert completed.returncode == 0, lines
    assert ("sanitizer   not run: /nonexistent/compute-sanitizer is not on "
            "PATH") in lines
    assert lines[-1] == "gpu-check passed: sanitizer"
    assert not (tmp_path / "pytest-calls").exists()


def test_require_gpu_turns_a_real_skip_into_a_failure():
    """On this machine the cuda-marked tests skip (no GPU): with
    FP8Q_REQUIRE_GPU=1 they fail, saying why they would have skipped."""
    if json.loads(subprocess.run(
            [sys.executable, "-m", "fp8q", "info", "--json"],
            capture_output=True, text=True, check=True).stdout
    )["cuda"]["available"]:
        pytest.skip("a GPU is usable here: nothing skips")
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfE", "-p",
         "no:cacheprovider",
         str(ROOT / "tests" / "test_cuda_ops.py"), "-k",
         "every_dtype_pair_matches_the_cpu and float32"],
        env=dict(os.environ, FP8Q_REQUIRE_GPU="1"), capture_output=True,
        text=True, timeout=120, cwd=ROOT)
    assert completed.returncode == 1, completed.stdout
    assert "FP8Q_REQUIRE_GPU=1 and this cuda-marked test was skipped: " \
        "no usable CUDA GPU" in completed.stdout
    # A skip in a fixture's setup becomes an error, a test's own a failure.
    assert "1 error" in completed.stdout.splitlines()[-1]
