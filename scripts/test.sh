#!/usr/bin/env bash
# Installs what is missing, checks the sources' format, then builds and runs every test twice:
# in the Release build (build/) and in the AddressSanitizer + UndefinedBehaviorSanitizer build
# (build-asan/); then fuzzes the input readers for a minute (scripts/fuzz.sh, build-fuzz/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
jobs=$(nproc)

# The sources as clang-format writes them (.clang-format).
scripts/check_format.sh

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs"
ctest --test-dir build -L default --output-on-failure -j "$jobs"

# -O1 without debug information: quick to build, and ASan's reports still name functions.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS=-O1 -DSERVESIM_SANITIZE=ON >/dev/null
# Only the test executables (and what they run): the benchmarks and tools are not tested there.
cmake --build build-asan -j "$jobs" --target servesim_tests
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -L default --output-on-failure -j "$jobs"

# libFuzzer on the input readers (tests/fuzz): 15 s per harness, 60 s in all; skips, saying so,
# without clang.
scripts/fuzz.sh 15
