// The collective constants of the chip-level communication model the serving model applies
// (sim/cluster/comm_cost.h), fitted to the measured communication tables through calibrate's comm
// readers (comm_measurements.h), and their error.
//
// All-reduce inside one scale-up domain: two lines, the cost their minimum
// (models::Efficiency::all_reduce_lines), each
//   base + 2 (n - 1) x per_step + factor x S / (scale-up bandwidth x efficiency),
// fitted by collective_check.h's two-line fitter (relative least squares, one line below and one
// above the best split). NCCL's lines are its two protocols (LL below ~64 KiB, Simple above), both
// rings (factor 2 (n - 1) / n). The serving engines' custom all-reduce (TensorRT-LLM's, up to
// 8 MiB) is a one-shot kernel for small messages (every rank reads each peer's whole buffer:
// factor n - 1) and a two-shot one (reduce-scatter + all-gather: the ring's factor) above; where
// the tables have it, it sets the lines the profile applies, since vLLM, TensorRT-LLM and SGLang
// run their tensor-parallel all-reduces with such kernels inside a node (H100 SXM takes the H200
// SXM measurement: same NVLink 4 fabric and SM). Each is cross-validated by holding out whole
// group sizes (every sample of 2, of 4, of 8 ranks in turn), and its error is reported per message
// size range.
//
// The other collectives (all-gather, reduce-scatter, all-to-all, p2p) keep one alpha-beta line
// (latency + factor x bytes / (bandwidth x efficiency), fit.h's weighted least squares over the
// same all-reduce samples: collective_latency / collective_bandwidth), checked against
// point-to-point sends as a transfer. The topology-aware model (topologies/collectives.h, two
// protocol lines per tier and collective) is the finer one; its own error is in
// topologies/README.md.
// Ignored: collectives across scale-up domains (the chip-level model takes those from the chip's
// scale-out figures), the engines' NCCL fallback above 8 MiB (the two-shot line extrapolates).
#pragma once

#include <string>
#include <vector>

#include "calibrate/cross_validation.h"
#include "core/time.h"
#include "models/chip_spec.h"

namespace servesim::calibrate {

struct CollectiveFitResult {
  bool fitted = false;
  Duration latency;                                                  // collective_latency
  double bandwidth_efficiency = 0;                                   // collective_bandwidth
  std::vector<models::Efficiency::CollectiveLine> all_reduce_lines;  // in-domain all-reduce
  ErrorReport errors;                                                // cells kind "all_reduce" / "p2p", format "nccl"
  std::vector<std::string> notes;
};

// The measured system whose tables describe `chip` ("h200_sxm" for h200-sxm, Vidur's "h100_dgx"
// and "a100_dgx", "gb200"), or "" when none does.
std::string comm_system_of(const std::string& chip);

// Reads the communication tables under `dir` (calibrate/data/comm layout) and fits the chip's
// constants. Throws InputError for unreadable tables; `fitted` is false when the chip has no
// in-domain all-reduce measurements.
CollectiveFitResult fit_chip_collectives(const std::string& dir, const models::ChipSpec& chip, std::size_t folds);
// The same from the chip's own tables given one by one (AIConfigurator's per-system comm folders):
// nccl_perf*.csv.gz (NCCL) and custom_allreduce_perf*.csv.gz (the engine's custom all-reduce
// kernel: TensorRT-LLM's, SGLang's or vLLM's; of the latter two only the CUDA-graph rows, the
// eager ones are host dispatch time), every sample taken as measured on `chip`.
CollectiveFitResult fit_chip_collectives(const std::vector<std::string>& tables, const models::ChipSpec& chip);

}  // namespace servesim::calibrate
