#!/bin/sh
# run.sh - builds and runs the core cast benchmark (tests/c/bench/bench_cast.c)
# with the same strict flags as the unit tests. Not part of the test run.
#
#   tests/c/bench/run.sh
#   CC=clang CFLAGS="-O3 -fno-trapping-math" tests/c/bench/run.sh
set -eu

ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
CC=${CC:-cc}
CFLAGS=${CFLAGS:--O2 -fno-trapping-math -ffp-contract=off}
BUILD_DIR=${BUILD_DIR:-$ROOT/build/tests-c/bench-$(basename "$CC")}
STRICT="-std=c11 -Wall -Wextra -Wpedantic -Werror"

case "$("$CC" -dumpmachine 2>/dev/null)" in
    x86_64*|i?86*|amd64*)
        AVX2_FLAGS="-mavx2 -mf16c"; FMA_FLAGS="-mavx2 -mfma -mf16c" ;;
    *) AVX2_FLAGS=""; FMA_FLAGS="" ;;
esac
SOURCES="$ROOT/csrc/platform.c"
for source in "$ROOT"/csrc/core/*.c; do
    case "$source" in
        */convert_avx2.c|*/scaled_mm_avx2.c) ;;
        *) SOURCES="$SOURCES $source" ;;
    esac
done

mkdir -p "$BUILD_DIR"
# shellcheck disable=SC2086  # flags and source lists are word lists
"$CC" $STRICT $CFLAGS $AVX2_FLAGS -I"$ROOT/csrc" \
    -c "$ROOT/csrc/core/convert_avx2.c" -o "$BUILD_DIR/convert_avx2.o"
# shellcheck disable=SC2086
"$CC" $STRICT $CFLAGS $FMA_FLAGS -I"$ROOT/csrc" \
    -c "$ROOT/csrc/core/scaled_mm_avx2.c" -o "$BUILD_DIR/scaled_mm_avx2.o"
# shellcheck disable=SC2086
"$CC" $STRICT $CFLAGS -I"$ROOT/csrc" $SOURCES "$BUILD_DIR/convert_avx2.o" \
    "$BUILD_DIR/scaled_mm_avx2.o" \
    "$ROOT/tests/c/bench/bench_cast.c" -o "$BUILD_DIR/bench_cast" \
    -pthread -lm
echo "$CC $STRICT $CFLAGS"
exec "$BUILD_DIR/bench_cast"
