#!/usr/bin/env bash
# File and function lengths of the C++ sources (issue 27's before/after tables):
#   scripts/code_lengths.sh [DIR]     (default: the repository)
# Prints the 12 longest files and the 12 longest functions (Universal Ctags gives each
# function's first and last line), and how many functions pass 50, 100 and 200 lines.
set -euo pipefail
dir=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$dir"
mapfile -t files < <(find . -path ./build -prune -o -path './build-*' -prune -o -path ./third_party -prune -o \
  \( -name '*.cpp' -o -name '*.h' \) -print | sed 's|^\./||' | grep -v '^tests/' | sort)
echo "longest files (lines), of ${#files[@]} non-test sources:"
wc -l "${files[@]}" | grep -v ' total$' | sort -rn | head -12 | awk '{ printf "  %6d  %s\n", $1, $2 }'
ctags --languages=C++ --kinds-C++=f --fields=+ne -o - "${files[@]}" 2>/dev/null |
  awk -F'\t' '{ line = 0; end = 0
                for (i = 4; i <= NF; ++i) { if ($i ~ /^line:/) line = substr($i, 6); if ($i ~ /^end:/) end = substr($i, 5) }
                if (end > 0) printf "%d\t%s\t%s:%d\n", end - line + 1, $1, $2, line }' |
  sort -t$'\t' -k1,1rn > /tmp/code_lengths.$$
echo "longest functions (lines):"
head -12 /tmp/code_lengths.$$ | awk -F'\t' '{ printf "  %6d  %s  (%s)\n", $1, $2, $3 }'
awk -F'\t' '{ n++; if ($1 > 50) a++; if ($1 > 100) b++; if ($1 > 200) c++ }
            END { printf "functions: %d; over 50 lines: %d; over 100: %d; over 200: %d\n", n, a, b, c }' /tmp/code_lengths.$$
rm -f /tmp/code_lengths.$$
