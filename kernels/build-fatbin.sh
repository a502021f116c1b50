#!/usr/bin/env bash
# kernels/build-fatbin.sh - builds fp8q's CUDA kernels once, independent of
# any Python version, for every wheel and source build to embed through
# FP8Q_PREBUILT_FATBIN:
#
#   bash kernels/build-fatbin.sh OUT_DIR
#     -> OUT_DIR/fp8q_kernels.fatbin (the real code: cubins),
#        OUT_DIR/fp8q_kernels_ptx.fatbin (the newest architecture's PTX,
#        zstd-compressed) and OUT_DIR/fp8q_kernels.fatbin.cmake
#        (the nvcc version, hence the oldest driver, and the architectures)
#
# nvcc: $NVCC where set (e.g. a CUDA 12.x toolkit's, for R525+ drivers), else
# CUDA 13.0 from PyPI (nvidia-cuda-nvcc with its header packages, R580+
# drivers), installed into OUT_DIR/toolchain. FP8Q_CUDA_ARCHS (default all:
# sm_75 ... sm_120 + PTX) picks the architectures. PYTHON (default python3)
# runs the virtual environment and CMake's configure (it needs NumPy >= 2).
#
# FP8Q_FATBIN_DRIVER=12 (default 13): kernels for CUDA 12 drivers (R525+)
# without a CUDA 12 nvcc, which PyPI lacks: nvcc writes PTX, lowered to PTX
# ISA 8.8, and CUDA 12.9's ptxas from PyPI (nvidia-cuda-nvcc-cu12) assembles
# the real code (CMakeLists.txt's FP8Q_PTXAS). Real code then needs a CUDA
# 12.0+ driver, the PTX for newer GPUs a 12.9+ one.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: bash kernels/build-fatbin.sh OUT_DIR" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
unset FP8Q_PREBUILT_FATBIN  # this script is what makes one
mkdir -p "$1"
out=$(cd "$1" && pwd)
toolchain="$out/toolchain"

if [ ! -x "$toolchain/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$toolchain"
fi
packages=("numpy>=2")
if [ -z "${NVCC:-}" ]; then
  # One release throughout: a newer nvvm writes PTX that this ptxas refuses.
  packages+=(nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88
             nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85)
fi
case "${FP8Q_FATBIN_DRIVER:=13}" in
  13) ;;
  12) packages+=(nvidia-cuda-nvcc-cu12==12.9.86) ;;
  *) echo "build-fatbin.sh: FP8Q_FATBIN_DRIVER is 12 or 13, not '$FP8Q_FATBIN_DRIVER'" >&2; exit 2 ;;
esac
"$toolchain/bin/python" -m pip install -q --disable-pip-version-check "${packages[@]}" 2>&1 \
  | grep -v -E "^WARNING: Location '[^']*' is ignored" || true
nvcc=${NVCC:-$("$toolchain/bin/python" -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "bin", "nvcc"))')}
"$nvcc" --version | tail -n 1
ptxas=""
if [ "$FP8Q_FATBIN_DRIVER" = 12 ]; then
  ptxas=$("$toolchain/bin/python" -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cuda_nvcc", "bin", "ptxas"))')
  "$ptxas" --version | tail -n 1
fi

cmake -S "$root" -B "$out/build" -DPython_EXECUTABLE="$toolchain/bin/python" \
  -DCMAKE_CUDA_COMPILER="$nvcc" -DFP8Q_CUDA_ARCHS="${FP8Q_CUDA_ARCHS:-all}" -DFP8Q_PTXAS="$ptxas" \
  >"$out/configure.log" \
  || { cat "$out/configure.log"; exit 1; }
grep -E 'CUDA kernels:|fp8q: ptxas' "$out/configure.log"
start=$SECONDS
cmake --build "$out/build" --target fp8q_fatbin --parallel
generated="$out/build/generated/cuda"
cp "$generated/fp8q_kernels.fatbin" "$generated/fp8q_kernels_ptx.fatbin" \
  "$generated/fp8q_kernels.fatbin.cmake" "$out/"
printf 'fatbin: %s (%d bytes), %s (%d bytes) in %ds\n' \
  "$out/fp8q_kernels.fatbin" "$(wc -c <"$out/fp8q_kernels.fatbin")" \
  "$out/fp8q_kernels_ptx.fatbin" "$(wc -c <"$out/fp8q_kernels_ptx.fatbin")" \
  $((SECONDS - start))
cat "$out/fp8q_kernels.fatbin.cmake"
