#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz) with clang in build-fuzz/ and runs each one for
# SECONDS (default 10) from its seeds: tests/fuzz/corpus/<target> plus the heads of the shipped
# inputs of its kind (scenarios, traces, measurement tables), copied to a scratch corpus so that
# the repository's files stay as they are. Prints per target the executions, the corpus it grew and the findings;
# exits 1 on any finding (a crash, a sanitizer report, a timeout, a memory blow-up), whose input
# is kept in build-fuzz/findings/<target>/. Without clang and its libFuzzer it says so and skips.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
if ! command -v clang++ >/dev/null 2>&1 || ! compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null; then
  echo "FUZZING SKIPPED: clang++ with libFuzzer is not installed (apt-get install clang libclang-rt-dev)"
  exit 0
fi
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g" \
  -DSERVESIM_FUZZ=ON -DSERVESIM_TESTS=OFF -DSERVESIM_MPI=OFF >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target servesim_fuzzers
failed=0
for target in scenario trace measurements serve_line; do
  work=$(mktemp -d)
  cp tests/fuzz/corpus/"$target"/* "$work"/
  case $target in
    scenario) find scenarios -name '*.yaml' -size -8k -exec cp -t "$work" {} + ;;
    trace) for f in workloads/traces/*.csv workloads/traces/*.jsonl; do head -n 20 "$f" >"$work/$(basename "$f")"; done ;;
    measurements)
      n=0
      while IFS= read -r f; do
        n=$((n + 1))
        zcat -f "$f" | head -n 5 >"$work/m$n.csv" || true
      done < <(find calibrate/data -name '*.csv' -o -name '*.csv.gz' | sort | head -n 40) ;;
  esac
  seeds=$(ls "$work" | wc -l)
  findings=build-fuzz/findings/$target
  mkdir -p "$findings"
  dict=()
  [ -f tests/fuzz/"$target".dict ] && dict=(-dict=tests/fuzz/"$target".dict)
  log=$(mktemp)
  # -timeout: an input that takes 20 s is a hang; -rss_limit_mb: one that takes 2.5 GB a blow-up.
  if ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      build-fuzz/fuzz_"$target" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2560 -max_len=65536 \
      -artifact_prefix="$findings"/ -print_final_stats=1 "${dict[@]}" "$work" >"$log" 2>&1; then
    status=ok
  else
    status=FINDING
    failed=1
    tail -n 60 "$log"
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  echo "fuzz_$target: ${runs:-?} executions in ${seconds} s, corpus $(ls "$work" | wc -l) inputs" \
       "(from $seeds seeds), $status"
  rm -rf "$work" "$log"
done
exit $failed
