#!/usr/bin/env bash
# Installs a build (cmake --install BUILD --prefix TMP), builds tests/install/consumer against the
# installed CMake package (find_package(servesim), servesim::studies) and checks that it runs
# and agrees with the installed binary on the same hypothesis. Usage: scripts/check_install.sh BUILD
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
test -x "$work/prefix/bin/servesim"
test -f "$work/prefix/lib/cmake/servesim/servesimConfig.cmake"
test -f "$work/prefix/include/servesim/studies/evaluate.h"
cmake -S tests/install/consumer -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
out=$("$work/consumer/consumer" scenarios/quickstart.yaml)
echo "$out"
ref=$("$work/prefix/bin/servesim" run scenarios/quickstart.yaml --set workload.requests=200 --reproducible --json - |
      python3 -c 'import json,sys; r=json.load(sys.stdin); print("events %d" % r["simulation"]["events"]); print("ttft_p99_ms %.6f" % r["summary"]["ttft_ms"]["p99"])')
version=$("$work/prefix/bin/servesim" --version)
expected=$(printf '%s\n%s' "$version" "$ref")
if [ "$out" != "$expected" ]; then
  echo "the consumer disagrees with the installed servesim:"; echo "$expected"; exit 1
fi
echo "install ok: $version"
