#!/usr/bin/env bash
# The one prepared script for a lent H200 (or any Hopper GPU): builds the collector with nvcc
# alone (the GPU image has the CUDA toolkit but not the project's other build dependencies),
# checks its kernels against the CPU, runs the sweep under a time budget, and leaves in OUT_DIR:
#   h200_collector.csv   the measurements (servesim.measurements/1; .partial if cut short)
#   self_test.txt        kernel checks       collector_log.txt   progress and skipped shapes
#   nvidia_smi_*.csv     GPU, driver, clocks, temperature and power before and after
# Usage: tools/gpu_collector/run_h200.sh [OUT_DIR]   (default: $OUT, else ./gpu_collector_out)
# Environment: MAX_SECONDS (sweep budget, default 420), QUICK=1 (a seconds-long smoke run).
# About 20 s to build, a few seconds of self-test, then the sweep (1,516 calls; about 3 minutes
# by the plan's own estimate of ~40 ms of timing and set-up per call).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-${OUT:-gpu_collector_out}}
mkdir -p "$out"
bin=$(mktemp -d)/gpu_collector

nvcc_path=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
cuda_lib=$(dirname "$(dirname "$nvcc_path")")/lib64
"$nvcc_path" -O3 -std=c++17 -arch=sm_90 -I. \
  tools/gpu_collector/collector.cu tools/gpu_collector/plan.cpp \
  calibrate/native_csv_writer.cpp calibrate/measurement.cpp \
  -lcublasLt -Xlinker -rpath -Xlinker "$cuda_lib" -o "$bin"

smi() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv >"$out/nvidia_smi_$1.csv" 2>&1 || true
}
smi before
"$bin" --self-test 2>&1 | tee "$out/self_test.txt"

driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1 || true)
args=(--out "$out/h200_collector.csv" --max-seconds "${MAX_SECONDS:-420}")
[ -n "$driver" ] && args+=(--driver "NVIDIA driver $driver")
[ "${QUICK:-0}" = 1 ] && args+=(--quick)
"$bin" "${args[@]}" 2>&1 | tee "$out/collector_log.txt"
smi after
