#!/bin/sh
# run.sh - builds tests/c/cuda_loader (csrc/cuda's driver and cuBLASLt
# loading, with the platform layer) for Windows and runs each scenario under
# Wine in a fresh process and folder (see cuda_loader.c).
#
#   CC=x86_64-w64-mingw32-gcc tests/c/cuda_loader/run.sh
#   CC=.ci/zig-cc-windows tests/c/cuda_loader/run.sh     # the Universal CRT
#
# Environment: CC (a compiler for Windows); RUNNER (default wine); BUILD_DIR
# (default build/cuda-loader/<compiler>); PYTHON (default python3) writes the
# generated kernel list. Needs winepath beside wine.
set -eu

ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
HERE="$ROOT/tests/c/cuda_loader"
CC=${CC:?CC must be a compiler for Windows}
RUNNER=${RUNNER:-wine}
BUILD_DIR=${BUILD_DIR:-$ROOT/build/cuda-loader/$(basename "$CC")}
STRICT="-std=c11 -Wall -Wextra -Wpedantic -Werror -O2"
WINEDEBUG=${WINEDEBUG:--all}
export WINEDEBUG

rm -rf "$BUILD_DIR"
mkdir -p "$BUILD_DIR/bin"
# What driver.c reads of the generated build facts: a module without
# kernels (the loader's paths do not depend on them).
cat >"$BUILD_DIR/fp8q_build_info.h" <<'HEADER'
#define FP8Q_CUDA_KERNELS 0
#define FP8Q_CUDA_KERNELS_REASON "tests/c/cuda_loader"
HEADER
# driver.h's kernel list (cuda/kernel_list.h), generated as CMakeLists.txt
# does.
"${PYTHON:-python3}" "$ROOT/csrc/registries.py" kernels "$BUILD_DIR"
echo "building $BUILD_DIR/bin/cuda_loader.exe with $CC $STRICT"
# shellcheck disable=SC2086
"$CC" $STRICT -I"$ROOT/csrc" -I"$ROOT/kernels" -I"$BUILD_DIR" "$HERE/cuda_loader.c" \
    "$ROOT/csrc/cuda/driver.c" "$ROOT/csrc/cuda/switches.c" "$ROOT/csrc/cuda/kernel_image.c" \
    "$ROOT/csrc/cuda/cublaslt.c" "$ROOT/csrc/cuda/memory.c" "$ROOT/csrc/cuda/capture.c" \
    "$ROOT/csrc/cuda/context.c" \
    "$ROOT/csrc/core/status.c" "$ROOT/csrc/platform.c" -o "$BUILD_DIR/bin/cuda_loader.exe"
# shellcheck disable=SC2086
"$CC" $STRICT -shared "$HERE/fake_library.c" -o "$BUILD_DIR/fake_library.dll"

# Each scenario: its own working directory with the fake planted under the
# real libraries' names (never to be loaded from there).
scenario() {
    name=$1
    shift
    directory="$BUILD_DIR/$name"
    mkdir -p "$directory"
    for planted in nvcuda.dll cublasLt64_12.dll cublasLt64_13.dll; do
        cp "$BUILD_DIR/fake_library.dll" "$directory/$planted"
    done
    (cd "$directory" && env -u CUDA_HOME CUDA_PATH=C:/fp8q-no-toolkit \
        $RUNNER "$BUILD_DIR/bin/cuda_loader.exe" "$name" "$@")
}
wheel_a="$BUILD_DIR/wheel-a"
wheel_b="$BUILD_DIR/wheel-b"
mkdir -p "$wheel_a" "$wheel_b"
windows_a=$(winepath -w "$wheel_a" 2>/dev/null)
windows_b=$(winepath -w "$wheel_b" 2>/dev/null)

failed=0
scenario no-driver || failed=1
FP8Q_CUDA_DRIVER=$(winepath -w "$BUILD_DIR/fake_library.dll" 2>/dev/null) \
    scenario no-entry-points || failed=1
scenario cublaslt-order "$windows_a" "$windows_b" || failed=1
mkdir -p "$wheel_b/nvidia/cublas/bin"
cp "$BUILD_DIR/fake_library.dll" "$wheel_b/nvidia/cublas/bin/cublasLt64_12.dll"
scenario cublaslt-wheel "$windows_a" "$windows_b" || failed=1
scenario kernel-image-missing || failed=1
# A fatbin header (magic, version 1, header size 16) with no payload, in a
# folder whose name is not ASCII.
mkdir -p "$BUILD_DIR/kernel-image-valid/kernel-é"
printf '\120\355\125\272\001\000\020\000\000\000\000\000\000\000\000\000' \
    >"$BUILD_DIR/kernel-image-valid/kernel-é/fp8q_kernels.fatbin"
scenario kernel-image-valid || failed=1
[ "$failed" -eq 0 ] && echo "cuda loader: 6 scenarios passed"
exit "$failed"
