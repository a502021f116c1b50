#!/bin/sh
# run.sh - builds the C unit tests of csrc/core and csrc/platform with strict
# flags and runs them.
#
#   tests/c/run.sh                       # cc, native
#   CC=clang tests/c/run.sh
#   CC=x86_64-w64-mingw32-gcc RUNNER=wine tests/c/run.sh
#
#   CC=.ci/zig-cc-windows RUNNER=wine tests/c/run.sh   # the Universal CRT
#
# Environment: CC (default cc); CFLAGS (default -O2 -fno-trapping-math
# -ffp-contract=off, as CMakeLists.txt builds the module); RUNNER (a program
# the test binary runs under, e.g. wine); BUILD_DIR (default
# build/tests-c/<compiler>); DIGESTS (a file: tests/c/digests/digests.c is
# built too and its digests of the core's results written there, for
# comparing compilers and C runtimes).
# Arguments are passed to the test binary: [seed] [test-name-substring]. The
# seed is fixed when not given (tests/c/harness.c, DEFAULT_SEED), so every run
# of a commit checks the same cases; `tests/c/run.sh $(date +%s)` draws others.
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CC=${CC:-cc}
CFLAGS=${CFLAGS:--O2 -fno-trapping-math -ffp-contract=off}
RUNNER=${RUNNER:-}
BUILD_DIR=${BUILD_DIR:-$ROOT/build/tests-c/$(basename "$CC")}
STRICT="-std=c11 -Wall -Wextra -Wpedantic -Werror"

case "$CC" in
    *mingw*|*windows*) SUFFIX=.exe; LIBS="" ;;
    *) SUFFIX=""; LIBS="-pthread -lm" ;;
esac
EXE=fp8q_core_tests$SUFFIX

# convert_avx2.c (AVX2, F16C) and scaled_mm_avx2.c (AVX2, FMA, F16C) are the
# files built for newer x86 instruction sets (as CMakeLists.txt does); the
# rest is built for the baseline instruction set.
case "$("$CC" -dumpmachine 2>/dev/null)" in
    x86_64*|i?86*|amd64*)
        AVX2_FLAGS="-mavx2 -mf16c"; FMA_FLAGS="-mavx2 -mfma -mf16c" ;;
    *) AVX2_FLAGS=""; FMA_FLAGS="" ;;
esac
CORE="$ROOT/csrc/platform.c"
for source in "$ROOT"/csrc/core/*.c; do
    case "$source" in
        */convert_avx2.c|*/scaled_mm_avx2.c) ;;
        *) CORE="$CORE $source" ;;
    esac
done
SOURCES="$CORE $ROOT/tests/c/*.c"

mkdir -p "$BUILD_DIR"
echo "building $BUILD_DIR/$EXE with $CC $STRICT $CFLAGS"
# shellcheck disable=SC2086  # flags and source lists are word lists
"$CC" $STRICT $CFLAGS $AVX2_FLAGS -I"$ROOT/csrc" \
    -c "$ROOT/csrc/core/convert_avx2.c" -o "$BUILD_DIR/convert_avx2.o"
# shellcheck disable=SC2086
"$CC" $STRICT $CFLAGS $FMA_FLAGS -I"$ROOT/csrc" \
    -c "$ROOT/csrc/core/scaled_mm_avx2.c" -o "$BUILD_DIR/scaled_mm_avx2.o"
# shellcheck disable=SC2086
"$CC" $STRICT $CFLAGS -I"$ROOT/csrc" -I"$ROOT/tests/c" $SOURCES \
    "$BUILD_DIR/convert_avx2.o" "$BUILD_DIR/scaled_mm_avx2.o" \
    -o "$BUILD_DIR/$EXE" $LIBS

if [ -n "$RUNNER" ]; then
    # Wine prints set-up noise on stderr; quiet it where we can.
    WINEDEBUG=${WINEDEBUG:--all}
    export WINEDEBUG
fi
if [ -n "${DIGESTS:-}" ]; then
    # shellcheck disable=SC2086
    "$CC" $STRICT $CFLAGS -I"$ROOT/csrc" $CORE "$ROOT/tests/c/digests/digests.c" \
        "$BUILD_DIR/convert_avx2.o" "$BUILD_DIR/scaled_mm_avx2.o" \
        -o "$BUILD_DIR/fp8q_digests$SUFFIX" $LIBS
    # shellcheck disable=SC2086
    $RUNNER "$BUILD_DIR/fp8q_digests$SUFFIX" | tr -d '\r' >"$DIGESTS"
    if grep -q '^FAILED' "$DIGESTS"; then
        grep '^FAILED' "$DIGESTS" >&2
        exit 1
    fi
    echo "digests of the core's results: $DIGESTS ($(wc -l <"$DIGESTS") cases)"
fi
# shellcheck disable=SC2086
exec $RUNNER "$BUILD_DIR/$EXE" "$@"
