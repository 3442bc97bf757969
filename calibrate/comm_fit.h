// The collective constants of the chip-level communication model the serving model applies
// (sim/cluster/comm_cost.h: alpha + factor x bytes / (scale-up bandwidth x efficiency), factor
// 2 (n - 1) / n for a ring all-reduce, 1 for a point-to-point send), fitted to the measured
// communication tables through calibrate's comm readers (comm_measurements.h), and their error.
//
// The fit is the weighted least-squares line of fit.h (relative error) over the chip's NCCL
// all-reduce samples inside one scale-up domain, and over the serving engines' custom all-reduce
// samples (TensorRT-LLM's, up to 8 MiB) where the tables have them: those set the constants the
// profile applies, since vLLM, TensorRT-LLM and SGLang run their tensor-parallel all-reduces with
// such kernels inside a node (H100 SXM takes the H200 SXM measurement: same NVLink 4 fabric and
// SM). Each is cross-validated by holding out whole
// group sizes (every sample of 2, of 4, of 8 ranks in turn), and its error is reported per
// message size range, together with the same constants applied to point-to-point sends as a
// transfer check. One line cannot follow NCCL's two protocols (LL below ~64 KiB, Simple above):
// the size table shows where it misses. The topology-aware model (topologies/collectives.h, two
// protocol lines per tier, fitted by collective_check.h) is the finer one; its own error is in
// topologies/README.md.
// Ignored: collectives across scale-up domains (the chip-level model takes those from the chip's
// scale-out figures).
#pragma once

#include <string>
#include <vector>

#include "calibrate/cross_validation.h"
#include "models/chip_spec.h"
#include "sim/core/time.h"

namespace servesim::calibrate {

struct CollectiveFitResult {
  bool fitted = false;
  Duration latency;                 // collective_latency
  double bandwidth_efficiency = 0;  // collective_bandwidth
  ErrorReport errors;               // cells kind "all_reduce" / "p2p", format "nccl"
  std::vector<std::string> notes;
};

// The measured system whose tables describe `chip` ("h200_sxm" for h200-sxm, Vidur's "h100_dgx"
// and "a100_dgx", "gb200"), or "" when none does.
std::string comm_system_of(const std::string& chip);

// Reads the communication tables under `dir` (calibrate/data/comm layout) and fits the chip's
// constants. Throws InputError for unreadable tables; `fitted` is false when the chip has no
// in-domain all-reduce measurements.
CollectiveFitResult fit_chip_collectives(const std::string& dir, const models::ChipSpec& chip,
                                         std::size_t folds);

}  // namespace servesim::calibrate
