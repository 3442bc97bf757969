#!/usr/bin/env bash
# How servesim's CPU time and memory grow with the cluster and with the traffic (issue 28): the
# quickstart scenario scaled at a fixed load per instance (6 requests/s each, 20 requests per
# instance) from 100 to 100,000 instances, and at 100 instances from 10,000 to 10,000,000 requests;
# servesim_bench_scaling prints each point and the fitted exponents.
#
#   scripts/bench_scaling.sh [--quick] [--counts] [--runs N]
#
# --quick stops both series a factor of 10 earlier (10,000 instances, 1,000,000 requests).
# --counts adds the stable measure, under valgrind at 1,000 and 10,000 instances (5 requests per
# instance): instructions per event, and data misses per event of a simulated 48 KiB L1 and a
# 1 MiB last level (the size of this machine's L2): what grows with the cluster when the
# instruction count does not. The per-event figures of a run include its fixed start-up (reading
# the scenario and its profiles: most of the 1,000-instance run's instructions), so the last line
# divides the growth from 1,000 to 10,000 instances by the events added: the marginal cost of an
# event at that size. BUILD (default build) picks the build folder.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
quick=0 counts=0 runs=3
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --counts) counts=1 ;;
    --runs) runs=$2; shift ;;
    *) echo "usage: scripts/bench_scaling.sh [--quick] [--counts] [--runs N]" >&2; exit 2 ;;
  esac
  shift
done
cmake --build "$build" --target servesim servesim_bench_scaling >/dev/null

scenario=scenarios/quickstart.yaml
if [ $quick = 1 ]; then
  instances=100,300,1000,3000,10000
  requests=10000,100000,1000000
else
  instances=100,300,1000,3000,10000,30000,100000
  requests=10000,100000,1000000,10000000
fi
"$build/servesim_bench_scaling" $scenario --instances $instances --per-instance 20 --runs "$runs" --once-above 10000
echo
"$build/servesim_bench_scaling" $scenario --requests $requests --fixed-instances 100 --runs "$runs" --once-above 1000000

if [ $counts = 1 ]; then
  echo
  echo "valgrind counts (5 requests per instance, 6 /s each):"
  printf '%10s %10s %14s %12s %16s\n' instances events instr/event L1d_miss/event LL1MiB_miss/event
  counted=()
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  for n in 1000 10000; do
    args=(run $scenario --set "deployment.pools[0].instances=$n" --set "workload.requests=$((5 * n))"
          --set "workload.arrivals.rate=$((6 * n)) /s" --reproducible --json "$work/report.json")
    valgrind --tool=cachegrind --cache-sim=yes --LL=1048576,8,64 --cachegrind-out-file="$work/cg" \
      "$build/servesim" "${args[@]}" 2>"$work/log"
    events=$(grep -o '"events": *[0-9]*' "$work/report.json" | grep -o '[0-9]*$')
    summary=$(grep '^summary:' "$work/cg")  # Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
    read -r _ ir _ _ _ d1r dlr _ d1w dlw <<<"$summary"
    awk -v n=$n -v e="$events" -v ir="$ir" -v d1=$((d1r + d1w)) -v dl=$((dlr + dlw)) \
      'BEGIN { printf "%10d %10d %14.0f %12.2f %16.2f\n", n, e, ir / e, d1 / e, dl / e }'
    counted+=("$events $ir $((d1r + d1w)) $((dlr + dlw))")
  done
  read -r e0 ir0 d10 dl0 <<<"${counted[0]}"
  read -r e1 ir1 d11 dl1 <<<"${counted[1]}"
  awk -v de=$((e1 - e0)) -v dir=$((ir1 - ir0)) -v dd1=$((d11 - d10)) -v ddl=$((dl1 - dl0)) \
    'BEGIN { printf "%10s %10d %14.0f %12.2f %16.2f\n", "1k->10k", de, dir / de, dd1 / de, ddl / de }'
fi
