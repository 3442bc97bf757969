#!/usr/bin/env bash
# Installs what is missing, builds servesim (Release, build/servesim) and runs the bundled default
# scenario: prints the summary table and writes the JSON report, the per-request CSV and the
# summary to build/quickstart/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target servesim
build/servesim run scenarios/quickstart.yaml --out build/quickstart
