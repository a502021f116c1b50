"""csrc/cuda/ops.h, op_call.h, weight_only_ops.h and calibration_ops.h tested from C on the fake CUDA driver: builds
tests/c/cuda_ops/cuda_ops.c with csrc/platform.c, csrc/core and csrc/cuda
(no Python, no binding) and runs it with FP8Q_CUDA_DRIVER naming the fake
driver, which runs the kernels' launch contracts on the host. Each of its
checks prints "ok NAME"; every one must have run and passed."""
import os
import platform
import shutil
import subprocess

from fake_gpu import ROOT, TESTS, build_fake_driver, write_kernel_list

CHECKS = ["cast-transposed", "cast-gathered", "cast-contiguous", "cast-strided-out",
          "cast-scale-shape", "amax-columns-in-place", "amax-rows-gathered",
          "amax-whole-gathered", "amax-none", "amax-finite",
          "weight-only-cuda-cores", "weight-only-split-k", "weight-only-every-row-split",
          "weight-only-short-scratch", "weight-only-cuda-cores-split",
          "weight-only-cuda-cores-split-rows", "weight-only-cuda-cores-full",
          "weight-only-cuda-cores-one-copy", "weight-only-cuda-cores-short-k",
          "weight-only-cuda-cores-short-scratch",
          "weight-only-declines", "calib-max", "calib-histogram",
          "layer-activation-options", "op-call-gathered"]

# What csrc/cuda/driver.c reads of the generated build facts: a build with
# kernels (the fake driver accepts any image).
BUILD_INFO = """#define FP8Q_CUDA_KERNELS 1
#define FP8Q_CUDA_KERNELS_REASON "built"
#define FP8Q_CUDA_MIN_DRIVER_VERSION 12000
#define FP8Q_CUDA_PTX_MIN_DRIVER_VERSION 12000
#define FP8Q_KERNEL_ARCHS "sm_90"
"""

# A fatbin header (magic, version 1, header size 16) with no payload.
FATBIN_HEADER = bytes([0x50, 0xED, 0x55, 0xBA, 1, 0, 16, 0]) + bytes(8)


def build(directory, program_name="cuda_ops"):
    """Compiles the test program tests/c/cuda_ops/PROGRAM_NAME.c into
    `directory`; returns its path."""
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    write_kernel_list(directory / "generated")
    (directory / "generated" / "fp8q_build_info.h").write_text(BUILD_INFO)
    flags = ["-std=c11", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-O1",
             "-ffp-contract=off", "-fno-trapping-math", "-I", str(ROOT / "csrc"),
             "-I", str(ROOT / "kernels"), "-I", str(directory / "generated")]
    x86 = platform.machine().lower() in ("x86_64", "amd64", "i686", "i386")
    objects = []
    # The files built for newer x86 instruction sets, as CMakeLists.txt does.
    for name in ("convert_avx2", "scaled_mm_avx2"):
        target = directory / f"{name}.o"
        subprocess.run([compiler, *flags, *(["-mavx2", "-mfma", "-mf16c"] if x86 else []),
                        "-c", str(ROOT / "csrc" / "core" / f"{name}.c"), "-o", str(target)],
                       check=True)
        objects.append(str(target))
    sources = [str(TESTS / "c" / "cuda_ops" / f"{program_name}.c"),
               str(TESTS / "c" / "cuda_ops" / "device_helpers.c"), str(ROOT / "csrc" / "platform.c")]
    sources += sorted(str(path) for path in (ROOT / "csrc" / "core").glob("*.c")
                      if not path.stem.endswith("_avx2"))
    sources += sorted(str(path) for path in (ROOT / "csrc" / "cuda").glob("*.c"))
    program = directory / program_name
    subprocess.run([compiler, *flags, *sources, *objects, "-o", str(program),
                    "-pthread", "-lm", "-ldl"], check=True)
    return program


def test_cuda_ops_from_c_on_the_fake_driver(tmp_path):
    driver = build_fake_driver(tmp_path)
    program = build(tmp_path)
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "fp8q_kernels.fatbin").write_bytes(FATBIN_HEADER)
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith(("FAKE_CUDA_", "FP8Q_CUDA_", "FP8Q_CUBLASLT"))}
    environment["FP8Q_CUDA_DRIVER"] = str(driver)
    result = subprocess.run([str(program), str(kernels)], capture_output=True, text=True,
                            env=environment, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split("\n")[:-1] == [f"ok {name}" for name in CHECKS]
