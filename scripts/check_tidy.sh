#!/usr/bin/env bash
# Runs clang-tidy with .clang-tidy's checks over every library and program source (not the
# tests), in parallel, and fails on any finding. Needs a build folder configured with
# CMAKE_EXPORT_COMPILE_COMMANDS (the default here):
#   scripts/check_tidy.sh [BUILD]       (default build/; about 10 CPU-seconds per source)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -f "$build/compile_commands.json" ] || { echo "no $build/compile_commands.json: configure $build first" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.cpp' | grep -v '^tests/' | grep -v '^tools/gpu_collector/.*\.cu$')
run-clang-tidy -quiet -p "$build" -j "$(nproc)" "${files[@]}"
