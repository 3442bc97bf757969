#!/usr/bin/env bash
# Prints one line per shipped scenario with the SHA-256 of its reproducible JSON report (`run
# --reproducible --json -`) and of every file `--out` writes, so that a change meant to keep
# results can be checked against the build before it:
#   scripts/report_digests.sh > before.txt; (change, rebuild); scripts/report_digests.sh | diff before.txt -
# SERVESIM_BIN picks the binary (default build/servesim); arguments, when given, are the scenarios.
# The commit each report names (core/version.h) is masked, so that builds of different commits
# with the same results give the same digests.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SERVESIM_BIN:-build/servesim}
if [ $# -gt 0 ]; then scenarios=("$@"); else mapfile -t scenarios < <(find scenarios tests/golden -name '*.yaml' | sort); fi
mask() { sed -E 's/(commit"?:? ?"?)[0-9a-f]{7,40}|\(commit [0-9a-f]{7,40}\)/\1COMMIT/g'; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for s in "${scenarios[@]}"; do
  json=$("$bin" run "$s" --reproducible --json - | mask | sha256sum | cut -c1-16)
  rm -rf "$work/out"
  "$bin" run "$s" --reproducible --out "$work/out" >/dev/null
  files=$(cd "$work/out" && for f in $(ls); do printf '%s=%s ' "$f" "$(mask < "$f" | sha256sum | cut -c1-16)"; done)
  echo "$s json=$json $files"
done
