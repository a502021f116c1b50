"""The cuBLASLt constants fp8q copies by hand into csrc/cuda/cublaslt_api.h
(fp8q includes no CUDA header) against NVIDIA's cublasLt.h, where one is
installed: a tiny C program includes the header and prints each value.
Skips where no cublasLt.h or no C compiler is found."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
API_HEADER = ROOT / "csrc" / "cuda" / "cublaslt_api.h"

# fp8q's name -> NVIDIA's, for every constant of cublaslt_api.h.
NVIDIA_NAMES = {
    "FP8Q_LT_SUCCESS": "CUBLAS_STATUS_SUCCESS",
    "FP8Q_LT_INVALID_VALUE": "CUBLAS_STATUS_INVALID_VALUE",
    "FP8Q_LT_NOT_SUPPORTED": "CUBLAS_STATUS_NOT_SUPPORTED",
    "FP8Q_LT_R_32F": "CUDA_R_32F",
    "FP8Q_LT_R_16F": "CUDA_R_16F",
    "FP8Q_LT_R_16BF": "CUDA_R_16BF",
    "FP8Q_LT_R_8F_E4M3": "CUDA_R_8F_E4M3",
    "FP8Q_LT_R_8F_E5M2": "CUDA_R_8F_E5M2",
    "FP8Q_LT_COMPUTE_32F": "CUBLAS_COMPUTE_32F",
    "FP8Q_LT_OP_N": "CUBLAS_OP_N",
    "FP8Q_LT_OP_T": "CUBLAS_OP_T",
    "FP8Q_LT_DESC_TRANSA": "CUBLASLT_MATMUL_DESC_TRANSA",
    "FP8Q_LT_DESC_TRANSB": "CUBLASLT_MATMUL_DESC_TRANSB",
    "FP8Q_LT_DESC_EPILOGUE": "CUBLASLT_MATMUL_DESC_EPILOGUE",
    "FP8Q_LT_DESC_BIAS_POINTER": "CUBLASLT_MATMUL_DESC_BIAS_POINTER",
    "FP8Q_LT_DESC_A_SCALE_POINTER": "CUBLASLT_MATMUL_DESC_A_SCALE_POINTER",
    "FP8Q_LT_DESC_B_SCALE_POINTER": "CUBLASLT_MATMUL_DESC_B_SCALE_POINTER",
    "FP8Q_LT_DESC_D_SCALE_POINTER": "CUBLASLT_MATMUL_DESC_D_SCALE_POINTER",
    "FP8Q_LT_DESC_AMAX_D_POINTER": "CUBLASLT_MATMUL_DESC_AMAX_D_POINTER",
    "FP8Q_LT_DESC_FAST_ACCUM": "CUBLASLT_MATMUL_DESC_FAST_ACCUM",
    "FP8Q_LT_DESC_BIAS_DATA_TYPE": "CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE",
    "FP8Q_LT_DESC_A_SCALE_MODE": "CUBLASLT_MATMUL_DESC_A_SCALE_MODE",
    "FP8Q_LT_DESC_B_SCALE_MODE": "CUBLASLT_MATMUL_DESC_B_SCALE_MODE",
    "FP8Q_LT_EPILOGUE_DEFAULT": "CUBLASLT_EPILOGUE_DEFAULT",
    "FP8Q_LT_EPILOGUE_BIAS": "CUBLASLT_EPILOGUE_BIAS",
    "FP8Q_LT_SCALE_SCALAR_32F": "CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F",
    "FP8Q_LT_SCALE_OUTER_VEC_32F":
        "CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F",
    "FP8Q_LT_SCALE_VEC128_32F": "CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F",
    "FP8Q_LT_SCALE_BLK128x128_32F":
        "CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F",
    "FP8Q_LT_PREF_MAX_WORKSPACE_BYTES":
        "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES",
    "FP8Q_LT_PREF_MIN_ALIGNMENT_A_BYTES":
        "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES",
    "FP8Q_LT_PREF_MIN_ALIGNMENT_B_BYTES":
        "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES",
    "FP8Q_LT_PREF_MIN_ALIGNMENT_C_BYTES":
        "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES",
    "FP8Q_LT_PREF_MIN_ALIGNMENT_D_BYTES":
        "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES",
}


def fp8q_constants():
    """{name: value} of the numeric #defines of cublaslt_api.h."""
    found = re.findall(r"^#define (FP8Q_LT_\w+) (\d+)", API_HEADER.read_text(),
                       re.MULTILINE)
    return {name: int(value) for name, value in found}


def include_directories():
    """Directories holding cublasLt.h: the CUDA toolkit's, NVIDIA's wheels'."""
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
             "/usr/local/cuda"]
    candidates = [Path(root) / "include" for root in roots if root]
    for entry in sys.path:
        for sub in ("nvidia/cu13/include", "nvidia/cublas/include"):
            candidates.append(Path(entry) / sub)
    return [path for path in candidates if (path / "cublasLt.h").is_file()]


def test_every_constant_has_its_nvidia_name():
    assert set(fp8q_constants()) == set(NVIDIA_NAMES)


def test_constants_match_cublaslt_h(tmp_path):
    directories = include_directories()
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if not directories or compiler is None:
        pytest.skip("no cublasLt.h (CUDA toolkit or nvidia-cublas wheel) or "
                    "no C compiler")
    constants = fp8q_constants()
    lines = "".join(f'    printf("{name} %d\\n", (int){NVIDIA_NAMES[name]});\n'
                    for name in constants)
    source = tmp_path / "constants.c"
    source.write_text("#include <stdio.h>\n#include <cublasLt.h>\n"
                      "int main(void)\n{\n" + lines + "    return 0;\n}\n")
    includes = [flag for directory in directories
                for flag in ("-I", str(directory))]
    if Path("/usr/local/cuda/include").is_dir():
        includes += ["-I", "/usr/local/cuda/include"]
    program = tmp_path / "constants"
    subprocess.run([compiler, *includes, "-o", str(program), str(source)],
                   check=True)
    printed = subprocess.run([str(program)], capture_output=True, text=True,
                             check=True).stdout.split()
    header = dict(zip(printed[::2], map(int, printed[1::2])))
    assert header == constants
