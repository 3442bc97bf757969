#!/usr/bin/env bash
# Installs the Debian 12 packages servesim builds with, when they are missing. Run as root.
set -euo pipefail
packages=(g++ cmake ninja-build libboost-graph-dev libboost-program-options-dev libyaml-cpp-dev
          nlohmann-json3-dev libeigen3-dev doctest-dev zlib1g-dev)
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
