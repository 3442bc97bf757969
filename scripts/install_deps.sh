#!/usr/bin/env bash
# Installs the Debian 12 packages servesim builds with, when they are missing. Run as root.
set -euo pipefail
# chromium: the HTML report test renders the report in it (and fails without it); python3 and
# python3-jsonschema: the Python client's test validates serve's answers against the schema;
# clang-format: the test script checks the sources' format (scripts/check_format.sh).
packages=(g++ cmake ninja-build libboost-graph-dev libboost-program-options-dev libyaml-cpp-dev
          nlohmann-json3-dev libeigen3-dev doctest-dev libpng-dev libopenmpi-dev openmpi-bin
          zlib1g-dev python3 python3-jsonschema chromium git clang-format)
# Optional: the fuzzing step (scripts/fuzz.sh) needs clang and its libFuzzer runtime, and skips,
# saying so, without them; scripts/check_tidy.sh needs clang-tidy.
optional=(clang libclang-rt-dev clang-tidy)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
for p in ${optional[@]+"${optional[@]}"}; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    echo "installing (optional): $p"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "$p" >/dev/null; } ||
      echo "warning: could not install $p; the tests that need it will say they were skipped"
  fi
done
