#!/usr/bin/env bash
# Fails on an include that reaches up (or sideways) across the libraries' layers: every
# `#include "folder/..."` in a library's folder must name that library's folder or one of the
# libraries it depends on (LAYERS, written by CMake as build/layers.txt: one line per library,
# "name folder visible-folder..."). The compiler enforces the same through each library's include
# view; this check says which file and line, and also covers headers no source includes.
#   scripts/check_layers.sh build/layers.txt
set -euo pipefail
layers=${1:?usage: check_layers.sh LAYERS}
cd "$(dirname "$0")/.."
status=0
# Every library folder, longest first, so that "sim/cluster" wins over a shorter prefix.
mapfile -t folders < <(awk '{print $2}' "$layers" | awk '{print length, $0}' | sort -rn | cut -d' ' -f2-)
owner() {  # the library folder a repository path belongs to, or nothing
  local f
  for f in "${folders[@]}"; do
    case "$1" in "$f"/*) echo "$f"; return;; esac
  done
}
while read -r name folder visible; do
  for file in "$folder"/*.h "$folder"/*.cpp "$folder"/*.cu; do
    [ -e "$file" ] || continue
    while IFS=: read -r line target; do
      to=$(owner "$target")
      if [ -z "$to" ]; then
        echo "$file:$line: includes \"$target\", which belongs to no library"
        status=1
      elif [[ " $visible " != *" $to "* ]]; then
        echo "$file:$line: $name ($folder) includes \"$target\" from $to, which is not below it (visible: $visible)"
        status=1
      fi
    done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*/' "$file" | sed -E 's/^([0-9]+):[^"]*"([^"]*)".*/\1:\2/')
  done
done < "$layers"
[ $status -eq 0 ] && echo "layers: every include of $(wc -l < "$layers") libraries points down"
exit $status
