#!/usr/bin/env bash
# Regenerates the golden reports in tests/golden/ from the current build. Review the diff
# (git diff tests/golden) before committing: every changed figure should be explained by the change.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SERVESIM_BIN:-build/servesim}
for scenario in tests/golden/*.yaml; do
  "$bin" run "$scenario" --reproducible --json - > "${scenario%.yaml}.json"
  echo "wrote ${scenario%.yaml}.json"
done
