#!/usr/bin/env bash
# Fails when a C++ source differs from what clang-format makes of it under .clang-format, and
# names the files:
#   scripts/check_format.sh          (every tracked .h / .cpp / .cu)
#   scripts/check_format.sh --fix    (reformats them in place)
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.h' '*.cpp' '*.cu')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "$f: not formatted (scripts/check_format.sh --fix)"
    bad=1
  fi
done
exit $bad
